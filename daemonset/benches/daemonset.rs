//! Advanced DaemonSet figures against kruise-sim (N simulated nodes, simulated kubelet, a
//! scheduler), with pods owned by others beside the DaemonSet's, measured as the CloneSet
//! and StatefulSet benchmarks measure theirs: the time until a pod is Ready on every node,
//! an `InPlaceIfPossible` image rollout at maxUnavailable 100% against its lower bound (one
//! kubelet restart) and against the same rollout done by a minimal writer on pods of its
//! own (`kruise_testkit::floor`, measured in the same run), the controller's API writes per
//! pod for create, in-place update and delete (events counted apart), and its RSS idle, at
//! N nodes and, in a second simulator, at LARGE nodes, each with the foreign pods.
//!
//! `cargo bench -p kruise-daemonset --bench daemonset`. Environment: `DAEMONSET_NODES` (N,
//! default 1000), `DAEMONSET_NODES_LARGE` (default 5000; 0 skips that step),
//! `DAEMONSET_OTHER_PODS` (pods of no DaemonSet, default 10000),
//! `DAEMONSET_BENCH_DETAIL=1` (the controller's pod requests by verb, subresource and status
//! code), `DAEMONSET_BENCH_EXEC=<wrapper>` (start the controller through a wrapper such as
//! a heap profiler, which gets the binary's arguments).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use kruise_testkit::bench::{controller_writes, create_foreign_pods, env_or, start_controller};
use kruise_testkit::floor;
use kruise_testkit::process::{cpu_secs, rss, settled_rss};
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

// The simulator runs in this process, with the allocator `kruise-sim up` has.
#[global_allocator]
static ALLOCATOR: kruise_runtime::Allocator = kruise_runtime::Allocator;

const BIN: &str = env!("CARGO_BIN_EXE_kruise-daemonset");
const AGENT: &str = "kruise-daemonset/";
const DETAIL: &str = "DAEMONSET_BENCH_DETAIL";

/// The DaemonSet: `InPlaceIfPossible` at maxUnavailable 100%, its pod at `image`.
fn daemonset(image: &str) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet",
        "metadata": {"name": "bench"},
        "spec": {
            "selector": {"matchLabels": {"app": "bench"}},
            "updateStrategy": {"rollingUpdate": {
                "rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": "100%"}},
            "template": {"metadata": {"labels": {"app": "bench"}},
                         "spec": {"containers": [{"name": "app", "image": image,
                             "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}}
        }
    })
}

/// Waits until the DaemonSet's status, for its current generation, has every `(field,
/// value)` of `want`; the time it took. Panics with the status after `limit`.
async fn wait_status(api: &Api<DynamicObject>, want: &[(&str, i64)], limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let object = api.get("bench").await.unwrap();
        let status = &object.data["status"];
        let current = object.metadata.generation.map(|g| json!(g)).as_ref()
            == Some(&status["observedGeneration"]);
        if current
            && want
                .iter()
                .all(|(field, value)| status[*field].as_i64().unwrap_or(0) == *value)
        {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "the status never reached {want:?}: {status}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A simulator with `nodes` nodes, the DaemonSet CRD and `others` foreign pods.
async fn cluster(nodes: usize, others: i64) -> (kruise_sim::Sim, kube::Client, Api<DynamicObject>) {
    let crd = kruise_daemonset::api::crd::crd().unwrap();
    let (sim, client) = kruise_testkit::sim_with_crds(nodes, std::slice::from_ref(&crd)).await;
    let started = Instant::now();
    create_foreign_pods(&client, others).await;
    println!(
        "{nodes} nodes; {others} pods of no DaemonSet created in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let ar = kruise_testkit::sim::stored_resource(&crd);
    let api = Api::namespaced_with(client.clone(), "default", &ar);
    (sim, client, api)
}

/// Creates the DaemonSet and waits until a pod is Ready on each of `nodes` nodes.
async fn place(api: &Api<DynamicObject>, nodes: i64) -> Duration {
    let object = serde_json::from_value(daemonset("nginx:1.25")).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
    wait_status(
        api,
        &[("desiredNumberScheduled", nodes), ("numberReady", nodes)],
        Duration::from_secs(1200),
    )
    .await
}

#[tokio::main]
async fn main() {
    let nodes: usize = env_or("DAEMONSET_NODES", 1000);
    let large: usize = env_or("DAEMONSET_NODES_LARGE", 5000);
    let others: i64 = env_or("DAEMONSET_OTHER_PODS", 10_000);
    let n = nodes as i64;
    let bin = std::env::var("DAEMONSET_BENCH_EXEC").unwrap_or_else(|_| BIN.to_string());

    let (sim, client, api) = cluster(nodes, others).await;
    let timings = sim.shared().config.kubelet;
    println!(
        "kubelet pull/start/ready {:?}/{:?}/{:?}",
        timings.pull_delay, timings.start_delay, timings.ready_delay
    );
    let kubeconfig = sim.kubeconfig_path().unwrap();
    let controller = start_controller(&bin, &kubeconfig).await;
    let pid = controller.child.id();
    println!(
        "controller RSS idle ({nodes} nodes, {others} foreign pods): {}",
        settled_rss(pid).await
    );

    let before = controller_writes(&sim, AGENT, DETAIL);
    let took = place(&api, n).await;
    let after = controller_writes(&sim, AGENT, DETAIL);
    println!(
        "a pod Ready on every one of {nodes} nodes: {:.1} s",
        took.as_secs_f64()
    );
    println!("{}", after.since(before).per_pod("create", n));
    println!(
        "controller RSS with {nodes} nodes and {nodes} owned pods: {}",
        settled_rss(pid).await
    );

    let before = controller_writes(&sim, AGENT, DETAIL);
    let cpu_before = (cpu_secs(&pid.to_string()), cpu_secs("self"));
    api.patch(
        "bench",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": daemonset("nginx:1.26")["spec"]["template"]}})),
    )
    .await
    .unwrap();
    let took = wait_status(
        &api,
        &[("updatedNumberScheduled", n), ("numberReady", n)],
        Duration::from_secs(1200),
    )
    .await;
    let after = controller_writes(&sim, AGENT, DETAIL);
    println!(
        "  CPU during the rollout: controller {:.2} s, simulator (API server, kubelet, scheduler) {:.2} s",
        cpu_secs(&pid.to_string()) - cpu_before.0,
        cpu_secs("self") - cpu_before.1
    );
    let bound = timings.pull_delay + timings.start_delay + timings.ready_delay;
    println!(
        "in-place rollout on {nodes} nodes at maxUnavailable 100%: {:.2} s (lower bound, one kubelet restart: {:.2} s; {:.1}x)",
        took.as_secs_f64(),
        bound.as_secs_f64(),
        took.as_secs_f64() / bound.as_secs_f64()
    );
    println!("{}", after.since(before).per_pod("in-place update", n));
    let minimal = floor::minimal_writer_rollout(&client, n).await;
    println!(
        "the same rollout by a minimal writer (3 writes per pod, nothing else): {:.2} s; the controller took {:.2}x that (target <= 1.25x)",
        minimal.as_secs_f64(),
        took.as_secs_f64() / minimal.as_secs_f64()
    );
    println!("controller RSS after the rollout: {}", rss(pid));

    // No node matches the selector any more: every pod is deleted.
    let before = controller_writes(&sim, AGENT, DETAIL);
    api.patch(
        "bench",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"spec": {"template": {"spec": {"nodeSelector": {"bench": "nowhere"}}}}}),
        ),
    )
    .await
    .unwrap();
    wait_status(
        &api,
        &[("desiredNumberScheduled", 0), ("numberMisscheduled", 0)],
        Duration::from_secs(1200),
    )
    .await;
    let after = controller_writes(&sim, AGENT, DETAIL);
    println!("{}", after.since(before).per_pod("delete", n));
    drop(controller);
    sim.shutdown().await;

    if large > 0 {
        let (sim, _client, api) = cluster(large, others).await;
        let kubeconfig = sim.kubeconfig_path().unwrap();
        let controller = start_controller(&bin, &kubeconfig).await;
        let pid = controller.child.id();
        println!(
            "controller RSS idle ({large} nodes, {others} foreign pods): {}",
            settled_rss(pid).await
        );
        let took = place(&api, large as i64).await;
        println!(
            "a pod Ready on every one of {large} nodes: {:.1} s",
            took.as_secs_f64()
        );
        println!(
            "controller RSS with {large} nodes and {large} owned pods: {} (target <= 48 MiB)",
            settled_rss(pid).await
        );
        drop(controller);
        let controller = start_controller(&bin, &kubeconfig).await;
        println!(
            "controller RSS with {large} nodes and {large} owned pods, restarted: {}",
            settled_rss(controller.child.id()).await
        );
        drop(controller);
        sim.shutdown().await;
    }
}
