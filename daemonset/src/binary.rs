//! The Advanced DaemonSet family's one registration ([`family`]): the `kruise-daemonset`
//! binary — the CRD and its webhooks (defaulting, validation, `/convert`) on every replica,
//! the controller on the leader. In the library so that hosts such as
//! `kruise-playground up` can run it in-process.

use clap::{ArgAction, Args};
use kruise_admission::runner::ServesCrdWebhooks as _;
use kruise_admission::runner::{AdmissionFlags, CrdWebhooks};
use kruise_runtime::family::Family;
use kruise_runtime::{Binary, Context};

use crate::plan::pods::Placement;
use crate::{admission, api, controller};

/// The family's name (`--controllers`, the crate's directory).
pub const NAME: &str = "daemonset";
/// The binary's name (also its Service, Secret and user agent).
pub const BINARY: &str = "kruise-daemonset";
/// The webhook configurations and CRD whose caBundle this binary keeps current.
const WEBHOOKS: CrdWebhooks = CrdWebhooks {
    mutating: "kruise-daemonset-mutating",
    validating: "kruise-daemonset-validating",
    crds: &[api::CRD_NAME],
};

/// `kruise-daemonset`'s flags: the admission server's, and OpenKruise's
/// `--assign-pods-by-scheduler`.
#[derive(Args, Clone, Debug)]
pub struct DaemonSetFlags {
    /// The admission server's flags.
    #[command(flatten)]
    pub admission: AdmissionFlags,
    /// Place daemon pods through node affinity for the scheduler (`true`), or bind them by
    /// `spec.nodeName` with scheduler `kubernetes.io/daemonset-controller` (`false`).
    #[arg(long, default_value_t = true, action = ArgAction::Set, global = true)]
    pub assign_pods_by_scheduler: bool,
}

impl AsRef<AdmissionFlags> for DaemonSetFlags {
    fn as_ref(&self) -> &AdmissionFlags {
        &self.admission
    }
}

/// The Advanced DaemonSet family: the `kruise-daemonset` binary, its webhooks and
/// controller.
pub fn family() -> anyhow::Result<Family> {
    Ok(Family::new(NAME, BINARY, binary()?)
        .webhooks(WEBHOOKS.names())
        .controllers([controller::CONTROLLER_NAME]))
}

/// `kruise-daemonset`, ready for [`Binary::main`] or [`Binary::run_argv`].
pub fn binary() -> anyhow::Result<Binary<DaemonSetFlags>> {
    let crd = api::crd::crd().map_err(|e| anyhow::anyhow!("building the DaemonSet CRD: {e}"))?;
    Ok(
        Binary::<DaemonSetFlags>::new(BINARY, env!("CARGO_PKG_VERSION"))
            .crds(vec![crd])
            .crd_webhooks(WEBHOOKS, |_ctx: Option<&Context<DaemonSetFlags>>| {
                admission::routes()
            })
            .controller(|ctx: Context<DaemonSetFlags>| async move {
                let settings = controller::Settings {
                    namespace: ctx.flags.namespace.clone(),
                    placement: if ctx.args.assign_pods_by_scheduler {
                        Placement::Scheduler
                    } else {
                        Placement::NodeName
                    },
                    prune_ineligible_nodes: ctx.gates.enabled("DaemonSetPruneIneligibleNodes"),
                    pre_download: ctx.gates.enabled("PreDownloadImageForDaemonSetUpdate"),
                    in_place_gates: ctx.gates.in_place(),
                    ..controller::Settings::default()
                };
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
