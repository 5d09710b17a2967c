//! DaemonSet's own webhooks, served by `kruise-daemonset` through `kruise_admission`:
//!
//! * [`MutateDaemonSet`] at `/mutate-apps-kruise-io-daemonset` (`mdaemonset.kb.io`):
//!   OpenKruise's defaulting of either version ([`crate::api::defaults`]), answered with a
//!   JSONPatch of only the defaulted fields;
//! * [`ValidateDaemonSet`] at `/validate-apps-kruise-io-daemonset` (`vdaemonset.kb.io`):
//!   [`crate::api::validation`] on CREATE and UPDATE (OpenKruise registers no DELETE check
//!   for DaemonSet);
//! * [`crate::conversion::DaemonSetConverter`] at `/convert`.
//!
//! A `v1alpha1` object is decoded as the `v1beta1` type (its spec fields are a subset) and
//! defaulted and validated by the `v1alpha1` rules, as OpenKruise's separate `v1alpha1`
//! functions do.

use futures::future::BoxFuture;
use kruise_admission::crd_webhooks::{
    Defaulting, decode, deny_invalid, object_json, served_version, spec_defaults_patch,
    validating_webhook,
};
use kruise_admission::{AdmissionHandler, AdmissionRoutes, HandlerError, WebhookSpec};
use kruise_core::api::version::APPS_V1BETA1;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use serde_json::Value;

use crate::api::defaults::default_spec;
use crate::api::validation::validate;
use crate::api::{KIND, PLURAL, v1beta1};
use crate::conversion::DaemonSetConverter;

/// Path of the defaulting webhook.
pub const MUTATE_PATH: &str = "/mutate-apps-kruise-io-daemonset";
/// Path of the validating webhook.
pub const VALIDATE_PATH: &str = "/validate-apps-kruise-io-daemonset";
/// OpenKruise's name of the defaulting webhook entry.
pub const MUTATE_WEBHOOK: &str = "mdaemonset.kb.io";
/// OpenKruise's name of the validating webhook entry.
pub const VALIDATE_WEBHOOK: &str = "vdaemonset.kb.io";
/// Seconds the API server waits for either webhook (OpenKruise's).
const TIMEOUT_SECONDS: i32 = 30;

/// The routes `kruise-daemonset` serves: defaulting, validation and conversion.
pub fn routes() -> AdmissionRoutes {
    AdmissionRoutes::new()
        .handler(MutateDaemonSet)
        .handler(ValidateDaemonSet)
        .converter(DaemonSetConverter)
}

/// OpenKruise's `SetDefaultsDaemonSetV1beta1` / `SetDefaultsDaemonSet` as a JSONPatch.
pub struct MutateDaemonSet;

impl Defaulting for MutateDaemonSet {
    const PATH: &'static str = MUTATE_PATH;
    const WEBHOOK: &'static str = MUTATE_WEBHOOK;
    const RESOURCE: &'static str = PLURAL;
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
            KIND,
            |spec: &mut v1beta1::DaemonSetSpec, served| {
                default_spec(spec, served);
            },
        )
    }
}

/// OpenKruise's DaemonSet validation on CREATE and UPDATE.
pub struct ValidateDaemonSet;

/// `object` (of either served version) as the storage version's type, unconverted.
fn as_v1beta1(object: &DynamicObject) -> Result<v1beta1::DaemonSet, HandlerError> {
    let mut json = object_json(object)?;
    if let Some(map) = json.as_object_mut() {
        map.insert("apiVersion".into(), APPS_V1BETA1.into());
    }
    decode(&json, KIND)
}

impl ValidateDaemonSet {
    fn validate(
        &self,
        req: &AdmissionRequest<DynamicObject>,
    ) -> Result<AdmissionResponse, HandlerError> {
        let (Operation::Create | Operation::Update) = req.operation else {
            return Ok(AdmissionResponse::from(req));
        };
        let Some(object) = &req.object else {
            return Ok(AdmissionResponse::from(req));
        };
        let served = served_version(&req.kind.version, KIND)?;
        let new = as_v1beta1(object)?;
        let old = match (&req.operation, &req.old_object) {
            (Operation::Update, Some(old)) => Some(as_v1beta1(old)?),
            _ => None,
        };
        Ok(deny_invalid(req, &validate(&new, old.as_ref(), served)))
    }
}

impl AdmissionHandler for ValidateDaemonSet {
    fn path(&self) -> &str {
        VALIDATE_PATH
    }

    fn webhook(&self) -> WebhookSpec {
        WebhookSpec {
            timeout_seconds: TIMEOUT_SECONDS,
            ..validating_webhook(VALIDATE_WEBHOOK, PLURAL, &["CREATE", "UPDATE"])
        }
    }

    fn handle<'a>(
        &'a self,
        request: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(async move { self.validate(request) })
    }
}
