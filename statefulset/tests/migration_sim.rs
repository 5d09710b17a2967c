//! Taking an Advanced StatefulSet over from OpenKruise: the cluster as kruise-manager leaves
//! it (`fixtures/openkruise/migration/statefulset.json`: the set `sample` as OpenKruise's
//! webhook stored it, with its status; its two ControllerRevisions with OpenKruise's names,
//! labels and data; three Running pods `sample-0..2` with `controller-revision-hash` = the
//! full revision name, two of them updated in place earlier (their
//! `apps.kruise.io/inplace-update-state`); their claims `data-sample-<ordinal>`) is loaded
//! into kruise-sim (or the real API server of `KRUISE_TEST_KUBECONFIG`, in the test's
//! namespace), then kruise-rs's controller starts. It must adopt all of it without a
//! pod create, delete or spec/metadata write, nor any write on a revision or claim, and
//! still update in place afterwards.
//!
//! The fixture's computed values (the webhook's defaults, revision names, hash labels and
//! data) are what OpenKruise v1.8.3's own code prints through
//! `testkit/oracles/statefulset` for the template `main`
//! image `nginx:1.25-alpine` (revision 1) and `nginx:alpine` (revision 2) with a `data`
//! volumeMount, the `InPlaceUpdateReady` readiness gate, `InPlaceIfPossible` and a 1Gi
//! `data` claim template; the pods are shaped as its controller creates them
//! (`newVersionedStatefulSetPod`: identity labels, hostname, subdomain, the claim volume,
//! lifecycle state `Normal`); docs/migration.md.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kruise_runtime::{Metrics, Readiness, RunOptions};
use kruise_statefulset::api::v1beta1::StatefulSet;
use kruise_statefulset::controller::{self, Settings};
use kruise_testkit::migration::{
    FixtureLayout, Identity, forbidden_writes_counted, identities, is_running_and_ready,
    load_openkruise_cluster,
};
use kruise_testkit::{WAIT, eventually};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt as _};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const FIXTURE: &str = include_str!("fixtures/openkruise/migration/statefulset.json");
/// OpenKruise's names for the first and the current template's revisions (Kubernetes'
/// history hash of OpenKruise's revision data with collisionCount 0, printed by
/// `testkit/oracles/statefulset`).
const OPENKRUISE_OLD_REVISION: &str = "sample-68c4c98c9c";
const OPENKRUISE_REVISION: &str = "sample-5f9b7bc7fd";
/// Kinds nobody may write during the takeover, besides pods.
const UNTOUCHED: &[&str] = &["controllerrevisions", "persistentvolumeclaims"];

/// The controller in-process, watching the client's namespace, with its metrics.
struct RunningController {
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    metrics: Metrics,
}

impl RunningController {
    fn start(client: &Client) -> Self {
        let shutdown = CancellationToken::new();
        let metrics = Metrics::new();
        let opts = RunOptions {
            name: controller::CONTROLLER_NAME.into(),
            concurrency: 3,
            metrics: metrics.clone(),
            readiness: Readiness::default(),
            shutdown: shutdown.clone(),
            leadership: Default::default(),
        };
        let settings = Settings {
            namespace: Some(client.default_namespace().into()),
            ..Settings::default()
        };
        let client = client.clone();
        let run_metrics = metrics.clone();
        let task = tokio::spawn(async move {
            controller::run(client, settings, &run_metrics, opts).await;
        });
        Self {
            shutdown,
            task,
            metrics,
        }
    }

    /// Successful reconciles so far.
    fn reconciles(&self) -> u64 {
        self.metrics
            .encode()
            .unwrap()
            .lines()
            .filter(|l| {
                l.starts_with("controller_runtime_reconcile_total{") && l.contains("success")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .map(|n| n as u64)
            .sum()
    }

    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .unwrap()
            .unwrap();
    }
}

/// Each claim's uid by name (its status is the simulated binder's to write).
async fn claims(client: &Client) -> BTreeMap<String, String> {
    let api: Api<PersistentVolumeClaim> = Api::default_namespaced(client.clone());
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| (c.name_any(), c.uid().unwrap()))
        .collect()
}

/// Waits until every pod runs `image` and is Ready; asserts they are the pods of `before`
/// (same uids), each with one more restart of `main`.
async fn wait_in_place(client: &Client, image: &str, before: &BTreeMap<String, Identity>) {
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
        let (uid_after, restarts_after) = &after[name];
        assert_eq!(uid_after, uid, "{name} kept its uid");
        assert_eq!(
            restarts_after["main"],
            restarts["main"] + 1,
            "{name} restarted in place once"
        );
    }
}

#[tokio::test]
async fn takes_over_an_openkruise_statefulset_without_touching_a_pod_or_claim() {
    let crd = kruise_statefulset::api::crd::crd().unwrap();
    let (cluster, client) = kruise_testkit::cluster_with_crds(2, std::slice::from_ref(&crd)).await;
    let namespace = client.default_namespace();
    let layout = FixtureLayout {
        workload: &kruise_testkit::sim::stored_resource(&crd),
        key: "statefulset",
        revisions_namespace: namespace,
    };
    // The fixture's namespace is `default`; the test's may be another.
    let in_namespace = FIXTURE.replace(
        r#""namespace": "default""#,
        &format!(r#""namespace": "{namespace}""#),
    );
    let fixture = load_openkruise_cluster(&client, &layout, &in_namespace).await;
    let before = identities(&client, namespace).await;
    let claims_before = claims(&client).await;
    let writes_before = forbidden_writes_counted(cluster.counters(), UNTOUCHED);
    let sets: Api<StatefulSet> = Api::default_namespaced(client.clone());

    // Settled: a reconcile, then another after a metadata-only change, so every requeue of
    // its first look ran.
    let controller = RunningController::start(&client);
    eventually("a first reconcile", WAIT, || async {
        (controller.reconciles() >= 1).then_some(())
    })
    .await;
    let first = controller.reconciles();
    sets.patch(
        "sample",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"migration.test/touched": "1"}}})),
    )
    .await
    .unwrap();
    eventually("a reconcile after the touch", WAIT, || async {
        (controller.reconciles() > first).then_some(())
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
    assert_eq!(claims(&client).await, claims_before, "claims replaced");
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
        [OPENKRUISE_REVISION, OPENKRUISE_OLD_REVISION],
        "OpenKruise's revisions are the ones in use"
    );
    let status = sets.get("sample").await.unwrap().status.unwrap();
    assert_eq!(
        (
            status.replicas,
            status.ready_replicas,
            status.current_replicas,
            status.updated_replicas,
            status.updated_ready_replicas,
        ),
        (3, 3, 3, 3, 3)
    );
    assert_eq!(status.update_revision, OPENKRUISE_REVISION);
    assert_eq!(status.current_revision, OPENKRUISE_REVISION);

    // An image change afterwards rolls out in place as usual: same pods, same uids, `main`
    // restarted once, the claims untouched.
    let mut container = fixture["statefulset"]["spec"]["template"]["spec"]["containers"][0].clone();
    container["image"] = json!("nginx:1.27-alpine");
    sets.patch(
        "sample",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [container]}}}})),
    )
    .await
    .unwrap();
    wait_in_place(&client, "nginx:1.27-alpine", &before).await;
    let writes = forbidden_writes_counted(cluster.counters(), UNTOUCHED);
    for what in [
        "create pods/",
        "delete pods/",
        "create persistentvolumeclaims/",
        "patch persistentvolumeclaims/",
        "update persistentvolumeclaims/",
        "delete persistentvolumeclaims/",
    ] {
        assert_eq!(writes.get(what), writes_before.get(what), "{what}");
    }
    assert_eq!(claims(&client).await, claims_before, "claims replaced");
    controller.stop().await;
    cluster.shutdown().await;
}
