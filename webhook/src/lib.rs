//! kruise-webhook: the admission server for built-in resources. It serves the pod mutating
//! chain and the validating pod chain (`/validate-pod`: pod updates, deletions, evictions)
//! from the steps the enabled families lend it (`--enable`), each step scoped to the pods it
//! can act on and with its own failure policy, so a stopped webhook blocks nothing no
//! enabled family cares about; and the handlers families lend it for other built-in kinds
//! (deletion protection of namespaces, CRDs, Deployments, …), served whether or not the pod
//! chain is. Each family's own CRD webhooks stay in its binary.
//!
//! The families it composes are the ones in [`registry`], the families that lend it steps
//! (a Cargo feature each). In the library so that hosts such as `kruise-playground up` run
//! it in-process.

pub mod pod_readiness;
pub mod registry;

use std::sync::Arc;

use clap::Args;
use kruise_admission::AdmissionRoutes;
use kruise_admission::pod_chain::{
    KruisePodReadyGate, PodChain, PodMutator, PodValidator, ValidatingPodChain,
};
use kruise_admission::publish::{self, Owned};
use kruise_admission::runner::{self, AdmissionFlags};
use kruise_core::featuregate::FeatureGates;
use kruise_runtime::family::{
    Family, Lent, LentWebhooks, LiveCluster, PodStep, PodValidatorStep, StepContext,
};
use kruise_runtime::{Binary, Context, Flags, Metrics};

/// The name `--controllers` takes for kruise-webhook.
pub const NAME: &str = "webhook";
/// The binary's name (also its Service, Secret and user agent).
pub const BINARY: &str = "kruise-webhook";
/// Its own pod-chain step: pods of Kruise workloads get the KruisePodReady gate.
pub const WORKLOADS: &str = "workloads";

/// kruise-webhook's own flags.
#[derive(Args, Clone, Debug)]
pub struct WebhookArgs {
    /// Families whose pod-chain steps are active, comma-separated; by default every one
    /// compiled in (workloads, and each family of the registry that lends a step).
    #[arg(long, env = "ENABLE", value_delimiter = ',', global = true)]
    pub enable: Vec<String>,
    /// Directory of the protection audit log (`protection.log`: one JSON line per pod
    /// disruption or deletion a protection refuses, as OpenKruise's); none when unset.
    #[arg(long, env = "PROTECTION_LOG_PATH", global = true)]
    pub protection_log_path: Option<std::path::PathBuf>,
    /// Where the admission server listens and how its certificates are kept.
    #[command(flatten)]
    pub admission: AdmissionFlags,
}

impl WebhookArgs {
    /// Whether the step `name` is enabled.
    fn enables(&self, name: &str) -> bool {
        self.enable.is_empty() || self.enable.iter().any(|f| f == name)
    }
}

const MUTATING: &str = "kruise-mutating-webhook-configuration";
const VALIDATING: &str = "kruise-validating-webhook-configuration";

/// The workloads step.
fn readiness_gate_step(ctx: &StepContext) -> Arc<dyn PodMutator> {
    Arc::new(KruisePodReadyGate {
        all_pods: ctx.gates.enabled("KruisePodReadinessGate"),
    })
}

/// The pod chain of the enabled steps (all compiled in when `enable` is empty); a name
/// that lends only a validating step is that chain's.
fn pod_chain(enable: &[String], ctx: &StepContext) -> anyhow::Result<PodChain> {
    let lent: Vec<PodStep> = registry::pod_steps();
    let validating: Vec<&'static str> = registry::pod_validators()
        .iter()
        .map(|step| step.name)
        .chain(registry::lent_webhooks().iter().map(|set| set.name))
        .collect();
    let mut steps: Vec<Arc<dyn PodMutator>> = Vec::new();
    if enable.is_empty() {
        steps.extend(lent.iter().map(|step| (step.build)(ctx)));
    }
    for name in enable {
        match lent.iter().find(|step| step.name == name.as_str()) {
            Some(step) => steps.push((step.build)(ctx)),
            None if validating.contains(&name.as_str()) => {}
            None => {
                let compiled_in: Vec<&str> = lent
                    .iter()
                    .map(|step| step.name)
                    .chain(validating.iter().copied())
                    .collect();
                anyhow::bail!(
                    "--enable: unknown family {name:?} (compiled in: {})",
                    compiled_in.join(",")
                );
            }
        }
    }
    Ok(PodChain::new(steps))
}

/// The validating pod chain of the enabled steps (all compiled in when `enable` is empty;
/// a name that lends only a mutating step, or none, is not an error here).
fn validating_pod_chain(
    enable: &[String],
    ctx: &StepContext,
) -> anyhow::Result<ValidatingPodChain> {
    let lent: Vec<PodValidatorStep> = registry::pod_validators();
    let steps: Vec<Arc<dyn PodValidator>> = lent
        .iter()
        .filter(|step| enable.is_empty() || enable.iter().any(|name| name == step.name))
        .map(|step| (step.build)(ctx))
        .collect();
    Ok(ValidatingPodChain::new(steps))
}

fn routes(args: &WebhookArgs, ctx: &StepContext) -> anyhow::Result<AdmissionRoutes> {
    let mut routes = AdmissionRoutes::new();
    let lent: Vec<LentWebhooks> = registry::lent_webhooks();
    for set in lent.iter().filter(|set| args.enables(set.name)) {
        for handler in (set.build)(ctx) {
            routes = routes.shared_handler(handler);
        }
    }
    if ctx.gates.enabled("PodWebhook") {
        routes = routes.handler(pod_chain(&args.enable, ctx)?);
        let validating = validating_pod_chain(&args.enable, ctx)?;
        if !validating.is_empty() {
            routes = routes.handler(validating);
        }
    }
    Ok(routes)
}

fn owned() -> Owned {
    Owned {
        mutating: Some(MUTATING.into()),
        validating: Some(VALIDATING.into()),
        crds: Vec::new(),
    }
}

fn manifests(flags: &Flags, args: &WebhookArgs) -> anyhow::Result<String> {
    let ctx = StepContext {
        gates: FeatureGates::parse(&flags.feature_gates)?,
        live: None,
        metrics: Metrics::new(),
    };
    let routes = routes(args, &ctx)?;
    let endpoint = args.admission.endpoint(BINARY);
    Ok(publish::configurations_yaml(&routes, &owned(), &endpoint)?)
}

/// kruise-webhook's registration: the pod-chain host, lending its own workloads step.
pub fn family() -> anyhow::Result<Family> {
    Ok(Family::new(NAME, BINARY, binary())
        .webhooks([MUTATING, VALIDATING])
        .lends(LENT)
        .hosts_pod_chain())
}

/// Its own step of the pod chain: the `KruisePodReady` readiness gate for workload pods.
pub const LENT: Lent = Lent {
    pod_steps: &[PodStep {
        name: WORKLOADS,
        build: readiness_gate_step,
    }],
    ..Lent::NONE
};

/// `kruise-webhook`, ready for [`Binary::main`] or [`Binary::run_argv`].
pub fn binary() -> Binary<WebhookArgs> {
    Binary::<WebhookArgs>::new(BINARY, env!("CARGO_PKG_VERSION"))
        .manifests(manifests)
        .every_replica(|ctx: Context<WebhookArgs>| async move {
            if let Some(dir) = &ctx.args.protection_log_path {
                kruise_admission::protection_log::init(dir)?;
            }
            let refresh = Arc::new(tokio::sync::Notify::new());
            let steps = StepContext {
                gates: ctx.gates.clone(),
                live: Some(LiveCluster {
                    client: ctx.client.clone(),
                    refresh: refresh.clone(),
                    shutdown: ctx.shutdown.clone(),
                }),
                metrics: ctx.metrics.clone(),
            };
            let routes = routes(&ctx.args, &steps)?
                .with_refresh(refresh)
                .with_metrics(&ctx.metrics);
            runner::run(
                ctx.client.clone(),
                ctx.binary,
                ctx.args.admission.clone(),
                routes,
                owned(),
                ctx.readiness.clone(),
                ctx.shutdown.clone(),
            )
            .await
        })
        // Pods the workloads step gates need the condition set once: the leader does it.
        .leader(|ctx: Context<WebhookArgs>| async move {
            if ctx.args.enables(WORKLOADS) {
                pod_readiness::run(ctx.client.clone(), ctx.shutdown.clone()).await;
            }
            Ok(())
        })
}
