//! CloneSet figures against kruise-sim (10 nodes, simulated kubelet): time to scale
//! 0 -> N ready pods, an in-place rollout of N pods at maxUnavailable 100% against its lower
//! bound (the kubelet's restart time), the controller's API writes per pod for create,
//! in-place update and delete (events counted apart), and the controller's RSS.
//!
//! `cargo bench -p kruise-cloneset --bench cloneset` (`CLONESET_PODS`, default 1000;
//! `CLONESET_BENCH_DETAIL=1` prints the controller's pod requests by verb, subresource and
//! status code; `CLONESET_BENCH_EXEC=<wrapper>` starts the controller through a wrapper
//! such as a heap profiler, which gets the binary's arguments).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../common/tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_sim::{Sim, SimConfig};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_kruise-cloneset");
const AGENT: &str = "kruise-cloneset/";

/// The controller's writes, split into pod writes and everything else (events, status, …).
fn controller_writes(sim: &Sim) -> (u64, u64, u64) {
    if std::env::var_os("CLONESET_BENCH_DETAIL").is_some() {
        for (key, n) in sim.counters().snapshot() {
            if key.user_agent.starts_with(AGENT)
                && key.resource == "pods"
                && key.verb != "watch"
                && key.verb != "list"
            {
                println!(
                    "  {} pods/{} -> {}: {n}",
                    key.verb, key.subresource, key.code
                );
            }
        }
    }
    let (mut pods, mut events, mut other) = (0, 0, 0);
    for (key, n) in sim.counters().snapshot() {
        if !key.user_agent.starts_with(AGENT)
            || matches!(key.verb.as_str(), "get" | "list" | "watch")
        {
            continue;
        }
        match key.resource.as_str() {
            "pods" => pods += n,
            "events" => events += n,
            _ => other += n,
        }
    }
    (pods, events, other)
}

fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

/// User + system CPU seconds of a process (`/proc/<pid>/stat`, clock ticks of 1/100 s).
fn cpu_secs(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

async fn wait_status(
    api: &Api<DynamicObject>,
    field: &str,
    want: i64,
    limit: Duration,
) -> Duration {
    let start = Instant::now();
    loop {
        let cs = api.get("bench").await.unwrap();
        if cs.data["status"][field].as_i64() == Some(want)
            && cs.data["status"]["observedGeneration"]
                == cs.metadata.generation.map(|g| json!(g)).unwrap_or_default()
        {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "status.{field} never reached {want}: {}",
            cs.data["status"]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::main]
async fn main() {
    let n: i64 = std::env::var("CLONESET_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let config = SimConfig {
        nodes: 10,
        ..SimConfig::default()
    };
    let timings = config.kubelet;
    let sim = Sim::start(config).await.unwrap();
    let client = sim.client().unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(
            &PostParams::default(),
            &kruise_cloneset::api::crd::crd().unwrap(),
        )
        .await
        .unwrap();
    let kubeconfig = sim.kubeconfig_path().unwrap();
    // CLONESET_BENCH_EXEC runs the controller through a wrapper (e.g. a heap profiler).
    let bin = std::env::var("CLONESET_BENCH_EXEC").unwrap_or_else(|_| BIN.to_string());
    let controller = support::spawn_replica(&bin, &kubeconfig, support::free_port(), &[], &[]);
    let addr = format!("127.0.0.1:{}", controller.health_port)
        .parse()
        .unwrap();
    support::eventually("kruise-cloneset ready", Duration::from_secs(60), || async {
        matches!(support::http_get(addr, "/readyz").await, Ok((200, _))).then_some(())
    })
    .await;
    let ar = ApiResource {
        group: "apps.kruise.io".into(),
        version: "v1beta1".into(),
        api_version: "apps.kruise.io/v1beta1".into(),
        kind: "CloneSet".into(),
        plural: "clonesets".into(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let cs: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
        "metadata": {"name": "bench"},
        "spec": {"replicas": n, "selector": {"matchLabels": {"app": "bench"}},
                 "template": {"metadata": {"labels": {"app": "bench"}},
                              "spec": {"containers": [{"name": "app", "image": "nginx:1.25",
                                                       "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}}}
    }))
    .unwrap();
    println!(
        "pods: {n} on 10 simulated nodes; kubelet pull/start/ready {:?}/{:?}/{:?}",
        timings.pull_delay, timings.start_delay, timings.ready_delay
    );

    let before = controller_writes(&sim);
    api.create(&PostParams::default(), &cs).await.unwrap();
    let took = wait_status(&api, "readyReplicas", n, Duration::from_secs(600)).await;
    let after = controller_writes(&sim);
    println!("scale 0 -> {n} ready: {:.1} s", took.as_secs_f64());
    println!(
        "create: {:.2} pod writes per pod (events {:.2}, other {} writes)",
        (after.0 - before.0) as f64 / n as f64,
        (after.1 - before.1) as f64 / n as f64,
        after.2 - before.2
    );
    println!(
        "controller RSS with {n} owned pods: {:.1} MiB",
        rss_mib(controller.child.id())
    );

    let before = controller_writes(&sim);
    let controller_pid = controller.child.id().to_string();
    let cpu_before = (cpu_secs(&controller_pid), cpu_secs("self"));
    api.patch(
        "bench",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {
            "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": "100%"}},
            "template": {"spec": {"containers": [{"name": "app", "image": "nginx:1.26",
                                                  "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}}}})),
    )
    .await
    .unwrap();
    let took = wait_status(&api, "updatedReadyReplicas", n, Duration::from_secs(600)).await;
    let after = controller_writes(&sim);
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
    println!(
        "in-place update: {:.2} pod writes per pod (events {:.2}, other {} writes)",
        (after.0 - before.0) as f64 / n as f64,
        (after.1 - before.1) as f64 / n as f64,
        after.2 - before.2
    );

    let before = controller_writes(&sim);
    api.patch(
        "bench",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 0}})),
    )
    .await
    .unwrap();
    wait_status(&api, "replicas", 0, Duration::from_secs(600)).await;
    let after = controller_writes(&sim);
    println!(
        "delete: {:.2} pod writes per pod (events {:.2}, other {} writes)",
        (after.0 - before.0) as f64 / n as f64,
        (after.1 - before.1) as f64 / n as f64,
        after.2 - before.2
    );
    drop(controller);
    sim.shutdown().await;
}
