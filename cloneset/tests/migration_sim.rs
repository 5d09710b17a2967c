//! Taking a CloneSet over from OpenKruise: the cluster as kruise-manager leaves it
//! (`fixtures/openkruise/migration/cloneset.json`: the CloneSet as OpenKruise's webhook
//! stored it, its two ControllerRevisions with OpenKruise's names and data, three Running
//! pods, one of them updated in place earlier, and their PVCs) is loaded into kruise-sim
//! (or the real API server of `KRUISE_TEST_KUBECONFIG`, in the test's namespace), then
//! kruise-rs's CloneSet controller starts. It must adopt all of it without a pod
//! create, delete or spec/metadata write, and still update in place afterwards; also
//! mid-rollout (`cloneset-partition.json`), where the pod a partition holds stays put.
//!
//! The fixture's computed values (template defaults, revision names, hashes and data, the
//! claim-template hash) are what `testkit/oracles` prints for the
//! template `main` image `nginx:1.25-alpine` (revision 1) and `nginx:alpine` (revision 2)
//! with a `data` volumeMount and a 1Gi `data` claim template; docs/migration.md.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kruise_cloneset::api::v1beta1::CloneSet;
use kruise_testkit::migration::{
    FixtureLayout, Identity, forbidden_writes_counted, identities, is_running_and_ready,
    load_openkruise_cluster,
};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};
use support::{RunningController, TestCluster, WAIT, cluster_with_crd, eventually};

/// Every pod at the update revision.
const ROLLED_OUT: &str = include_str!("fixtures/openkruise/migration/cloneset.json");
/// The same CloneSet mid-rollout: partition 1 holds one pod at the old revision.
const PARTITIONED: &str = include_str!("fixtures/openkruise/migration/cloneset-partition.json");
/// The revisions OpenKruise named for the old and the current template (Kubernetes'
/// history hash of OpenKruise's revision data, printed by
/// `testkit/oracles`).
const OPENKRUISE_OLD_REVISION: &str = "sample-664965d66d";
const OPENKRUISE_REVISION: &str = "sample-b947c44dc";

/// Kinds nobody may write during the takeover, besides pods.
const UNTOUCHED: &[&str] = &["controllerrevisions", "persistentvolumeclaims"];

/// Loads the fixture as kruise-manager leaves it, in the client's default namespace (the
/// fixture's is `default`): objects created, statuses written as OpenKruise and the kubelet
/// wrote them, every pod Running and Ready.
async fn load_fixture(client: &Client, fixture: &str) -> Value {
    let crd = kruise_cloneset::api::crd::crd().unwrap();
    let namespace = client.default_namespace();
    let layout = FixtureLayout {
        workload: &kruise_testkit::sim::stored_resource(&crd),
        key: "cloneset",
        revisions_namespace: namespace,
    };
    let fixture = fixture.replace(
        r#""namespace": "default""#,
        &format!(r#""namespace": "{namespace}""#),
    );
    load_openkruise_cluster(client, &layout, &fixture).await
}

/// Successful reconciles of the CloneSet controller so far.
fn reconciles(controller: &RunningController) -> u64 {
    let metrics = controller.metrics.encode().unwrap();
    metrics
        .lines()
        .filter(|l| {
            l.starts_with("controller_runtime_reconcile_total{")
                && l.contains("controller=\"cloneset\"")
                && l.contains("result=\"success\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|n| n as u64)
        .sum()
}

/// What a takeover test holds once the controller has settled on the loaded fixture.
struct TakenOver {
    cluster: TestCluster,
    client: Client,
    fixture: Value,
    controller: RunningController,
    /// Pod identities and forbidden-write counts from before the controller started.
    before: BTreeMap<String, Identity>,
    writes_before: BTreeMap<String, u64>,
}

/// Loads `fixture`, starts the controller and waits until it has settled (reconciled, then
/// reconciled again after a metadata-only change, so every requeue of its first look ran);
/// asserts it wrote no pod, revision or claim, every pod is the same and not restarted, and
/// OpenKruise's two revisions are the only ones.
async fn take_over(fixture: &str) -> TakenOver {
    let (cluster, client) = cluster_with_crd().await;
    let fixture = load_fixture(&client, fixture).await;
    let namespace = client.default_namespace();
    let before = identities(&client, namespace).await;
    let writes_before = forbidden_writes_counted(cluster.counters(), UNTOUCHED);
    let clonesets: Api<CloneSet> = Api::default_namespaced(client.clone());

    let controller = RunningController::start(&client);
    eventually("a first reconcile", WAIT, || async {
        (reconciles(&controller) >= 1).then_some(())
    })
    .await;
    let first = reconciles(&controller);
    clonesets
        .patch(
            "sample",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"migration.test/touched": "1"}}})),
        )
        .await
        .unwrap();
    eventually("a reconcile after the touch", WAIT, || async {
        (reconciles(&controller) > first).then_some(())
    })
    .await;

    assert_eq!(
        forbidden_writes_counted(cluster.counters(), UNTOUCHED),
        writes_before,
        "the takeover wrote pods, revisions or claims"
    );
    assert_eq!(
        identities(&client, namespace).await,
        before,
        "pods replaced or restarted"
    );
    let revisions: Api<ControllerRevision> = Api::default_namespaced(client.clone());
    let mut names: Vec<String> = revisions
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|r| r.name_any())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [OPENKRUISE_OLD_REVISION, OPENKRUISE_REVISION],
        "OpenKruise's revisions are the ones in use"
    );
    TakenOver {
        cluster,
        client,
        fixture,
        controller,
        before,
        writes_before,
    }
}

/// Waits until every pod runs `image` and is Ready; asserts they are the pods of `before`
/// (same uids), those named in `restarted` with one more restart, the others with none.
async fn wait_in_place(
    client: &Client,
    image: &str,
    before: &BTreeMap<String, Identity>,
    restarted: &[&str],
) {
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    eventually(&format!("every pod on {image} and Ready"), WAIT, || async {
        let listed = pods.list(&ListParams::default()).await.ok()?;
        listed
            .items
            .iter()
            .all(|p| {
                is_running_and_ready(p)
                    && p.status
                        .as_ref()
                        .and_then(|s| s.container_statuses.as_ref())
                        .is_some_and(|c| c.iter().all(|c| c.image == image))
            })
            .then_some(())
    })
    .await;
    let after = identities(client, client.default_namespace()).await;
    assert_eq!(after.len(), before.len());
    for (name, (uid, restarts)) in before {
        let mut expected = restarts.clone();
        if restarted.contains(&name.as_str()) {
            *expected.entry("main".to_string()).or_default() += 1;
        }
        assert_eq!(
            after.get(name),
            Some(&(uid.clone(), expected)),
            "{name} updated in place"
        );
    }
}

/// Asserts no pod was created or deleted since `before`.
fn assert_no_pod_created_or_deleted(cluster: &TestCluster, before: &BTreeMap<String, u64>) {
    let writes = forbidden_writes_counted(cluster.counters(), UNTOUCHED);
    for what in ["create pods/", "delete pods/"] {
        assert_eq!(writes.get(what), before.get(what), "{what}");
    }
}

#[tokio::test]
async fn takes_over_an_openkruise_cloneset_without_touching_a_pod() {
    let TakenOver {
        cluster,
        client,
        fixture,
        controller,
        before,
        writes_before,
    } = take_over(ROLLED_OUT).await;
    let clonesets: Api<CloneSet> = Api::default_namespaced(client.clone());
    let status = clonesets.get("sample").await.unwrap().status.unwrap();
    assert_eq!(status.observed_generation, 1);
    assert_eq!(
        (
            status.replicas,
            status.ready_replicas,
            status.available_replicas,
            status.updated_replicas,
            status.updated_ready_replicas,
        ),
        (3, 3, 3, 3, 3)
    );
    assert_eq!(status.update_revision, OPENKRUISE_REVISION);
    assert_eq!(status.current_revision, OPENKRUISE_REVISION);

    // A template change afterwards rolls out in place as usual: same pods, same uids, the
    // main container restarted once.
    let mut container = fixture["cloneset"]["spec"]["template"]["spec"]["containers"][0].clone();
    container["image"] = json!("nginx:1.27-alpine");
    clonesets
        .patch(
            "sample",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [container]}}}})),
        )
        .await
        .unwrap();
    let all: Vec<&str> = before.keys().map(String::as_str).collect();
    wait_in_place(&client, "nginx:1.27-alpine", &before, &all).await;
    assert_no_pod_created_or_deleted(&cluster, &writes_before);
    controller.stop().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn takes_over_an_openkruise_cloneset_mid_rollout_and_keeps_the_partition() {
    let TakenOver {
        cluster,
        client,
        controller,
        before,
        writes_before,
        ..
    } = take_over(PARTITIONED).await;
    let clonesets: Api<CloneSet> = Api::default_namespaced(client.clone());
    let status = clonesets.get("sample").await.unwrap().status.unwrap();
    assert_eq!(
        (
            status.replicas,
            status.ready_replicas,
            status.updated_replicas,
            status.updated_ready_replicas,
        ),
        (3, 3, 2, 2)
    );
    assert_eq!(status.update_revision, OPENKRUISE_REVISION);
    assert_eq!(status.current_revision, OPENKRUISE_OLD_REVISION);

    // Releasing the partition finishes the rollout OpenKruise started: the pod it held is
    // updated in place, the two updated ones are left alone.
    clonesets
        .patch(
            "sample",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}})),
        )
        .await
        .unwrap();
    wait_in_place(&client, "nginx:alpine", &before, &["sample-w7m2n"]).await;
    eventually("the rollout complete", WAIT, || async {
        let status = clonesets.get("sample").await.ok()?.status?;
        (status.updated_ready_replicas == 3 && status.current_revision == OPENKRUISE_REVISION)
            .then_some(())
    })
    .await;
    assert_no_pod_created_or_deleted(&cluster, &writes_before);
    controller.stop().await;
    cluster.shutdown().await;
}
