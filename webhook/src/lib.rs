//! kruise-webhook: the admission server for built-in resources. It serves the pod mutating
//! chain from the steps the enabled families lend it (`--enable`), each step scoped to the
//! pods it can act on and with its own failure policy, so a stopped webhook blocks nothing
//! no enabled family cares about. Each family's own CRD webhooks stay in its binary.
//!
//! In the library so that hosts such as `kruise-sim up --controllers` run it in-process.

pub mod pod_readiness;

use std::sync::Arc;

use clap::Args;
use kruise_common::admission::AdmissionRoutes;
use kruise_common::admission::pod_chain::{KruisePodReadyGate, PodChain, PodMutator};
use kruise_common::admission::publish::{self, Owned};
use kruise_common::admission::runner::{self, AdmissionFlags};
use kruise_common::featuregate::FeatureGates;
use kruise_common::runtime::{Binary, Context, Flags};

/// The handlers compiled into this binary (Cargo features choose; all by default).
#[cfg(feature = "sidecarset")]
const AVAILABLE: &str = "workloads,sidecarset";
#[cfg(not(feature = "sidecarset"))]
const AVAILABLE: &str = "workloads";

/// The binary's name (also its Service, Secret and user agent).
pub const BINARY: &str = "kruise-webhook";

/// kruise-webhook's own flags.
#[derive(Args, Clone, Debug)]
pub struct WebhookArgs {
    /// Families whose admission handlers are active, comma-separated; by default every one
    /// compiled in (workloads, and sidecarset with the `sidecarset` Cargo feature).
    #[arg(
        long,
        env = "ENABLE",
        value_delimiter = ',',
        default_value = AVAILABLE,
        global = true
    )]
    pub enable: Vec<String>,
    /// Where the admission server listens and how its certificates are kept.
    #[command(flatten)]
    pub admission: AdmissionFlags,
}

const MUTATING: &str = "kruise-mutating-webhook-configuration";

/// Live state the steps read; absent in `manifests`, where nothing is watched.
#[derive(Clone, Default)]
struct Caches {
    #[cfg(feature = "sidecarset")]
    sidecarsets: Option<kruise_sidecarset::live::LiveSnapshot>,
}

/// The pod chain for the enabled families.
fn pod_chain(enable: &[String], gates: &FeatureGates, caches: &Caches) -> anyhow::Result<PodChain> {
    let mut steps: Vec<Arc<dyn PodMutator>> = Vec::new();
    for family in enable {
        match family.as_str() {
            // Pods of Kruise workloads get the KruisePodReady gate.
            "workloads" => steps.push(Arc::new(KruisePodReadyGate {
                all_pods: gates.enabled("KruisePodReadinessGate"),
            })),
            #[cfg(feature = "sidecarset")]
            "sidecarset" => {
                // Without live caches (manifests) no SidecarSet is known: no entry.
                let snapshot: Arc<dyn kruise_sidecarset::admission::SidecarSetSnapshot> =
                    match &caches.sidecarsets {
                        Some(live) => Arc::new(live.clone()),
                        None => Arc::new(kruise_sidecarset::admission::StaticSnapshot::default()),
                    };
                steps.push(Arc::new(
                    kruise_sidecarset::admission::SidecarSetInjectionStep::new(snapshot),
                ));
            }
            other => anyhow::bail!("--enable: unknown family {other:?} (compiled in: {AVAILABLE})"),
        }
    }
    let _ = caches;
    Ok(PodChain::new(steps))
}

fn routes(
    args: &WebhookArgs,
    gates: &FeatureGates,
    caches: &Caches,
) -> anyhow::Result<AdmissionRoutes> {
    let mut routes = AdmissionRoutes::new();
    if gates.enabled("PodWebhook") {
        routes = routes.handler(pod_chain(&args.enable, gates, caches)?);
    }
    Ok(routes)
}

fn owned() -> Owned {
    Owned {
        mutating: Some(MUTATING.into()),
        validating: None,
        crds: Vec::new(),
    }
}

fn manifests(flags: &Flags, args: &WebhookArgs) -> anyhow::Result<String> {
    let gates = FeatureGates::parse(&flags.feature_gates)?;
    let routes = routes(args, &gates, &Caches::default())?;
    let endpoint = args.admission.endpoint(BINARY);
    Ok(publish::configurations_yaml(&routes, &owned(), &endpoint)?)
}

/// `kruise-webhook`, ready for [`Binary::main`] or [`Binary::run_argv`].
pub fn binary() -> Binary<WebhookArgs> {
    Binary::<WebhookArgs>::new(BINARY, env!("CARGO_PKG_VERSION"))
        .manifests(manifests)
        .every_replica(|ctx: Context<WebhookArgs>| async move {
            let refresh = Arc::new(tokio::sync::Notify::new());
            #[allow(unused_mut)]
            let mut caches = Caches::default();
            #[cfg(feature = "sidecarset")]
            if ctx.args.enable.iter().any(|f| f == "sidecarset") {
                caches.sidecarsets = Some(kruise_sidecarset::live::start(
                    ctx.client.clone(),
                    refresh.clone(),
                    ctx.shutdown.clone(),
                ));
            }
            let routes = routes(&ctx.args, &ctx.gates, &caches)?
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
            if ctx.args.enable.iter().any(|f| f == "workloads") {
                pod_readiness::run(ctx.client.clone(), ctx.shutdown.clone()).await;
            }
            Ok(())
        })
}
