//! Fixtures for the BroadcastJob and AdvancedCronJob controllers: a cluster with the CRDs
//! installed (kruise-sim, or the real API server of `KRUISE_TEST_KUBECONFIG`), both
//! controllers in-process for the test's namespace (stoppable, restartable) on a clock the
//! test sets.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kruise_broadcastjob::api::v1beta1::{AdvancedCronJob, BroadcastJob};
use kruise_broadcastjob::controller::{self, Settings};
use kruise_broadcastjob::plan::broadcastjob::PodBinding;
use kruise_runtime::{Metrics, Readiness, RunOptions};
use kruise_sim::Sim;
use kube::Client;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub use kruise_testkit::{WAIT, eventually};

/// A cluster with `nodes` nodes and both CRDs installed: kruise-sim, or the API server of
/// `KRUISE_TEST_KUBECONFIG`; the client's default namespace is the test's.
pub async fn cluster_with_crds(nodes: usize) -> (kruise_testkit::TestCluster, Client) {
    kruise_testkit::cluster_with_crds(nodes, &kruise_broadcastjob::api::crd::crds().unwrap()).await
}

/// kruise-sim with `nodes` nodes and both CRDs installed, for the `sim_only_*` tests.
pub async fn sim_with_crds(nodes: usize) -> (Sim, Client) {
    kruise_testkit::sim_with_crds(nodes, &kruise_broadcastjob::api::crd::crds().unwrap()).await
}

/// A clock the test moves.
#[derive(Clone)]
pub struct TestClock(Arc<Mutex<Timestamp>>);

impl TestClock {
    /// At `t`.
    pub fn at(t: Timestamp) -> Self {
        Self(Arc::new(Mutex::new(t)))
    }

    /// Now.
    pub fn now(&self) -> Timestamp {
        *self.0.lock().unwrap()
    }

    /// Moves to `t`.
    pub fn set(&self, t: Timestamp) {
        *self.0.lock().unwrap() = t;
    }
}

/// Both controllers in-process; [`Controllers::stop`] waits for in-flight reconciles.
pub struct Controllers {
    shutdown: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Their metrics registry.
    pub metrics: Metrics,
}

impl Controllers {
    /// Both controllers for the client's default namespace on the real clock.
    pub fn start(client: &Client) -> Self {
        Self::start_with(client, None)
    }

    /// Both controllers for the client's default namespace, on `clock` when given (then looking at their
    /// schedules every 100 ms, so a moved clock is seen at once).
    pub fn start_with(client: &Client, clock: Option<&TestClock>) -> Self {
        Self::start_binding(client, clock, PodBinding::Scheduler)
    }

    /// Both controllers for the client's default namespace, binding BroadcastJob pods by `binding`.
    pub fn start_binding(client: &Client, clock: Option<&TestClock>, binding: PodBinding) -> Self {
        let mut settings = Settings {
            namespace: Some(client.default_namespace().into()),
            pod_binding: binding,
            ..Settings::default()
        };
        if let Some(clock) = clock {
            let clock = clock.clone();
            settings.clock = Arc::new(move || clock.now());
            settings.max_requeue = Duration::from_millis(100);
        }
        let shutdown = CancellationToken::new();
        let metrics = Metrics::new();
        let client = kruise_testkit::controller_client(client, "broadcastjob");
        let opts = |name: &str| RunOptions {
            name: name.into(),
            concurrency: 3,
            metrics: metrics.clone(),
            readiness: Readiness::default(),
            shutdown: shutdown.clone(),
            leadership: Default::default(),
        };
        let bcj = {
            let (client, settings, opts) = (
                client.clone(),
                settings.clone(),
                opts(controller::BROADCASTJOB_CONTROLLER),
            );
            tokio::spawn(async move { controller::broadcastjob::run(client, settings, opts).await })
        };
        let acj = {
            let (client, opts) = (client.clone(), opts(controller::ADVANCEDCRONJOB_CONTROLLER));
            tokio::spawn(async move { controller::cron::run(client, settings, opts).await })
        };
        Self {
            shutdown,
            tasks: vec![bcj, acj],
            metrics,
        }
    }

    /// Reconciles of AdvancedCronJobs so far (successful ones).
    pub fn cron_reconciles(&self) -> u64 {
        self.metrics
            .reconcile_total
            .get_or_create(&kruise_runtime::metrics::ResultLabel {
                controller: controller::ADVANCEDCRONJOB_CONTROLLER.into(),
                result: "success".into(),
            })
            .get()
    }

    /// Stops both and waits until they have.
    pub async fn stop(self) {
        self.shutdown.cancel();
        for task in self.tasks {
            tokio::time::timeout(Duration::from_secs(30), task)
                .await
                .unwrap()
                .unwrap();
        }
    }
}

/// A container that exits after `exit_after` with `code` (the simulated kubelet's annotations).
pub fn job_template(exit_after: &str, code: i32) -> Value {
    json!({
        "metadata": {"annotations": {
            "sim.kruise.io/exit-after": exit_after,
            "sim.kruise.io/exit-code": code.to_string(),
        }},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "work", "image": "busybox:1.36"}]},
    })
}

/// A BroadcastJob `name` (in the namespace it is created in).
pub fn broadcastjob(name: &str, spec: Value) -> BroadcastJob {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "BroadcastJob",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap()
}

/// An AdvancedCronJob `name` (in the namespace it is created in).
pub fn advancedcronjob(name: &str, spec: Value) -> AdvancedCronJob {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "AdvancedCronJob",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap()
}

/// The job's pods (by its name label).
pub async fn pods_of(client: &Client, job: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::default_namespaced(client.clone());
    api.list(&ListParams::default().labels(&format!("broadcastjob-name={job}")))
        .await
        .unwrap()
        .items
}

/// The BroadcastJob `name`, if it exists.
pub async fn get_job(client: &Client, name: &str) -> Option<BroadcastJob> {
    Api::<BroadcastJob>::default_namespaced(client.clone())
        .get_opt(name)
        .await
        .unwrap()
}
