//! `priorityStrategy` and `scatterStrategy` update sorters (OpenKruise `pkg/util/updatesort`).

use super::PodView;
use super::selector::selector_matches_by;
use crate::api::strategy::{UpdatePriorityStrategy, UpdateScatterTerm};

/// Sum of the weights of the weight terms whose selector matches (invalid selectors skipped).
pub fn weight_priority<'l>(
    strategy: &UpdatePriorityStrategy,
    label: impl Fn(&str) -> Option<&'l str>,
) -> i64 {
    strategy
        .weight_priority
        .iter()
        .filter(|t| selector_matches_by(&t.match_selector, &label).unwrap_or(false))
        .map(|t| i64::from(t.weight))
        .sum()
}

/// `(level, order)` for order terms: level = index of the first term whose key the pod
/// carries, order = trailing integer of its value. Pods carrying none get level −1 — which
/// sorts them **before** keyed pods (OpenKruise's behaviour, contrary to its API comment).
pub fn order_priority<'l>(
    strategy: &UpdatePriorityStrategy,
    label: impl Fn(&str) -> Option<&'l str>,
) -> (i64, i64) {
    for (i, t) in strategy.order_priority.iter().enumerate() {
        if let Some(v) = label(&t.ordered_key) {
            return (i as i64, int_suffix(v));
        }
    }
    (-1, 0)
}

/// The trailing decimal integer of a value (`sts-10` -> 10); none or overflow -> 0.
pub fn int_suffix(v: &str) -> i64 {
    let digits = v.bytes().rev().take_while(u8::is_ascii_digit).count();
    v[v.len() - digits..].parse().unwrap_or(0)
}

/// Stable sort of `indexes` by the priority strategy: higher weight first, or lower level then
/// larger order first. Equal priorities keep their relative order.
pub fn priority_sort<P: PodView>(
    strategy: &UpdatePriorityStrategy,
    pods: &[P],
    mut indexes: Vec<usize>,
) -> Vec<usize> {
    if !strategy.weight_priority.is_empty() {
        indexes.sort_by_cached_key(|&i| {
            std::cmp::Reverse(weight_priority(strategy, |k| pods[i].label(k)))
        });
    } else if !strategy.order_priority.is_empty() {
        indexes.sort_by_cached_key(|&i| {
            let (level, order) = order_priority(strategy, |k| pods[i].label(k));
            (level, std::cmp::Reverse(order))
        });
    }
    indexes
}

fn matches<P: PodView + ?Sized>(p: &P, t: &UpdateScatterTerm) -> bool {
    p.label(&t.key) == Some(t.value.as_str())
}

/// Terms used for this sort: with one term, that term; with more, only terms present among the
/// candidates, ordered by the number of matching candidates (descending, stable).
fn scatter_terms<P: PodView>(
    strategy: &[UpdateScatterTerm],
    pods: &[P],
    indexes: &[usize],
) -> Vec<UpdateScatterTerm> {
    if strategy.len() == 1 {
        return strategy.to_vec();
    }
    let mut terms: Vec<(UpdateScatterTerm, usize)> = Vec::new();
    for t in strategy {
        let n = indexes.iter().filter(|&&i| matches(&pods[i], t)).count();
        if n > 0 && !terms.iter().any(|(x, _)| x == t) {
            terms.push((t.clone(), n));
        }
    }
    terms.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    terms.into_iter().map(|(t, _)| t).collect()
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Group {
    num: usize,
    matched_size: usize,
    unmatched_size: usize,
    unmatched_remainder: usize,
}

fn go_round(v: f64) -> usize {
    // Go's math.Round: half away from zero; inputs here are positive.
    v.round().max(0.0) as usize
}

fn new_group(matched: usize, unmatched: usize) -> Group {
    let num = matched.min(unmatched).max(1);
    Group {
        num,
        matched_size: go_round(matched as f64 / num as f64).max(1),
        unmatched_size: go_round(unmatched as f64 / num as f64).max(1),
        unmatched_remainder: 0,
    }
}

fn group_by_density(total_m: usize, total_u: usize, upd_m: usize, upd_u: usize) -> Group {
    let total = new_group(total_m, total_u);
    let update = new_group(upd_m, upd_u);
    if (total_u as f32) / (total_m.max(1) as f32) >= (upd_u as f32) / (upd_m.max(1) as f32) {
        return update;
    }
    let mut g = Group {
        matched_size: total.matched_size,
        unmatched_size: total.unmatched_size,
        ..Group::default()
    };
    g.num = (upd_m / g.matched_size).min(upd_u / g.unmatched_size);
    g.unmatched_remainder = upd_u.saturating_sub(g.num * g.unmatched_size);
    g
}

fn scatter_by_term<P: PodView>(
    t: &UpdateScatterTerm,
    pods: &[P],
    indexes: Vec<usize>,
) -> Vec<usize> {
    let (mut matched, mut unmatched): (Vec<usize>, Vec<usize>) =
        indexes.iter().partition(|&&i| matches(&pods[i], t));
    if matched.len() <= 1 || unmatched.len() <= 1 {
        return indexes;
    }
    let total_m = pods.iter().filter(|p| matches(p, t)).count();
    let total_u = pods.len() - total_m;
    let Some(last) = matched.pop() else {
        return indexes;
    };
    let g = group_by_density(
        total_m.saturating_sub(1),
        total_u,
        matched.len(),
        unmatched.len(),
    );
    let mut out = Vec::with_capacity(indexes.len());
    let rem = g.unmatched_remainder.min(unmatched.len());
    out.extend(unmatched.drain(..rem));
    for _ in 0..g.num {
        let m = g.matched_size.min(matched.len());
        out.extend(matched.drain(..m));
        let u = g.unmatched_size.min(unmatched.len());
        out.extend(unmatched.drain(..u));
    }
    out.append(&mut matched);
    out.append(&mut unmatched);
    out.push(last);
    out
}

/// Scatter `indexes` (candidates, indexes into `pods`, the whole population) so pods matching
/// each term are spread through the update order instead of updated together.
pub fn scatter_sort<P: PodView>(
    strategy: &[UpdateScatterTerm],
    pods: &[P],
    mut indexes: Vec<usize>,
) -> Vec<usize> {
    if strategy.is_empty() || indexes.len() <= 1 {
        return indexes;
    }
    for t in scatter_terms(strategy, pods, &indexes) {
        indexes = scatter_by_term(&t, pods, indexes);
    }
    indexes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::strategy::{UpdatePriorityOrderTerm, UpdatePriorityWeightTerm};
    use crate::pods::LabelsAndFinalizers as _;
    use crate::pods::testutil::pod;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn names(pods: &[Pod], idx: &[usize]) -> Vec<String> {
        idx.iter()
            .map(|&i| pods[i].metadata.name.clone().unwrap())
            .collect()
    }

    fn weight(w: i32, k: &str, v: &str) -> UpdatePriorityWeightTerm {
        UpdatePriorityWeightTerm {
            weight: w,
            match_selector: LabelSelector {
                match_labels: Some(BTreeMap::from([(k.to_string(), v.to_string())])),
                ..Default::default()
            },
        }
    }

    #[test]
    fn weight_priority_sorts_by_sum_stably() {
        let pods = vec![
            pod("a").0,
            pod("b").label("k", "v1").0,
            pod("c").label("k", "v1").label("x", "y").0,
            pod("d").label("x", "y").0,
            pod("e").0,
        ];
        let s = UpdatePriorityStrategy {
            weight_priority: vec![weight(50, "k", "v1"), weight(30, "x", "y")],
            ..Default::default()
        };
        let o = priority_sort(&s, &pods, (0..5).collect());
        assert_eq!(names(&pods, &o), ["c", "b", "d", "a", "e"]);
    }

    #[test]
    fn order_priority_levels_and_suffix() {
        let pods = vec![
            pod("k2-1").label("key2", "sts-1").0,
            pod("k1-5").label("key1", "5").0,
            pod("k1-10").label("key1", "sts-10").0,
            pod("none").0,
            pod("k1-x").label("key1", "abc").0,
        ];
        let s = UpdatePriorityStrategy {
            order_priority: vec![
                UpdatePriorityOrderTerm {
                    ordered_key: "key1".into(),
                },
                UpdatePriorityOrderTerm {
                    ordered_key: "key2".into(),
                },
            ],
            ..Default::default()
        };
        let o = priority_sort(&s, &pods, (0..5).collect());
        // pods without any key sort first (OpenKruise quirk); larger suffix first within a level
        assert_eq!(names(&pods, &o), ["none", "k1-10", "k1-5", "k1-x", "k2-1"]);
        assert_eq!(int_suffix("sts-10"), 10);
        assert_eq!(int_suffix("abc"), 0);
        assert_eq!(int_suffix("99999999999999999999999"), 0);
    }

    #[test]
    fn scatter_interleaves_matched() {
        // 6 pods, 3 in zone a: the matched ones should not all come first.
        let pods: Vec<Pod> = (0..6)
            .map(|i| {
                pod(&format!("p{i}"))
                    .label("zone", if i < 3 { "a" } else { "b" })
                    .0
            })
            .collect();
        let terms = vec![UpdateScatterTerm {
            key: "zone".into(),
            value: "a".into(),
        }];
        let o = scatter_sort(&terms, &pods, (0..6).collect());
        assert_eq!(names(&pods, &o), ["p0", "p3", "p4", "p1", "p5", "p2"]);
        // one matched candidate: unchanged
        let o = scatter_sort(&terms, &pods, vec![0, 3, 4]);
        assert_eq!(o, vec![0, 3, 4]);
    }

    proptest! {
        #[test]
        fn sorters_are_permutations(zones in prop::collection::vec(0u8..3, 0..12), w in 0i32..100) {
            let pods: Vec<Pod> = zones.iter().enumerate()
                .map(|(i, z)| pod(&format!("p{i}")).label("zone", &format!("z{z}")).label("k", &format!("v-{}", i % 4)).0)
                .collect();
            let all: Vec<usize> = (0..pods.len()).collect();
            let terms = vec![
                UpdateScatterTerm { key: "zone".into(), value: "z0".into() },
                UpdateScatterTerm { key: "zone".into(), value: "z1".into() },
            ];
            let mut s = scatter_sort(&terms, &pods, all.clone());
            s.sort();
            prop_assert_eq!(&s, &all);
            let strat = UpdatePriorityStrategy { weight_priority: vec![weight(w, "zone", "z1")], ..Default::default() };
            let p = priority_sort(&strat, &pods, all.clone());
            // stable: among equal weights, index order is kept
            for win in p.windows(2) {
                let wa = weight_priority(&strat, |k| pods[win[0]].label(k));
                let wb = weight_priority(&strat, |k| pods[win[1]].label(k));
                prop_assert!(wa > wb || (wa == wb && win[0] < win[1]));
            }
            let strat = UpdatePriorityStrategy { order_priority: vec![UpdatePriorityOrderTerm { ordered_key: "k".into() }], ..Default::default() };
            let mut q = priority_sort(&strat, &pods, all.clone());
            q.sort();
            prop_assert_eq!(q, all);
        }
    }
}
