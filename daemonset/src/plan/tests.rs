use super::*;
use pretty_assertions::assert_eq;
use proptest::prelude::*;

const RUN: Eligibility = Eligibility {
    should_run: true,
    should_continue_running: true,
};
const STAY: Eligibility = Eligibility {
    should_run: false,
    should_continue_running: true,
};
const NONE: Eligibility = Eligibility {
    should_run: false,
    should_continue_running: false,
};

fn node(name: &str, eligibility: Eligibility) -> PlanNode {
    PlanNode {
        name: name.into(),
        eligibility,
        selected: true,
    }
}

fn nodes(n: usize) -> Vec<PlanNode> {
    (0..n).map(|i| node(&format!("n{i}"), RUN)).collect()
}

/// A bound, ready, available pod on `node`.
fn pod(name: &str, node: &str, updated: bool) -> PlanPod {
    PlanPod {
        name: name.into(),
        node: node.into(),
        bound: true,
        created: 0,
        terminating: false,
        failed: false,
        preparing_delete: false,
        updated,
        ready_since: Some(0),
        in_place_possible: false,
        held_by_pre_delete: false,
    }
}

/// One available pod per node, all old (`false`) or all updated.
fn one_each(nodes: &[PlanNode], updated: bool) -> Vec<PlanPod> {
    nodes
        .iter()
        .map(|n| pod(&format!("{}-pod", n.name), &n.name, updated))
        .collect()
}

fn input(nodes: Vec<PlanNode>, pods: Vec<PlanPod>) -> PlanInput {
    PlanInput {
        nodes,
        pods,
        now: 100,
        ..PlanInput::default()
    }
}

fn creates(p: &Plan) -> Vec<&str> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::Create { node } => Some(node.as_str()),
            _ => None,
        })
        .collect()
}

fn deletes(p: &Plan) -> Vec<&str> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::Delete { pod } => Some(pod.as_str()),
            _ => None,
        })
        .collect()
}

fn in_place(p: &Plan) -> Vec<&str> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::UpdateInPlace { pod, .. } => Some(pod.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn every_eligible_node_gets_one_pod_and_ineligible_ones_none() {
    let nodes = vec![
        node("a", RUN),
        node("b", STAY),
        node("c", NONE),
        node("d", RUN),
    ];
    let p = plan(&input(nodes, vec![]));
    assert_eq!(creates(&p), ["a", "d"]);
    assert_eq!(p.status.desired_number_scheduled, 2);
    assert_eq!(p.status.number_unavailable, 2);
}

#[test]
fn no_execute_removes_the_pod_no_schedule_keeps_it() {
    let nodes = vec![node("a", STAY), node("b", NONE)];
    let pods = vec![pod("pa", "a", true), pod("pb", "b", true)];
    let p = plan(&input(nodes, pods));
    assert_eq!(deletes(&p), ["pb"]);
    assert_eq!(creates(&p), Vec::<&str>::new());
    assert_eq!(p.status.number_misscheduled, 2);
}

#[test]
fn the_oldest_pod_on_a_node_is_kept() {
    let mut old = pod("z-old", "a", true);
    old.created = 1;
    let mut young = pod("a-young", "a", true);
    young.created = 5;
    let mut unbound = pod("b-unbound", "a", true);
    unbound.bound = false;
    let p = plan(&input(vec![node("a", RUN)], vec![young, old, unbound]));
    assert_eq!(deletes(&p), ["a-young", "b-unbound"]);
}

#[test]
fn failed_pods_are_deleted_after_their_node_backoff() {
    let mut failed = pod("pa", "a", true);
    failed.failed = true;
    failed.ready_since = None;
    let mut i = input(vec![node("a", RUN)], vec![failed]);
    let p = plan(&i);
    assert_eq!(deletes(&p), ["pa"]);
    assert_eq!(p.extra.failed_nodes, ["a"]);
    i.backoff_until.insert("a".into(), 130);
    let p = plan(&i);
    assert_eq!(deletes(&p), Vec::<&str>::new());
    assert_eq!(p.requeue_after, Some(std::time::Duration::from_secs(30)));
}

#[test]
fn an_unbound_pod_aimed_at_a_vanished_node_is_deleted_a_bound_one_left_to_gc() {
    let mut pending = pod("pending", "gone", true);
    pending.bound = false;
    let bound = pod("bound", "gone", true);
    let p = plan(&input(vec![], vec![pending, bound]));
    assert_eq!(deletes(&p), ["pending"]);
}

#[test]
fn preparing_delete_pods_are_deleted_and_replaced() {
    let mut leaving = pod("pa", "a", false);
    leaving.preparing_delete = true;
    let p = plan(&input(vec![node("a", RUN)], vec![leaving.clone()]));
    // The node still has a pod (it may be held by its hook): no replacement yet.
    assert_eq!(p.actions, vec![Action::Delete { pod: "pa".into() }]);
    let p = plan(&input(vec![node("a", NONE)], vec![leaving]));
    assert_eq!(p.actions, vec![Action::Delete { pod: "pa".into() }]);
}

#[test]
fn a_pod_its_pre_delete_hook_holds_is_marked_preparing_delete_then_left_until_let_go() {
    let mut hooked = pod("pa", "a", false);
    hooked.held_by_pre_delete = true;
    // Its node no longer runs the DaemonSet: marked, not deleted.
    let p = plan(&input(vec![node("a", NONE)], vec![hooked.clone()]));
    assert_eq!(p.actions, vec![Action::PrepareDelete { pod: "pa".into() }]);
    // Marked and still held: nothing to do until the hook's owner lets go.
    hooked.preparing_delete = true;
    let p = plan(&input(vec![node("a", NONE)], vec![hooked.clone()]));
    assert_eq!(p.actions, vec![]);
    // Let go: deleted.
    hooked.held_by_pre_delete = false;
    let p = plan(&input(vec![node("a", NONE)], vec![hooked]));
    assert_eq!(p.actions, vec![Action::Delete { pod: "pa".into() }]);
}

#[test]
fn an_in_place_update_falls_back_to_how_the_pod_would_be_taken_away() {
    let mut i = input(vec![node("a", RUN)], vec![pod("pa", "a", false)]);
    i.strategy.in_place = true;
    i.pods[0].in_place_possible = true;
    let in_place = |otherwise| {
        vec![Action::UpdateInPlace {
            pod: "pa".into(),
            otherwise,
        }]
    };
    assert_eq!(plan(&i).actions, in_place(Removal::Delete));
    i.pods[0].held_by_pre_delete = true;
    assert_eq!(plan(&i).actions, in_place(Removal::PrepareDelete));
}

#[test]
fn burst_replicas_caps_creations_and_deletions() {
    let mut i = input(nodes(5), vec![]);
    i.strategy.burst_replicas = IntOrString::Int(2);
    assert_eq!(creates(&plan(&i)), ["n0", "n1"]);
    i.strategy.burst_replicas = IntOrString::String("50%".into());
    assert_eq!(creates(&plan(&i)).len(), 2, "floor of 2.5");
}

#[test]
fn partitioned_scaling_holds_creation_to_desired_minus_updated_minus_partition() {
    let mut i = input(nodes(5), vec![pod("p0", "n0", true)]);
    i.strategy.partition = Some(IntOrString::Int(2));
    i.strategy.partitioned_scaling = true;
    assert_eq!(creates(&plan(&i)), ["n1", "n2"]);
    i.strategy.partitioned_scaling = false;
    assert_eq!(creates(&plan(&i)).len(), 4);
}

#[test]
fn standard_update_replaces_up_to_max_unavailable_from_the_last_node() {
    let n = nodes(5);
    let mut i = input(n.clone(), one_each(&n, false));
    let p = plan(&i);
    assert_eq!(deletes(&p), ["n4-pod"]);
    i.strategy.max_unavailable = Some(IntOrString::String("40%".into()));
    assert_eq!(deletes(&plan(&i)), ["n3-pod", "n4-pod"], "ceil of 2.0");
    // A node already without a pod uses up the budget.
    let mut i = input(n.clone(), one_each(&n[..4], false));
    i.strategy.max_unavailable = Some(IntOrString::Int(2));
    let p = plan(&i);
    assert_eq!(creates(&p), ["n4"]);
    assert_eq!(deletes(&p), ["n3-pod"]);
}

#[test]
fn unavailable_old_pods_are_replaced_at_once() {
    let n = nodes(4);
    let mut pods = one_each(&n, false);
    for p in &mut pods[..3] {
        p.ready_since = None;
    }
    let p = plan(&input(n, pods));
    // Replacing them takes nothing more down, so the budget still allows n3.
    assert_eq!(deletes(&p), ["n0-pod", "n1-pod", "n2-pod", "n3-pod"]);
}

#[test]
fn terminating_and_failed_pods_do_not_use_the_budget_twice_k657() {
    let n = nodes(4);
    let mut pods = one_each(&n, false);
    pods[3].terminating = true;
    let mut failed = pod("n2-failed", "n2", true);
    failed.failed = true;
    failed.terminating = true;
    pods.push(failed);
    let mut i = input(n, pods);
    i.strategy.max_unavailable = Some(IntOrString::Int(2));
    let p = plan(&i);
    // n3 (terminating) counts once; one more node may go.
    assert_eq!(deletes(&p), ["n2-pod"]);
}

#[test]
fn in_place_if_possible_updates_in_place_and_falls_back_to_recreate() {
    let n = nodes(3);
    let mut pods = one_each(&n, false);
    pods[2].in_place_possible = true;
    let mut i = input(n, pods);
    i.strategy.in_place = true;
    i.strategy.max_unavailable = Some(IntOrString::Int(2));
    let p = plan(&i);
    assert_eq!(in_place(&p), ["n2-pod"]);
    assert_eq!(deletes(&p), ["n1-pod"]);
}

#[test]
fn partition_keeps_nodes_old_and_the_selector_limits_the_nodes() {
    let n = nodes(5);
    let mut i = input(n.clone(), one_each(&n, false));
    i.strategy.max_unavailable = Some(IntOrString::String("100%".into()));
    i.strategy.partition = Some(IntOrString::Int(2));
    assert_eq!(deletes(&plan(&i)), ["n2-pod", "n3-pod", "n4-pod"]);
    i.strategy.partition = Some(IntOrString::String("50%".into()));
    assert_eq!(deletes(&plan(&i)).len(), 3, "floor of 2.5 kept");
    i.strategy.partition = None;
    for node in &mut i.nodes {
        node.selected = node.name == "n1" || node.name == "n3";
    }
    assert_eq!(deletes(&plan(&i)), ["n1-pod", "n3-pod"]);
}

#[test]
fn prune_ineligible_nodes_leaves_a_node_that_may_only_keep_its_pod_alone() {
    let n = vec![node("a", RUN), node("b", RUN), node("c", STAY)];
    let mut i = input(n.clone(), one_each(&n, false));
    i.strategy.max_unavailable = Some(IntOrString::String("100%".into()));
    // Without the gate the tainted node's old pod is rolled too (and not recreated there),
    // using up budget: 100% of the 2 desired nodes.
    assert_eq!(deletes(&plan(&i)), ["b-pod", "c-pod"]);
    i.strategy.prune_ineligible_nodes = true;
    assert_eq!(deletes(&plan(&i)), ["a-pod", "b-pod"]);
}

#[test]
fn paused_and_on_delete_do_not_roll() {
    let n = nodes(3);
    let mut i = input(n.clone(), one_each(&n, false));
    i.strategy.paused = true;
    assert_eq!(plan(&i).actions, vec![]);
    i.strategy.paused = false;
    i.strategy.on_delete = true;
    assert_eq!(plan(&i).actions, vec![]);
}

#[test]
fn surge_creates_first_and_deletes_the_old_pod_once_the_new_one_is_available_k1012() {
    let n = nodes(3);
    let mut i = input(n.clone(), one_each(&n, false));
    i.strategy.max_unavailable = Some(IntOrString::Int(0));
    i.strategy.max_surge = Some(IntOrString::Int(1));
    i.strategy.min_ready_seconds = 30;
    let p = plan(&i);
    assert_eq!(creates(&p), ["n2"]);
    assert_eq!(deletes(&p), Vec::<&str>::new());
    // The new pod became Ready at 100: nothing until minReadySeconds, then a requeue.
    let mut new = pod("n2-new", "n2", true);
    new.ready_since = Some(100);
    new.created = 99;
    i.pods.push(new);
    let p = plan(&i);
    assert_eq!(p.actions, vec![]);
    assert_eq!(p.requeue_after, Some(std::time::Duration::from_secs(31)));
    i.now = 130;
    assert_eq!(
        plan(&i).actions,
        vec![],
        "available only after more than 30s"
    );
    i.now = 131;
    let p = plan(&i);
    assert_eq!(deletes(&p), ["n2-pod"]);
    // n2 is done once its old pod goes: the surge moves on to the next node.
    assert_eq!(creates(&p), ["n1"]);
}

#[test]
fn an_unavailable_old_pod_is_replaced_outside_the_budget_and_named_for_confirmation() {
    // The failure under load: the cache had not yet seen n2's old pod become Ready, so
    // its replacement took no surge slot and n1 surged beside it. The plan names the pod
    // such an action rests on, for the shell to read as it is.
    let n = nodes(3);
    let mut i = input(n.clone(), one_each(&n, false));
    i.pods[2].ready_since = None;
    i.strategy.max_unavailable = Some(IntOrString::Int(0));
    i.strategy.max_surge = Some(IntOrString::Int(1));
    let p = plan(&i);
    assert_eq!(creates(&p), ["n1", "n2"]);
    assert_eq!(
        p.extra.uncounted,
        vec![Uncounted {
            action: Action::Create { node: "n2".into() },
            pod: "n2-pod".into()
        }]
    );
    // Without surge: the unavailable pod itself is replaced, beside the one maxUnavailable
    // allows; only the first rests on the cache.
    i.strategy.max_unavailable = Some(IntOrString::Int(1));
    i.strategy.max_surge = Some(IntOrString::Int(0));
    let p = plan(&i);
    assert_eq!(deletes(&p), ["n1-pod", "n2-pod"]);
    assert_eq!(
        p.extra.uncounted,
        vec![Uncounted {
            action: Action::Delete {
                pod: "n2-pod".into()
            },
            pod: "n2-pod".into()
        }]
    );
    // Every pod available: nothing rests on the cache's view of an old pod.
    i.pods[2].ready_since = Some(0);
    assert_eq!(plan(&i).extra.uncounted, vec![]);
}

#[test]
fn status_counts_the_oldest_pod_per_node() {
    let n = vec![node("a", RUN), node("b", RUN), node("c", NONE)];
    let mut not_ready = pod("pb", "b", false);
    not_ready.ready_since = None;
    let mut i = input(
        n,
        vec![pod("pa", "a", true), not_ready, pod("pc", "c", true)],
    );
    i.strategy.min_ready_seconds = 10;
    let p = plan(&i);
    assert_eq!(
        p.status,
        StatusCounts {
            desired_number_scheduled: 2,
            current_number_scheduled: 2,
            number_misscheduled: 1,
            number_ready: 1,
            number_available: 1,
            updated_number_scheduled: 1,
            number_unavailable: 1,
        }
    );
}

/// A small world the planner drives: pods created are Ready one step later, deleted ones
/// are gone one step later, in-place updates are Ready again one step later.
#[derive(Debug, Clone)]
struct World {
    nodes: Vec<PlanNode>,
    pods: Vec<PlanPod>,
    next: usize,
    now: i64,
}

#[derive(Debug, Clone)]
enum Churn {
    Join,
    Leave(usize),
    Eligibility(usize, u8),
    Select(usize),
    Template,
}

fn churn() -> impl Strategy<Value = Churn> {
    prop_oneof![
        Just(Churn::Join),
        (0usize..8).prop_map(Churn::Leave),
        (0usize..8, 0u8..3).prop_map(|(i, e)| Churn::Eligibility(i, e)),
        (0usize..8).prop_map(Churn::Select),
        Just(Churn::Template),
    ]
}

impl World {
    fn new(n: usize) -> Self {
        let nodes = nodes(n);
        let mut pods = one_each(&nodes, true);
        for (i, pod) in pods.iter_mut().enumerate() {
            pod.in_place_possible = i.is_multiple_of(2);
        }
        World {
            nodes,
            pods,
            next: 0,
            now: 1000,
        }
    }

    fn apply_churn(&mut self, c: &Churn) {
        match c {
            Churn::Join => {
                self.next += 1;
                self.nodes.push(node(&format!("j{}", self.next), RUN));
            }
            Churn::Leave(i) if !self.nodes.is_empty() => {
                let gone = self.nodes.remove(i % self.nodes.len());
                self.pods.retain(|p| p.node != gone.name);
            }
            Churn::Eligibility(i, e) if !self.nodes.is_empty() => {
                let len = self.nodes.len();
                self.nodes[i % len].eligibility = [RUN, STAY, NONE][usize::from(*e)];
            }
            Churn::Select(i) if !self.nodes.is_empty() => {
                let len = self.nodes.len();
                let node = &mut self.nodes[i % len];
                node.selected = !node.selected;
            }
            Churn::Template => {
                for pod in &mut self.pods {
                    pod.updated = false;
                }
            }
            _ => {}
        }
    }

    /// Time passes: terminating pods go, new pods become Ready.
    fn tick(&mut self) {
        self.now += 1;
        self.pods.retain(|p| !p.terminating);
        let now = self.now;
        for pod in &mut self.pods {
            pod.ready_since.get_or_insert(now);
            pod.bound = true;
        }
    }

    fn input(&self, strategy: &PlanStrategy) -> PlanInput {
        PlanInput {
            nodes: self.nodes.clone(),
            pods: self.pods.clone(),
            strategy: strategy.clone(),
            backoff_until: BTreeMap::new(),
            now: self.now,
        }
    }

    fn apply(&mut self, plan: &Plan) {
        for action in &plan.actions {
            match action {
                Action::Create { node } => {
                    self.next += 1;
                    let mut p = pod(&format!("{node}-{}", self.next), node, true);
                    p.bound = false;
                    p.created = self.now;
                    // Half the pods can take the next template in place.
                    p.in_place_possible = self.next.is_multiple_of(2);
                    p.ready_since = None;
                    self.pods.push(p);
                }
                Action::Delete { pod } => {
                    for p in self.pods.iter_mut().filter(|p| &p.name == pod) {
                        p.terminating = true;
                        p.ready_since = None;
                    }
                }
                Action::PrepareDelete { pod } => {
                    for p in self.pods.iter_mut().filter(|p| &p.name == pod) {
                        p.preparing_delete = true;
                    }
                }
                Action::UpdateInPlace { pod, .. } => {
                    for p in self.pods.iter_mut().filter(|p| &p.name == pod) {
                        p.updated = true;
                        p.ready_since = None;
                    }
                }
            }
        }
    }

    /// Desired nodes the update may touch without an available, non-terminating pod.
    fn unavailable(&self, min_ready: i64) -> usize {
        self.nodes
            .iter()
            .filter(|n| n.eligibility.should_run)
            .filter(|n| {
                !self
                    .pods
                    .iter()
                    .any(|p| p.node == n.name && !p.terminating && p.available(min_ready, self.now))
            })
            .count()
    }

    /// Desired nodes whose one pod is old and unavailable (replaced outside the budget).
    fn old_unavailable(&self, min_ready: i64) -> usize {
        self.nodes
            .iter()
            .filter(|n| n.eligibility.should_run)
            .filter(|n| {
                let pods: Vec<_> = self
                    .pods
                    .iter()
                    .filter(|p| p.node == n.name && !p.terminating)
                    .collect();
                matches!(pods[..], [p] if !p.updated && !p.available(min_ready, self.now))
            })
            .count()
    }

    /// Nodes with more than one non-terminating pod.
    fn surplus(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| {
                self.pods
                    .iter()
                    .filter(|p| p.node == n.name && !p.terminating)
                    .count()
                    > 1
            })
            .count()
    }
}

fn strategies() -> impl Strategy<Value = PlanStrategy> {
    (
        any::<bool>(),
        1i32..4,
        0i32..4,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(surge, budget, partition, in_place, partitioned, prune)| PlanStrategy {
                in_place: in_place && !surge,
                max_unavailable: Some(IntOrString::Int(if surge { 0 } else { budget })),
                max_surge: Some(IntOrString::Int(if surge { budget } else { 0 })),
                partition: Some(IntOrString::Int(partition)),
                partitioned_scaling: partitioned,
                prune_ineligible_nodes: prune,
                ..PlanStrategy::default()
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]
    /// Under random node churn and template changes: a pass never takes more nodes down than
    /// maxUnavailable (beyond what was already down), never surges beyond maxSurge, never
    /// rolls a node outside the selector; at rest every node that should run has exactly one
    /// pod, nodes that may not keep one have none, and at most `partition` nodes stay old
    /// when no selector holds nodes back.
    #[test]
    fn rollouts_keep_their_budgets_and_settle(
        size in 1usize..7,
        strategy in strategies(),
        steps in proptest::collection::vec(proptest::option::of(churn()), 1..25),
    ) {
        let mut world = World::new(size);
        let max_unavailable = match strategy.max_unavailable { Some(IntOrString::Int(i)) => i as usize, _ => 0 };
        let max_surge = match strategy.max_surge { Some(IntOrString::Int(i)) => i as usize, _ => 0 };
        let run = |world: &mut World, churn: Option<&Churn>| -> Result<bool, TestCaseError> {
            if let Some(c) = churn {
                world.apply_churn(c);
            }
            let input = world.input(&strategy);
            let plan = plan(&input);
            // The selector is never crossed: an available, lone old pod on an unselected
            // node that may stay is never replaced.
            for action in &plan.actions {
                let target = match action {
                    Action::Delete { pod }
                    | Action::PrepareDelete { pod }
                    | Action::UpdateInPlace { pod, .. } => pod,
                    Action::Create { .. } => continue,
                };
                let Some(pod) = world.pods.iter().find(|p| &p.name == target) else { continue };
                let Some(node) = world.nodes.iter().find(|n| n.name == pod.node) else { continue };
                let alone = world.pods.iter().filter(|p| p.node == pod.node && !p.terminating).count() == 1;
                if !node.selected && alone && !pod.updated && !pod.failed
                    && node.eligibility.should_continue_running
                {
                    prop_assert!(false, "rolled unselected node {}", node.name);
                }
            }
            let (down_before, surplus_before) = (world.unavailable(0), world.surplus());
            let budget = max_unavailable.max(1) + world.old_unavailable(0);
            world.apply(&plan);
            let ineligible_deletes = plan.actions.iter().filter(|a| match a {
                Action::Delete { pod } => world.pods.iter().any(|p| &p.name == pod
                    && world.nodes.iter().find(|n| n.name == p.node)
                        .is_none_or(|n| !n.eligibility.should_run)),
                _ => false,
            }).count();
            prop_assert!(
                world.unavailable(0) <= down_before.max(budget) + ineligible_deletes,
                "unavailable {} > max({down_before}, {budget})", world.unavailable(0)
            );
            prop_assert!(
                world.surplus() <= surplus_before.max(max_surge),
                "surplus {} > max({surplus_before}, {max_surge})", world.surplus()
            );
            world.tick();
            Ok(plan.actions.is_empty())
        };
        for step in &steps {
            run(&mut world, step.as_ref())?;
        }
        let mut settled = false;
        for _ in 0..200 {
            if run(&mut world, None)? {
                settled = true;
                break;
            }
        }
        prop_assert!(settled, "no rest after 200 passes: {world:?}");
        let partition = match strategy.partition { Some(IntOrString::Int(p)) => p as usize, _ => 0 };
        let mut held_back = 0;
        for node in &world.nodes {
            let on_node = world.pods.iter().filter(|p| p.node == node.name).count();
            if node.eligibility.should_run && on_node == 0 && strategy.partitioned_scaling {
                // partitionedScaling keeps up to `partition` new nodes without a pod.
                held_back += 1;
            } else if node.eligibility.should_run {
                prop_assert_eq!(on_node, 1, "node {}", node.name);
            } else if !node.eligibility.should_continue_running {
                prop_assert_eq!(on_node, 0, "node {}", node.name);
            } else {
                prop_assert!(on_node <= 1, "node {}", node.name);
            }
        }
        prop_assert!(held_back <= partition, "{held_back} nodes held back, partition {partition}");
        if world.nodes.iter().all(|n| n.selected) {
            let desired = world.nodes.iter().filter(|n| n.eligibility.should_run).count();
            let old = world.nodes.iter()
                .filter(|n| n.eligibility.should_run)
                .filter(|n| world.pods.iter().any(|p| p.node == n.name && !p.updated))
                .count();
            prop_assert!(old <= partition.min(desired), "{old} old nodes, partition {partition}");
        }
    }
}

#[test]
fn status_carries_the_counts_and_moves_observed_generation_only_after_a_synced_pass() {
    let counts = StatusCounts {
        desired_number_scheduled: 3,
        current_number_scheduled: 3,
        number_ready: 2,
        number_available: 2,
        updated_number_scheduled: 1,
        number_unavailable: 1,
        ..StatusCounts::default()
    };
    let previous = DaemonSetStatus {
        observed_generation: 4,
        collision_count: Some(1),
        number_ready: 9,
        ..DaemonSetStatus::default()
    };
    let synced = counts.status(&previous, 5, true, "abc");
    assert_eq!(synced.observed_generation, 5);
    assert_eq!(synced.number_ready, 2);
    assert_eq!(synced.number_unavailable, 1);
    assert_eq!(synced.update_revision, "abc");
    assert_eq!(synced.collision_count, Some(1));
    let failed = counts.status(&previous, 5, false, "abc");
    assert_eq!(failed.observed_generation, 4);
    assert_eq!(failed.updated_number_scheduled, 1);
}
