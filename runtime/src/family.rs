//! A family's one registration: what its binary serves and runs, and what it lends the
//! hosts that compose families — kruise-webhook's pod chain, `kruise-playground up` (every
//! family in one process) and CI (each family's binary and kubectl scenarios).
//!
//! A family crate builds its [`Family`] in `src/binary.rs`; its `main.rs` is
//! `kruise_runtime::family::main(kruise_<family>::binary::family)`; and the one list of
//! families, the playground's `registry`, names it once. By convention the crate lives in
//! `<name>/`, and its package and binary are both called `kruise-<name>`.
//!
//! ```no_run
//! use kruise_runtime::family::Family;
//! use kruise_runtime::{Binary, Context};
//!
//! fn family() -> anyhow::Result<Family> {
//!     let binary = Binary::new("kruise-example", env!("CARGO_PKG_VERSION"))
//!         .leader(|ctx: Context| async move {
//!             ctx.shutdown.cancelled().await;
//!             Ok(())
//!         });
//!     Ok(Family::new("example", "kruise-example", binary).controllers(["example"]))
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     kruise_runtime::family::main(family)
//! }
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use futures::future::BoxFuture;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use tokio_util::sync::CancellationToken;

use crate::telemetry::{LogFormat, Telemetry};
use crate::{Binary, Metrics, Outcome, client_from, signal_shutdown};
use kruise_core::admission::AdmissionHandler;
use kruise_core::admission::pod_chain::{PodMutator, PodValidator};
use kruise_core::featuregate::FeatureGates;

/// One family: its names, its binary, and what it lends other binaries.
pub struct Family {
    name: &'static str,
    binary_name: &'static str,
    binary: Box<dyn Launch>,
    webhooks: Vec<&'static str>,
    controllers: Vec<&'static str>,
    lent: Lent,
    hosts_pod_chain: bool,
    agent: Option<Agent>,
}

impl Family {
    /// The family `name` (`cloneset`: the name `--controllers` and `--enable` take), served
    /// by `binary`, the [`Binary`] its `main.rs` runs, which is called `binary_name`.
    pub fn new<A: Args + Clone + Send + Sync + 'static>(
        name: &'static str,
        binary_name: &'static str,
        binary: Binary<A>,
    ) -> Self {
        Family {
            name,
            binary_name,
            binary: Box::new(binary),
            webhooks: Vec::new(),
            controllers: Vec::new(),
            lent: Lent::NONE,
            hosts_pod_chain: false,
            agent: None,
        }
    }

    /// The webhook configurations its binary registers and keeps current.
    pub fn webhooks(mut self, names: impl IntoIterator<Item = &'static str>) -> Self {
        self.webhooks.extend(names);
        self
    }

    /// The controllers its binary runs on the leader.
    pub fn controllers(mut self, names: impl IntoIterator<Item = &'static str>) -> Self {
        self.controllers.extend(names);
        self
    }

    /// What it lends kruise-webhook (the family crate's `binary::LENT`, which the registry
    /// names too).
    pub fn lends(mut self, lent: Lent) -> Self {
        self.lent = lent;
        self
    }

    /// Its binary serves the pod chain (kruise-webhook): a host that runs it in-process
    /// passes `--enable` with the pod steps of the families it runs.
    pub fn hosts_pod_chain(mut self) -> Self {
        self.hosts_pod_chain = true;
        self
    }

    /// Its node agent.
    pub fn agent(mut self, agent: Agent) -> Self {
        self.agent = Some(agent);
        self
    }

    /// `cloneset`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// `kruise-cloneset`: the package, the binary, and its Service, Secret and user agent.
    pub fn binary_name(&self) -> &'static str {
        self.binary_name
    }

    /// The CRDs its binary owns.
    pub fn crds(&self) -> &[CustomResourceDefinition] {
        self.binary.crds()
    }

    /// See [`Family::webhooks`].
    pub fn webhook_names(&self) -> &[&'static str] {
        &self.webhooks
    }

    /// See [`Family::controllers`].
    pub fn controller_names(&self) -> &[&'static str] {
        &self.controllers
    }

    /// What it lends kruise-webhook.
    pub fn lent(&self) -> Lent {
        self.lent
    }

    /// The names `--enable` takes for what it lends kruise-webhook (see [`Lent::names`]).
    pub fn lent_step_names(&self) -> Vec<&'static str> {
        self.lent.names()
    }

    /// Whether its binary serves the pod chain (see [`Family::hosts_pod_chain`]).
    pub fn is_pod_chain_host(&self) -> bool {
        self.hosts_pod_chain
    }

    /// Its node agent, if it has one.
    pub fn node_agent(&self) -> Option<&Agent> {
        self.agent.as_ref()
    }

    /// The process entry point of its binary (see [`Binary::main`]; a family with a node
    /// agent starts through [`main_with_agent`], which runs the agent before this is built).
    pub fn main(self) -> ExitCode {
        self.binary.main()
    }

    /// Its binary run in-process from a command line (see [`Binary::run_argv`]).
    pub fn run_argv(
        self,
        argv: Vec<String>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'static, anyhow::Result<Outcome>> {
        self.binary.run_argv(argv, shutdown)
    }
}

impl std::fmt::Debug for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let crds: Vec<&str> = self
            .crds()
            .iter()
            .filter_map(|crd| crd.metadata.name.as_deref())
            .collect();
        let steps: Vec<&str> = self.lent.pod_steps.iter().map(|step| step.name).collect();
        f.debug_struct("Family")
            .field("name", &self.name)
            .field("binary", &self.binary_name)
            .field("crds", &crds)
            .field("webhooks", &self.webhooks)
            .field("controllers", &self.controllers)
            .field("pod_steps", &steps)
            .field(
                "pod_validators",
                &self
                    .lent
                    .pod_validators
                    .iter()
                    .map(|step| step.name)
                    .collect::<Vec<_>>(),
            )
            .field("hosts_pod_chain", &self.hosts_pod_chain)
            .field("agent", &self.agent.is_some())
            .finish()
    }
}

/// A family's `main`: builds it and runs its binary, or prints why it could not be built.
pub fn main(family: impl FnOnce() -> anyhow::Result<Family>) -> ExitCode {
    match family() {
        Ok(family) => family.main(),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// A family's `main` when it has a node agent: `kruise-<family> agent [FLAGS]` runs
/// `agent()` (see [`AgentArgs`]) without building the family, whose CRD schemas, webhooks
/// and controllers serve nothing on a node: building them kept some 8 MiB of the binary
/// resident in every agent (the agent's idle RSS is a target, docs/crr.md). Anything else
/// builds and runs the family as [`main`] does.
pub fn main_with_agent(
    binary_name: &'static str,
    agent: fn() -> Agent,
    family: impl FnOnce() -> anyhow::Result<Family>,
) -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("agent") {
        // `agent` stands as the program name of the agent's own flags.
        return agent_main(binary_name, agent(), argv.into_iter().skip(1).collect());
    }
    main(family)
}

/// The `main` of a family's dedicated agent binary (`kruise-<family>-agent [FLAGS]`, what
/// its DaemonSet runs): the same agent, flags and user agent as `kruise-<family> agent`,
/// in a binary that links only the agent's code. A binary holding the whole family kept
/// its pages resident in every agent (the kernel maps the neighbours of each page a fault
/// reads), which the agent's idle RSS target (10 MiB, docs/crr.md) cannot afford.
pub fn agent_binary_main(binary_name: &'static str, agent: Agent) -> ExitCode {
    agent_main(binary_name, agent, std::env::args().collect())
}

/// What a pod-chain step is built from.
#[derive(Clone)]
pub struct StepContext {
    /// kruise-webhook's resolved feature gates.
    pub gates: FeatureGates,
    /// The cluster, when the chain serves it; absent for `manifests`, where a step sees no
    /// live state (and so, for instance, no SidecarSet).
    pub live: Option<LiveCluster>,
    /// kruise-webhook's registry, exposed on its `/metrics`: a step registers its own
    /// metrics here when it is built (a registry of its own for `manifests`).
    pub metrics: Metrics,
}

/// The running kruise-webhook a pod-chain step may watch the cluster from.
#[derive(Clone)]
pub struct LiveCluster {
    /// kruise-webhook's client.
    pub client: kube::Client,
    /// Notify when the pods the step acts on change, so the webhook re-scopes its entries.
    pub refresh: Arc<tokio::sync::Notify>,
    /// Fires when kruise-webhook stops.
    pub shutdown: CancellationToken,
}

/// What a family lends kruise-webhook: plain data (names and constructor functions), a
/// `const` in the family crate (`binary::LENT`) that kruise-webhook's registry lists. The
/// registry lists it rather than the built [`Family`], so a kruise-webhook binary links the
/// steps and not the families' controllers, CRDs and binaries.
#[derive(Clone, Copy)]
pub struct Lent {
    /// Steps of the pod mutating chain.
    pub pod_steps: &'static [PodStep],
    /// Steps of the validating pod chain (`/validate-pod`).
    pub pod_validators: &'static [PodValidatorStep],
    /// Admission handlers for kinds no family owns (built-in kinds: namespaces,
    /// Deployments, …), served and published in kruise-webhook's own configurations.
    pub webhooks: &'static [LentWebhooks],
}

impl Lent {
    /// Nothing lent.
    pub const NONE: Lent = Lent {
        pod_steps: &[],
        pod_validators: &[],
        webhooks: &[],
    };

    /// The names `--enable` takes for it: its mutating steps', its validating steps' and
    /// its lent webhooks', each once, in that order.
    pub fn names(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = Vec::new();
        let steps = self.pod_steps.iter().map(|s| s.name);
        let validators = self.pod_validators.iter().map(|s| s.name);
        let webhooks = self.webhooks.iter().map(|s| s.name);
        for name in steps.chain(validators).chain(webhooks) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }
}

/// A step a family lends kruise-webhook's pod chain, enabled by its name in `--enable`.
#[derive(Clone, Copy)]
pub struct PodStep {
    /// The name `--enable` takes (`sidecarset`).
    pub name: &'static str,
    /// Builds the step (once per process; it may start watches from [`StepContext::live`]).
    pub build: fn(&StepContext) -> Arc<dyn PodMutator>,
}

/// A step a family lends kruise-webhook's validating pod chain, enabled by its name in
/// `--enable` as a mutating step is.
#[derive(Clone, Copy)]
pub struct PodValidatorStep {
    /// The name `--enable` takes (`protection`).
    pub name: &'static str,
    /// Builds the step (once per process; it may start watches from [`StepContext::live`]).
    pub build: fn(&StepContext) -> Arc<dyn PodValidator>,
}

/// Admission handlers a family lends kruise-webhook for kinds it does not own (the
/// protection family's deletion protection of namespaces, CRDs, Deployments, …), enabled by
/// its name in `--enable` as a pod-chain step is. They are served whether or not the pod
/// chain is (gate `PodWebhook`).
#[derive(Clone, Copy)]
pub struct LentWebhooks {
    /// The name `--enable` takes (`protection`).
    pub name: &'static str,
    /// Builds the handlers (once per process) from kruise-webhook's gates, cluster and
    /// metrics registry; none when the gates switch the feature off.
    pub build: fn(&StepContext) -> Vec<Arc<dyn AdmissionHandler>>,
}

/// A family's node agent (`kruise-<family> agent`, run as a DaemonSet): it acts on one node
/// through the node's CRI socket. A host running families in-process starts one per node.
#[derive(Clone)]
pub struct Agent {
    run: Arc<dyn Fn(AgentContext) -> BoxFuture<'static, anyhow::Result<()>> + Send + Sync>,
}

impl Agent {
    /// An agent that runs `run` for one node until its context's shutdown fires.
    pub fn new<F, Fut>(run: F) -> Self
    where
        F: Fn(AgentContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        Agent {
            run: Arc::new(move |ctx| Box::pin(run(ctx))),
        }
    }

    /// Runs the agent for the node in `ctx`.
    pub fn run(&self, ctx: AgentContext) -> BoxFuture<'static, anyhow::Result<()>> {
        (self.run)(ctx)
    }
}

/// Everything an agent gets.
#[derive(Clone)]
pub struct AgentContext {
    /// A client naming the agent.
    pub client: kube::Client,
    /// The node the agent acts on.
    pub node: String,
    /// The node's CRI runtime socket.
    pub cri_socket: PathBuf,
    /// Fires when the agent must stop.
    pub shutdown: CancellationToken,
}

/// `kruise-<family> agent`'s flags: the node agent as a process (its DaemonSet's command),
/// with the node's name from the downward API.
#[derive(clap::Parser, Debug)]
pub struct AgentArgs {
    /// The node this agent acts on.
    #[arg(long, env = "NODE_NAME")]
    pub node_name: String,
    /// The CRI socket: absolute, or relative to the host's /var/run mounted at /hostvarrun;
    /// unset: the first runtime socket found there (`kruise_cri::socket`).
    #[arg(long, env = "CRI_SOCKET")]
    pub cri_socket: Option<PathBuf>,
    /// Path to a kubeconfig; default: in-cluster, then ~/.kube/config.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Log line format.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Log level (an EnvFilter directive; RUST_LOG overrides it).
    #[arg(long, default_value = "info")]
    pub log_level: String,
}

/// Runs `agent` from `argv` (`argv[0]` the program name, then [`AgentArgs`]) until SIGTERM
/// or SIGINT; its client's user agent is `<binary>-agent/<version>`. One thread: an agent
/// waits on one watch and its node's runtime, and a runtime worker thread would add its
/// stack and allocator cache to every node's memory for nothing.
fn agent_main(binary_name: &'static str, agent: Agent, argv: Vec<String>) -> ExitCode {
    use clap::Parser as _;
    let args = match AgentArgs::try_parse_from(argv) {
        Ok(args) => args,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(async move {
        let service = format!("{binary_name}-agent");
        let telemetry = match Telemetry::init(&service, args.log_format, &args.log_level) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: {e:#}");
                return ExitCode::from(2);
            }
        };
        let version = env!("CARGO_PKG_VERSION");
        let code = match client_from(args.kubeconfig.as_deref(), &service, version).await {
            Ok(client) => {
                let shutdown = CancellationToken::new();
                tokio::spawn(signal_shutdown(shutdown.clone()));
                let ctx = AgentContext {
                    client,
                    node: args.node_name,
                    cri_socket: args.cri_socket.unwrap_or_default(),
                    shutdown,
                };
                match agent.run(ctx).await {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => {
                        tracing::error!(error = format!("{e:#}"), "exiting");
                        ExitCode::FAILURE
                    }
                }
            }
            Err(e) => {
                tracing::error!(error = format!("{e:#}"), "exiting");
                ExitCode::FAILURE
            }
        };
        telemetry.shutdown();
        code
    })
}

/// A [`Binary`] whatever its flags type, so families with different flags share one list.
trait Launch: Send {
    fn crds(&self) -> &[CustomResourceDefinition];
    fn main(self: Box<Self>) -> ExitCode;
    fn run_argv(
        self: Box<Self>,
        argv: Vec<String>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'static, anyhow::Result<Outcome>>;
}

impl<A: Args + Clone + Send + Sync + 'static> Launch for Binary<A> {
    fn crds(&self) -> &[CustomResourceDefinition] {
        self.crd_definitions()
    }

    fn main(self: Box<Self>) -> ExitCode {
        Binary::main(*self)
    }

    fn run_argv(
        self: Box<Self>,
        argv: Vec<String>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'static, anyhow::Result<Outcome>> {
        Box::pin(Binary::run_argv(*self, argv, shutdown))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_takes_its_node_from_the_flag_and_looks_for_the_socket_when_unset() {
        use clap::Parser as _;
        let args = AgentArgs::try_parse_from(["agent", "--node-name", "n1"]).unwrap();
        assert_eq!(args.node_name, "n1");
        assert_eq!(args.cri_socket, None);
        let args =
            AgentArgs::try_parse_from(["agent", "--node-name", "n1", "--cri-socket", "crio.sock"])
                .unwrap();
        assert_eq!(args.cri_socket, Some(PathBuf::from("crio.sock")));
    }
    use crate::Context;

    fn example() -> Family {
        let binary = Binary::new("kruise-example", "0.0.0").leader(|ctx: Context| async move {
            ctx.shutdown.cancelled().await;
            Ok(())
        });
        Family::new("example", "kruise-example", binary)
            .webhooks(["kruise-example-mutating"])
            .controllers(["example"])
    }

    #[test]
    fn a_family_describes_its_binary_and_what_it_lends() {
        let family = example();
        assert_eq!(family.name(), "example");
        assert_eq!(family.binary_name(), "kruise-example");
        assert!(family.crds().is_empty());
        assert_eq!(family.webhook_names(), ["kruise-example-mutating"]);
        assert_eq!(family.controller_names(), ["example"]);
        assert!(family.lent_step_names().is_empty());
        assert!(!family.is_pod_chain_host());
        assert!(family.node_agent().is_none());
    }

    #[tokio::test]
    async fn run_argv_refuses_a_subcommand_other_than_run() {
        let err = example()
            .run_argv(
                vec!["kruise-example".into(), "crd".into()],
                CancellationToken::new(),
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("only `run`"), "{err}");
    }

    #[tokio::test]
    async fn an_agent_runs_once_per_node() {
        let agent = Agent::new(|ctx: AgentContext| async move {
            anyhow::ensure!(
                ctx.node.starts_with("node-"),
                "unexpected node {}",
                ctx.node
            );
            Ok(())
        });
        for node in ["node-0", "node-1"] {
            let ctx = AgentContext {
                client: kube::Client::try_from(kube::Config::new(
                    "http://127.0.0.1:1".parse().unwrap(),
                ))
                .unwrap(),
                node: node.into(),
                cri_socket: PathBuf::from(format!("/run/{node}.sock")),
                shutdown: CancellationToken::new(),
            };
            agent.run(ctx).await.unwrap();
        }
    }
}
