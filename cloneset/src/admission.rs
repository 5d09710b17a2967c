//! CloneSet's own webhooks, served by `kruise-cloneset` through `kruise_admission`:
//!
//! * [`MutateCloneSet`] at `/mutate-apps-kruise-io-cloneset` (`mcloneset.kb.io`): OpenKruise's
//!   defaulting of either version, the pod and claim template defaults included, answered
//!   with a JSONPatch that only touches the fields the defaults set (unknown fields of the
//!   request stay as they were);
//! * [`ValidateCloneSet`] at `/validate-apps-kruise-io-cloneset` (`vcloneset.kb.io`): the
//!   checks of [`crate::api::validation`] on CREATE and UPDATE (with the `podsToDelete` pod
//!   look-ups when it has a client), and OpenKruise's `ResourcesDeletionProtection` rule on
//!   DELETE (`kruise_admission::crd_webhooks::deny_protected_deletion`);
//! * [`crate::conversion::CloneSetConverter`] at `/convert` (see [`routes`]).

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use kruise_admission::crd_webhooks::{
    Defaulting, decode, defaults_patch, deny_invalid, deny_protected_deletion, object_json,
    served_version, validating_webhook, with_template_defaults,
};
use kruise_admission::{AdmissionHandler, AdmissionRoutes, HandlerError, WebhookSpec};
use kruise_compat::pod_defaults::{TemplateDefaults, inject_workload_template_defaults};
use kruise_core::api::version::Served;
use kruise_core::featuregate::FeatureGates;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use serde_json::Value;

use crate::api::validation::{PodLookup, validate_v1alpha1, validate_v1beta1};
use crate::api::{KIND, defaults, v1alpha1, v1beta1};
use crate::conversion::CloneSetConverter;

/// Path of the defaulting webhook.
pub const MUTATE_PATH: &str = "/mutate-apps-kruise-io-cloneset";
/// Path of the validating webhook.
pub const VALIDATE_PATH: &str = "/validate-apps-kruise-io-cloneset";
/// OpenKruise's name of the defaulting webhook entry.
pub const MUTATE_WEBHOOK: &str = "mcloneset.kb.io";
/// OpenKruise's name of the validating webhook entry.
pub const VALIDATE_WEBHOOK: &str = "vcloneset.kb.io";
/// The resource both webhooks see (at both versions).
const RESOURCE: &str = "clonesets";
/// Seconds the API server waits for either webhook (OpenKruise's).
const TIMEOUT_SECONDS: i32 = 30;

/// The routes `kruise-cloneset` serves with the default feature gates (see [`routes_for`]).
pub fn routes(client: Option<kube::Client>) -> AdmissionRoutes {
    routes_for(client, &FeatureGates::default())
}

/// The routes `kruise-cloneset` serves: defaulting (as `gates` ask), validation (with pod
/// look-ups through `client` when given) and conversion.
pub fn routes_for(client: Option<kube::Client>, gates: &FeatureGates) -> AdmissionRoutes {
    AdmissionRoutes::new()
        .handler(MutateCloneSet::from_gates(gates))
        .handler(ValidateCloneSet { client })
        .converter(CloneSetConverter)
}

/// OpenKruise's `SetDefaultsCloneSet` / `SetDefaultsCloneSetV1beta1` as a JSONPatch: the
/// spec's defaults and, on CREATE and on an UPDATE that changes `spec.template`, the pod and
/// claim template defaults ([`kruise_compat::pod_defaults`]) unless `TemplateNoDefaults`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MutateCloneSet {
    /// Whether and how the templates are defaulted.
    pub template_defaults: TemplateDefaults,
}

impl MutateCloneSet {
    /// The defaulting the binary's `--feature-gates` ask for.
    pub fn from_gates(gates: &FeatureGates) -> Self {
        MutateCloneSet {
            template_defaults: gates.template_defaults(),
        }
    }
}

impl Defaulting for MutateCloneSet {
    const PATH: &'static str = MUTATE_PATH;
    const WEBHOOK: &'static str = MUTATE_WEBHOOK;
    const RESOURCE: &'static str = RESOURCE;
    const TIMEOUT_SECONDS: i32 = TIMEOUT_SECONDS;

    /// The spec's defaults, and the template's unless `TemplateNoDefaults`; on UPDATE the
    /// template defaults go in only when `spec.template` changed.
    fn patch(
        &self,
        version: &str,
        object: &Value,
        old: Option<&DynamicObject>,
    ) -> Result<json_patch::Patch, HandlerError> {
        let spec_patch = match served_version(version, KIND)? {
            Served::V1alpha1 => defaults_patch(object, "/spec", KIND, |spec| {
                defaults::default_v1alpha1(spec);
                Ok(())
            })?,
            Served::V1beta1 => defaults_patch(object, "/spec", KIND, |spec| {
                defaults::default_v1beta1(spec);
                Ok(())
            })?,
        };
        with_template_defaults(
            object,
            spec_patch,
            self.template_defaults,
            old,
            inject_workload_template_defaults,
        )
    }
}

/// OpenKruise's CloneSet validation on CREATE/UPDATE, deletion protection on DELETE.
pub struct ValidateCloneSet {
    /// Reads pods for the `podsToDelete` check; `None` skips it.
    pub client: Option<kube::Client>,
}

/// Names added to `podsToDelete` by this request.
fn added_pods_to_delete(new: &Value, old: Option<&Value>) -> Vec<String> {
    let names = |v: Option<&Value>| -> Vec<String> {
        v.and_then(|v| v.pointer("/spec/scaleStrategy/podsToDelete"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|n| n.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let before = names(old);
    names(Some(new))
        .into_iter()
        .filter(|n| !before.contains(n))
        .collect()
}

impl ValidateCloneSet {
    /// Looks up each newly named pod (OpenKruise's `validatePodsToDelete`).
    async fn lookups(
        &self,
        namespace: &str,
        owner_uid: &str,
        names: Vec<String>,
    ) -> Option<BTreeMap<String, PodLookup>> {
        let client = self.client.as_ref()?;
        let api: kube::Api<Pod> = kube::Api::namespaced(client.clone(), namespace);
        let mut found = BTreeMap::new();
        for name in names {
            let lookup = match api.get(&name).await {
                Err(e) => PodLookup::Failed(e.to_string()),
                Ok(pod) if pod.metadata.deletion_timestamp.is_some() => PodLookup::Terminating,
                Ok(pod) if kruise_core::pods::is_controlled_by(&pod.metadata, owner_uid) => {
                    PodLookup::Owned
                }
                Ok(_) => PodLookup::NotOwned,
            };
            found.insert(name, lookup);
        }
        Some(found)
    }

    async fn validate(
        &self,
        req: &AdmissionRequest<DynamicObject>,
    ) -> Result<AdmissionResponse, HandlerError> {
        if let Some(denied) = deny_protected_deletion(req, "/spec/replicas") {
            return Ok(denied);
        }
        match req.operation {
            Operation::Create | Operation::Update => {
                let Some(obj) = &req.object else {
                    return Ok(AdmissionResponse::from(req));
                };
                let new = object_json(obj)?;
                let old = match (&req.operation, &req.old_object) {
                    (Operation::Update, Some(o)) => Some(object_json(o)?),
                    _ => None,
                };
                let owner_uid = obj.metadata.uid.clone().unwrap_or_default();
                let namespace = req.namespace.clone().unwrap_or_default();
                let added = added_pods_to_delete(&new, old.as_ref());
                let found = if added.is_empty() {
                    None
                } else {
                    self.lookups(&namespace, &owner_uid, added).await
                };
                let lookup_fn = |name: &str| {
                    found
                        .as_ref()
                        .and_then(|f| f.get(name).cloned())
                        .unwrap_or(PodLookup::Owned)
                };
                let lookup: Option<&dyn Fn(&str) -> PodLookup> = found
                    .as_ref()
                    .map(|_| &lookup_fn as &dyn Fn(&str) -> PodLookup);
                let errors = match served_version(&req.kind.version, KIND)? {
                    Served::V1alpha1 => {
                        let new: v1alpha1::CloneSet = decode(&new, KIND)?;
                        let old: Option<v1alpha1::CloneSet> =
                            old.as_ref().map(|o| decode(o, KIND)).transpose()?;
                        validate_v1alpha1(&new, old.as_ref(), lookup)
                    }
                    Served::V1beta1 => {
                        let new: v1beta1::CloneSet = decode(&new, KIND)?;
                        let old: Option<v1beta1::CloneSet> =
                            old.as_ref().map(|o| decode(o, KIND)).transpose()?;
                        validate_v1beta1(&new, old.as_ref(), lookup)
                    }
                };
                Ok(deny_invalid(req, &errors))
            }
            _ => Ok(AdmissionResponse::from(req)),
        }
    }
}

impl AdmissionHandler for ValidateCloneSet {
    fn path(&self) -> &str {
        VALIDATE_PATH
    }

    fn webhook(&self) -> WebhookSpec {
        WebhookSpec {
            timeout_seconds: TIMEOUT_SECONDS,
            ..validating_webhook(VALIDATE_WEBHOOK, RESOURCE, &["CREATE", "UPDATE", "DELETE"])
        }
    }

    fn handle<'a>(
        &'a self,
        request: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(self.validate(request))
    }
}

#[cfg(test)]
mod tests;
