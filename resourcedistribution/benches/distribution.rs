//! ResourceDistribution figures against kruise-sim, the controller in its own process: one
//! distribution of a Secret to N labelled namespaces — the time until every copy exists,
//! one data change reaching every copy, namespace churn (C namespaces labelled in, C
//! others deleted), and a restart — each against a minimal writer in the same run (the same
//! creates and updates of Secrets of its own, sent 32 at a time with nothing else: what the
//! simulator allows any controller). Printed: the times and their ratio to the floor, the
//! controller's Secret requests per namespace, its RSS and CPU.
//!
//! `cargo bench -p kruise-resourcedistribution --bench distribution`. Environment:
//! `RD_BENCH_NAMESPACES` (default 1000), `RD_BENCH_CHURN` (default 100),
//! `KRUISE_TEST_LOGS=1` (the controller's log on stderr).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kruise_resourcedistribution::api::{HASH_ANNOTATION, ResourceDistribution};
use kruise_resourcedistribution::plan::resource_hash;
use kruise_sim::{Sim, SimConfig};
use kruise_testkit::bench::{PeakRss, env_or, start_controller};
use kruise_testkit::process::{cpu_secs, rss};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::json;

#[global_allocator]
static ALLOCATOR: kruise_runtime::Allocator = kruise_runtime::Allocator;

const AGENT: &str = "kruise-resourcedistribution/";
const IN_FLIGHT: usize = 32;
const LIMIT: Duration = Duration::from_secs(600);
const LABEL: &str = "bench.kruise.io/distribute";

/// The controller's Secret requests so far: creates, updates, deletes, reads.
#[derive(Clone, Copy, Debug, Default)]
struct SecretRequests {
    create: u64,
    update: u64,
    delete: u64,
    get: u64,
}

impl SecretRequests {
    fn of(sim: &Sim) -> Self {
        let mut r = SecretRequests::default();
        for (key, n) in sim.counters().snapshot() {
            if !key.user_agent.starts_with(AGENT) || key.resource != "secrets" {
                continue;
            }
            match key.verb.as_str() {
                "create" => r.create += n,
                "update" | "patch" => r.update += n,
                "delete" => r.delete += n,
                "get" => r.get += n,
                _ => {}
            }
        }
        r
    }

    fn since(self, before: Self) -> Self {
        SecretRequests {
            create: self.create - before.create,
            update: self.update - before.update,
            delete: self.delete - before.delete,
            get: self.get - before.get,
        }
    }

    fn per_namespace(self, namespaces: usize) -> String {
        let n = namespaces as f64;
        format!(
            "{:.2} creates, {:.2} updates, {:.2} deletes, {:.2} reads per namespace",
            self.create as f64 / n,
            self.update as f64 / n,
            self.delete as f64 / n,
            self.get as f64 / n
        )
    }
}

async fn for_each(
    items: Vec<String>,
    f: impl Fn(String) -> futures::future::BoxFuture<'static, ()>,
) {
    futures::stream::iter(items)
        .map(f)
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<()>>()
        .await;
}

async fn create_namespaces(client: &Client, names: &[String], labelled: bool) {
    let api = Api::<Namespace>::all(client.clone());
    for_each(names.to_vec(), move |name| {
        let api = api.clone();
        Box::pin(async move {
            let labels = if labelled {
                json!({LABEL: "yes"})
            } else {
                json!({})
            };
            let ns: Namespace =
                serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}}))
                    .unwrap();
            api.create(&PostParams::default(), &ns).await.unwrap();
        })
    })
    .await;
}

/// The floor: the same Secret created in every namespace, then updated in every one, by a
/// client that does nothing else.
async fn minimal_writer(client: &Client, namespaces: &[String]) -> (Duration, Duration) {
    let secret = |token: &str| -> Secret {
        serde_json::from_value(
            json!({"metadata": {"name": "floor"}, "stringData": {"token": token}}),
        )
        .unwrap()
    };
    let start = Instant::now();
    let c = client.clone();
    for_each(namespaces.to_vec(), move |ns| {
        let api = Api::<Secret>::namespaced(c.clone(), &ns);
        let body = secret("v1");
        Box::pin(async move {
            api.create(&PostParams::default(), &body).await.unwrap();
        })
    })
    .await;
    let create = start.elapsed();
    let start = Instant::now();
    let c = client.clone();
    for_each(namespaces.to_vec(), move |ns| {
        let api = Api::<Secret>::namespaced(c.clone(), &ns);
        let body = secret("v2");
        Box::pin(async move {
            api.replace("floor", &PostParams::default(), &body)
                .await
                .unwrap();
        })
    })
    .await;
    (create, start.elapsed())
}

async fn wait_status(client: &Client, name: &str, desired: i32, succeeded: i32) -> Duration {
    let api = Api::<ResourceDistribution>::all(client.clone());
    let start = Instant::now();
    loop {
        let rd = api.get(name).await.unwrap();
        if let Some(s) = &rd.status
            && s.observed_generation == rd.metadata.generation.unwrap_or_default()
            && (s.desired, s.succeeded) == (desired, succeeded)
        {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < LIMIT,
            "status never reached {desired}/{succeeded}: {:?}",
            rd.status
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until every copy named `shared` carries `hash`.
async fn wait_copies(client: &Client, count: usize, hash: &str) -> Duration {
    let api = Api::<Secret>::all(client.clone());
    let start = Instant::now();
    loop {
        let list = api
            .list(&ListParams::default().fields("metadata.name=shared"))
            .await
            .unwrap();
        let current = list
            .items
            .iter()
            .filter(|s| s.annotations().get(HASH_ANNOTATION).map(String::as_str) == Some(hash))
            .count();
        if current == count {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < LIMIT,
            "{current} of {count} copies current"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn ratio(controller: Duration, floor: Duration) -> String {
    format!(
        "{:.2} s ({:.2}× the minimal writer's {:.2} s)",
        controller.as_secs_f64(),
        controller.as_secs_f64() / floor.as_secs_f64().max(0.001),
        floor.as_secs_f64()
    )
}

#[tokio::main]
async fn main() {
    let n: usize = env_or("RD_BENCH_NAMESPACES", 1000);
    let churn: usize = env_or("RD_BENCH_CHURN", 100).min(n);
    let sim = Sim::start(SimConfig::default()).await.unwrap();
    let client = sim.client().unwrap();
    kruise_testkit::sim::install_crds(
        &client,
        &[kruise_resourcedistribution::api::crd::crd().unwrap()],
    )
    .await;
    let dir = std::env::temp_dir().join(format!("rd-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).unwrap();
    let namespaces: Vec<String> = (0..n).map(|i| format!("team-{i}")).collect();
    create_namespaces(&client, &namespaces, true).await;

    let (floor_create, floor_update) = minimal_writer(&client, &namespaces).await;

    let bin = env!("CARGO_BIN_EXE_kruise-resourcedistribution");
    let mut controller = start_controller(bin, &kubeconfig).await;
    let pid = controller.child.id();
    let idle_rss = rss(pid);
    let peak = PeakRss::watch(pid);
    let cpu_before = cpu_secs(&pid.to_string());

    let resource = |token: &str| json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "shared"}, "stringData": {"token": token}});
    let rds = Api::<ResourceDistribution>::all(client.clone());
    let rd: ResourceDistribution = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "ResourceDistribution",
        "metadata": {"name": "bench"},
        "spec": {"resource": resource("v1"), "targets": {"namespaceLabelSelector": {"matchLabels": {LABEL: "yes"}}}},
    }))
    .unwrap();
    let before = SecretRequests::of(&sim);
    let start = Instant::now();
    rds.create(&PostParams::default(), &rd).await.unwrap();
    let n32 = i32::try_from(n).unwrap();
    wait_status(&client, "bench", n32, n32).await;
    let create_time = start.elapsed();
    let created = SecretRequests::of(&sim).since(before);

    let before = SecretRequests::of(&sim);
    let start = Instant::now();
    let updated_rd = rds
        .patch(
            "bench",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resource": resource("v2")}})),
        )
        .await
        .unwrap();
    wait_copies(&client, n, &resource_hash(&updated_rd.spec.resource)).await;
    let update_time = start.elapsed();
    let updated = SecretRequests::of(&sim).since(before);

    // Churn: `churn` new namespaces labelled in, `churn` of the first ones deleted.
    let before = SecretRequests::of(&sim);
    let start = Instant::now();
    let added: Vec<String> = (0..churn).map(|i| format!("late-{i}")).collect();
    create_namespaces(&client, &added, true).await;
    let c = client.clone();
    for_each(namespaces[..churn].to_vec(), move |ns| {
        let api = Api::<Namespace>::all(c.clone());
        Box::pin(async move {
            api.delete(&ns, &DeleteParams::default()).await.unwrap();
        })
    })
    .await;
    wait_status(&client, "bench", n32, n32).await;
    let churn_time = start.elapsed();
    let churned = SecretRequests::of(&sim).since(before);
    let busy_cpu = cpu_secs(&pid.to_string()) - cpu_before;
    let peak_rss = peak.peak_mib();

    // Idle, then a restart: nothing rewritten.
    let before = SecretRequests::of(&sim);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let idle = SecretRequests::of(&sim).since(before);
    let settled_rss = rss(pid);
    let _ = controller.child.kill();
    let _ = controller.child.wait();
    let before = SecretRequests::of(&sim);
    let start = Instant::now();
    let restarted = start_controller(bin, &kubeconfig).await;
    let ready = start.elapsed();
    let restart_reads = async {
        loop {
            let r = SecretRequests::of(&sim).since(before);
            if r.get >= n as u64 {
                return r;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let after_restart = tokio::time::timeout(LIMIT, restart_reads).await.unwrap();
    let restart_time = start.elapsed();
    drop(restarted);

    println!(
        "ResourceDistribution, {n} namespaces ({churn} churned), controller in its own process:"
    );
    println!(
        "  create: every copy in {}",
        ratio(create_time, floor_create)
    );
    println!("    {}", created.per_namespace(n));
    println!(
        "  one data change: every copy in {}",
        ratio(update_time, floor_update)
    );
    println!("    {}", updated.per_namespace(n));
    println!(
        "  churn ({churn} labelled in, {churn} deleted): synced in {:.2} s; {} creates, {} updates, {} deletes",
        churn_time.as_secs_f64(),
        churned.create,
        churned.update,
        churned.delete
    );
    println!(
        "  idle 5 s: {} writes",
        idle.create + idle.update + idle.delete
    );
    println!(
        "  restart: ready in {:.2} s, every copy read once in {:.2} s ({} reads), {} writes",
        ready.as_secs_f64(),
        restart_time.as_secs_f64(),
        after_restart.get,
        after_restart.create + after_restart.update + after_restart.delete
    );
    println!(
        "  controller RSS: {idle_rss} before, peak {peak_rss:.1} MiB, {settled_rss} settled; CPU {busy_cpu:.2} s busy"
    );
    let _ = std::fs::remove_dir_all(&dir);
    sim.shutdown().await;
}
