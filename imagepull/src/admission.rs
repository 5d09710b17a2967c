//! The ImagePullJob, ImageListPullJob and NodeImage webhooks, served by `kruise-imagepull`
//! through `kruise_admission`, with OpenKruise's paths and entry names:
//!
//! * `/mutate-apps-kruise-io-imagepulljob` (`mimagepulljob-v1beta1.kb.io`),
//!   `/mutate-apps-kruise-io-imagelistpulljob` (`mimagelistpulljob-v1beta1.kb.io`) and
//!   `/mutate-apps-kruise-io-nodeimage` (`mnodeimage.kb.io`): the defaults of
//!   [`crate::api::defaults`] as a JSONPatch of only the defaulted fields;
//! * `/validate-apps-kruise-io-imagepulljob` (`vimagepulljob-v1beta1.kb.io`),
//!   `/validate-apps-kruise-io-imagelistpulljob` (`vimagelistpulljob-v1beta1.kb.io`) and
//!   `/validate-apps-kruise-io-nodeimage` (`vnodeimage.kb.io`): the checks of
//!   [`crate::api::validation`] on CREATE and UPDATE (an ImagePullJob's `pullSecrets` are
//!   immutable), denied with HTTP 422 and the field errors (OpenKruise answers 400);
//! * `/convert` for the three kinds ([`crate::conversion`]).
//!
//! Both versions carry the same fields, so a `v1alpha1` object is read as `v1beta1`.
//! OpenKruise's v1alpha1 ImagePullJob webhook also adds the deletion-protection finalizer on
//! create; here the controller adds it, for both versions alike.

use jiff::Timestamp;
use kruise_admission::crd_webhooks::{Defaulting, ValidateKind, spec_defaults_patch};
use kruise_admission::{AdmissionRoutes, HandlerError};
use kube::core::DynamicObject;
use serde_json::Value;

use crate::api::v1beta1::{
    ImageListPullJob, ImageListPullJobSpec, ImagePullJob, ImagePullJobSpec, NodeImage,
    NodeImageSpec,
};
use crate::api::{IMAGELISTPULLJOB_KIND, IMAGEPULLJOB_KIND, NODEIMAGE_KIND, defaults, validation};
use crate::conversion::{IMAGELISTPULLJOB_CONVERTER, IMAGEPULLJOB_CONVERTER, NODEIMAGE_CONVERTER};

/// Seconds the API server waits for a webhook.
const TIMEOUT_SECONDS: i32 = 30;

/// The routes `kruise-imagepull` serves: the three kinds' defaulting, validation and conversion.
pub fn routes() -> AdmissionRoutes {
    AdmissionRoutes::new()
        .handler(MutateImagePullJob)
        .handler(ValidateKind::<ImagePullJob> {
            path: "/validate-apps-kruise-io-imagepulljob",
            webhook: "vimagepulljob-v1beta1.kb.io",
            resource: "imagepulljobs",
            kind: IMAGEPULLJOB_KIND,
            timeout_seconds: TIMEOUT_SECONDS,
            check: |job, old| match old {
                Some(old) => validation::validate_imagepulljob_update(job, old),
                None => validation::validate_imagepulljob(job),
            },
        })
        .handler(MutateImageListPullJob)
        .handler(ValidateKind::<ImageListPullJob> {
            path: "/validate-apps-kruise-io-imagelistpulljob",
            webhook: "vimagelistpulljob-v1beta1.kb.io",
            resource: "imagelistpulljobs",
            kind: IMAGELISTPULLJOB_KIND,
            timeout_seconds: TIMEOUT_SECONDS,
            check: |job, _| validation::validate_imagelistpulljob(job),
        })
        .handler(MutateNodeImage)
        .handler(ValidateKind::<NodeImage> {
            path: "/validate-apps-kruise-io-nodeimage",
            webhook: "vnodeimage.kb.io",
            resource: "nodeimages",
            kind: NODEIMAGE_KIND,
            timeout_seconds: TIMEOUT_SECONDS,
            check: |node_image, _| validation::validate_nodeimage(node_image),
        })
        .converter(IMAGEPULLJOB_CONVERTER)
        .converter(IMAGELISTPULLJOB_CONVERTER)
        .converter(NODEIMAGE_CONVERTER)
}

/// OpenKruise's `SetDefaultsImagePullJob` as a JSONPatch.
pub struct MutateImagePullJob;

impl Defaulting for MutateImagePullJob {
    const PATH: &'static str = "/mutate-apps-kruise-io-imagepulljob";
    const WEBHOOK: &'static str = "mimagepulljob-v1beta1.kb.io";
    const RESOURCE: &'static str = "imagepulljobs";
    const TIMEOUT_SECONDS: i32 = TIMEOUT_SECONDS;

    fn patch(
        &self,
        version: &str,
        object: &Value,
        _old: Option<&DynamicObject>,
    ) -> Result<json_patch::Patch, HandlerError> {
        spec_defaults_patch(
            version,
            object,
            IMAGEPULLJOB_KIND,
            |spec: &mut ImagePullJobSpec, _| {
                defaults::default_imagepulljob(spec);
            },
        )
    }
}

/// OpenKruise's `SetDefaultsImageListPullJob` as a JSONPatch.
pub struct MutateImageListPullJob;

impl Defaulting for MutateImageListPullJob {
    const PATH: &'static str = "/mutate-apps-kruise-io-imagelistpulljob";
    const WEBHOOK: &'static str = "mimagelistpulljob-v1beta1.kb.io";
    const RESOURCE: &'static str = "imagelistpulljobs";
    const TIMEOUT_SECONDS: i32 = TIMEOUT_SECONDS;

    fn patch(
        &self,
        version: &str,
        object: &Value,
        _old: Option<&DynamicObject>,
    ) -> Result<json_patch::Patch, HandlerError> {
        spec_defaults_patch(
            version,
            object,
            IMAGELISTPULLJOB_KIND,
            |spec: &mut ImageListPullJobSpec, _| {
                defaults::default_imagelistpulljob(spec);
            },
        )
    }
}

/// OpenKruise's `SetDefaultsNodeImage` as a JSONPatch: `createdAt` is the admission time.
pub struct MutateNodeImage;

impl Defaulting for MutateNodeImage {
    const PATH: &'static str = "/mutate-apps-kruise-io-nodeimage";
    const WEBHOOK: &'static str = "mnodeimage.kb.io";
    const RESOURCE: &'static str = "nodeimages";
    const TIMEOUT_SECONDS: i32 = TIMEOUT_SECONDS;

    fn patch(
        &self,
        version: &str,
        object: &Value,
        _old: Option<&DynamicObject>,
    ) -> Result<json_patch::Patch, HandlerError> {
        let now = Timestamp::now();
        spec_defaults_patch(
            version,
            object,
            NODEIMAGE_KIND,
            |spec: &mut NodeImageSpec, _| {
                defaults::default_nodeimage(spec, now);
            },
        )
    }
}
