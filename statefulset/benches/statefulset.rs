//! Advanced StatefulSet figures against kruise-sim (100 nodes, simulated kubelet), with pods
//! owned by others beside the set's, measured as CloneSet's benchmark measures them: time
//! to scale a `Parallel` set 0 -> N ready pods, an in-place rollout of N pods at
//! maxUnavailable 100% against its lower bound (the kubelet's restart time) and against the
//! same rollout done by a minimal writer on pods of its own (the floor this simulator and
//! machine set for any controller, `kruise_testkit::floor`), the controller's API writes per
//! pod for create, in-place update and delete (events counted apart), and its RSS at N and
//! at LARGE owned pods.
//!
//! `cargo bench -p kruise-statefulset --bench statefulset`. Environment: `STATEFULSET_PODS`
//! (N, default 1000), `STATEFULSET_PODS_LARGE` (default 10000; 0 skips that step),
//! `STATEFULSET_OTHER_PODS` (pods of no StatefulSet, default 10000),
//! `STATEFULSET_BENCH_DETAIL=1` (the controller's pod requests by verb, subresource and
//! status code), `STATEFULSET_BENCH_EXEC=<wrapper>` (start the controller through a wrapper
//! such as a heap profiler, which gets the binary's arguments).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use kruise_testkit::bench::{
    controller_writes, create_foreign_pods, env_or, scale, start_controller, wait_status,
};
use kruise_testkit::process::{cpu_secs, rss, settled_rss};
use kruise_testkit::{Replica, floor};
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

// The simulator runs in this process, with the allocator `kruise-sim up` has.
#[global_allocator]
static ALLOCATOR: kruise_runtime::Allocator = kruise_runtime::Allocator;

const BIN: &str = env!("CARGO_BIN_EXE_kruise-statefulset");
const AGENT: &str = "kruise-statefulset/";

/// The pod template at `image` (the `InPlaceUpdateReady` gate in-place updates require).
fn template(image: &str) -> serde_json::Value {
    json!({"metadata": {"labels": {"app": "bench"}},
           "spec": {"readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
                    "containers": [{"name": "app", "image": image,
                                    "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}})
}

#[tokio::main]
async fn main() {
    let n = env_or("STATEFULSET_PODS", 1000);
    let large = env_or("STATEFULSET_PODS_LARGE", 10_000);
    let others = env_or("STATEFULSET_OTHER_PODS", 10_000);
    let crd = kruise_statefulset::api::crd::crd().unwrap();
    let (sim, client) = kruise_testkit::sim_with_crds(100, std::slice::from_ref(&crd)).await;
    let timings = sim.shared().config.kubelet;
    let started = Instant::now();
    create_foreign_pods(&client, others).await;
    println!(
        "{others} pods of no StatefulSet created in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let kubeconfig = sim.kubeconfig_path().unwrap();
    let bin = std::env::var("STATEFULSET_BENCH_EXEC").unwrap_or_else(|_| BIN.to_string());
    let mut controller = start_controller(&bin, &kubeconfig).await;
    let controller_rss = |c: &Replica| rss(c.child.id());
    println!(
        "controller RSS with no owned pods: {}",
        controller_rss(&controller)
    );
    let ar = kruise_testkit::sim::stored_resource(&crd);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let set: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
        "metadata": {"name": "bench"},
        "spec": {"replicas": n, "serviceName": "bench", "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": {"app": "bench"}},
                 "template": template("nginx:1.25")}
    }))
    .unwrap();
    println!(
        "pods: {n} on 100 simulated nodes; kubelet pull/start/ready {:?}/{:?}/{:?}",
        timings.pull_delay, timings.start_delay, timings.ready_delay
    );

    let before = controller_writes(&sim, AGENT, "STATEFULSET_BENCH_DETAIL");
    api.create(&PostParams::default(), &set).await.unwrap();
    let took = wait_status(&api, "bench", "readyReplicas", n, Duration::from_secs(600)).await;
    let after = controller_writes(&sim, AGENT, "STATEFULSET_BENCH_DETAIL");
    println!("Parallel scale 0 -> {n} ready: {:.1} s", took.as_secs_f64());
    println!("{}", after.since(before).per_pod("create", n));
    println!(
        "controller RSS with {n} owned pods: {}",
        controller_rss(&controller)
    );

    let before = controller_writes(&sim, AGENT, "STATEFULSET_BENCH_DETAIL");
    let controller_pid = controller.child.id().to_string();
    let cpu_before = (cpu_secs(&controller_pid), cpu_secs("self"));
    api.patch(
        "bench",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {
            "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": "100%"}},
            "template": template("nginx:1.26")}})),
    )
    .await
    .unwrap();
    let took = wait_status(
        &api,
        "bench",
        "updatedReadyReplicas",
        n,
        Duration::from_secs(600),
    )
    .await;
    let after = controller_writes(&sim, AGENT, "STATEFULSET_BENCH_DETAIL");
    println!(
        "  CPU during the rollout: controller {:.2} s, simulator (API server, kubelet, scheduler) {:.2} s",
        cpu_secs(&controller_pid) - cpu_before.0,
        cpu_secs("self") - cpu_before.1
    );
    let bound = timings.pull_delay + timings.start_delay + timings.ready_delay;
    println!(
        "in-place rollout of {n} pods at maxUnavailable 100%: {:.2} s (lower bound, one kubelet restart: {:.2} s; {:.1}x)",
        took.as_secs_f64(),
        bound.as_secs_f64(),
        took.as_secs_f64() / bound.as_secs_f64()
    );
    println!("{}", after.since(before).per_pod("in-place update", n));
    println!(
        "controller RSS after the rollout: {}",
        controller_rss(&controller)
    );
    let minimal = floor::minimal_writer_rollout(&client, n).await;
    println!(
        "the same rollout by a minimal writer (3 writes per pod, nothing else): {:.2} s; the controller took {:.2}x that (target <= 1.25x)",
        minimal.as_secs_f64(),
        took.as_secs_f64() / minimal.as_secs_f64()
    );

    let mut owned = n;
    if large > n {
        let before = controller_writes(&sim, AGENT, "STATEFULSET_BENCH_DETAIL");
        scale(&api, "bench", large).await;
        let took = wait_status(
            &api,
            "bench",
            "readyReplicas",
            large,
            Duration::from_secs(1200),
        )
        .await;
        let after = controller_writes(&sim, AGENT, "STATEFULSET_BENCH_DETAIL");
        println!("scale {n} -> {large} ready: {:.1} s", took.as_secs_f64());
        println!("{}", after.since(before).per_pod("create", large - n));
        println!(
            "controller RSS with {large} owned pods: {} as the scale-up completes, {} settled",
            controller_rss(&controller),
            settled_rss(controller.child.id()).await
        );
        // What the controller holds for these pods without the scale-up behind it.
        drop(controller);
        controller = start_controller(&bin, &kubeconfig).await;
        let settled = settled_rss(controller.child.id()).await;
        println!("controller RSS with {large} owned pods, restarted: {settled}");
        owned = large;
    }

    let before = controller_writes(&sim, AGENT, "STATEFULSET_BENCH_DETAIL");
    scale(&api, "bench", 0).await;
    wait_status(&api, "bench", "replicas", 0, Duration::from_secs(1200)).await;
    let after = controller_writes(&sim, AGENT, "STATEFULSET_BENCH_DETAIL");
    println!("{}", after.since(before).per_pod("delete", owned));
    drop(controller);
    sim.shutdown().await;
}
