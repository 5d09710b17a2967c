//! kruise-sim benchmark: `cargo bench -p kruise-sim --bench apiserver`
//!
//! Prints creates/s, list latency at 10,000 objects, watch fan-out to 20 watchers and
//! the process RSS with 10,000 pods stored. Environment knobs: `SIM_BENCH_PODS`
//! (default 10000), `SIM_BENCH_CONCURRENCY` (default 32), `SIM_BENCH_WATCHERS` (20),
//! `SIM_BENCH_WATCH_EVENTS` (1000).

use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kruise_sim::{Sim, SimConfig};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn pod(i: usize) -> anyhow::Result<Pod> {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-{i:05}"), "labels": {"app": "bench", "shard": (i % 10).to_string()},
                     "annotations": {"kruise.io/bench": "true"}},
        "spec": {
            "containers": [{
                "name": "main", "image": "nginx:1.25",
                "env": [{"name": "INDEX", "value": i.to_string()}],
                "ports": [{"containerPort": 80}],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}
            }],
            "nodeName": format!("node-{}", i % 50)
        }
    }))
    .context("building a pod")
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

async fn run() -> anyhow::Result<()> {
    let pods_n = env_usize("SIM_BENCH_PODS", 10_000);
    let concurrency = env_usize("SIM_BENCH_CONCURRENCY", 32);
    let watchers_n = env_usize("SIM_BENCH_WATCHERS", 20);
    let watch_events = env_usize("SIM_BENCH_WATCH_EVENTS", 1_000);
    let rss_start = rss_mib();
    let sim = Sim::start(SimConfig {
        watch_history: 20_000,
        ..Default::default()
    })
    .await?;
    let client = sim.client()?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

    // 1. Creates per second.
    let bodies: Vec<Pod> = (0..pods_n).map(pod).collect::<anyhow::Result<_>>()?;
    let started = Instant::now();
    futures::stream::iter(bodies)
        .map(|p| {
            let pods = pods.clone();
            async move { pods.create(&PostParams::default(), &p).await }
        })
        .buffer_unordered(concurrency)
        .try_for_each(|_| async { Ok(()) })
        .await
        .context("creating pods")?;
    let create_secs = started.elapsed().as_secs_f64();
    println!(
        "creates: {pods_n} pods in {create_secs:.2}s = {:.0} creates/s (concurrency {concurrency})",
        pods_n as f64 / create_secs
    );

    // 2. RSS with the pods stored.
    let rss = rss_mib();
    println!(
        "rss: {rss:.0} MiB with {pods_n} pods stored (process total incl. client; {rss_start:.0} MiB at start)"
    );

    // 3. List latency.
    let mut full = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let l = pods.list(&ListParams::default()).await?;
        full.push(t.elapsed());
        anyhow::ensure!(
            l.items.len() == pods_n,
            "list returned {} pods",
            l.items.len()
        );
    }
    let mut paged = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let mut token: Option<String> = None;
        let mut n = 0;
        loop {
            let mut lp = ListParams::default().limit(500);
            if let Some(c) = &token {
                lp = lp.continue_token(c);
            }
            let l = pods.list(&lp).await?;
            n += l.items.len();
            token = l.metadata.continue_;
            if token.is_none() {
                break;
            }
        }
        anyhow::ensure!(n == pods_n, "paged list returned {n} pods");
        paged.push(t.elapsed());
    }
    let mut selected = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        pods.list(
            &ListParams::default()
                .labels("shard=3")
                .fields("spec.nodeName=node-3"),
        )
        .await?;
        selected.push(t.elapsed());
    }
    println!(
        "list at {pods_n} pods: full {:.1} ms, paged by 500 {:.1} ms, label+field selector {:.1} ms (medians)",
        median(full).as_secs_f64() * 1e3,
        median(paged).as_secs_f64() * 1e3,
        median(selected).as_secs_f64() * 1e3
    );

    // 4. Watch fan-out.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let rv = cms
        .list(&ListParams::default().limit(1))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let mut tasks = Vec::new();
    for _ in 0..watchers_n {
        let stream = cms
            .watch(&WatchParams::default().timeout(290), &rv)
            .await?
            .boxed();
        tasks.push(tokio::spawn(async move {
            let mut stream = stream;
            let mut seen = 0usize;
            while seen < watch_events {
                match stream.next().await {
                    Some(Ok(WatchEvent::Added(_))) => seen += 1,
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(anyhow::anyhow!("watch error: {e}")),
                    None => return Err(anyhow::anyhow!("watch ended after {seen} events")),
                }
            }
            Ok(Instant::now())
        }));
    }
    let started = Instant::now();
    futures::stream::iter(0..watch_events)
        .map(|i| {
            let cms = cms.clone();
            async move {
                let c: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("cm-{i:05}")}, "data": {"i": i.to_string()}}))
                    .map_err(kube::Error::SerdeError)?;
                cms.create(&PostParams::default(), &c).await
            }
        })
        .buffer_unordered(concurrency)
        .try_for_each(|_| async { Ok(()) })
        .await
        .context("creating configmaps")?;
    let created = started.elapsed();
    let mut last = started;
    for t in tasks {
        let done = t.await.context("watcher task")??;
        last = last.max(done);
    }
    let total = last.duration_since(started);
    println!(
        "watch fan-out: {watch_events} events x {watchers_n} watchers = {} deliveries in {:.2}s ({:.0} deliveries/s; writes took {:.2}s)",
        watch_events * watchers_n,
        total.as_secs_f64(),
        (watch_events * watchers_n) as f64 / total.as_secs_f64(),
        created.as_secs_f64()
    );
    println!("requests served: {}", sim.counters().total());
    sim.shutdown().await;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("building the tokio runtime")?;
    rt.block_on(run())
}
