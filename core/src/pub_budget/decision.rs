//! The admission decision on one pod operation against its PodUnavailableBudget
//! (OpenKruise's `PodUnavailableBudgetValidatePod` and `checkAndDecrement`), pure.
//!
//! In order, the operation is let through without touching the budget when: its gate is
//! off; the pod carries `pub.kruise.io/no-protect: "true"`; the pod is not available (it
//! counts for nothing); no budget covers it; it matches `ignoredPodSelector`; the budget
//! wants no pod available; the budget does not protect the operation (RESIZE is protected
//! with UPDATE while `InPlacePodVerticalScaling` is off); or the pod is already recorded.
//! Otherwise it consumes one allowed disruption: refused when none is left (or the records
//! passed 2,000), else the pod is recorded — UPDATE in `unavailablePods`, the others in
//! `disruptedPods` — and the budget's status must be written before the answer (not on a
//! dry run). The write is conditioned on the budget's `resourceVersion`, so two webhook
//! replicas deciding on the same status cannot both spend its last disruption: the loser
//! reads the budget again and decides again ([`MAX_ATTEMPTS`] in all, then refuses with
//! [`conflicts_message`]).

use std::collections::BTreeMap;

use crate::pods::selector::selector_matches;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{
    NO_PROTECT_ANNOTATION, PodUnavailableBudget, PodUnavailableBudgetStatus, PubOperation,
    is_available,
};

/// Most disrupted plus unavailable records a budget holds before every operation is refused.
pub const MAX_RECORDS: usize = 2000;
/// Attempts at the conditioned status write before the operation is refused (OpenKruise's
/// conflict retry: 4 steps).
pub const MAX_ATTEMPTS: usize = 4;

/// The feature gates the decision reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gates {
    /// `PodUnavailableBudgetDeleteGate`: DELETE and EVICT are checked.
    pub delete: bool,
    /// `PodUnavailableBudgetUpdateGate`: UPDATE and RESIZE are checked.
    pub update: bool,
    /// `InPlacePodVerticalScaling`: RESIZE is its own operation (else UPDATE covers it).
    pub in_place_vertical_scaling: bool,
}

impl Default for Gates {
    /// OpenKruise's defaults: delete on, update off, vertical scaling off.
    fn default() -> Self {
        Gates {
            delete: true,
            update: false,
            in_place_vertical_scaling: false,
        }
    }
}

/// Why an operation goes through without touching the budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exempt {
    /// The operation's gate is off.
    GateOff,
    /// `pub.kruise.io/no-protect: "true"`.
    NoProtectAnnotation,
    /// The pod is not available, so it counts for nothing.
    PodUnavailable,
    /// No budget covers the pod.
    NoBudget,
    /// The pod matches `ignoredPodSelector`.
    IgnoredPod,
    /// The budget wants no pod available.
    NothingDesired,
    /// The budget does not protect this operation.
    OperationNotProtected,
    /// The pod is already recorded as disrupted or unavailable.
    AlreadyRecorded,
    /// A dry run that the budget would allow.
    DryRun,
}

impl Exempt {
    /// Whether the exemption rests on the pod's own state (its annotation, readiness or
    /// labels), so a decision on a cached copy of the pod must be confirmed on the pod as
    /// it is before it lets the operation through unrecorded.
    pub fn depends_on_pod(self) -> bool {
        matches!(
            self,
            Exempt::NoProtectAnnotation | Exempt::PodUnavailable | Exempt::IgnoredPod
        )
    }
}

/// The decision on one operation.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Allowed; the budget is not written.
    Allow(Exempt),
    /// Allowed once this status is written, conditioned on the resourceVersion it was
    /// computed from.
    Consume(PodUnavailableBudgetStatus),
    /// Refused with this message (event `PubPreventPodDeletion`).
    Deny(String),
}

/// One pod operation to decide on.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// The pod as it is (the old pod for an UPDATE).
    pub pod: &'a Pod,
    /// What is done to it.
    pub operation: &'a PubOperation,
    /// `dryRun` of the request.
    pub dry_run: bool,
    /// Now (the time recorded for the pod).
    pub now: Timestamp,
}

/// Decides on `request` against `budget` (the pod's budget as last read, `None` when no
/// budget covers it).
pub fn decide(
    budget: Option<&PodUnavailableBudget>,
    request: &Request<'_>,
    gates: Gates,
) -> Decision {
    let pod = request.pod;
    let gate_on = match request.operation {
        PubOperation::Delete | PubOperation::Evict => gates.delete,
        _ => gates.update,
    };
    if !gate_on {
        return Decision::Allow(Exempt::GateOff);
    }
    if has_no_protect_annotation(pod) {
        return Decision::Allow(Exempt::NoProtectAnnotation);
    }
    if !is_available(pod) {
        return Decision::Allow(Exempt::PodUnavailable);
    }
    let Some(budget) = budget else {
        return Decision::Allow(Exempt::NoBudget);
    };
    if is_ignored(budget, pod) {
        return Decision::Allow(Exempt::IgnoredPod);
    }
    let status = budget.status.clone().unwrap_or_default();
    if status.desired_available == 0 {
        return Decision::Allow(Exempt::NothingDesired);
    }
    if !protects(budget, request.operation, gates) {
        return Decision::Allow(Exempt::OperationNotProtected);
    }
    let pod_name = pod.metadata.name.as_deref().unwrap_or("");
    if status.records(pod_name) {
        return Decision::Allow(Exempt::AlreadyRecorded);
    }
    let budget_name = budget.metadata.name.as_deref().unwrap_or("");
    if status.unavailable_allowed <= 0 {
        return Decision::Deny(forbidden(
            budget_name,
            "pub unavailable allowed is negative",
        ));
    }
    if status.disrupted_pods.len() + status.unavailable_pods.len() > MAX_RECORDS {
        return Decision::Deny(forbidden(
            budget_name,
            "DisruptedPods and UnavailablePods map too big - too many unavailable not confirmed by PUB controller",
        ));
    }
    if request.dry_run {
        return Decision::Allow(Exempt::DryRun);
    }
    let mut status = status;
    status.unavailable_allowed -= 1;
    let records: &mut BTreeMap<String, Time> = if *request.operation == PubOperation::Update {
        &mut status.unavailable_pods
    } else {
        &mut status.disrupted_pods
    };
    records.insert(pod_name.to_string(), Time(request.now));
    Decision::Consume(status)
}

/// The refusal after [`MAX_ATTEMPTS`] conflicting status writes (Kubernetes' timeout error,
/// as OpenKruise answers it).
pub fn conflicts_message(budget_name: &str) -> String {
    format!("Timeout: couldn't update PodUnavailableBudget {budget_name} due to conflicts")
}

/// Kubernetes' Forbidden error for the budget, as OpenKruise words it.
fn forbidden(budget_name: &str, reason: &str) -> String {
    format!("podunavailablebudget.policy.kruise.io {budget_name:?} is forbidden: {reason}")
}

/// Go's `strconv.ParseBool` truths.
fn has_no_protect_annotation(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(NO_PROTECT_ANNOTATION))
        .is_some_and(|v| matches!(v.as_str(), "1" | "t" | "T" | "true" | "TRUE" | "True"))
}

/// Whether `ignoredPodSelector` selects the pod (an empty or invalid selector selects none).
fn is_ignored(budget: &PodUnavailableBudget, pod: &Pod) -> bool {
    let Some(selector) = &budget.spec.ignored_pod_selector else {
        return false;
    };
    let empty = selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(|e| e.is_empty());
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    !empty && selector_matches(selector, &labels).unwrap_or(false)
}

/// Whether the budget protects `operation`.
pub fn protects(budget: &PodUnavailableBudget, operation: &PubOperation, gates: Gates) -> bool {
    let protected = budget.protected_operations();
    protected.contains(operation)
        || (*operation == PubOperation::Resize
            && !gates.in_place_vertical_scaling
            && protected.contains(&PubOperation::Update))
}
