//! The pieces of the webhooks a family serves for its own kinds, so every family's answer
//! has the same shape:
//!
//! * defaulting ([`Defaulting`], [`defaults_patch`]): a JSONPatch of only the fields the
//!   defaults set, computed against the object as the API server sent it, so a
//!   field the family's types do not know is never touched (never a `remove`);
//! * validation denials ([`deny_invalid`]): the field error list as kube-apiserver prints
//!   it, HTTP 422;
//! * workload deletion protection ([`deletion_protection`]): OpenKruise's
//!   `ValidateWorkloadDeletion` on the `policy.kruise.io/delete-protection` label (its
//!   webhook answer, which also writes the protection log, is
//!   `kruise_admission::crd_webhooks::deny_protected_deletion`).

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use kube_core::DynamicObject;
use kube_core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{AdmissionHandler, HandlerError, WebhookKind, WebhookSpec};
use crate::api::keys::DELETION_PROTECTION_KEY;
use crate::api::version::{APPS_GROUP, Served, V1ALPHA1, V1BETA1};
use kruise_compat::field::{FieldError, aggregate};
use kruise_compat::pod_defaults::{PodDefaultsOptions, TemplateDefaults};

/// HTTP status of a validation denial (OpenKruise answers `admission.Errored(422, …)`).
const UNPROCESSABLE: u16 = 422;
/// HTTP status of a deletion-protection denial.
const FORBIDDEN: u16 = 403;

/// Denies `request` with `message` and HTTP status `code`.
fn deny(
    request: &AdmissionRequest<DynamicObject>,
    code: u16,
    message: String,
) -> AdmissionResponse {
    let mut response = AdmissionResponse::from(request).deny(message);
    response.result.code = code;
    response
}

/// Denies `request` for `errors` (kube-apiserver's aggregate message, HTTP 422); allows it
/// when there are none.
pub fn deny_invalid(
    request: &AdmissionRequest<DynamicObject>,
    errors: &[FieldError],
) -> AdmissionResponse {
    if errors.is_empty() {
        AdmissionResponse::from(request)
    } else {
        deny(request, UNPROCESSABLE, aggregate(errors))
    }
}

/// An object of the request as JSON.
pub fn object_json(object: &DynamicObject) -> Result<Value, HandlerError> {
    serde_json::to_value(object)
        .map_err(|e| HandlerError::Internal(format!("encoding object: {e}")))
}

/// `value` decoded as the family's `kind`.
pub fn decode<T: DeserializeOwned>(value: &Value, kind: &str) -> Result<T, HandlerError> {
    T::deserialize(value).map_err(|e| HandlerError::Decode {
        kind: kind.into(),
        reason: e.to_string(),
    })
}

/// A family's defaulting webhook for one kind, served for both versions: it says where and
/// how it defaults; every `Defaulting` is an [`AdmissionHandler`] that answers CREATE and
/// UPDATE with [`Defaulting::patch`] (see [`defaults_patch`]) and lets everything else by.
pub trait Defaulting: Send + Sync + 'static {
    /// URL path, e.g. `/mutate-apps-kruise-io-cloneset`.
    const PATH: &'static str;
    /// Webhook entry name, e.g. `mcloneset.kb.io` (OpenKruise's).
    const WEBHOOK: &'static str;
    /// The kind's resource, e.g. `clonesets`.
    const RESOURCE: &'static str;
    /// The kind's group.
    const GROUP: &'static str = APPS_GROUP;
    /// Seconds the API server waits.
    const TIMEOUT_SECONDS: i32 = 10;
    /// The patch that defaults `object`, an object of the kind at `version`; on UPDATE
    /// `old` is the stored object (a workload's template defaults go in only when its
    /// template changed).
    fn patch(
        &self,
        version: &str,
        object: &Value,
        old: Option<&DynamicObject>,
    ) -> Result<json_patch::Patch, HandlerError>;
}

impl<D: Defaulting> AdmissionHandler for D {
    fn path(&self) -> &str {
        D::PATH
    }

    fn webhook(&self) -> WebhookSpec {
        WebhookSpec {
            timeout_seconds: D::TIMEOUT_SECONDS,
            ..WebhookSpec::crd(
                D::WEBHOOK,
                WebhookKind::Mutating,
                &["CREATE", "UPDATE"],
                D::GROUP,
                &[V1ALPHA1, V1BETA1],
                &[D::RESOURCE],
            )
        }
    }

    fn handle<'a>(
        &'a self,
        request: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(async move {
            defaulting_response(request, |version, object, old| {
                self.patch(version, object, old)
            })
        })
    }
}

/// The validating webhook entry of a family's kind (both versions of the apps group):
/// `operations` on `resource`, failing closed.
pub fn validating_webhook(name: &str, resource: &str, operations: &[&str]) -> WebhookSpec {
    WebhookSpec::crd(
        name,
        WebhookKind::Validating,
        operations,
        APPS_GROUP,
        &[V1ALPHA1, V1BETA1],
        &[resource],
    )
}

/// The served version a request's `kind.version` names; a decode error naming `kind` for a
/// version the family does not serve.
pub fn served_version(version: &str, kind: &str) -> Result<Served, HandlerError> {
    Served::parse(version).ok_or_else(|| HandlerError::Decode {
        kind: kind.into(),
        reason: format!("unsupported version {version:?} (served: v1alpha1, v1beta1)"),
    })
}

/// The `spec` defaults of a CREATE or UPDATE of `kind` at `version`: the version checked
/// ([`served_version`]), `default` applied to the decoded spec (it is told the version),
/// and the change as a JSONPatch under `/spec` ([`defaults_patch`]).
pub fn spec_defaults_patch<T: Serialize + DeserializeOwned>(
    version: &str,
    object: &Value,
    kind: &str,
    default: impl FnOnce(&mut T, Served),
) -> Result<json_patch::Patch, HandlerError> {
    let served = served_version(version, kind)?;
    defaults_patch(object, "/spec", kind, |spec: &mut T| {
        default(spec, served);
        Ok(())
    })
}

/// The object a CREATE or UPDATE writes, decoded as `K` (`kind` names it in decode errors),
/// and on UPDATE the old one; `None` for other operations and a request without an object
/// (what a validating webhook lets through unread).
pub fn decode_written<K: DeserializeOwned>(
    request: &AdmissionRequest<DynamicObject>,
    kind: &str,
) -> Result<Option<(K, Option<K>)>, HandlerError> {
    let (Operation::Create | Operation::Update) = request.operation else {
        return Ok(None);
    };
    let Some(object) = &request.object else {
        return Ok(None);
    };
    let new: K = decode(&object_json(object)?, kind)?;
    let old: Option<K> = match (&request.operation, &request.old_object) {
        (Operation::Update, Some(old)) => Some(decode(&object_json(old)?, kind)?),
        _ => None,
    };
    Ok(Some((new, old)))
}

/// A family's validating webhook for one kind whose check needs nothing but the object
/// (read as the storage version's type `K`; both versions carry the same fields) and, on
/// UPDATE, the old one: CREATE and UPDATE are checked, denied as [`deny_invalid`] says.
pub struct ValidateKind<K> {
    /// URL path, e.g. `/validate-apps-kruise-io-broadcastjob`.
    pub path: &'static str,
    /// Webhook entry name (OpenKruise's).
    pub webhook: &'static str,
    /// The kind's resource.
    pub resource: &'static str,
    /// The kind, for decode errors.
    pub kind: &'static str,
    /// Seconds the API server waits.
    pub timeout_seconds: i32,
    /// The field errors of an object; the old one given on UPDATE.
    pub check: fn(&K, Option<&K>) -> Vec<FieldError>,
}

impl<K: DeserializeOwned> ValidateKind<K> {
    fn validate(
        &self,
        request: &AdmissionRequest<DynamicObject>,
    ) -> Result<AdmissionResponse, HandlerError> {
        if matches!(request.operation, Operation::Create | Operation::Update)
            && request.object.is_some()
        {
            served_version(&request.kind.version, self.kind)?;
        }
        Ok(match decode_written::<K>(request, self.kind)? {
            Some((new, old)) => deny_invalid(request, &(self.check)(&new, old.as_ref())),
            None => AdmissionResponse::from(request),
        })
    }
}

impl<K: DeserializeOwned + Send + Sync + 'static> AdmissionHandler for ValidateKind<K> {
    fn path(&self) -> &str {
        self.path
    }

    fn webhook(&self) -> WebhookSpec {
        WebhookSpec {
            timeout_seconds: self.timeout_seconds,
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

/// Answers a defaulting request: CREATE and UPDATE get `patch(version, object, old)` (the
/// request's `kind.version`, its object as JSON and, on UPDATE, its old object) when it
/// changes anything; everything else is allowed unchanged.
fn defaulting_response(
    request: &AdmissionRequest<DynamicObject>,
    patch: impl FnOnce(&str, &Value, Option<&DynamicObject>) -> Result<json_patch::Patch, HandlerError>,
) -> Result<AdmissionResponse, HandlerError> {
    let allowed = AdmissionResponse::from(request);
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return Ok(allowed);
    }
    let Some(object) = &request.object else {
        return Ok(allowed);
    };
    let old = match request.operation {
        Operation::Update => request.old_object.as_ref(),
        _ => None,
    };
    let patch = patch(&request.kind.version, &object_json(object)?, old)?;
    if patch.0.is_empty() {
        return Ok(allowed);
    }
    allowed
        .with_patch(patch)
        .map_err(|e| HandlerError::Internal(format!("encoding patch: {e}")))
}

/// `spec_patch` (a kind's [`defaults_patch`]) applied to `object`, then, when the request
/// gets them ([`TemplateDefaults::for_request`]: on CREATE, and on an UPDATE (`old` given)
/// that changed `spec.template`), the pod template defaults `inject` writes: the JSONPatch
/// from `object` to the result. What every workload kind's defaulting webhook returns.
pub fn with_template_defaults(
    object: &Value,
    spec_patch: json_patch::Patch,
    defaults: TemplateDefaults,
    old: Option<&DynamicObject>,
    inject: impl FnOnce(&mut Value, PodDefaultsOptions),
) -> Result<json_patch::Patch, HandlerError> {
    let old = old.map(object_json).transpose()?;
    let Some(pod) = defaults.for_request(object, old.as_ref()) else {
        return Ok(spec_patch);
    };
    let mut defaulted = object.clone();
    json_patch::patch(&mut defaulted, &spec_patch)
        .map_err(|e| HandlerError::Internal(format!("applying the spec defaults: {e}")))?;
    inject(&mut defaulted, pod);
    Ok(json_patch::diff(object, &defaulted))
}

/// The JSONPatch that applies `default` to `object`: the part at `pointer` (`""` for the
/// whole object, `/spec` for the spec) is decoded as `T`, defaulted, and only what the
/// defaults changed between the typed value before and after is written into the object as
/// it came. Fields `T` does not know, and fields `T` merely spells differently, stay as
/// they are.
pub fn defaults_patch<T: Serialize + DeserializeOwned>(
    object: &Value,
    pointer: &str,
    kind: &str,
    default: impl FnOnce(&mut T) -> Result<(), String>,
) -> Result<json_patch::Patch, HandlerError> {
    let part = object.pointer(pointer).unwrap_or(&Value::Null);
    let mut typed: T = decode(part, kind)?;
    let encode = |t: &T| {
        serde_json::to_value(t).map_err(|e| HandlerError::Internal(format!("encoding {kind}: {e}")))
    };
    let before = encode(&typed)?;
    default(&mut typed).map_err(HandlerError::Internal)?;
    let after = encode(&typed)?;
    let mut patched = object.clone();
    match patched.pointer_mut(pointer) {
        Some(target) => overlay_changes(target, &before, &after),
        // Decoding `null` succeeded: the part is absent and `T` accepts nothing.
        None => return Ok(json_patch::Patch(Vec::new())),
    }
    Ok(json_patch::diff(object, &patched))
}

/// Writes into `target` what differs between `before` and `after`, descending into objects
/// present on both sides and into lists whose length the defaults kept (a defaulted field
/// of a list item lands on that item, next to the item's fields `T` does not know).
fn overlay_changes(target: &mut Value, before: &Value, after: &Value) {
    if before == after {
        return;
    }
    if !same_shape(target, before, after) {
        *target = after.clone();
        return;
    }
    match (target, after) {
        (Value::Object(target), Value::Object(after)) => {
            for (key, a) in after {
                let b = before.get(key).unwrap_or(&Value::Null);
                if b == a {
                    continue;
                }
                match target.get_mut(key) {
                    Some(t) => overlay_changes(t, b, a),
                    None => {
                        target.insert(key.clone(), a.clone());
                    }
                }
            }
        }
        (Value::Array(target), Value::Array(after)) => {
            let before = before.as_array().into_iter().flatten();
            for ((t, b), a) in target.iter_mut().zip(before).zip(after) {
                overlay_changes(t, b, a);
            }
        }
        (target, after) => *target = after.clone(),
    }
}

/// Whether `target` can take `after`'s changes field by field: both objects, or lists of
/// one length on all three sides.
fn same_shape(target: &Value, before: &Value, after: &Value) -> bool {
    match (target, after) {
        (Value::Object(_), Value::Object(_)) => true,
        (Value::Array(t), Value::Array(a)) => {
            t.len() == a.len() && before.as_array().is_some_and(|b| b.len() == a.len())
        }
        _ => false,
    }
}

/// Denies `request` with `message`, HTTP 403, as OpenKruise answers a protected deletion
/// (`admission.Errored(http.StatusForbidden, …)`).
pub fn deny_forbidden(
    request: &AdmissionRequest<DynamicObject>,
    message: String,
) -> AdmissionResponse {
    deny(request, FORBIDDEN, message)
}

/// The value of the protection label in `labels`, when it is one that protects.
pub fn protection_level(labels: Option<&BTreeMap<String, String>>) -> Option<ProtectionLevel> {
    match labels?.get(DELETION_PROTECTION_KEY).map(String::as_str) {
        Some(DELETION_PROTECTION_ALWAYS) => Some(ProtectionLevel::Always),
        Some(DELETION_PROTECTION_CASCADING) => Some(ProtectionLevel::Cascading),
        _ => None,
    }
}

/// `Always`: never deleted while labelled.
pub const DELETION_PROTECTION_ALWAYS: &str = "Always";
/// `Cascading`: deleted only once nothing it holds is left.
pub const DELETION_PROTECTION_CASCADING: &str = "Cascading";

/// What `policy.kruise.io/delete-protection` asks for (any other value protects nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtectionLevel {
    /// `Always`.
    Always,
    /// `Cascading`.
    Cascading,
}

impl ProtectionLevel {
    /// The label's value.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtectionLevel::Always => DELETION_PROTECTION_ALWAYS,
            ProtectionLevel::Cascading => DELETION_PROTECTION_CASCADING,
        }
    }

    /// OpenKruise's refusal, `forbidden by ResourcesProtectionDeletion for
    /// policy.kruise.io/delete-protection=<value>` followed by `detail` (e.g. ` and replicas
    /// 3>0`; empty for `Always`).
    pub fn refusal(self, detail: &str) -> String {
        format!(
            "forbidden by ResourcesProtectionDeletion for {DELETION_PROTECTION_KEY}={}{detail}",
            self.as_str()
        )
    }
}

/// Why the protection label forbids deleting a workload with `replicas` replicas (OpenKruise's
/// messages, word for word).
pub fn deletion_protection(
    labels: Option<&BTreeMap<String, String>>,
    replicas: i64,
) -> Option<String> {
    match protection_level(labels)? {
        ProtectionLevel::Always => Some(ProtectionLevel::Always.refusal("")),
        ProtectionLevel::Cascading if replicas > 0 => {
            Some(ProtectionLevel::Cascading.refusal(&format!(" and replicas {replicas}>0")))
        }
        ProtectionLevel::Cascading => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(serde::Serialize, serde::Deserialize, Default)]
    #[serde(rename_all = "camelCase")]
    struct Spec {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replicas: Option<i32>,
        #[serde(default)]
        paused: bool,
    }

    #[test]
    fn defaults_patch_touches_only_defaulted_fields() {
        let object = json!({"metadata": {"name": "w"},
            "spec": {"futureField": {"x": 1}, "paused": false}});
        let patch = defaults_patch::<Spec>(&object, "/spec", "Widget", |s| {
            s.replicas.get_or_insert(1);
            Ok(())
        })
        .unwrap();
        assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            json!([{"op": "add", "path": "/spec/replicas", "value": 1}])
        );
        // Nothing to default: no operation, not even for the field `Spec` does not know.
        let patch = defaults_patch::<Spec>(&object, "/spec", "Widget", |_| Ok(())).unwrap();
        assert!(patch.0.is_empty());
        // A part that does not decode is the kind's decode error.
        let bad = json!({"spec": {"replicas": "three"}});
        let err = defaults_patch::<Spec>(&bad, "/spec", "Widget", |_| Ok(())).unwrap_err();
        assert!(err.to_string().starts_with("cannot decode Widget"), "{err}");
    }

    #[derive(serde::Serialize, serde::Deserialize, Default)]
    struct Item {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        policy: Option<String>,
    }

    #[test]
    fn defaults_on_list_items_keep_the_items_unknown_fields() {
        let object = json!({"items": [{"name": "a", "future": 1}, {"name": "b", "policy": "X"}]});
        let patch = defaults_patch::<BTreeMap<String, Vec<Item>>>(&object, "", "List", |m| {
            for item in m.values_mut().flatten() {
                item.policy.get_or_insert_with(|| "Default".into());
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            json!([{"op": "add", "path": "/items/0/policy", "value": "Default"}])
        );
    }

    #[test]
    fn deletion_protection_rules() {
        let labels =
            |v: &str| BTreeMap::from([(DELETION_PROTECTION_KEY.to_string(), v.to_string())]);
        assert_eq!(
            deletion_protection(Some(&labels("Always")), 0).as_deref(),
            Some(
                "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Always"
            )
        );
        assert_eq!(
            deletion_protection(Some(&labels("Cascading")), 3).as_deref(),
            Some(
                "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Cascading and replicas 3>0"
            )
        );
        assert_eq!(deletion_protection(Some(&labels("Cascading")), 0), None);
        assert_eq!(deletion_protection(Some(&labels("Never")), 3), None);
        assert_eq!(deletion_protection(None, 3), None);
    }
}
