//! The harness every kruise-rs binary runs on, so a family's `main.rs` is a few lines and
//! every binary behaves alike in a cluster: the same flags (each also an env var), a client
//! naming the binary, leader election on a Lease, `/metrics` `/healthz` `/readyz`, text or
//! JSON logs with optional OTLP traces, and graceful shutdown. Controllers start with
//! [`Binary::controller`] on every replica (warm caches) and write only while leading; the
//! kit they are built from — watches, status writes, events, revisions, the executor — is
//! in the submodules (see `docs/common-core.md`).
//!
//! ```no_run
//! use kruise_common::runtime::{Binary, Context};
//! fn main() -> std::process::ExitCode {
//!     Binary::new("kruise-example", env!("CARGO_PKG_VERSION"))
//!         .leader(|ctx: Context| async move {
//!             // build controllers with ctx.client and run them until ctx.shutdown fires
//!             ctx.shutdown.cancelled().await;
//!             Ok(())
//!         })
//!         .main()
//! }
//! ```

pub mod controller;
pub mod deadline;
pub mod errors;
pub mod events;
pub mod execute;

/// The allocator every kruise-rs binary declares (`#[global_allocator] static ALLOCATOR:
/// Allocator = Allocator;` in its `main.rs`): jemalloc, with two arenas and freed pages
/// handed back to the system at once (the settings are compiled in, from
/// `.cargo/config.toml`). A controller's heap is long-lived cached objects interleaved with
/// short-lived ones (every watch event decodes a new version of a pod); with glibc's malloc
/// the CloneSet controller kept 63–68 MiB after scaling to 10,000 pods and 46–54 MiB after
/// a restart with the same pods, with this 55–56 MiB and 44 MiB after a restart
/// (`cargo bench -p kruise-cloneset`).
pub use tikv_jemallocator::Jemalloc as Allocator;

pub mod leader;
pub mod metrics;
pub mod protection_log;
pub mod revisions;
pub mod status;
pub mod telemetry;
pub mod watch;
pub mod writes;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use clap::{Args, Parser, Subcommand};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use tokio_util::sync::CancellationToken;

use crate::featuregate::FeatureGates;
pub use controller::{
    Leadership, ReconcileError, RunOptions, WarmStream, run_controller, trim_for_cache,
    warm_until_leading,
};
pub use errors::{is_already_exists, is_conflict, is_not_found};
pub use leader::{LeaderElector, LeaderTimings};
pub use metrics::Metrics;
pub use telemetry::LogFormat;

/// Exit code for bad flags or feature gates (as clap uses for usage errors).
pub const EXIT_USAGE: u8 = 2;
/// Exit code for a runtime failure, including loss of leadership (the pod restarts cleanly).
pub const EXIT_FAILURE: u8 = 1;

/// Flags shared by every binary. Each can also be set through the env var named beside it.
#[derive(Args, Clone, Debug)]
pub struct Flags {
    /// Path to a kubeconfig; in-cluster config (or ~/.kube/config) when unset.
    #[arg(long, env = "KUBECONFIG", global = true)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Watch only this namespace; all namespaces when unset.
    #[arg(long, env = "WATCH_NAMESPACE", global = true)]
    pub namespace: Option<String>,
    /// Feature gates, `Name=true,Other=false` (OpenKruise's names; also AllAlpha=, AllBeta=).
    #[arg(long, env = "FEATURE_GATES", default_value = "", global = true)]
    pub feature_gates: String,
    /// Run controllers only while holding the leader lease.
    #[arg(long, env = "LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true", global = true)]
    pub leader_elect: bool,
    /// Namespace of the leader Lease.
    #[arg(
        long,
        env = "LEADER_ELECT_NAMESPACE",
        default_value = "kruise-system",
        global = true
    )]
    pub leader_elect_namespace: String,
    /// Lease name; the binary's name when unset.
    #[arg(long, env = "LEADER_ELECT_ID", global = true)]
    pub leader_elect_id: Option<String>,
    /// How long a lease lasts without renewal (client-go default 15s).
    #[arg(long, env = "LEADER_ELECT_LEASE_DURATION", default_value = "15s", value_parser = parse_duration, global = true)]
    pub leader_elect_lease_duration: Duration,
    /// How long the leader keeps trying to renew before giving up (default 10s).
    #[arg(long, env = "LEADER_ELECT_RENEW_DEADLINE", default_value = "10s", value_parser = parse_duration, global = true)]
    pub leader_elect_renew_deadline: Duration,
    /// Interval between acquire/renew attempts (default 2s).
    #[arg(long, env = "LEADER_ELECT_RETRY_PERIOD", default_value = "2s", value_parser = parse_duration, global = true)]
    pub leader_elect_retry_period: Duration,
    /// Address of the Prometheus `/metrics` endpoint (`:8080` means all interfaces).
    #[arg(long, env = "METRICS_ADDR", default_value = ":8080", value_parser = parse_addr, global = true)]
    pub metrics_addr: SocketAddr,
    /// Address of `/healthz` and `/readyz`.
    #[arg(long, env = "HEALTH_ADDR", default_value = ":8081", value_parser = parse_addr, global = true)]
    pub health_addr: SocketAddr,
    /// Reconciles of different objects run at once, per controller.
    #[arg(long, env = "CONCURRENCY", default_value_t = 3, global = true)]
    pub concurrency: u16,
    /// Log format.
    #[arg(
        long,
        env = "LOG_FORMAT",
        value_enum,
        default_value = "text",
        global = true
    )]
    pub log_format: LogFormat,
    /// Log level or `EnvFilter` directives (`RUST_LOG` overrides).
    #[arg(long, env = "LOG_LEVEL", default_value = "info", global = true)]
    pub log_level: String,
    /// How long in-flight reconciles may take to finish after SIGTERM.
    #[arg(long, env = "SHUTDOWN_TIMEOUT", default_value = "30s", value_parser = parse_duration, global = true)]
    pub shutdown_timeout: Duration,
}

/// Family-specific flags; `NoArgs` when a family has none.
#[derive(Args, Clone, Debug, Default)]
pub struct NoArgs {}

#[derive(Parser, Debug)]
struct Cli<A: Args> {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    flags: Flags,
    #[command(flatten)]
    family: A,
}

#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
enum Command {
    /// Run the controllers (the default).
    Run,
    /// Print this binary's CustomResourceDefinitions as YAML (for the chart or `kubectl apply -f -`).
    Crd,
    /// Print the webhook configurations this binary publishes, without caBundle (for the chart).
    Manifests,
}

/// Parses `150ms`, `2s`, `5m`, `1h`, or a sum such as `1m30s`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .ok_or_else(|| format!("duration {s:?} lacks a unit (ms, s, m, h)"))?;
        let (num, tail) = rest.split_at(digits);
        let value: f64 = num
            .parse()
            .map_err(|_| format!("invalid number in duration {s:?}"))?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_len);
        let secs = match unit {
            "ms" => value / 1000.0,
            "s" => value,
            "m" => value * 60.0,
            "h" => value * 3600.0,
            _ => return Err(format!("unknown unit {unit:?} in duration {s:?}")),
        };
        total += Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())?;
        rest = next;
    }
    Ok(total)
}

/// Parses `host:port`, or `:port` meaning every interface (Go's convention, used by Kruise's flags).
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    let full = if s.starts_with(':') {
        format!("0.0.0.0{s}")
    } else {
        s.to_string()
    };
    full.parse()
        .map_err(|e| format!("invalid address {s:?}: {e}"))
}

/// Named readiness checks; `/readyz` passes when all registered checks pass.
#[derive(Clone, Default)]
pub struct Readiness {
    checks: Arc<Mutex<BTreeMap<String, bool>>>,
}

impl Readiness {
    /// Adds a check that fails until [`Readiness::set`] passes it.
    pub fn register(&self, name: &str) {
        if let Ok(mut c) = self.checks.lock() {
            c.entry(name.to_string()).or_insert(false);
        }
    }
    /// Sets a check's state (registering it if new).
    pub fn set(&self, name: &str, ok: bool) {
        if let Ok(mut c) = self.checks.lock() {
            c.insert(name.to_string(), ok);
        }
    }
    /// The failing checks; empty when ready.
    pub fn failing(&self) -> Vec<String> {
        match self.checks.lock() {
            Ok(c) => c
                .iter()
                .filter(|(_, ok)| !**ok)
                .map(|(n, _)| n.clone())
                .collect(),
            Err(_) => vec!["readiness lock poisoned".into()],
        }
    }
}

/// Everything a family's run function gets.
#[derive(Clone)]
pub struct Context<A = NoArgs> {
    /// Binary name, e.g. `kruise-cloneset`.
    pub binary: &'static str,
    /// Client whose user-agent names the binary and version.
    pub client: Client,
    /// The shared flags.
    pub flags: Flags,
    /// Family-specific flags.
    pub args: A,
    /// Resolved feature gates.
    pub gates: FeatureGates,
    /// Process metrics registry.
    pub metrics: Metrics,
    /// Process readiness checks.
    pub readiness: Readiness,
    /// Fires on SIGTERM/SIGINT or lost leadership: stop starting work, finish what runs.
    pub shutdown: CancellationToken,
    /// Whether this replica leads (always, without `--leader-elect`): already for
    /// [`Binary::leader`] work; for controllers and every-replica work, once the lease is
    /// acquired.
    pub leadership: Leadership,
}

impl<A> Context<A> {
    /// Options for [`run_controller`] under this context.
    pub fn controller_options(&self, name: &str) -> RunOptions {
        RunOptions {
            name: name.to_string(),
            concurrency: self.flags.concurrency,
            metrics: self.metrics.clone(),
            readiness: self.readiness.clone(),
            shutdown: self.shutdown.clone(),
            leadership: self.leadership.clone(),
        }
    }
}

type BoxFut = Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>>;

/// `task` polled once (run up to its first await), to be spawned.
async fn started(mut task: BoxFut) -> BoxFut {
    match futures::poll!(&mut task) {
        std::task::Poll::Ready(result) => Box::pin(async move { result }),
        std::task::Poll::Pending => task,
    }
}
type Task<A> = Box<dyn FnOnce(Context<A>) -> BoxFut + Send>;
type ManifestsFn<A> = Box<dyn Fn(&Flags, &A) -> anyhow::Result<String> + Send + Sync>;

/// A binary built on the harness: its CRDs, what runs on every replica, what runs on the leader.
pub struct Binary<A: Args + Clone + Send + Sync + 'static = NoArgs> {
    name: &'static str,
    version: &'static str,
    crds: Vec<CustomResourceDefinition>,
    manifests: Option<ManifestsFn<A>>,
    every_replica: Vec<Task<A>>,
    controllers: Vec<Task<A>>,
    leader: Vec<Task<A>>,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Shut down on request; the lease was released.
    Stopped,
    /// Leadership was lost; the process should exit non-zero so it restarts cleanly.
    LostLeadership,
}

impl<A: Args + Clone + Send + Sync + 'static> Binary<A> {
    /// A binary called `name` (also the default Lease name and the user-agent).
    pub fn new(name: &'static str, version: &'static str) -> Self {
        Binary {
            name,
            version,
            crds: Vec::new(),
            manifests: None,
            every_replica: Vec::new(),
            controllers: Vec::new(),
            leader: Vec::new(),
        }
    }

    /// What `manifests` prints: the webhook configurations as YAML for these flags.
    pub fn manifests(
        mut self,
        f: impl Fn(&Flags, &A) -> anyhow::Result<String> + Send + Sync + 'static,
    ) -> Self {
        self.manifests = Some(Box::new(f));
        self
    }

    /// The binary's name (`kruise-cloneset`).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The CRDs this binary owns (printed by `crd`).
    pub fn crds(mut self, crds: Vec<CustomResourceDefinition>) -> Self {
        self.crds = crds;
        self
    }

    /// Work that runs on every replica, leader or not (admission servers, warm caches).
    pub fn every_replica<F, Fut>(mut self, f: F) -> Self
    where
        F: FnOnce(Context<A>) -> Fut + Send + 'static,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        self.every_replica.push(Box::new(move |c| Box::pin(f(c))));
        self
    }

    /// A controller: it starts on every replica, so a standby's caches are warm when it takes
    /// over, and writes only once `ctx.leadership` says this replica leads (see
    /// [`warm_until_leading`]; `ctx.controller_options` carries it). Its `ctx.shutdown`
    /// fires on shutdown or lost leadership, like leader work's.
    pub fn controller<F, Fut>(mut self, f: F) -> Self
    where
        F: FnOnce(Context<A>) -> Fut + Send + 'static,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        self.controllers.push(Box::new(move |c| Box::pin(f(c))));
        self
    }

    /// Work that runs only while this replica leads. It must return once
    /// `ctx.shutdown` fires and its in-flight work has finished.
    pub fn leader<F, Fut>(mut self, f: F) -> Self
    where
        F: FnOnce(Context<A>) -> Fut + Send + 'static,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        self.leader.push(Box::new(move |c| Box::pin(f(c))));
        self
    }

    /// The process entry point: parses `std::env::args`, installs telemetry and signal
    /// handlers, runs until SIGTERM/SIGINT, and returns the exit code (2 for bad flags or
    /// feature gates, 1 for failures and lost leadership).
    pub fn main(self) -> ExitCode {
        let cli = match Cli::<A>::try_parse() {
            Ok(cli) => cli,
            Err(e) => {
                let _ = e.print();
                return ExitCode::from(if e.use_stderr() { EXIT_USAGE } else { 0 });
            }
        };
        match cli.command {
            Some(Command::Crd) => return print_or_fail(crds_yaml(&self.crds)),
            Some(Command::Manifests) => {
                return print_or_fail(match &self.manifests {
                    Some(f) => f(&cli.flags, &cli.family),
                    None => Ok(String::new()),
                });
            }
            Some(Command::Run) | None => {}
        }
        let gates = match FeatureGates::parse(&cli.flags.feature_gates) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("error: --feature-gates: {e}");
                return ExitCode::from(EXIT_USAGE);
            }
        };
        let rt = match tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("error: starting the async runtime: {e}");
                return ExitCode::from(EXIT_FAILURE);
            }
        };
        rt.block_on(async move {
            let telemetry = match telemetry::Telemetry::init(
                self.name,
                cli.flags.log_format,
                &cli.flags.log_level,
            ) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    return ExitCode::from(EXIT_USAGE);
                }
            };
            let shutdown = CancellationToken::new();
            tokio::spawn(signal_shutdown(shutdown.clone()));
            let code = match self.run(cli.flags, cli.family, gates, shutdown).await {
                Ok(Outcome::Stopped) => ExitCode::SUCCESS,
                Ok(Outcome::LostLeadership) => ExitCode::from(EXIT_FAILURE),
                Err(e) => {
                    tracing::error!(error = format!("{e:#}"), "exiting");
                    ExitCode::from(EXIT_FAILURE)
                }
            };
            telemetry.shutdown();
            code
        })
    }

    /// Runs in-process from a command line (`argv[0]` is the binary name), as `main` would
    /// without installing logging or signal handlers: for hosts that run several binaries
    /// in one process (`kruise-playground up`). Subcommands other than `run` are an
    /// error here.
    pub async fn run_argv<I, T>(
        self,
        argv: I,
        shutdown: CancellationToken,
    ) -> anyhow::Result<Outcome>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let cli =
            Cli::<A>::try_parse_from(argv).map_err(|e| anyhow::anyhow!("{}: {e}", self.name))?;
        if !matches!(cli.command, Some(Command::Run) | None) {
            anyhow::bail!("{}: only `run` can be started in-process", self.name);
        }
        let gates = FeatureGates::parse(&cli.flags.feature_gates)
            .map_err(|e| anyhow::anyhow!("{}: --feature-gates: {e}", self.name))?;
        self.run(cli.flags, cli.family, gates, shutdown).await
    }

    /// This binary's CustomResourceDefinitions.
    pub fn crd_definitions(&self) -> &[CustomResourceDefinition] {
        &self.crds
    }

    /// Runs with already-parsed flags until `shutdown` fires or leadership is lost.
    /// [`Binary::main`] calls this; tests call it directly to run replicas in-process.
    pub async fn run(
        self,
        flags: Flags,
        args: A,
        gates: FeatureGates,
        shutdown: CancellationToken,
    ) -> anyhow::Result<Outcome> {
        install_crypto_provider();
        let client = build_client(&flags, self.name, self.version).await?;
        let metrics = Metrics::new();
        let readiness = Readiness::default();
        let leadership = if flags.leader_elect {
            Leadership::pending()
        } else {
            Leadership::default()
        };
        let ctx = Context {
            binary: self.name,
            client: client.clone(),
            flags: flags.clone(),
            args,
            gates,
            metrics: metrics.clone(),
            readiness: readiness.clone(),
            shutdown: shutdown.clone(),
            leadership: leadership.clone(),
        };
        // Each task runs up to its first await before `/readyz` is served, so a readiness
        // check it registers there (the admission server's, a controller's caches) holds
        // `/readyz` at 503 from the first probe, instead of letting it pass until the task
        // first runs.
        let mut replica_tasks = tokio::task::JoinSet::new();
        for task in self.every_replica {
            replica_tasks.spawn(started(task(ctx.clone())).await);
        }
        // Leader work stops on shutdown or on lost leadership, whichever comes first.
        let leader_stop = shutdown.child_token();
        let mut leader_tasks = tokio::task::JoinSet::new();
        for task in self.controllers {
            let mut c = ctx.clone();
            c.shutdown = leader_stop.clone();
            leader_tasks.spawn(started(task(c)).await);
        }
        let servers =
            serve_endpoints(&flags, metrics.clone(), readiness.clone(), shutdown.clone()).await?;
        tracing::info!(
            binary = self.name,
            version = self.version,
            metrics = %servers.metrics,
            health = %servers.health,
            "started"
        );
        let lease_name = flags
            .leader_elect_id
            .clone()
            .unwrap_or_else(|| self.name.to_string());
        let lease_label = metrics::LeaseLabel {
            name: lease_name.clone(),
        };
        let leader_gauge = metrics.leader.get_or_create(&lease_label).clone();
        let mut elector = if flags.leader_elect {
            let api = kube::Api::namespaced(client.clone(), &flags.leader_elect_namespace);
            let timings = LeaderTimings {
                lease_duration: flags.leader_elect_lease_duration,
                renew_deadline: flags.leader_elect_renew_deadline,
                retry_period: flags.leader_elect_retry_period,
            };
            let mut e = LeaderElector::new(api, &lease_name, leader::default_identity(), timings)?;
            tracing::info!(lease = %lease_name, identity = e.identity(), "waiting for leadership");
            let acquired = tokio::select! {
                acquired = e.acquire(&shutdown) => acquired,
                failed = first_failure(&mut replica_tasks) => return Err(failed),
                failed = first_failure(&mut leader_tasks) => return Err(failed),
            };
            if !acquired {
                leader_stop.cancel();
                finish(&mut leader_tasks, flags.shutdown_timeout).await;
                finish(&mut replica_tasks, flags.shutdown_timeout).await;
                return Ok(Outcome::Stopped);
            }
            tracing::info!(lease = %lease_name, identity = e.identity(), "became leader");
            leader_gauge.set(1);
            Some(e)
        } else {
            None
        };
        leadership.acquire();
        for task in self.leader {
            let mut c = ctx.clone();
            c.shutdown = leader_stop.clone();
            leader_tasks.spawn(task(c));
        }
        let mut outcome = Outcome::Stopped;
        let mut failure: Option<anyhow::Error> = None;
        tokio::select! {
            held = async {
                match elector.as_mut() {
                    Some(e) => e.hold(&shutdown).await,
                    None => { shutdown.cancelled().await; true }
                }
            } => {
                if !held {
                    outcome = Outcome::LostLeadership;
                }
            }
            err = first_failure(&mut leader_tasks) => failure = Some(err),
            err = first_failure(&mut replica_tasks) => failure = Some(err),
        }
        leader_stop.cancel();
        finish(&mut leader_tasks, flags.shutdown_timeout).await;
        leader_gauge.set(0);
        if let Some(e) = elector.as_mut()
            && outcome != Outcome::LostLeadership
        {
            match e.release().await {
                Ok(()) => tracing::info!(lease = %lease_name, "released the lease"),
                Err(err) => tracing::warn!(error = %err, "could not release the lease"),
            }
        }
        shutdown.cancel();
        finish(&mut replica_tasks, flags.shutdown_timeout).await;
        servers.stop().await;
        match failure {
            Some(e) => Err(e),
            None => {
                if outcome == Outcome::LostLeadership {
                    tracing::error!(lease = %lease_name, "lost leadership, exiting");
                }
                Ok(outcome)
            }
        }
    }
}

/// Prints a subcommand's output, or its error with exit code 1.
fn print_or_fail(output: anyhow::Result<String>) -> ExitCode {
    match output {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

/// Waits for the first task that fails (or panics); pends forever while all succeed.
async fn first_failure(set: &mut tokio::task::JoinSet<anyhow::Result<()>>) -> anyhow::Error {
    loop {
        match set.join_next().await {
            Some(Ok(Ok(()))) => continue,
            Some(Ok(Err(e))) => return e,
            Some(Err(join)) => return anyhow::anyhow!("task panicked: {join}"),
            None => std::future::pending::<()>().await,
        }
    }
}

/// Gives running tasks `timeout` to finish, then aborts the rest.
async fn finish(set: &mut tokio::task::JoinSet<anyhow::Result<()>>, timeout: Duration) {
    let drained = tokio::time::timeout(timeout, async {
        while let Some(res) = set.join_next().await {
            if let Ok(Err(e)) = res {
                tracing::warn!(
                    error = format!("{e:#}"),
                    "task ended with an error during shutdown"
                );
            }
        }
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            ?timeout,
            "in-flight work did not finish in time; aborting it"
        );
        set.abort_all();
    }
}

/// Installs rustls' ring provider once (a second call is a harmless no-op).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Renders CRDs as a multi-document YAML stream, each [`deletion_protected`]: what `crd`
/// prints and the chart installs.
pub fn crds_yaml(crds: &[CustomResourceDefinition]) -> anyhow::Result<String> {
    let mut out = String::new();
    for crd in crds {
        out.push_str("---\n");
        out.push_str(
            &serde_saphyr::to_string(&deletion_protected(crd.clone()))
                .context("serialising a CRD to YAML")?,
        );
    }
    Ok(out)
}

/// The CRD labelled `policy.kruise.io/delete-protection: Cascading`: deleting a kruise-rs
/// CRD deletes every object of its kind (and a workload's pods with it), so once kruise-webhook
/// runs with `ResourcesDeletionProtection` and `DeletionProtectionForCRDCascadingGate`, the
/// deletion is refused while any such object remains. A label already set is kept.
pub fn deletion_protected(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    crd.metadata
        .labels
        .get_or_insert_with(Default::default)
        .entry(crate::api::keys::DELETION_PROTECTION_KEY.to_string())
        .or_insert_with(|| "Cascading".to_string());
    crd
}

/// A client from `--kubeconfig` (or the inferred config), with a user-agent naming the binary.
pub async fn build_client(flags: &Flags, name: &str, version: &str) -> anyhow::Result<Client> {
    client_from(flags.kubeconfig.as_deref(), name, version).await
}

/// A client from `kubeconfig` (or the inferred config), with a user-agent naming the binary
/// and [`deadline::REQUEST_DEADLINE`] on every request but watches.
pub async fn client_from(
    kubeconfig: Option<&std::path::Path>,
    name: &str,
    version: &str,
) -> anyhow::Result<Client> {
    let mut config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("loading kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("no --kubeconfig given and no in-cluster or default kubeconfig found")?,
    };
    let agent = http::HeaderValue::from_str(&format!("{name}/{version}"))
        .context("binary name is not a valid user-agent")?;
    config.headers.push((http::header::USER_AGENT, agent));
    // Every request but a watch gets a deadline, so one the server never answers fails
    // and requeues its reconcile instead of holding the object's key forever.
    deadline::client_with_deadline(config, deadline::REQUEST_DEADLINE)
        .context("building the Kubernetes client")
}

/// Resolves on SIGTERM or SIGINT and cancels `token`.
pub(crate) async fn signal_shutdown(token: CancellationToken) {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
    tracing::info!("shutdown requested");
    token.cancel();
}

/// The bound addresses of the endpoint servers.
pub struct Endpoints {
    /// Where `/metrics` listens.
    pub metrics: SocketAddr,
    /// Where `/healthz` and `/readyz` listen.
    pub health: SocketAddr,
    tasks: tokio::task::JoinSet<()>,
    stop: CancellationToken,
}

impl Endpoints {
    async fn stop(mut self) {
        self.stop.cancel();
        while self.tasks.join_next().await.is_some() {}
    }
}

/// Binds and serves `/metrics` and `/healthz` `/readyz` (on one listener if both flags name
/// the same address).
pub async fn serve_endpoints(
    flags: &Flags,
    metrics: Metrics,
    readiness: Readiness,
    shutdown: CancellationToken,
) -> anyhow::Result<Endpoints> {
    let stop = shutdown.child_token();
    let metrics_router = Router::new()
        .route("/metrics", get(metrics_handler))
        .with_state(metrics);
    let health_router = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(readyz_handler))
        .with_state(readiness);
    let mut tasks = tokio::task::JoinSet::new();
    let bind = |addr: SocketAddr, what: &'static str| async move {
        tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding {what} address {addr}"))
    };
    let (metrics_addr, health_addr) = if flags.metrics_addr == flags.health_addr {
        let l = bind(flags.metrics_addr, "metrics").await?;
        let addr = l.local_addr()?;
        tasks.spawn(serve(l, metrics_router.merge(health_router), stop.clone()));
        (addr, addr)
    } else {
        let lm = bind(flags.metrics_addr, "metrics").await?;
        let lh = bind(flags.health_addr, "health").await?;
        let (am, ah) = (lm.local_addr()?, lh.local_addr()?);
        tasks.spawn(serve(lm, metrics_router, stop.clone()));
        tasks.spawn(serve(lh, health_router, stop.clone()));
        (am, ah)
    };
    Ok(Endpoints {
        metrics: metrics_addr,
        health: health_addr,
        tasks,
        stop,
    })
}

async fn serve(listener: tokio::net::TcpListener, router: Router, stop: CancellationToken) {
    let result = axum::serve(listener, router)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await;
    if let Err(e) = result {
        tracing::error!(error = %e, "endpoint server failed");
    }
}

async fn metrics_handler(
    State(metrics): State<Metrics>,
) -> (StatusCode, [(http::HeaderName, &'static str); 1], String) {
    match metrics.encode() {
        Ok(body) => (
            StatusCode::OK,
            [(
                http::header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        ),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(http::header::CONTENT_TYPE, "text/plain")],
            "encoding metrics failed".into(),
        ),
    }
}

async fn readyz_handler(State(readiness): State<Readiness>) -> (StatusCode, String) {
    let failing = readiness.failing();
    if failing.is_empty() {
        (StatusCode::OK, "ok".into())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}", failing.join(", ")),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("150ms"), Ok(Duration::from_millis(150)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0.5s"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("15").is_err());
        assert!(parse_duration("5d").is_err());
    }

    #[test]
    fn addresses() {
        assert_eq!(parse_addr(":8080"), Ok("0.0.0.0:8080".parse().unwrap()));
        assert_eq!(
            parse_addr("127.0.0.1:0"),
            Ok("127.0.0.1:0".parse().unwrap())
        );
        assert!(parse_addr("nope").is_err());
    }

    #[test]
    fn flags_defaults_and_env_style_bools() {
        let cli = Cli::<NoArgs>::try_parse_from(["x"]).unwrap();
        assert!(cli.flags.leader_elect);
        assert_eq!(cli.flags.metrics_addr.port(), 8080);
        assert_eq!(cli.flags.health_addr.port(), 8081);
        assert_eq!(
            cli.flags.leader_elect_lease_duration,
            Duration::from_secs(15)
        );
        assert_eq!(cli.command, None);
        let cli = Cli::<NoArgs>::try_parse_from([
            "x",
            "run",
            "--leader-elect=false",
            "--concurrency",
            "7",
        ])
        .unwrap();
        assert!(!cli.flags.leader_elect);
        assert_eq!(cli.flags.concurrency, 7);
        assert_eq!(cli.command, Some(Command::Run));
    }

    #[test]
    fn readiness_checks() {
        let r = Readiness::default();
        assert!(r.failing().is_empty());
        r.register("a");
        assert_eq!(r.failing(), vec!["a".to_string()]);
        r.set("a", true);
        assert!(r.failing().is_empty());
    }
}
