//! StatefulSet's own webhooks, served by `kruise-statefulset` through `kruise_admission`:
//!
//! * [`MutateStatefulSet`] at `/mutate-apps-kruise-io-statefulset` (`mstatefulset.kb.io`):
//!   OpenKruise's defaulting of either version ([`crate::api::defaults`], and Kubernetes'
//!   pod and claim template defaults unless `TemplateNoDefaults`), answered with a JSONPatch
//!   of only the defaulted fields;
//! * [`ValidateStatefulSet`] at `/validate-apps-kruise-io-statefulset`
//!   (`vstatefulset.kb.io`): [`crate::api::validation`] on CREATE and UPDATE (with
//!   `StatefulSetAutoResizePVCGate`, a resized claim template's StorageClass read through
//!   the binary's client), and OpenKruise's deletion protection
//!   (`policy.kruise.io/delete-protection`) on DELETE;
//! * [`crate::conversion::StatefulSetConverter`] at `/convert`.
//!
//! Both versions carry the same spec, so a `v1alpha1` request is decoded, defaulted and
//! validated exactly as a `v1beta1` one (OpenKruise converts it first, to the same effect).

use futures::future::BoxFuture;
use k8s_openapi::api::storage::v1::StorageClass;
use kruise_admission::crd_webhooks::{
    Defaulting, decode, deny_invalid, deny_protected_deletion, object_json, served_version,
    spec_defaults_patch, validating_webhook, with_template_defaults,
};
use kruise_admission::{AdmissionHandler, AdmissionRoutes, HandlerError, WebhookSpec};
use kruise_compat::pod_defaults::{TemplateDefaults, inject_workload_template_defaults};
use kruise_core::api::version::APPS_V1BETA1;
use kruise_core::featuregate::FeatureGates;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use serde_json::Value;

use crate::api::defaults::{DefaultingGates, default_spec};
use crate::api::validation::{
    ErrorList, resized_claim_templates, validate, validate_claim_template_expansion,
    validate_claim_template_update,
};
use crate::api::{KIND, PLURAL, v1beta1};
use crate::conversion::StatefulSetConverter;

/// Path of the defaulting webhook.
pub const MUTATE_PATH: &str = "/mutate-apps-kruise-io-statefulset";
/// Path of the validating webhook.
pub const VALIDATE_PATH: &str = "/validate-apps-kruise-io-statefulset";
/// OpenKruise's name of the defaulting webhook entry.
pub const MUTATE_WEBHOOK: &str = "mstatefulset.kb.io";
/// OpenKruise's name of the validating webhook entry.
pub const VALIDATE_WEBHOOK: &str = "vstatefulset.kb.io";
/// Seconds the API server waits for either webhook (OpenKruise's).
const TIMEOUT_SECONDS: i32 = 30;

/// The routes `kruise-statefulset` serves: defaulting (`mutate`), validation (with the same
/// gates, reading StorageClasses through `client` when given) and conversion.
pub fn routes(mutate: MutateStatefulSet, client: Option<kube::Client>) -> AdmissionRoutes {
    let gates = mutate.gates;
    AdmissionRoutes::new()
        .handler(mutate)
        .handler(ValidateStatefulSet { gates, client })
        .converter(StatefulSetConverter)
}

/// OpenKruise's `SetDefaultsStatefulSet` as a JSONPatch: the spec's defaults and, on CREATE
/// and on an UPDATE that changes `spec.template`, the pod and claim template defaults
/// ([`kruise_compat::pod_defaults`]) unless `TemplateNoDefaults`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MutateStatefulSet {
    /// The gates the spec's defaults depend on.
    pub gates: DefaultingGates,
    /// Whether and how the templates are defaulted.
    pub template_defaults: TemplateDefaults,
}

impl Default for MutateStatefulSet {
    fn default() -> Self {
        Self::from_gates(&FeatureGates::default())
    }
}

impl MutateStatefulSet {
    /// The defaulting the binary's `--feature-gates` ask for.
    pub fn from_gates(gates: &FeatureGates) -> Self {
        MutateStatefulSet {
            gates: crate::controller::defaulting_gates(gates),
            template_defaults: gates.template_defaults(),
        }
    }
}

impl Defaulting for MutateStatefulSet {
    const PATH: &'static str = MUTATE_PATH;
    const WEBHOOK: &'static str = MUTATE_WEBHOOK;
    const RESOURCE: &'static str = PLURAL;
    const TIMEOUT_SECONDS: i32 = TIMEOUT_SECONDS;

    /// The spec's defaults, and the template's unless `TemplateNoDefaults`; on UPDATE the
    /// template defaults go in only when `spec.template` changed.
    fn patch(
        &self,
        version: &str,
        object: &Value,
        old: Option<&DynamicObject>,
    ) -> Result<json_patch::Patch, HandlerError> {
        let spec_patch = spec_defaults_patch(
            version,
            object,
            KIND,
            |spec: &mut v1beta1::StatefulSetSpec, _| {
                default_spec(spec, self.gates);
            },
        )?;
        with_template_defaults(
            object,
            spec_patch,
            self.template_defaults,
            old,
            inject_workload_template_defaults,
        )
    }
}

/// OpenKruise's StatefulSet validation on CREATE/UPDATE, deletion protection on DELETE.
pub struct ValidateStatefulSet {
    /// `StatefulSetAutoResizePVCGate` adds the claim-template update rules.
    pub gates: DefaultingGates,
    /// Reads StorageClasses for a resized claim template; `None` skips that check.
    pub client: Option<kube::Client>,
}

/// `object` (of either served version) as the storage version's type.
fn as_v1beta1(object: &DynamicObject) -> Result<v1beta1::StatefulSet, HandlerError> {
    let mut json = object_json(object)?;
    if let Some(map) = json.as_object_mut() {
        map.insert("apiVersion".into(), APPS_V1BETA1.into());
    }
    decode(&json, KIND)
}

impl ValidateStatefulSet {
    /// OpenKruise's StorageClass check of the templates `new` resizes (none read when no
    /// template is resized).
    async fn check_expansion(
        &self,
        new: &v1beta1::StatefulSetSpec,
        old: &v1beta1::StatefulSetSpec,
    ) -> ErrorList {
        let Some(client) = &self.client else {
            return ErrorList::new();
        };
        let resized = resized_claim_templates(new, old);
        if resized.is_empty() {
            return ErrorList::new();
        }
        let api: kube::Api<StorageClass> = kube::Api::all(client.clone());
        match api.list(&Default::default()).await {
            Ok(list) => validate_claim_template_expansion(&resized, Ok(&list.items)),
            Err(e) => {
                let reason = e.to_string();
                tracing::warn!(error = %reason, "listing StorageClasses for a claim template resize");
                validate_claim_template_expansion(&resized, Err(reason.as_str()))
            }
        }
    }

    async fn validate(
        &self,
        req: &AdmissionRequest<DynamicObject>,
    ) -> Result<AdmissionResponse, HandlerError> {
        if let Some(denied) = deny_protected_deletion(req, "/spec/replicas") {
            return Ok(denied);
        }
        let (Operation::Create | Operation::Update) = req.operation else {
            return Ok(AdmissionResponse::from(req));
        };
        let Some(object) = &req.object else {
            return Ok(AdmissionResponse::from(req));
        };
        served_version(&req.kind.version, KIND)?;
        let new = as_v1beta1(object)?;
        let old = match (&req.operation, &req.old_object) {
            (Operation::Update, Some(old)) => Some(as_v1beta1(old)?),
            _ => None,
        };
        let mut errors = validate(&new, old.as_ref());
        if self.gates.auto_resize_pvc
            && errors.is_empty()
            && let Some(old) = &old
        {
            errors = validate_claim_template_update(&new.spec, &old.spec);
            if errors.is_empty() {
                errors = self.check_expansion(&new.spec, &old.spec).await;
            }
        }
        Ok(deny_invalid(req, &errors))
    }
}

impl AdmissionHandler for ValidateStatefulSet {
    fn path(&self) -> &str {
        VALIDATE_PATH
    }

    fn webhook(&self) -> WebhookSpec {
        WebhookSpec {
            timeout_seconds: TIMEOUT_SECONDS,
            ..validating_webhook(VALIDATE_WEBHOOK, PLURAL, &["CREATE", "UPDATE", "DELETE"])
        }
    }

    fn handle<'a>(
        &'a self,
        request: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(self.validate(request))
    }
}
