//! The ResourceDistribution family's one registration ([`family`]): the
//! `kruise-resourcedistribution` binary — the CRD, its validating webhook on every replica,
//! and the controller on the leader. In the library so that hosts such as
//! `kruise-playground up` run it in-process.
//!
//! OpenKruise's `ResourceDistributionGate` is not consulted: running this family is the
//! opt-in (the chart's `resourcedistribution.enabled`).

use kruise_admission::runner::ServesCrdWebhooks as _;
use kruise_admission::runner::{AdmissionFlags, CrdWebhooks};
use kruise_runtime::family::Family;
use kruise_runtime::{Binary, Context};

use crate::{admission, api, controller};

/// The family's name (`--controllers`, the crate's directory).
pub const NAME: &str = "resourcedistribution";
/// The binary's name (also its Service, Secret and user agent).
pub const BINARY: &str = "kruise-resourcedistribution";
/// The webhook configurations it registers (one version: nothing to convert).
const WEBHOOKS: CrdWebhooks = CrdWebhooks {
    mutating: "kruise-resourcedistribution-mutating",
    validating: "kruise-resourcedistribution-validating",
    crds: &[],
};

/// The ResourceDistribution family: the binary, its webhook and its controller.
pub fn family() -> anyhow::Result<Family> {
    Ok(Family::new(NAME, BINARY, binary()?)
        .webhooks(WEBHOOKS.names())
        .controllers([controller::CONTROLLER_NAME]))
}

/// `kruise-resourcedistribution`, ready for [`Binary::main`] or [`Binary::run_argv`].
pub fn binary() -> anyhow::Result<Binary<AdmissionFlags>> {
    let crd = api::crd::crd().map_err(|e| anyhow::anyhow!("building the CRD: {e}"))?;
    Ok(
        Binary::<AdmissionFlags>::new(BINARY, env!("CARGO_PKG_VERSION"))
            .crds(vec![crd])
            .crd_webhooks(
                WEBHOOKS,
                |ctx: Option<&Context<AdmissionFlags>>| match ctx {
                    Some(ctx) => {
                        admission::routes(Some(ctx.client.clone()), &ctx.args.webhook_namespace)
                    }
                    None => admission::routes(None, "kruise-system"),
                },
            )
            .controller(|ctx: Context<AdmissionFlags>| async move {
                let opts = ctx.controller_options(controller::CONTROLLER_NAME);
                controller::run(ctx.client.clone(), opts).await;
                Ok(())
            }),
    )
}
