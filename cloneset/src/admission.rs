//! CloneSet's own webhooks, served by `kruise-cloneset` through `common::admission`:
//!
//! * [`MutateCloneSet`] at `/mutate-apps-kruise-io-cloneset` (`mcloneset.kb.io`): OpenKruise's
//!   defaulting of either version, answered with a JSONPatch that only touches the fields the
//!   defaults set (unknown fields of the request stay as they were);
//! * [`ValidateCloneSet`] at `/validate-apps-kruise-io-cloneset` (`vcloneset.kb.io`): the
//!   checks of [`crate::api::validation`] on CREATE and UPDATE (with the `podsToDelete` pod
//!   look-ups when it has a client), and OpenKruise's `ResourcesDeletionProtection` rule on
//!   DELETE;
//! * [`crate::conversion::CloneSetConverter`] at `/convert` (see [`routes`]).

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use kruise_common::admission::{
    AdmissionHandler, AdmissionRoutes, HandlerError, WebhookKind, WebhookSpec,
};
use kruise_common::api::keys::DELETION_PROTECTION_KEY;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::validation::{
    FieldError, PodLookup, to_message, validate_v1alpha1, validate_v1beta1,
};
use crate::api::{GROUP, defaults, v1alpha1, v1beta1};
use crate::conversion::CloneSetConverter;

/// Path of the defaulting webhook.
pub const MUTATE_PATH: &str = "/mutate-apps-kruise-io-cloneset";
/// Path of the validating webhook.
pub const VALIDATE_PATH: &str = "/validate-apps-kruise-io-cloneset";
/// OpenKruise's name of the defaulting webhook entry.
pub const MUTATE_WEBHOOK: &str = "mcloneset.kb.io";
/// OpenKruise's name of the validating webhook entry.
pub const VALIDATE_WEBHOOK: &str = "vcloneset.kb.io";
/// The versions both webhooks see.
const VERSIONS: &[&str] = &["v1alpha1", "v1beta1"];
/// HTTP status of a validation denial (OpenKruise answers `admission.Errored(422, …)`).
const UNPROCESSABLE: u16 = 422;
/// HTTP status of a deletion-protection denial.
const FORBIDDEN: u16 = 403;

/// The routes `kruise-cloneset` serves: defaulting, validation (with pod look-ups through
/// `client` when given) and conversion.
pub fn routes(client: Option<kube::Client>) -> AdmissionRoutes {
    AdmissionRoutes::new()
        .handler(MutateCloneSet)
        .handler(ValidateCloneSet { client })
        .converter(CloneSetConverter)
}

/// Which served version a request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1alpha1,
    V1beta1,
}

fn version_of(req: &AdmissionRequest<DynamicObject>) -> Result<Version, HandlerError> {
    match req.kind.version.as_str() {
        "v1alpha1" => Ok(Version::V1alpha1),
        "v1beta1" => Ok(Version::V1beta1),
        other => Err(HandlerError::Decode {
            kind: "CloneSet".into(),
            reason: format!("unsupported version {other:?} (served: v1alpha1, v1beta1)"),
        }),
    }
}

fn to_json(obj: &DynamicObject) -> Result<Value, HandlerError> {
    serde_json::to_value(obj).map_err(|e| HandlerError::Internal(format!("encoding object: {e}")))
}

fn decode<T: DeserializeOwned>(value: &Value) -> Result<T, HandlerError> {
    serde_json::from_value(value.clone()).map_err(|e| HandlerError::Decode {
        kind: "CloneSet".into(),
        reason: e.to_string(),
    })
}

fn encode<T: serde::Serialize>(value: &T) -> Result<Value, HandlerError> {
    serde_json::to_value(value)
        .map_err(|e| HandlerError::Internal(format!("encoding CloneSet: {e}")))
}

/// Applies to `original` only what defaulting changed between `before` (the typed object
/// re-encoded) and `after` (the same, defaulted): fields the typed encoding merely spells
/// differently are left alone.
fn overlay_defaults(original: &mut Value, before: &Value, after: &Value) {
    let (Some(orig), Some(after)) = (original.as_object_mut(), after.as_object()) else {
        return;
    };
    let empty = serde_json::Map::new();
    let before = before.as_object().unwrap_or(&empty);
    for (key, a) in after {
        let b = before.get(key);
        if b == Some(a) {
            continue;
        }
        match orig.get_mut(key) {
            Some(o) if o.is_object() && a.is_object() => {
                overlay_defaults(o, b.unwrap_or(&Value::Null), a);
            }
            _ => {
                orig.insert(key.clone(), a.clone());
            }
        }
    }
}

/// OpenKruise's `SetDefaultsCloneSet` / `SetDefaultsCloneSetV1beta1` as a JSONPatch.
pub struct MutateCloneSet;

impl MutateCloneSet {
    fn patch(req: &AdmissionRequest<DynamicObject>) -> Result<AdmissionResponse, HandlerError> {
        let allowed = AdmissionResponse::from(req);
        if !matches!(req.operation, Operation::Create | Operation::Update) {
            return Ok(allowed);
        }
        let Some(obj) = &req.object else {
            return Ok(allowed);
        };
        let original = to_json(obj)?;
        let spec = original.get("spec").cloned().unwrap_or(Value::Null);
        let (before, after) = match version_of(req)? {
            Version::V1alpha1 => {
                let typed: v1alpha1::CloneSetSpec = decode(&spec)?;
                let mut defaulted = typed.clone();
                defaults::default_v1alpha1(&mut defaulted);
                (encode(&typed)?, encode(&defaulted)?)
            }
            Version::V1beta1 => {
                let typed: v1beta1::CloneSetSpec = decode(&spec)?;
                let mut defaulted = typed.clone();
                defaults::default_v1beta1(&mut defaulted);
                (encode(&typed)?, encode(&defaulted)?)
            }
        };
        let mut patched = original.clone();
        match patched.get_mut("spec") {
            Some(s) if s.is_object() => overlay_defaults(s, &before, &after),
            _ => {
                if let Some(o) = patched.as_object_mut() {
                    o.insert("spec".into(), after);
                }
            }
        }
        let patch = json_patch::diff(&original, &patched);
        if patch.0.is_empty() {
            return Ok(allowed);
        }
        allowed
            .with_patch(patch)
            .map_err(|e| HandlerError::Internal(format!("encoding patch: {e}")))
    }
}

impl AdmissionHandler for MutateCloneSet {
    fn path(&self) -> &str {
        MUTATE_PATH
    }

    fn webhook(&self) -> WebhookSpec {
        WebhookSpec {
            timeout_seconds: 30,
            ..WebhookSpec::crd(
                MUTATE_WEBHOOK,
                WebhookKind::Mutating,
                &["CREATE", "UPDATE"],
                GROUP,
                VERSIONS,
                &["clonesets"],
            )
        }
    }

    fn handle<'a>(
        &'a self,
        request: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(async move { Self::patch(request) })
    }
}

/// OpenKruise's CloneSet validation on CREATE/UPDATE, deletion protection on DELETE.
pub struct ValidateCloneSet {
    /// Reads pods for the `podsToDelete` check; `None` skips it.
    pub client: Option<kube::Client>,
}

/// Kubernetes' aggregate error message: one error as is, several in brackets.
fn denial_message(errors: &[FieldError]) -> String {
    match errors {
        [one] => one.to_string(),
        _ => to_message(errors),
    }
}

fn deny(req: &AdmissionRequest<DynamicObject>, code: u16, message: String) -> AdmissionResponse {
    let mut response = AdmissionResponse::from(req).deny(message);
    response.result.code = code;
    response
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
                Ok(pod) if kruise_common::pods::is_controlled_by(&pod.metadata, owner_uid) => {
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
        match req.operation {
            Operation::Delete => Ok(Self::validate_delete(req)),
            Operation::Create | Operation::Update => {
                let Some(obj) = &req.object else {
                    return Ok(AdmissionResponse::from(req));
                };
                let new = to_json(obj)?;
                let old = match (&req.operation, &req.old_object) {
                    (Operation::Update, Some(o)) => Some(to_json(o)?),
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
                let errors = match version_of(req)? {
                    Version::V1alpha1 => {
                        let new: v1alpha1::CloneSet = decode(&new)?;
                        let old: Option<v1alpha1::CloneSet> =
                            old.as_ref().map(decode).transpose()?;
                        validate_v1alpha1(&new, old.as_ref(), lookup)
                    }
                    Version::V1beta1 => {
                        let new: v1beta1::CloneSet = decode(&new)?;
                        let old: Option<v1beta1::CloneSet> =
                            old.as_ref().map(decode).transpose()?;
                        validate_v1beta1(&new, old.as_ref(), lookup)
                    }
                };
                if errors.is_empty() {
                    Ok(AdmissionResponse::from(req))
                } else {
                    Ok(deny(req, UNPROCESSABLE, denial_message(&errors)))
                }
            }
            _ => Ok(AdmissionResponse::from(req)),
        }
    }

    /// OpenKruise's `ValidateWorkloadDeletion`: `policy.kruise.io/delete-protection: Always`
    /// forbids deleting the CloneSet, `Cascading` forbids it while `spec.replicas > 0`.
    fn validate_delete(req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        let Some(old) = &req.old_object else {
            return AdmissionResponse::from(req);
        };
        let protection = old
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(DELETION_PROTECTION_KEY))
            .map(String::as_str);
        let replicas = old
            .data
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        match protection {
            Some("Always") => deny(
                req,
                FORBIDDEN,
                format!(
                    "forbidden by ResourcesDeletionProtection for {DELETION_PROTECTION_KEY}=Always"
                ),
            ),
            Some("Cascading") if replicas > 0 => deny(
                req,
                FORBIDDEN,
                format!(
                    "forbidden by ResourcesDeletionProtection for {DELETION_PROTECTION_KEY}=Cascading and active replicas {replicas}>0"
                ),
            ),
            _ => AdmissionResponse::from(req),
        }
    }
}

impl AdmissionHandler for ValidateCloneSet {
    fn path(&self) -> &str {
        VALIDATE_PATH
    }

    fn webhook(&self) -> WebhookSpec {
        WebhookSpec {
            timeout_seconds: 30,
            ..WebhookSpec::crd(
                VALIDATE_WEBHOOK,
                WebhookKind::Validating,
                &["CREATE", "UPDATE", "DELETE"],
                GROUP,
                VERSIONS,
                &["clonesets"],
            )
        }
    }

    fn handle<'a>(
        &'a self,
        request: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(self.validate(request))
    }
}
