//! OpenKruise's `calculateDiffsWithExpectation`: how many pods to create, delete and update
//! now, and with which budgets. Everything else in the planner is driven by these numbers.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_core::api::LifecycleState;
use kruise_core::api::intstr::{calculate_partition_replicas, value_from_int_or_percent};
use kruise_core::pods::{CachedPod, PodView};
use kruise_core::pods::{
    is_pod_available as k8s_available, lifecycle_state, pod_condition, pod_phase, pod_revision,
};
use serde::Serialize;

use crate::api::DEFAULT_MAX_UNAVAILABLE;
use crate::api::v1beta1::CloneSet;

/// The numbers that drive one reconcile (field names as OpenKruise logs them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpectationDiffs {
    /// Pods missing (including surge).
    pub scale_up_num: i32,
    /// Of those, how many at the current (old) revision.
    pub scale_up_num_old_revision: i32,
    /// Pods in excess.
    pub scale_down_num: i32,
    /// Of those, how many from the current (old) revision.
    pub scale_down_num_old_revision: i32,
    /// Creations allowed now (`scaleStrategy.maxUnavailable`).
    pub scale_up_limit: i32,
    /// Ready pods that may be deleted now.
    pub delete_ready_limit: i32,
    /// Extra pods in use above replicas.
    pub use_surge: i32,
    /// Of those, at the old revision.
    pub use_surge_old_revision: i32,
    /// Pods to move to the update revision (> 0) or back to the current revision (< 0).
    pub update_num: i32,
    /// Unavailable budget for updates.
    pub update_max_unavailable: i32,
}

/// `IsPodUpdateReady`: running, ready for `min_ready_seconds`, and `InPlaceUpdateReady` not
/// other than True.
pub fn is_pod_update_ready<P: PodView + ?Sized>(
    pod: &P,
    min_ready_seconds: i32,
    now: Timestamp,
) -> bool {
    if pod_phase(pod) != "Running" || !k8s_available(pod, min_ready_seconds, now) {
        return false;
    }
    pod_condition(pod, kruise_core::api::keys::INPLACE_UPDATE_READY)
        .is_none_or(|c| c.status == "True")
}

/// CloneSet's `IsPodAvailable`: lifecycle state empty or `Normal`, and [`is_pod_update_ready`].
pub fn is_available<P: PodView + ?Sized>(pod: &P, min_ready_seconds: i32, now: Timestamp) -> bool {
    matches!(lifecycle_state(pod), None | Some(LifecycleState::Normal))
        && pod
            .label(kruise_core::api::keys::LIFECYCLE_STATE_KEY)
            .is_none_or(|s| s.is_empty() || s == "Normal")
        && is_pod_update_ready(pod, min_ready_seconds, now)
}

/// CloneSet's `isPodReady`: [`is_available`] with `minReadySeconds` 0.
pub fn is_ready<P: PodView + ?Sized>(pod: &P, now: Timestamp) -> bool {
    is_available(pod, 0, now)
}

/// Whether the pod's revision label names `revision` (full name or short hash).
pub fn at_revision<P: PodView + ?Sized>(pod: &P, revision: &str) -> bool {
    pod_revision(pod).is_some_and(|r| kruise_core::revision::equal_to_revision_hash(r, revision))
}

/// Specified delete: the label, or the name in `podsToDelete`.
pub fn is_specified_delete<P: PodView + ?Sized>(cs: &CloneSet, pod: &P) -> bool {
    pod.label(kruise_core::api::keys::SPECIFIED_DELETE_KEY)
        .is_some()
        || cs
            .spec
            .scale_strategy
            .pods_to_delete
            .iter()
            .any(|d| d == pod.name())
}

/// Resolved partition (0 on error, as OpenKruise logs and ignores the error).
pub fn partition(cs: &CloneSet) -> i32 {
    let replicas = cs.spec.replicas.unwrap_or(1);
    cs.spec
        .update_strategy
        .rolling_update
        .as_ref()
        .and_then(|r| calculate_partition_replicas(r.partition.as_ref(), Some(replicas)).ok())
        .unwrap_or(0)
}

/// Resolved (maxSurge, maxUnavailable): surge rounds up and is 0 while paused;
/// maxUnavailable defaults to `20%` and rounds up unless surge is in use (then down); with no
/// `rollingUpdate` it is `20%` rounded down. Kubernetes' integer-percent helper, as OpenKruise.
pub fn surge_and_unavailable(cs: &CloneSet) -> (i32, i32) {
    let replicas = cs.spec.replicas.unwrap_or(1);
    let default_unavailable = IntOrString::String(DEFAULT_MAX_UNAVAILABLE.into());
    match &cs.spec.update_strategy.rolling_update {
        Some(r) => {
            let mut surge = r
                .max_surge
                .as_ref()
                .and_then(|s| value_from_int_or_percent(s, replicas, true).ok())
                .unwrap_or(0);
            if r.paused {
                surge = 0;
            }
            let unavailable = value_from_int_or_percent(
                r.max_unavailable.as_ref().unwrap_or(&default_unavailable),
                replicas,
                surge == 0,
            )
            .unwrap_or(0);
            (surge, unavailable)
        }
        None => (
            0,
            value_from_int_or_percent(&default_unavailable, replicas, false).unwrap_or(0),
        ),
    }
}

/// Whether PreparingDelete pods are left out of the scaling counts.
pub fn exclude_preparing_delete(cs: &CloneSet, global_flag: bool) -> bool {
    global_flag || cs.spec.scale_strategy.exclude_preparing_delete
}

/// OpenKruise's `calculateDiffsWithExpectation` over the active pods. `is_new` says whether a
/// pod counts as at the update revision (the scale path passes `IsPodUpdate`, which may count
/// `PreparingUpdate` pods; the update path plain revision equality).
#[allow(clippy::too_many_arguments)]
pub fn calculate_diffs(
    cs: &CloneSet,
    pods: &[&CachedPod],
    current_revision: &str,
    update_revision: &str,
    is_new: &dyn Fn(&CachedPod) -> bool,
    partition_rollback_gate: bool,
    exclude_preparing_delete_flag: bool,
    now: Timestamp,
) -> ExpectationDiffs {
    let mut res = ExpectationDiffs::default();
    // Computed in i64 so extreme specs (replicas near i32::MAX) cannot overflow.
    let replicas = i64::from(cs.spec.replicas.unwrap_or(1));
    let partition = i64::from(partition(cs));
    let (max_surge, max_unavailable) = surge_and_unavailable(cs);
    let (max_surge, max_unavailable) = (i64::from(max_surge), i64::from(max_unavailable));
    let scale_max_unavailable = i64::from(
        value_from_int_or_percent(
            cs.spec
                .scale_strategy
                .max_unavailable
                .as_ref()
                .unwrap_or(&IntOrString::Int(i32::MAX)),
            cs.spec.replicas.unwrap_or(1),
            true,
        )
        .unwrap_or(0),
    );
    let min_ready = cs.spec.min_ready_seconds;

    #[derive(Default)]
    struct Counts {
        total: i64,
        active: i64,
        unavailable: i64,
        to_delete: i64,
        to_delete_unavailable: i64,
        pre_deleting: i64,
    }
    let (mut new, mut old) = (Counts::default(), Counts::default());
    for pod in pods {
        let c = if is_new(pod) { &mut new } else { &mut old };
        c.total += 1;
        if lifecycle_state(pod) == Some(LifecycleState::PreparingDelete) {
            c.pre_deleting += 1;
        } else {
            c.active += 1;
            if is_specified_delete(cs, pod) {
                c.to_delete += 1;
                if !is_available(pod, min_ready, now) {
                    c.to_delete_unavailable += 1;
                }
            } else if !is_available(pod, min_ready, now) {
                c.unavailable += 1;
            }
        }
    }

    let mut update_old_diff = old.active - partition;
    let mut update_new_diff = new.active - (replicas - partition);
    let total_unavailable = new.pre_deleting + old.pre_deleting + new.unavailable + old.unavailable;
    if update_revision == current_revision || !partition_rollback_gate {
        update_old_diff = update_old_diff.max(0);
        update_new_diff = update_new_diff.min(0);
    }

    let (mut use_surge, mut use_surge_old) = (0i64, 0i64);
    if max_surge > 0 {
        let (mut scale_surge, mut scale_old_surge) = (0, 0);
        let to_delete = new.to_delete + old.to_delete;
        if to_delete > 0 {
            scale_surge = (total_unavailable + to_delete - max_unavailable)
                .max(0)
                .min(to_delete);
            if scale_surge > new.to_delete {
                scale_old_surge = scale_surge - new.to_delete;
            }
        }
        let (mut update_surge, mut update_old_surge) = (0, 0);
        let opposite = (update_old_diff > 0 && update_new_diff < 0)
            || (update_old_diff < 0 && update_new_diff > 0);
        if opposite {
            if update_old_diff.abs() <= update_new_diff.abs() {
                update_surge = update_old_diff.abs();
                if update_old_diff < 0 {
                    update_old_surge = update_surge;
                }
            } else {
                update_surge = update_new_diff.abs();
                if update_new_diff > 0 {
                    update_old_surge = update_surge;
                }
            }
        }
        if scale_surge >= update_surge {
            use_surge = max_surge.min(scale_surge);
            use_surge_old = use_surge.min(scale_old_surge);
        } else {
            use_surge = max_surge.min(update_surge);
            use_surge_old = use_surge.min(update_old_surge);
        }
    }
    res.use_surge = clamp32(use_surge);
    res.use_surge_old_revision = clamp32(use_surge_old);

    let all = i64::try_from(pods.len()).unwrap_or(i64::MAX);
    let (mut current_total, mut current_old) = (all, old.total);
    if exclude_preparing_delete(cs, exclude_preparing_delete_flag) {
        current_total -= old.pre_deleting + new.pre_deleting;
        current_old -= old.pre_deleting;
    }
    let expected_total = replicas + use_surge;
    let expected_old = partition + use_surge_old;

    let up = expected_total - current_total;
    if up > 0 {
        res.scale_up_num = clamp32(up);
        res.scale_up_num_old_revision = clamp32((expected_old - current_old).max(0));
        res.scale_up_limit = clamp32(up.min((scale_max_unavailable - total_unavailable).max(0)));
    }
    let down = current_total - old.to_delete - new.to_delete - expected_total;
    if down > 0 {
        res.scale_down_num = clamp32(down);
        res.scale_down_num_old_revision =
            clamp32((current_old - old.to_delete - expected_old).max(0));
    }
    if new.to_delete > 0 || old.to_delete > 0 || down > 0 {
        // Deliberate difference from OpenKruise: unavailable pods that are themselves
        // specified for deletion count too. OpenKruise leaves them out, so deleting an
        // unready specified pod together with a ready one exceeds maxUnavailable (the
        // unready one is deleted unconditionally in the same pass).
        let unavailable_all =
            total_unavailable + new.to_delete_unavailable + old.to_delete_unavailable;
        res.delete_ready_limit =
            clamp32((max_unavailable + (all - replicas) - unavailable_all).max(0));
    }
    res.update_num = clamp32(if update_old_diff.abs() <= update_new_diff.abs() {
        update_old_diff
    } else {
        -update_new_diff
    });
    if res.update_num != 0 {
        res.update_max_unavailable = clamp32(max_unavailable + all - replicas);
    }
    res
}

fn clamp32(v: i64) -> i32 {
    i32::try_from(v.clamp(i64::from(i32::MIN), i64::from(i32::MAX))).unwrap_or(0)
}
