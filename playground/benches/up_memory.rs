//! `up`'s memory: `cargo bench -p kruise-playground --bench up_memory`.
//!
//! Starts `kruise-playground up` (every family in-process) as a process with 100 simulated
//! nodes (110 pods each) and prints its RSS, settled: idle; with 2,000 pods of CloneSets
//! ready; with 10,000; and after each of four cycles of creating 2,000 pods and deleting
//! them again, which must stay flat, each with the peak RSS so far (`VmHWM`). The target:
//! under 1 GiB at 10,000 pods. Events live a minute here (see [`EVENT_TTL`]); their count
//! is printed with each figure.
//! `UP_BENCH_PODS` (default 10000) and `UP_BENCH_CYCLE_PODS` (2000) change the sizes.

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::serde_json::json;
use kruise_testkit::process::settled_rss;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

const BIN: &str = env!("CARGO_BIN_EXE_kruise-playground");
/// Pods per CloneSet: the CloneSets of a size are made of these.
const PODS_PER_CLONESET: usize = 1_000;
const WAIT: Duration = Duration::from_secs(900);
/// Events expire a minute after their last write (kube-apiserver's `--event-ttl`, 1 h by
/// default): each cycle's Events (a dozen per pod) are then gone a cycle or two later, and
/// the cycles compare what else is kept. The Events stored are printed beside each figure.
const EVENT_TTL: &str = "60s";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `kruise-playground up`, stopped when dropped.
struct Up {
    child: Child,
    kubeconfig: PathBuf,
}

impl Up {
    fn start(dir: &std::path::Path) -> anyhow::Result<Up> {
        let kubeconfig = dir.join("kubeconfig");
        let mut child = Command::new(BIN)
            .args([
                "up",
                "--nodes",
                "100",
                "--event-ttl",
                EVENT_TTL,
                "--kubeconfig",
            ])
            .arg(&kubeconfig)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting kruise-playground up")?;
        let stdout = child.stdout.take().context("its stdout")?;
        // It prints `export KUBECONFIG=` once the families are started.
        for line in BufReader::new(stdout).lines() {
            if line?.contains("export KUBECONFIG=") {
                return Ok(Up { child, kubeconfig });
            }
        }
        anyhow::bail!("kruise-playground up exited before it was ready")
    }

    async fn client(&self) -> anyhow::Result<kube::Client> {
        let config = kube::Config::from_custom_kubeconfig(
            Kubeconfig::read_from(&self.kubeconfig)?,
            &KubeConfigOptions::default(),
        )
        .await?;
        Ok(kube::Client::try_from(config)?)
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn clonesets(client: &kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource {
            group: "apps.kruise.io".into(),
            version: "v1beta1".into(),
            api_version: "apps.kruise.io/v1beta1".into(),
            kind: "CloneSet".into(),
            plural: "clonesets".into(),
        },
    )
}

/// Creates CloneSets `prefix-<i>` until they hold `pods` pods, and waits until all are
/// ready.
async fn scale_up(client: &kube::Client, prefix: &str, pods: usize) -> anyhow::Result<()> {
    let api = clonesets(client);
    let names: Vec<String> = (0..pods.div_ceil(PODS_PER_CLONESET))
        .map(|i| format!("{prefix}-{i}"))
        .collect();
    for (i, name) in names.iter().enumerate() {
        let replicas = PODS_PER_CLONESET.min(pods - i * PODS_PER_CLONESET);
        let cs: DynamicObject = k8s_openapi::serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "main", "image": "nginx:1",
                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}
                }
            }
        }))?;
        api.create(&PostParams::default(), &cs).await?;
    }
    let started = Instant::now();
    loop {
        let mut ready = 0;
        for name in &names {
            let cs = api.get(name).await?;
            ready += cs.data["status"]["readyReplicas"].as_u64().unwrap_or(0) as usize;
        }
        if ready >= pods {
            println!("  {pods} pods ready in {:.1?}", started.elapsed());
            return Ok(());
        }
        anyhow::ensure!(
            started.elapsed() < WAIT,
            "{ready} of {pods} pods ready after {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Deletes every CloneSet and waits until their pods are gone.
async fn delete_all(client: &kube::Client) -> anyhow::Result<()> {
    let api = clonesets(client);
    for cs in api.list(&ListParams::default()).await?.items {
        let name = cs.metadata.name.clone().unwrap_or_default();
        api.delete(&name, &DeleteParams::default()).await?;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let started = Instant::now();
    loop {
        let left = pods
            .list_metadata(&ListParams::default())
            .await?
            .items
            .len();
        if left == 0 {
            return Ok(());
        }
        anyhow::ensure!(started.elapsed() < WAIT, "{left} pods left after {WAIT:?}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The settled RSS of `pid`, and how much of the simulator's data is pods and Events (their
/// count and JSON size: what the store holds decoded).
async fn figure(client: &kube::Client, pid: u32) -> anyhow::Result<String> {
    let rss = settled_rss(pid).await;
    let mut stored = Vec::new();
    for (kind, resource) in [
        ("pods", ApiResource::erase::<Pod>(&())),
        (
            "events",
            ApiResource::erase::<k8s_openapi::api::core::v1::Event>(&()),
        ),
    ] {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let items = api.list(&ListParams::default()).await?.items;
        let bytes: usize = items
            .iter()
            .map(|o| k8s_openapi::serde_json::to_vec(o).map_or(0, |v| v.len()))
            .sum();
        stored.push(format!(
            "{} {kind} ({:.1} MiB of JSON)",
            items.len(),
            bytes as f64 / 1048576.0
        ));
    }
    Ok(format!(
        "{rss}; peak so far {}; stored: {}",
        peak_rss(pid),
        stored.join(", ")
    ))
}

/// The highest RSS `pid` has had (`VmHWM`): the bursts of a scale-up or mass deletion.
fn peak_rss(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            let kib: f64 = status
                .lines()
                .find_map(|line| line.strip_prefix("VmHWM:"))?
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()?;
            Some(format!("{:.1} MiB", kib / 1024.0))
        })
        .unwrap_or_else(|| "unknown".into())
}

async fn run() -> anyhow::Result<()> {
    let pods = env_usize("UP_BENCH_PODS", 10_000);
    let cycle_pods = env_usize("UP_BENCH_CYCLE_PODS", 2_000);
    let dir = std::env::temp_dir().join(format!("up-memory-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let up = Up::start(&dir)?;
    let pid = up.child.id();
    let client = up.client().await?;
    println!("kruise-playground up, every family, 100 nodes:");
    println!("  idle: {}", figure(&client, pid).await?);

    scale_up(&client, "first", cycle_pods).await?;
    println!("  {cycle_pods} pods: {}", figure(&client, pid).await?);
    scale_up(&client, "more", pods - cycle_pods).await?;
    println!("  {pods} pods: {}", figure(&client, pid).await?);
    delete_all(&client).await?;
    println!("  all deleted: {}", figure(&client, pid).await?);

    for cycle in 1..=4 {
        scale_up(&client, &format!("cycle{cycle}"), cycle_pods).await?;
        delete_all(&client).await?;
        println!(
            "  after cycle {cycle} ({cycle_pods} pods created and deleted): {}",
            figure(&client, pid).await?
        );
    }
    drop(up);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn main() -> anyhow::Result<()> {
    tokio::runtime::Runtime::new()?.block_on(run())
}
