//! Taking a SidecarSet over from OpenKruise: the cluster as kruise-manager leaves it
//! (`fixtures/openkruise/migration/sidecarset.json`: the SidecarSet `log-agent` as
//! OpenKruise's webhook stored it, with its hash annotations and status, its two
//! ControllerRevisions in `kruise-system`, and two Running pods its webhook injected, one
//! of them upgraded in place later by its controller) is loaded into kruise-sim (or the
//! real API server of `KRUISE_TEST_KUBECONFIG`), then kruise-rs's SidecarSet controller
//! starts. The pods and revisions go to the test's namespace, the controller's kruise
//! namespace (on a shared API server `kruise-system` may hold others' revisions). It must adopt all of it without a pod create,
//! delete or spec/metadata write, and still upgrade the sidecar in place afterwards.
//!
//! The fixture's computed values (defaults, both hash annotations, revision names and data,
//! the pods' hash annotations) are what OpenKruise v1.8.3's own code prints through
//! `testkit/oracles/sidecarset` for the sidecar
//! `log-agent` (`busybox:1.36`, revision 1, then `busybox:1.37`, revision 2, `sleep
//! infinity`, an emptyDir `log` mounted at `/var/log/app`) selecting `app: web`;
//! docs/migration.md. v1.8.3 stores SidecarSets as v1alpha1; the fixture is the same
//! object as v1beta1 (OpenKruise's storage version since, and kruise-rs's), whose fields
//! are the same for this spec.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kruise_runtime::{Metrics, RunOptions};
use kruise_sidecarset::api::v1beta1::SidecarSet;
use kruise_sidecarset::controller::{self, Settings};
use kruise_testkit::migration::{
    FixtureLayout, forbidden_writes_counted, identities, is_running_and_ready,
    load_openkruise_cluster,
};
use kruise_testkit::{WAIT, cluster_with_crds, eventually};
use kube::api::{Api, ApiResource, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const FIXTURE: &str = include_str!("fixtures/openkruise/migration/sidecarset.json");
/// OpenKruise's name for the current revision (Kubernetes' history hash of its data).
const OPENKRUISE_REVISION: &str = "log-agent-77c6d878cc";

/// Kinds nobody may write during the takeover, besides pods.
const UNTOUCHED: &[&str] = &["controllerrevisions"];

/// Loads the fixture: the SidecarSet with OpenKruise's status, its revisions owned by it,
/// the injected pods Running and Ready; pods (fixture: `default`) and revisions (fixture:
/// `kruise-system`) in the client's default namespace.
async fn load_fixture(client: &Client) -> Value {
    let namespace = client.default_namespace();
    let layout = FixtureLayout {
        workload: &ApiResource::erase::<SidecarSet>(&()),
        key: "sidecarSet",
        revisions_namespace: namespace,
    };
    let mut fixture = FIXTURE.to_string();
    for from in ["default", "kruise-system"] {
        fixture = fixture.replace(
            &format!(r#""namespace": "{from}""#),
            &format!(r#""namespace": "{namespace}""#),
        );
    }
    load_openkruise_cluster(client, &layout, &fixture).await
}

/// Successful reconciles of the SidecarSet controller so far.
fn reconciles(metrics: &Metrics) -> u64 {
    metrics
        .encode()
        .unwrap()
        .lines()
        .filter(|l| {
            l.starts_with("controller_runtime_reconcile_total{")
                && l.contains("controller=\"sidecarset\"")
                && l.contains("result=\"success\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|n| n as u64)
        .sum()
}

fn sidecar_image(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == "log-agent")
        .map(|c| c.image.clone())
}

#[tokio::test]
async fn takes_over_an_openkruise_sidecarset_without_touching_a_pod() {
    let (cluster, client) =
        cluster_with_crds(2, &[kruise_sidecarset::api::crd::crd().unwrap()]).await;
    let namespace = client.default_namespace();
    let fixture = load_fixture(&client).await;
    let before = identities(&client, namespace).await;
    let writes_before = forbidden_writes_counted(cluster.counters(), UNTOUCHED);
    let sets: Api<SidecarSet> = Api::all(client.clone());

    let shutdown = CancellationToken::new();
    let metrics = Metrics::new();
    let opts = RunOptions {
        name: controller::CONTROLLER_NAME.into(),
        concurrency: 2,
        metrics: metrics.clone(),
        shutdown: shutdown.clone(),
        ..RunOptions::default()
    };
    let task = tokio::spawn(controller::run(
        client.clone(),
        Settings::in_namespace(Some(namespace)),
        opts,
    ));
    // Settled: reconciled once, then once more after a metadata-only change.
    eventually("a first reconcile", WAIT, || async {
        (reconciles(&metrics) >= 1).then_some(())
    })
    .await;
    let first = reconciles(&metrics);
    sets.patch(
        "log-agent",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"migration.test/touched": "1"}}})),
    )
    .await
    .unwrap();
    eventually("a reconcile after the touch", WAIT, || async {
        (reconciles(&metrics) > first).then_some(())
    })
    .await;

    let status = sets.get("log-agent").await.unwrap().status.unwrap();
    assert_eq!(status.latest_revision, OPENKRUISE_REVISION);
    assert_eq!(
        (
            status.matched_pods,
            status.updated_pods,
            status.ready_pods,
            status.updated_ready_pods,
        ),
        (2, 2, 2, 2)
    );
    assert_eq!(status.observed_generation, 1);
    assert_eq!(
        forbidden_writes_counted(cluster.counters(), UNTOUCHED),
        writes_before,
        "the takeover wrote pods or revisions"
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
    assert_eq!(names, ["log-agent-6bf48cbb4d", OPENKRUISE_REVISION]);

    // A sidecar image change afterwards (hash annotations as the family's webhook writes
    // them) upgrades both pods in place: same uids, the sidecar restarted once, the app not.
    let mut containers = fixture["sidecarSet"]["spec"]["containers"].clone();
    containers[0]["image"] = json!("busybox:1.38");
    let typed: Vec<kruise_sidecarset::api::SidecarContainer> =
        serde_json::from_value(containers.clone()).unwrap();
    let mut annotations = BTreeMap::new();
    kruise_sidecarset::api::defaults::set_hash_annotations(&mut annotations, &typed, &[]).unwrap();
    sets.patch(
        "log-agent",
        &PatchParams::default(),
        &Patch::Merge(json!({
            "metadata": {"annotations": annotations},
            "spec": {"containers": containers},
        })),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    eventually("both sidecars on busybox:1.38 and Ready", WAIT, || async {
        let listed = pods.list(&ListParams::default()).await.ok()?;
        listed
            .items
            .iter()
            .all(|p| is_running_and_ready(p) && sidecar_image(p).as_deref() == Some("busybox:1.38"))
            .then_some(())
    })
    .await;
    let after = identities(&client, namespace).await;
    for (name, (uid, restarts)) in &before {
        let (uid_after, restarts_after) = after.get(name).unwrap();
        assert_eq!(uid_after, uid, "{name} kept");
        assert_eq!(restarts_after["log-agent"], restarts["log-agent"] + 1);
        assert_eq!(restarts_after["app"], restarts["app"]);
    }
    let writes = forbidden_writes_counted(cluster.counters(), UNTOUCHED);
    assert_eq!(
        writes.get("create pods/"),
        writes_before.get("create pods/")
    );
    assert_eq!(
        writes.get("delete pods/"),
        writes_before.get("delete pods/")
    );
    shutdown.cancel();
    task.await.unwrap();
    cluster.shutdown().await;
}
