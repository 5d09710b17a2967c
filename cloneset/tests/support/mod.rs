//! Test fixtures for the CloneSet controller (kruise-testkit's, plus the CloneSet's own): a
//! cluster with two nodes (kruise-sim, or the real API server of `KRUISE_TEST_KUBECONFIG`)
//! and the CRD installed, an in-process controller for the test's namespace that can be
//! stopped and restarted, and node cordoning to hold new pods unready.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_cloneset::api::v1beta1::CloneSet;
use kruise_cloneset::controller::{self, Settings};
use kruise_runtime::{Metrics, Readiness, RunOptions};
use kruise_sim::Sim;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt as _};
use serde_json::json;
use tokio_util::sync::CancellationToken;

pub use kruise_testkit::{TestCluster, WAIT, eventually};

/// A cluster with two nodes and the CloneSet CRD installed: kruise-sim, or the API server
/// of `KRUISE_TEST_KUBECONFIG`; the client's default namespace is the test's.
pub async fn cluster_with_crd() -> (TestCluster, Client) {
    kruise_testkit::cluster_with_crds(2, &[kruise_cloneset::api::crd::crd().unwrap()]).await
}

/// kruise-sim with two nodes and the CloneSet CRD installed, for the tests that need what
/// only the simulator has (fault injection, a client without retries): `sim_only_*`.
pub async fn sim_with_crd() -> (Sim, Client) {
    kruise_testkit::sim_with_crds(2, &[kruise_cloneset::api::crd::crd().unwrap()]).await
}

/// An in-process controller; [`RunningController::stop`] waits for in-flight reconciles.
pub struct RunningController {
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    /// Its metrics registry.
    pub metrics: Metrics,
}

impl RunningController {
    /// Starts a controller for the client's default namespace (the test's).
    pub fn start(client: &Client) -> Self {
        Self::start_with(
            client,
            Settings {
                namespace: Some(client.default_namespace().into()),
                ..Settings::default()
            },
        )
    }

    /// Starts a controller with these settings.
    pub fn start_with(client: &Client, settings: Settings) -> Self {
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
        let client = kruise_testkit::controller_client(client, "cloneset");
        let m = metrics.clone();
        let task = tokio::spawn(async move { controller::run(client, settings, &m, opts).await });
        Self {
            shutdown,
            task,
            metrics,
        }
    }

    /// Stops it and waits until it has.
    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .unwrap()
            .unwrap();
    }
}

/// A CloneSet `name` (in the namespace it is created in) with `replicas` pods running `image`, selected by `app: name`.
pub fn cloneset(name: &str, replicas: i32, image: &str, extra_spec: serde_json::Value) -> CloneSet {
    let mut spec = json!({
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "main", "image": image}]}
        }
    });
    merge(&mut spec, &extra_spec);
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "CloneSet",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap()
}

fn merge(into: &mut serde_json::Value, from: &serde_json::Value) {
    match (into.as_object_mut(), from.as_object()) {
        (Some(a), Some(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(slot) if slot.is_object() && v.is_object() => merge(slot, v),
                    _ => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        _ => *into = from.clone(),
    }
}

/// The pods of the client's default namespace whose name starts with `<name>-`, sorted by
/// name.
pub async fn pods_of(client: &Client, name: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::default_namespaced(client.clone());
    let mut pods: Vec<Pod> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.name_any().starts_with(&format!("{name}-")))
        .collect();
    pods.sort_by_key(|p| p.name_any());
    pods
}

/// Cordons (`false`) or uncordons (`true`) every simulated node, as `kubectl cordon`
/// does: new pods stay Pending (never ready), running pods keep running.
pub async fn set_schedulable(client: &Client, on: bool) {
    let nodes: Api<Node> = Api::all(client.clone());
    for node in nodes.list(&ListParams::default()).await.unwrap().items {
        nodes
            .patch(
                &node.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"unschedulable": !on}})),
            )
            .await
            .unwrap();
    }
}
