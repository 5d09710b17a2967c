//! The cluster-side controller's decisions for one request, as OpenKruise's manager makes
//! them (`pkg/controller/containerrecreaterequest`): finished requests release the pod,
//! lose their `active` label and are deleted after `ttlSecondsAfterFinished`; unfinished ones
//! complete when their pod is gone or replaced, when no agent answered within a minute, or
//! past `activeDeadlineSeconds`; while `Recreating`, the pod's container statuses are synced
//! into the request and `unreadyGracePeriodSeconds` makes the pod not-ready first.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use kruise_core::api::keys::KRUISE_POD_READY;
use kruise_core::pods::PodView as _;
use kruise_core::pods::readiness::NotReadyMessage;

use crate::api::v1beta1::ContainerRecreateRequest;
use crate::api::{ACTIVE_KEY, POD_UID_KEY, SyncContainerStatus, UNREADY_ACQUIRED_KEY};

/// How long a request may go without an agent answering (OpenKruise's `responseTimeout`).
pub const RESPONSE_TIMEOUT: SignedDuration = SignedDuration::from_secs(60);
/// How often a `Recreating` request is looked at (the pod's status is read each time).
pub const RECREATING_POLL: Duration = Duration::from_secs(1);
/// Completion message: the pod was deleted or replaced.
pub const POD_GONE: &str = "pod has gone";
/// Completion message: no agent took the request.
pub const NO_RESPONSE: &str = "daemon has not responded for a long time";
/// Completion message: `activeDeadlineSeconds` passed.
pub const DEADLINE_EXCEEDED: &str = "recreating has exceeded the activeDeadlineSeconds";
/// The `KruisePodReady` user agent of the not-ready message.
pub const READINESS_USER_AGENT: &str = "ContainerRecreateRequest";

/// What the controller does, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Remove the request's not-ready message from the pod's `KruisePodReady` condition.
    ReleasePodNotReady,
    /// Remove the finalizer `crr.apps.kruise.io/unready-acquired`.
    RemoveFinalizer,
    /// Remove the `crr.apps.kruise.io/active` label.
    RemoveActiveLabel,
    /// Delete the request (`ttlSecondsAfterFinished`).
    Delete,
    /// Complete the request with the message.
    Complete(&'static str),
    /// Write `status.containerStatusSnapshot`.
    WriteSnapshot(Vec<SyncContainerStatus>),
    /// Add the finalizer `crr.apps.kruise.io/unready-acquired`.
    AddFinalizer,
    /// Add the request's not-ready message to the pod's `KruisePodReady` condition.
    AcquirePodNotReady,
    /// Set the `PreRecreateGrace` condition (time: now).
    SetPreRecreateGrace,
}

/// The controller's plan for one request: the kit's plan, its status writes being
/// actions of their own (completion, the snapshot, the grace condition), so no status.
pub type Plan = kruise_core::plan::Plan<Action, ()>;

/// The not-ready message a request holds on its pod: `{ContainerRecreateRequest, ns/name}`.
pub fn readiness_message(crr: &ContainerRecreateRequest) -> NotReadyMessage {
    NotReadyMessage {
        user_agent: READINESS_USER_AGENT.into(),
        key: format!(
            "{}/{}",
            crr.metadata.namespace.as_deref().unwrap_or_default(),
            crr.metadata.name.as_deref().unwrap_or_default()
        ),
    }
}

fn has_finalizer(crr: &ContainerRecreateRequest) -> bool {
    crr.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == UNREADY_ACQUIRED_KEY)
}

/// Whether `pod` is alive (not being deleted).
fn alive(pod: Option<&Pod>) -> Option<&Pod> {
    pod.filter(|p| p.metadata.deletion_timestamp.is_none())
}

fn requeue(left: SignedDuration) -> Duration {
    left.unsigned_abs()
}

/// The plan for `crr`, whose pod (same namespace, `spec.podName`) is `pod`, at `now`.
pub fn plan(crr: &ContainerRecreateRequest, pod: Option<&Pod>, now: Timestamp) -> Plan {
    let mut out = Plan::default();
    let status = crr.status.clone().unwrap_or_default();
    let deleting = crr.metadata.deletion_timestamp.is_some();
    if deleting || status.completion_time.is_some() {
        if has_finalizer(crr) {
            if alive(pod).is_some_and(|p| p.has_readiness_gate(KRUISE_POD_READY)) {
                out.actions.push(Action::ReleasePodNotReady);
            }
            out.actions.push(Action::RemoveFinalizer);
        }
        if deleting {
            return out;
        }
        if crr
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(ACTIVE_KEY))
        {
            out.actions.push(Action::RemoveActiveLabel);
            return out;
        }
        if let (Some(ttl), Some(done)) =
            (crr.spec.ttl_seconds_after_finished, &status.completion_time)
        {
            let left = SignedDuration::from_secs(i64::from(ttl)) - now.duration_since(done.0);
            if left.is_positive() {
                out.requeue_after = Some(requeue(left));
            } else {
                out.actions.push(Action::Delete);
            }
        }
        return out;
    }
    let pod_uid = crr
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(POD_UID_KEY))
        .map(String::as_str)
        .unwrap_or_default();
    let Some(pod) = alive(pod).filter(|p| p.metadata.uid.as_deref().unwrap_or_default() == pod_uid)
    else {
        out.actions.push(Action::Complete(POD_GONE));
        return out;
    };
    let created = crr
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| t.0);
    let age = now.duration_since(created);
    let mut next: Option<SignedDuration> = None;
    let mut sooner = |left: SignedDuration| {
        next = Some(next.map_or(left, |n| n.min(left)));
    };
    if status.phase.is_empty() {
        let left = RESPONSE_TIMEOUT - age;
        if !left.is_positive() {
            out.actions.push(Action::Complete(NO_RESPONSE));
            return out;
        }
        sooner(left);
    }
    if let Some(deadline) = crr.spec.active_deadline_seconds {
        let left = SignedDuration::from_secs(deadline) - age;
        if !left.is_positive() {
            out.actions.push(Action::Complete(DEADLINE_EXCEEDED));
            return out;
        }
        sooner(left);
    }
    if status.phase != "Recreating" {
        out.requeue_after = next.map(requeue);
        return out;
    }
    let snapshot = snapshot(crr, pod, created);
    // Between an old attempt's exit and the new one's start nothing runs: the last
    // snapshot is kept.
    let keep_last = snapshot.is_empty() && !status.container_status_snapshot.is_empty();
    if !keep_last && snapshot != status.container_status_snapshot {
        out.actions.push(Action::WriteSnapshot(snapshot));
    }
    let poll = SignedDuration::try_from(RECREATING_POLL).unwrap_or(SignedDuration::from_secs(1));
    sooner(poll);
    let unready = crr
        .spec
        .strategy
        .as_ref()
        .is_some_and(|s| s.unready_grace_period_seconds.is_some());
    if unready && status.pre_recreate_grace().is_none() {
        if pod.has_readiness_gate(KRUISE_POD_READY) {
            if !has_finalizer(crr) {
                out.actions.push(Action::AddFinalizer);
            }
            out.actions.push(Action::AcquirePodNotReady);
        }
        out.actions.push(Action::SetPreRecreateGrace);
    }
    out.requeue_after = next.map(requeue);
    out
}

/// The pod's statuses of the request's containers that run and started since the request
/// was made (OpenKruise's `syncContainerStatuses`).
pub fn snapshot(
    crr: &ContainerRecreateRequest,
    pod: &Pod,
    created: Timestamp,
) -> Vec<SyncContainerStatus> {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    crr.spec
        .containers
        .iter()
        .filter_map(|c| statuses.iter().find(|s| s.name == c.name))
        .filter(|s| {
            s.state
                .as_ref()
                .and_then(|st| st.running.as_ref())
                .is_some_and(|r| r.started_at.as_ref().is_none_or(|t| t.0 >= created))
        })
        .map(|s| SyncContainerStatus {
            name: s.name.clone(),
            ready: s.ready,
            restart_count: s.restart_count,
            container_id: s.container_id.clone().unwrap_or_default(),
        })
        .collect()
}

#[cfg(test)]
mod tests;
