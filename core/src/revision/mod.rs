//! Template hashing and ControllerRevision history, as pure functions.
//!
//! # Hashes
//!
//! * [`hash_revision_data`] is Kubernetes' `HashControllerRevision` as CloneSet, Advanced
//!   StatefulSet and SidecarSet use it: 32-bit **FNV-1** over the revision's `data` bytes, then
//!   the decimal collision count when one is given, the decimal `Sum32` safe-encoded
//!   ([`safe_encode`]). Given the same bytes it yields the same value as OpenKruise.
//!   [`revision_data_raw`] produces those bytes the way Go's `json.Marshal` does (sorted keys,
//!   HTML escaping, float64 numbers — see [`gojson`](kruise_compat::gojson)), and [`template_revision_data`] adds the
//!   Go struct-encoding artefacts OpenKruise's data always carries (`"creationTimestamp":null`,
//!   `"resources":{}` on containers) plus `"$patch":"replace"`. For templates whose only Go
//!   artefacts are those, revision names equal OpenKruise's; other artefacts (e.g. a zero
//!   `divisor`) make our bytes — and so our hash — differ. That is why reuse is decided by
//!   [`equal_revision_data`] (semantic equality of data), never by name or hash: a revision
//!   OpenKruise created with equal data is found and reused, so a takeover rolls no pod.
//! * [`template_hash`] is kruise-rs's own template hash for the DaemonSet scheme. OpenKruise's
//!   DaemonSet uses Go's `DeepHashObject` (FNV-1a over a `spew` dump of Go structs); that
//!   encoding depends on Go's reflection and cannot be reproduced outside Go, so our value
//!   differs from OpenKruise's for the same template (pods are compared by label value, so a
//!   takeover relabels rather than recreates). Ours is FNV-1a 32 over the canonical (sorted-key)
//!   JSON of the template, then the collision count as 8 little-endian bytes when given,
//!   safe-encoded. It is invariant under map reordering.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde_json::{Map, Value};

use crate::api::keys::{
    CONTROLLER_REVISION_HASH_KEY, CONTROLLER_REVISION_HASH_LABEL_ON_CR, POD_TEMPLATE_HASH_KEY,
};

pub use kruise_compat::gohash::{fnv1_32, fnv1a_32};
use kruise_compat::gohash::{fnv1_32_extend, fnv1a_32_extend};
use kruise_compat::gojson::{to_go_json, with_go_artefacts};

/// Kubernetes' safe alphabet (no vowels, no confusable characters).
pub const SAFE_ALPHABET: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";

/// Longest prefix kept in a ControllerRevision name (`<prefix>-<hash>`).
pub const MAX_REVISION_PREFIX_LEN: usize = 223;

/// Kubernetes' `rand.SafeEncodeString`: each character `c` becomes `SAFE_ALPHABET[c mod 27]`.
pub fn safe_encode(s: &str) -> String {
    s.chars()
        .map(|c| SAFE_ALPHABET[(c as u32 % 27) as usize] as char)
        .collect()
}

/// Kubernetes' `HashControllerRevision`: FNV-1 over `raw`, then the decimal `collision_count`
/// when given; decimal `Sum32`, safe-encoded.
pub fn hash_revision_data(raw: &[u8], collision_count: Option<i32>) -> String {
    let mut h = fnv1_32(raw);
    if let Some(c) = collision_count {
        h = fnv1_32_extend(h, c.to_string().as_bytes());
    }
    safe_encode(&h.to_string())
}

/// kruise-rs's template hash for the DaemonSet scheme (see the module docs: not Go's value).
pub fn template_hash(template: &Value, collision_count: Option<i32>) -> String {
    let mut h = fnv1a_32(to_go_json(template).as_bytes());
    if let Some(c) = collision_count {
        h = fnv1a_32_extend(h, &u64::from(c as u32).to_le_bytes());
    }
    safe_encode(&h.to_string())
}

/// `<prefix>-<hash>`, the prefix truncated to 223 bytes (`ControllerRevisionName`).
pub fn controller_revision_name(prefix: &str, hash: &str) -> String {
    let mut end = prefix.len().min(MAX_REVISION_PREFIX_LEN);
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}-{}", &prefix[..end], hash)
}

/// The part of a revision name (or label value) after the last `-`.
pub fn short_hash(revision: &str) -> &str {
    revision.rsplit('-').next().unwrap_or(revision)
}

/// Whether a pod's `controller-revision-hash` label value denotes `revision`: equal, or the
/// same short hash (CloneSet pods may carry only the hash under `CloneSetShortHash`).
pub fn equal_to_revision_hash(pod_label: &str, revision: &str) -> bool {
    pod_label == revision || short_hash(pod_label) == short_hash(revision)
}

/// Revision labels for a new pod: `controller-revision-hash` = the revision name, or just the
/// hash with `CloneSetShortHash`; `pod-template-hash` = the hash always (CloneSet).
pub fn pod_revision_labels(revision_name: &str, short_hash_gate: bool) -> BTreeMap<String, String> {
    let hash = short_hash(revision_name).to_string();
    let crh = if short_hash_gate {
        hash.clone()
    } else {
        revision_name.to_string()
    };
    BTreeMap::from([
        (CONTROLLER_REVISION_HASH_KEY.to_string(), crh),
        (POD_TEMPLATE_HASH_KEY.to_string(), hash),
    ])
}

/// Revision data for a pod-template workload (CloneSet, Advanced StatefulSet, DaemonSet):
/// `{"spec":{"template":{<template + Go artefacts>,"$patch":"replace"}}}`.
pub fn template_revision_data(template: &Value) -> Value {
    let mut t = with_go_artefacts(template);
    if let Value::Object(m) = &mut t {
        m.insert("$patch".into(), Value::String("replace".into()));
    }
    serde_json::json!({ "spec": { "template": t } })
}

/// The bytes stored in `ControllerRevision.data` (Go `json.Marshal` form).
pub fn revision_data_raw(data: &Value) -> String {
    to_go_json(data)
}

/// The pod template inside revision data (`spec.template`), if any.
pub fn template_from_revision_data(data: &Value) -> Option<&Value> {
    data.get("spec")?.get("template")
}

/// Normalize data for semantic comparison: drop `null` members, empty arrays and empty
/// objects (except `emptyDir: {}`, which is meaningful), and compare numbers as `f64`.
pub fn normalize_data(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, val) in m {
                let n = normalize_data(val);
                let drop = match &n {
                    Value::Null => true,
                    Value::Array(a) => a.is_empty(),
                    Value::Object(o) => o.is_empty() && k != "emptyDir",
                    _ => false,
                };
                if !drop {
                    out.insert(k.clone(), n);
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(normalize_data).collect()),
        Value::Number(n) => n
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .unwrap_or_else(|| v.clone()),
        other => other.clone(),
    }
}

/// Whether two revision data documents are semantically equal (Go encoding artefacts and key
/// order ignored). This — not the name or hash — decides reuse.
///
/// A pod template inside the data (`spec.template`) is compared as Go encodes it
/// ([`go_encoded_pod_template`](kruise_compat::pod_defaults::go_encoded_pod_template)):
/// quantities in canonical form, a probe's 0 numbers absent. Revisions an earlier kruise-rs
/// stored kept the user's forms (`cpu: "0.5"`, `initialDelaySeconds: 0`); they still equal
/// today's data for the same template, so an upgrade finds and keeps them and rolls no pod.
pub fn equal_revision_data(a: &Value, b: &Value) -> bool {
    a == b
        || normalize_data(&go_encoded_template_data(a))
            == normalize_data(&go_encoded_template_data(b))
}

/// `data` with its `spec.template` (if any) re-encoded as Go writes it.
fn go_encoded_template_data(data: &Value) -> Value {
    let mut encoded = data.clone();
    if let Some(template) = encoded
        .get_mut("spec")
        .and_then(|spec| spec.get_mut("template"))
    {
        *template = kruise_compat::pod_defaults::go_encoded_pod_template(template);
    }
    encoded
}

fn revision_data(r: &ControllerRevision) -> Value {
    r.data.as_ref().map(|d| d.0.clone()).unwrap_or(Value::Null)
}

/// Every revision whose data equals `data`, in the order given.
pub fn find_equal_revisions<'a>(
    revisions: &'a [ControllerRevision],
    data: &Value,
) -> Vec<&'a ControllerRevision> {
    revisions
        .iter()
        .filter(|r| equal_revision_data(&revision_data(r), data))
        .collect()
}

/// Sort by `.revision`, then creation time (older first), then name (history order).
pub fn sort_revisions(revisions: &mut [ControllerRevision]) {
    revisions.sort_by(|a, b| {
        a.revision
            .cmp(&b.revision)
            .then_with(|| {
                let ta = a.metadata.creation_timestamp.as_ref().map(|t| t.0);
                let tb = b.metadata.creation_timestamp.as_ref().map(|t| t.0);
                ta.cmp(&tb)
            })
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
}

/// Highest `.revision` + 1, or 1 for an empty history.
fn next_revision_number(revisions: &[ControllerRevision]) -> i64 {
    revisions
        .iter()
        .map(|r| r.revision)
        .max()
        .map_or(1, |m| m.saturating_add(1))
}

/// A controller owner reference (`controller: true`, `blockOwnerDeletion: true`).
pub fn controller_owner_ref(
    api_version: &str,
    kind: &str,
    name: &str,
    uid: &str,
) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Inputs of [`new_controller_revision`].
#[derive(Debug, Clone, Default)]
pub struct NewRevision {
    /// Parent workload name (name prefix).
    pub parent_name: String,
    /// Namespace of the revision.
    pub namespace: Option<String>,
    /// Controller owner reference to the parent.
    pub owner: Option<OwnerReference>,
    /// Labels copied onto the revision (template labels).
    pub labels: BTreeMap<String, String>,
    /// Annotations copied onto the revision (workload annotations).
    pub annotations: BTreeMap<String, String>,
    /// Revision data (see [`template_revision_data`]).
    pub data: Value,
    /// `.revision` number (see [`decide_update_revision`]).
    pub revision: i64,
    /// The workload's `status.collisionCount` (controllers always pass one; 0 at first).
    pub collision_count: Option<i32>,
    /// Use this hash instead of [`hash_revision_data`] (the DaemonSet scheme names revisions
    /// after its template hash, see [`template_hash`]).
    pub hash_override: Option<String>,
    /// Label key carrying the hash on the revision; `None` means `controller.kubernetes.io/hash`
    /// (the DaemonSet scheme uses `controller-revision-hash`).
    pub hash_label: Option<String>,
}

/// Build a ControllerRevision: name `<parent>-<hash>`, labels + `controller.kubernetes.io/hash`,
/// owner reference, data stored as Go-marshalled JSON (so its hash is reproducible).
pub fn new_controller_revision(input: &NewRevision) -> ControllerRevision {
    let hash = match &input.hash_override {
        Some(h) => h.clone(),
        None => hash_revision_data(
            revision_data_raw(&input.data).as_bytes(),
            input.collision_count,
        ),
    };
    let mut labels = input.labels.clone();
    let key = input
        .hash_label
        .as_deref()
        .unwrap_or(CONTROLLER_REVISION_HASH_LABEL_ON_CR);
    labels.insert(key.to_string(), hash.clone());
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(controller_revision_name(&input.parent_name, &hash)),
            namespace: input.namespace.clone(),
            labels: Some(labels),
            annotations: (!input.annotations.is_empty()).then(|| input.annotations.clone()),
            owner_references: input.owner.clone().map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        data: Some(RawExtension(input.data.clone())),
        revision: input.revision,
    }
}

/// What to do about the update revision, given the sorted history and the candidate data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpdateRevisionDecision {
    /// The newest revision already has equal data: use it unchanged.
    ReuseNewest {
        /// Its name.
        name: String,
    },
    /// An older revision has equal data: set its `.revision` to `revision` and use it.
    BumpRevision {
        /// Its name.
        name: String,
        /// The new `.revision` number.
        revision: i64,
    },
    /// No equal revision: create one (see [`new_controller_revision`]).
    Create {
        /// The `.revision` number to give it.
        revision: i64,
    },
}

/// OpenKruise's update-revision selection over a history sorted by [`sort_revisions`].
pub fn decide_update_revision(
    sorted_history: &[ControllerRevision],
    candidate_data: &Value,
) -> UpdateRevisionDecision {
    let next = next_revision_number(sorted_history);
    let equal = find_equal_revisions(sorted_history, candidate_data);
    let newest = sorted_history.last();
    match equal.last() {
        Some(eq) => {
            let name = eq.metadata.name.clone().unwrap_or_default();
            if newest.is_some_and(|n| n.metadata.name == eq.metadata.name) {
                UpdateRevisionDecision::ReuseNewest { name }
            } else {
                UpdateRevisionDecision::BumpRevision {
                    name,
                    revision: next,
                }
            }
        }
        None => UpdateRevisionDecision::Create { revision: next },
    }
}

/// Outcome of creating a revision whose name already exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CollisionDecision {
    /// The existing object has equal data: use it.
    Reuse,
    /// A true hash collision: bump `status.collisionCount` to this value and recompute the name.
    Retry {
        /// The new collision count.
        collision_count: i32,
    },
}

/// Kubernetes' `CreateControllerRevision` loop step after `AlreadyExists`.
pub fn on_name_collision(
    existing: &ControllerRevision,
    candidate_data: &Value,
    collision_count: i32,
) -> CollisionDecision {
    if equal_revision_data(&revision_data(existing), candidate_data) {
        CollisionDecision::Reuse
    } else {
        CollisionDecision::Retry {
            collision_count: collision_count.saturating_add(1),
        }
    }
}

/// Kubernetes' history listing filter: revisions controlled by the parent (`parent_uid`) or
/// orphaned (no controller reference). The caller has already filtered by namespace and
/// selector; orphans are adopted (owner reference added) before use.
pub fn owned_or_orphan<'a>(
    revisions: &'a [ControllerRevision],
    parent_uid: &str,
) -> Vec<&'a ControllerRevision> {
    revisions
        .iter()
        .filter(|r| {
            match r
                .metadata
                .owner_references
                .as_ref()
                .and_then(|o| o.iter().find(|o| o.controller == Some(true)))
            {
                Some(c) => c.uid == parent_uid,
                None => true,
            }
        })
        .collect()
}

/// Whether a revision is live: named current/update revision, or referenced by a pod label
/// (full name or short hash).
pub fn is_live_revision(
    name: &str,
    current: &str,
    update: &str,
    pod_labels: &BTreeSet<String>,
) -> bool {
    name == current
        || name == update
        || pod_labels.contains(name)
        || pod_labels.iter().any(|l| equal_to_revision_hash(l, name))
}

/// Names of the revisions to delete so at most `limit` non-live revisions remain (oldest
/// first). Never returns the current or update revision or one referenced by a pod.
/// `sorted_history` must be sorted by [`sort_revisions`]; a negative limit counts as 0.
pub fn revisions_to_truncate(
    sorted_history: &[ControllerRevision],
    limit: i32,
    current: &str,
    update: &str,
    pod_revision_labels: &BTreeSet<String>,
) -> Vec<String> {
    let non_live: Vec<&str> = sorted_history
        .iter()
        .filter_map(|r| r.metadata.name.as_deref())
        .filter(|n| !is_live_revision(n, current, update, pod_revision_labels))
        .collect();
    let limit = usize::try_from(limit.max(0)).unwrap_or(0);
    if non_live.len() <= limit {
        return Vec::new();
    }
    non_live[..non_live.len() - limit]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// What a workload's revision planning wants written before it plans pods.
#[derive(Debug, Clone, PartialEq)]
pub enum RevisionWrite {
    /// Nothing: the newest revision already matches the template.
    None,
    /// Replace this existing revision (`.revision` bumped: a rollback to it).
    Update(Box<ControllerRevision>),
    /// Create this revision (a name collision is resolved by
    /// `runtime::revisions::register_revision`).
    Create(Box<ControllerRevision>),
}

/// The revisions of one reconcile, as a family's planner chooses them.
#[derive(Debug, Clone, PartialEq)]
pub struct RevisionPlan {
    /// The update revision as it will be after [`RevisionPlan::write`].
    pub update: ControllerRevision,
    /// The current revision.
    pub current: ControllerRevision,
    /// The write to perform first.
    pub write: RevisionWrite,
}

/// A pod template's labels: what a new revision of it is labelled with.
pub fn template_labels(template: &PodTemplateSpec) -> BTreeMap<String, String> {
    template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default()
}

/// OpenKruise's revision choice for a workload with a pod template (its
/// `getActiveRevisions`): the update revision is the newest whose data is the template's
/// (`template` as the API stores it, read back as Go encodes it), reused as it is; an older
/// one with equal data, its `.revision` bumped past the newest (a rollback); or a new one
/// made from `new` (whose `data` and `revision` are chosen here). `update_annotations` go
/// on the update revision when it is bumped or created. The current revision is the one
/// named `current_name` (the status's `currentRevision`), or the update revision when that
/// is unset or gone.
pub fn plan_template_revisions(
    history: &[ControllerRevision],
    template: &Value,
    new: NewRevision,
    update_annotations: &BTreeMap<String, String>,
    current_name: &str,
) -> RevisionPlan {
    let mut sorted = history.to_vec();
    sort_revisions(&mut sorted);
    let named = |name: &str| {
        sorted
            .iter()
            .find(|r| !name.is_empty() && r.metadata.name.as_deref() == Some(name))
            .cloned()
    };
    let data = template_revision_data(&kruise_compat::pod_defaults::go_encoded_pod_template(
        template,
    ));
    let annotate = |revision: &mut ControllerRevision| {
        if !update_annotations.is_empty() {
            revision
                .metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .extend(update_annotations.clone());
        }
    };
    let (update, write) = match decide_update_revision(&sorted, &data) {
        UpdateRevisionDecision::ReuseNewest { name } => {
            (named(&name).unwrap_or_default(), RevisionWrite::None)
        }
        UpdateRevisionDecision::BumpRevision { name, revision } => {
            let mut found = named(&name).unwrap_or_default();
            found.revision = revision;
            annotate(&mut found);
            (found.clone(), RevisionWrite::Update(Box::new(found)))
        }
        UpdateRevisionDecision::Create { revision } => {
            let mut created = new_controller_revision(&NewRevision {
                data,
                revision,
                ..new
            });
            annotate(&mut created);
            (created.clone(), RevisionWrite::Create(Box::new(created)))
        }
    };
    let current = named(current_name).unwrap_or_else(|| update.clone());
    RevisionPlan {
        update,
        current,
        write,
    }
}

#[cfg(test)]
mod tests;
