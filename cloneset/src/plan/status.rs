//! Status computation (OpenKruise `cloneset_status.go`), including the `Progressing`
//! condition and the `FailedScale` / `FailedUpdate` conditions.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_core::api::intstr::calculate_partition_replicas;
use kruise_core::pods::CachedPod;
use kruise_core::pods::selector::format_label_selector;

use super::PlanError;
use super::diffs::{at_revision, is_available, is_pod_update_ready};
use crate::api::condition::{
    PROGRESSING, REASON_AVAILABLE, REASON_DEADLINE_EXCEEDED, REASON_PARTITION_AVAILABLE,
    REASON_PAUSED, REASON_UPDATED, SCALE_EXPECTATIONS_EXPIRED,
};
use crate::api::v1beta1::CloneSet;
use crate::api::{CloneSetCondition, CloneSetStatus};

/// Fills `status` (whose `updateRevision`, `currentRevision`, `collisionCount` and conditions
/// the caller has set) from the active pods; returns a requeue hint for the progress deadline
/// or pods that become available later.
pub fn calculate_status(
    cs: &CloneSet,
    pods: &[&CachedPod],
    status: &mut CloneSetStatus,
    now: Timestamp,
) -> Option<SignedDuration> {
    let replicas = cs.spec.replicas.unwrap_or(1);
    let min_ready = cs.spec.min_ready_seconds;
    status.observed_generation = cs.metadata.generation.unwrap_or(0);
    status.label_selector = cs
        .spec
        .selector
        .as_ref()
        .map(format_label_selector)
        .unwrap_or_default();
    status.replicas = 0;
    status.ready_replicas = 0;
    status.available_replicas = 0;
    status.updated_replicas = 0;
    status.updated_ready_replicas = 0;
    status.updated_available_replicas = 0;
    let mut requeue: Option<SignedDuration> = None;
    for pod in pods {
        let ready = is_pod_update_ready(pod, 0, now);
        let available = is_available(pod, min_ready, now);
        let updated = at_revision(pod, &status.update_revision);
        status.replicas += 1;
        status.ready_replicas += i32::from(ready);
        status.available_replicas += i32::from(available);
        status.updated_replicas += i32::from(updated);
        status.updated_ready_replicas += i32::from(updated && ready);
        status.updated_available_replicas += i32::from(updated && available);
        if ready
            && !available
            && let Some(d) = kruise_core::pods::available_in(pod, min_ready, now)
        {
            requeue = Some(requeue.map_or(d, |r| r.min(d)));
        }
    }
    if status.updated_replicas == status.replicas && status.replicas == replicas {
        status.current_revision = status.update_revision.clone();
    }
    status.expected_updated_replicas = match &cs.spec.update_strategy.rolling_update {
        Some(r) => match calculate_partition_replicas(r.partition.as_ref(), Some(replicas)) {
            Ok(p) => replicas - p,
            Err(_) => status.expected_updated_replicas,
        },
        None => replicas,
    };
    if let Some(d) = progressing(cs, status, now) {
        requeue = Some(requeue.map_or(d, |r| r.min(d)));
    }
    requeue
}

/// OpenKruise's `SetCloneSetCondition`: same status and reason is a no-op; the transition time
/// is kept when only the reason changes.
fn set_condition(status: &mut CloneSetStatus, cond: CloneSetCondition) {
    if let Some(existing) = status.conditions.iter_mut().find(|c| c.type_ == cond.type_) {
        if existing.status == cond.status && existing.reason == cond.reason {
            return;
        }
        let keep_transition = existing.status == cond.status;
        let transition = existing.last_transition_time.clone();
        *existing = cond;
        if keep_transition {
            existing.last_transition_time = transition;
        }
    } else {
        status.conditions.push(cond);
    }
}

/// `ScaleExpectationsExpired=True`: the controller is acting on observed pods because
/// its creations/deletions were never all observed.
pub fn set_expectations_expired(status: &mut CloneSetStatus, message: &str, now: Timestamp) {
    set_condition(
        status,
        CloneSetCondition {
            type_: SCALE_EXPECTATIONS_EXPIRED.into(),
            status: "True".into(),
            last_update_time: Some(Time(now)),
            last_transition_time: Some(Time(now)),
            reason: SCALE_EXPECTATIONS_EXPIRED.into(),
            message: message.into(),
        },
    );
}

/// Flips a True `ScaleExpectationsExpired` to False once expectations are satisfied
/// again; absent stays absent.
pub fn clear_expectations_expired(status: &mut CloneSetStatus, now: Timestamp) {
    let expired = status
        .conditions
        .iter()
        .any(|c| c.type_ == SCALE_EXPECTATIONS_EXPIRED && c.status == "True");
    if expired {
        set_condition(
            status,
            CloneSetCondition {
                type_: SCALE_EXPECTATIONS_EXPIRED.into(),
                status: "False".into(),
                last_update_time: Some(Time(now)),
                last_transition_time: Some(Time(now)),
                reason: "ScaleExpectationsSatisfied".into(),
                message: String::new(),
            },
        );
    }
}

/// `FailedScale` / `FailedUpdate`: True with the error as message.
pub fn set_failed_condition(
    status: &mut CloneSetStatus,
    ty: &str,
    err: &PlanError,
    now: Timestamp,
) {
    set_condition(
        status,
        CloneSetCondition {
            type_: ty.into(),
            status: "True".into(),
            last_transition_time: Some(Time(now)),
            message: err.to_string(),
            ..Default::default()
        },
    );
}

fn progressing(
    cs: &CloneSet,
    status: &mut CloneSetStatus,
    now: Timestamp,
) -> Option<SignedDuration> {
    let deadline = match cs.spec.progress_deadline_seconds {
        Some(d) if d != i32::MAX => d,
        _ => {
            status.conditions.retain(|c| c.type_ != PROGRESSING);
            return None;
        }
    };
    let replicas = cs.spec.replicas.unwrap_or(1);
    let cond = |s: &str, reason: &str, message: String| CloneSetCondition {
        type_: PROGRESSING.into(),
        status: s.into(),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
        reason: reason.into(),
        message,
    };
    let paused = cs
        .spec
        .update_strategy
        .rolling_update
        .as_ref()
        .is_some_and(|r| r.paused);
    let available = status.update_revision == status.current_revision
        && status.replicas == replicas
        && status.updated_replicas == replicas
        && status.updated_available_replicas == replicas;
    let partition_available = status.expected_updated_replicas < replicas
        && status.expected_updated_replicas <= status.updated_available_replicas;
    let existing = status
        .conditions
        .iter()
        .find(|c| c.type_ == PROGRESSING)
        .cloned();
    let exceeded = existing.as_ref().is_some_and(|c| {
        c.reason == REASON_DEADLINE_EXCEEDED
            || c.last_update_time.as_ref().is_some_and(|t| {
                t.0.checked_add(SignedDuration::from_secs(i64::from(deadline)))
                    .is_ok_and(|until| until < now)
            })
    });
    if available {
        set_condition(
            status,
            cond("True", REASON_AVAILABLE, "CloneSet is available".into()),
        );
        None
    } else if paused {
        set_condition(
            status,
            cond("True", REASON_PAUSED, "CloneSet is paused".into()),
        );
        None
    } else if partition_available {
        set_condition(
            status,
            cond(
                "True",
                REASON_PARTITION_AVAILABLE,
                "CloneSet has been paused due to partition ready".into(),
            ),
        );
        None
    } else if exceeded {
        let message = format!(
            "CloneSet revision {} has timed out progressing",
            status.update_revision
        );
        set_condition(status, cond("False", REASON_DEADLINE_EXCEEDED, message));
        None
    } else {
        set_condition(
            status,
            cond("True", REASON_UPDATED, "CloneSet is progressing".into()),
        );
        let since = status
            .conditions
            .iter()
            .find(|c| c.type_ == PROGRESSING)
            .and_then(|c| c.last_update_time.as_ref())
            .map_or(now, |t| t.0);
        let until = since
            .checked_add(SignedDuration::from_secs(i64::from(deadline) + 1))
            .ok()?;
        Some(until.duration_since(now)).filter(|d| *d > SignedDuration::ZERO)
    }
}
