//! The CloneSet family's one registration ([`family`]): the `kruise-cloneset` binary — the
//! CloneSet CRD, its webhooks (defaulting, validation, `/convert`) on every replica and the
//! controller on the leader. In the library so that hosts such as `kruise-playground up`
//! run it in-process.

use kruise_common::admission::publish::{self, Owned};
use kruise_common::admission::runner::{self, AdmissionFlags};
use kruise_common::family::Family;
use kruise_common::runtime::{Binary, Context, Flags};

use crate::{admission, api, controller};

/// The family's name (`--controllers`, the crate's directory).
pub const NAME: &str = "cloneset";
/// The binary's name (also its Service, Secret and user agent).
pub const BINARY: &str = "kruise-cloneset";
const MUTATING: &str = "kruise-cloneset-mutating";
const VALIDATING: &str = "kruise-cloneset-validating";

/// The webhook configurations and CRD whose caBundle this binary keeps current.
fn owned() -> Owned {
    Owned {
        mutating: Some(MUTATING.into()),
        validating: Some(VALIDATING.into()),
        crds: vec!["clonesets.apps.kruise.io".into()],
    }
}

fn manifests(_flags: &Flags, args: &AdmissionFlags) -> anyhow::Result<String> {
    let endpoint = args.endpoint(BINARY);
    Ok(publish::configurations_yaml(
        &admission::routes(None),
        &owned(),
        &endpoint,
    )?)
}

/// The CloneSet family: the `kruise-cloneset` binary, its webhooks and controller.
pub fn family() -> anyhow::Result<Family> {
    Ok(Family::new(NAME, BINARY, binary()?)
        .webhooks([MUTATING, VALIDATING])
        .controllers([controller::CONTROLLER_NAME]))
}

/// `kruise-cloneset`, ready for [`Binary::main`] or [`Binary::run_argv`].
pub fn binary() -> anyhow::Result<Binary<AdmissionFlags>> {
    let crd = api::crd::crd().map_err(|e| anyhow::anyhow!("building the CloneSet CRD: {e}"))?;
    Ok(
        Binary::<AdmissionFlags>::new(BINARY, env!("CARGO_PKG_VERSION"))
            .crds(vec![crd])
            .manifests(manifests)
            .every_replica(|ctx: Context<AdmissionFlags>| async move {
                runner::run(
                    ctx.client.clone(),
                    ctx.binary,
                    ctx.args.clone(),
                    admission::routes(Some(ctx.client.clone())).with_metrics(&ctx.metrics),
                    owned(),
                    ctx.readiness.clone(),
                    ctx.shutdown.clone(),
                )
                .await
            })
            .controller(|ctx: Context<AdmissionFlags>| async move {
                let settings = controller::Settings {
                    namespace: ctx.flags.namespace.clone(),
                    gates: controller::plan_gates(&ctx.gates),
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
