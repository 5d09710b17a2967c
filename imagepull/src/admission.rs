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

use futures::future::BoxFuture;
use jiff::Timestamp;
use kruise_admission::crd_webhooks::{
    Defaulting, decode, defaults_patch, deny_invalid, object_json, validating_webhook,
};
use kruise_admission::{AdmissionHandler, AdmissionRoutes, HandlerError, WebhookSpec};
use kruise_compat::field::FieldError;
use kruise_core::api::version::{V1ALPHA1, V1BETA1};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use serde::de::DeserializeOwned;
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
        .handler(Validate::<ImagePullJob> {
            path: "/validate-apps-kruise-io-imagepulljob",
            webhook: "vimagepulljob-v1beta1.kb.io",
            resource: "imagepulljobs",
            kind: IMAGEPULLJOB_KIND,
            check: |job, old| match old {
                Some(old) => validation::validate_imagepulljob_update(job, old),
                None => validation::validate_imagepulljob(job),
            },
        })
        .handler(MutateImageListPullJob)
        .handler(Validate::<ImageListPullJob> {
            path: "/validate-apps-kruise-io-imagelistpulljob",
            webhook: "vimagelistpulljob-v1beta1.kb.io",
            resource: "imagelistpulljobs",
            kind: IMAGELISTPULLJOB_KIND,
            check: |job, _| validation::validate_imagelistpulljob(job),
        })
        .handler(MutateNodeImage)
        .handler(Validate::<NodeImage> {
            path: "/validate-apps-kruise-io-nodeimage",
            webhook: "vnodeimage.kb.io",
            resource: "nodeimages",
            kind: NODEIMAGE_KIND,
            check: |node_image, _| validation::validate_nodeimage(node_image),
        })
        .converter(IMAGEPULLJOB_CONVERTER)
        .converter(IMAGELISTPULLJOB_CONVERTER)
        .converter(NODEIMAGE_CONVERTER)
}

fn check_version(version: &str, kind: &str) -> Result<(), HandlerError> {
    if version == V1ALPHA1 || version == V1BETA1 {
        return Ok(());
    }
    Err(HandlerError::Decode {
        kind: kind.into(),
        reason: format!("unsupported version {version:?} (served: v1alpha1, v1beta1)"),
    })
}

/// OpenKruise's `SetDefaultsImagePullJob` as a JSONPatch.
pub struct MutateImagePullJob;

impl Defaulting for MutateImagePullJob {
    const PATH: &'static str = "/mutate-apps-kruise-io-imagepulljob";
    const WEBHOOK: &'static str = "mimagepulljob-v1beta1.kb.io";
    const RESOURCE: &'static str = "imagepulljobs";
    const TIMEOUT_SECONDS: i32 = TIMEOUT_SECONDS;

    fn patch(&self, version: &str, object: &Value) -> Result<json_patch::Patch, HandlerError> {
        check_version(version, IMAGEPULLJOB_KIND)?;
        defaults_patch(
            object,
            "/spec",
            IMAGEPULLJOB_KIND,
            |spec: &mut ImagePullJobSpec| {
                defaults::default_imagepulljob(spec);
                Ok(())
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

    fn patch(&self, version: &str, object: &Value) -> Result<json_patch::Patch, HandlerError> {
        check_version(version, IMAGELISTPULLJOB_KIND)?;
        defaults_patch(
            object,
            "/spec",
            IMAGELISTPULLJOB_KIND,
            |spec: &mut ImageListPullJobSpec| {
                defaults::default_imagelistpulljob(spec);
                Ok(())
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

    fn patch(&self, version: &str, object: &Value) -> Result<json_patch::Patch, HandlerError> {
        check_version(version, NODEIMAGE_KIND)?;
        let now = Timestamp::now();
        defaults_patch(
            object,
            "/spec",
            NODEIMAGE_KIND,
            |spec: &mut NodeImageSpec| {
                defaults::default_nodeimage(spec, now);
                Ok(())
            },
        )
    }
}

/// A validating webhook of one kind: CREATE and UPDATE checked on the `v1beta1` form, the
/// old object given on UPDATE.
pub struct Validate<K> {
    path: &'static str,
    webhook: &'static str,
    resource: &'static str,
    kind: &'static str,
    check: fn(&K, Option<&K>) -> Vec<FieldError>,
}

impl<K: DeserializeOwned> Validate<K> {
    fn validate(
        &self,
        request: &AdmissionRequest<DynamicObject>,
    ) -> Result<AdmissionResponse, HandlerError> {
        let allowed = AdmissionResponse::from(request);
        if !matches!(request.operation, Operation::Create | Operation::Update) {
            return Ok(allowed);
        }
        let Some(object) = &request.object else {
            return Ok(allowed);
        };
        check_version(&request.kind.version, self.kind)?;
        let typed: K = decode(&object_json(object)?, self.kind)?;
        let old: Option<K> = match (&request.operation, &request.old_object) {
            (Operation::Update, Some(old)) => Some(decode(&object_json(old)?, self.kind)?),
            _ => None,
        };
        Ok(deny_invalid(request, &(self.check)(&typed, old.as_ref())))
    }
}

impl<K: DeserializeOwned + Send + Sync + 'static> AdmissionHandler for Validate<K> {
    fn path(&self) -> &str {
        self.path
    }

    fn webhook(&self) -> WebhookSpec {
        WebhookSpec {
            timeout_seconds: TIMEOUT_SECONDS,
            ..validating_webhook(self.webhook, self.resource, &["CREATE", "UPDATE"])
        }
    }

    fn handle<'a>(
        &'a self,
        request: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(async move { self.validate(request) })
    }
}
