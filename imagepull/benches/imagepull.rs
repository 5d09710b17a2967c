//! ImagePullJob figures against kruise-sim (N simulated nodes, each with its fake CRI and an
//! in-process agent as the DaemonSet would run one per node): the controller
//! (`kruise-imagepull run`, its own process) takes a job over every node with parallelism
//! P to completion; the time is compared with the pull-latency floor, ceil(N / P) pulls
//! one after another (no controller can do better with P nodes pulling at once). Also the
//! controller's writes per node, its RSS with N NodeImages, and one `kruise-imagepull-agent`
//! process's idle RSS (the binary the chart's DaemonSet runs).
//!
//! `cargo bench -p kruise-imagepull --bench imagepull`. Environment: `IMAGEPULL_NODES` (N,
//! default 1000), `IMAGEPULL_PARALLELISM` (P, default 100), `IMAGEPULL_LATENCY` (each
//! pull of the job's image, default "5s"), `KRUISE_AGENT_BIN` (the agent binary to run;
//! default: this build's `kruise-imagepull-agent`, `release` profile: point it at
//! `target/dist/kruise-imagepull-agent` to measure what the images ship).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use kruise_imagepull::agent::{self, AgentSettings};
use kruise_imagepull::api::crd::crds;
use kruise_imagepull::api::v1beta1::{ImagePullJob, NodeImage};
use kruise_runtime::family::AgentContext;
use kruise_sim::{ImagePulls, Sim, SimConfig};
use kruise_testkit::bench::{PeakRss, env_or};
use kruise_testkit::process::{cpu_secs, rss, settled_rss};
use kruise_testkit::requests::Writes;
use kruise_testkit::{free_port, spawn_replica};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

// The simulator runs in this process, with the allocator `kruise-sim up` has.
#[global_allocator]
static ALLOCATOR: kruise_runtime::Allocator = kruise_runtime::Allocator;

const BIN: &str = env!("CARGO_BIN_EXE_kruise-imagepull");
const AGENT: &str = "kruise-imagepull/";

/// The agent binary the chart's DaemonSet runs (see `KRUISE_AGENT_BIN` above).
fn agent_bin() -> std::path::PathBuf {
    std::env::var_os("KRUISE_AGENT_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_kruise-imagepull-agent").into())
}
const IMAGE: &str = "registry.local/bench:v1";

/// Waits until `want` NodeImages exist.
async fn wait_node_images(client: &kube::Client, want: usize, limit: Duration) {
    let api: Api<NodeImage> = Api::all(client.clone());
    let started = Instant::now();
    loop {
        let n = api
            .list_metadata(&ListParams::default())
            .await
            .unwrap()
            .items
            .len();
        if n == want {
            return;
        }
        assert!(started.elapsed() < limit, "{n} of {want} NodeImages");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::main]
async fn main() {
    let nodes: usize = env_or("IMAGEPULL_NODES", 1000);
    let parallelism: usize = env_or("IMAGEPULL_PARALLELISM", 100);
    let latency_text: String = env_or("IMAGEPULL_LATENCY", "5s".to_string());
    let latency = kruise_sim::cluster::parse_duration(&latency_text).expect("IMAGEPULL_LATENCY");
    let cri_dir =
        std::env::temp_dir().join(format!("kruise-imagepull-bench-{}", std::process::id()));
    let sim = Sim::start(SimConfig {
        nodes,
        cri_dir: Some(cri_dir.clone()),
        image_pulls: ImagePulls::default().delay(IMAGE, latency),
        ..Default::default()
    })
    .await
    .unwrap();
    let client = sim.client().unwrap();
    kruise_testkit::sim::install_crds(&client, &crds().unwrap()).await;
    let kubeconfig = sim.kubeconfig_path().unwrap();

    let controller = spawn_replica(
        BIN,
        &kubeconfig,
        free_port(),
        &["--nodeimage-creation-delay", "0s"],
        &[],
    );
    controller.wait_ready(Duration::from_secs(60)).await;
    let pid = controller.child.id();
    let started = Instant::now();
    wait_node_images(&client, nodes, Duration::from_secs(600)).await;
    println!(
        "{nodes} NodeImages created in {:.1} s; controller RSS with them: {}",
        started.elapsed().as_secs_f64(),
        settled_rss(pid).await
    );

    // One agent per node, in this process, polling as deployed (every second).
    let shutdown = CancellationToken::new();
    for i in 0..nodes {
        let node = format!("sim-node-{i}");
        let ctx = AgentContext {
            client: client.clone(),
            cri_socket: sim.cri_socket(&node).unwrap(),
            node,
            shutdown: shutdown.clone(),
        };
        tokio::spawn(agent::run(ctx, AgentSettings::default()));
    }

    let jobs: Api<ImagePullJob> = Api::namespaced(client.clone(), "default");
    let job: ImagePullJob = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "ImagePullJob",
        "metadata": {"name": "bench"},
        "spec": {"image": IMAGE, "parallelism": parallelism,
                 "pullPolicy": {"timeoutSeconds": 600, "backoffLimit": 3},
                 "imagePullPolicy": "IfNotPresent",
                 "completionPolicy": {"type": "Always"}},
    }))
    .unwrap();
    let before = Writes::of(&sim, AGENT);
    let cpu_before = (cpu_secs(&pid.to_string()), cpu_secs("self"));
    let peak = PeakRss::watch(pid);
    let started = Instant::now();
    jobs.create(&PostParams::default(), &job).await.unwrap();
    loop {
        let status = jobs.get("bench").await.unwrap().status.unwrap_or_default();
        if status.completion_time.is_some() {
            assert_eq!(
                (status.desired, status.succeeded, status.failed),
                (nodes as i32, nodes as i32, 0),
                "the job completed on every node: {status:?}"
            );
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "the job never completed: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let took = started.elapsed();
    let writes = Writes::of(&sim, AGENT).since(before);
    println!(
        "  CPU during the job: controller {:.2} s, this process (simulator and {nodes} agents) {:.2} s",
        cpu_secs(&pid.to_string()) - cpu_before.0,
        cpu_secs("self") - cpu_before.1
    );
    println!(
        "controller RSS during the job: peak {:.1} MiB; after it {}",
        peak.peak_mib(),
        rss(pid)
    );
    let rounds = nodes.div_ceil(parallelism.max(1));
    let floor = latency * u32::try_from(rounds).unwrap();
    println!(
        "ImagePullJob on {nodes} nodes, parallelism {parallelism}, {latency_text} per pull: {:.2} s to completed (pull-latency floor, {rounds} rounds x {latency_text}: {:.2} s; {:.2}x)",
        took.as_secs_f64(),
        floor.as_secs_f64(),
        took.as_secs_f64() / floor.as_secs_f64()
    );
    println!(
        "controller writes per node: {:.2} (NodeImage spec writes and job status; {} in all), {:.2} events",
        writes.other as f64 / nodes as f64,
        writes.other,
        writes.events as f64 / nodes as f64
    );
    shutdown.cancel();

    // One agent as its own process, idle on a node whose image is pulled.
    let mut agent = std::process::Command::new(agent_bin())
        .args(["--node-name", "sim-node-0", "--kubeconfig"])
        .arg(&kubeconfig)
        .arg("--cri-socket")
        .arg(sim.cri_socket("sim-node-0").unwrap())
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!(
        "one `kruise-imagepull-agent` process, idle: {}",
        settled_rss(agent.id()).await
    );
    let _ = agent.kill();
    let _ = agent.wait();
    drop(controller);
    sim.shutdown().await;
    let _ = std::fs::remove_dir_all(cri_dir);
}
