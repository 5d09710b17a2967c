//! Taking a workload over from OpenKruise: a fixture of the cluster as kruise-manager leaves
//! it (the workload as OpenKruise's webhook stored it, with its status, its
//! ControllerRevisions, claims and pods, each with the owner references OpenKruise wrote)
//! loaded into kruise-sim, and what the takeover tests check afterwards: the writes nobody
//! may make, each pod's uid and restarts. The CloneSet, SidecarSet and StatefulSet
//! migration tests share these.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kruise_sim::{Counters, Sim};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};

use crate::{WAIT, eventually};

/// Writes the takeover must not make, by anyone, by `verb resource/subresource`: pod
/// creates, deletes, updates and patches (the `status` subresource excluded: the kubelet
/// writes it), and every write on the kinds in `untouched` (`controllerrevisions`,
/// `persistentvolumeclaims`).
pub fn forbidden_writes(sim: &Sim, untouched: &[&str]) -> BTreeMap<String, u64> {
    forbidden_writes_counted(sim.counters(), untouched)
}

/// [`forbidden_writes`] from any request counters, such as a
/// [`TestCluster`](crate::TestCluster)'s on a real API server (which counts the test's
/// clients only).
pub fn forbidden_writes_counted(counters: &Counters, untouched: &[&str]) -> BTreeMap<String, u64> {
    let mut writes = BTreeMap::new();
    for (key, n) in counters.snapshot() {
        let write = matches!(
            key.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        );
        let watched = match key.resource.as_str() {
            "pods" => key.subresource.is_empty(),
            other => untouched.contains(&other),
        };
        if write && watched {
            *writes
                .entry(format!("{} {}/{}", key.verb, key.resource, key.subresource))
                .or_default() += n;
        }
    }
    writes
}

/// A pod's uid and its containers' restart counts by name.
pub type Identity = (String, BTreeMap<String, i32>);

/// Each pod in `namespace` by name: its uid and containers' restart counts.
pub async fn identities(client: &Client, namespace: &str) -> BTreeMap<String, Identity> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    pods.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| {
            let restarts = p
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .map(|c| {
                    c.iter()
                        .map(|c| (c.name.clone(), c.restart_count))
                        .collect()
                })
                .unwrap_or_default();
            (p.name_any(), (p.uid().unwrap(), restarts))
        })
        .collect()
}

/// Whether `pod` is Running with its Ready condition True.
pub fn is_running_and_ready(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    status.and_then(|s| s.phase.as_deref()) == Some("Running")
        && status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Where a fixture's objects go: the workload's kind and the fixture key holding it, the
/// namespace of its ControllerRevisions.
pub struct FixtureLayout<'a> {
    /// The workload's stored resource (`kruise_testkit::sim::stored_resource`, or erased).
    pub workload: &'a ApiResource,
    /// The fixture's key for the workload (`cloneset`, `statefulset`, `sidecarSet`).
    pub key: &'a str,
    /// The namespace of the workload's ControllerRevisions.
    pub revisions_namespace: &'a str,
}

/// `object` with every owner reference's uid set to `uid` (the fixture's uids are
/// OpenKruise's; the simulator assigns its own).
fn owned_by(mut object: Value, uid: &str) -> Value {
    if let Some(owners) = object["metadata"]["ownerReferences"].as_array_mut() {
        for owner in owners {
            owner["uid"] = json!(uid);
        }
    }
    object
}

/// Loads `fixture` (JSON: the workload under `layout.key`, then optional `revisions`,
/// `persistentVolumeClaims` and `pods` arrays) as kruise-manager leaves it: the workload
/// created and its status written as OpenKruise wrote it, revisions, claims and pods
/// created with their owner references pointing at it, each pod's status written through
/// the status subresource (as OpenKruise's in-place engine wrote its conditions); then
/// waits until every pod is Running and Ready. Returns the parsed fixture.
pub async fn load_openkruise_cluster(
    client: &Client,
    layout: &FixtureLayout<'_>,
    fixture: &str,
) -> Value {
    let fixture: Value = serde_json::from_str(fixture).unwrap();
    let mut workload = fixture[layout.key].clone();
    let status = workload.as_object_mut().unwrap().remove("status");
    workload["metadata"].as_object_mut().unwrap().remove("uid");
    let name = workload["metadata"]["name"].as_str().unwrap().to_string();
    let namespace = workload["metadata"]["namespace"].as_str();
    let workloads: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, layout.workload),
        None => Api::all_with(client.clone(), layout.workload),
    };
    let created = workloads
        .create(
            &PostParams::default(),
            &serde_json::from_value(workload).unwrap(),
        )
        .await
        .unwrap();
    let uid = created.uid().unwrap();
    if let Some(status) = status {
        workloads
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .unwrap();
    }

    let revisions: Api<ControllerRevision> =
        Api::namespaced(client.clone(), layout.revisions_namespace);
    for revision in fixture["revisions"].as_array().into_iter().flatten() {
        let revision = serde_json::from_value(owned_by(revision.clone(), &uid)).unwrap();
        revisions
            .create(&PostParams::default(), &revision)
            .await
            .unwrap();
    }
    for claim in fixture["persistentVolumeClaims"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let claim: PersistentVolumeClaim =
            serde_json::from_value(owned_by(claim.clone(), &uid)).unwrap();
        let claims: Api<PersistentVolumeClaim> =
            Api::namespaced(client.clone(), &claim.namespace().unwrap());
        claims.create(&PostParams::default(), &claim).await.unwrap();
    }
    let mut pod_namespaces = Vec::new();
    let mut expected = 0;
    for pod in fixture["pods"].as_array().into_iter().flatten() {
        let mut pod = owned_by(pod.clone(), &uid);
        // Status is not taken on create: what OpenKruise wrote there goes through the
        // status subresource, as it wrote it.
        let status = pod.as_object_mut().unwrap().remove("status");
        let pod: Pod = serde_json::from_value(pod).unwrap();
        let namespace = pod.namespace().unwrap();
        let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
        pods.create(&PostParams::default(), &pod).await.unwrap();
        if let Some(status) = status {
            pods.patch_status(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(json!({ "status": status })),
            )
            .await
            .unwrap();
        }
        if !pod_namespaces.contains(&namespace) {
            pod_namespaces.push(namespace);
        }
        expected += 1;
    }
    eventually("the OpenKruise pods Running and Ready", WAIT, || async {
        let mut ready = 0;
        for namespace in &pod_namespaces {
            let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
            let listed = pods.list(&ListParams::default()).await.ok()?;
            if !listed.items.iter().all(is_running_and_ready) {
                return None;
            }
            ready += listed.items.len();
        }
        (ready == expected).then_some(())
    })
    .await;
    fixture
}
