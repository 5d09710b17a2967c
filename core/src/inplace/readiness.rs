//! The `InPlaceUpdateReady` readiness-gate protocol.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodReadinessGate, PodStatus};

use crate::pods::PodView;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::types::UpdateSpec;
use crate::api::keys::{INPLACE_UPDATE_READY, REASON_START_INPLACE_UPDATE};
use crate::pods::pod_condition;

/// Whether the pod declares the `InPlaceUpdateReady` readiness gate.
pub fn has_inplace_readiness_gate<P: PodView + ?Sized>(pod: &P) -> bool {
    pod.has_readiness_gate(INPLACE_UPDATE_READY)
}

/// Add the `InPlaceUpdateReady` readiness gate to a pod being created (idempotent).
pub fn inject_readiness_gate(pod: &mut Pod) {
    if has_inplace_readiness_gate(pod) {
        return;
    }
    pod.spec
        .get_or_insert_with(Default::default)
        .readiness_gates
        .get_or_insert_with(Vec::new)
        .push(PodReadinessGate {
            condition_type: INPLACE_UPDATE_READY.into(),
        });
}

/// OpenKruise's `CheckPodNeedsBeUnready`: the pod has the gate, and — for a resources-only
/// change with vertical scaling — some changed resource has resize policy `RestartContainer`.
pub fn needs_unready<P: PodView + ?Sized>(
    pod: &P,
    spec: &UpdateSpec,
    vertical_scaling: bool,
) -> bool {
    if !has_inplace_readiness_gate(pod) {
        return false;
    }
    if !vertical_scaling || !spec.vertical_update_only() {
        return true;
    }
    pod.containers().any(|c| {
        let Some(r) = spec.container_resources.get(c.name) else {
            return false;
        };
        let touches = |name: &str| {
            r.limits.as_ref().is_some_and(|m| m.contains_key(name))
                || r.requests.as_ref().is_some_and(|m| m.contains_key(name))
        };
        c.resize_policy
            .iter()
            .any(|p| p.restart_policy == "RestartContainer" && touches(&p.resource_name))
    })
}

/// Go's `SetPodCondition`: replace the condition only when its status changes; append if absent.
fn set_condition(status: &mut PodStatus, cond: PodCondition) {
    let conds = status.conditions.get_or_insert_with(Vec::new);
    match conds.iter_mut().find(|c| c.type_ == cond.type_) {
        Some(c) => {
            if c.status != cond.status {
                *c = cond;
            }
        }
        None => conds.push(cond),
    }
}

/// Step 1 of an update: the pod status with `InPlaceUpdateReady=False` (reason
/// `StartInPlaceUpdate`) and, when containers are ready, `Ready=False` — to be written with a
/// status update *before* the spec changes, so endpoints drop the pod first.
pub fn not_ready_status<P: PodView + ?Sized>(pod: &P, now: Timestamp) -> PodStatus {
    let mut status = pod.status_copy();
    set_condition(
        &mut status,
        PodCondition {
            type_: INPLACE_UPDATE_READY.into(),
            status: "False".into(),
            reason: Some(REASON_START_INPLACE_UPDATE.into()),
            last_transition_time: Some(Time(now)),
            ..Default::default()
        },
    );
    crate::pods::recompute_ready_condition(pod, &mut status, now);
    status
}

/// The last step (also for freshly created pods): the status with `InPlaceUpdateReady=True`, or
/// `None` when the pod has no gate or the condition is already True with no reason/message.
pub fn ready_status<P: PodView + ?Sized>(pod: &P, now: Timestamp) -> Option<PodStatus> {
    if !has_inplace_readiness_gate(pod) {
        return None;
    }
    let equal = pod_condition(pod, INPLACE_UPDATE_READY).is_some_and(|c| {
        c.status == "True"
            && c.reason.unwrap_or("").is_empty()
            && c.message.unwrap_or("").is_empty()
    });
    if equal {
        return None;
    }
    let mut status = pod.status_copy();
    let cond = PodCondition {
        type_: INPLACE_UPDATE_READY.into(),
        status: "True".into(),
        last_transition_time: Some(Time(now)),
        ..Default::default()
    };
    let conds = status.conditions.get_or_insert_with(Vec::new);
    match conds.iter_mut().find(|c| c.type_ == INPLACE_UPDATE_READY) {
        Some(c) => *c = cond,
        None => conds.push(cond),
    }
    Some(status)
}
