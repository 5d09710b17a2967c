//! The Advanced StatefulSet family's one registration ([`family`]): the
//! `kruise-statefulset` binary — the CRD, its webhooks (defaulting, validation, `/convert`)
//! on every replica and the controller on the leader. In the library so that hosts such as
//! `kruise-playground up` run it in-process.

use kruise_admission::runner::ServesCrdWebhooks as _;
use kruise_admission::runner::{AdmissionFlags, CrdWebhooks};
use kruise_runtime::family::Family;
use kruise_runtime::{Binary, Context};

use crate::{admission, api, controller};

/// The family's name (`--controllers`, the crate's directory).
pub const NAME: &str = "statefulset";
/// The binary's name (also its Service, Secret and user agent).
pub const BINARY: &str = "kruise-statefulset";
/// The webhook configurations and CRD whose caBundle this binary keeps current.
const WEBHOOKS: CrdWebhooks = CrdWebhooks {
    mutating: "kruise-statefulset-mutating",
    validating: "kruise-statefulset-validating",
    crds: &["statefulsets.apps.kruise.io"],
};

/// The Advanced StatefulSet family: the `kruise-statefulset` binary, its webhooks and
/// controller.
pub fn family() -> anyhow::Result<Family> {
    Ok(Family::new(NAME, BINARY, binary()?)
        .webhooks(WEBHOOKS.names())
        .controllers([controller::CONTROLLER_NAME]))
}

/// `kruise-statefulset`, ready for [`Binary::main`] or [`Binary::run_argv`].
pub fn binary() -> anyhow::Result<Binary<AdmissionFlags>> {
    let crd = api::crd::crd().map_err(|e| anyhow::anyhow!("building the StatefulSet CRD: {e}"))?;
    Ok(
        Binary::<AdmissionFlags>::new(BINARY, env!("CARGO_PKG_VERSION"))
            .crds(vec![crd])
            .crd_webhooks(WEBHOOKS, |ctx: Option<&Context<AdmissionFlags>>| {
                let mutate = ctx.map_or_else(Default::default, |ctx| {
                    admission::MutateStatefulSet::from_gates(&ctx.gates)
                });
                admission::routes(mutate, ctx.map(|ctx| ctx.client.clone()))
            })
            .controller(|ctx: Context<AdmissionFlags>| async move {
                let settings = controller::Settings {
                    namespace: ctx.flags.namespace.clone(),
                    gates: controller::plan_gates(&ctx.gates),
                    defaulting: controller::defaulting_gates(&ctx.gates),
                    pre_download: ctx.gates.enabled("PreDownloadImageForInPlaceUpdate"),
                    ..controller::Settings::default()
                };
                controller::run(
                    ctx.client.clone(),
                    settings,
                    &ctx.metrics,
                    ctx.controller_options(controller::CONTROLLER_NAME),
                )
                .await;
                Ok(())
            }),
    )
}
