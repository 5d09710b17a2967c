//! The BroadcastJob family's one registration ([`family`]): the `kruise-broadcastjob`
//! binary — both CRDs, their webhooks (defaulting, validation, `/convert`) on every replica,
//! and the BroadcastJob and AdvancedCronJob controllers on the leader. In the library so
//! that hosts such as `kruise-playground up` run it in-process.

use clap::{ArgAction, Args};
use kruise_admission::runner::ServesCrdWebhooks as _;
use kruise_admission::runner::{AdmissionFlags, CrdWebhooks};
use kruise_runtime::family::Family;
use kruise_runtime::{Binary, Context};

use crate::api::{ADVANCEDCRONJOB_CRD, BROADCASTJOB_CRD};
use crate::controller::{self, ADVANCEDCRONJOB_CONTROLLER, BROADCASTJOB_CONTROLLER, Settings};
use crate::plan::broadcastjob::PodBinding;
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

/// kruise-broadcastjob: OpenKruise's BroadcastJob and AdvancedCronJob controllers and their webhooks
// (its flags: the admission server's and OpenKruise's `--assign-bcj-pods-by-scheduler`;
// clap shows the doc line above as the binary's `--help` header).
#[derive(Args, Clone, Debug)]
pub struct BroadcastJobFlags {
    /// The admission server's flags.
    #[command(flatten)]
    pub admission: AdmissionFlags,
    /// Bind BroadcastJob pods through node affinity for the scheduler to place (`true`), or
    /// set their `spec.nodeName` (`false`).
    #[arg(long, default_value_t = true, action = ArgAction::Set, global = true)]
    pub assign_bcj_pods_by_scheduler: bool,
}

impl AsRef<AdmissionFlags> for BroadcastJobFlags {
    fn as_ref(&self) -> &AdmissionFlags {
        &self.admission
    }
}

/// The BroadcastJob family: the `kruise-broadcastjob` binary, its webhooks and controllers.
pub fn family() -> anyhow::Result<Family> {
    Ok(Family::new(NAME, BINARY, binary()?)
        .webhooks(WEBHOOKS.names())
        .controllers([BROADCASTJOB_CONTROLLER, ADVANCEDCRONJOB_CONTROLLER]))
}

/// `kruise-broadcastjob`, ready for [`Binary::main`] or [`Binary::run_argv`].
pub fn binary() -> anyhow::Result<Binary<BroadcastJobFlags>> {
    let crds = api::crd::crds().map_err(|e| anyhow::anyhow!("building the CRDs: {e}"))?;
    let settings = |ctx: &Context<BroadcastJobFlags>| Settings {
        namespace: ctx.flags.namespace.clone(),
        pod_binding: if ctx.args.assign_bcj_pods_by_scheduler {
            PodBinding::Scheduler
        } else {
            PodBinding::NodeName
        },
        ..Settings::default()
    };
    Ok(
        Binary::<BroadcastJobFlags>::new(BINARY, env!("CARGO_PKG_VERSION"))
            .crds(crds)
            .crd_webhooks(
                WEBHOOKS,
                |ctx: Option<&Context<BroadcastJobFlags>>| match ctx {
                    Some(ctx) => admission::routes_for(&ctx.gates),
                    None => admission::routes(),
                },
            )
            .controller(move |ctx: Context<BroadcastJobFlags>| async move {
                let opts = ctx.controller_options(BROADCASTJOB_CONTROLLER);
                controller::broadcastjob::run(ctx.client.clone(), settings(&ctx), opts).await;
                Ok(())
            })
            .controller(move |ctx: Context<BroadcastJobFlags>| async move {
                let opts = ctx.controller_options(ADVANCEDCRONJOB_CONTROLLER);
                controller::cron::run(ctx.client.clone(), settings(&ctx), opts).await;
                Ok(())
            }),
    )
}
