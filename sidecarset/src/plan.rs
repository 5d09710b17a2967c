//! The pure upgrade planner of the SidecarSet controller: which already-injected pods
//! get their sidecar images upgraded in place now, and the status counts. The
//! controller supplies, per matched pod, the facts it read from the pod
//! ([`PodUpgradeState`]); the planner applies `updateStrategy` as OpenKruise does:
//!
//! 1. nothing under `type: NotUpdate` or `paused: true`;
//! 2. candidates are pods not at the SidecarSet's hash, selected by
//!    `updateStrategy.selector` (the canary), upgradable in place (only images
//!    changed: equal hash-without-image) and consistent (no upgrade in flight);
//! 3. they are ordered as active pods (unscheduled, pending and not-ready first), then
//!    by `priorityStrategy`, then spread by `scatterStrategy`;
//! 4. `partition` pods of the candidates are left at the old version;
//! 5. `maxUnavailable` bounds the updated pods that are not yet consistent and ready
//!    together with the ready candidates taken now; not-ready candidates cost nothing.
//!
//! Percent values round so a rollout always progresses ([`rollout_budget`]): 5% of 5
//! pods is 1, where OpenKruise's round-down would give 0 and stall.

use k8s_openapi::api::core::v1::Pod;
use kruise_common::pods::order::update_order;
use kruise_common::pods::selector::{SelectorError, selector_matches};

use crate::api::rollout::{BudgetError, rollout_budget};
use crate::api::{SidecarSetUpdateStrategy, SidecarSetUpdateStrategyType};

/// What the controller knows about one matched pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PodUpgradeState {
    /// The pod's `kruise.io/sidecarset-hash` entry equals the SidecarSet's hash.
    pub updated: bool,
    /// Only sidecar images differ from the SidecarSet (equal hash-without-image), so
    /// an in-place upgrade can bring the pod up to date.
    pub upgradable: bool,
    /// The pod's status agrees with its spec: no sidecar upgrade still in flight.
    pub consistent: bool,
    /// The pod is Ready (and running).
    pub ready: bool,
}

/// Why no plan could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("updateStrategy.selector: {0}")]
    Selector(#[from] SelectorError),
    #[error(transparent)]
    Budget(#[from] BudgetError),
}

/// The next step of a rollout.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpgradePlan {
    /// Indexes (into the pods given) to upgrade now, in order.
    pub upgrade: Vec<usize>,
    /// Selected pods behind the SidecarSet that cannot be upgraded in place (fields
    /// other than images changed): the controller reports them with the
    /// `SidecarSetUpgradable=False` condition; they get the change when recreated.
    pub not_upgradable: Vec<usize>,
    /// Every matched pod is at the SidecarSet's hash.
    pub done: bool,
}

/// The status counts of the matched pods.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodCounts {
    pub matched: i32,
    pub updated: i32,
    pub ready: i32,
    pub updated_ready: i32,
}

/// The counts `status` reports: ready means consistent and Ready.
pub fn count(states: &[PodUpgradeState]) -> PodCounts {
    let mut c = PodCounts::default();
    for s in states {
        let ready = s.consistent && s.ready;
        c.matched += 1;
        c.updated += i32::from(s.updated);
        c.ready += i32::from(ready);
        c.updated_ready += i32::from(s.updated && ready);
    }
    c
}

/// Plans the next in-place upgrades for the matched `pods` (with `states` in the same
/// order).
pub fn next_upgrades(
    strategy: &SidecarSetUpdateStrategy,
    pods: &[Pod],
    states: &[PodUpgradeState],
) -> Result<UpgradePlan, PlanError> {
    let total = pods.len().min(states.len());
    let done = states.iter().take(total).all(|s| s.updated);
    let mut plan = UpgradePlan {
        done,
        ..Default::default()
    };
    if done || strategy.paused || strategy.type_ == Some(SidecarSetUpdateStrategyType::NotUpdate) {
        return Ok(plan);
    }
    let mut candidates = Vec::new();
    for (i, (pod, s)) in pods.iter().zip(states).enumerate() {
        if s.updated {
            continue;
        }
        let selected = match &strategy.selector {
            None => true,
            Some(sel) => selector_matches(
                sel,
                pod.metadata.labels.as_ref().unwrap_or(&Default::default()),
            )?,
        };
        if !selected {
            continue;
        }
        if !s.upgradable {
            plan.not_upgradable.push(i);
        } else if s.consistent {
            candidates.push(i);
        }
    }
    let budget = rollout_budget(
        strategy.partition.as_ref(),
        strategy.max_unavailable.as_ref(),
        i32::try_from(total).unwrap_or(i32::MAX),
    )?;
    let ordered = update_order(
        pods,
        &candidates,
        strategy.priority_strategy.as_ref(),
        &strategy.scatter_strategy,
    );
    let keep = usize::try_from(budget.partition).unwrap_or(0);
    let allowed = ordered.len().saturating_sub(keep);
    let mut unavailable = states
        .iter()
        .take(total)
        .filter(|s| s.updated && !(s.consistent && s.ready))
        .count();
    let max_unavailable = usize::try_from(budget.max_unavailable).unwrap_or(1);
    for &i in ordered.iter().take(allowed) {
        if !states[i].ready {
            // Already unavailable: upgrading it takes nothing from the budget.
            plan.upgrade.push(i);
            continue;
        }
        if unavailable >= max_unavailable {
            break;
        }
        unavailable += 1;
        plan.upgrade.push(i);
    }
    Ok(plan)
}

#[cfg(test)]
mod tests;
