//! `kruise-cloneset [run|crd|manifests]`: the CloneSet controller (on the leader) and the
//! CloneSet webhooks — defaulting, validation, `/convert` — (on every replica).

use kruise_cloneset::{admission, api, controller};
use kruise_common::admission::publish::{self, Owned};
use kruise_common::admission::runner::{self, AdmissionFlags};
use kruise_common::runtime::{Binary, Context, Flags};

const BINARY: &str = "kruise-cloneset";

/// The webhook configurations and CRD whose caBundle this binary keeps current.
fn owned() -> Owned {
    Owned {
        mutating: Some("kruise-cloneset-mutating".into()),
        validating: Some("kruise-cloneset-validating".into()),
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

fn main() -> std::process::ExitCode {
    let crd = match api::crd::crd() {
        Ok(crd) => crd,
        Err(e) => {
            eprintln!("error: building the CloneSet CRD: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    Binary::<AdmissionFlags>::new(BINARY, env!("CARGO_PKG_VERSION"))
        .crds(vec![crd])
        .manifests(manifests)
        .every_replica(|ctx: Context<AdmissionFlags>| async move {
            runner::run(
                ctx.client.clone(),
                ctx.binary,
                ctx.args.clone(),
                admission::routes(Some(ctx.client.clone())),
                owned(),
                ctx.readiness.clone(),
                ctx.shutdown.clone(),
            )
            .await
        })
        .leader(|ctx: Context<AdmissionFlags>| async move {
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
        })
        .main()
}
