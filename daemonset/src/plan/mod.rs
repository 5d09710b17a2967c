//! The pure planner: (nodes with their eligibility, the DaemonSet's pods, the strategy, the
//! time) -> the pods to create, delete or update in place, the status and when to look
//! again. No I/O, no clock: the shell supplies every input, including `now`.
//!
//! A pass does what OpenKruise's `manage` and `rollingUpdate` do:
//!
//! * **manage**, per node: should run and has no pod -> create (in node-name order; with
//!   `partitionedScaling` at most `desired - updated - partition` nodes); may continue
//!   running -> failed pods deleted (unless the node's failure backoff has not elapsed),
//!   pods in `PreparingDelete` deleted (unless their preDelete hook holds them), and of
//!   the running pods only the
//!   oldest is kept (with surge: the oldest updated and the oldest old); may not continue
//!   running -> every pod deleted. Unbound pods aimed at a node that no longer exists are
//!   deleted (K#443). Creations and deletions are each capped at `burstReplicas`.
//! * **rolling update** (not for OnDelete or paused): nodes that should run, sorted by name
//!   and walked from the last: nodes with an updated pod (or several pods) first, then
//!   nodes whose old pod is gone or in `PreparingDelete`, then nodes matching
//!   `rollingUpdate.selector` (only those, when it is set) or the rest; the list is cut to
//!   `nodes - partition` (nodes with an updated pod are never cut). Without surge, old pods that are unavailable are replaced at once
//!   and available ones up to `maxUnavailable` minus the nodes already unavailable; with
//!   `InPlaceIfPossible` a pod that can be updated in place is, the others are recreated.
//!   With surge, a new pod is created beside an old one (at once when the old one is
//!   unavailable, else up to `maxSurge` minus the surges in flight) and the old one is
//!   deleted once the new one is available — with minReadySeconds, the pass asks to be run
//!   again when it elapses (K#1012). Pods already terminating are not counted twice (K#657).
//! * **uncounted replacements**: an old pod replaced at once because it is unavailable
//!   spends no maxUnavailable or maxSurge slot, so the plan names it in
//!   [`PlanNotes::uncounted`]: the shell confirms on the pod as it is that it is still
//!   unavailable before acting. A cache that has not yet seen the pod become Ready would
//!   otherwise take down, or surge beside, one pod more than the budget allows.
//! * **preDelete hook**: a pod to take away that `lifecycle.preDelete` holds (any of its
//!   handler labels or finalizers) is marked `PreparingDelete` instead of deleted, and left
//!   alone once it is; so is the fall-back of an in-place update the shell finds cannot be
//!   made in place ([`Removal`]).

pub mod eligibility;
pub mod in_place;
pub mod pods;
pub mod revisions;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_core::api::intstr::value_from_int_or_percent;

use crate::api::v1beta1::DaemonSetStatus;

pub use eligibility::{Eligibility, NodeView};

/// One node as the planner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanNode {
    /// The node's name.
    pub name: String,
    /// Whether the DaemonSet's pod should (continue to) run on it.
    pub eligibility: Eligibility,
    /// It matches `rollingUpdate.selector` (true when no selector is set).
    pub selected: bool,
}

/// One of the DaemonSet's pods as the planner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanPod {
    /// The pod's name.
    pub name: String,
    /// The node it is bound to, or the node its placement names.
    pub node: String,
    /// `spec.nodeName` is set.
    pub bound: bool,
    /// Creation time (seconds); ties broken by name.
    pub created: i64,
    /// It has a deletion timestamp.
    pub terminating: bool,
    /// Phase `Failed`.
    pub failed: bool,
    /// Lifecycle state `PreparingDelete`.
    pub preparing_delete: bool,
    /// It runs the update revision.
    pub updated: bool,
    /// When it last became Ready (seconds), if it is Ready.
    pub ready_since: Option<i64>,
    /// It can be moved to the update revision in place (the shell's diff of the two
    /// revisions and the pod's `InPlaceUpdateReady` gate say so).
    pub in_place_possible: bool,
    /// The DaemonSet's `lifecycle.preDelete` hook holds it (a handler label or finalizer).
    pub held_by_pre_delete: bool,
}

impl PlanPod {
    /// Kubernetes' `IsPodAvailable`: Ready for more than `min_ready_seconds` at `now`.
    pub fn available(&self, min_ready_seconds: i64, now: i64) -> bool {
        self.ready_since
            .is_some_and(|since| min_ready_seconds <= 0 || since + min_ready_seconds < now)
    }

    /// Seconds from `now` until it becomes available, if it is Ready but not yet available.
    fn available_in(&self, min_ready_seconds: i64, now: i64) -> Option<i64> {
        let since = self.ready_since?;
        (!self.available(min_ready_seconds, now)).then(|| since + min_ready_seconds + 1 - now)
    }
}

/// The strategy, resolved from the spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanStrategy {
    /// `updateStrategy.type: OnDelete`.
    pub on_delete: bool,
    /// `rollingUpdate.paused`.
    pub paused: bool,
    /// `rollingUpdateType: InPlaceIfPossible`.
    pub in_place: bool,
    /// `rollingUpdate.maxUnavailable` (absent: 0).
    pub max_unavailable: Option<IntOrString>,
    /// `rollingUpdate.maxSurge` (absent: 0).
    pub max_surge: Option<IntOrString>,
    /// `rollingUpdate.partition`.
    pub partition: Option<IntOrString>,
    /// `scaleStrategy.partitionedScaling`.
    pub partitioned_scaling: bool,
    /// `burstReplicas`.
    pub burst_replicas: IntOrString,
    /// `minReadySeconds`.
    pub min_ready_seconds: i64,
    /// Gate `DaemonSetPruneIneligibleNodes`: the rolling update considers only nodes that
    /// should run the pod (a node that may merely keep its pod is neither counted nor rolled,
    /// except that a surge in flight there still counts).
    pub prune_ineligible_nodes: bool,
}

impl Default for PlanStrategy {
    fn default() -> Self {
        Self {
            on_delete: false,
            paused: false,
            in_place: false,
            max_unavailable: Some(IntOrString::Int(1)),
            max_surge: None,
            partition: None,
            partitioned_scaling: false,
            burst_replicas: IntOrString::Int(crate::api::DEFAULT_BURST_REPLICAS),
            min_ready_seconds: 0,
            prune_ineligible_nodes: false,
        }
    }
}

/// Everything a pass decides on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanInput {
    /// Every node.
    pub nodes: Vec<PlanNode>,
    /// The DaemonSet's pods.
    pub pods: Vec<PlanPod>,
    /// The strategy.
    pub strategy: PlanStrategy,
    /// Nodes whose failed pod may not be replaced before the given time (seconds).
    pub backoff_until: BTreeMap<String, i64>,
    /// The time (seconds).
    pub now: i64,
}

/// One write.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Action {
    /// Create a pod at the update revision on the node.
    Create {
        /// The node.
        node: String,
    },
    /// Delete the pod.
    Delete {
        /// The pod.
        pod: String,
    },
    /// Mark the pod `PreparingDelete`: its preDelete hook holds it.
    PrepareDelete {
        /// The pod.
        pod: String,
    },
    /// Update the pod in place to the update revision.
    UpdateInPlace {
        /// The pod.
        pod: String,
        /// What to do instead when the pod as it is turns out not updatable in place.
        otherwise: Removal,
    },
}

/// How a pod the plan takes away goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Removal {
    /// Deleted.
    Delete,
    /// Marked `PreparingDelete` (its preDelete hook holds it).
    PrepareDelete,
    /// Left as it is: already `PreparingDelete` and still held.
    Held,
}

impl Removal {
    /// How `pod` is taken away.
    pub fn of(pod: &PlanPod) -> Self {
        match (pod.held_by_pre_delete, pod.preparing_delete) {
            (false, _) => Removal::Delete,
            (true, false) => Removal::PrepareDelete,
            (true, true) => Removal::Held,
        }
    }

    /// The action that takes `pod` away, if any.
    fn action(self, pod: &str) -> Option<Action> {
        let pod = pod.to_string();
        match self {
            Removal::Delete => Some(Action::Delete { pod }),
            Removal::PrepareDelete => Some(Action::PrepareDelete { pod }),
            Removal::Held => None,
        }
    }
}

/// §3.b counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatusCounts {
    /// Nodes that should run the pod.
    pub desired_number_scheduled: i32,
    /// Of those, nodes with a pod.
    pub current_number_scheduled: i32,
    /// Nodes with a pod that should not run it.
    pub number_misscheduled: i32,
    /// Desired nodes whose oldest pod is Ready.
    pub number_ready: i32,
    /// Desired nodes whose oldest pod is available.
    pub number_available: i32,
    /// Desired nodes whose oldest pod is updated.
    pub updated_number_scheduled: i32,
    /// `desired - available`.
    pub number_unavailable: i32,
}

impl StatusCounts {
    /// The status a pass writes: these counts and the update revision's `hash`, with the
    /// conditions and collision count as they were; `observedGeneration` moves to
    /// `generation` only after a pass whose writes all succeeded (`synced`).
    pub fn status(
        self,
        previous: &DaemonSetStatus,
        generation: i64,
        synced: bool,
        hash: &str,
    ) -> DaemonSetStatus {
        DaemonSetStatus {
            current_number_scheduled: self.current_number_scheduled,
            number_misscheduled: self.number_misscheduled,
            desired_number_scheduled: self.desired_number_scheduled,
            number_ready: self.number_ready,
            observed_generation: if synced {
                generation
            } else {
                previous.observed_generation
            },
            updated_number_scheduled: self.updated_number_scheduled,
            number_available: self.number_available,
            number_unavailable: self.number_unavailable,
            collision_count: previous.collision_count,
            conditions: previous.conditions.clone(),
            update_revision: hash.into(),
        }
    }
}

/// What a pass decided: the kit's plan of DaemonSet actions and status counts (no events:
/// the shell records them as it writes).
pub type Plan = kruise_core::plan::Plan<Action, StatusCounts, PlanNotes>;

/// What only the DaemonSet shell reads besides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanNotes {
    /// Nodes whose failed pod is deleted now (the shell lengthens their backoff).
    pub failed_nodes: Vec<String>,
    /// The actions no budget counted because the old pod they replace is unavailable, each
    /// with that pod: valid only while it still is.
    pub uncounted: Vec<Uncounted>,
}

/// An action taken outside maxUnavailable and maxSurge because `pod` is unavailable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uncounted {
    /// The action (a create beside the pod with surge, else its delete or in-place update).
    pub action: Action,
    /// The old pod whose unavailability allowed it.
    pub pod: String,
}

/// Pods per node, oldest first; terminating pods that also finished are left out.
fn pods_by_node(pods: &[PlanPod]) -> BTreeMap<&str, Vec<&PlanPod>> {
    let mut by_node: BTreeMap<&str, Vec<&PlanPod>> = BTreeMap::new();
    for pod in pods.iter().filter(|p| !(p.terminating && p.failed)) {
        by_node.entry(pod.node.as_str()).or_default().push(pod);
    }
    for pods in by_node.values_mut() {
        pods.sort_by(|a, b| (b.bound, a.created, &a.name).cmp(&(a.bound, b.created, &b.name)));
    }
    by_node
}

fn resolve(v: Option<&IntOrString>, total: i32, round_up: bool) -> i32 {
    v.and_then(|v| value_from_int_or_percent(v, total, round_up).ok())
        .unwrap_or(0)
        .max(0)
}

/// The pass.
pub fn plan(input: &PlanInput) -> Plan {
    let strategy = &input.strategy;
    let now = input.now;
    let min_ready = strategy.min_ready_seconds;
    let by_node = pods_by_node(&input.pods);
    let nodes: BTreeMap<&str, &PlanNode> =
        input.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let desired = input
        .nodes
        .iter()
        .filter(|n| n.eligibility.should_run)
        .count() as i32;
    let surge_allowed = !strategy.on_delete && resolve(strategy.max_surge.as_ref(), 1, true) > 0;
    let mut plan = Plan {
        status: status(input, &by_node),
        ..Plan::default()
    };
    let mut requeue = Requeue::default();

    // manage
    let mut to_create: Vec<&str> = Vec::new();
    let mut to_delete: BTreeSet<&str> = BTreeSet::new();
    for node in &input.nodes {
        let pods = by_node
            .get(node.name.as_str())
            .map_or(&[][..], Vec::as_slice);
        let Eligibility {
            should_run,
            should_continue_running,
        } = node.eligibility;
        if should_run && pods.is_empty() {
            to_create.push(&node.name);
        } else if should_continue_running {
            let mut running = Vec::new();
            for pod in pods.iter().filter(|p| !p.terminating) {
                if pod.failed {
                    match input.backoff_until.get(&node.name) {
                        Some(until) if *until > now => requeue.at(until - now),
                        _ => {
                            to_delete.insert(&pod.name);
                            plan.extra.failed_nodes.push(node.name.clone());
                        }
                    }
                } else if pod.preparing_delete {
                    // Deleted once its preDelete hook lets go.
                    to_delete.insert(&pod.name);
                } else {
                    running.push(*pod);
                }
            }
            if !surge_allowed {
                to_delete.extend(running.iter().skip(1).map(|p| p.name.as_str()));
            } else {
                let oldest_new = running.iter().find(|p| p.updated);
                let oldest_old = running.iter().find(|p| !p.updated);
                for pod in &running {
                    let keep = [oldest_new, oldest_old]
                        .iter()
                        .flatten()
                        .any(|k| k.name == pod.name);
                    if !keep {
                        to_delete.insert(&pod.name);
                    }
                }
            }
        } else {
            to_delete.extend(
                pods.iter()
                    .filter(|p| !p.terminating)
                    .map(|p| p.name.as_str()),
            );
        }
    }
    for (node, pods) in &by_node {
        if !nodes.contains_key(node) {
            to_delete.extend(
                pods.iter()
                    .filter(|p| !p.bound && !p.terminating)
                    .map(|p| p.name.as_str()),
            );
        }
    }
    let partition = resolve(strategy.partition.as_ref(), desired, false).min(desired);
    if strategy.partitioned_scaling && !strategy.on_delete && partition > 0 {
        // Only nodes that should run count as updated (OpenKruise counts every node's).
        let updated_nodes = input
            .nodes
            .iter()
            .filter(|n| n.eligibility.should_run)
            .filter(|n| {
                by_node
                    .get(n.name.as_str())
                    .is_some_and(|pods| pods.iter().any(|p| p.updated && !p.terminating))
            })
            .count() as i32;
        let max_create = (desired - updated_nodes - partition).max(0) as usize;
        to_create.truncate(max_create);
    }

    // rolling update
    let mut update_in_place: Vec<&str> = Vec::new();
    let mut uncounted: Vec<(&str, bool)> = Vec::new();
    if !strategy.on_delete && !strategy.paused {
        let rolled = rolling_update(input, &by_node, desired, &mut requeue);
        to_create.extend(rolled.create);
        for pod in rolled.replace {
            let in_place = strategy.in_place
                && input
                    .pods
                    .iter()
                    .any(|p| p.name == pod && p.in_place_possible);
            if in_place {
                update_in_place.push(pod);
            } else {
                to_delete.insert(pod);
            }
        }
        uncounted = rolled.uncounted;
    }

    let burst = resolve(Some(&strategy.burst_replicas), desired, false).max(1) as usize;
    to_create.sort_unstable();
    to_create.dedup();
    let removal = |name: &str| {
        input
            .pods
            .iter()
            .find(|p| p.name == name)
            .map_or(Removal::Delete, Removal::of)
    };
    let creates = to_create.into_iter().take(burst);
    let deletes = to_delete.into_iter().take(burst);
    plan.actions = creates
        .map(|node| Action::Create { node: node.into() })
        .chain(deletes.filter_map(|pod| removal(pod).action(pod)))
        .chain(
            update_in_place
                .into_iter()
                .map(|pod| Action::UpdateInPlace {
                    pod: pod.into(),
                    otherwise: removal(pod),
                }),
        )
        .collect();
    if min_ready > 0 {
        // A Ready pod not yet available becomes so with no event to tell: look again then.
        for pod in input.pods.iter().filter(|p| !p.terminating) {
            if let Some(after) = pod.available_in(min_ready, now) {
                requeue.at(after);
            }
        }
    }
    plan.requeue_after = requeue
        .0
        .map(|secs| Duration::from_secs(secs.unsigned_abs()));
    plan.extra.uncounted = uncounted
        .into_iter()
        .filter_map(|(old, surge)| {
            let pod = input.pods.iter().find(|p| p.name == old)?;
            let action = plan.actions.iter().find(|a| match a {
                Action::Create { node } => surge && *node == pod.node,
                Action::Delete { pod }
                | Action::PrepareDelete { pod }
                | Action::UpdateInPlace { pod, .. } => !surge && pod == old,
            })?;
            Some(Uncounted {
                action: action.clone(),
                pod: old.to_string(),
            })
        })
        .collect();
    plan
}

/// The soonest requeue asked for.
#[derive(Default)]
/// The soonest of the waits in whole seconds, at least one.
struct Requeue(Option<i64>);

impl Requeue {
    fn at(&mut self, after: i64) {
        let after = after.max(1);
        self.0 = Some(self.0.map_or(after, |a| a.min(after)));
    }
}

struct Rolled<'a> {
    create: Vec<&'a str>,
    replace: Vec<&'a str>,
    /// Old pods replaced outside the budget because they are unavailable; true when
    /// replaced by a surge (a create on their node), false when replaced themselves.
    uncounted: Vec<(&'a str, bool)>,
}

/// At most one updated and one old non-terminating pod on a node; `None` with more.
fn split_pods<'a>(pods: &[&'a PlanPod]) -> Option<(Option<&'a PlanPod>, Option<&'a PlanPod>)> {
    let (mut new, mut old) = (None, None);
    for pod in pods.iter().filter(|p| !p.terminating) {
        let slot = if pod.updated { &mut new } else { &mut old };
        if slot.is_some() {
            return None;
        }
        *slot = Some(*pod);
    }
    Some((new, old))
}

fn nil_or_preparing_delete(pod: Option<&PlanPod>) -> bool {
    pod.is_none_or(|p| p.preparing_delete)
}

fn rolling_update<'a>(
    input: &'a PlanInput,
    by_node: &BTreeMap<&str, Vec<&'a PlanPod>>,
    desired: i32,
    requeue: &mut Requeue,
) -> Rolled<'a> {
    let strategy = &input.strategy;
    let (now, min_ready) = (input.now, strategy.min_ready_seconds);
    let max_surge = resolve(strategy.max_surge.as_ref(), desired, true);
    let mut max_unavailable = resolve(strategy.max_unavailable.as_ref(), desired, true);
    if desired > 0 && max_surge == 0 && max_unavailable == 0 {
        max_unavailable = 1;
    }
    // The nodes the update may touch, in OpenKruise's order, cut to nodes - partition.
    let mut names: Vec<&PlanNode> = input
        .nodes
        .iter()
        .filter(|n| match by_node.get(n.name.as_str()) {
            _ if n.eligibility.should_run => true,
            None => false,
            Some(_) if !strategy.prune_ineligible_nodes => true,
            // Pruned, unless a surge is in flight there: it still counts against maxSurge.
            Some(pods) => matches!(split_pods(pods), None | Some((Some(_), Some(_)))),
        })
        .collect();
    names.sort_by(|a, b| b.name.cmp(&a.name));
    let selector_set = input.nodes.iter().any(|n| !n.selected);
    let (mut updated, mut updating, mut selected) = (Vec::new(), Vec::new(), Vec::new());
    for node in &names {
        let pods = by_node
            .get(node.name.as_str())
            .map_or(&[][..], Vec::as_slice);
        match split_pods(pods) {
            None | Some((Some(_), _)) => updated.push(*node),
            Some((None, old)) if nil_or_preparing_delete(old) => updating.push(*node),
            Some(_) if node.selected || !selector_set => selected.push(*node),
            Some(_) => {}
        }
    }
    let partition = resolve(strategy.partition.as_ref(), desired, false);
    let max_update = (names.len() as i32 - partition).max(0) as usize;
    // Nodes already carrying an updated pod always stay in (unlike OpenKruise, which cuts
    // them too): a surge in flight is counted and completed even when nodes left or the
    // partition grew, so no node is left with two pods.
    let fresh = max_update.saturating_sub(updated.len());
    let sorted: Vec<&PlanNode> = updated
        .into_iter()
        .chain(updating.into_iter().chain(selected).take(fresh))
        .collect();

    let mut rolled = Rolled {
        create: Vec::new(),
        replace: Vec::new(),
        uncounted: Vec::new(),
    };
    if max_surge == 0 {
        let mut unavailable = 0;
        let mut candidates = Vec::new();
        for node in &sorted {
            let pods = by_node
                .get(node.name.as_str())
                .map_or(&[][..], Vec::as_slice);
            let Some((new, old)) = split_pods(pods) else {
                unavailable += 1;
                continue;
            };
            match (new, old) {
                (new, old) if nil_or_preparing_delete(new) == nil_or_preparing_delete(old) => {
                    unavailable += 1;
                }
                (Some(new), _) => {
                    if !new.available(min_ready, now) || new.preparing_delete {
                        unavailable += 1;
                    }
                }
                (None, Some(old)) => {
                    if !old.available(min_ready, now) {
                        rolled.replace.push(old.name.as_str());
                        rolled.uncounted.push((old.name.as_str(), false));
                    } else if unavailable < max_unavailable {
                        candidates.push(old.name.as_str());
                    }
                }
                (None, None) => {}
            }
        }
        let remaining = (max_unavailable - unavailable).max(0) as usize;
        rolled
            .replace
            .extend(candidates.into_iter().take(remaining));
    } else {
        let mut surging = 0;
        let mut candidates = Vec::new();
        for node in &sorted {
            let pods = by_node
                .get(node.name.as_str())
                .map_or(&[][..], Vec::as_slice);
            let Some((new, old)) = split_pods(pods) else {
                surging += 1;
                continue;
            };
            match (new, old) {
                (_, old) if nil_or_preparing_delete(old) => {}
                (None, Some(old)) => {
                    if !old.available(min_ready, now) {
                        rolled.create.push(node.name.as_str());
                        rolled.uncounted.push((old.name.as_str(), true));
                    } else if surging < max_surge {
                        candidates.push(node.name.as_str());
                    }
                }
                (Some(new), Some(old)) => {
                    if !new.available(min_ready, now) || new.preparing_delete {
                        surging += 1;
                        if let Some(after) = new.available_in(min_ready, now) {
                            requeue.at(after);
                        }
                    } else {
                        rolled.replace.push(old.name.as_str());
                    }
                }
                (_, None) => {}
            }
        }
        let remaining = (max_surge - surging).max(0) as usize;
        rolled.create.extend(candidates.into_iter().take(remaining));
    }
    rolled
}

fn status(input: &PlanInput, by_node: &BTreeMap<&str, Vec<&PlanPod>>) -> StatusCounts {
    let mut counts = StatusCounts::default();
    for node in &input.nodes {
        let pods = by_node
            .get(node.name.as_str())
            .map_or(&[][..], Vec::as_slice);
        if node.eligibility.should_run {
            counts.desired_number_scheduled += 1;
            let Some(first) = pods.first() else {
                continue;
            };
            counts.current_number_scheduled += 1;
            if first.ready_since.is_some() {
                counts.number_ready += 1;
            }
            if first.available(input.strategy.min_ready_seconds, input.now) {
                counts.number_available += 1;
            }
            if first.updated {
                counts.updated_number_scheduled += 1;
            }
        } else if !pods.is_empty() {
            counts.number_misscheduled += 1;
        }
    }
    counts.number_unavailable = counts.desired_number_scheduled - counts.number_available;
    counts
}

#[cfg(test)]
mod tests;
