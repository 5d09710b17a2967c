//! The BroadcastJob family's one registration ([`family`]): the `kruise-broadcastjob`
//! binary — both CRDs, their webhooks (defaulting, validation, `/convert`) on every replica,
//! and the BroadcastJob and AdvancedCronJob controllers on the leader. In the library so
//! that hosts such as `kruise-playground up` run it in-process.

use kruise_common::admission::runner::{AdmissionFlags, CrdWebhooks};
use kruise_common::family::Family;
use kruise_common::runtime::{Binary, Context};

use crate::api::{ADVANCEDCRONJOB_CRD, BROADCASTJOB_CRD};
use crate::controller::{self, ADVANCEDCRONJOB_CONTROLLER, BROADCASTJOB_CONTROLLER, Settings};
use crate::{admission, api};

/// The family's name (`--controllers`, the crate's directory).
pub const NAME: &str = "broadcastjob";
/// The binary's name (also its Service, Secret and user agent).
pub const BINARY: &str = "kruise-broadcastjob";
/// The webhook configurations and CRDs whose caBundle this binary keeps current.
const WEBHOOKS: CrdWebhooks = CrdWebhooks {
    mutating: "kruise-broadcastjob-mutating",
    validating: "kruise-broadcastjob-validating",
    crds: &[BROADCASTJOB_CRD, ADVANCEDCRONJOB_CRD],
};

/// The BroadcastJob family: the `kruise-broadcastjob` binary, its webhooks and controllers.
pub fn family() -> anyhow::Result<Family> {
    Ok(Family::new(NAME, BINARY, binary()?)
        .webhooks(WEBHOOKS.names())
        .controllers([BROADCASTJOB_CONTROLLER, ADVANCEDCRONJOB_CONTROLLER]))
}

/// `kruise-broadcastjob`, ready for [`Binary::main`] or [`Binary::run_argv`].
pub fn binary() -> anyhow::Result<Binary<AdmissionFlags>> {
    let crds = api::crd::crds().map_err(|e| anyhow::anyhow!("building the CRDs: {e}"))?;
    let settings = |ctx: &Context<AdmissionFlags>| Settings {
        namespace: ctx.flags.namespace.clone(),
        ..Settings::default()
    };
    Ok(
        Binary::<AdmissionFlags>::new(BINARY, env!("CARGO_PKG_VERSION"))
            .crds(crds)
            .crd_webhooks(WEBHOOKS, |_: Option<&Context<AdmissionFlags>>| {
                admission::routes()
            })
            .controller(move |ctx: Context<AdmissionFlags>| async move {
                let opts = ctx.controller_options(BROADCASTJOB_CONTROLLER);
                controller::broadcastjob::run(ctx.client.clone(), settings(&ctx), opts).await;
                Ok(())
            })
            .controller(move |ctx: Context<AdmissionFlags>| async move {
                let opts = ctx.controller_options(ADVANCEDCRONJOB_CONTROLLER);
                controller::cron::run(ctx.client.clone(), settings(&ctx), opts).await;
                Ok(())
            }),
    )
}
