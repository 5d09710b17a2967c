//! The PUB controller's status arithmetic (OpenKruise's `syncPodUnavailableBudget`), pure:
//!
//! * desired available pods: `maxUnavailable` -> expected − ceil(pct · expected) (at least 0);
//!   `minAvailable` -> the number, or ceil(pct · expected) — Kubernetes' integer-percent
//!   helper, so `"12.5%"` is an error;
//! * the disrupted and unavailable records: kept only for active pods, and only while
//!   now ≤ granted + 20 s (disrupted) / + 10 s (unavailable); the earliest expiry is when to
//!   look again; a disrupted pod still there after its 20 s is reported (event `NotDeleted`);
//! * current available pods: active, not recorded, ready and consistent;
//! * allowed disruptions: max(current − desired, 0).

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_core::api::intstr::{IntOrPercentError, value_from_int_or_percent};
use kruise_core::pods::is_pod_active;

use crate::api::v1beta1::{PodUnavailableBudgetSpec, PodUnavailableBudgetStatus};

/// How long a granted deletion or eviction is counted before the pod is expected gone.
pub const DISRUPTED_POD_TIMEOUT: SignedDuration = SignedDuration::from_secs(20);
/// How long a granted update is counted before the pod's own readiness is trusted again.
pub const UNAVAILABLE_POD_TIMEOUT: SignedDuration = SignedDuration::from_secs(10);

/// What the budget needs to know of one pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodState {
    /// The pod's name (the key of the status maps).
    pub name: String,
    /// Not Succeeded, not Failed, not being deleted.
    pub active: bool,
    /// Running, Ready, without an `unavailable-pod.kruise.io/*` label, and consistent.
    pub available: bool,
}

impl PodState {
    /// The state of `pod`.
    pub fn of(pod: &Pod) -> Self {
        PodState {
            name: pod.metadata.name.clone().unwrap_or_default(),
            active: is_pod_active(pod),
            available: is_available(pod),
        }
    }
}

// Pod availability as a budget counts it, shared with the admission decision.
pub use kruise_core::pub_budget::{has_unavailable_label, is_available};

/// Everything one status computation reads.
#[derive(Clone, Debug)]
pub struct BudgetInput<'a> {
    /// The budget's spec.
    pub spec: &'a PodUnavailableBudgetSpec,
    /// `metadata.generation`.
    pub generation: i64,
    /// The status as last written (its records are carried over).
    pub status: &'a PodUnavailableBudgetStatus,
    /// The pods the budget covers.
    pub pods: &'a [PodState],
    /// The pods expected: the workloads' replicas, or `protectTotalReplicas`.
    pub expected: i32,
    /// Now.
    pub now: Timestamp,
}

/// The status to write and what follows from it: the kit's plan with no writes but the
/// status, requeued a second after the earliest kept record expires (so it has expired when
/// looked at), and, besides, the pods granted a deletion more than 20 s ago that still
/// exist (event `NotDeleted` on each).
pub type BudgetPlan =
    kruise_core::plan::Plan<std::convert::Infallible, PodUnavailableBudgetStatus, Vec<String>>;

/// How long after a record's expiry the budget is looked at again.
const RECORD_EXPIRY_SLACK: SignedDuration = SignedDuration::from_secs(1);

/// The pods that must stay available out of `expected`.
pub fn desired_available(
    spec: &PodUnavailableBudgetSpec,
    expected: i32,
) -> Result<i32, IntOrPercentError> {
    if let Some(max_unavailable) = &spec.max_unavailable {
        let max = value_from_int_or_percent(max_unavailable, expected, true)?;
        return Ok(expected.saturating_sub(max).max(0));
    }
    match &spec.min_available {
        Some(min) => value_from_int_or_percent(min, expected, true),
        None => Ok(0),
    }
}

/// The budget's status now.
pub fn plan(input: &BudgetInput<'_>) -> Result<BudgetPlan, IntOrPercentError> {
    let desired = desired_available(input.spec, input.expected)?;
    let mut status = PodUnavailableBudgetStatus {
        observed_generation: input.generation,
        total_replicas: input.expected,
        desired_available: desired,
        ..Default::default()
    };
    let mut requeue_at: Option<Timestamp> = None;
    let mut not_deleted = Vec::new();
    let mut keep_until = |granted: &Time, timeout: SignedDuration| -> Option<Timestamp> {
        let expiry = granted.0.checked_add(timeout).ok()?;
        (expiry >= input.now).then(|| {
            requeue_at = Some(requeue_at.map_or(expiry, |r| r.min(expiry)));
            expiry
        })
    };
    for pod in input.pods.iter().filter(|p| p.active) {
        if let Some(granted) = input.status.disrupted_pods.get(&pod.name) {
            if keep_until(granted, DISRUPTED_POD_TIMEOUT).is_some() {
                status
                    .disrupted_pods
                    .insert(pod.name.clone(), granted.clone());
            } else {
                not_deleted.push(pod.name.clone());
            }
        }
        if let Some(granted) = input.status.unavailable_pods.get(&pod.name)
            && keep_until(granted, UNAVAILABLE_POD_TIMEOUT).is_some()
        {
            status
                .unavailable_pods
                .insert(pod.name.clone(), granted.clone());
        }
    }
    let current = input
        .pods
        .iter()
        .filter(|p| p.active && p.available && !status.records(&p.name))
        .count();
    status.current_available = i32::try_from(current).unwrap_or(i32::MAX);
    status.unavailable_allowed = (status.current_available - desired).max(0);
    let mut plan = BudgetPlan {
        status,
        extra: not_deleted,
        ..BudgetPlan::default()
    };
    if let Some(expiry) = requeue_at {
        plan.requeue_within(expiry.duration_since(input.now) + RECORD_EXPIRY_SLACK);
    }
    Ok(plan)
}

#[cfg(test)]
mod tests;
