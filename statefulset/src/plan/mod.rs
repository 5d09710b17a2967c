//! The pure Advanced StatefulSet planner: (set, owned pods, revisions, now, gates,
//! expectations) -> the writes to make now and the status to write. No client, no clock.
//!
//! It follows OpenKruise's `updateStatefulSet` (`pkg/controller/statefulset`):
//!
//! 1. **Ordinals.** The window starts at `ordinals.start` (gate `StatefulSetStartOrdinal`)
//!    and holds `replicas` ordinals that are not reserved (`reserveOrdinals`); owned pods
//!    outside it are condemned.
//! 2. **Refresh** every pod's in-place update (grace end, next batch,
//!    `InPlaceUpdateReady=True`) and its lifecycle state (`Updating` -> `Normal`).
//! 3. **Replicas**, ascending: a missing ordinal is created (its claims first) at the
//!    current or update revision as the partition says; a Failed/Succeeded pod is deleted
//!    (re-created next round). `OrderedReady` stops after each write and waits for each pod
//!    to be Running and available (`minReadySeconds`); `Parallel` goes on, creating at most
//!    `scaleStrategy.maxUnavailable` not-yet-available pods, and a pod stuck Terminating
//!    never holds back higher ordinals (K#2109).
//! 4. **Condemned**, descending: `OrderedReady` deletes one at a time, only healthy pods
//!    (or the first unhealthy one) and never while one terminates; `Parallel` deletes all.
//! 5. **Rolling update** (`RollingUpdate`, not `paused`, no in-place update of the update
//!    revision still unobserved — K#844): pods already unavailable for any reason count
//!    against `maxUnavailable` first (K#1480); `apps.kruise.io/specified-delete` pods are
//!    deleted first; then ordinals from the highest down to `partition` are updated in place
//!    (`InPlaceIfPossible`/`InPlaceOnly`, through `common::inplace`) or deleted for
//!    recreation (`ReCreate`), never more unavailable than the budget.
//! 6. **Status** from the observed pods, and history truncation.

mod pods;
mod revisions;
mod status;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodStatus};
use kruise_common::api::LifecycleState;
use kruise_common::api::intstr::value_from_int_or_percent;
use kruise_common::api::keys::{LIFECYCLE_STATE_KEY, LIFECYCLE_TIMESTAMP_KEY};
use kruise_common::expectations::Satisfaction;
use kruise_common::inplace::{
    CompletionCheck, InPlaceGates, InPlaceWrites, RefreshAction, UpdateRequest, begin_update,
    calculate_update_spec_for_revisions, check_update_completed, refresh,
};
use kruise_common::pods::lifecycle::{Intent, PodHookView, decide, state_patch};
use kruise_common::pods::{CachedPod, PodView as _};

use crate::api::ordinals::ReservedOrdinals;
use crate::api::v1beta1::{PodUpdatePolicy, RollingUpdateStatefulSetStrategy, StatefulSet};

pub use pods::{
    IdentityGates, claim_name, new_claims, new_pod, ordinal_of, owner_ref, pod_name, revision_name,
    template_for,
};
pub use revisions::{RevisionPlan, RevisionWrite, plan_revisions};
pub use status::calculate_status;

/// Feature gates the planner reads (OpenKruise's defaults via [`Default`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanGates {
    /// `StatefulSetStartOrdinal`: honour `ordinals.start`.
    pub start_ordinal: bool,
    /// `PodIndexLabel` (default on): the `apps.kubernetes.io/pod-index` label.
    pub pod_index_label: bool,
    /// `InPlaceUpdateEnvFromMetadata` (default on).
    pub env_from_metadata: bool,
    /// `InPlaceWorkloadVerticalScaling`.
    pub vertical_scaling: bool,
}

impl Default for PlanGates {
    fn default() -> Self {
        Self {
            start_ordinal: false,
            pod_index_label: true,
            env_from_metadata: true,
            vertical_scaling: false,
        }
    }
}

/// Everything the planner reads.
#[derive(Debug, Clone, Copy)]
pub struct PlanInput<'a> {
    /// The set (storage version, defaulted), with metadata and status.
    pub set: &'a StatefulSet,
    /// Pods from the cache (those not controlled by the set are ignored).
    pub pods: &'a [Arc<CachedPod>],
    /// The current revision (`status.currentRevision` if it exists, else the update revision).
    pub current_revision: &'a ControllerRevision,
    /// The update revision (the revision of the current template).
    pub update_revision: &'a ControllerRevision,
    /// All revisions of the set (for in-place diffs and history).
    pub revisions: &'a [ControllerRevision],
    /// Now.
    pub now: Timestamp,
    /// Feature gates.
    pub gates: PlanGates,
    /// Creates and deletes sent but not yet in the cache: while `Pending`, nothing is
    /// written (a stale cache must not cause a double create or delete).
    pub scale_expectations: &'a Satisfaction,
    /// In-place updates sent: pod name -> the revision it was updated to. While a pod of
    /// the update revision does not show it in the cache, the rolling update waits (K#844).
    pub update_expectations: &'a BTreeMap<String, String>,
}

/// Why a pod is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// Its ordinal left the window (scale-in, reserveOrdinals, ordinals.start).
    Condemned,
    /// It is Failed or Succeeded; it is created again next round.
    Finished,
    /// Recreated at the update revision (ReCreate, or an in-place update impossible).
    Update,
    /// It carries `apps.kruise.io/specified-delete`.
    SpecifiedDelete,
}

/// One write the controller performs; a plan holds at most one write per pod.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create the claims (those that exist are kept), then the pod.
    CreatePod {
        /// The pod.
        pod: Box<Pod>,
        /// Its claims.
        claims: Vec<PersistentVolumeClaim>,
    },
    /// Delete a pod.
    DeletePod {
        /// Pod name.
        name: String,
        /// Why.
        reason: DeleteReason,
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
    /// Strategic-merge patch of a pod (in-place refresh, lifecycle state).
    PatchPod {
        /// Pod name.
        name: String,
        /// The patch.
        patch: serde_json::Value,
    },
    /// Write a pod's status (`InPlaceUpdateReady=True`).
    UpdatePodStatus {
        /// Pod name.
        name: String,
        /// The conditions that change.
        status: Box<PodStatus>,
    },
    /// Delete an old ControllerRevision (history limit).
    DeleteRevision {
        /// Revision name.
        name: String,
    },
}

impl Action {
    /// The pod this action writes, if any.
    pub fn pod_name(&self) -> Option<&str> {
        match self {
            Action::CreatePod { pod, .. } => pod.metadata.name.as_deref(),
            Action::DeletePod { name, .. }
            | Action::UpdateInPlace { name, .. }
            | Action::PatchPod { name, .. }
            | Action::UpdatePodStatus { name, .. } => Some(name),
            Action::DeleteRevision { .. } => None,
        }
    }
}

/// An event the planner decides on (not tied to one write's outcome).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedEvent {
    /// `Normal` or `Warning`.
    pub type_: &'static str,
    /// Reason.
    pub reason: &'static str,
    /// Message.
    pub message: String,
}

/// The planner's answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// Writes, in order.
    pub actions: Vec<Action>,
    /// Events to record now.
    pub events: Vec<PlannedEvent>,
    /// The status to write.
    pub status: crate::api::StatefulSetStatus,
    /// Requeue after this (minReadySeconds and grace-period waits).
    pub requeue_after: Option<SignedDuration>,
}

/// Adds a requeue hint, keeping the smallest.
fn push_requeue(slot: &mut Option<SignedDuration>, d: SignedDuration) {
    if d <= SignedDuration::ZERO {
        return;
    }
    *slot = Some(slot.map_or(d, |cur| cur.min(d)));
}

/// A pod's facts the planner decides on.
struct Facts<'a> {
    pod: &'a CachedPod,
    terminating: bool,
    finished: bool,
    /// Running and Ready and not terminating (`isHealthy`).
    healthy: bool,
    /// Running and available for minReadySeconds, lifecycle Normal or unset.
    available: bool,
}

/// What one reconcile decides, step by step; `stop` ends the steps after the current one.
struct Planner<'a> {
    input: &'a PlanInput<'a>,
    set_name: String,
    start: i64,
    /// The window's ordinals, ascending.
    ordinals: Vec<i64>,
    by_ordinal: BTreeMap<i64, Facts<'a>>,
    min_ready: i32,
    /// Pods written by this plan (one write per pod).
    written: BTreeSet<String>,
    plan: Plan,
}

/// Plans one reconcile.
pub fn plan(input: &PlanInput<'_>) -> Plan {
    let set = input.set;
    let mut planner = Planner::new(input);
    let status = calculate_status(
        set,
        &planner.owned_pods(),
        input.update_revision,
        input.current_revision,
        input.now,
    );
    planner.plan.status = status.status;
    if let Some(d) = status.requeue_after {
        push_requeue(&mut planner.plan.requeue_after, d);
    }
    if set.metadata.deletion_timestamp.is_some() {
        return planner.plan;
    }
    if let Satisfaction::Pending { remaining, .. } = input.scale_expectations {
        push_requeue(&mut planner.plan.requeue_after, *remaining);
        return planner.plan;
    }
    let lifecycle_changed = planner.refresh();
    if planner.replicas() && planner.condemned() && !lifecycle_changed {
        planner.rolling_update();
    }
    planner.truncate_history();
    planner.plan
}

impl<'a> Planner<'a> {
    fn new(input: &'a PlanInput<'a>) -> Self {
        let set = input.set;
        let set_name = set.metadata.name.clone().unwrap_or_default();
        let uid = set.metadata.uid.clone().unwrap_or_default();
        let start = if input.gates.start_ordinal {
            set.spec
                .ordinals
                .as_ref()
                .map_or(0, |o| i64::from(o.start.max(0)))
        } else {
            0
        };
        let reserved = ReservedOrdinals::from_spec(&set.spec.reserve_ordinals);
        let replicas = i64::from(set.replicas().max(0));
        let ordinals = reserved.replica_ordinals(start, replicas);
        let min_ready = set.spec.min_ready_seconds();
        let now = input.now;
        let by_ordinal = input
            .pods
            .iter()
            .filter(|p| kruise_common::pods::is_controlled_by(p.meta(), &uid))
            .filter_map(|p| {
                let ordinal = ordinal_of(&set_name, p.name())?;
                let terminating = kruise_common::pods::is_terminating(&**p);
                let phase = p.phase();
                let running_ready = phase == "Running" && kruise_common::pods::is_pod_ready(&**p);
                let available = running_ready
                    && !terminating
                    && kruise_common::pods::is_pod_available(&**p, min_ready, now)
                    && kruise_common::pods::lifecycle::is_lifecycle_available(
                        kruise_common::pods::lifecycle_state(&**p),
                    );
                Some((
                    ordinal,
                    Facts {
                        pod: p,
                        terminating,
                        finished: phase == "Failed" || phase == "Succeeded",
                        healthy: running_ready && !terminating,
                        available,
                    },
                ))
            })
            .collect();
        Self {
            input,
            set_name,
            start,
            ordinals,
            by_ordinal,
            min_ready,
            written: BTreeSet::new(),
            plan: Plan::default(),
        }
    }

    fn owned_pods(&self) -> Vec<&'a CachedPod> {
        self.by_ordinal.values().map(|f| f.pod).collect()
    }

    fn is_parallel(&self) -> bool {
        self.input.set.spec.is_parallel()
    }

    fn push(&mut self, action: Action) {
        if let Some(name) = action.pod_name() {
            self.written.insert(name.to_string());
        }
        self.plan.actions.push(action);
    }

    fn update_revision_name(&self) -> &'a str {
        revision_name(self.input.update_revision)
    }

    fn check(&self) -> CompletionCheck<'static> {
        CompletionCheck {
            vertical_scaling: self.input.gates.vertical_scaling,
            ..Default::default()
        }
    }

    fn in_place_gates(&self) -> InPlaceGates {
        InPlaceGates {
            env_from_metadata: self.input.gates.env_from_metadata,
            vertical_scaling: self.input.gates.vertical_scaling,
        }
    }

    /// Step 2: in-place refresh and lifecycle; true when a lifecycle state changed (the
    /// rolling update then waits a round, as OpenKruise's does).
    fn refresh(&mut self) -> bool {
        let now = self.input.now;
        let check = self.check();
        let mut lifecycle_changed = false;
        let mut actions = Vec::new();
        for facts in self.by_ordinal.values() {
            let pod = facts.pod;
            let name = pod.name().to_string();
            match refresh(pod, now, &check) {
                RefreshAction::Nothing | RefreshAction::Invalid(_) => {}
                RefreshAction::WaitGrace { requeue_after } => {
                    push_requeue(&mut self.plan.requeue_after, requeue_after);
                }
                RefreshAction::Write(write) => {
                    if let Some(patch) = write.patch {
                        actions.push(Action::PatchPod { name, patch });
                        continue;
                    }
                }
                RefreshAction::SetReady(status) => {
                    let conditions = kruise_common::pods::changed_conditions(pod, &status)
                        .cloned()
                        .collect();
                    actions.push(Action::UpdatePodStatus {
                        name,
                        status: Box::new(PodStatus {
                            conditions: Some(conditions),
                            ..Default::default()
                        }),
                    });
                    continue;
                }
            }
            if let Some(patch) = self.lifecycle_refresh(pod, &check) {
                actions.push(Action::PatchPod {
                    name: pod.name().to_string(),
                    patch,
                });
                lifecycle_changed = true;
            }
        }
        for action in actions {
            self.push(action);
        }
        lifecycle_changed
    }

    /// The lifecycle part of `refreshPodState`: e.g. `Updating` -> `Normal` once the
    /// in-place update completed.
    fn lifecycle_refresh(
        &self,
        pod: &CachedPod,
        check: &CompletionCheck<'_>,
    ) -> Option<serde_json::Value> {
        let state = kruise_common::pods::lifecycle_state(pod)?;
        let view: PodHookView<'_> = pod;
        let intent = Intent::Refresh {
            // OpenKruise's StatefulSet moves PreparingNormal on without a scheduling check.
            scheduled: true,
            at_update_revision: kruise_common::pods::pod_revision(pod)
                == Some(self.update_revision_name()),
            update_completed: state == LifecycleState::Updating
                && check_update_completed(pod, check).is_ok(),
        };
        let decision = decide(
            Some(state),
            self.input.set.spec.lifecycle.as_ref(),
            view,
            intent,
        )
        .ok()?;
        let next = decision.next.filter(|n| *n != state)?;
        Some(state_patch(next, self.input.now, None))
    }

    /// Whether new pods of the `index`-th window position get the current revision
    /// (`isCurrentRevisionNeeded`).
    fn current_revision_needed(&self, position: usize, ordinal: i64) -> bool {
        let set = self.input.set;
        if set.spec.is_on_delete() {
            return false;
        }
        let Some(rolling) = &set.spec.update_strategy.rolling_update else {
            let current = set.status.as_ref().map_or(0, |s| s.current_replicas);
            return ordinal < self.start + i64::from(current);
        };
        let partition = i64::from(rolling.partition.unwrap_or(0));
        if rolling.unordered_update.is_none() {
            // Pods at window positions [0, position] all stay at the current revision.
            return i64::try_from(position).unwrap_or(i64::MAX) < partition;
        }
        let update = self.update_revision_name();
        let not_updated = self
            .by_ordinal
            .iter()
            .filter(|(o, _)| **o != ordinal && self.ordinals.binary_search(o).is_ok())
            .filter(|(_, f)| kruise_common::pods::pod_revision(f.pod) != Some(update))
            .count();
        i64::try_from(not_updated).unwrap_or(i64::MAX) < partition
    }

    fn create(&mut self, position: usize, ordinal: i64) -> bool {
        let input = self.input;
        let revision = if self.current_revision_needed(position, ordinal) {
            input.current_revision
        } else {
            input.update_revision
        };
        let Some(template) = template_for(input.set, revision, self.update_revision_name()) else {
            self.plan.events.push(PlannedEvent {
                type_: "Warning",
                reason: "FailedCreate",
                message: format!(
                    "revision {} of StatefulSet {} holds no pod template",
                    revision_name(revision),
                    self.set_name
                ),
            });
            return false;
        };
        let gates = IdentityGates {
            pod_index_label: input.gates.pod_index_label,
        };
        let pod = new_pod(
            input.set,
            &template,
            revision_name(revision),
            ordinal,
            gates,
            input.now,
        );
        self.push(Action::CreatePod {
            pod: Box::new(pod),
            claims: new_claims(input.set, ordinal),
        });
        true
    }

    /// Step 3; false when `OrderedReady` has to wait (the later steps wait with it).
    fn replicas(&mut self) -> bool {
        let parallel = self.is_parallel();
        let replicas = i32::try_from(self.ordinals.len()).unwrap_or(i32::MAX);
        // Parallel with scaleStrategy.maxUnavailable: pods not yet available (existing ones
        // first) use up the budget; creations stop at 0.
        let mut budget = self
            .input
            .set
            .spec
            .scale_strategy
            .as_ref()
            .and_then(|s| s.max_unavailable.as_ref())
            .filter(|_| parallel)
            .map(|max| {
                let allowed = value_from_int_or_percent(max, replicas, false)
                    .unwrap_or(1)
                    .max(1);
                let unavailable = self
                    .ordinals
                    .iter()
                    .filter_map(|o| self.by_ordinal.get(o))
                    .filter(|f| !f.available)
                    .count();
                i64::from(allowed) - i64::try_from(unavailable).unwrap_or(i64::MAX)
            });
        for (position, ordinal) in self.ordinals.clone().into_iter().enumerate() {
            let Some(facts) = self.by_ordinal.get(&ordinal) else {
                if budget.is_some_and(|b| b <= 0) {
                    continue;
                }
                if self.create(position, ordinal) {
                    budget = budget.map(|b| b - 1);
                }
                if !parallel {
                    return false;
                }
                continue;
            };
            let name = facts.pod.name().to_string();
            if facts.finished && !facts.terminating {
                if !self.written.contains(&name) {
                    self.push(Action::DeletePod {
                        name,
                        reason: DeleteReason::Finished,
                    });
                }
                if !parallel {
                    return false;
                }
                continue;
            }
            if parallel {
                continue;
            }
            if facts.terminating {
                return false;
            }
            if !facts.available {
                if let Some(d) =
                    kruise_common::pods::available_in(facts.pod, self.min_ready, self.input.now)
                {
                    push_requeue(&mut self.plan.requeue_after, d);
                }
                return false;
            }
        }
        true
    }

    /// Step 4; false when `OrderedReady` has to wait.
    fn condemned(&mut self) -> bool {
        let parallel = self.is_parallel();
        let in_window: BTreeSet<i64> = self.ordinals.iter().copied().collect();
        let condemned: Vec<i64> = self
            .by_ordinal
            .keys()
            .rev()
            .copied()
            .filter(|o| !in_window.contains(o))
            .collect();
        // The first unhealthy pod: in the window ascending, then condemned descending.
        let first_unhealthy = self
            .ordinals
            .iter()
            .chain(condemned.iter())
            .find(|o| self.by_ordinal.get(o).is_some_and(|f| !f.healthy))
            .copied();
        for ordinal in condemned {
            let Some(facts) = self.by_ordinal.get(&ordinal) else {
                continue;
            };
            let name = facts.pod.name().to_string();
            if facts.terminating {
                if parallel {
                    continue;
                }
                return false;
            }
            if !parallel && first_unhealthy.is_some_and(|u| u != ordinal) {
                return false;
            }
            if !self.written.contains(&name) {
                self.push(Action::DeletePod {
                    name,
                    reason: DeleteReason::Condemned,
                });
            }
            if !parallel {
                return false;
            }
        }
        true
    }

    /// Whether an in-place update of the update revision is sent but not yet in the cache.
    fn update_expectations_pending(&self) -> bool {
        let update = self.update_revision_name();
        self.input
            .update_expectations
            .iter()
            .filter(|(_, revision)| revision.as_str() == update)
            .any(|(name, revision)| {
                self.by_ordinal.values().any(|f| {
                    f.pod.name() == name
                        && kruise_common::pods::pod_revision(f.pod) != Some(revision.as_str())
                })
            })
    }

    /// Step 5.
    fn rolling_update(&mut self) {
        let set = self.input.set;
        if set.spec.is_on_delete() || self.update_expectations_pending() {
            return;
        }
        let default_rolling = RollingUpdateStatefulSetStrategy::default();
        let rolling = set
            .spec
            .update_strategy
            .rolling_update
            .as_ref()
            .unwrap_or(&default_rolling);
        if rolling.paused {
            return;
        }
        let replicas = i32::try_from(self.ordinals.len()).unwrap_or(i32::MAX);
        let max_unavailable = rolling
            .max_unavailable
            .as_ref()
            .map_or(Ok(1), |m| value_from_int_or_percent(m, replicas, false))
            .unwrap_or(1)
            .max(1);
        let max_unavailable = usize::try_from(max_unavailable).unwrap_or(usize::MAX);
        let check = self.check();
        // Every pod of the window that is not available for any reason (K#1480), pods
        // written by this plan, and ordinals still being created.
        let mut unavailable: BTreeSet<String> = BTreeSet::new();
        let mut missing = 0usize;
        for ordinal in &self.ordinals {
            match self.by_ordinal.get(ordinal) {
                None => missing += 1,
                Some(f) => {
                    let name = f.pod.name();
                    if !f.available
                        || self.written.contains(name)
                        || check_update_completed(f.pod, &check).is_err()
                    {
                        unavailable.insert(name.to_string());
                    }
                }
            }
        }
        let update = self.update_revision_name().to_string();
        let budget_left = |unavailable: &BTreeSet<String>, name: &str| {
            unavailable.len() + missing < max_unavailable || unavailable.contains(name)
        };
        // Specified-delete pods first, descending, each within the budget.
        for ordinal in self.ordinals.clone().into_iter().rev() {
            let Some(facts) = self.by_ordinal.get(&ordinal) else {
                continue;
            };
            let name = facts.pod.name().to_string();
            if facts.terminating
                || self.written.contains(&name)
                || !kruise_common::pods::is_specified_delete(facts.pod, &BTreeSet::new())
                || !budget_left(&unavailable, &name)
            {
                continue;
            }
            self.push(Action::DeletePod {
                name: name.clone(),
                reason: DeleteReason::SpecifiedDelete,
            });
            unavailable.insert(name);
        }
        let policy = rolling.policy();
        let grace = rolling
            .in_place_update_strategy
            .as_ref()
            .map_or(0, |s| s.grace_period_seconds);
        for ordinal in self.update_order(rolling, &update) {
            let Some(facts) = self.by_ordinal.get(&ordinal) else {
                continue;
            };
            let pod = facts.pod;
            let name = pod.name().to_string();
            if kruise_common::pods::pod_revision(pod) == Some(update.as_str()) {
                continue;
            }
            if !budget_left(&unavailable, &name) {
                return;
            }
            if facts.terminating || self.written.contains(&name) {
                unavailable.insert(name);
                continue;
            }
            match self.update_pod(pod, &policy, grace) {
                Ok(Some(action)) => self.push(action),
                Ok(None) => {}
                Err(event) => {
                    self.plan.events.push(event);
                    return;
                }
            }
            unavailable.insert(name);
        }
    }

    /// The ordinals to update, in order (`sortPodsToUpdate`): ordered, from the highest
    /// window position down to `partition`; unordered, updated and terminating pods first,
    /// then the rest descending; at most `replicas - partition`.
    fn update_order(&self, rolling: &RollingUpdateStatefulSetStrategy, update: &str) -> Vec<i64> {
        let partition = usize::try_from(rolling.partition.unwrap_or(0).max(0)).unwrap_or(0);
        let max_update = self.ordinals.len().saturating_sub(partition);
        if rolling.unordered_update.is_none() {
            return self
                .ordinals
                .iter()
                .rev()
                .filter(|o| usize::try_from(**o - self.start).unwrap_or(0) >= partition)
                .take(max_update)
                .copied()
                .collect();
        }
        let (first, rest): (Vec<i64>, Vec<i64>) = self.ordinals.iter().rev().partition(|o| {
            self.by_ordinal.get(o).is_some_and(|f| {
                f.terminating || kruise_common::pods::pod_revision(f.pod) == Some(update)
            })
        });
        first.into_iter().chain(rest).take(max_update).collect()
    }

    /// `inPlaceUpdatePod`, else a delete for recreation; `None` while the inPlaceUpdate hook
    /// holds the pod; `InPlaceOnly` that cannot update in place is an event and stops the
    /// update.
    fn update_pod(
        &self,
        pod: &CachedPod,
        policy: &PodUpdatePolicy,
        grace: i32,
    ) -> Result<Option<Action>, PlannedEvent> {
        let input = self.input;
        let name = pod.name().to_string();
        let target = input.update_revision;
        let target_name = revision_name(target).to_string();
        if matches!(
            policy,
            PodUpdatePolicy::InPlaceIfPossible | PodUpdatePolicy::InPlaceOnly
        ) {
            let old = input
                .revisions
                .iter()
                .chain([input.current_revision, input.update_revision])
                .find(|r| kruise_common::pods::pod_revision(pod) == Some(revision_name(r)));
            let gates = self.in_place_gates();
            let possible =
                calculate_update_spec_for_revisions(old, Some(target), gates, grace, false);
            let lifecycle = input.set.spec.lifecycle.as_ref();
            let state = kruise_common::pods::lifecycle_state(pod);
            let view: PodHookView<'_> = pod;
            let allowed = decide(state, lifecycle, view, Intent::InPlaceUpdate);
            if let (Ok(_), Some(old), Ok(decision)) = (possible, old, &allowed) {
                if !decision.proceed {
                    // The inPlaceUpdate hook is not through yet: move the state on, or wait.
                    let readd = decision
                        .readd_in_place_update_hooks
                        .then(|| lifecycle.and_then(|l| l.in_place_update.as_ref()))
                        .flatten();
                    return Ok(decision.next.map(|next| Action::PatchPod {
                        name,
                        patch: state_patch(next, input.now, readd),
                    }));
                }
                let mut extra_labels = BTreeMap::new();
                let mut extra_annotations = BTreeMap::new();
                // `Updating` only for a pod that has a lifecycle state (as OpenKruise).
                if state.is_some() {
                    extra_labels.insert(
                        LIFECYCLE_STATE_KEY.to_string(),
                        LifecycleState::Updating.as_str().to_string(),
                    );
                    extra_annotations.insert(
                        LIFECYCLE_TIMESTAMP_KEY.to_string(),
                        jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%SZ", input.now)
                            .unwrap_or_default(),
                    );
                }
                let request = UpdateRequest {
                    old_revision_data: old.data.as_ref().map(|d| d.0.clone()).unwrap_or_default(),
                    new_revision_data: target
                        .data
                        .as_ref()
                        .map(|d| d.0.clone())
                        .unwrap_or_default(),
                    revision: target_name.clone(),
                    gates,
                    grace_period_seconds: grace,
                    revision_labels: BTreeMap::from([(
                        kruise_common::api::keys::CONTROLLER_REVISION_HASH_KEY.to_string(),
                        target_name.clone(),
                    )]),
                    extra_labels,
                    extra_annotations,
                };
                if let Ok(update) = begin_update(pod, &request, input.now) {
                    return Ok(Some(Action::UpdateInPlace {
                        name,
                        revision: target_name,
                        update: Box::new(update.into_writes(pod)),
                    }));
                }
            }
            if *policy == PodUpdatePolicy::InPlaceOnly {
                return Err(PlannedEvent {
                    type_: "Warning",
                    reason: "FailedUpdatePodInPlace",
                    message: format!(
                        "failed to update pod {name} in-place(revision {target_name}): update strategy is InPlaceOnly but the change can not be made in place"
                    ),
                });
            }
        }
        Ok(Some(Action::DeletePod {
            name,
            reason: DeleteReason::Update,
        }))
    }

    /// Step 6: delete the surplus revisions no pod uses.
    fn truncate_history(&mut self) {
        let mut history = self.input.revisions.to_vec();
        kruise_common::revision::sort_revisions(&mut history);
        let in_use: BTreeSet<String> = self
            .by_ordinal
            .values()
            .filter_map(|f| kruise_common::pods::pod_revision(f.pod))
            .map(str::to_string)
            .collect();
        let limit = self
            .input
            .set
            .spec
            .revision_history_limit
            .unwrap_or(crate::api::DEFAULT_REVISION_HISTORY_LIMIT);
        let current = self.plan.status.current_revision.clone();
        let update = self.plan.status.update_revision.clone();
        for name in kruise_common::revision::revisions_to_truncate(
            &history, limit, &current, &update, &in_use,
        ) {
            self.plan.actions.push(Action::DeleteRevision { name });
        }
    }
}
