//! Server-side field validation (`?fieldValidation=Strict|Warn|Ignore`, GA in 1.27):
//! which fields of a written object the API does not declare, and what the write does
//! about them. Built-in kinds are checked against the fields the k8s-openapi types know
//! (a field the typed decode drops is unknown), custom resources against their
//! version's structural schema (what pruning would drop, honouring
//! `x-kubernetes-preserve-unknown-fields`) plus ObjectMeta's fields.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::registry::ResourceDef;

/// What a write does with fields the object's type does not declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them and return a `Warning` header per field (kube-apiserver's default when
    /// a request names none).
    Warn,
    /// Refuse the write with 400 BadRequest `strict decoding error: unknown field …`.
    Strict,
}

impl FieldValidation {
    /// Parses the query parameter; an absent or empty one is `Warn`, as on the real server.
    pub fn parse(value: Option<&str>) -> ApiResult<FieldValidation> {
        match value {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation parameter unsupported: {other:?}; valid values are \"Ignore\", \"Warn\", \"Strict\""
            ))),
        }
    }
}

/// How a refused write reports its unknown fields: a create or update body was decoded
/// (kube-apiserver prefixes the decode failure), or a patch was applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded {
    Body,
    Patch,
}

/// Drops from `obj` (as the client sent it, in `version`) the fields its type does not
/// declare and applies `opts.field_validation`: `Strict` refuses the write, `Warn`
/// records a warning per field, `Ignore` only drops them; no mode (in-process writers)
/// checks nothing. Fields `existing` (the stored object an update or patch starts from)
/// already has are not the client's doing and are not reported. Custom resources'
/// undeclared fields are reported here and pruned later with the schema's defaults.
pub fn enforce(
    def: &ResourceDef,
    version: &str,
    obj: &mut Value,
    existing: Option<&Value>,
    mode: Option<FieldValidation>,
    decoded: Decoded,
) -> ApiResult<Vec<String>> {
    let Some(mode) = mode else {
        return Ok(Vec::new());
    };
    let mut unknown = drop_unknown_fields(def, version, obj);
    if !unknown.is_empty()
        && let Some(existing) = existing
    {
        let had = unknown_fields(def, version, existing);
        unknown.retain(|f| !had.contains(f));
    }
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    let listed: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect();
    match mode {
        FieldValidation::Strict => {
            let detail = format!("strict decoding error: {}", listed.join(", "));
            let message = match decoded {
                Decoded::Body => format!(
                    "{kind} in version \"{version}\" cannot be handled as a {kind}: {detail}",
                    kind = def.kind
                ),
                Decoded::Patch => detail,
            };
            Err(ApiError::bad_request(message))
        }
        FieldValidation::Warn => Ok(listed),
        FieldValidation::Ignore => Ok(Vec::new()),
    }
}

/// The fields of `obj` its type does not declare, as dotted paths (`spec.foo`,
/// `spec.containers[0].bar`), sorted.
pub fn unknown_fields(def: &ResourceDef, version: &str, obj: &Value) -> Vec<String> {
    drop_unknown_fields(def, version, &mut obj.clone())
}

/// Removes what decoding into the typed object would drop (built-in kinds; a custom
/// resource's metadata) and returns every undeclared field's path, sorted (so messages
/// do not depend on the JSON map's key order). A custom resource's undeclared fields
/// outside metadata are left for schema pruning.
fn drop_unknown_fields(def: &ResourceDef, version: &str, obj: &mut Value) -> Vec<String> {
    let mut unknown = Vec::new();
    if def.builtin {
        if let Some(typed) = typed_round_trip(&def.group, &def.kind, obj) {
            let newer: Vec<&str> = NEWER_FIELDS
                .iter()
                .filter(|(group, kind, _)| *group == def.group && *kind == def.kind)
                .map(|(_, _, path)| *path)
                .collect();
            let mut path = String::new();
            remove_dropped(obj, &typed, &newer, &mut path, &mut unknown);
        }
        unknown.sort();
        return unknown;
    }
    if let Some(meta) = obj.get_mut("metadata")
        && let Some(typed) =
            round_trip::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>(meta)
    {
        let mut path = String::from("metadata");
        remove_dropped(meta, &typed, &[], &mut path, &mut unknown);
    }
    if let Some(schema) = def
        .versions
        .iter()
        .find(|v| v.name == version)
        .and_then(|v| v.schema.as_ref())
    {
        unknown.extend(crate::structural::unknown_fields(obj, schema));
    }
    unknown.sort();
    unknown
}

fn round_trip<'a, T: Deserialize<'a> + Serialize>(obj: &'a Value) -> Option<Value> {
    let typed = T::deserialize(obj).ok()?;
    serde_json::to_value(typed).ok()
}

/// `obj` decoded into its k8s-openapi type and encoded again: what the type keeps.
/// None for kinds without a type here, or when the object does not decode (its
/// type errors are reported elsewhere).
fn typed_round_trip(group: &str, kind: &str, obj: &Value) -> Option<Value> {
    use k8s_openapi::api::admissionregistration::v1 as admission_v1;
    use k8s_openapi::api::apps::v1 as apps_v1;
    use k8s_openapi::api::batch::v1 as batch_v1;
    use k8s_openapi::api::coordination::v1 as coordination_v1;
    use k8s_openapi::api::core::v1 as core_v1;
    use k8s_openapi::api::events::v1 as events_v1;
    use k8s_openapi::api::networking::v1 as networking_v1;
    use k8s_openapi::api::policy::v1 as policy_v1;
    use k8s_openapi::api::rbac::v1 as rbac_v1;
    use k8s_openapi::api::scheduling::v1 as scheduling_v1;
    use k8s_openapi::api::storage::v1 as storage_v1;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions_v1;
    match (group, kind) {
        ("", "Namespace") => round_trip::<core_v1::Namespace>(obj),
        ("", "Node") => round_trip::<core_v1::Node>(obj),
        ("", "Pod") => round_trip::<core_v1::Pod>(obj),
        ("", "ConfigMap") => round_trip::<core_v1::ConfigMap>(obj),
        ("", "Secret") => round_trip::<core_v1::Secret>(obj),
        ("", "Event") => round_trip::<core_v1::Event>(obj),
        ("", "Service") => round_trip::<core_v1::Service>(obj),
        ("", "Endpoints") => round_trip::<core_v1::Endpoints>(obj),
        ("", "ServiceAccount") => round_trip::<core_v1::ServiceAccount>(obj),
        ("", "PersistentVolumeClaim") => round_trip::<core_v1::PersistentVolumeClaim>(obj),
        ("", "PersistentVolume") => round_trip::<core_v1::PersistentVolume>(obj),
        ("apps", "ControllerRevision") => round_trip::<apps_v1::ControllerRevision>(obj),
        ("apps", "Deployment") => round_trip::<apps_v1::Deployment>(obj),
        ("apps", "ReplicaSet") => round_trip::<apps_v1::ReplicaSet>(obj),
        ("apps", "StatefulSet") => round_trip::<apps_v1::StatefulSet>(obj),
        ("apps", "DaemonSet") => round_trip::<apps_v1::DaemonSet>(obj),
        ("batch", "Job") => round_trip::<batch_v1::Job>(obj),
        ("batch", "CronJob") => round_trip::<batch_v1::CronJob>(obj),
        ("coordination.k8s.io", "Lease") => round_trip::<coordination_v1::Lease>(obj),
        ("events.k8s.io", "Event") => round_trip::<events_v1::Event>(obj),
        ("policy", "PodDisruptionBudget") => round_trip::<policy_v1::PodDisruptionBudget>(obj),
        ("rbac.authorization.k8s.io", "Role") => round_trip::<rbac_v1::Role>(obj),
        ("rbac.authorization.k8s.io", "RoleBinding") => round_trip::<rbac_v1::RoleBinding>(obj),
        ("rbac.authorization.k8s.io", "ClusterRole") => round_trip::<rbac_v1::ClusterRole>(obj),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            round_trip::<rbac_v1::ClusterRoleBinding>(obj)
        }
        ("scheduling.k8s.io", "PriorityClass") => round_trip::<scheduling_v1::PriorityClass>(obj),
        ("storage.k8s.io", "StorageClass") => round_trip::<storage_v1::StorageClass>(obj),
        ("networking.k8s.io", "Ingress") => round_trip::<networking_v1::Ingress>(obj),
        ("networking.k8s.io", "IngressClass") => round_trip::<networking_v1::IngressClass>(obj),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            round_trip::<apiextensions_v1::CustomResourceDefinition>(obj)
        }
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => {
            round_trip::<admission_v1::MutatingWebhookConfiguration>(obj)
        }
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => {
            round_trip::<admission_v1::ValidatingWebhookConfiguration>(obj)
        }
        _ => None,
    }
}

/// Fields of built-in kinds newer than the k8s-openapi types the simulator is built with
/// that it declares nonetheless, as a newer API server would, so tests can show that a
/// client compiled against older types keeps them: (group, kind, path with `[*]` for
/// any list index).
const NEWER_FIELDS: &[(&str, &str, &str)] = &[
    // Kubernetes 1.34 (container restart rules).
    ("", "Pod", "spec.containers[*].restartPolicyRules"),
    ("", "Pod", "spec.initContainers[*].restartPolicyRules"),
];

/// `path` with every list index replaced by `*`.
fn any_index(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => {
                in_index = true;
                out.push_str("[*");
            }
            ']' => {
                in_index = false;
                out.push(']');
            }
            _ if in_index => {}
            _ => out.push(c),
        }
    }
    out
}

/// Removes from `sent` the non-null fields `kept` lacks (unless `newer` declares them),
/// appending their paths to `out`.
fn remove_dropped(
    sent: &mut Value,
    kept: &Value,
    newer: &[&str],
    path: &mut String,
    out: &mut Vec<String>,
) {
    match (sent, kept) {
        (Value::Object(sent), Value::Object(kept)) => {
            let mut gone = Vec::new();
            for (key, value) in sent.iter_mut() {
                if value.is_null() {
                    continue;
                }
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                match kept.get(key) {
                    None if newer.contains(&any_index(path).as_str()) => {}
                    None => {
                        out.push(path.clone());
                        gone.push(key.clone());
                    }
                    Some(kept_value) => remove_dropped(value, kept_value, newer, path, out),
                }
                path.truncate(len);
            }
            for key in gone {
                sent.remove(&key);
            }
        }
        (Value::Array(sent), Value::Array(kept)) => {
            for (i, (s, k)) in sent.iter_mut().zip(kept).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                remove_dropped(s, k, newer, path, out);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod_def() -> ResourceDef {
        crate::registry::builtin_defs()
            .into_iter()
            .find(|d| d.group.is_empty() && d.plural == "pods")
            .unwrap()
    }

    #[test]
    fn unknown_pod_fields_are_found_with_their_paths() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labelz": {"a": "b"}, "creationTimestamp": null},
            "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolicyy": "Always",
                "resources": {"limits": {"cpu": "1"}}}], "foo": 1},
            "status": {}});
        assert_eq!(
            unknown_fields(&pod_def(), "v1", &pod),
            [
                "metadata.labelz",
                "spec.containers[0].imagePullPolicyy",
                "spec.foo"
            ]
        );
    }

    #[test]
    fn fields_of_a_newer_api_the_simulator_declares_are_kept() {
        let rules = json!([{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]);
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a", "image": "i"}, {"name": "b", "image": "i", "restartPolicyRules": rules}]}});
        assert!(unknown_fields(&pod_def(), "v1", &pod).is_empty());
        assert_eq!(
            any_index("spec.containers[12].x[3]"),
            "spec.containers[*].x[*]"
        );
    }

    #[test]
    fn a_valid_pod_has_no_unknown_fields() {
        let pod = json!({"metadata": {"name": "p", "labels": {"a": "b"}, "annotations": {}},
            "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}],
                "env": [{"name": "A", "value": ""}], "securityContext": {}}],
                "volumes": [{"name": "v", "emptyDir": {}}], "nodeSelector": {}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert!(unknown_fields(&pod_def(), "v1", &pod).is_empty());
    }

    #[test]
    fn strict_refuses_warn_records_ignore_accepts() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [], "foo": 1}});
        let strict = Some(FieldValidation::Strict);
        let err = enforce(
            &pod_def(),
            "v1",
            &mut pod.clone(),
            None,
            strict,
            Decoded::Body,
        )
        .unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: unknown field \"spec.foo\""
        );
        let err = enforce(
            &pod_def(),
            "v1",
            &mut pod.clone(),
            None,
            strict,
            Decoded::Patch,
        )
        .unwrap_err();
        assert_eq!(
            err.message,
            "strict decoding error: unknown field \"spec.foo\""
        );
        // A field the stored object already has is not the writer's doing.
        enforce(
            &pod_def(),
            "v1",
            &mut pod.clone(),
            Some(&pod),
            strict,
            Decoded::Patch,
        )
        .unwrap();
        // Warn and Ignore drop the field; only Warn says so.
        let dropped = json!({"metadata": {"name": "p"}, "spec": {"containers": []}});
        let warn = Some(FieldValidation::Warn);
        let mut warned = pod.clone();
        let warnings = enforce(&pod_def(), "v1", &mut warned, None, warn, Decoded::Body).unwrap();
        assert_eq!(warned, dropped);
        assert_eq!(warnings, ["unknown field \"spec.foo\""]);
        let ignore = Some(FieldValidation::Ignore);
        let mut ignored = pod.clone();
        let warnings =
            enforce(&pod_def(), "v1", &mut ignored, None, ignore, Decoded::Body).unwrap();
        assert_eq!(ignored, dropped);
        assert!(warnings.is_empty());
        // In-process writers are not checked.
        let mut trusted = pod.clone();
        enforce(&pod_def(), "v1", &mut trusted, None, None, Decoded::Body).unwrap();
        assert_eq!(trusted, pod);
    }
}
