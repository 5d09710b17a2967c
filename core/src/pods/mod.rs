//! Pod facts and orderings shared by the workload families.
//!
//! * this module: readiness / availability (against an injected `now`), scheduling, activity,
//!   restarts, deletion cost, specified-delete, revision labels, owner-reference matching;
//! * [`selector`]: label-selector matching;
//! * [`order`]: scale-down (deletion) order and the update order (active-pods order, then
//!   [`priority`] and scatter);
//! * [`priority`]: `priorityStrategy` and `scatterStrategy` sorters;
//! * [`lifecycle`]: the lifecycle-hook state machine;
//! * [`placement`]: node selector, required node affinity and tolerations against a node;
//! * [`readiness`]: the multi-writer `KruisePodReady` gate (`markPodNotReady`, CRR).

pub mod cached;
pub mod lifecycle;
pub mod order;
pub mod placement;
pub mod priority;
pub mod readiness;
pub mod selector;
pub mod view;

pub use cached::CachedPod;
pub use view::{ConditionRef, ContainerRef, ContainerStatusRef, LabelsAndFinalizers, PodView};

use std::collections::BTreeSet;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::api::keys::{
    CONTROLLER_REVISION_HASH_KEY, LIFECYCLE_STATE_KEY, POD_DELETION_COST_KEY, SPECIFIED_DELETE_KEY,
};
use crate::api::lifecycle::LifecycleState;

/// The condition of type `ty` in the pod's status.
pub fn pod_condition<'a, P: PodView + ?Sized>(pod: &'a P, ty: &str) -> Option<ConditionRef<'a>> {
    pod.condition(ty)
}

/// Whether the pod's `Ready` condition is `True`.
pub fn is_pod_ready<P: PodView + ?Sized>(pod: &P) -> bool {
    pod_condition(pod, "Ready").is_some_and(|c| c.status == "True")
}

/// When the pod became ready (`Ready` condition's lastTransitionTime), if it is ready.
pub fn ready_since<P: PodView + ?Sized>(pod: &P) -> Option<Timestamp> {
    pod_condition(pod, "Ready")
        .filter(|c| c.status == "True")
        .and_then(|c| c.last_transition_time)
}

/// Kubernetes' `IsPodAvailable`: ready, and ready for strictly more than `min_ready_seconds`
/// at `now` (a ready pod without a transition time is available only when `min_ready_seconds`
/// is 0).
pub fn is_pod_available<P: PodView + ?Sized>(
    pod: &P,
    min_ready_seconds: i32,
    now: Timestamp,
) -> bool {
    if !is_pod_ready(pod) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    match ready_since(pod) {
        Some(t) => t
            .saturating_add(SignedDuration::from_secs(i64::from(min_ready_seconds)))
            .is_ok_and(|until| until < now),
        None => false,
    }
}

/// For a ready but not yet available pod: how long until it becomes available (requeue hint).
pub fn available_in<P: PodView + ?Sized>(
    pod: &P,
    min_ready_seconds: i32,
    now: Timestamp,
) -> Option<SignedDuration> {
    if min_ready_seconds <= 0 || is_pod_available(pod, min_ready_seconds, now) {
        return None;
    }
    let since = ready_since(pod)?;
    let until = since
        .saturating_add(SignedDuration::from_secs(i64::from(min_ready_seconds)))
        .ok()?;
    // Available once strictly after `until`: wait one more second.
    Some(until.duration_since(now) + SignedDuration::from_secs(1))
}

/// Go's `SetPodReadyCondition`: when `ContainersReady` is True, recompute `Ready` from the
/// readiness gates (False with reason `ReadinessGatesNotReady` if any gate is not True).
pub fn recompute_ready_condition<P: PodView + ?Sized>(
    pod: &P,
    status: &mut PodStatus,
    now: Timestamp,
) {
    let get = |ty: &str| {
        status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == ty)
            .cloned()
    };
    if get("Ready").is_none() || get("ContainersReady").is_none_or(|c| c.status != "True") {
        return;
    }
    let mut msgs = Vec::new();
    for gate in pod.readiness_gates() {
        match get(gate) {
            None => msgs.push(format!(
                "corresponding condition of pod readiness gate {gate:?} does not exist."
            )),
            Some(c) if c.status != "True" => msgs.push(format!(
                "the status of pod readiness gate {gate:?} is not \"True\", but {}",
                c.status
            )),
            _ => {}
        }
    }
    let ready = if msgs.is_empty() {
        PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            last_transition_time: Some(Time(now)),
            ..Default::default()
        }
    } else {
        PodCondition {
            type_: "Ready".into(),
            status: "False".into(),
            reason: Some("ReadinessGatesNotReady".into()),
            message: Some(msgs.join(", ")),
            ..Default::default()
        }
    };
    let conds = status.conditions.get_or_insert_with(Vec::new);
    match conds.iter_mut().find(|c| c.type_ == "Ready") {
        Some(c) => {
            if c.status != ready.status {
                *c = ready;
            }
        }
        None => conds.push(ready),
    }
}

/// Whether the pod is bound to a node.
pub fn is_scheduled<P: PodView + ?Sized>(pod: &P) -> bool {
    pod.node_name().is_some_and(|n| !n.is_empty())
}

/// Whether the pod has `PodScheduled=True` (CloneSet's PreparingNormal -> Normal gate).
pub fn has_pod_scheduled_condition<P: PodView + ?Sized>(pod: &P) -> bool {
    pod_condition(pod, "PodScheduled").is_some_and(|c| c.status == "True")
}

/// The pod's phase (`""` when unset).
pub fn pod_phase<P: PodView + ?Sized>(pod: &P) -> &str {
    pod.phase()
}

/// Kubernetes' `IsPodActive`: not Succeeded, not Failed, not being deleted.
pub fn is_pod_active<P: PodView + ?Sized>(pod: &P) -> bool {
    let phase = pod.phase();
    phase != "Succeeded" && phase != "Failed" && pod.meta().deletion_timestamp.is_none()
}

/// Whether the pod is being deleted.
pub fn is_terminating<P: PodView + ?Sized>(pod: &P) -> bool {
    pod.meta().deletion_timestamp.is_some()
}

/// Highest restart count among the pod's containers.
pub fn max_container_restarts<P: PodView + ?Sized>(pod: &P) -> i32 {
    pod.container_statuses()
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0)
}

/// `controller.kubernetes.io/pod-deletion-cost` as Kubernetes reads it: a base-10 int32 with
/// no `+` sign and no leading zeros; absent or invalid counts as 0.
pub fn deletion_cost<P: PodView + ?Sized>(pod: &P) -> i32 {
    let Some(v) = pod.annotation(POD_DELETION_COST_KEY) else {
        return 0;
    };
    let first_ok = match v.as_bytes().first() {
        Some(b'-') => true,
        Some(b'0') => v == "0",
        Some(b'1'..=b'9') => true,
        _ => false,
    };
    if !first_ok {
        return 0;
    }
    v.parse::<i32>().unwrap_or(0)
}

/// Whether deletion was requested: in `pods_to_delete` or labelled `apps.kruise.io/specified-delete`
/// (any value).
pub fn is_specified_delete<P: PodView + ?Sized>(
    pod: &P,
    pods_to_delete: &BTreeSet<String>,
) -> bool {
    pod.label(SPECIFIED_DELETE_KEY).is_some()
        || pod
            .meta()
            .name
            .as_ref()
            .is_some_and(|n| pods_to_delete.contains(n))
}

/// The pod's `controller-revision-hash` label.
pub fn pod_revision<P: PodView + ?Sized>(pod: &P) -> Option<&str> {
    pod.label(CONTROLLER_REVISION_HASH_KEY)
}

/// The pod's lifecycle state label, if present and known.
pub fn lifecycle_state<P: PodView + ?Sized>(pod: &P) -> Option<LifecycleState> {
    pod.label(LIFECYCLE_STATE_KEY)
        .and_then(LifecycleState::parse)
}

/// Kruise's `IsPodUpdate`: the pod's revision label denotes `update_revision` (full or short
/// hash); with the `PreparingUpdateAsUpdate` gate a `PreparingUpdate` pod also counts.
pub fn is_pod_updated<P: PodView + ?Sized>(
    pod: &P,
    update_revision: &str,
    preparing_update_as_update: bool,
) -> bool {
    if preparing_update_as_update && lifecycle_state(pod) == Some(LifecycleState::PreparingUpdate) {
        return true;
    }
    pod_revision(pod).is_some_and(|r| crate::revision::equal_to_revision_hash(r, update_revision))
}

/// The controller owner reference of an object, if any.
pub fn controller_ref(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))
}

/// Whether the object is controlled by the owner with `uid`.
pub fn is_controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    controller_ref(meta).is_some_and(|o| o.uid == uid)
}

/// The API group of an `apiVersion` (`""` for the core group).
pub fn api_group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// Whether an owner reference points at `kind` in `group` (any version, as OpenKruise checks).
pub fn owner_ref_matches(owner: &OwnerReference, group: &str, kind: &str) -> bool {
    owner.kind == kind && api_group(&owner.api_version) == group
}

/// What a controller does with a pod it lists by owner (CloneSet's claim step).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimDecision {
    /// Controlled by us and matching the selector: ours.
    Owned,
    /// Controlled by us but no longer matching the selector: remove our owner reference.
    Release,
    /// Not controlled by us (orphans are never adopted): leave it alone.
    Ignore,
}

/// Claim decision for an object: `selector_matches` is the result of matching its labels;
/// an owner being deleted never releases.
pub fn claim(
    meta: &ObjectMeta,
    owner_uid: &str,
    selector_matches: bool,
    owner_deleting: bool,
) -> ClaimDecision {
    if !is_controlled_by(meta, owner_uid) {
        return ClaimDecision::Ignore;
    }
    if selector_matches || owner_deleting {
        ClaimDecision::Owned
    } else {
        ClaimDecision::Release
    }
}

/// Merges `changes`' conditions into `status` by type, as the API server merges a status
/// patch of conditions.
pub fn merge_conditions(status: &mut PodStatus, changes: &PodStatus) {
    let conds = status.conditions.get_or_insert_with(Vec::new);
    for c in changes.conditions.iter().flatten() {
        match conds.iter_mut().find(|o| o.type_ == c.type_) {
            Some(o) => *o = c.clone(),
            None => conds.push(c.clone()),
        }
    }
}

/// The conditions of `new` that the pod does not have yet: new types, or a different
/// status, reason or message (a status patch of these, merged by type, makes the pod's
/// conditions equal to `new`'s in everything a reader acts on).
pub fn changed_conditions<'a, P: PodView + ?Sized>(
    pod: &'a P,
    new: &'a PodStatus,
) -> impl Iterator<Item = &'a PodCondition> {
    new.conditions.iter().flatten().filter(move |c| {
        pod.condition(&c.type_).is_none_or(|x| {
            x.status != c.status
                || x.reason != c.reason.as_deref()
                || x.message != c.message.as_deref()
        })
    })
}

/// A strategic-merge patch for the `pods/status` subresource that carries only the conditions
/// `new` changes relative to the pod's current status (conditions merge by `type`), merged
/// into `meta_patch` (a `{"metadata": ...}` patch, or `Value::Null`) so that labels,
/// annotations and conditions change in one request — the pod status strategy keeps
/// metadata other than ownerReferences and deletionTimestamp. Without a resourceVersion the
/// patch never conflicts with the kubelet's own status writes. `None` when nothing changes;
/// an error when a condition does not encode (never sent as `null`).
pub fn status_patch<P: PodView + ?Sized>(
    pod: &P,
    new: &PodStatus,
    meta_patch: &serde_json::Value,
) -> Result<Option<serde_json::Value>, serde_json::Error> {
    let changed: Vec<&PodCondition> = changed_conditions(pod, new).collect();
    let mut patch = match meta_patch {
        serde_json::Value::Object(m) => serde_json::Value::Object(m.clone()),
        _ => serde_json::json!({}),
    };
    if !changed.is_empty() {
        // A strategic merge keeps fields the patch leaves out: an unset reason or message
        // is sent as null so the old one (e.g. StartInPlaceUpdate) does not survive.
        let mut conditions = Vec::with_capacity(changed.len());
        for c in changed {
            let mut v = serde_json::to_value(c)?;
            if let Some(m) = v.as_object_mut() {
                for key in ["reason", "message"] {
                    m.entry(key).or_insert(serde_json::Value::Null);
                }
            }
            conditions.push(v);
        }
        patch["status"] = serde_json::json!({ "conditions": conditions });
    }
    Ok((patch.as_object().is_some_and(|m| !m.is_empty())).then_some(patch))
}

#[cfg(test)]
pub(crate) mod testutil;

#[cfg(test)]
mod tests;
