//! Taking a DaemonSet over from OpenKruise: the cluster as kruise-manager leaves it
//! (`fixtures/openkruise/daemonset.json`: the DaemonSet as OpenKruise's webhook stored it,
//! its ControllerRevision named after Kubernetes' `ComputeHash` of the template with the data
//! OpenKruise's `getPatch` writes, and one Running pod per node carrying that hash) is loaded
//! into kruise-sim or the real API server of `KRUISE_TEST_KUBECONFIG` (in the test's
//! namespace), then kruise-rs's DaemonSet controller starts. It must adopt all of it
//! without a pod create, delete or spec/metadata write, nor any revision write, because it
//! recognises OpenKruise's revision by its data (as upstream's history code does) and uses
//! that revision's hash; a later image change still rolls out in place.
//!
//! The fixture's computed values (defaults, the hash `7989c9cddf`, the revision, the pods)
//! are what `testkit/oracles/daemonset` (OpenKruise
//! v1.8.3's and Kubernetes v1.30's own code) prints for the template `main` image
//! `nginx:1.25-alpine`, InPlaceIfPossible at maxUnavailable 100%, nodes `sim-node-0..2`;
//! pod names and the condition time are the fixture's. OpenKruise v1.8 stores DaemonSets as
//! `v1alpha1`; kruise-rs reads them as `v1beta1`, so the test stores the object through
//! this crate's own conversion, as the `/convert` webhook would serve it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kruise_admission::conversion::VersionMapping as _;
use kruise_daemonset::api::v1beta1::DaemonSet;
use kruise_daemonset::controller::{self, Settings};
use kruise_daemonset::conversion::DaemonSetConverter;
use kruise_runtime::{Metrics, Readiness, RunOptions};
use kruise_testkit::migration::{self, FixtureLayout};
use kruise_testkit::{TestCluster, WAIT, eventually};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const FIXTURE: &str = include_str!("fixtures/openkruise/daemonset.json");
/// Kubernetes' `ComputeHash` of the fixture's template, as OpenKruise named the revision and
/// labelled the pods (printed by `testkit/oracles/daemonset`).
const OPENKRUISE_HASH: &str = "7989c9cddf";
const OPENKRUISE_REVISION: &str = "agent-7989c9cddf";

/// The controller in-process for the client's namespace, with its metrics to count reconciles.
struct Running {
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    metrics: Metrics,
}

impl Running {
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
        let task = tokio::spawn(async move { controller::run(client, settings, opts).await });
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
                l.starts_with("controller_runtime_reconcile_total{")
                    && l.contains(&format!("controller=\"{}\"", controller::CONTROLLER_NAME))
                    && l.contains("result=\"success\"")
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

/// Loads the fixture through `kruise_testkit::migration`: the DaemonSet converted to the
/// stored version first, as this crate's `/convert` would serve it; every object in the
/// client's namespace.
async fn load_openkruise_cluster(client: &Client) -> Value {
    let namespace = client.default_namespace();
    let mut fixture: Value = serde_json::from_str(FIXTURE).unwrap();
    fixture["daemonSet"]["metadata"]["namespace"] = json!(namespace);
    fixture["revision"]["metadata"]["namespace"] = json!(namespace);
    for pod in fixture["pods"].as_array_mut().unwrap() {
        pod["metadata"]["namespace"] = json!(namespace);
    }
    let crd = kruise_daemonset::api::crd::crd().unwrap();
    let stored = kruise_testkit::sim::stored_resource(&crd);
    let daemonset = fixture["daemonSet"].as_object_mut().unwrap();
    DaemonSetConverter.spoke_to_hub(daemonset).unwrap();
    daemonset.insert("apiVersion".into(), json!(stored.api_version));
    fixture["revisions"] = json!([fixture["revision"].clone()]);
    let layout = FixtureLayout {
        workload: &stored,
        key: "daemonSet",
        revisions_namespace: namespace,
    };
    migration::load_openkruise_cluster(client, &layout, &fixture.to_string()).await
}

/// The writes the takeover must not make: pods, and every ControllerRevision write.
fn forbidden_writes(cluster: &TestCluster) -> BTreeMap<String, u64> {
    migration::forbidden_writes_counted(cluster.counters(), &["controllerrevisions"])
}

/// Starts the controller and waits until it has settled: reconciled, then reconciled again
/// after a metadata-only change, so every requeue of the first look ran.
async fn start_and_settle(client: &Client) -> Running {
    let running = Running::start(client);
    eventually("a first reconcile", WAIT, || async {
        (running.reconciles() >= 1).then_some(())
    })
    .await;
    let first = running.reconciles();
    Api::<DaemonSet>::default_namespaced(client.clone())
        .patch(
            "agent",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"migration.test/touched": "1"}}})),
        )
        .await
        .unwrap();
    eventually("a reconcile after the touch", WAIT, || async {
        (running.reconciles() > first).then_some(())
    })
    .await;
    running
}

/// The names of the ControllerRevisions in the client's namespace.
async fn revision_names(client: &Client) -> Vec<String> {
    Api::<ControllerRevision>::default_namespaced(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|r| r.name_any())
        .collect()
}

/// A controller whose ControllerRevision cache fills after its DaemonSet cache (the list
/// answers late, as it can on a real API server) still adopts OpenKruise's revision: it
/// reconciles only once every cache it reads holds the cluster's state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_only_takes_over_when_the_revision_list_answers_late() {
    let (cluster, client) =
        kruise_testkit::cluster_with_crds(3, &[kruise_daemonset::api::crd::crd().unwrap()]).await;
    let sim = cluster
        .sim()
        .expect("the list latency is injected by kruise-sim");
    load_openkruise_cluster(&client).await;
    let writes_before = forbidden_writes(&cluster);
    sim.faults().add(
        kruise_sim::FaultRule::new()
            .verb("list")
            .resource("controllerrevisions")
            .latency(Duration::from_secs(1))
            .times(1),
    );
    let running = start_and_settle(&client).await;
    assert_eq!(
        forbidden_writes(&cluster),
        writes_before,
        "the takeover wrote pods or revisions"
    );
    assert_eq!(revision_names(&client).await, [OPENKRUISE_REVISION]);
    running.stop().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takes_over_an_openkruise_daemonset_without_touching_a_pod() {
    let (cluster, client) =
        kruise_testkit::cluster_with_crds(3, &[kruise_daemonset::api::crd::crd().unwrap()]).await;
    let namespace = client.default_namespace();
    let fixture = load_openkruise_cluster(&client).await;
    let before = migration::identities(&client, namespace).await;
    let writes_before = forbidden_writes(&cluster);
    let daemonsets: Api<DaemonSet> = Api::default_namespaced(client.clone());

    let running = start_and_settle(&client).await;
    assert_eq!(
        forbidden_writes(&cluster),
        writes_before,
        "the takeover wrote pods or revisions"
    );
    assert_eq!(
        migration::identities(&client, namespace).await,
        before,
        "pods replaced or restarted"
    );
    let names = revision_names(&client).await;
    assert_eq!(
        names,
        [OPENKRUISE_REVISION],
        "OpenKruise's revision is in use"
    );
    let status = daemonsets.get("agent").await.unwrap().status.unwrap();
    assert_eq!(status.update_revision, OPENKRUISE_HASH);
    assert_eq!(
        (
            status.desired_number_scheduled,
            status.current_number_scheduled,
            status.updated_number_scheduled,
            status.number_available,
        ),
        (3, 3, 3, 3)
    );

    // An image change afterwards rolls out in place as usual: same pods on the same nodes,
    // the container restarted once, labelled with kruise-rs's new revision.
    let mut container = fixture["daemonSet"]["spec"]["template"]["spec"]["containers"][0].clone();
    container["image"] = json!("nginx:1.27-alpine");
    daemonsets
        .patch(
            "agent",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [container]}}}})),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    eventually("every pod on nginx:1.27-alpine and Ready", WAIT, || async {
        let listed = pods.list(&ListParams::default()).await.ok()?;
        listed
            .items
            .iter()
            .all(|p| {
                migration::is_running_and_ready(p)
                    && p.status
                        .as_ref()
                        .and_then(|s| s.container_statuses.as_ref())
                        .is_some_and(|c| c.iter().all(|c| c.image == "nginx:1.27-alpine"))
            })
            .then_some(())
    })
    .await;
    let after = migration::identities(&client, namespace).await;
    let expected: BTreeMap<_, _> = before
        .into_iter()
        .map(|(name, (uid, restarts))| {
            let restarted = restarts.into_iter().map(|(c, n)| (c, n + 1)).collect();
            (name, (uid, restarted))
        })
        .collect();
    assert_eq!(after, expected, "every pod updated in place");
    let status = daemonsets.get("agent").await.unwrap().status.unwrap();
    let new_hash = status.update_revision;
    assert_ne!(new_hash, OPENKRUISE_HASH);
    for pod in pods.list(&ListParams::default()).await.unwrap() {
        assert_eq!(
            pod.labels().get("controller-revision-hash"),
            Some(&new_hash)
        );
    }
    let writes = forbidden_writes(&cluster);
    for what in ["create pods/", "delete pods/"] {
        assert_eq!(writes.get(what), writes_before.get(what), "{what}");
    }
    running.stop().await;
    cluster.shutdown().await;
}
