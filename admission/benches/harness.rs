//! Figures for a binary built on `kruise_runtime` and `kruise_admission` alone (the example
//! binary):
//! stripped size, time from start to ready, idle RSS, and RSS after its cache took an
//! initial list of many objects (the burst an allocator may or may not give back).
//!
//! `cargo bench -p kruise-admission --bench harness`; `HARNESS_OBJECTS` sets the object count
//! (default 10,000). The README records the figures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kruise_sim::{Sim, SimConfig};
use kube::api::{DynamicObject, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BIN: &str = env!("CARGO_BIN_EXE_kruise-runtime-example");

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

async fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    tcp.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .ok()?;
    let mut buf = String::new();
    tcp.read_to_string(&mut buf).await.ok()?;
    let code = buf.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, buf))
}

struct Run {
    ready_after: Duration,
    idle_rss_kib: u64,
}

async fn run_binary(sim: &Sim, objects: usize, greetings: &Api<DynamicObject>) -> Run {
    let (metrics, health, webhook) = (
        support::free_port(),
        support::free_port(),
        support::free_port(),
    );
    let kubeconfig = sim.kubeconfig_path().unwrap();
    let start = Instant::now();
    let mut child = Command::new(BIN)
        .args([
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--leader-elect=false",
        ])
        .args(["--metrics-addr", &format!("127.0.0.1:{metrics}")])
        .args(["--health-addr", &format!("127.0.0.1:{health}")])
        .args([
            "--webhook-port",
            &webhook.to_string(),
            "--webhook-host",
            "127.0.0.1",
        ])
        .args(["--webhook-namespace", "default", "--log-level", "warn"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    loop {
        if let Some((200, _)) = get(health, "/readyz").await {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "binary never became ready"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let ready_after = start.elapsed();
    // Wait until every object was reconciled (status echoed), then let it settle.
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let list = greetings.list(&Default::default()).await.unwrap();
        let done = list
            .items
            .iter()
            .filter(|g| !g.data["status"]["echoed"].is_null())
            .count();
        if done >= objects {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {done}/{objects} reconciled"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Longer than jemalloc's default 10 s dirty-page decay, so both allocators had the
    // chance to give memory back.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let idle_rss_kib = rss_kib(child.id());
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    Run {
        ready_after,
        idle_rss_kib,
    }
}

#[tokio::main]
async fn main() {
    let objects: usize = std::env::var("HARNESS_OBJECTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let allocator = "jemalloc (kruise_runtime::Allocator)";
    let size = std::fs::metadata(BIN).map(|m| m.len()).unwrap_or(0);
    println!("binary: {BIN}");
    println!("allocator: {allocator}");
    println!("binary size: {:.1} MiB", size as f64 / 1048576.0);

    let sim = Sim::start(SimConfig::default()).await.unwrap();
    let client = sim.client().unwrap();
    let greetings = support::install_greetings(BIN, &client).await;

    let empty = run_binary(&sim, 0, &greetings).await;
    println!(
        "start to ready (no objects): {:.0} ms",
        empty.ready_after.as_secs_f64() * 1000.0
    );
    println!(
        "idle RSS (no objects): {:.1} MiB",
        empty.idle_rss_kib as f64 / 1024.0
    );

    // The binary's fail-closed webhook is registered but not served until the next run.
    let webhooks: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    for w in webhooks.list(&Default::default()).await.unwrap() {
        webhooks
            .delete(&w.name_any(), &Default::default())
            .await
            .unwrap();
    }
    // ~2 KiB per object, about the size of a small pod.
    let filler = "x".repeat(2048);
    for i in 0..objects {
        let g: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "example.kruise.io/v1alpha1", "kind": "Greeting",
            "metadata": {"name": format!("g-{i}"), "namespace": "default", "labels": {"bench": "harness"}},
            "spec": {"message": format!("{i}-{filler}")}
        }))
        .unwrap();
        greetings.create(&PostParams::default(), &g).await.unwrap();
    }
    let full = run_binary(&sim, objects, &greetings).await;
    println!(
        "start to ready ({objects} objects): {:.0} ms",
        full.ready_after.as_secs_f64() * 1000.0
    );
    println!(
        "RSS after listing and reconciling {objects} objects (~2 KiB each), settled: {:.1} MiB",
        full.idle_rss_kib as f64 / 1024.0
    );
    sim.shutdown().await;
}
