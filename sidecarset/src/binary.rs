//! The `kruise-sidecarset` binary's composition: the SidecarSet CRD, its webhooks —
//! defaulting, validation, `/convert` — on every replica and the controller on the leader.
//! Pod injection is not here: it is a step of kruise-webhook's pod chain. In the library so
//! that hosts such as `kruise-sim up --controllers` run it in-process.

use std::sync::Arc;

use kruise_common::admission::AdmissionRoutes;
use kruise_common::admission::publish::{self, Owned};
use kruise_common::admission::runner::{self, AdmissionFlags};
use kruise_common::runtime::{Binary, Context, Flags};

use crate::admission::{
    SidecarSetMutatingHandler, SidecarSetSnapshot, SidecarSetValidatingHandler, StaticSnapshot,
};
use crate::conversion::SidecarSetConverter;
use crate::{api, controller, live};

/// The binary's name (also its Service, Secret and user agent).
pub const BINARY: &str = "kruise-sidecarset";

/// The webhook configurations and CRD whose caBundle this binary keeps current.
fn owned() -> Owned {
    Owned {
        mutating: Some("kruise-sidecarset-mutating".into()),
        validating: Some("kruise-sidecarset-validating".into()),
        crds: vec!["sidecarsets.apps.kruise.io".into()],
    }
}

/// The routes `kruise-sidecarset` serves; validation checks conflicts against `snapshot`.
pub fn routes(snapshot: Arc<dyn SidecarSetSnapshot>) -> AdmissionRoutes {
    AdmissionRoutes::new()
        .handler(SidecarSetMutatingHandler)
        .handler(SidecarSetValidatingHandler::new(snapshot))
        .converter(SidecarSetConverter)
}

fn manifests(_flags: &Flags, args: &AdmissionFlags) -> anyhow::Result<String> {
    let endpoint = args.endpoint(BINARY);
    Ok(publish::configurations_yaml(
        &routes(Arc::new(StaticSnapshot::default())),
        &owned(),
        &endpoint,
    )?)
}

/// `kruise-sidecarset`, ready for [`Binary::main`] or [`Binary::run_argv`].
pub fn binary() -> anyhow::Result<Binary<AdmissionFlags>> {
    let crd = api::crd::crd().map_err(|e| anyhow::anyhow!("building the SidecarSet CRD: {e}"))?;
    Ok(
        Binary::<AdmissionFlags>::new(BINARY, env!("CARGO_PKG_VERSION"))
            .crds(vec![crd])
            .manifests(manifests)
            .every_replica(|ctx: Context<AdmissionFlags>| async move {
                let snapshot = live::start(
                    ctx.client.clone(),
                    Arc::new(tokio::sync::Notify::new()),
                    ctx.shutdown.clone(),
                );
                runner::run(
                    ctx.client.clone(),
                    ctx.binary,
                    ctx.args.clone(),
                    routes(Arc::new(snapshot)).with_metrics(&ctx.metrics),
                    owned(),
                    ctx.readiness.clone(),
                    ctx.shutdown.clone(),
                )
                .await
            })
            .controller(|ctx: Context<AdmissionFlags>| async move {
                let settings = controller::Settings {
                    revision_namespace: ctx.args.webhook_namespace.clone(),
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
