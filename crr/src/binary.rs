//! The ContainerRecreateRequest family's one registration ([`family`]): the `kruise-crr`
//! binary — the CRD and its webhook (defaulting and checks against the pod, `/convert`) on
//! every replica, the controller on the leader — and its node agent. In the library so that
//! hosts such as `kruise-playground up` run it in-process (one agent per simulated node).

use kruise_admission::runner::ServesCrdWebhooks as _;
use std::sync::Arc;

use kruise_admission::runner::{AdmissionFlags, CrdWebhooks};
use kruise_runtime::family::{Agent, AgentContext, Family, Lent, PodStep};
use kruise_runtime::{Binary, Context};

use crate::admission::{self, KRUISE_DAEMON_GATE, LivePods, PodSource};
use crate::api::{self, CRD_NAME};
use crate::{agent, controller};

/// The family's name (`--controllers`, the crate's directory).
pub const NAME: &str = "crr";
/// The binary's name (also its Service, Secret and user agent).
pub const BINARY: &str = "kruise-crr";
/// The webhook configurations and CRDs whose caBundle this binary keeps current.
const WEBHOOKS: CrdWebhooks = CrdWebhooks {
    mutating: "kruise-crr-mutating",
    validating: "kruise-crr-validating",
    crds: &[CRD_NAME],
};

/// The ContainerRecreateRequest family: the `kruise-crr` binary, its webhook, its
/// controllers and its node agent, and container launch priority's barrier env lent to
/// kruise-webhook's pod chain.
pub fn family() -> anyhow::Result<Family> {
    Ok(Family::new(NAME, BINARY, binary()?)
        .webhooks(WEBHOOKS.names())
        .controllers([
            controller::CONTROLLER_NAME,
            controller::launch_priority::CONTROLLER_NAME,
        ])
        .lends(LENT)
        .agent(node_agent()))
}

/// What it lends kruise-webhook: container launch priority's barrier env in the pod
/// mutating chain.
pub const LENT: Lent = Lent {
    pod_steps: &[PodStep {
        name: NAME,
        build: admission::launch_priority::step,
    }],
    ..Lent::NONE
};

/// The node agent, `kruise-crr agent` (started by `main` without building the family).
pub fn node_agent() -> Agent {
    Agent::new(|ctx: AgentContext| agent::run(ctx))
}

/// `kruise-crr`, ready for [`Binary::main`] or [`Binary::run_argv`].
pub fn binary() -> anyhow::Result<Binary<AdmissionFlags>> {
    let crd = api::crd::crd().map_err(|e| anyhow::anyhow!("building the CRD: {e}"))?;
    Ok(
        Binary::<AdmissionFlags>::new(BINARY, env!("CARGO_PKG_VERSION"))
            .crds(vec![crd])
            // The webhook reads the request's pod and node (none for `manifests`).
            .crd_webhooks(WEBHOOKS, |ctx: Option<&Context<AdmissionFlags>>| {
                let pods =
                    ctx.map(|ctx| Arc::new(LivePods(ctx.client.clone())) as Arc<dyn PodSource>);
                let daemon_enabled = ctx.is_none_or(|ctx| ctx.gates.enabled(KRUISE_DAEMON_GATE));
                admission::routes(pods, daemon_enabled)
            })
            .controller(|ctx: Context<AdmissionFlags>| async move {
                let namespace = ctx.flags.namespace.clone();
                let requests = async {
                    // Without KruiseDaemon no agent acts on requests, so none is reconciled.
                    if ctx.gates.enabled(KRUISE_DAEMON_GATE) {
                        let opts = ctx.controller_options(controller::CONTROLLER_NAME);
                        controller::run(ctx.client.clone(), namespace.clone(), opts).await;
                    }
                };
                let opts = ctx.controller_options(controller::launch_priority::CONTROLLER_NAME);
                let barriers =
                    controller::launch_priority::run(ctx.client.clone(), namespace.clone(), opts);
                tokio::join!(requests, barriers);
                Ok(())
            }),
    )
}
