//! The imagepull family's one registration ([`family`]): the `kruise-imagepull` binary — the
//! three CRDs and their webhooks (defaulting, validation, `/convert`) on every replica, the
//! NodeImage, ImagePullJob and ImageListPullJob controllers on the leader — and its node agent. In the library so that hosts such
//! as `kruise-playground up` run it in-process.

use kruise_admission::runner::ServesCrdWebhooks as _;
use std::time::Duration;

use clap::Args;
use kruise_admission::runner::{AdmissionFlags, CrdWebhooks};
use kruise_runtime::family::{Agent, AgentContext, Family};
use kruise_runtime::{Binary, Context};

use crate::api::{IMAGELISTPULLJOB_CRD, IMAGEPULLJOB_CRD, NODEIMAGE_CRD};
use crate::controller::{
    self, IMAGELISTPULLJOB_CONTROLLER, IMAGEPULLJOB_CONTROLLER, NODEIMAGE_CONTROLLER, Settings,
};
use crate::{admission, api};

/// The family's name (`--controllers`, the crate's directory).
pub const NAME: &str = "imagepull";
/// The binary's name (also its Service, Secret and user agent).
pub const BINARY: &str = "kruise-imagepull";
/// The webhook configurations and CRDs whose caBundle this binary keeps current.
const WEBHOOKS: CrdWebhooks = CrdWebhooks {
    mutating: "kruise-imagepull-mutating",
    validating: "kruise-imagepull-validating",
    crds: &[IMAGEPULLJOB_CRD, IMAGELISTPULLJOB_CRD, NODEIMAGE_CRD],
};
/// The longest `--default-ttlseconds-for-always-nodeimage` OpenKruise accepts: 31 days.
const MAX_DEFAULT_TTL_FOR_ALWAYS: i32 = 31 * 24 * 3600;

/// kruise-imagepull: OpenKruise's ImagePullJob and NodeImage controllers and their webhooks
// (its flags: the admission server's and OpenKruise's NodeImage settings; clap shows the
// doc line above as the binary's `--help` header).
#[derive(Args, Clone, Debug)]
pub struct ImagePullFlags {
    /// The admission server's flags.
    #[command(flatten)]
    pub admission: AdmissionFlags,
    /// How long a node is Ready before it gets its NodeImage (`30s`, `1m`, …).
    #[arg(long, default_value = "30s", value_parser = parse_duration, global = true)]
    pub nodeimage_creation_delay: Duration,
    /// Seconds added to the TTL of an `Always` job's NodeImage tags.
    #[arg(long, default_value_t = crate::plan::imagepulljob::DEFAULT_TTL_FOR_ALWAYS_SECONDS,
          value_parser = clap::value_parser!(i32).range(1..=i64::from(MAX_DEFAULT_TTL_FOR_ALWAYS)), global = true)]
    pub default_ttlseconds_for_always_nodeimage: i32,
}

impl AsRef<AdmissionFlags> for ImagePullFlags {
    fn as_ref(&self) -> &AdmissionFlags {
        &self.admission
    }
}

fn parse_duration(value: &str) -> Result<Duration, String> {
    let d: jiff::SignedDuration = value
        .parse()
        .map_err(|e| format!("{value:?} is not a duration: {e}"))?;
    Duration::try_from(d).map_err(|e| format!("{value:?} is negative: {e}"))
}

/// The imagepull family: the `kruise-imagepull` binary, its webhooks and controllers.
pub fn family() -> anyhow::Result<Family> {
    Ok(Family::new(NAME, BINARY, binary()?)
        .webhooks(WEBHOOKS.names())
        .controllers([
            NODEIMAGE_CONTROLLER,
            IMAGEPULLJOB_CONTROLLER,
            IMAGELISTPULLJOB_CONTROLLER,
        ])
        .agent(node_agent()))
}

/// The node agent, `kruise-imagepull agent` (started by `main` without building the family).
pub fn node_agent() -> Agent {
    Agent::new(|ctx: AgentContext| crate::agent::run(ctx, crate::agent::AgentSettings::default()))
}

/// `kruise-imagepull`, ready for [`Binary::main`] or [`Binary::run_argv`].
pub fn binary() -> anyhow::Result<Binary<ImagePullFlags>> {
    let crds = api::crd::crds().map_err(|e| anyhow::anyhow!("building the CRDs: {e}"))?;
    let settings = |ctx: &Context<ImagePullFlags>| Settings {
        namespace: ctx.flags.namespace.clone(),
        creation_delay: ctx.args.nodeimage_creation_delay,
        default_ttl_for_always: ctx.args.default_ttlseconds_for_always_nodeimage,
        ..Settings::default()
    };
    Ok(
        Binary::<ImagePullFlags>::new(BINARY, env!("CARGO_PKG_VERSION"))
            .crds(crds)
            .crd_webhooks(WEBHOOKS, |_: Option<&Context<ImagePullFlags>>| {
                admission::routes()
            })
            .controller(move |ctx: Context<ImagePullFlags>| async move {
                let opts = ctx.controller_options(NODEIMAGE_CONTROLLER);
                controller::nodeimage::run(ctx.client.clone(), settings(&ctx), opts).await;
                Ok(())
            })
            .controller(move |ctx: Context<ImagePullFlags>| async move {
                let opts = ctx.controller_options(IMAGEPULLJOB_CONTROLLER);
                controller::imagepulljob::run(ctx.client.clone(), settings(&ctx), opts).await;
                Ok(())
            })
            .controller(move |ctx: Context<ImagePullFlags>| async move {
                let opts = ctx.controller_options(IMAGELISTPULLJOB_CONTROLLER);
                controller::imagelistpulljob::run(ctx.client.clone(), settings(&ctx), opts).await;
                Ok(())
            }),
    )
}
