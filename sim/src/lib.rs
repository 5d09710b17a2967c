//! kruise-sim: an in-memory Kubernetes API server that kube-rs and kubectl accept as
//! real, for kruise-rs tests, demos and benchmarks.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! let sim = kruise_sim::Sim::start(kruise_sim::SimConfig::default()).await?;
//! let client = sim.client()?;
//! // ... use client with kube::Api ...
//! println!("{}", sim.counters().writes("pods"));
//! sim.shutdown().await;
//! # Ok(()) }
//! ```

// `ApiError` carries a full Status (causes, details) by value; it is built only on the
// cold error path, so boxing it would add noise without a measurable benefit.
#![allow(clippy::result_large_err)]

pub mod authz;
pub mod client_nodes;
pub mod client_volumes;
pub mod cluster;
pub mod conversion;
pub mod crd_validation;
pub mod defaults;
pub mod discovery;
pub mod error;
pub mod events;
pub mod faults;
pub mod fieldvalidation;
pub mod managed;
pub mod meta;
pub mod metrics;
pub mod ops;
pub mod patch;
pub mod protobuf;
pub mod registry;
pub mod request;
pub mod selector;
pub mod server;
pub mod store;
pub mod structural;
pub mod table;
pub mod up;
pub mod validate;
pub mod watch;
pub mod webhooks;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::Context;
use futures::future::BoxFuture;
use serde_json::Value;

pub use cluster::KubeletTimings;
pub use cluster::images::{ImagePull, ImagePulls};
pub use error::{ApiError, ApiResult, StatusCause};
pub use faults::{FaultRule, Faults};
pub use metrics::{Counters, RequestKey};
pub use store::{EventType, Store, StoreEvent};

/// How to run a simulator.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Where to listen; port 0 picks a free port.
    pub bind: SocketAddr,
    /// How many change events are retained for watches; older resourceVersions get
    /// 410 Gone.
    pub watch_history: usize,
    /// How often watches that asked for bookmarks get one.
    pub bookmark_interval: Duration,
    /// Server-side watch timeout when the client gives no timeoutSeconds.
    pub default_watch_timeout: Duration,
    /// Run the built-in garbage collector (ownerReference cascades, foreground and
    /// orphan finalizers, namespace content deletion) and the ServiceAccount controller (a
    /// `default` ServiceAccount in every namespace): kube-controller-manager's parts that
    /// need no node.
    pub garbage_collector: bool,
    /// Call the stored Mutating/ValidatingWebhookConfigurations over HTTPS on writes.
    pub admission_webhooks: bool,
    /// Simulated nodes `sim-node-0..N-1`; with at least one, the scheduler and the
    /// kubelet run too. 0 (the library default) keeps pods Pending and unbound, so
    /// tests of the bare API server see no writes they did not make.
    pub nodes: usize,
    /// How long the simulated kubelet takes to pull, start and ready containers.
    pub kubelet: KubeletTimings,
    /// Per-image pull latencies and failures (the kubelet's and the fake CRI's), over
    /// `kubelet.pull_delay`.
    pub image_pulls: ImagePulls,
    /// Serve a fake CRI runtime for each simulated node on `<dir>/<node>.sock`
    /// (RuntimeService and ImageService subsets, answered from the kubelet's state).
    pub cri_dir: Option<PathBuf>,
    /// How long an Event lives after its last write (kube-apiserver's `--event-ttl`,
    /// default 1 h); then it is deleted, with a DELETED watch event.
    pub event_ttl: Duration,
    /// Authorize requests that carry a bearer token by the stored RBAC objects (the
    /// token names the user; see [`authz`]); requests without one stay allowed.
    pub authorize: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            watch_history: 10_000,
            bookmark_interval: Duration::from_secs(5),
            default_watch_timeout: Duration::from_secs(1800),
            garbage_collector: true,
            admission_webhooks: true,
            nodes: 0,
            kubelet: KubeletTimings::default(),
            image_pulls: ImagePulls::default(),
            cri_dir: None,
            event_ttl: Duration::from_secs(3600),
            authorize: false,
        }
    }
}

/// What an admission hook learns about a write.
#[derive(Debug, Clone)]
pub struct AdmissionAttributes {
    /// CREATE, UPDATE or DELETE.
    pub operation: String,
    pub group: String,
    pub resource: String,
    pub kind: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub old_object: Option<Arc<Value>>,
    pub dry_run: bool,
    pub user_agent: String,
    /// The requester (its bearer token's user); `None` for an unauthenticated client and
    /// the simulator's own writers, which act as `system:admin`.
    pub user: Option<authz::User>,
    /// The operation's options as kube-apiserver passes them to admission: CreateOptions,
    /// UpdateOptions (also for a patch) or the DeleteOptions the client sent.
    pub options: Value,
}

/// Called before a write is persisted, in kube-apiserver's order: every hook's `admit`
/// (mutating admission: may change the object or reject the write), then the object's
/// validation, then every hook's `validate` (validating admission: may only reject).
/// The stored admission webhook configurations are called over HTTPS through this hook
/// ([`webhooks::WebhookDispatcher`]); [`Sim::add_admission_hook`] adds others.
pub trait AdmissionHook: Send + Sync {
    fn admit<'a>(
        &'a self,
        attrs: &'a AdmissionAttributes,
        object: &'a mut Value,
    ) -> BoxFuture<'a, ApiResult<()>>;

    /// Validating admission: sees the object as it will be stored. By default admits.
    fn validate<'a>(
        &'a self,
        _attrs: &'a AdmissionAttributes,
        _object: &'a Value,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async { Ok(()) })
    }
}

/// State shared by the HTTP server, the garbage collector and the library API.
pub struct SimShared {
    pub store: Store,
    pub config: SimConfig,
    pub counters: Counters,
    pub faults: Faults,
    hooks: RwLock<Vec<Arc<dyn AdmissionHook>>>,
    shutdown: tokio::sync::watch::Sender<bool>,
}

impl SimShared {
    pub(crate) fn hooks(&self) -> Vec<Arc<dyn AdmissionHook>> {
        self.hooks.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(crate) fn shutdown_signal(&self) -> tokio::sync::watch::Receiver<bool> {
        self.shutdown.subscribe()
    }
}

/// A running simulator.
pub struct Sim {
    shared: Arc<SimShared>,
    addr: SocketAddr,
    server: tokio::task::JoinHandle<()>,
    background: Vec<tokio::task::JoinHandle<()>>,
    kubeconfig: std::sync::Mutex<Option<PathBuf>>,
}

impl Sim {
    /// Starts the API server (and garbage collector; nodes, scheduler and kubelet when
    /// `config.nodes > 0`) on `config.bind`.
    pub async fn start(config: SimConfig) -> anyhow::Result<Sim> {
        let listener = tokio::net::TcpListener::bind(config.bind)
            .await
            .with_context(|| format!("binding the simulator to {}", config.bind))?;
        let addr = listener
            .local_addr()
            .context("reading the simulator's bound address")?;
        let shared = Arc::new(SimShared {
            store: Store::new(config.watch_history, store::BROADCAST_CAPACITY),
            config: config.clone(),
            counters: Counters::default(),
            faults: Faults::default(),
            hooks: RwLock::new(Vec::new()),
            shutdown: tokio::sync::watch::channel(false).0,
        });
        bootstrap(&shared).await?;
        if config.admission_webhooks {
            let dispatcher = webhooks::WebhookDispatcher::new(&shared, None);
            shared
                .hooks
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .push(Arc::new(dispatcher));
        }
        let mut background = Vec::new();
        shared.store.set_ttl(
            &registry::GroupResource::new("", "events"),
            config.event_ttl,
        );
        background.push(tokio::spawn(expire_events(shared.clone())));
        if config.garbage_collector {
            background.push(tokio::spawn(cluster::gc::run(shared.clone())));
            background.push(tokio::spawn(cluster::serviceaccounts::run(shared.clone())));
        }
        if config.nodes > 0 {
            cluster::nodes::register(&shared, config.nodes).await?;
            background.push(tokio::spawn(cluster::scheduler::run(shared.clone())));
            background.push(tokio::spawn(cluster::jobs::run(shared.clone())));
            background.push(tokio::spawn(cluster::deployments::run(shared.clone())));
            background.push(tokio::spawn(cluster::replicasets::run(shared.clone())));
            background.push(tokio::spawn(cluster::pvc::run(shared.clone())));
            let (cri_tx, cri_rx) = tokio::sync::mpsc::channel(64);
            background.push(tokio::spawn(cluster::kubelet::run(
                shared.clone(),
                config.nodes,
                config.kubelet,
                config.image_pulls.clone(),
                cri_rx,
            )));
            if let Some(dir) = &config.cri_dir {
                let names: Vec<String> = (0..config.nodes).map(cluster::nodes::node_name).collect();
                background.extend(cluster::cri::serve_sockets(
                    dir,
                    &names,
                    &cri_tx,
                    config.kubelet.pull_delay,
                    &config.image_pulls,
                    &shared.shutdown_signal(),
                )?);
            }
        }
        let router = server::router(shared.clone());
        let mut stop = shared.shutdown_signal();
        let server = tokio::spawn(async move {
            let serve = axum::serve(listener, router).with_graceful_shutdown(async move {
                let _ = stop.wait_for(|s| *s).await;
            });
            if let Err(e) = serve.await {
                tracing::warn!(error = %e, "kruise-sim server stopped with an error");
            }
        });
        Ok(Sim {
            shared,
            addr,
            server,
            background,
            kubeconfig: std::sync::Mutex::new(None),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kube client talking to this simulator (default namespace `default`).
    pub fn client(&self) -> anyhow::Result<kube::Client> {
        let config = self.client_config()?;
        kube::Client::try_from(config).context("building a kube client for the simulator")
    }

    /// The kube client configuration for this simulator (adjust headers, timeouts or
    /// retries, then `kube::Client::try_from`).
    pub fn client_config(&self) -> anyhow::Result<kube::Config> {
        let uri: http::Uri = self.url().parse().context("building the simulator URL")?;
        Ok(kube::Config::new(uri))
    }

    /// A kube client without kube's built-in retry of 429/503/504 responses, for
    /// tests that assert those codes (the default client retries up to 15 times).
    pub fn client_without_retries(&self) -> anyhow::Result<kube::Client> {
        let mut config = self.client_config()?;
        config.default_retry = false;
        kube::Client::try_from(config).context("building a kube client for the simulator")
    }

    /// The kubeconfig document pointing at this simulator.
    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig_yaml(&self.url())
    }

    /// Writes a kubeconfig for kubectl and other clients.
    pub fn write_kubeconfig(&self, path: &Path) -> anyhow::Result<()> {
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::write(path, self.kubeconfig_yaml())
            .with_context(|| format!("writing kubeconfig {}", path.display()))
    }

    /// A kubeconfig file in a per-simulator temporary directory (written on first use).
    pub fn kubeconfig_path(&self) -> anyhow::Result<PathBuf> {
        let mut guard = self.kubeconfig.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = guard.as_ref() {
            return Ok(p.clone());
        }
        let dir = std::env::temp_dir().join(format!(
            "kruise-sim-{}-{}",
            std::process::id(),
            self.addr.port()
        ));
        let path = dir.join("kubeconfig");
        self.write_kubeconfig(&path)?;
        *guard = Some(path.clone());
        Ok(path)
    }

    /// The fake CRI socket of simulated node `node` (when `SimConfig::cri_dir` is set).
    pub fn cri_socket(&self, node: &str) -> Option<PathBuf> {
        self.shared
            .config
            .cri_dir
            .as_deref()
            .map(|dir| cluster::cri::socket_path(dir, node))
    }

    pub fn counters(&self) -> &Counters {
        &self.shared.counters
    }

    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// Direct access to storage (subscribe to changes, compact history).
    pub fn store(&self) -> &Store {
        &self.shared.store
    }

    pub fn shared(&self) -> &Arc<SimShared> {
        &self.shared
    }

    /// Registers a hook called before every create/update/delete is persisted.
    pub fn add_admission_hook(&self, hook: Arc<dyn AdmissionHook>) {
        self.shared
            .hooks
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(hook);
    }

    /// Stops serving: open watches end, the listener closes.
    pub async fn shutdown(self) {
        self.shared.shutdown.send_replace(true);
        self.shared.faults.resume();
        for t in &self.background {
            t.abort();
        }
        let server = self.server;
        if tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .is_err()
        {
            tracing::warn!("kruise-sim server did not stop within 5s");
        }
        if let Some(p) = self
            .kubeconfig
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            && let Some(dir) = p.parent()
        {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

pub fn kubeconfig_yaml(url: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: kruise-sim
  cluster:
    server: {url}
contexts:
- name: kruise-sim
  context:
    cluster: kruise-sim
    user: kruise-sim
    namespace: default
current-context: kruise-sim
preferences: {{}}
users:
- name: kruise-sim
  user: {{}}
"
    )
}

/// Deletes Events whose TTL ran out, checking a few times per TTL (at most once a
/// second, so a 1 h TTL costs one cheap check a second).
async fn expire_events(shared: Arc<SimShared>) {
    let period =
        (shared.config.event_ttl / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut shutdown = shared.shutdown_signal();
    loop {
        tokio::select! {
            _ = ticks.tick() => {
                shared.store.expire(std::time::Instant::now());
            }
            _ = shutdown.wait_for(|stopped| *stopped) => return,
        }
    }
}

/// Objects a fresh cluster has.
async fn bootstrap(shared: &Arc<SimShared>) -> anyhow::Result<()> {
    let ns_def = shared
        .resolve("", "v1", "namespaces")
        .context("namespaces resource missing from the registry")?;
    let opts = ops::WriteOptions {
        user_agent: "kube-apiserver".into(),
        ..Default::default()
    };
    // `kruise-system` as an install of the charts leaves it: families keep objects there
    // (SidecarSet ControllerRevisions) whatever namespace their webhook flags name.
    for ns in [
        "default",
        "kube-system",
        "kube-public",
        "kube-node-lease",
        "kruise-system",
    ] {
        let body =
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        shared
            .create(&ns_def, "v1", "", body, &opts)
            .await
            .map_err(|e| anyhow::anyhow!("creating namespace {ns}: {e}"))?;
    }
    Ok(())
}
