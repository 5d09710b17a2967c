//! Steps 2 and 5: refreshing in-place updates and lifecycle states, then the rolling
//! update within maxUnavailable down to the partition.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::PodStatus;
use kruise_core::api::LifecycleState;
use kruise_core::api::intstr::value_from_int_or_percent;
use kruise_core::inplace::{
    CompletionCheck, RefreshAction, UpdateRequest, begin_update,
    calculate_update_spec_for_revisions, check_update_completed, refresh,
};
use kruise_core::pods::lifecycle::{Intent, NotReadyChange, PodHookView, decide, state_patch};
use kruise_core::pods::{CachedPod, PodView};

use super::{Action, DeleteReason, EventRecord, MAX_POD_WRITES_PER_PLAN, Planner, revision_name};
use crate::api::v1beta1::{PodUpdatePolicy, RollingUpdateStatefulSetStrategy};

impl Planner<'_> {
    /// Step 2: in-place refresh and lifecycle; true when the rolling update waits a round:
    /// a lifecycle state changed (as OpenKruise's does), or more pods need a refresh write
    /// than one plan makes ([`MAX_POD_WRITES_PER_PLAN`]; the rest get theirs first).
    pub(super) fn refresh(&mut self) -> bool {
        let now = self.input.now;
        let check = self.check();
        let mut update_waits = false;
        let mut actions = Vec::new();
        for facts in self.by_ordinal.values() {
            if actions.len() >= MAX_POD_WRITES_PER_PLAN {
                update_waits = true;
                break;
            }
            let pod = facts.pod;
            let name = pod.name().to_string();
            if self.written.contains(&name) {
                // Adopted this round: that is its one write.
                continue;
            }
            match refresh(pod, now, &check) {
                RefreshAction::Nothing | RefreshAction::Invalid(_) => {}
                RefreshAction::WaitGrace { requeue_after } => {
                    self.plan.requeue_within(requeue_after);
                }
                RefreshAction::Write(write) => {
                    if let Some(resize) = write.resize_patch {
                        actions.push(Action::ResizePod {
                            name: name.clone(),
                            resize,
                        });
                    }
                    if let Some(patch) = write.patch {
                        actions.push(Action::PatchPod { name, patch });
                        continue;
                    }
                }
                RefreshAction::SetReady(status) => {
                    let mut conditions: Vec<_> =
                        kruise_core::pods::changed_conditions(pod, &status)
                            .cloned()
                            .collect();
                    // The lifecycle change the completed update allows (Updating -> Normal)
                    // travels in the same status write: an in-place update costs 3 writes.
                    let change = self.lifecycle_refresh(pod, &check);
                    update_waits |= change.is_some();
                    let (metadata, not_ready) = change.unzip();
                    if let Some(marked) = not_ready
                        .flatten()
                        .and_then(|c| c.apply_to(pod, self.input.now))
                    {
                        conditions
                            .extend(kruise_core::pods::changed_conditions(pod, &marked).cloned());
                    }
                    actions.push(Action::UpdatePodStatus {
                        name,
                        status: Box::new(PodStatus {
                            conditions: Some(conditions),
                            ..Default::default()
                        }),
                        metadata,
                    });
                    continue;
                }
            }
            if let Some((patch, not_ready)) = self.lifecycle_refresh(pod, &check) {
                actions.push(self.lifecycle_write(pod, patch, not_ready.as_ref()));
                update_waits = true;
            }
        }
        for action in actions {
            self.push(action);
        }
        update_waits
    }

    /// The lifecycle part of `refreshPodState`: e.g. `Updating` -> `Normal` once the
    /// in-place update completed, `PreparingNormal` -> `Normal` once the `preNormal` hook is
    /// all on; the state patch and the `KruisePodReady` change it brings.
    fn lifecycle_refresh(
        &self,
        pod: &CachedPod,
        check: &CompletionCheck<'_>,
    ) -> Option<(serde_json::Value, Option<NotReadyChange>)> {
        let state = kruise_core::pods::lifecycle_state(pod)?;
        let view: PodHookView<'_> = pod;
        let intent = Intent::Refresh {
            // OpenKruise's StatefulSet moves PreparingNormal on without a scheduling check.
            scheduled: true,
            at_update_revision: kruise_core::pods::pod_revision(pod)
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
        Some((state_patch(next, self.input.now, None), decision.not_ready))
    }

    /// Whether this plan writes as many existing pods as one plan may
    /// ([`MAX_POD_WRITES_PER_PLAN`]); the rolling update goes on in the next reconcile.
    fn pod_writes_full(&self) -> bool {
        self.written.len().saturating_sub(self.creations) >= MAX_POD_WRITES_PER_PLAN
    }

    /// Whether an in-place update of the update revision is sent but not yet in the cache
    /// (see [`keep_unseen_updates`]).
    fn update_expectations_pending(&self) -> bool {
        let update = self.update_revision_name();
        self.input
            .update_expectations
            .iter()
            .filter(|(_, revision)| revision.as_str() == update)
            .any(|(name, revision)| {
                self.by_ordinal
                    .values()
                    .any(|f| is_unseen_update(f.pod, name, revision))
            })
    }

    /// Step 5.
    pub(super) fn rolling_update(&mut self) {
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
        let resize = self.resizes_claims();
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
                        || (resize && !self.claims_ready(*ordinal))
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
                || !kruise_core::pods::is_specified_delete(facts.pod, &BTreeSet::new())
                || !budget_left(&unavailable, &name)
                || self.pod_writes_full()
            {
                continue;
            }
            if let Some(action) = self.delete_action(facts.pod, DeleteReason::SpecifiedDelete) {
                self.push(action);
            }
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
            let terminating = facts.terminating;
            let name = pod.name().to_string();
            let claims_match = !resize || self.claims_compatible(ordinal);
            let updated = kruise_core::pods::pod_revision(pod) == Some(update.as_str());
            if updated && claims_match {
                continue;
            }
            if !budget_left(&unavailable, &name) || self.pod_writes_full() {
                return;
            }
            if terminating || self.written.contains(&name) {
                unavailable.insert(name);
                continue;
            }
            if resize {
                // The claims first (OpenKruise's `TryPatchPVC`), then wait for them.
                if !claims_match {
                    match self.expand_claims(ordinal, &name) {
                        Ok(actions) => {
                            for action in actions {
                                self.push(action);
                            }
                        }
                        Err(event) => {
                            self.plan.events.push(event);
                            return;
                        }
                    }
                }
                if !claims_match || !self.claims_expanded(ordinal) {
                    unavailable.insert(name);
                    continue;
                }
                if updated {
                    continue;
                }
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
    /// then the rest by `priorityStrategy` (weights, or order keys) else descending; at most
    /// `replicas - partition`.
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
                f.terminating || kruise_core::pods::pod_revision(f.pod) == Some(update)
            })
        });
        // The pods still to update in `priorityStrategy` order (stable: equal priorities
        // stay descending); ordinals without a pod last.
        let (existing, missing): (Vec<i64>, Vec<i64>) = rest
            .into_iter()
            .partition(|o| self.by_ordinal.contains_key(o));
        let rest = match rolling
            .unordered_update
            .as_ref()
            .and_then(|u| u.priority_strategy.as_ref())
        {
            Some(strategy) => {
                let pods: Vec<&CachedPod> = existing
                    .iter()
                    .filter_map(|o| self.by_ordinal.get(o).map(|f| f.pod))
                    .collect();
                kruise_core::pods::priority::priority_sort(
                    strategy,
                    &pods,
                    (0..pods.len()).collect(),
                )
                .into_iter()
                .filter_map(|i| existing.get(i).copied())
                .collect()
            }
            None => existing,
        };
        first
            .into_iter()
            .chain(rest)
            .chain(missing)
            .take(max_update)
            .collect()
    }

    /// `inPlaceUpdatePod`, else a delete for recreation; `None` while the inPlaceUpdate hook
    /// holds the pod; `InPlaceOnly` that cannot update in place is an event and stops the
    /// update.
    fn update_pod(
        &self,
        pod: &CachedPod,
        policy: &PodUpdatePolicy,
        grace: i32,
    ) -> Result<Option<Action>, EventRecord> {
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
                .find(|r| kruise_core::pods::pod_revision(pod) == Some(revision_name(r)));
            let gates = self.in_place_gates();
            let possible =
                calculate_update_spec_for_revisions(old, Some(target), gates, grace, false);
            let lifecycle = input.set.spec.lifecycle.as_ref();
            let state = kruise_core::pods::lifecycle_state(pod);
            let view: PodHookView<'_> = pod;
            let allowed = decide(state, lifecycle, view, Intent::InPlaceUpdate);
            if let (Ok(_), Some(old), Ok(decision)) = (possible, old, &allowed) {
                if !decision.proceed {
                    // The inPlaceUpdate hook is not through yet: move the state on, or wait.
                    let readd = decision
                        .readd_in_place_update_hooks
                        .then(|| lifecycle.and_then(|l| l.in_place_update.as_ref()))
                        .flatten();
                    return Ok(decision.next.map(|next| {
                        self.lifecycle_write(
                            pod,
                            state_patch(next, input.now, readd),
                            decision.not_ready.as_ref(),
                        )
                    }));
                }
                let mut request = UpdateRequest {
                    gates,
                    grace_period_seconds: grace,
                    revision_labels: BTreeMap::from([(
                        kruise_core::api::keys::CONTROLLER_REVISION_HASH_KEY.to_string(),
                        target_name.clone(),
                    )]),
                    ..UpdateRequest::between(old, target)
                };
                // `Updating` only for a pod that has a lifecycle state (as OpenKruise).
                if state.is_some() {
                    request.mark_updating(input.now);
                }
                if let Ok(update) = begin_update(pod, &request, input.now) {
                    return Ok(Some(Action::UpdateInPlace {
                        name,
                        revision: target_name,
                        update: Box::new(update.into_writes(pod)),
                    }));
                }
            }
            if *policy == PodUpdatePolicy::InPlaceOnly {
                return Err(EventRecord::warning(
                    "FailedUpdatePodInPlace",
                    format!(
                        "failed to update pod {name} in-place(revision {target_name}): update strategy is InPlaceOnly but the change can not be made in place"
                    ),
                ));
            }
        }
        Ok(self.delete_action(pod, DeleteReason::Update))
    }
}

/// Keeps the in-place updates sent (pod name -> revision) that the cache does not show yet:
/// one whose pod carries its revision is done, and one whose pod is gone went with it (a pod
/// recreated under the name starts afresh). Run before every plan, so a pod created again
/// never inherits the update sent to the one before it.
pub fn keep_unseen_updates<P: PodView>(sent: &mut BTreeMap<String, String>, pods: &[Arc<P>]) {
    sent.retain(|name, revision| pods.iter().any(|p| is_unseen_update(&**p, name, revision)));
}

/// Whether `pod` is the pod named `name` and does not carry `revision` yet.
fn is_unseen_update<P: PodView + ?Sized>(pod: &P, name: &str, revision: &str) -> bool {
    pod.name() == name && kruise_core::pods::pod_revision(pod) != Some(revision)
}
