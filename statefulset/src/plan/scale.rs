//! Steps 3 and 4: the window's ordinals ascending (create, replace finished pods, wait in
//! OrderedReady), then the condemned ones descending.

use std::collections::BTreeSet;

use kruise_core::api::intstr::value_from_int_or_percent;
use kruise_core::pods::PodView as _;

use super::{
    Action, DeleteReason, EventRecord, IdentityGates, MAX_CREATIONS_PER_PLAN, Planner, new_pod,
    pod_name, revision_name, template_for,
};

/// How soon a pod waiting for a stale claim's deletion is looked at again.
const STALE_CLAIM_REQUEUE: jiff::SignedDuration = jiff::SignedDuration::from_secs(1);

impl Planner<'_> {
    /// Whether a new pod at window `position` (0-based, reserved ordinals skipped) gets the
    /// current revision (`isCurrentRevisionNeeded`).
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
            .filter(|(_, f)| kruise_core::pods::pod_revision(f.pod) != Some(update))
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
            self.plan.events.push(EventRecord::warning(
                "FailedCreate",
                format!(
                    "revision {} of StatefulSet {} holds no pod template",
                    revision_name(revision),
                    self.set_name
                ),
            ));
            return false;
        };
        let gates = IdentityGates {
            pod_index_label: input.gates.pod_index_label,
        };
        let mut pod = new_pod(
            input.set,
            &template,
            revision_name(revision),
            ordinal,
            gates,
            input.now,
        );
        self.set_initial_lifecycle(&mut pod);
        self.push(Action::CreatePod {
            pod: Box::new(pod),
            claims: self.claims_for_new_pod(ordinal),
        });
        self.creations += 1;
        true
    }

    /// Step 3; false when `OrderedReady` has to wait (the later steps wait with it).
    pub(super) fn replicas(&mut self) -> bool {
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
                if self
                    .occupied
                    .contains(pod_name(&self.set_name, ordinal).as_str())
                {
                    // Held by a pod that is not ours (released): wait for it to go.
                    if !parallel {
                        return false;
                    }
                    continue;
                }
                if budget.is_some_and(|b| b <= 0) || self.creations >= MAX_CREATIONS_PER_PLAN {
                    continue;
                }
                if self.has_stale_claim(ordinal) {
                    // No more work this round (OpenKruise's `PodClaimIsStale`); the claim's
                    // deletion wakes the set, and the requeue covers a missed event.
                    self.plan.requeue_within(STALE_CLAIM_REQUEUE);
                    return false;
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
            let (pod, finished, terminating) = (facts.pod, facts.finished, facts.terminating);
            if !finished && !terminating {
                self.recreate_missing_claims(ordinal, pod);
                self.retain_claims(ordinal, pod, true);
            }
            let Some(facts) = self.by_ordinal.get(&ordinal) else {
                continue;
            };
            if facts.finished && !facts.terminating {
                if !self.written.contains(&name)
                    && let Some(action) = self.delete_action(pod, DeleteReason::Finished)
                {
                    self.push(action);
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
                    kruise_core::pods::available_in(facts.pod, self.min_ready, self.input.now)
                {
                    self.plan.requeue_within(d);
                }
                return false;
            }
        }
        true
    }

    /// Step 4; false when `OrderedReady` has to wait.
    pub(super) fn condemned(&mut self) -> bool {
        let parallel = self.is_parallel();
        let in_window: BTreeSet<i64> = self.ordinals.iter().copied().collect();
        let condemned: Vec<i64> = self
            .by_ordinal
            .keys()
            .rev()
            .copied()
            .filter(|o| !in_window.contains(o))
            .collect();
        // Claims of every condemned pod get their owners first, so each goes (or stays)
        // with its pod as the retention policy says.
        for ordinal in &condemned {
            if let Some(pod) = self.by_ordinal.get(ordinal).map(|f| f.pod) {
                self.retain_claims(*ordinal, pod, false);
            }
        }
        // The first unhealthy pod: the lowest ordinal of every unhealthy pod, in the window
        // or condemned (OpenKruise's firstUnhealthyPod); the only not-yet-available pod
        // `OrderedReady` may delete.
        let first_unhealthy = self
            .by_ordinal
            .iter()
            .find(|(_, f)| !f.healthy)
            .map(|(ordinal, _)| *ordinal);
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
            // Available as OpenKruise's isRunningAndAvailable has it: a pod in a lifecycle
            // hook (PreparingDelete) still goes.
            let available = facts.healthy
                && kruise_core::pods::is_pod_available(facts.pod, self.min_ready, self.input.now);
            if !parallel && !available && first_unhealthy != Some(ordinal) {
                if let Some(d) =
                    kruise_core::pods::available_in(facts.pod, self.min_ready, self.input.now)
                {
                    self.plan.requeue_within(d);
                }
                return false;
            }
            if !self.written.contains(&name)
                && let Some(action) = self.delete_action(facts.pod, DeleteReason::Condemned)
            {
                self.push(action);
            }
            if !parallel {
                return false;
            }
        }
        true
    }
}
