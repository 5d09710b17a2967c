//! The pure CloneSet planner: (CloneSet, owned pods, PVCs, revisions, now, gates, expectation
//! state) -> the actions to take now and the status to write. No client, no clock, no
//! randomness: time comes in as [`PlanInput::now`], pod-name suffixes as
//! [`PlanInput::instance_ids`].
//!
//! It follows OpenKruise's reconcile (`pkg/controller/cloneset`): claim, PVC clean-up, then
//! **Scale** (create, specified/pre-deleting deletes, scale-in) and — only when Scale changed
//! nothing — **Update** (refresh pod states, then in-place update or mark for recreation),
//! then status, `podsToDelete` truncation and history truncation.

mod diffs;
mod pods;
mod revisions;
mod scale;
mod status;
mod update;

#[cfg(test)]
mod tests;

use kruise_core::pods::{CachedPod, LabelsAndFinalizers as _, PodView as _};
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodStatus};
use kruise_core::expectations::Satisfaction;
use kruise_core::inplace::InPlaceWrites;
use kruise_core::pods::lifecycle::NotReadyChange;
use serde_json::Value;

use crate::api::CloneSetStatus;
use crate::api::v1beta1::CloneSet;

pub use diffs::{ExpectationDiffs, calculate_diffs};
pub use pods::{new_pod, new_pvcs, pvc_name};
pub use revisions::{RevisionPlan, RevisionWrite, plan_revisions, vct_hash};
pub use status::calculate_status;

/// Feature gates the planner reads (OpenKruise defaults via [`Default`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanGates {
    /// `CloneSetShortHash`: pod `controller-revision-hash` is the short hash.
    pub short_hash: bool,
    /// `CloneSetPartitionRollback`: raising the partition rolls updated pods back.
    pub partition_rollback: bool,
    /// `PreparingUpdateAsUpdate`: `PreparingUpdate` pods count as updated when scaling.
    pub preparing_update_as_update: bool,
    /// `InPlaceUpdateEnvFromMetadata` (default on).
    pub env_from_metadata: bool,
    /// `InPlaceWorkloadVerticalScaling`.
    pub vertical_scaling: bool,
    /// `RecreatePodWhenChangeVCTInCloneSetGate`.
    pub recreate_on_vct_change: bool,
    /// `--cloneset-scaling-exclude-preparing-delete` (global flag).
    pub exclude_preparing_delete: bool,
}

impl Default for PlanGates {
    fn default() -> Self {
        Self {
            short_hash: false,
            partition_rollback: false,
            preparing_update_as_update: false,
            env_from_metadata: true,
            vertical_scaling: false,
            recreate_on_vct_change: false,
            exclude_preparing_delete: false,
        }
    }
}

/// Pods one plan creates at most; a larger scale-up continues in the next reconciles once
/// these are observed. OpenKruise creates the whole difference in one pass, but every pod
/// of a plan is held in memory until the plan is done (~30 MB for 9,000 pods).
pub const MAX_CREATIONS_PER_PLAN: usize = 500;

/// Existing pods one plan writes at most (refreshes, lifecycle changes and updates); the
/// rest follow in the next reconciles. Each planned write holds its patch until the plan is
/// done: 9,000 new pods turning Normal at once held ~45 MB of patches and write futures.
pub const MAX_POD_WRITES_PER_PLAN: usize = 1000;

/// Everything the planner reads.
#[derive(Debug, Clone, Copy)]
pub struct PlanInput<'a> {
    /// The CloneSet (storage version, defaulted), with metadata and status.
    pub cloneset: &'a CloneSet,
    /// Pods listed by owner reference (active and inactive), shared with the controller's
    /// cache: the planner borrows them and never copies a pod.
    pub pods: &'a [Arc<CachedPod>],
    /// PVCs listed for the CloneSet (not terminating).
    pub pvcs: &'a [PersistentVolumeClaim],
    /// The current revision (`status.currentRevision` if it exists, else the update revision).
    pub current_revision: &'a ControllerRevision,
    /// The update revision (the revision of the current template).
    pub update_revision: &'a ControllerRevision,
    /// All revisions of the CloneSet, sorted oldest first (for in-place diffs and history).
    pub revisions: &'a [ControllerRevision],
    /// Now.
    pub now: Timestamp,
    /// Feature gates.
    pub gates: PlanGates,
    /// Random 5-character suffixes for new pods, used in order (after reusable PVC ids);
    /// the planner creates at most [`MAX_CREATIONS_PER_PLAN`] pods, so that many plus a
    /// margin for collisions is enough.
    pub instance_ids: &'a [String],
    /// The scale expectations' state (`common::expectations::ScaleExpectations::satisfied`).
    /// `Pending`: nothing is done (a stale cache must not cause double creates/deletes).
    /// `Expired`: the planner acts on what it observes and reports the expiry (event +
    /// [`PlanNotes::expectations_expired`]); the caller drops the expectation and counts the metric.
    pub scale_expectations: &'a Satisfaction,
}

/// One write the controller performs. A plan holds at most one metadata/spec write per pod
/// (a status write such as `InPlaceUpdateReady=True` may accompany it).
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create the PVCs (skipping ones that exist), then the pod.
    CreatePod {
        /// The pod to create.
        pod: Box<Pod>,
        /// Its claims that do not exist yet.
        pvcs: Vec<PersistentVolumeClaim>,
    },
    /// Delete the pod, then the PVCs with its instance id.
    DeletePod {
        /// Pod name.
        name: String,
        /// PVC names to delete with it.
        pvcs: Vec<String>,
    },
    /// Strategic-merge patch of the lifecycle state label/timestamp (and re-added hooks),
    /// plus a `KruisePodReady` change when the hook marks pods not ready.
    SetLifecycleState {
        /// Pod name.
        name: String,
        /// The patch.
        patch: Value,
        /// The not-ready key change, if any.
        not_ready: Option<NotReadyChange>,
        /// The pod status written with the patch (one write to the status subresource):
        /// the status planned for the pod, if any, with the not-ready change applied at
        /// [`PlanInput::now`]. Filled in once the plan is complete.
        status: Option<Box<PodStatus>>,
    },
    /// Start an in-place update (status write first when present, then the pod patch).
    UpdateInPlace {
        /// Pod name.
        name: String,
        /// Target revision name.
        revision: String,
        /// The writes.
        update: Box<InPlaceWrites>,
    },
    /// ReCreate update: label the pod `apps.kruise.io/specified-delete: "true"`; the Scale
    /// step deletes it later within the budget.
    MarkSpecifiedDelete {
        /// Pod name.
        name: String,
        /// Target revision name (for the event).
        revision: String,
    },
    /// Resize the pod's containers through the `resize` subresource: the resources of an
    /// in-place update's next priority batch, sent before that batch's [`Action::PatchPod`]
    /// (were the patch first and the resize then refused, the state would show the batch
    /// done and the resources would never change).
    ResizePod {
        /// Pod name.
        name: String,
        /// Strategic-merge patch for the `resize` subresource.
        resize: Value,
    },
    /// Patch the pod (in-place refresh: grace ended, next batch, or back-filled
    /// `pod-template-hash`).
    PatchPod {
        /// Pod name.
        name: String,
        /// Strategic-merge patch.
        patch: Value,
    },
    /// Write the pod status (`InPlaceUpdateReady=True` after an update or on a new pod).
    UpdatePodStatus {
        /// Pod name.
        name: String,
        /// The status.
        status: Box<PodStatus>,
    },
    /// Remove the CloneSet's owner reference from a pod that no longer matches the selector.
    ReleasePod {
        /// Pod name.
        name: String,
    },
    /// Delete a PVC that belongs to no pod (PVC reuse disabled).
    DeletePvc {
        /// PVC name.
        name: String,
    },
    /// Move a PVC's owner reference from the CloneSet to the (inactive) pod with its instance id.
    ReassignPvcToPod {
        /// PVC name.
        pvc: String,
        /// Pod name.
        pod: String,
    },
    /// Set `spec.scaleStrategy.podsToDelete` to this list (names of pods that are gone removed).
    TruncatePodsToDelete {
        /// The remaining names.
        pods_to_delete: Vec<String>,
    },
    /// Delete an old ControllerRevision (history limit).
    DeleteRevision {
        /// Revision name.
        name: String,
    },
}

impl Action {
    /// OpenKruise's event for this action when it succeeds.
    pub fn success_event(&self) -> Option<EventRecord> {
        match self {
            Action::CreatePod { pod, .. } => Some(EventRecord::normal(
                "SuccessfulCreate",
                format!(
                    "succeed to create pod {}",
                    pod.metadata.name.as_deref().unwrap_or_default()
                ),
            )),
            Action::DeletePod { name, .. } => Some(EventRecord::normal(
                "SuccessfulDelete",
                format!("succeed to delete pod {name}"),
            )),
            Action::UpdateInPlace { name, revision, .. } => Some(EventRecord::normal(
                "SuccessfulUpdatePodInPlace",
                format!("successfully update pod {name} in-place(revision {revision})"),
            )),
            Action::MarkSpecifiedDelete { name, revision } => Some(EventRecord::normal(
                "SuccessfulUpdatePodReCreate",
                format!(
                    "successfully patch pod {name} specified-delete for update(revision {revision})"
                ),
            )),
            _ => None,
        }
    }

    /// The pod this action writes, if any.
    pub fn pod_name(&self) -> Option<&str> {
        match self {
            Action::CreatePod { pod, .. } => pod.metadata.name.as_deref(),
            Action::DeletePod { name, .. }
            | Action::SetLifecycleState { name, .. }
            | Action::UpdateInPlace { name, .. }
            | Action::MarkSpecifiedDelete { name, .. }
            | Action::ResizePod { name, .. }
            | Action::PatchPod { name, .. }
            | Action::UpdatePodStatus { name, .. }
            | Action::ReleasePod { name } => Some(name),
            Action::ReassignPvcToPod { pod, .. } => Some(pod),
            _ => None,
        }
    }
}

pub use kruise_core::plan::EventRecord;

/// The planner's answer: the kit's plan of CloneSet actions and status.
pub type Plan = kruise_core::plan::Plan<Action, CloneSetStatus, PlanNotes>;

/// What only the CloneSet shell (and the plan's tests) read besides.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PlanNotes {
    /// Whether the plan's status differs from the CloneSet's current status.
    pub status_changed: bool,
    /// Set when the scale expectations had expired (how long they were waited for).
    pub expectations_expired: Option<SignedDuration>,
}

/// Why the planner refused or stopped (reported as `FailedScale` / `FailedUpdate`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// `InPlaceOnly` but the change cannot be made in place.
    #[error("find Pod {0} update strategy is InPlaceOnly but can not update in-place")]
    InPlaceOnlyCannotUpdate(String),
    /// The lifecycle state forbids an in-place update.
    #[error("not allowed to in-place update pod {pod} in state {state}")]
    NotAllowedState {
        /// Pod name.
        pod: String,
        /// State label value.
        state: String,
    },
    /// An annotation written by a previous update does not parse.
    #[error("pod {pod}: {message}")]
    InvalidPodAnnotation {
        /// Pod name.
        pod: String,
        /// Detail.
        message: String,
    },
}

/// Plans one reconcile of a CloneSet.
pub fn plan(input: &PlanInput<'_>) -> Plan {
    let cs = input.cloneset;
    let mut out = Plan::default();
    let uid = cs.metadata.uid.as_deref().unwrap_or_default();
    let deleting = cs.metadata.deletion_timestamp.is_some();
    let selector = cs.spec.selector.clone().unwrap_or_default();

    // Claim: only pods controlled by us; release those that stopped matching the selector.
    let mut owned: Vec<&CachedPod> = Vec::new();
    for pod in input.pods.iter().map(|p| &**p) {
        let matches = kruise_core::pods::selector::selector_matches_by(&selector, |k| pod.label(k))
            .unwrap_or(false);
        match kruise_core::pods::claim(pod.meta(), uid, matches, deleting) {
            kruise_core::pods::ClaimDecision::Owned => owned.push(pod),
            kruise_core::pods::ClaimDecision::Release => {
                if kruise_core::pods::is_pod_active(pod) {
                    out.actions.push(Action::ReleasePod {
                        name: pods::name_of(pod).to_string(),
                    });
                }
            }
            kruise_core::pods::ClaimDecision::Ignore => {}
        }
    }
    let active: Vec<&CachedPod> = owned
        .iter()
        .copied()
        .filter(kruise_core::pods::is_pod_active)
        .collect();

    let mut status = cs.status.clone().unwrap_or_default();
    status.update_revision = pods::name_of_revision(input.update_revision).to_string();
    status.current_revision = pods::name_of_revision(input.current_revision).to_string();

    match input.scale_expectations {
        Satisfaction::Satisfied => status::clear_expectations_expired(&mut status, input.now),
        Satisfaction::Pending { remaining, .. } => {
            // OpenKruise stops before touching anything while creations/deletions are in
            // flight, and looks again when the wait would time out.
            out.status = cs.status.clone().unwrap_or_default();
            out.requeue_within(*remaining);
            return out;
        }
        Satisfaction::Expired { waited } => {
            // Deliberate difference: OpenKruise (without ForceDeleteTimeoutExpectationGate)
            // stays blocked; we report and act on the observed state.
            out.extra.expectations_expired = Some(*waited);
            let message = format!(
                "scale expectations not satisfied after {}s; acting on the observed pods",
                waited.as_secs()
            );
            status::set_expectations_expired(&mut status, &message, input.now);
            out.events
                .push(EventRecord::warning("ScaleExpectationsExpired", message));
        }
    }

    if !deleting {
        // PVC clean-up when reuse is off.
        let pvcs = if cs.spec.scale_strategy.enable_pvc_reuse {
            input.pvcs.to_vec()
        } else {
            pods::cleanup_pvcs(input.pvcs, &owned, &active, &mut out.actions)
        };
        let mut errors = Vec::new();
        let scaled = scale::scale(input, &active, &pvcs, &mut out, &mut errors);
        if let Some(e) = errors.first() {
            status::set_failed_condition(
                &mut status,
                crate::api::condition::FAILED_SCALE,
                e,
                input.now,
            );
        }
        if !scaled {
            let mut update_errors = Vec::new();
            update::update(input, &active, &mut out, &mut update_errors);
            if let Some(e) = update_errors.first() {
                status::set_failed_condition(
                    &mut status,
                    crate::api::condition::FAILED_UPDATE,
                    e,
                    input.now,
                );
            }
        }
    }

    let requeue = calculate_status(cs, &active, &mut status, input.now);
    if let Some(d) = requeue {
        out.requeue_within(d);
    }
    out.extra.status_changed = cs.status.as_ref() != Some(&status);
    out.status = status;

    // podsToDelete keeps only names of pods that still exist.
    let ptd = &cs.spec.scale_strategy.pods_to_delete;
    if !ptd.is_empty() {
        let remaining: Vec<String> = ptd
            .iter()
            .filter(|n| owned.iter().any(|p| pods::name_of(p) == n.as_str()))
            .cloned()
            .collect();
        if remaining.len() != ptd.len() {
            out.actions.push(Action::TruncatePodsToDelete {
                pods_to_delete: remaining,
            });
        }
    }

    // History.
    let mut history: Vec<ControllerRevision> = input.revisions.to_vec();
    kruise_core::revision::sort_revisions(&mut history);
    let pod_labels = owned
        .iter()
        .filter_map(|p| kruise_core::pods::pod_revision(p))
        .map(str::to_string)
        .collect();
    for name in kruise_core::revision::revisions_to_truncate(
        &history,
        cs.spec
            .revision_history_limit
            .unwrap_or(crate::api::DEFAULT_REVISION_HISTORY_LIMIT),
        &out.status.current_revision,
        &out.status.update_revision,
        &pod_labels,
    ) {
        out.actions.push(Action::DeleteRevision { name });
    }
    fold_lifecycle_statuses(&mut out.actions, input.pods, input.now);
    out
}

/// A status write and a lifecycle-state change planned for the same pod become one write
/// (the status subresource carries both), with the lifecycle's not-ready key change applied
/// at `now` on top of the planned conditions.
fn fold_lifecycle_statuses(actions: &mut Vec<Action>, pods: &[Arc<CachedPod>], now: Timestamp) {
    let lifecycle: std::collections::BTreeSet<String> = actions
        .iter()
        .filter_map(|a| match a {
            Action::SetLifecycleState { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect();
    if lifecycle.is_empty() {
        return;
    }
    let mut planned: std::collections::HashMap<String, Box<PodStatus>> =
        std::collections::HashMap::new();
    actions.retain(|a| match a {
        Action::UpdatePodStatus { name, status } if lifecycle.contains(name) => {
            planned.insert(name.clone(), status.clone());
            false
        }
        _ => true,
    });
    // The pods whose not-ready key changes, by name (one pass over the pods).
    let by_name: std::collections::HashMap<&str, &CachedPod> = pods
        .iter()
        .map(|p| (p.name(), &**p))
        .filter(|(n, _)| lifecycle.contains(*n))
        .collect();
    for action in actions.iter_mut() {
        let Action::SetLifecycleState {
            name,
            not_ready,
            status,
            ..
        } = action
        else {
            continue;
        };
        let mut merged = planned.remove(name.as_str());
        if let Some(change) = not_ready
            && let Some(cached) = by_name.get(name.as_str())
        {
            let mut base = cached.to_pod();
            if let Some(s) = &merged {
                kruise_core::pods::merge_conditions(
                    base.status.get_or_insert_with(Default::default),
                    s,
                );
            }
            let message = change.message();
            let next = match change {
                NotReadyChange::Add(_) => {
                    kruise_core::pods::readiness::add_not_ready_key(&base, &message, now)
                }
                NotReadyChange::Remove(_) => {
                    kruise_core::pods::readiness::remove_not_ready_key(&base, &message, now)
                }
            };
            if let Some(next) = next {
                merged = Some(Box::new(next));
            }
        }
        *status = merged;
    }
}
