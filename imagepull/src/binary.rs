//! The imagepull family's one registration ([`family`]): the `kruise-imagepull` binary — the
//! three CRDs and their webhooks (defaulting, validation, `/convert`) on every replica. In
//! the library so that hosts such as `kruise-playground up` run it in-process.

use kruise_common::admission::runner::{AdmissionFlags, CrdWebhooks};
use kruise_common::family::Family;
use kruise_common::runtime::{Binary, Context};

use crate::api::{IMAGELISTPULLJOB_CRD, IMAGEPULLJOB_CRD, NODEIMAGE_CRD};
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

/// The imagepull family: the `kruise-imagepull` binary and its webhooks.
pub fn family() -> anyhow::Result<Family> {
    Ok(Family::new(NAME, BINARY, binary()?).webhooks(WEBHOOKS.names()))
}

/// `kruise-imagepull`, ready for [`Binary::main`] or [`Binary::run_argv`].
pub fn binary() -> anyhow::Result<Binary<AdmissionFlags>> {
    let crds = api::crd::crds().map_err(|e| anyhow::anyhow!("building the CRDs: {e}"))?;
    Ok(
        Binary::<AdmissionFlags>::new(BINARY, env!("CARGO_PKG_VERSION"))
            .crds(crds)
            .crd_webhooks(WEBHOOKS, |_: Option<&Context<AdmissionFlags>>| {
                admission::routes()
            }),
    )
}
