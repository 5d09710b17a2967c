//! Pod facts and orderings shared by the workload families.
//!
//! * this module: readiness / availability (against an injected `now`), scheduling, activity,
//!   restarts, deletion cost, specified-delete, revision labels, owner-reference matching;
//! * [`selector`]: label-selector matching;
//! * [`order`]: scale-down (deletion) order and the update order (active-pods order, then
//!   [`priority`] and scatter);
//! * [`priority`]: `priorityStrategy` and `scatterStrategy` sorters;
//! * [`lifecycle`]: the lifecycle-hook state machine;
//! * [`readiness`]: the multi-writer `KruisePodReady` gate (`markPodNotReady`, CRR).

pub mod lifecycle;
pub mod order;
pub mod priority;
pub mod readiness;
pub mod selector;

use std::collections::BTreeSet;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::api::keys::{
    CONTROLLER_REVISION_HASH_KEY, LIFECYCLE_STATE_KEY, POD_DELETION_COST_KEY, SPECIFIED_DELETE_KEY,
};
use crate::api::lifecycle::LifecycleState;

/// Keeps only what workload planners and the in-place engine read of a pod, for a
/// controller's pod cache; everything else is dropped before the pod is stored. A pod in a
/// real cluster carries projected service-account volumes, probes, mounts, tolerations and
/// per-container status details that cost kilobytes per pod in memory and that no planner
/// reads. Kept: all metadata except managedFields (see `runtime::trim_for_cache`); per
/// container its name, image, env (launch priority, env from metadata) and resources
/// (in-place resize); `nodeName` and `readinessGates`; the status phase, conditions, reason
/// and per container name, image, imageID, containerID, ready, restartCount and resources.
///
/// Cached pods are therefore partial: they are only ever changed by patches naming the
/// fields they change, never written back whole. A planner that starts reading another pod
/// field must keep it here (the CloneSet planner's tests compare plans over trimmed and
/// untrimmed pods).
pub fn trim_for_workload_cache(pod: &mut Pod) {
    use k8s_openapi::api::core::v1::{Container, ContainerStatus, PodSpec};
    if let Some(spec) = pod.spec.take() {
        pod.spec = Some(PodSpec {
            containers: spec
                .containers
                .into_iter()
                .map(|c| Container {
                    name: c.name,
                    image: c.image,
                    env: c.env,
                    resources: c.resources,
                    ..Default::default()
                })
                .collect(),
            node_name: spec.node_name,
            readiness_gates: spec.readiness_gates,
            ..Default::default()
        });
    }
    if let Some(status) = pod.status.take() {
        pod.status = Some(PodStatus {
            phase: status.phase,
            conditions: status.conditions,
            reason: status.reason,
            container_statuses: status.container_statuses.map(|v| {
                v.into_iter()
                    .map(|c| ContainerStatus {
                        name: c.name,
                        image: c.image,
                        image_id: c.image_id,
                        container_id: c.container_id,
                        ready: c.ready,
                        restart_count: c.restart_count,
                        resources: c.resources,
                        ..Default::default()
                    })
                    .collect()
            }),
            ..Default::default()
        });
    }
}

/// The condition of type `ty` in the pod's status.
pub fn pod_condition<'a>(pod: &'a Pod, ty: &str) -> Option<&'a PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == ty)
}

/// Whether the pod's `Ready` condition is `True`.
pub fn is_pod_ready(pod: &Pod) -> bool {
    pod_condition(pod, "Ready").is_some_and(|c| c.status == "True")
}

/// When the pod became ready (`Ready` condition's lastTransitionTime), if it is ready.
pub fn ready_since(pod: &Pod) -> Option<Timestamp> {
    pod_condition(pod, "Ready")
        .filter(|c| c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)
}

/// Kubernetes' `IsPodAvailable`: ready, and ready for strictly more than `min_ready_seconds`
/// at `now` (a ready pod without a transition time is available only when `min_ready_seconds`
/// is 0).
pub fn is_pod_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
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
pub fn available_in(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> Option<SignedDuration> {
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
pub fn recompute_ready_condition(pod: &Pod, status: &mut PodStatus, now: Timestamp) {
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
    let gates = pod.spec.as_ref().and_then(|s| s.readiness_gates.as_ref());
    let mut msgs = Vec::new();
    for g in gates.into_iter().flatten() {
        match get(&g.condition_type) {
            None => msgs.push(format!(
                "corresponding condition of pod readiness gate {:?} does not exist.",
                g.condition_type
            )),
            Some(c) if c.status != "True" => msgs.push(format!(
                "the status of pod readiness gate {:?} is not \"True\", but {}",
                g.condition_type, c.status
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
pub fn is_scheduled(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

/// Whether the pod has `PodScheduled=True` (CloneSet's PreparingNormal -> Normal gate).
pub fn has_pod_scheduled_condition(pod: &Pod) -> bool {
    pod_condition(pod, "PodScheduled").is_some_and(|c| c.status == "True")
}

/// The pod's phase (`""` when unset).
pub fn pod_phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// Kubernetes' `IsPodActive`: not Succeeded, not Failed, not being deleted.
pub fn is_pod_active(pod: &Pod) -> bool {
    let phase = pod_phase(pod);
    phase != "Succeeded" && phase != "Failed" && pod.metadata.deletion_timestamp.is_none()
}

/// Whether the pod is being deleted.
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Highest restart count among the pod's containers.
pub fn max_container_restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).max().unwrap_or(0))
        .unwrap_or(0)
}

/// `controller.kubernetes.io/pod-deletion-cost` as Kubernetes reads it: a base-10 int32 with
/// no `+` sign and no leading zeros; absent or invalid counts as 0.
pub fn deletion_cost(pod: &Pod) -> i32 {
    let Some(v) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_DELETION_COST_KEY))
    else {
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
pub fn is_specified_delete(pod: &Pod, pods_to_delete: &BTreeSet<String>) -> bool {
    pod.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(SPECIFIED_DELETE_KEY))
        || pod
            .metadata
            .name
            .as_ref()
            .is_some_and(|n| pods_to_delete.contains(n))
}

/// The pod's `controller-revision-hash` label.
pub fn pod_revision(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()?
        .get(CONTROLLER_REVISION_HASH_KEY)
        .map(String::as_str)
}

/// The pod's lifecycle state label, if present and known.
pub fn lifecycle_state(pod: &Pod) -> Option<LifecycleState> {
    pod.metadata
        .labels
        .as_ref()?
        .get(LIFECYCLE_STATE_KEY)
        .and_then(|s| LifecycleState::parse(s))
}

/// Kruise's `IsPodUpdate`: the pod's revision label denotes `update_revision` (full or short
/// hash); with the `PreparingUpdateAsUpdate` gate a `PreparingUpdate` pod also counts.
pub fn is_pod_updated(pod: &Pod, update_revision: &str, preparing_update_as_update: bool) -> bool {
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
pub fn changed_conditions<'a>(
    pod: &Pod,
    new: &'a PodStatus,
) -> impl Iterator<Item = &'a PodCondition> {
    let old = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    new.conditions.iter().flatten().filter(move |c| {
        old.iter()
            .find(|x| x.type_ == c.type_)
            .is_none_or(|x| x.status != c.status || x.reason != c.reason || x.message != c.message)
    })
}

/// A strategic-merge patch for the `pods/status` subresource that carries only the conditions
/// `new` changes relative to the pod's current status (conditions merge by `type`), merged
/// into `meta_patch` (a `{"metadata": ...}` patch, or `Value::Null`) so that labels,
/// annotations and conditions change in one request — the pod status strategy keeps
/// metadata other than ownerReferences and deletionTimestamp. Without a resourceVersion the
/// patch never conflicts with the kubelet's own status writes. `None` when nothing changes.
pub fn status_patch(
    pod: &Pod,
    new: &PodStatus,
    meta_patch: &serde_json::Value,
) -> Option<serde_json::Value> {
    let changed: Vec<&PodCondition> = changed_conditions(pod, new).collect();
    let mut patch = match meta_patch {
        serde_json::Value::Object(m) => serde_json::Value::Object(m.clone()),
        _ => serde_json::json!({}),
    };
    if !changed.is_empty() {
        // A strategic merge keeps fields the patch leaves out: an unset reason or message
        // is sent as null so the old one (e.g. StartInPlaceUpdate) does not survive.
        let conditions: Vec<serde_json::Value> = changed
            .iter()
            .map(|c| {
                let mut v = serde_json::to_value(c).unwrap_or_default();
                if let Some(m) = v.as_object_mut() {
                    for key in ["reason", "message"] {
                        m.entry(key).or_insert(serde_json::Value::Null);
                    }
                }
                v
            })
            .collect();
        patch["status"] = serde_json::json!({ "conditions": conditions });
    }
    (patch.as_object().is_some_and(|m| !m.is_empty())).then_some(patch)
}

#[cfg(test)]
pub(crate) mod testutil;

#[cfg(test)]
mod tests;
