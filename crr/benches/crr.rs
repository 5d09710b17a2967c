//! ContainerRecreateRequest figures against kruise-sim: N requests (one per pod, pods spread
//! over the simulated nodes) carried out by one `kruise-crr-agent` process per node against
//! the node's fake CRI socket, with the cluster-side controller in this process; the time
//! until every request is Completed against the restart floor measured in the same run
//! (a minimal CRI client stopping the same containers through the same sockets, with no
//! controller, agent or API writes: what the simulated kubelet and runtime need to kill and
//! restart them), and each agent's RSS and CPU idle and busy.
//!
//! `cargo bench -p kruise-crr --bench crr`. Environment: `CRR_BENCH_NODES` (default 100),
//! `CRR_BENCH_REQUESTS` (default 1000), `CRR_BENCH_IDLE_SECS` (the idle window, default 10),
//! `KRUISE_TEST_LOGS=1` (the agents' logs on stderr), `KRUISE_AGENT_BIN` (the agent binary
//! to run; default: this build's `kruise-crr-agent`, `release` profile: point it at
//! `target/dist/kruise-crr-agent` to measure what the images ship).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_cri::RuntimeServiceClient;
use kruise_cri::v1 as cri;
use kruise_crr::admission::{AdmittedCrr, check_create, inject_pod};
use kruise_crr::api::v1beta1::ContainerRecreateRequest;
use kruise_crr::controller;
use kruise_runtime::{Metrics, Readiness, RunOptions};
use kruise_sim::{Sim, SimConfig};
use kruise_testkit::bench::{PeakRss, env_or};
use kruise_testkit::process::{cpu_secs, rss, vm_rss_kib};
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::json;
use tokio_util::sync::CancellationToken;

// The simulator runs in this process, with the allocator `kruise-sim up` has.
#[global_allocator]
static ALLOCATOR: kruise_runtime::Allocator = kruise_runtime::Allocator;

/// The agent binary the chart's DaemonSet runs (see `KRUISE_AGENT_BIN` above).
fn agent_bin() -> PathBuf {
    std::env::var_os("KRUISE_AGENT_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kruise-crr-agent")))
}
const AGENT_USER_AGENT: &str = "kruise-crr-agent/";
const NAMESPACE: &str = "default";
const IN_FLIGHT: usize = 32;

/// The agent processes, killed when dropped.
struct Agents(Vec<Child>);

impl Drop for Agents {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Agents {
    fn start(sim: &Sim, nodes: usize, kubeconfig: &Path) -> Agents {
        Agents(
            (0..nodes)
                .map(|i| {
                    let node = format!("sim-node-{i}");
                    let socket = sim.cri_socket(&node).unwrap();
                    let mut cmd = Command::new(agent_bin());
                    cmd.args(["--node-name", &node, "--cri-socket"])
                        .arg(&socket)
                        .arg("--kubeconfig")
                        .arg(kubeconfig)
                        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
                        .stdout(Stdio::null());
                    if std::env::var_os("KRUISE_TEST_LOGS").is_none() {
                        cmd.stderr(Stdio::null());
                    }
                    cmd.spawn().unwrap()
                })
                .collect(),
        )
    }

    fn pids(&self) -> Vec<String> {
        self.0.iter().map(|c| c.id().to_string()).collect()
    }

    /// Every agent still running (none exited on an error).
    fn assert_running(&mut self) {
        for child in &mut self.0 {
            assert!(
                child.try_wait().unwrap().is_none(),
                "an agent exited; KRUISE_TEST_LOGS=1 shows why"
            );
        }
    }

    /// CPU seconds per agent, to the nanosecond: the sum of its threads' run time from
    /// `/proc/<pid>/task/*/schedstat` (`/proc/<pid>/stat` counts in 10 ms ticks, a whole
    /// millicore over a 10 s window).
    fn cpu(&self) -> Vec<f64> {
        self.pids().iter().map(|p| run_time_secs(p)).collect()
    }

    /// Threads per agent.
    fn threads(&self) -> Vec<f64> {
        self.pids()
            .iter()
            .map(|p| std::fs::read_dir(format!("/proc/{p}/task")).map_or(0.0, |d| d.count() as f64))
            .collect()
    }

    /// RSS per agent, MiB.
    fn rss_mib(&self) -> Vec<f64> {
        self.0
            .iter()
            .map(|c| vm_rss_kib(c.id()) as f64 / 1024.0)
            .collect()
    }
}

/// The run time of every thread of process `pid`, seconds (a thread that exits takes its
/// time with it: the windows here are taken while the agents' threads stay).
fn run_time_secs(pid: &str) -> f64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0.0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum::<u64>() as f64
        / 1e9
}

/// "mean m, max x" of `values`, `unit` after each.
fn mean_max(values: &[f64], unit: &str) -> String {
    let mean = values.iter().sum::<f64>() / values.len().max(1) as f64;
    let max = values.iter().copied().fold(0.0, f64::max);
    format!("mean {mean:.2} {unit}, max {max:.2} {unit}")
}

/// Millicores per agent from CPU seconds before and after a window.
fn millicores(before: &[f64], after: &[f64], window: Duration) -> Vec<f64> {
    before
        .iter()
        .zip(after)
        .map(|(b, a)| (a - b).max(0.0) / window.as_secs_f64() * 1000.0)
        .collect()
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Creates `n` pods (one container `app`), pod i on node i mod `nodes`, and waits until
/// every one runs ready; the pods.
async fn create_pods(client: &Client, n: usize, nodes: usize) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    futures::stream::iter(0..n)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {"name": format!("pod-{i}"), "labels": {"app": "bench"}},
                    "spec": {"nodeName": format!("sim-node-{}", i % nodes),
                             "containers": [{"name": "app", "image": "nginx:1.27"}]},
                }))
                .unwrap();
                pods.create(&PostParams::default(), &pod).await.unwrap();
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<()>>()
        .await;
    wait_pods(client, n, |_| 0).await
}

/// Waits until `n` pods of the bench run `app` ready with restart count `restarts(pod)`.
async fn wait_pods(client: &Client, n: usize, restarts: impl Fn(&Pod) -> i32) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let list = pods
            .list(&ListParams::default().labels("app=bench"))
            .await
            .unwrap()
            .items;
        let done = list
            .iter()
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.container_statuses.as_ref())
                    .and_then(|v| v.first())
                    .is_some_and(|s| {
                        s.ready && s.container_id.is_some() && s.restart_count == restarts(p)
                    })
            })
            .count();
        if done == n && list.len() == n {
            return list;
        }
        assert!(
            Instant::now() < deadline,
            "{done} of {n} pods ready with the expected restarts"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn restart_count(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|v| v.first())
        .map_or(0, |s| s.restart_count)
}

/// The floor: every pod's `app` stopped straight through its node's CRI socket (the newest
/// attempt, found by the pod uid label as the agent finds it), `IN_FLIGHT` at once, until
/// the simulated kubelet reports each restarted and ready. No API writes, no controller.
async fn minimal_cri_restart(sim: &Sim, client: &Client, pods: &[Pod]) -> Duration {
    let started = Instant::now();
    let mut runtimes: HashMap<String, RuntimeServiceClient<tonic::transport::Channel>> =
        HashMap::new();
    for pod in pods {
        let node = pod.spec.as_ref().unwrap().node_name.clone().unwrap();
        runtimes.entry(node.clone()).or_insert_with(|| {
            RuntimeServiceClient::new(kruise_cri::connect(sim.cri_socket(&node).unwrap()).unwrap())
        });
    }
    futures::stream::iter(pods)
        .map(|pod| {
            let node = pod.spec.as_ref().unwrap().node_name.clone().unwrap();
            let mut runtime = runtimes[&node].clone();
            let uid = pod.uid().unwrap();
            async move {
                let listed = runtime
                    .list_containers(cri::ListContainersRequest {
                        filter: Some(cri::ContainerFilter {
                            label_selector: HashMap::from([(
                                kruise_cri::LABEL_POD_UID.to_string(),
                                uid,
                            )]),
                            ..Default::default()
                        }),
                    })
                    .await
                    .unwrap()
                    .into_inner()
                    .containers;
                let newest = listed.into_iter().max_by_key(|c| c.created_at).unwrap();
                runtime
                    .stop_container(cri::StopContainerRequest {
                        container_id: newest.id,
                        timeout: 30,
                    })
                    .await
                    .unwrap();
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<()>>()
        .await;
    let before: HashMap<String, i32> = pods
        .iter()
        .map(|p| (p.name_any(), restart_count(p)))
        .collect();
    wait_pods(client, pods.len(), |p| before[&p.name_any()] + 1).await;
    started.elapsed()
}

/// Creates one request per pod for its `app`, as the webhook fills it (`IN_FLIGHT` at once).
async fn create_requests(client: &Client, pods: &[Pod]) {
    let nodes: HashMap<String, Node> = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| (n.name_any(), n))
        .collect();
    let requests: Api<ContainerRecreateRequest> = Api::namespaced(client.clone(), NAMESPACE);
    futures::stream::iter(pods)
        .map(|pod| {
            let requests = requests.clone();
            let node = &nodes[pod.spec.as_ref().unwrap().node_name.as_ref().unwrap()];
            async move {
                let mut crr: AdmittedCrr = serde_json::from_value(json!({
                    "metadata": {"name": format!("crr-{}", pod.name_any()), "namespace": NAMESPACE},
                    "spec": {"podName": pod.name_any(), "containers": [{"name": "app"}]},
                }))
                .unwrap();
                check_create(&mut crr).unwrap();
                inject_pod(&mut crr, pod, node).unwrap();
                let mut object = serde_json::to_value(&crr).unwrap();
                object["apiVersion"] = json!("apps.kruise.io/v1beta1");
                object["kind"] = json!("ContainerRecreateRequest");
                requests
                    .create(
                        &PostParams::default(),
                        &serde_json::from_value(object).unwrap(),
                    )
                    .await
                    .unwrap();
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<()>>()
        .await;
}

/// Waits until `n` requests are Completed; panics with the phases after ten minutes.
async fn wait_completed(client: &Client, n: usize) {
    let requests: Api<ContainerRecreateRequest> = Api::namespaced(client.clone(), NAMESPACE);
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let list = requests.list(&ListParams::default()).await.unwrap().items;
        let completed = list
            .iter()
            .filter(|c| {
                c.status.as_ref().is_some_and(|s| {
                    s.phase == "Completed"
                        && s.container_recreate_states
                            .iter()
                            .all(|c| c.phase == "Succeeded")
                })
            })
            .count();
        if completed == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{completed} of {n} requests completed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until every agent has its watch of requests open.
async fn wait_agents_watching(sim: &Sim, nodes: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let watching: u64 = sim
            .counters()
            .snapshot()
            .into_iter()
            .filter(|(k, _)| {
                k.verb == "watch"
                    && k.resource == "containerrecreaterequests"
                    && k.user_agent.starts_with(AGENT_USER_AGENT)
            })
            .map(|(_, v)| v)
            .sum();
        if watching >= nodes as u64 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{watching} of {nodes} agents watching"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::main]
async fn main() {
    let nodes: usize = env_or("CRR_BENCH_NODES", 100);
    let n: usize = env_or("CRR_BENCH_REQUESTS", 1000);
    let idle = Duration::from_secs(env_or("CRR_BENCH_IDLE_SECS", 10));
    println!(
        "{n} requests on {nodes} simulated nodes; load average at start {}",
        load_average()
    );
    let cri_dir: PathBuf =
        std::env::temp_dir().join(format!("kruise-crr-bench-{}", std::process::id()));
    let sim = Sim::start(SimConfig {
        nodes,
        cri_dir: Some(cri_dir.clone()),
        ..Default::default()
    })
    .await
    .unwrap();
    let timings = sim.shared().config.kubelet;
    let client = sim.client().unwrap();
    kruise_testkit::sim::install_crds(&client, &[kruise_crr::api::crd::crd().unwrap()]).await;
    let kubeconfig = sim.kubeconfig_path().unwrap();

    let started = Instant::now();
    let pods = create_pods(&client, n, nodes).await;
    println!(
        "{n} pods running in {:.1} s; kubelet start/ready {:?}/{:?}",
        started.elapsed().as_secs_f64(),
        timings.start_delay,
        timings.ready_delay
    );

    // The floor, on the same pods, before any agent runs.
    let floor = minimal_cri_restart(&sim, &client, &pods).await;
    let one_restart = timings.start_delay + timings.ready_delay;
    println!(
        "floor: {n} containers stopped through CRI by a minimal client and restarted ready: {:.2} s (one restart alone: {:.2} s)",
        floor.as_secs_f64(),
        one_restart.as_secs_f64()
    );
    let pods = wait_pods(&client, n, |_| 1).await;

    // The cluster-side controller (it syncs the pod's container statuses into the
    // requests, which the agents wait for) in this process.
    let shutdown = CancellationToken::new();
    let opts = RunOptions {
        name: controller::CONTROLLER_NAME.into(),
        concurrency: 8,
        metrics: Metrics::new(),
        readiness: Readiness::default(),
        shutdown: shutdown.clone(),
        leadership: Default::default(),
    };
    let controller_task = {
        let client = client.clone();
        tokio::spawn(async move { controller::run(client, None, opts).await })
    };

    let mut agents = Agents::start(&sim, nodes, &kubeconfig);
    wait_agents_watching(&sim, nodes).await;
    agents.assert_running();
    // Idle: started and watching, nothing to do.
    let cpu_before = agents.cpu();
    tokio::time::sleep(idle).await;
    let idle_mcpu = millicores(&cpu_before, &agents.cpu(), idle);
    println!(
        "agent idle, per node: RSS {}; CPU over {} s {}; threads {}",
        mean_max(&agents.rss_mib(), "MiB"),
        idle.as_secs(),
        mean_max(&idle_mcpu, "millicores"),
        mean_max(&agents.threads(), "")
    );
    println!("  the first agent: {}", rss(agents.0[0].id()));

    // Busy: every request at once.
    let peaks: Vec<PeakRss> = agents.0.iter().map(|c| PeakRss::watch(c.id())).collect();
    let writes_before = sim.counters().by_user_agent(AGENT_USER_AGENT);
    let cpu_before = agents.cpu();
    let sim_cpu_before = cpu_secs("self");
    let started = Instant::now();
    create_requests(&client, &pods).await;
    let created = started.elapsed();
    wait_completed(&client, n).await;
    let took = started.elapsed();
    let busy_mcpu = millicores(&cpu_before, &agents.cpu(), took);
    agents.assert_running();
    wait_pods(&client, n, |_| 2).await;
    println!(
        "{n} requests Completed in {:.2} s (created in {:.2} s): {:.1}x the floor",
        took.as_secs_f64(),
        created.as_secs_f64(),
        took.as_secs_f64() / floor.as_secs_f64()
    );
    println!(
        "agent busy, per node: peak RSS {}; CPU {} (agents' requests to the API: {}); simulator and controller: {:.2} CPU s",
        mean_max(
            &peaks.into_iter().map(PeakRss::peak_mib).collect::<Vec<_>>(),
            "MiB"
        ),
        mean_max(&busy_mcpu, "millicores"),
        sim.counters().by_user_agent(AGENT_USER_AGENT) - writes_before,
        cpu_secs("self") - sim_cpu_before
    );

    // Idle again, with the finished requests still stored.
    let cpu_before = agents.cpu();
    tokio::time::sleep(idle).await;
    let idle_mcpu = millicores(&cpu_before, &agents.cpu(), idle);
    println!(
        "agent idle after, per node: RSS {}; CPU over {} s {}",
        mean_max(&agents.rss_mib(), "MiB"),
        idle.as_secs(),
        mean_max(&idle_mcpu, "millicores")
    );
    println!("load average at end {}", load_average());

    drop(agents);
    shutdown.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(30), controller_task).await;
    sim.shutdown().await;
    let _ = std::fs::remove_dir_all(cri_dir);
}
