//! The Advanced DaemonSet family's one registration ([`family`]): the `kruise-daemonset`
//! binary — the CRD and its webhooks (defaulting, validation, `/convert`) on every replica,
//! the controller on the leader. In the library so that hosts such as
//! `kruise-playground up` can run it in-process.

use kruise_common::admission::runner::{AdmissionFlags, CrdWebhooks};
use kruise_common::family::Family;
use kruise_common::runtime::{Binary, Context};

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

/// The Advanced DaemonSet family: the `kruise-daemonset` binary, its webhooks and
/// controller.
pub fn family() -> anyhow::Result<Family> {
    Ok(Family::new(NAME, BINARY, binary()?)
        .webhooks(WEBHOOKS.names())
        .controllers([controller::CONTROLLER_NAME]))
}

/// `kruise-daemonset`, ready for [`Binary::main`] or [`Binary::run_argv`].
pub fn binary() -> anyhow::Result<Binary<AdmissionFlags>> {
    let crd = api::crd::crd().map_err(|e| anyhow::anyhow!("building the DaemonSet CRD: {e}"))?;
    Ok(
        Binary::<AdmissionFlags>::new(BINARY, env!("CARGO_PKG_VERSION"))
            .crds(vec![crd])
            .crd_webhooks(WEBHOOKS, |_ctx: Option<&Context<AdmissionFlags>>| {
                admission::routes()
            })
            .controller(|ctx: Context<AdmissionFlags>| async move {
                let settings = controller::Settings {
                    namespace: ctx.flags.namespace.clone(),
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
