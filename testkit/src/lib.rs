//! Test and benchmark support shared by the kruise-rs families (a dev-dependency only):
//!
//! - [`sim`]: kruise-sim started with a family's CRDs, served and listable;
//! - [`cluster`]: the same, or a real API server (`KRUISE_TEST_KUBECONFIG`) with a namespace
//!   and simulated nodes per test, so an integration test runs on both;
//! - [`proxy`]: a counting proxy in front of a real API server, for processes under test;
//! - [`rbac`]: the chart's RBAC enforced on the controller under test (`KRUISE_TEST_AUTHORIZE=1`);
//! - [`eventually`]: a condition polled until a deadline, never a fixed sleep;
//! - [`http`]: HTTPS posts trusting one caBundle, AdmissionReviews, plain GETs, free ports;
//! - [`process`]: a binary started as one replica against the simulator, its RSS and CPU;
//! - [`requests`]: API writes counted by the simulator, per client;
//! - [`floor`]: the minimal writer, the floor a controller's rollout is compared with.
//! - [`bench`](mod@bench): what the benchmarks share (sizes, foreign pods, status waits, peak RSS).
//! - [`oracle`]: differential tests against OpenKruise's own Go functions.
//! - [`migration`]: an OpenKruise cluster loaded from a fixture, and what a takeover checks.
//!
//! The kubectl scenarios' shell library is beside this crate, `testkit/scenario-lib.sh`.

// Support code for tests: a failure panics the test that called it, with what was expected.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod admission;
pub mod bench;
pub mod cluster;
mod counting;
pub mod floor;
pub mod http;
pub mod migration;
pub mod oracle;
pub mod process;
pub mod proxy;
pub mod rbac;
pub mod requests;
pub mod sim;

use std::time::Duration;

pub use cluster::{
    ClusterOptions, TestCluster, cluster_with, cluster_with_crds, sidecarset_resource,
};
pub use http::{free_port, http_get, post_tls, review};
pub use process::{InProcess, Replica, spawn_replica};
pub use rbac::{agent_client, controller_client};
pub use sim::{events_about, sim_with_crds, wait_for_warning, warnings_about};

/// The default deadline of a wait.
pub const WAIT: Duration = Duration::from_secs(20);

/// Polls `check` every 50 ms until it returns Some, or panics after `deadline` naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = std::time::Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            start.elapsed() <= deadline,
            "timed out after {deadline:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Dry-run creates `object` until the answer (or refusal) passes `check`, and returns what
/// `check` made of it; panics after a minute naming `what`. A real kube-apiserver calls a
/// webhook configuration a moment after it is written (an informer of its own), so a test
/// that has seen a configuration published asks this before relying on it; kruise-sim calls
/// it at once. Webhooks without side effects answer dry-run requests as any other.
pub async fn dry_run_until<K, T>(
    api: &kube::Api<K>,
    object: &K,
    what: &str,
    check: impl Fn(Result<K, kube::Error>) -> Option<T>,
) -> T
where
    K: Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let dry_run = kube::api::PostParams {
        dry_run: true,
        ..kube::api::PostParams::default()
    };
    eventually(what, Duration::from_secs(60), || async {
        check(api.create(&dry_run, object).await)
    })
    .await
}

/// A pod `name` labelled `app=<app>`, with one `main` container (nginx).
pub fn app_pod(name: &str, app: &str) -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}}))
    .unwrap()
}
