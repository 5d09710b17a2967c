//! PodUnavailableBudget under load: 50 concurrent clients evicting the pods of a 200-pod
//! workload through kruise-sim's eviction subresource, under a budget with
//! `maxUnavailable: 10`, with two replicas of kruise-webhook's validating pod chain (the
//! PUB step as kruise-webhook builds it, each with its own client and budget watch) behind
//! one address that spreads the API server's calls over both, as a Service does. The PUB
//! controller runs in-process, and every evicted pod is replaced at once (as its workload
//! would replace it), so the churn goes on for the whole run.
//!
//! The pods are plain pods labelled as the workload's (`app: bench`), recreated by the
//! benchmark, with the budget's expected count from `protectTotalReplicas`: a CloneSet
//! controller would add its own writes and none of the budget's.
//!
//! Printed: the most pods ever unavailable at once (sampled on every pod change seen by a
//! watch; must stay <= maxUnavailable), evictions granted and refused, the webhook's
//! latency (p50/p99/max, timed around each review in the webhook, target p99 < 5 ms), and
//! the eviction round trip seen by the clients against the floor: the same clients evicting
//! with no webhook configured, in the same run. Then the review latency of the
//! required-calls floor, the same clients through two replicas of a step that makes only
//! the API calls a grant and a refusal cannot do without (one status write per grant, one
//! pod read per refused eviction), deciding in memory shared by both replicas: the webhook's
//! p99 against it is the figure for this machine, where those calls alone pass 5 ms.
//!
//! `cargo bench -p kruise-protection --bench pub_load`. Environment: `PUB_BENCH_PODS`
//! (default 200), `PUB_BENCH_CLIENTS` (50), `PUB_BENCH_MAX_UNAVAILABLE` (10),
//! `PUB_BENCH_SECS` (30, the run under the budget), `PUB_BENCH_FLOOR_SECS` (10),
//! `PUB_BENCH_BACKOFF_MS` (100: how long a refused client waits before its next eviction).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_admission::FailurePolicy;
use kruise_admission::certs::{generate_ca, issue_serving};
use kruise_admission::pod_chain::{
    PodOperation, PodScope, PodValidationRequest, PodValidator, PodVerdict, ValidatingPodChain,
};
use kruise_admission::publish::{Endpoint, Owned, publish};
use kruise_admission::{AdmissionHandler, AdmissionRoutes, HandlerError, WebhookSpec};
use kruise_core::featuregate::FeatureGates;
use kruise_core::pods::is_pod_active;
use kruise_protection::api::v1beta1::PodUnavailableBudget;
use kruise_protection::controller;
use kruise_protection::plan::budget::is_available;
use kruise_protection::pod_admission::pub_validator_step;
use kruise_runtime::family::{LiveCluster, StepContext};
use kruise_runtime::{Metrics, Readiness, RunOptions};
use kruise_sim::{Sim, SimConfig};
use kruise_testkit::bench::env_or;
use kube::api::{Api, EvictParams, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::runtime::watcher;
use kube::{Client, ResourceExt as _};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[global_allocator]
static ALLOCATOR: kruise_runtime::Allocator = kruise_runtime::Allocator;

const NAMESPACE: &str = "default";

/// One review's time in the webhook, whether it was allowed, and whether it was an eviction
/// (else a pod DELETE or UPDATE).
type Sample = (Duration, bool, bool);

/// The validating pod chain of one webhook replica, each review timed.
struct Timed {
    chain: ValidatingPodChain,
    samples: Arc<Mutex<Vec<Sample>>>,
}

impl AdmissionHandler for Timed {
    fn path(&self) -> &str {
        self.chain.path()
    }

    fn webhook(&self) -> WebhookSpec {
        self.chain.webhook()
    }

    fn webhooks(&self) -> Vec<WebhookSpec> {
        self.chain.webhooks()
    }

    fn handle<'a>(
        &'a self,
        request: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(async move {
            let start = Instant::now();
            let outcome = self.chain.handle(request).await;
            let allowed = outcome.as_ref().is_ok_and(|r| r.allowed);
            let eviction = request.sub_resource.as_deref() == Some("eviction");
            self.samples
                .lock()
                .unwrap()
                .push((start.elapsed(), allowed, eviction));
            outcome
        })
    }
}

/// The workload's pods, as the floors' steps cover them.
fn workload_scope() -> Vec<PodScope> {
    vec![PodScope {
        namespace_selector: None,
        object_selector: Some(LabelSelector {
            match_labels: Some([("app".to_string(), "bench".to_string())].into()),
            ..Default::default()
        }),
    }]
}

/// The budget as the required-calls floor keeps it, shared by both of its replicas in
/// memory (so they never conflict): the bench's view of the pods, and the pods granted that
/// the view still shows available.
struct SharedBudget {
    view: Arc<Mutex<WorkloadPods>>,
    granted: Mutex<HashSet<String>>,
    desired: usize,
    max_unavailable: usize,
}

impl SharedBudget {
    /// Whether evicting `name` is granted now (recording it), `None` when it was already.
    fn grant(&self, name: &str) -> Option<bool> {
        let view = self.view.lock().unwrap();
        let mut granted = self.granted.lock().unwrap();
        granted.retain(|g| view.available.get(g) == Some(&true));
        if granted.contains(name) || view.available.get(name) != Some(&true) {
            return None;
        }
        let unavailable = self.desired.saturating_sub(view.available_count());
        let grant = unavailable + granted.len() < self.max_unavailable;
        if grant {
            granted.insert(name.to_string());
        }
        Some(grant)
    }
}

/// A floor's step, covering the workload's pods and failing closed.
enum FloorStep {
    /// The webhook floor: allows everything, so a review costs only the chain and the
    /// admission round trip.
    AllowAll,
    /// The required-calls floor: makes only the API calls the PUB step cannot do without,
    /// each once and never conflicting: a grant writes the budget's status (a merge patch
    /// recording the pod), a refused eviction reads the pod (the confirmation the PUB step
    /// makes on the API's copy). Its decision is made in memory across both replicas.
    RequiredCalls {
        client: Client,
        budget: Arc<SharedBudget>,
    },
}

impl PodValidator for FloorStep {
    fn name(&self) -> &'static str {
        match self {
            FloorStep::AllowAll => "allow-all",
            FloorStep::RequiredCalls { .. } => "required-calls",
        }
    }

    fn order(&self) -> u32 {
        50
    }

    fn scopes(&self) -> Vec<PodScope> {
        workload_scope()
    }

    fn failure_policy(&self) -> FailurePolicy {
        FailurePolicy::Fail
    }

    fn validate<'a>(
        &'a self,
        request: &'a PodValidationRequest,
    ) -> BoxFuture<'a, Result<PodVerdict, HandlerError>> {
        Box::pin(async move {
            let FloorStep::RequiredCalls { client, budget } = self else {
                return Ok(PodVerdict::Allow);
            };
            if request.operation != PodOperation::Evict {
                return Ok(PodVerdict::Allow);
            }
            let failed = |e: kube::Error| HandlerError::Internal(e.to_string());
            match budget.grant(&request.name) {
                None => Ok(PodVerdict::Allow),
                Some(true) => {
                    let budgets =
                        Api::<PodUnavailableBudget>::namespaced(client.clone(), &request.namespace);
                    let record = json!({"status": {"disruptedPods": {
                        &request.name: jiff::Timestamp::now().to_string()}}});
                    budgets
                        .patch_status("bench", &PatchParams::default(), &Patch::Merge(&record))
                        .await
                        .map_err(failed)?;
                    Ok(PodVerdict::Allow)
                }
                Some(false) => {
                    let pods = Api::<Pod>::namespaced(client.clone(), &request.namespace);
                    pods.get_opt(&request.name).await.map_err(failed)?;
                    Ok(PodVerdict::Deny("the budget is used".into()))
                }
            }
        })
    }
}

/// One webhook replica: a step of the validating pod chain (the PUB step built as
/// kruise-webhook builds it, on its own client; or the floor's), served over TLS on a port
/// of its own.
struct WebhookReplica {
    routes: AdmissionRoutes,
    addr: std::net::SocketAddr,
    samples: Arc<Mutex<Vec<Sample>>>,
    calls: Arc<Mutex<Vec<Call>>>,
}

/// What a webhook replica's API call was for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Phase {
    /// A grant's write of the budget's status (the PUB step's conditioned replace, the
    /// required-calls floor's merge patch).
    StatusWrite,
    /// A read of the budget (after a conflict).
    BudgetRead,
    /// A read of the pod (an eviction refused or exempt on the watch's copy, or a pod the
    /// watch has not seen).
    PodRead,
}

/// One API call of a webhook replica: what for, how long until the response, its code.
type Call = (Phase, Duration, u16);

/// The phase of a request, `None` for the watches (and anything else).
fn phase_of(method: &http::Method, uri: &http::Uri) -> Option<Phase> {
    let path = uri.path();
    let watch = uri.query().is_some_and(|q| q.contains("watch="));
    match (method, watch) {
        (&http::Method::PUT | &http::Method::PATCH, _)
            if path.contains("/podunavailablebudgets/") =>
        {
            Some(Phase::StatusWrite)
        }
        (&http::Method::GET, false) if path.contains("/podunavailablebudgets/") => {
            Some(Phase::BudgetRead)
        }
        (&http::Method::GET, false) if path.contains("/pods/") => Some(Phase::PodRead),
        _ => None,
    }
}

/// Times each API call of a webhook replica's client (until the response's headers).
#[derive(Clone)]
struct TimedCalls<S> {
    inner: S,
    calls: Arc<Mutex<Vec<Call>>>,
}

impl<S, B, R> tower::Service<http::Request<B>> for TimedCalls<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let phase = phase_of(request.method(), request.uri());
        let start = Instant::now();
        let response = self.inner.call(request);
        let calls = self.calls.clone();
        Box::pin(async move {
            let response = response.await;
            if let (Some(phase), Ok(r)) = (phase, &response) {
                let code = r.status().as_u16();
                calls.lock().unwrap().push((phase, start.elapsed(), code));
            }
            response
        })
    }
}

/// A client of the simulator whose calls (but the watches) are timed into `calls`.
fn timed_client(sim: &Sim, calls: Arc<Mutex<Vec<Call>>>) -> Client {
    kube::client::ClientBuilder::try_from(sim.client_config().unwrap())
        .unwrap()
        .with_layer(&tower::layer::layer_fn(move |inner| TimedCalls {
            inner,
            calls: calls.clone(),
        }))
        .build()
}

/// Which step a replica serves.
#[derive(Clone)]
enum StepKind {
    Pub,
    AllowAll,
    RequiredCalls(Arc<SharedBudget>),
}

async fn webhook_replica(
    sim: &Sim,
    kind: StepKind,
    tls: axum_server::tls_rustls::RustlsConfig,
    shutdown: &CancellationToken,
) -> WebhookReplica {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let step: Arc<dyn PodValidator> = match kind {
        StepKind::Pub => pub_validator_step(&StepContext {
            gates: FeatureGates::default(),
            live: Some(LiveCluster {
                client: timed_client(sim, calls.clone()),
                refresh: Arc::new(tokio::sync::Notify::new()),
                shutdown: shutdown.clone(),
            }),
            metrics: Metrics::new(),
        }),
        StepKind::AllowAll => Arc::new(FloorStep::AllowAll),
        StepKind::RequiredCalls(budget) => Arc::new(FloorStep::RequiredCalls {
            client: timed_client(sim, calls.clone()),
            budget,
        }),
    };
    let chain = ValidatingPodChain::new(vec![step]);
    // The budget's scope, once the step's watch has seen it.
    kruise_testkit::eventually(
        "the budget in the step's scope",
        kruise_testkit::WAIT,
        || {
            let empty = chain.webhook_specs().is_empty();
            async move { (!empty).then_some(()) }
        },
    )
    .await;
    let samples = Arc::new(Mutex::new(Vec::new()));
    let routes = AdmissionRoutes::new().handler(Timed {
        chain,
        samples: samples.clone(),
    });
    let server = kruise_admission::serve(
        "127.0.0.1:0".parse().unwrap(),
        routes.clone(),
        tls,
        shutdown.clone(),
    )
    .await
    .unwrap();
    WebhookReplica {
        routes,
        addr: server.addr,
        samples,
        calls,
    }
}

/// One address in front of `backends`, each new connection to the next (the API server
/// opens one per webhook call, so calls alternate), as a Service's endpoints are chosen.
async fn round_robin(
    backends: Vec<std::net::SocketAddr>,
    shutdown: CancellationToken,
) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut next = 0usize;
        loop {
            let accepted = tokio::select! {
                () = shutdown.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let Ok((mut inbound, _)) = accepted else {
                continue;
            };
            let backend = backends[next % backends.len()];
            next += 1;
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(backend).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    addr
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.25",
            "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}}))
    .unwrap()
}

/// What the watch of the workload's pods keeps: the pods available now, the most ever
/// unavailable while sampling, and which gone or terminating pods were replaced.
#[derive(Default)]
struct WorkloadPods {
    available: HashMap<String, bool>,
    replaced: HashSet<String>,
    sampling: bool,
    max_unavailable: usize,
}

impl WorkloadPods {
    fn available_names(&self) -> Vec<String> {
        self.available
            .iter()
            .filter(|(_, a)| **a)
            .map(|(n, _)| n.clone())
            .collect()
    }

    fn available_count(&self) -> usize {
        self.available.values().filter(|a| **a).count()
    }
}

/// Watches the pods: keeps the view, samples unavailability on every change, and sends
/// every pod that is deleted or starts terminating to be replaced.
fn watch_pods(
    client: Client,
    desired: usize,
    view: Arc<Mutex<WorkloadPods>>,
    replace: tokio::sync::mpsc::UnboundedSender<()>,
    shutdown: CancellationToken,
) {
    let api = Api::<Pod>::namespaced(client, NAMESPACE);
    let stream = watcher(api, watcher::Config::default().labels("app=bench"));
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            let event = tokio::select! {
                () = shutdown.cancelled() => return,
                event = stream.next() => event,
            };
            let Some(Ok(event)) = event else {
                continue;
            };
            let mut view = view.lock().unwrap();
            let (pod, gone) = match event {
                watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) => (pod, false),
                watcher::Event::Delete(pod) => (pod, true),
                watcher::Event::Init | watcher::Event::InitDone => continue,
            };
            let name = pod.name_any();
            let terminating = gone || !is_pod_active(&pod);
            if gone {
                view.available.remove(&name);
            } else {
                view.available
                    .insert(name.clone(), is_pod_active(&pod) && is_available(&pod));
            }
            if terminating && view.replaced.insert(name) {
                let _ = replace.send(());
            }
            if view.sampling {
                let unavailable = desired.saturating_sub(view.available_count());
                view.max_unavailable = view.max_unavailable.max(unavailable);
            }
        }
    });
}

/// Creates a new pod for every one replaced.
fn replace_pods(
    client: Client,
    mut replace: tokio::sync::mpsc::UnboundedReceiver<()>,
    created: Arc<AtomicUsize>,
) {
    let api = Api::<Pod>::namespaced(client, NAMESPACE);
    tokio::spawn(async move {
        while replace.recv().await.is_some() {
            let n = created.fetch_add(1, Ordering::Relaxed);
            let api = api.clone();
            tokio::spawn(async move {
                let _ = api
                    .create(&PostParams::default(), &pod(&format!("bench-{n}")))
                    .await;
            });
        }
    });
}

/// What the evicting clients saw.
#[derive(Default)]
struct Outcomes {
    granted: AtomicU64,
    refused: AtomicU64,
    gone: AtomicU64,
    errors: AtomicU64,
    latencies: Mutex<Vec<Duration>>,
}

/// `clients` clients, each on its own connection pool (no retries, so a 429 is seen),
/// evicting a random available pod after another for `secs`; a refused client waits
/// `backoff` first.
async fn evict_for(
    sim: &Sim,
    clients: usize,
    secs: u64,
    backoff: Duration,
    view: &Arc<Mutex<WorkloadPods>>,
) -> Arc<Outcomes> {
    let outcomes = Arc::new(Outcomes::default());
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for i in 0..clients {
        let pods = Api::<Pod>::namespaced(sim.client_without_retries().unwrap(), NAMESPACE);
        let view = view.clone();
        let outcomes = outcomes.clone();
        tasks.push(tokio::spawn(async move {
            // xorshift64: a different, reproducible pick sequence per client.
            let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ (i as u64 + 1);
            while Instant::now() < deadline {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let candidates = view.lock().unwrap().available_names();
                if candidates.is_empty() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
                let name = &candidates[(state % candidates.len() as u64) as usize];
                let start = Instant::now();
                let result = pods.evict(name, &EvictParams::default()).await;
                outcomes.latencies.lock().unwrap().push(start.elapsed());
                match result {
                    Ok(_) => {
                        outcomes.granted.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(kube::Error::Api(status)) if status.code == 429 => {
                        outcomes.refused.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(backoff).await;
                    }
                    Err(kube::Error::Api(status)) if status.code == 404 => {
                        outcomes.gone.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        if outcomes.errors.fetch_add(1, Ordering::Relaxed) < 3 {
                            println!("  eviction error: {e}");
                        }
                    }
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    outcomes
}

/// The API calls `replicas` made, per phase and per response code, against `reviews`.
fn print_calls(replicas: &[WebhookReplica], reviews: usize) {
    let calls: Vec<Call> = replicas
        .iter()
        .flat_map(|r| r.calls.lock().unwrap().clone())
        .collect();
    let reviews = reviews.max(1);
    for phase in [Phase::StatusWrite, Phase::BudgetRead, Phase::PodRead] {
        let of_phase: Vec<&Call> = calls.iter().filter(|(p, _, _)| *p == phase).collect();
        let mut codes: std::collections::BTreeMap<u16, usize> = Default::default();
        for (_, _, code) in &of_phase {
            *codes.entry(*code).or_default() += 1;
        }
        let mut times: Vec<Duration> = of_phase.iter().map(|(_, d, _)| *d).collect();
        println!(
            "  API calls of the webhooks, {phase:?}: {} ({:.1} per 100 reviews, codes {codes:?}): {}",
            of_phase.len(),
            of_phase.len() as f64 * 100.0 / reviews as f64,
            percentiles(&mut times)
        );
    }
}

/// p50, p99 and max, in ms.
fn percentiles(samples: &mut [Duration]) -> String {
    if samples.is_empty() {
        return "no samples".into();
    }
    samples.sort();
    let at = |q: f64| {
        let i = ((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1;
        samples[i].as_secs_f64() * 1000.0
    };
    format!(
        "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} samples)",
        at(0.50),
        at(0.99),
        at(1.0),
        samples.len()
    )
}

fn p99_ms(samples: &mut [Duration]) -> f64 {
    samples.sort();
    let i = ((samples.len() as f64 * 0.99).ceil() as usize).clamp(1, samples.len().max(1)) - 1;
    samples.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

async fn wait_all_available(view: &Arc<Mutex<WorkloadPods>>, desired: usize) -> Duration {
    let start = Instant::now();
    kruise_testkit::eventually("every pod available", Duration::from_secs(300), || {
        let count = view.lock().unwrap().available_count();
        async move { (count >= desired).then_some(()) }
    })
    .await;
    start.elapsed()
}

#[tokio::main]
async fn main() {
    let desired: usize = env_or("PUB_BENCH_PODS", 200);
    let clients: usize = env_or("PUB_BENCH_CLIENTS", 50);
    let max_unavailable: usize = env_or("PUB_BENCH_MAX_UNAVAILABLE", 10);
    let secs: u64 = env_or("PUB_BENCH_SECS", 30);
    let floor_secs: u64 = env_or("PUB_BENCH_FLOOR_SECS", 10);
    let backoff = Duration::from_millis(env_or("PUB_BENCH_BACKOFF_MS", 100));
    println!(
        "{desired} pods on 10 simulated nodes, {clients} evicting clients, maxUnavailable {max_unavailable}; load average at start {}",
        loadavg()
    );

    let sim = Sim::start(SimConfig {
        nodes: 10,
        ..Default::default()
    })
    .await
    .unwrap();
    let client = sim.client().unwrap();
    kruise_testkit::sim::install_crds(&client, &[kruise_protection::api::crd::crd().unwrap()])
        .await;
    let shutdown = CancellationToken::new();

    // The pods, their watch and their replacement.
    let view = Arc::new(Mutex::new(WorkloadPods::default()));
    let (replace_tx, replace_rx) = tokio::sync::mpsc::unbounded_channel();
    let created = Arc::new(AtomicUsize::new(desired));
    watch_pods(
        client.clone(),
        desired,
        view.clone(),
        replace_tx,
        shutdown.clone(),
    );
    replace_pods(client.clone(), replace_rx, created.clone());
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    for i in 0..desired {
        pods.create(&PostParams::default(), &pod(&format!("bench-{i}")))
            .await
            .unwrap();
    }
    let took = wait_all_available(&view, desired).await;
    println!("{desired} pods available in {:.1} s", took.as_secs_f64());

    kruise_runtime::install_crypto_provider();
    let now = jiff::Timestamp::now();
    let ca = generate_ca("bench-ca", now, Duration::from_secs(3600)).unwrap();
    let (cert, key) = issue_serving(
        &ca,
        &["127.0.0.1".to_string()],
        now,
        Duration::from_secs(3600),
    )
    .unwrap();
    let tls = axum_server::tls_rustls::RustlsConfig::from_pem(cert.into_bytes(), key.into_bytes())
        .await
        .unwrap();
    let owned = Owned {
        mutating: None,
        validating: Some("kruise-validating-webhook-configuration".into()),
        crds: Vec::new(),
    };

    // The floor: the same clients, no webhook.
    let replaced_before = created.load(Ordering::Relaxed);
    let floor = evict_for(&sim, clients, floor_secs, backoff, &view).await;
    let floor_replaced = created.load(Ordering::Relaxed) - replaced_before;
    let mut floor_latencies = std::mem::take(&mut *floor.latencies.lock().unwrap());
    let floor_granted = floor.granted.load(Ordering::Relaxed);
    println!(
        "floor, no webhook: {floor_granted} evictions answered 201 in {floor_secs} s ({:.0}/s; {floor_replaced} pods evicted, the rest already terminating), round trip {}",
        floor_granted as f64 / floor_secs as f64,
        percentiles(&mut floor_latencies)
    );
    let took = wait_all_available(&view, desired).await;
    println!(
        "{desired} pods available again {:.1} s after",
        took.as_secs_f64()
    );

    // The webhook floor: the same clients through two replicas of a chain that allows
    // everything, each with its own server behind the same round robin.
    let allow_all = [
        webhook_replica(&sim, StepKind::AllowAll, tls.clone(), &shutdown).await,
        webhook_replica(&sim, StepKind::AllowAll, tls.clone(), &shutdown).await,
    ];
    let allow_all_front =
        round_robin(allow_all.iter().map(|r| r.addr).collect(), shutdown.clone()).await;
    publish(
        &client,
        &allow_all[0].routes,
        &owned,
        &Endpoint::Url(format!("https://127.0.0.1:{}", allow_all_front.port())),
        &ca.cert_pem,
        true,
    )
    .await
    .unwrap();
    let webhook_floor = evict_for(&sim, clients, floor_secs, backoff, &view).await;
    let mut webhook_floor_latencies = std::mem::take(&mut *webhook_floor.latencies.lock().unwrap());
    let mut allow_all_reviews: Vec<Duration> = allow_all
        .iter()
        .flat_map(|r| r.samples.lock().unwrap().clone())
        .map(|(d, _, _)| d)
        .collect();
    println!(
        "webhook floor, a chain that allows everything: {} evictions in {floor_secs} s, round trip {}; review in the webhook {}",
        webhook_floor.granted.load(Ordering::Relaxed),
        percentiles(&mut webhook_floor_latencies),
        percentiles(&mut allow_all_reviews)
    );
    let took = wait_all_available(&view, desired).await;
    println!(
        "{desired} pods available again {:.1} s after",
        took.as_secs_f64()
    );

    // The budget, its controller and two webhook replicas.
    let budget: PodUnavailableBudget = serde_json::from_value(json!({
        "apiVersion": "policy.kruise.io/v1beta1", "kind": "PodUnavailableBudget",
        "metadata": {"name": "bench"},
        "spec": {"selector": {"matchLabels": {"app": "bench"}},
                 "maxUnavailable": max_unavailable, "protectTotalReplicas": desired}
    }))
    .unwrap();
    let budgets = Api::<PodUnavailableBudget>::namespaced(client.clone(), NAMESPACE);
    budgets
        .create(&PostParams::default(), &budget)
        .await
        .unwrap();
    let opts = RunOptions {
        name: controller::CONTROLLER_NAME.into(),
        concurrency: 2,
        metrics: Metrics::new(),
        readiness: Readiness::default(),
        shutdown: shutdown.clone(),
        leadership: Default::default(),
    };
    tokio::spawn(controller::run(
        sim.client().unwrap(),
        Some(NAMESPACE),
        opts,
    ));
    kruise_testkit::eventually("the budget's status", kruise_testkit::WAIT, || {
        let budgets = budgets.clone();
        async move {
            let status = budgets.get("bench").await.ok()?.status?;
            (status.unavailable_allowed == max_unavailable as i32).then_some(())
        }
    })
    .await;

    let replicas = [
        webhook_replica(&sim, StepKind::Pub, tls.clone(), &shutdown).await,
        webhook_replica(&sim, StepKind::Pub, tls.clone(), &shutdown).await,
    ];
    let front = round_robin(replicas.iter().map(|r| r.addr).collect(), shutdown.clone()).await;
    publish(
        &client,
        &replicas[0].routes,
        &owned,
        &Endpoint::Url(format!("https://127.0.0.1:{}", front.port())),
        &ca.cert_pem,
        true,
    )
    .await
    .unwrap();

    // The churn under the budget.
    view.lock().unwrap().sampling = true;
    let cpu_before = kruise_testkit::process::cpu_secs("self");
    let replaced_before = created.load(Ordering::Relaxed);
    let under = evict_for(&sim, clients, secs, backoff, &view).await;
    let replaced = created.load(Ordering::Relaxed) - replaced_before;
    let cpu = kruise_testkit::process::cpu_secs("self") - cpu_before;
    let max_seen = view.lock().unwrap().max_unavailable;
    let granted = under.granted.load(Ordering::Relaxed);
    let refused = under.refused.load(Ordering::Relaxed);
    let mut latencies = std::mem::take(&mut *under.latencies.lock().unwrap());
    println!(
        "under the budget, {secs} s: {granted} evictions granted ({:.1}/s; {replaced} pods evicted and replaced, the rest granted again to pods already recorded), {refused} refused with 429, {} of pods already gone, {} errors",
        granted as f64 / secs as f64,
        under.gone.load(Ordering::Relaxed),
        under.errors.load(Ordering::Relaxed)
    );
    println!(
        "most pods unavailable at once: {max_seen} (budget {max_unavailable}): {}",
        if max_seen <= max_unavailable {
            "within the budget"
        } else {
            "BUDGET EXCEEDED"
        }
    );
    let mut all = Vec::new();
    for (i, replica) in replicas.iter().enumerate() {
        let samples = replica.samples.lock().unwrap().clone();
        let mut times: Vec<Duration> = samples.iter().map(|(d, _, _)| *d).collect();
        println!("  webhook replica {i}: {}", percentiles(&mut times));
        all.extend(samples);
    }
    let of = |allowed: bool, eviction: bool| -> Vec<Duration> {
        all.iter()
            .filter(|(_, a, e)| *a == allowed && *e == eviction)
            .map(|(d, _, _)| *d)
            .collect()
    };
    let mut allowed_evictions = of(true, true);
    let mut allowed_deletions = of(true, false);
    let mut grants: Vec<Duration> = all
        .iter()
        .filter(|(_, a, _)| *a)
        .map(|(d, _, _)| *d)
        .collect();
    let mut refusals: Vec<Duration> = all
        .iter()
        .filter(|(_, a, _)| !*a)
        .map(|(d, _, _)| *d)
        .collect();
    println!(
        "webhook latency, evictions allowed: {}",
        percentiles(&mut allowed_evictions)
    );
    println!(
        "webhook latency, pod DELETEs allowed (the kubelet's final deletion of an evicted pod): {}",
        percentiles(&mut allowed_deletions)
    );
    let mut all: Vec<Duration> = all.into_iter().map(|(d, _, _)| d).collect();
    println!("webhook latency, allowed: {}", percentiles(&mut grants));
    println!("webhook latency, refused: {}", percentiles(&mut refusals));
    // Where the slow reviews' time goes: the API calls the replicas made, per phase.
    print_calls(&replicas, all.len());
    let webhook_p99 = p99_ms(&mut all);
    println!(
        "webhook latency, both replicas: {} (target p99 < 5 ms)",
        percentiles(&mut all)
    );
    let webhook_floor_p99 = p99_ms(&mut webhook_floor_latencies);
    let floor_p99 = p99_ms(&mut floor_latencies);
    let eviction_p99 = p99_ms(&mut latencies);
    println!(
        "eviction round trip through the webhook: {}; p99 {:.1}x the floor's without a webhook, {:.1}x the allow-everything webhook's",
        percentiles(&mut latencies),
        eviction_p99 / floor_p99.max(f64::EPSILON),
        eviction_p99 / webhook_floor_p99.max(f64::EPSILON)
    );
    println!(
        "CPU of this process (simulator, controller, webhooks, clients) during the run: {cpu:.1} s; load average at end {}; webhook p99 {webhook_p99:.2} ms",
        loadavg()
    );

    // The required-calls floor: the same clients through two replicas of a step that makes
    // only the calls a grant and a refusal need, deciding in memory, in the same run.
    view.lock().unwrap().sampling = false;
    let took = wait_all_available(&view, desired).await;
    println!(
        "{desired} pods available again {:.1} s after",
        took.as_secs_f64()
    );
    let shared = Arc::new(SharedBudget {
        view: view.clone(),
        granted: Mutex::new(HashSet::new()),
        desired,
        max_unavailable,
    });
    let required = [
        webhook_replica(
            &sim,
            StepKind::RequiredCalls(shared.clone()),
            tls.clone(),
            &shutdown,
        )
        .await,
        webhook_replica(&sim, StepKind::RequiredCalls(shared), tls, &shutdown).await,
    ];
    let required_front =
        round_robin(required.iter().map(|r| r.addr).collect(), shutdown.clone()).await;
    publish(
        &client,
        &required[0].routes,
        &owned,
        &Endpoint::Url(format!("https://127.0.0.1:{}", required_front.port())),
        &ca.cert_pem,
        true,
    )
    .await
    .unwrap();
    let floor_run = evict_for(&sim, clients, secs, backoff, &view).await;
    let mut floor_reviews: Vec<Duration> = required
        .iter()
        .flat_map(|r| r.samples.lock().unwrap().clone())
        .map(|(d, _, _)| d)
        .collect();
    let floor_review_p99 = p99_ms(&mut floor_reviews);
    println!(
        "required-calls floor, {secs} s: {} evictions granted, {} refused, {} errors; review in the webhook {}",
        floor_run.granted.load(Ordering::Relaxed),
        floor_run.refused.load(Ordering::Relaxed),
        floor_run.errors.load(Ordering::Relaxed),
        percentiles(&mut floor_reviews)
    );
    print_calls(&required, floor_reviews.len());
    println!(
        "webhook p99 {webhook_p99:.2} ms against the required-calls floor's {floor_review_p99:.2} ms: {:.2}x; load average at end {}",
        webhook_p99 / floor_review_p99.max(f64::EPSILON),
        loadavg()
    );
    assert!(
        max_seen <= max_unavailable,
        "{max_seen} pods unavailable at once, budget {max_unavailable}"
    );
    shutdown.cancel();
    sim.shutdown().await;
}
