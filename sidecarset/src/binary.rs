//! The SidecarSet family's one registration ([`family`]): the `kruise-sidecarset` binary —
//! the SidecarSet CRD, its webhooks (defaulting, validation, `/convert`) on every replica
//! and the controller on the leader — and the injection step it lends kruise-webhook's pod
//! chain. In the library so that hosts such as `kruise-playground up` run it in-process.

use kruise_admission::runner::ServesCrdWebhooks as _;
use std::sync::Arc;

use kruise_admission::AdmissionRoutes;
use kruise_admission::pod_chain::PodMutator;
use kruise_admission::runner::{AdmissionFlags, CrdWebhooks};
use kruise_runtime::family::{Family, Lent, PodStep, StepContext};
use kruise_runtime::{Binary, Context};

use crate::admission::{
    SidecarSetInjectionStep, SidecarSetMutatingHandler, SidecarSetSnapshot,
    SidecarSetValidatingHandler, StaticSnapshot,
};
use crate::conversion::SidecarSetConverter;
use crate::{admission::live, api, controller};

/// The family's name (`--controllers`, kruise-webhook's `--enable`, the crate's directory).
pub const NAME: &str = "sidecarset";
/// The binary's name (also its Service, Secret and user agent).
pub const BINARY: &str = "kruise-sidecarset";
/// The webhook configurations and CRD whose caBundle this binary keeps current.
const WEBHOOKS: CrdWebhooks = CrdWebhooks {
    mutating: "kruise-sidecarset-mutating",
    validating: "kruise-sidecarset-validating",
    crds: &["sidecarsets.apps.kruise.io"],
};

/// The routes `kruise-sidecarset` serves; validation checks conflicts against `snapshot`.
pub fn routes(snapshot: Arc<dyn SidecarSetSnapshot>) -> AdmissionRoutes {
    AdmissionRoutes::new()
        .handler(SidecarSetMutatingHandler)
        .handler(SidecarSetValidatingHandler::new(snapshot))
        .converter(SidecarSetConverter)
}

/// The SidecarSet family: the `kruise-sidecarset` binary, its webhooks and controller, and
/// sidecar injection lent to kruise-webhook's pod chain.
pub fn family() -> anyhow::Result<Family> {
    Ok(Family::new(NAME, BINARY, binary()?)
        .webhooks(WEBHOOKS.names())
        .controllers([controller::CONTROLLER_NAME])
        .lends(LENT))
}

/// What it lends kruise-webhook: SidecarSet injection in the pod mutating chain.
pub const LENT: Lent = Lent {
    pod_steps: &[PodStep {
        name: NAME,
        build: injection_step,
    }],
    ..Lent::NONE
};

/// The pod-chain step: injects the sidecars of the SidecarSets kruise-webhook watches
/// (none without a live cluster, as for `manifests`).
fn injection_step(ctx: &StepContext) -> Arc<dyn PodMutator> {
    let snapshot: Arc<dyn SidecarSetSnapshot> = match &ctx.live {
        Some(live) => Arc::new(live::start(
            live.client.clone(),
            live.refresh.clone(),
            live.shutdown.clone(),
        )),
        None => Arc::new(StaticSnapshot::default()),
    };
    Arc::new(SidecarSetInjectionStep::new(snapshot))
}

/// Allows any patchPodMetadata key when no whitelist applies (OpenKruise's gate, default off).
const PATCH_METADATA_DEFAULTS_ALLOWED_GATE: &str = "SidecarSetPatchPodMetadataDefaultsAllowed";

/// The kruise namespace: the one the binary runs in (`POD_NAMESPACE`), else `kruise-system`.
fn kruise_namespace() -> String {
    let pod_namespace = std::env::var(controller::POD_NAMESPACE_ENV).ok();
    controller::Settings::in_namespace(pod_namespace.as_deref()).revision_namespace
}

/// `kruise-sidecarset`, ready for [`Binary::main`] or [`Binary::run_argv`].
pub fn binary() -> anyhow::Result<Binary<AdmissionFlags>> {
    let crd = api::crd::crd().map_err(|e| anyhow::anyhow!("building the SidecarSet CRD: {e}"))?;
    Ok(
        Binary::<AdmissionFlags>::new(BINARY, env!("CARGO_PKG_VERSION"))
            .crds(vec![crd])
            // Validation checks conflicts against the live SidecarSets (none for `manifests`).
            .crd_webhooks(WEBHOOKS, |ctx: Option<&Context<AdmissionFlags>>| {
                let snapshot: Arc<dyn SidecarSetSnapshot> = match ctx {
                    Some(ctx) => Arc::new(
                        live::start(
                            ctx.client.clone(),
                            Arc::new(tokio::sync::Notify::new()),
                            ctx.shutdown.clone(),
                        )
                        // The patchPodMetadata whitelist is read where OpenKruise reads it:
                        // `kruise-configuration` in the namespace the binary runs in.
                        .with_kruise_configuration(
                            &kruise_namespace(),
                            ctx.gates.enabled(PATCH_METADATA_DEFAULTS_ALLOWED_GATE),
                        ),
                    ),
                    None => Arc::new(StaticSnapshot::default()),
                };
                routes(snapshot)
            })
            .controller(|ctx: Context<AdmissionFlags>| async move {
                // The namespace the binary runs in, not `--webhook-namespace`'s: revisions
                // stay where OpenKruise keeps them when the webhook is served elsewhere.
                let settings = controller::Settings::in_namespace(Some(&kruise_namespace()));
                controller::run(
                    ctx.client.clone(),
                    settings,
                    ctx.controller_options(controller::CONTROLLER_NAME),
                )
                .await;
                Ok(())
            }),
    )
}
