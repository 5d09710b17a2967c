//! BroadcastJob figures against kruise-sim (N simulated nodes, simulated kubelet), with
//! pods owned by others beside the job's: the controller's RSS idle and its peak while a
//! BroadcastJob runs one pod on every node, the time to `completed` against its lower
//! bound (one pod's pull, start and run time) and against a minimal writer (the same pods
//! created straight from a client, waited for until they all succeed: the floor this
//! simulator and machine set for any controller), and the controller's writes per node.
//!
//! `cargo bench -p kruise-broadcastjob --bench broadcastjob`. Environment:
//! `BROADCASTJOB_NODES` (N, default 1000), `BROADCASTJOB_OTHER_PODS` (pods of no job,
//! default 10000), `BROADCASTJOB_RUN` (each pod's run time, default "2s").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kruise_broadcastjob::api::crd::crds;
use kruise_broadcastjob::api::v1beta1::BroadcastJob;
use kruise_testkit::bench::{PeakRss, create_foreign_pods, env_or, start_controller};
use kruise_testkit::floor;
use kruise_testkit::process::{cpu_secs, rss, settled_rss};
use kruise_testkit::requests::Writes;
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::{Value, json};

// The simulator runs in this process, with the allocator `kruise-sim up` has.
#[global_allocator]
static ALLOCATOR: kruise_runtime::Allocator = kruise_runtime::Allocator;

const BIN: &str = env!("CARGO_BIN_EXE_kruise-broadcastjob");
const AGENT: &str = "kruise-broadcastjob/";

/// The job's pod template: one container that exits 0 after `run`.
fn template(run: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": "bench"},
                     "annotations": {"sim.kruise.io/exit-after": run}},
        "spec": {"restartPolicy": "Never",
                 "containers": [{"name": "work", "image": "busybox:1.36",
                                 "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}
    })
}

/// Waits until the scheduler has tried each of the `want` pods of no job (in `others`) and
/// marked it Unschedulable, so the job starts against a settled simulator rather than
/// the scheduler's first pass over them.
async fn wait_foreign_pods_unschedulable(client: &kube::Client, want: usize, limit: Duration) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "others");
    let start = Instant::now();
    loop {
        let list = pods.list(&ListParams::default()).await.unwrap();
        let tried = list
            .items
            .iter()
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c.type_ == "PodScheduled" && c.status == "False")
                    })
            })
            .count();
        if tried >= want {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "{tried} of {want} foreign pods marked Unschedulable"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until `want` pods in `namespace` have succeeded.
async fn wait_all_succeeded(client: &kube::Client, namespace: &str, want: usize, limit: Duration) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let start = Instant::now();
    loop {
        let list = pods.list(&ListParams::default()).await.unwrap();
        let succeeded = list
            .items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded"))
            .count();
        if succeeded >= want {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "{succeeded} of {want} pods succeeded"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The same pods created by a client, one per node (`sim-node-<i>`) through the scheduler
/// (the node affinity the controller sets), 32 requests in flight; the time until all
/// succeeded.
async fn minimal_writer(client: &kube::Client, nodes: usize, run: &str) -> Duration {
    let started = Instant::now();
    let template = template(run);
    floor::create_pods_in(client, "minimal-writer", nodes as i64, |i| {
        let mut pod = template.clone();
        pod["metadata"]["name"] = json!(format!("floor-{i}"));
        pod["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [format!("sim-node-{i}")]}]}]}}});
        pod
    })
    .await;
    wait_all_succeeded(client, "minimal-writer", nodes, Duration::from_secs(600)).await;
    started.elapsed()
}

#[tokio::main]
async fn main() {
    let nodes: usize = env_or("BROADCASTJOB_NODES", 1000);
    let others: i64 = env_or("BROADCASTJOB_OTHER_PODS", 10_000);
    let run: String = env_or("BROADCASTJOB_RUN", "2s".to_string());
    let (sim, client) = kruise_testkit::sim_with_crds(nodes, &crds().unwrap()).await;
    let timings = sim.shared().config.kubelet;
    if others > 0 {
        let started = Instant::now();
        create_foreign_pods(&client, others).await;
        println!(
            "{others} pods of no job created in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        wait_foreign_pods_unschedulable(&client, others as usize, Duration::from_secs(600)).await;
        println!(
            "... and all marked Unschedulable by the scheduler after {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    let kubeconfig = sim.kubeconfig_path().unwrap();
    let controller = start_controller(BIN, &kubeconfig).await;
    let pid = controller.child.id();
    println!(
        "controller RSS idle ({others} foreign pods): {}",
        settled_rss(pid).await
    );
    println!(
        "nodes: {nodes}; each pod runs {run}; kubelet pull/start {:?}/{:?}",
        timings.pull_delay, timings.start_delay
    );

    let jobs: Api<BroadcastJob> = Api::namespaced(client.clone(), "default");
    let job: BroadcastJob = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "BroadcastJob",
        "metadata": {"name": "bench"},
        "spec": {"template": template(&run)}
    }))
    .unwrap();
    let before = Writes::of(&sim, AGENT);
    let cpu_before = (cpu_secs(&pid.to_string()), cpu_secs("self"));
    let peak = PeakRss::watch(pid);
    let started = Instant::now();
    jobs.create(&PostParams::default(), &job).await.unwrap();
    loop {
        let status = jobs.get("bench").await.unwrap().status.unwrap_or_default();
        if status.phase == "completed" {
            assert_eq!(
                (status.desired, status.succeeded, status.failed),
                (nodes as i32, nodes as i32, 0),
                "the job completed on every node"
            );
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(900),
            "the job never completed: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = started.elapsed();
    let writes = Writes::of(&sim, AGENT).since(before);
    println!(
        "  CPU during the job: controller {:.2} s, simulator (API server, kubelet, scheduler) {:.2} s",
        cpu_secs(&pid.to_string()) - cpu_before.0,
        cpu_secs("self") - cpu_before.1
    );
    println!(
        "controller RSS during the job: peak {:.1} MiB; after it {}",
        peak.peak_mib(),
        rss(pid)
    );
    let bound = timings.pull_delay
        + timings.start_delay
        + kruise_sim::cluster::parse_duration(&run).unwrap_or_default();
    println!(
        "BroadcastJob on {nodes} nodes to completed: {:.2} s (lower bound, one pod's pull, start and run: {:.2} s; {:.2}x)",
        took.as_secs_f64(),
        bound.as_secs_f64(),
        took.as_secs_f64() / bound.as_secs_f64()
    );
    println!(
        "writes per node: {:.2} pod writes (creates), {:.2} events, {} other writes (job status)",
        writes.pods as f64 / nodes as f64,
        writes.events as f64 / nodes as f64,
        writes.other
    );
    let floor = minimal_writer(&client, nodes, &run).await;
    println!(
        "the same pods by a minimal writer (1 create per node, waited for until all succeeded): {:.2} s; the controller took {:.2}x that",
        floor.as_secs_f64(),
        took.as_secs_f64() / floor.as_secs_f64()
    );
    drop(controller);
    sim.shutdown().await;
}
