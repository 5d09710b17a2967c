//! What kruise-webhook's `workloads` step (the `KruisePodReady` gate and condition on every
//! CloneSet pod) costs a CloneSet scale-up, against kruise-sim (100 nodes, simulated
//! kubelet), in one run: a CloneSet 0 -> N ready with kruise-cloneset alone, scaled back to
//! 0, then a second CloneSet 0 -> N with kruise-webhook running `--enable=workloads`.
//! Printed for each: the time to N ready, kruise-webhook's `pods/status` writes per pod
//! (OpenKruise's podreadiness controller sends one), and kruise-cloneset's CloneSet status
//! writes with their conflicts (the churn of extra pod writes shows there).
//!
//! `cargo bench -p kruise-webhook --bench pod_readiness`. Environment: `READINESS_PODS` (N,
//! default 1000). kruise-cloneset runs in this process (as `kruise-playground up` runs it),
//! kruise-webhook as its own process.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_core::pods::PodView as _;
use kruise_testkit::bench::{env_or, scale, wait_status};
use kruise_testkit::process::replica_args;
use kruise_testkit::{Replica, free_port, spawn_replica};
use kube::Api;
use kube::api::{DynamicObject, ListParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

// The simulator runs in this process, with the allocator `kruise-sim up` has.
#[global_allocator]
static ALLOCATOR: kruise_runtime::Allocator = kruise_runtime::Allocator;

const WEBHOOK: &str = env!("CARGO_BIN_EXE_kruise-webhook");

/// Requests so far whose user agent starts with `agent`, by verb, resource, subresource
/// and, when given, response code.
fn requests(
    sim: &kruise_sim::Sim,
    agent: &str,
    what: (&str, &str, &str),
    code: Option<u16>,
) -> u64 {
    let (verb, resource, subresource) = what;
    sim.counters()
        .of_agent(agent, verb, resource, subresource, code)
}

const READINESS_WRITES: (&str, &str, &str) = ("patch", "pods", "status");
const CLONESET_STATUS_WRITES: (&str, &str, &str) = ("patch", "clonesets", "status");

/// Creates CloneSet `name` with `n` replicas, waits until they are ready and prints the time
/// and the writes counted meanwhile.
async fn scale_up(sim: &kruise_sim::Sim, api: &Api<DynamicObject>, name: &str, n: i64, what: &str) {
    let before = (
        requests(sim, "kruise-webhook/", READINESS_WRITES, None),
        requests(sim, "kruise-cloneset/", CLONESET_STATUS_WRITES, None),
        requests(sim, "kruise-cloneset/", CLONESET_STATUS_WRITES, Some(409)),
    );
    let cloneset: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
        "metadata": {"name": name},
        "spec": {"replicas": n, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "app", "image": "nginx:1.25",
                                                       "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}}}
    }))
    .unwrap();
    api.create(&PostParams::default(), &cloneset).await.unwrap();
    let took = wait_status(api, name, "readyReplicas", n, Duration::from_secs(900)).await;
    let pods: Api<Pod> = Api::default_namespaced(api.clone().into_client());
    let listed = pods
        .list(
            &ListParams::default()
                .labels(&format!("app={name}"))
                .limit(1),
        )
        .await
        .unwrap();
    let gated = listed.items[0].has_readiness_gate("KruisePodReady");
    let per_pod = |now: u64, then: u64| (now - then) as f64 / n as f64;
    println!(
        "{what} (pods gated: {gated}): 0 -> {n} ready in {:.1} s; kruise-webhook pods/status writes {:.2} per pod; kruise-cloneset CloneSet status writes {} ({} conflicts)",
        took.as_secs_f64(),
        per_pod(
            requests(sim, "kruise-webhook/", READINESS_WRITES, None),
            before.0
        ),
        requests(sim, "kruise-cloneset/", CLONESET_STATUS_WRITES, None) - before.1,
        requests(sim, "kruise-cloneset/", CLONESET_STATUS_WRITES, Some(409)) - before.2,
    );
}

#[tokio::main]
async fn main() {
    let n = env_or("READINESS_PODS", 1000);
    let crd = kruise_cloneset::api::crd::crd().unwrap();
    let (sim, client) = kruise_testkit::sim_with_crds(100, std::slice::from_ref(&crd)).await;
    let kubeconfig = sim.kubeconfig_path().unwrap();

    let shutdown = CancellationToken::new();
    let mut argv = vec!["kruise-cloneset".to_string()];
    argv.extend(replica_args(&kubeconfig, free_port(), free_port()));
    let cloneset = tokio::spawn(
        kruise_cloneset::binary::binary()
            .unwrap()
            .run_argv(argv, shutdown.clone()),
    );
    let ar = kruise_testkit::sim::stored_resource(&crd);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);

    scale_up(&sim, &api, "alone", n, "kruise-cloneset alone").await;
    scale(&api, "alone", 0).await;
    wait_status(&api, "alone", "replicas", 0, Duration::from_secs(900)).await;

    let webhook: Replica = spawn_replica(
        WEBHOOK,
        &kubeconfig,
        free_port(),
        &["--enable=workloads"],
        &[],
    );
    webhook.wait_ready(Duration::from_secs(60)).await;
    scale_up(
        &sim,
        &api,
        "gated",
        n,
        "with kruise-webhook --enable=workloads",
    )
    .await;

    drop(webhook);
    shutdown.cancel();
    let _ = cloneset.await;
    sim.shutdown().await;
}
