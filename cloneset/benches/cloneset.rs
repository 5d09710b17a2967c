//! CloneSet figures against kruise-sim (100 nodes, simulated kubelet), with pods owned by
//! others beside the CloneSet's: time to scale 0 -> N ready pods, an in-place rollout of N
//! pods at maxUnavailable 100% against its lower bound (the kubelet's restart time), the
//! controller's API writes per pod for create, in-place update and delete (events counted
//! apart), the same rollout done by a minimal writer on pods of its own (the floor this
//! simulator and machine set for any controller), and the controller's RSS at N and at
//! LARGE owned pods.
//!
//! `cargo bench -p kruise-cloneset --bench cloneset`. Environment: `CLONESET_PODS` (N,
//! default 1000), `CLONESET_PODS_LARGE` (default 10000; 0 skips that step),
//! `CLONESET_OTHER_PODS` (pods of no CloneSet, default 10000), `CLONESET_BENCH_DETAIL=1`
//! (the controller's pod requests by verb, subresource and status code),
//! `CLONESET_BENCH_EXEC=<wrapper>` (start the controller through a wrapper such as a heap
//! profiler, which gets the binary's arguments).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../common/tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_sim::{Sim, SimConfig};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

// The simulator runs in this process, with the allocator `kruise-sim up` has.
#[global_allocator]
static ALLOCATOR: kruise_common::runtime::Allocator = kruise_common::runtime::Allocator;

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

/// VmRSS, with its anonymous (heap, stacks) and file-backed (the binary's pages) parts.
fn rss(pid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let mib = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    format!(
        "{:.1} MiB (anonymous {:.1}, file-backed {:.1})",
        mib("VmRSS:"),
        mib("RssAnon:"),
        mib("RssFile:")
    )
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

fn env_count(name: &str, default: i64) -> i64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Pods of no CloneSet in their own namespace, Pending on a node selector no node has: they
/// cost the simulated kubelet nothing, and a controller that cached pods cluster-wide would
/// hold them all.
async fn create_other_pods(client: &kube::Client, count: i64) {
    create_pods_in(client, "others", count, |i| {
        json!({
            "metadata": {"name": format!("other-{i}"), "labels": {"app": "other"}},
            "spec": {"nodeSelector": {"bench": "nowhere"},
                     "containers": [{"name": "app", "image": "nginx:1.25"}]}
        })
    })
    .await;
}

/// Creates `namespace` and `count` pods in it, `pod(i)` the i-th, 32 requests in flight.
async fn create_pods_in(
    client: &kube::Client,
    namespace: &str,
    count: i64,
    pod: impl Fn(i64) -> serde_json::Value,
) {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::{Namespace, Pod};
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap(),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    futures::stream::iter(0..count)
        .map(|i| {
            let (pods, pod): (_, Pod) = (pods.clone(), serde_json::from_value(pod(i)).unwrap());
            async move {
                pods.create(&PostParams::default(), &pod).await.unwrap();
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<()>>()
        .await;
}

async fn scale(api: &Api<DynamicObject>, replicas: i64) {
    api.patch(
        "bench",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": replicas}})),
    )
    .await
    .unwrap();
}

fn print_writes(what: &str, before: (u64, u64, u64), after: (u64, u64, u64), pods: i64) {
    println!(
        "{what}: {:.2} pod writes per pod (events {:.2}, other {} writes)",
        (after.0 - before.0) as f64 / pods as f64,
        (after.1 - before.1) as f64 / pods as f64,
        after.2 - before.2
    );
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

/// The same in-place rollout done by a minimal writer instead of the controller, on `n`
/// pods of their own (readiness gate `InPlaceUpdateReady`, as the CloneSet's): each pod
/// gets the three writes the controller makes (condition False, image, condition True
/// once the new container is ready) as soon as it can, with nothing else (no reconcile,
/// no revisions, no status, no events). Its time is what this simulator on this machine
/// allows any controller, the floor the controller's own rollout is compared with.
async fn minimal_writer_rollout(client: &kube::Client, n: i64) -> Duration {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::Pod;
    use kube::runtime::{WatchStreamExt, watcher};
    const NS: &str = "minimal-writer";
    const GATE: &str = "InPlaceUpdateReady";
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let gate = |status: &str| {
        Patch::Strategic(json!({"status": {"conditions": [
            {"type": GATE, "status": status, "lastTransitionTime": jiff::Timestamp::now().to_string()}
        ]}}))
    };
    let ready_with = |pod: &Pod, image: &str| {
        let status = pod.status.as_ref();
        let container_ready = status
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|cs| cs.iter().all(|c| c.ready && c.image == image));
        let condition = |t: &str| {
            status
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == t))
                .map(|c| c.status == "True")
        };
        (container_ready, condition(GATE), condition("Ready"))
    };
    // Set up (not timed): n gated pods, running and Ready.
    create_pods_in(client, NS, n, |i| {
        json!({
            "metadata": {"name": format!("pod-{i}"), "labels": {"app": "minimal"}},
            "spec": {"readinessGates": [{"conditionType": GATE}],
                     "containers": [{"name": "app", "image": "nginx:1.25",
                                     "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}
        })
    })
    .await;
    // One loop for both: a pod whose gate opened early can be Ready before the last gate
    // is opened, and its Ready event is not seen again.
    let (mut opened, mut ready) = (
        std::collections::HashSet::new(),
        std::collections::HashSet::new(),
    );
    let mut events = watcher(pods.clone(), watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while ready.len() < n as usize {
        let pod = events.next().await.unwrap().unwrap();
        let name = pod.metadata.name.clone().unwrap();
        let (container_ready, _, pod_ready) = ready_with(&pod, "nginx:1.25");
        if pod_ready == Some(true) {
            ready.insert(name);
        } else if container_ready && opened.insert(name.clone()) {
            pods.patch_status(&name, &PatchParams::default(), &gate("True"))
                .await
                .unwrap();
        }
    }

    // The timed rollout: condition False and the new image for every pod (32 requests in
    // flight, as the controller), condition True for each as its new container is ready.
    let started = Instant::now();
    let image = "nginx:1.26";
    let writer = {
        let pods = pods.clone();
        tokio::spawn(async move {
            futures::stream::iter(0..n)
                .map(|i| {
                    let pods = pods.clone();
                    async move {
                        let name = format!("pod-{i}");
                        pods.patch_status(&name, &PatchParams::default(), &gate("False"))
                            .await
                            .unwrap();
                        let spec =
                            json!({"spec": {"containers": [{"name": "app", "image": image}]}});
                        pods.patch(&name, &PatchParams::default(), &Patch::Strategic(spec))
                            .await
                            .unwrap();
                    }
                })
                .buffer_unordered(32)
                .collect::<Vec<()>>()
                .await
        })
    };
    let mut closing = futures::stream::FuturesUnordered::new();
    let (mut closed, mut done) = (
        std::collections::HashSet::new(),
        std::collections::HashSet::new(),
    );
    while done.len() < n as usize {
        tokio::select! {
            event = events.next() => {
                let pod = event.unwrap().unwrap();
                let name = pod.metadata.name.clone().unwrap();
                match ready_with(&pod, image) {
                    (true, Some(false), _) if closed.insert(name.clone()) => {
                        let pods = pods.clone();
                        closing.push(async move {
                            pods.patch_status(&name, &PatchParams::default(), &gate("True"))
                                .await
                                .unwrap();
                        });
                    }
                    (true, Some(true), Some(true)) => {
                        done.insert(name);
                    }
                    _ => {}
                }
            }
            Some(()) = closing.next(), if !closing.is_empty() => {}
        }
    }
    let took = started.elapsed();
    writer.await.unwrap();
    // Gone again before the next step, so it runs as it would have without this one.
    pods.delete_collection(&Default::default(), &Default::default())
        .await
        .unwrap();
    support::eventually("minimal-writer pods gone", Duration::from_secs(120), || {
        let pods = pods.clone();
        async move {
            pods.list(&Default::default())
                .await
                .ok()
                .filter(|l| l.items.is_empty())
                .map(|_| ())
        }
    })
    .await;
    took
}

/// Starts the controller and waits until it is ready (caches synced).
async fn start_controller(bin: &str, kubeconfig: &std::path::Path) -> support::Replica {
    let controller = support::spawn_replica(bin, kubeconfig, support::free_port(), &[], &[]);
    let addr = format!("127.0.0.1:{}", controller.health_port)
        .parse()
        .unwrap();
    support::eventually("kruise-cloneset ready", Duration::from_secs(60), || async {
        matches!(support::http_get(addr, "/readyz").await, Ok((200, _))).then_some(())
    })
    .await;
    controller
}

/// The RSS once it has stopped moving: two samples a second apart within 256 KiB (or
/// after a minute).
async fn settled_rss(pid: u32) -> String {
    let vm_rss_kib = || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = vm_rss_kib();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = vm_rss_kib();
        if (now - last).abs() < 256 || Instant::now() > deadline {
            return rss(pid);
        }
        last = now;
    }
}

#[tokio::main]
async fn main() {
    let n = env_count("CLONESET_PODS", 1000);
    let large = env_count("CLONESET_PODS_LARGE", 10_000);
    let others = env_count("CLONESET_OTHER_PODS", 10_000);
    let config = SimConfig {
        nodes: 100,
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
    let started = Instant::now();
    create_other_pods(&client, others).await;
    println!(
        "{others} pods of no CloneSet created in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let kubeconfig = sim.kubeconfig_path().unwrap();
    // CLONESET_BENCH_EXEC runs the controller through a wrapper (e.g. a heap profiler).
    let bin = std::env::var("CLONESET_BENCH_EXEC").unwrap_or_else(|_| BIN.to_string());
    let mut controller = start_controller(&bin, &kubeconfig).await;
    let controller_rss = |c: &support::Replica| rss(c.child.id());
    println!(
        "controller RSS with no owned pods: {}",
        controller_rss(&controller)
    );
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
        "pods: {n} on 100 simulated nodes; kubelet pull/start/ready {:?}/{:?}/{:?}",
        timings.pull_delay, timings.start_delay, timings.ready_delay
    );

    let before = controller_writes(&sim);
    api.create(&PostParams::default(), &cs).await.unwrap();
    let took = wait_status(&api, "readyReplicas", n, Duration::from_secs(600)).await;
    let after = controller_writes(&sim);
    println!("scale 0 -> {n} ready: {:.1} s", took.as_secs_f64());
    print_writes("create", before, after, n);
    println!(
        "controller RSS with {n} owned pods: {}",
        controller_rss(&controller)
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
    print_writes("in-place update", before, after, n);
    println!(
        "controller RSS after the rollout: {}",
        controller_rss(&controller)
    );
    let floor = minimal_writer_rollout(&client, n).await;
    println!(
        "the same rollout by a minimal writer (3 writes per pod, nothing else): {:.2} s; the controller took {:.2}x that",
        floor.as_secs_f64(),
        took.as_secs_f64() / floor.as_secs_f64()
    );

    let mut owned = n;
    if large > n {
        let before = controller_writes(&sim);
        scale(&api, large).await;
        let took = wait_status(&api, "readyReplicas", large, Duration::from_secs(1200)).await;
        let after = controller_writes(&sim);
        println!("scale {n} -> {large} ready: {:.1} s", took.as_secs_f64());
        print_writes("create", before, after, large - n);
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

    let before = controller_writes(&sim);
    scale(&api, 0).await;
    wait_status(&api, "replicas", 0, Duration::from_secs(1200)).await;
    let after = controller_writes(&sim);
    print_writes("delete", before, after, owned);
    drop(controller);
    sim.shutdown().await;
}
