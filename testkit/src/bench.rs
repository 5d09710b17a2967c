//! What the families' benchmarks (`<family>/benches/`) share: sizes from the environment,
//! the foreign pods a controller must not cache, a workload scaled and its status awaited,
//! the controller started in its own process, its writes, and its peak RSS.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::json;

use crate::process::vm_rss_kib;
use crate::requests::{self, Writes};
use crate::{Replica, floor, free_port};

/// `name` from the environment, parsed; `default` when unset or unparsable.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `count` pods of no workload in namespace `others`, Pending on a node selector no node
/// has: they cost the simulated kubelet nothing, and a controller that cached pods
/// cluster-wide would hold them all. They carry no workload label (a StatefulSet's
/// `statefulset.kubernetes.io/pod-name`, say), so no family's pod watch selects them.
pub async fn create_foreign_pods(client: &kube::Client, count: i64) {
    floor::create_pods_in(client, "others", count, |i| {
        json!({
            "metadata": {"name": format!("other-{i}"), "labels": {"app": "other"}},
            "spec": {"nodeSelector": {"bench": "nowhere"},
                     "containers": [{"name": "app", "image": "nginx:1.25"}]}
        })
    })
    .await;
}

/// Sets `spec.replicas` of workload `name`.
pub async fn scale(api: &Api<DynamicObject>, name: &str, replicas: i64) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": replicas}})),
    )
    .await
    .unwrap();
}

/// Waits until `status.<field>` of workload `name` is `want` for its current generation;
/// the time it took. Panics with the status after `limit`.
pub async fn wait_status(
    api: &Api<DynamicObject>,
    name: &str,
    field: &str,
    want: i64,
    limit: Duration,
) -> Duration {
    let start = Instant::now();
    loop {
        let object = api.get(name).await.unwrap();
        let generation = object.metadata.generation.map(|g| json!(g));
        if object.data["status"][field].as_i64() == Some(want)
            && Some(&object.data["status"]["observedGeneration"]) == generation.as_ref()
        {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "status.{field} never reached {want}: {}",
            object.data["status"]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts a family binary as one replica against `kubeconfig` and waits until it is ready
/// (caches synced).
pub async fn start_controller(bin: &str, kubeconfig: &std::path::Path) -> Replica {
    let controller = crate::spawn_replica(bin, kubeconfig, free_port(), &[], &[]);
    controller.wait_ready(Duration::from_secs(60)).await;
    controller
}

/// The writes of the client whose user agent starts with `agent` so far; when the
/// environment variable `detail_var` is set, its pod requests by verb, subresource and
/// status code are printed too.
pub fn controller_writes(sim: &kruise_sim::Sim, agent: &str, detail_var: &str) -> Writes {
    if std::env::var_os(detail_var).is_some() {
        for line in requests::pod_request_lines(sim, agent) {
            println!("  {line}");
        }
    }
    Writes::of(sim, agent)
}

/// A process's VmRSS sampled every 100 ms until [`PeakRss::peak_mib`]: the highest seen.
pub struct PeakRss {
    peak: Arc<AtomicI64>,
    task: tokio::task::JoinHandle<()>,
}

impl PeakRss {
    pub fn watch(pid: u32) -> PeakRss {
        let peak = Arc::new(AtomicI64::new(vm_rss_kib(pid)));
        let sampled = peak.clone();
        let task = tokio::spawn(async move {
            loop {
                sampled.fetch_max(vm_rss_kib(pid), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        PeakRss { peak, task }
    }

    pub fn peak_mib(self) -> f64 {
        self.task.abort();
        self.peak.load(Ordering::Relaxed) as f64 / 1024.0
    }
}
