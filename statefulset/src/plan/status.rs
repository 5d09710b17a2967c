//! Status from the observed pods (OpenKruise's `updateStatefulSet` counters and
//! `completeRollingUpdate`).

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_core::pods::selector::format_label_selector;
use kruise_core::pods::{CachedPod, PodView as _};

use super::revision_name;
use crate::api::StatefulSetStatus;
use crate::api::v1beta1::{StatefulSet, UpdateStrategyType};

/// The status and when to look again (a ready pod becoming available).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CalculatedStatus {
    /// The status to write (if it differs).
    pub status: StatefulSetStatus,
    /// Requeue for the next pod to pass minReadySeconds.
    pub requeue_after: Option<SignedDuration>,
}

/// Counts `pods` (the set's owned pods): replicas (created: a phase is set), ready
/// (Running and Ready), available (ready for minReadySeconds, lifecycle Normal or unset),
/// current and updated (not terminating, by `controller-revision-hash`), updatedReady,
/// updatedAvailable; the revisions, collision count and label selector; and, with
/// `RollingUpdate`, the current revision advances to the update revision once every
/// created pod is updated and ready.
pub fn calculate_status(
    set: &StatefulSet,
    pods: &[&CachedPod],
    update_revision: &ControllerRevision,
    current_revision: &ControllerRevision,
    now: Timestamp,
) -> CalculatedStatus {
    let old = set.status.clone().unwrap_or_default();
    let update = revision_name(update_revision);
    let current = revision_name(current_revision);
    let min_ready = set.spec.min_ready_seconds();
    let mut status = StatefulSetStatus {
        observed_generation: set.metadata.generation.unwrap_or(old.observed_generation),
        current_revision: current.to_string(),
        update_revision: update.to_string(),
        collision_count: old.collision_count,
        conditions: old.conditions.clone(),
        label_selector: set
            .spec
            .selector
            .as_ref()
            .map(format_label_selector)
            .unwrap_or_default(),
        volume_claims: old.volume_claims.clone(),
        ..Default::default()
    };
    let mut requeue_after: Option<SignedDuration> = None;
    for pod in pods {
        let pod = *pod;
        if !pod.phase().is_empty() {
            status.replicas += 1;
        }
        let ready = pod.phase() == "Running" && kruise_core::pods::is_pod_ready(pod);
        let available = ready
            && kruise_core::pods::is_pod_available(pod, min_ready, now)
            && kruise_core::pods::lifecycle::is_lifecycle_available(
                kruise_core::pods::lifecycle_state(pod),
            );
        if ready
            && !available
            && let Some(d) = kruise_core::pods::available_in(pod, min_ready, now)
        {
            requeue_after = Some(requeue_after.map_or(d, |r| r.min(d)));
        }
        status.ready_replicas += i32::from(ready);
        status.available_replicas += i32::from(available);
        if kruise_core::pods::is_terminating(pod) {
            continue;
        }
        let revision = kruise_core::pods::pod_revision(pod);
        if revision == Some(current) {
            status.current_replicas += 1;
        }
        if revision == Some(update) {
            status.updated_replicas += 1;
            status.updated_ready_replicas += i32::from(ready);
            status.updated_available_replicas += i32::from(available);
        }
    }
    let rolling = set.spec.update_strategy.type_.as_ref() != Some(&UpdateStrategyType::OnDelete);
    if rolling
        && status.updated_replicas == status.replicas
        && status.ready_replicas == status.replicas
    {
        status.current_replicas = status.updated_replicas;
        status.current_revision = status.update_revision.clone();
    }
    CalculatedStatus {
        status,
        requeue_after,
    }
}
