//! Scale-down (deletion) order and update order.
//!
//! Both are total orders that end in a tie-break by namespace/name, so the result does not
//! depend on the input order (deletion) or keeps it for equal keys (the stable update sorts).

use std::cmp::Ordering;
use std::collections::BTreeSet;

use jiff::Timestamp;

use super::PodView;
use super::priority::{priority_sort, scatter_sort};
use super::{
    deletion_cost, is_pod_ready, is_scheduled, is_specified_delete, lifecycle_state,
    max_container_restarts, pod_phase, ready_since,
};
use crate::api::lifecycle::LifecycleState;
use crate::api::strategy::{UpdatePriorityStrategy, UpdateScatterTerm};

/// Kubernetes' phase ordinal: Pending 0, Unknown 1, Running 2; any other phase counts as 0.
pub fn phase_rank<P: PodView + ?Sized>(pod: &P) -> u8 {
    match pod_phase(pod) {
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    }
}

/// Go's `afterOrZero`: `a` is "later" than `b`, a missing time counting as the latest.
fn later_first(a: Option<Timestamp>, b: Option<Timestamp>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) => y.cmp(&x),
    }
}

fn name_key<P: PodView + ?Sized>(p: &P) -> (&str, &str) {
    (p.namespace(), p.name())
}

/// Kubernetes' `ActivePods` order (the first pod is the best to act on first): unassigned <
/// assigned; Pending < Unknown < Running; not ready < ready; both ready: more recently ready
/// first; more restarts first; newer first. Ties: namespace/name.
pub fn compare_active<P: PodView + ?Sized>(a: &P, b: &P) -> Ordering {
    is_scheduled(a)
        .cmp(&is_scheduled(b))
        .then_with(|| phase_rank(a).cmp(&phase_rank(b)))
        .then_with(|| is_pod_ready(a).cmp(&is_pod_ready(b)))
        .then_with(|| compare_ready_time(a, b))
        .then_with(|| max_container_restarts(b).cmp(&max_container_restarts(a)))
        .then_with(|| {
            later_first(
                a.meta().creation_timestamp.as_ref().map(|t| t.0),
                b.meta().creation_timestamp.as_ref().map(|t| t.0),
            )
        })
        .then_with(|| name_key(a).cmp(&name_key(b)))
}

fn compare_ready_time<P: PodView + ?Sized>(a: &P, b: &P) -> Ordering {
    if is_pod_ready(a) && is_pod_ready(b) {
        later_first(ready_since(a), ready_since(b))
    } else {
        Ordering::Equal
    }
}

/// Scale-down order (the first pod is deleted first):
/// specified deletes (`pods_to_delete` or label `apps.kruise.io/specified-delete`) first;
/// unscheduled < scheduled; Pending < Unknown < Running; not ready < ready; lower
/// `controller.kubernetes.io/pod-deletion-cost` < higher; both ready: ready for a shorter time
/// first; more container restarts first; newer first; then namespace/name.
pub fn compare_for_deletion<P: PodView + ?Sized>(
    a: &P,
    b: &P,
    pods_to_delete: &BTreeSet<String>,
) -> Ordering {
    is_specified_delete(b, pods_to_delete)
        .cmp(&is_specified_delete(a, pods_to_delete))
        .then_with(|| is_scheduled(a).cmp(&is_scheduled(b)))
        .then_with(|| phase_rank(a).cmp(&phase_rank(b)))
        .then_with(|| is_pod_ready(a).cmp(&is_pod_ready(b)))
        .then_with(|| deletion_cost(a).cmp(&deletion_cost(b)))
        .then_with(|| compare_ready_time(a, b))
        .then_with(|| max_container_restarts(b).cmp(&max_container_restarts(a)))
        .then_with(|| {
            later_first(
                a.meta().creation_timestamp.as_ref().map(|t| t.0),
                b.meta().creation_timestamp.as_ref().map(|t| t.0),
            )
        })
        .then_with(|| name_key(a).cmp(&name_key(b)))
}

/// Indexes of `pods` in scale-down order (delete `result[0]` first). `pods` may be owned pods
/// or references into a cache.
pub fn deletion_order<P: PodView>(pods: &[P], pods_to_delete: &BTreeSet<String>) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..pods.len()).collect();
    idx.sort_by(|&i, &j| compare_for_deletion(&pods[i], &pods[j], pods_to_delete).then(i.cmp(&j)));
    idx
}

/// CloneSet's update order over `candidates` (indexes into `pods`, the whole population):
/// active-pods order, then the priority strategy (stable), then the scatter strategy, then
/// `PreparingUpdate` pods first (stable).
pub fn update_order<P: PodView>(
    pods: &[P],
    candidates: &[usize],
    priority: Option<&UpdatePriorityStrategy>,
    scatter: &[UpdateScatterTerm],
) -> Vec<usize> {
    let mut idx: Vec<usize> = candidates
        .iter()
        .copied()
        .filter(|&i| i < pods.len())
        .collect();
    idx.sort_by(|&i, &j| compare_active(&pods[i], &pods[j]).then(i.cmp(&j)));
    if let Some(p) = priority {
        idx = priority_sort(p, pods, idx);
    }
    if !scatter.is_empty() {
        idx = scatter_sort(scatter, pods, idx);
    }
    let preparing = |i: usize| lifecycle_state(&pods[i]) == Some(LifecycleState::PreparingUpdate);
    idx.sort_by_key(|&i| !preparing(i));
    idx
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::keys::{POD_DELETION_COST_KEY, SPECIFIED_DELETE_KEY};
    use crate::pods::testutil::*;
    use k8s_openapi::api::core::v1::Pod;
    use proptest::prelude::*;

    fn names(pods: &[Pod], idx: &[usize]) -> Vec<String> {
        idx.iter()
            .map(|&i| pods[i].metadata.name.clone().unwrap())
            .collect()
    }

    #[test]
    fn deletion_order_table() {
        let base = || pod("x").node("n1").ready_at(100).created(0);
        // Each case: (pod deleted first, pod deleted later, reason)
        let cases: Vec<(P, P, &str)> = vec![
            (
                base().label(SPECIFIED_DELETE_KEY, "true"),
                pod("x").phase("Pending"),
                "specified first",
            ),
            (pod("x").phase("Running"), base(), "unscheduled < scheduled"),
            (
                base().phase("Pending"),
                base().phase("Unknown"),
                "Pending < Unknown",
            ),
            (
                base().phase("Unknown"),
                base().phase("Running"),
                "Unknown < Running",
            ),
            (
                base().cond("Ready", "False", Some(5)),
                base(),
                "not ready < ready",
            ),
            (
                base().annotation(POD_DELETION_COST_KEY, "-5"),
                base(),
                "lower cost first",
            ),
            (
                base().annotation(POD_DELETION_COST_KEY, "10"),
                base().annotation(POD_DELETION_COST_KEY, "20"),
                "lower cost first",
            ),
            (
                base().annotation(POD_DELETION_COST_KEY, "+50"),
                base().annotation(POD_DELETION_COST_KEY, "1"),
                "'+50' invalid = 0",
            ),
            (
                base().annotation(POD_DELETION_COST_KEY, "050"),
                base().annotation(POD_DELETION_COST_KEY, "1"),
                "'050' invalid = 0",
            ),
            (
                base().ready_at(200),
                base().ready_at(100),
                "ready shorter first",
            ),
            (
                base().restarts(3),
                base().restarts(1),
                "more restarts first",
            ),
            (base().created(50), base().created(10), "newer first"),
        ];
        for (first, later, why) in cases {
            let mut first = first;
            first.0.metadata.name = Some("z-first".into());
            let mut later = later;
            later.0.metadata.name = Some("a-later".into());
            let pods = vec![later.0, first.0];
            let order = deletion_order(&pods, &BTreeSet::new());
            assert_eq!(names(&pods, &order), ["z-first", "a-later"], "{why}");
        }
        // podsToDelete counts as specified
        let pods = vec![base().0, {
            let mut p = pod("y").phase("Pending");
            p.0.metadata.name = Some("y".into());
            p.0
        }];
        let mut pods = pods;
        pods[0].metadata.name = Some("victim".into());
        let order = deletion_order(&pods, &BTreeSet::from(["victim".to_string()]));
        assert_eq!(names(&pods, &order), ["victim", "y"]);
        // full tie: by name
        let pods = vec![pod("b").0, pod("a").0];
        assert_eq!(
            names(&pods, &deletion_order(&pods, &BTreeSet::new())),
            ["a", "b"]
        );
    }

    #[test]
    fn update_order_preparing_update_first() {
        let pods = vec![
            pod("a").node("n").ready_at(10).0,
            pod("b")
                .node("n")
                .ready_at(10)
                .label("lifecycle.apps.kruise.io/state", "PreparingUpdate")
                .0,
            pod("c").0,
        ];
        let order = update_order(&pods, &[0, 1, 2], None, &[]);
        assert_eq!(names(&pods, &order), ["b", "c", "a"]);
    }

    fn arb_pod() -> impl Strategy<Value = Pod> {
        (
            0u8..3,
            any::<bool>(),
            prop::option::of(0i64..5),
            -2i32..3,
            0i32..3,
            prop::option::of(0i64..5),
            0u8..6,
            any::<bool>(),
        )
            .prop_map(
                |(phase, sched, ready, cost, restarts, created, name, spec)| {
                    let mut p = pod(&format!("p{name}"))
                        .phase(["Pending", "Unknown", "Running"][phase as usize])
                        .annotation(POD_DELETION_COST_KEY, &cost.to_string())
                        .restarts(restarts);
                    if sched {
                        p = p.node("n");
                    }
                    if let Some(r) = ready {
                        p = p.ready_at(r);
                    }
                    if let Some(c) = created {
                        p = p.created(c);
                    }
                    if spec {
                        p = p.label(SPECIFIED_DELETE_KEY, "true");
                    }
                    p.0
                },
            )
    }

    proptest! {
        #[test]
        fn deletion_compare_is_total_order(a in arb_pod(), b in arb_pod(), c in arb_pod()) {
            let s = BTreeSet::new();
            let ab = compare_for_deletion(&a, &b, &s);
            prop_assert_eq!(ab, compare_for_deletion(&b, &a, &s).reverse());
            if ab != Ordering::Greater && compare_for_deletion(&b, &c, &s) != Ordering::Greater {
                prop_assert!(compare_for_deletion(&a, &c, &s) != Ordering::Greater);
            }
            let ab = compare_active(&a, &b);
            prop_assert_eq!(ab, compare_active(&b, &a).reverse());
            if ab != Ordering::Greater && compare_active(&b, &c) != Ordering::Greater {
                prop_assert!(compare_active(&a, &c) != Ordering::Greater);
            }
        }

        #[test]
        fn orders_are_permutations_and_input_order_independent(pods in prop::collection::vec(arb_pod(), 0..10)) {
            let s = BTreeSet::new();
            let o = deletion_order(&pods, &s);
            let mut sorted = o.clone();
            sorted.sort();
            prop_assert_eq!(sorted, (0..pods.len()).collect::<Vec<_>>());
            let mut rev = pods.clone();
            rev.reverse();
            let o2 = deletion_order(&rev, &s);
            // Same sequence of pods whatever the input order (keys equal => identical pods).
            let a: Vec<_> = o.iter().map(|&i| serde_json::to_string(&pods[i]).unwrap()).collect();
            let b: Vec<_> = o2.iter().map(|&i| serde_json::to_string(&rev[i]).unwrap()).collect();
            prop_assert_eq!(a, b);
            let all: Vec<usize> = (0..pods.len()).collect();
            let u = update_order(&pods, &all, None, &[]);
            let mut us = u.clone();
            us.sort();
            prop_assert_eq!(us, all);
        }
    }
}
