//! Every decision of the ResourceDistribution controller, pure: which namespaces a
//! distribution targets ([`target_namespaces`], [`targets_namespace`]), what each needs
//! ([`plan`]), what a copy holds ([`desired_copy`], [`content_matches`]), its version
//! ([`resource_hash`]) and the status ([`status`]), as OpenKruise v1.8.3 decides them.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kruise_compat::gojson::to_go_json;
use kruise_core::pods::selector::{is_empty, selector_matches};
use serde_json::{Map, Value};

use crate::api::validation::Resource;
use crate::api::{
    API_VERSION, ConditionType, HASH_ANNOTATION, KIND, ResourceDistributionCondition,
    ResourceDistributionStatus, ResourceDistributionTargets, SOURCE_ANNOTATION,
};

/// A namespace as the controller needs it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NamespaceView {
    /// Its name.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Being deleted.
    pub terminating: bool,
}

/// The object of the resource's kind and name in one namespace, when there is one.
#[derive(Clone, Debug, PartialEq)]
pub enum CopyState {
    /// Not this distribution's (no controller reference to it): never touched.
    Foreign,
    /// This distribution's copy; `current` when it holds the resource as it is now.
    Owned {
        /// Whether its content and version are the resource's.
        current: bool,
    },
    /// It could not be read (the message).
    Unreadable(String),
}

/// A write the plan asks for, by namespace.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Action {
    /// Create the copy.
    Create(String),
    /// Rewrite the copy (its content or version is not the resource's).
    Update(String),
    /// Delete the copy (the namespace is no longer a target).
    Delete(String),
}

/// Why a namespace did not get its copy, or kept one it should not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The namespace.
    pub namespace: String,
    /// The step that failed (the condition it is reported under).
    pub step: ConditionType,
    /// What went wrong.
    pub message: String,
}

/// OpenKruise's message for a target namespace that is missing or terminating.
pub const NAMESPACE_MISSING: &str = "namespace not found or is terminating";
/// OpenKruise's message for a same-named object the distribution does not own.
pub const CONFLICT: &str =
    "conflict with existing resources because of the same namespace, group, version, kind and name";
/// The reason of a condition whose step failed nowhere.
pub const SUCCEEDED: &str = "Succeeded";

/// What the controller decides from.
pub struct Input<'a> {
    /// The distribution's targets.
    pub targets: &'a ResourceDistributionTargets,
    /// Every namespace of the cluster.
    pub namespaces: &'a [NamespaceView],
    /// The object under the resource's name, by namespace (absent: none).
    pub copies: &'a BTreeMap<String, CopyState>,
}

/// What to do.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// The target namespaces, sorted (the status's `desired`).
    pub targets: Vec<String>,
    /// The writes, in namespace order: creates and updates in targets, deletes elsewhere.
    pub actions: Vec<Action>,
    /// The target namespaces that cannot get their copy now (missing, conflicting,
    /// unreadable).
    pub failures: Vec<Failure>,
}

/// Whether `namespace` is a target of `targets` (OpenKruise's `matchViaTargets`): not
/// excluded, and every namespace, listed, or matched by a non-empty selector.
pub fn targets_namespace(targets: &ResourceDistributionTargets, namespace: &NamespaceView) -> bool {
    if targets.excluded_namespaces.contains(&namespace.name) {
        return false;
    }
    targets.all_namespaces
        || targets.included_namespaces.contains(&namespace.name)
        || selects(targets, namespace)
}

/// Whether the label selector (when not empty) matches `namespace`.
fn selects(targets: &ResourceDistributionTargets, namespace: &NamespaceView) -> bool {
    let selector = &targets.namespace_label_selector;
    !is_empty(selector) && selector_matches(selector, &namespace.labels).unwrap_or(false)
}

/// The target namespaces (sorted; listed ones counted whether they exist or not) and every
/// other namespace of the cluster (sorted), as OpenKruise's `listNamespacesForDistributor`.
pub fn target_namespaces(
    targets: &ResourceDistributionTargets,
    namespaces: &[NamespaceView],
) -> (Vec<String>, Vec<String>) {
    let mut matched: BTreeSet<&str> = BTreeSet::new();
    if targets.all_namespaces {
        matched.extend(namespaces.iter().map(|n| n.name.as_str()));
    } else {
        matched.extend(
            targets
                .included_namespaces
                .list
                .iter()
                .map(|n| n.name.as_str()),
        );
        matched.extend(
            namespaces
                .iter()
                .filter(|n| selects(targets, n))
                .map(|n| n.name.as_str()),
        );
    }
    for excluded in &targets.excluded_namespaces.list {
        matched.remove(excluded.name.as_str());
    }
    let others: BTreeSet<&str> = namespaces
        .iter()
        .map(|n| n.name.as_str())
        .filter(|n| !matched.contains(n))
        .collect();
    (
        matched.into_iter().map(str::to_string).collect(),
        others.into_iter().map(str::to_string).collect(),
    )
}

/// The writes a distribution needs: a copy created in each target namespace without one,
/// rewritten where it is not current, left alone where it is; a same-named object it does
/// not own is a conflict, a missing or terminating namespace a failure; its copies in other
/// (live) namespaces deleted.
pub fn plan(input: &Input<'_>) -> Plan {
    let (targets, others) = target_namespaces(input.targets, input.namespaces);
    let by_name: BTreeMap<&str, &NamespaceView> = input
        .namespaces
        .iter()
        .map(|n| (n.name.as_str(), n))
        .collect();
    let mut plan = Plan::default();
    for namespace in &targets {
        let live = by_name
            .get(namespace.as_str())
            .is_some_and(|n| !n.terminating);
        let failure = |step, message: &str| Failure {
            namespace: namespace.clone(),
            step,
            message: message.to_string(),
        };
        if !live {
            plan.failures.push(failure(
                ConditionType::NamespaceNotExists,
                NAMESPACE_MISSING,
            ));
            continue;
        }
        match input.copies.get(namespace) {
            None => plan.actions.push(Action::Create(namespace.clone())),
            Some(CopyState::Foreign) => {
                plan.failures
                    .push(failure(ConditionType::ConflictOccurred, CONFLICT));
            }
            Some(CopyState::Unreadable(message)) => {
                plan.failures
                    .push(failure(ConditionType::GetResourceFailed, message));
            }
            Some(CopyState::Owned { current: true }) => {}
            Some(CopyState::Owned { current: false }) => {
                plan.actions.push(Action::Update(namespace.clone()));
            }
        }
    }
    for namespace in others {
        let live = by_name
            .get(namespace.as_str())
            .is_some_and(|n| !n.terminating);
        if live && matches!(input.copies.get(&namespace), Some(CopyState::Owned { .. })) {
            plan.actions.push(Action::Delete(namespace));
        }
    }
    plan.targets = targets;
    plan
}

/// The status after a reconcile: `desired` the targets, `succeeded` those without a failure
/// (a failed delete elsewhere does not count against it), and the six conditions in their
/// order, each `True` with its failed namespaces and the last failure's message, or `False`
/// with reason `Succeeded`; a condition's transition time moves only when its status does.
pub fn status(
    generation: i64,
    old: Option<&ResourceDistributionStatus>,
    targets: &[String],
    failures: &[Failure],
    now: &Time,
) -> ResourceDistributionStatus {
    let failed_targets: BTreeSet<&str> = failures
        .iter()
        .filter(|f| f.step != ConditionType::DeleteResourceFailed)
        .map(|f| f.namespace.as_str())
        .filter(|n| targets.iter().any(|t| t == n))
        .collect();
    let desired = count(targets.len());
    let succeeded = desired - count(failed_targets.len());
    let old_conditions = old.map(|s| s.conditions.as_slice()).unwrap_or_default();
    let conditions = ConditionType::ALL
        .iter()
        .enumerate()
        .map(|(i, &step)| {
            let mut failed: Vec<&Failure> = failures.iter().filter(|f| f.step == step).collect();
            failed.sort_by(|a, b| a.namespace.cmp(&b.namespace));
            let status = if failed.is_empty() { "False" } else { "True" };
            let last_transition_time = match old_conditions.get(i) {
                Some(old) if old.status == status => old.last_transition_time.clone(),
                _ => Some(now.clone()),
            };
            ResourceDistributionCondition {
                type_: step.as_str().to_string(),
                status: status.to_string(),
                last_transition_time,
                reason: failed
                    .last()
                    .map_or(SUCCEEDED.to_string(), |f| f.message.clone()),
                failed_namespaces: failed.iter().map(|f| f.namespace.clone()).collect(),
            }
        })
        .collect();
    ResourceDistributionStatus {
        desired,
        succeeded,
        failed: desired - succeeded,
        observed_generation: generation,
        conditions,
    }
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The version of a distribution's resource its copies carry in [`HASH_ANNOTATION`]: the
/// SHA-256 (hex) of `spec.resource` as the API server serves it (Go's JSON: keys sorted,
/// `<`, `>` and `&` escaped), which is what OpenKruise hashes.
pub fn resource_hash(resource: &Value) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, to_go_json(resource).as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether the reference `owner` makes an object a copy of the distribution `name`: its
/// controller reference names this kind and name (the uid is not compared, as OpenKruise
/// does not).
pub fn is_controlled_by(owners: &[OwnerReference], name: &str) -> bool {
    owners.iter().any(|o| {
        o.controller == Some(true)
            && o.api_version == API_VERSION
            && o.kind == KIND
            && o.name == name
    })
}

/// The content of an object of `resource`'s kind as the API server stores it: everything but
/// `metadata` and `status`, a Secret's `stringData` merged into `data` (base64) and its
/// `type` defaulted to `Opaque`, empty maps left out. Writing this and comparing on it keeps
/// an unchanged copy from looking changed (OpenKruise compares the raw resource, so a Secret
/// written with `stringData` or without `type` is rewritten on every pass).
pub fn stored_content(object: &Value, is_secret: bool) -> Map<String, Value> {
    let mut content = object.as_object().cloned().unwrap_or_default();
    content.remove("metadata");
    content.remove("status");
    if is_secret {
        kruise_compat::secret::merge_string_data(&mut content);
        content
            .entry("type")
            .or_insert_with(|| Value::String("Opaque".into()));
    }
    for key in ["data", "binaryData", "stringData"] {
        if content
            .get(key)
            .is_some_and(|v| v.is_null() || v.as_object().is_some_and(Map::is_empty))
        {
            content.remove(key);
        }
    }
    content
}

/// Whether the copy `copy` holds `resource`'s content.
pub fn content_matches(copy: &Value, resource: &Resource) -> bool {
    stored_content(copy, resource.is_secret())
        == stored_content(&resource.object, resource.is_secret())
}

/// The distribution a copy is made for: its name and uid.
#[derive(Clone, Copy, Debug)]
pub struct Source<'a> {
    /// The distribution's name.
    pub name: &'a str,
    /// Its uid.
    pub uid: &'a str,
}

/// The copy of `resource` for `namespace` (OpenKruise's `makeResourceObject`): the resource's
/// content and metadata, and from the copy it replaces (`old`) the labels and annotations it
/// does not set and the finalizers (so what others added stays) and its resourceVersion
/// (the write is conditioned on it); a controller reference to the distribution; the
/// [`HASH_ANNOTATION`] and [`SOURCE_ANNOTATION`].
pub fn desired_copy(
    resource: &Resource,
    source: Source<'_>,
    namespace: &str,
    hash: &str,
    old: Option<&Value>,
) -> Value {
    let mut copy = stored_content(&resource.object, resource.is_secret());
    let mut metadata = resource
        .object
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let old_metadata = old
        .and_then(|o| o.get("metadata"))
        .and_then(Value::as_object);
    if let Some(old_metadata) = old_metadata {
        for key in ["labels", "annotations"] {
            if let Some(Value::Object(kept)) = old_metadata.get(key) {
                edit_object_at(&mut metadata, key, |map| {
                    for (k, v) in kept {
                        map.entry(k.clone()).or_insert_with(|| v.clone());
                    }
                });
            }
        }
        let finalizers: BTreeSet<String> =
            [metadata.get("finalizers"), old_metadata.get("finalizers")]
                .into_iter()
                .flatten()
                .filter_map(Value::as_array)
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect();
        if !finalizers.is_empty() {
            metadata.insert("finalizers".into(), Value::from_iter(finalizers));
        }
        if let Some(version) = old_metadata.get("resourceVersion") {
            metadata.insert("resourceVersion".into(), version.clone());
        }
    }
    metadata.insert("namespace".into(), Value::String(namespace.to_string()));
    let owners = metadata
        .entry("ownerReferences")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(owners) = owners
        && !owners
            .iter()
            .any(|o| o.get("uid").and_then(Value::as_str) == Some(source.uid))
    {
        owners.push(serde_json::json!({
            "apiVersion": API_VERSION,
            "kind": KIND,
            "name": source.name,
            "uid": source.uid,
            "controller": true,
            "blockOwnerDeletion": true,
        }));
    }
    edit_object_at(&mut metadata, "annotations", |annotations| {
        annotations.insert(HASH_ANNOTATION.into(), Value::String(hash.to_string()));
        annotations.insert(
            SOURCE_ANNOTATION.into(),
            Value::String(source.name.to_string()),
        );
    });
    copy.insert("metadata".into(), Value::Object(metadata));
    Value::Object(copy)
}

/// Edits the object at `key` of `map` (an empty one when missing or not an object).
fn edit_object_at(
    map: &mut Map<String, Value>,
    key: &str,
    edit: impl FnOnce(&mut Map<String, Value>),
) {
    let mut inner = match map.remove(key) {
        Some(Value::Object(inner)) => inner,
        _ => Map::new(),
    };
    edit(&mut inner);
    map.insert(key.to_string(), Value::Object(inner));
}

#[cfg(test)]
mod tests;
