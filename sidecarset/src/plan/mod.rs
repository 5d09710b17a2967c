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
//!
//! [`plan`] is the controller's whole decision, as every family's planner makes it:
//! `plan(&PlanInput) -> Plan { actions, status, events, requeue_after }`, time an input.

pub mod revision;
pub mod upgrade;

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use kruise_core::plan::{EventRecord, Lane, Scheduled};
use kruise_core::pods::order::update_order;
use kruise_core::pods::selector::{SelectorError, selector_matches};

use crate::api::rollout::{BudgetError, rollout_budget};
use crate::api::v1beta1::{SidecarSet, SidecarSetStatus};
use crate::api::{SidecarSetUpdateStrategy, SidecarSetUpdateStrategyType};
use upgrade::{
    PodUpgradeState, SetHashes, UpgradeError, hot_upgrade_reset_due, pod_facts, reset_hot_upgrade,
    upgradable_condition, upgrade_pod,
};

/// Requeue while a pod write is not yet in the cache (OpenKruise: 1s).
pub const IN_FLIGHT_REQUEUE: Duration = Duration::from_secs(1);

/// Why no plan could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("updateStrategy.selector: {0}")]
    Selector(#[from] SelectorError),
    #[error(transparent)]
    Budget(#[from] BudgetError),
}

/// Why [`plan`] could not decide.
#[derive(Debug, thiserror::Error)]
pub enum PlanFailure {
    /// The update strategy does not apply.
    #[error(transparent)]
    Strategy(#[from] PlanError),
    /// A pod write could not be built.
    #[error(transparent)]
    Upgrade(#[from] UpgradeError),
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

/// What the controller observed, for [`plan`].
#[derive(Clone, Copy, Debug)]
pub struct PlanInput<'a> {
    /// The SidecarSet, defaulted.
    pub set: &'a SidecarSet,
    /// Its hashes.
    pub hashes: &'a SetHashes,
    /// The pods it manages, sorted by namespace and name.
    pub pods: &'a [Pod],
    /// The name of its latest ControllerRevision.
    pub latest_revision: &'a str,
    /// Its `status.collisionCount` after the revision was registered.
    pub collision_count: i32,
    /// Whether the cache shows every pod write this controller sent.
    pub writes_observed: bool,
    /// Now.
    pub now: Timestamp,
}

/// One pod write of a plan. `pod` indexes [`PlanInput::pods`]; `key` is its
/// `namespace/name`.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// A hot upgrade's new container took over: reset the old one to the empty image.
    ResetHotUpgrade {
        pod: usize,
        key: String,
        to: Box<Pod>,
    },
    /// Record the set's verdict in the pod's `SidecarSetUpgradable` condition.
    SetUpgradable {
        pod: usize,
        key: String,
        condition: Box<PodCondition>,
    },
    /// Upgrade the pod's sidecars in place.
    Upgrade {
        pod: usize,
        key: String,
        to: Box<Pod>,
    },
}

impl Scheduled for Action {
    fn lane(&self) -> Lane<'_> {
        match self {
            Action::ResetHotUpgrade { key, .. }
            | Action::SetUpgradable { key, .. }
            | Action::Upgrade { key, .. } => Lane::Group(key),
        }
    }
}

/// The controller's next step: the kit's plan of pod writes and SidecarSet status.
pub type Plan = kruise_core::plan::Plan<Action, SidecarSetStatus>;

fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

/// The status, then — once the cache shows this controller's earlier writes — the hot
/// upgrade resets due and the next in-place upgrades with their `SidecarSetUpgradable`
/// conditions.
pub fn plan(input: &PlanInput<'_>) -> Result<Plan, PlanFailure> {
    let facts: Vec<_> = input
        .pods
        .iter()
        .map(|p| pod_facts(p, input.set, input.hashes))
        .collect();
    let counts = count(&facts.iter().map(|f| f.status).collect::<Vec<_>>());
    let status = SidecarSetStatus {
        observed_generation: input.set.metadata.generation.unwrap_or(0),
        matched_pods: counts.matched,
        updated_pods: counts.updated,
        ready_pods: counts.ready,
        updated_ready_pods: counts.updated_ready,
        latest_revision: input.latest_revision.to_string(),
        collision_count: Some(input.collision_count),
    };
    // Pod writes name the latest revision from the status.
    let mut set = input.set.clone();
    set.status = Some(status.clone());
    let mut out = Plan {
        status,
        ..Plan::default()
    };
    if !input.writes_observed {
        out.requeue_after = Some(IN_FLIGHT_REQUEUE);
        return Ok(out);
    }
    let name = set.metadata.name.clone().unwrap_or_default();
    if set.spec.containers.iter().any(|c| c.is_hot_upgrade()) {
        for (i, pod) in input.pods.iter().enumerate() {
            if !hot_upgrade_reset_due(pod, &set) {
                continue;
            }
            if let Some(to) = reset_hot_upgrade(pod, &set, input.hashes, input.now)? {
                out.actions.push(Action::ResetHotUpgrade {
                    pod: i,
                    key: pod_key(pod),
                    to: Box::new(to),
                });
            }
        }
    }
    let strategy = &set.spec.update_strategy;
    if strategy.type_ == Some(SidecarSetUpdateStrategyType::NotUpdate)
        || counts.updated >= counts.matched
        || strategy.paused
    {
        return Ok(out);
    }
    let states: Vec<_> = facts.iter().map(|f| f.plan).collect();
    let upgrades = next_upgrades(strategy, input.pods, &states)?;
    let condition = |i: usize, upgradable: bool| {
        let pod = &input.pods[i];
        upgradable_condition(pod, &name, upgradable, input.now).map(|c| Action::SetUpgradable {
            pod: i,
            key: pod_key(pod),
            condition: Box::new(c),
        })
    };
    for &i in &upgrades.not_upgradable {
        out.actions.extend(condition(i, false));
    }
    if !upgrades.not_upgradable.is_empty() {
        out.events.push(EventRecord::normal(
            "NotUpgradablePods",
            format!(
                "SidecarSet in-place update detected {} not upgradable pod(s) in this round, will skip them.",
                upgrades.not_upgradable.len()
            ),
        ));
    }
    for &i in &upgrades.upgrade {
        let pod = &input.pods[i];
        let to = upgrade_pod(pod, &set, input.hashes, input.now)?;
        out.actions.push(Action::Upgrade {
            pod: i,
            key: pod_key(pod),
            to: Box::new(to),
        });
        out.actions.extend(condition(i, true));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
