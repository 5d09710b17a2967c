//! The [`Binary`] builder and its run: subcommands, leader election, what runs on every
//! replica, the controllers and the leader's work, and graceful shutdown.

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_core::featuregate::FeatureGates;
use kube::Client;
use tokio_util::sync::CancellationToken;

use crate::client::{build_client, install_crypto_provider};
use crate::controller::{Leadership, RunOptions};
use crate::crds::crds_yaml;
use crate::endpoints::{Readiness, serve_endpoints};
use crate::flags::{Cli, Command, EXIT_FAILURE, EXIT_USAGE, Flags, NoArgs};
use crate::leader::{self, LeaderElector, LeaderTimings};
use crate::metrics::Metrics;
use crate::{metrics, telemetry};

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
    /// Options for [`run_controller`](crate::run_controller) under this context.
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
    /// [`warm_until_leading`](crate::warm_until_leading); `ctx.controller_options` carries it). Its `ctx.shutdown`
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
