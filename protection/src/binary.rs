//! The protection family's one registration ([`family`]): the `kruise-protection` binary —
//! the PodUnavailableBudget CRD and its webhooks (validation, `/convert`) on every replica,
//! the PodUnavailableBudget controller on the leader; and what it lends kruise-webhook: the
//! related-pub step of the mutating pod chain, the PUB step of the validating pod chain and
//! the deletion-protection webhooks of built-in kinds.
//! In the library so that hosts such as `kruise-playground up` run it in-process.

use kruise_admission::runner::ServesCrdWebhooks as _;
use std::sync::Arc;

use kruise_admission::runner::{AdmissionFlags, CrdWebhooks};
use kruise_core::featuregate::FeatureGates;
use kruise_runtime::family::{Family, Lent, LentWebhooks, PodStep, PodValidatorStep};
use kruise_runtime::{Binary, Context};

use crate::admission::{self, LiveBudgets, NamespaceBudgets, NoBudgets};
use crate::{api, controller, deletion_webhook, pod_admission, pod_mutation};

/// The family's name (`--controllers`, the crate's directory).
pub const NAME: &str = "protection";
/// The binary's name (also its Service, Secret and user agent).
pub const BINARY: &str = "kruise-protection";
/// The webhook configurations and CRDs whose caBundle this binary keeps current.
const WEBHOOKS: CrdWebhooks = CrdWebhooks {
    mutating: "kruise-protection-mutating",
    validating: "kruise-protection-validating",
    crds: &[api::CRD],
};

/// The protection family: the `kruise-protection` binary and its webhooks.
pub fn family() -> anyhow::Result<Family> {
    Ok(Family::new(NAME, BINARY, binary()?)
        .webhooks(WEBHOOKS.names())
        .controllers([controller::CONTROLLER_NAME])
        .lends(LENT))
}

/// What it lends kruise-webhook: the related-pub annotation step of the pod mutating chain,
/// the PUB step of the validating pod chain and the deletion-protection webhooks of
/// built-in kinds.
pub const LENT: Lent = Lent {
    pod_steps: &[PodStep {
        name: NAME,
        build: pod_mutation::related_pub_step,
    }],
    pod_validators: &[PodValidatorStep {
        name: NAME,
        build: pod_admission::pub_validator_step,
    }],
    webhooks: &[LentWebhooks {
        name: NAME,
        build: deletion_webhook::lent_webhooks,
    }],
};

/// `kruise-protection`, ready for [`Binary::main`] or [`Binary::run_argv`].
pub fn binary() -> anyhow::Result<Binary<AdmissionFlags>> {
    let crd = api::crd::crd()
        .map_err(|e| anyhow::anyhow!("building the PodUnavailableBudget CRD: {e}"))?;
    Ok(
        Binary::<AdmissionFlags>::new(BINARY, env!("CARGO_PKG_VERSION"))
            .crds(vec![crd])
            // Validation checks conflicts against the live budgets (none for `manifests`).
            .crd_webhooks(WEBHOOKS, |ctx: Option<&Context<AdmissionFlags>>| {
                let (gates, budgets): (FeatureGates, Arc<dyn NamespaceBudgets>) = match ctx {
                    Some(ctx) => (ctx.gates.clone(), Arc::new(LiveBudgets(ctx.client.clone()))),
                    None => (FeatureGates::default(), Arc::new(NoBudgets)),
                };
                admission::routes(&gates, budgets)
            })
            .controller(|ctx: Context<AdmissionFlags>| async move {
                let opts = ctx.controller_options(controller::CONTROLLER_NAME);
                controller::run(ctx.client.clone(), ctx.flags.namespace.as_deref(), opts).await;
                Ok(())
            }),
    )
}
