//! The Scale step (OpenKruise `sync/cloneset_scale.go`): rescue PreparingDelete pods, create,
//! finish pre-deleting pods, specified deletes, then scale-in — returning as soon as something
//! changed.

use kruise_core::pods::{CachedPod, PodView as _};
use std::cmp::Ordering;
use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kruise_core::api::LifecycleState;
use kruise_core::pods::lifecycle::{Intent, PodHookView, decide, state_patch};
use kruise_core::pods::{
    deletion_cost, is_pod_ready, is_scheduled, lifecycle_state, max_container_restarts, ready_since,
};

use super::diffs::{at_revision, calculate_diffs, is_available, is_ready, is_specified_delete};
use super::pods::{
    available_ids, name_of, name_of_revision, new_pod, new_pvcs, pvcs_of, template_for,
};
use super::{Action, EventRecord, Plan, PlanError, PlanInput};

/// Runs Scale; returns whether it changed anything (then Update is skipped).
pub fn scale(
    input: &PlanInput<'_>,
    pods: &[&CachedPod],
    pvcs: &[PersistentVolumeClaim],
    out: &mut Plan,
    _errors: &mut Vec<PlanError>,
) -> bool {
    let cs = input.cloneset;
    let now = input.now;
    let replicas = cs.spec.replicas.unwrap_or(1);
    let update_rev = name_of_revision(input.update_revision);
    let current_rev = name_of_revision(input.current_revision);
    let lifecycle = cs.spec.lifecycle.as_ref();

    // Planned deletions: specified and/or already PreparingDelete (counted once).
    let specified: Vec<&CachedPod> = pods
        .iter()
        .copied()
        .filter(|p| is_specified_delete(cs, p))
        .collect();
    let pre_deleting: Vec<&CachedPod> = pods
        .iter()
        .copied()
        .filter(|p| lifecycle_state(p) == Some(LifecycleState::PreparingDelete))
        .collect();
    let num_to_delete = i32::try_from(
        pods.iter()
            .filter(|p| {
                is_specified_delete(cs, p)
                    || lifecycle_state(p) == Some(LifecycleState::PreparingDelete)
            })
            .count(),
    )
    .unwrap_or(i32::MAX);

    // 1. Rescue PreparingDelete pods back to PreparingNormal when replicas are missing (never
    //    with markPodNotReady hooks, never a pod the user asked to delete).
    let mark_not_ready = lifecycle.is_some_and(|l| {
        l.pre_delete.as_ref().is_some_and(|h| h.mark_pod_not_ready)
            || l.in_place_update
                .as_ref()
                .is_some_and(|h| h.mark_pod_not_ready)
    });
    if !mark_not_ready {
        let mut missing = i64::from(replicas) - i64::try_from(pods.len()).unwrap_or(i64::MAX)
            + i64::from(num_to_delete);
        let mut modified = false;
        for pod in &pre_deleting {
            if missing <= 0 {
                break;
            }
            if is_specified_delete(cs, pod) {
                continue;
            }
            out.actions.push(Action::SetLifecycleState {
                name: name_of(pod).to_string(),
                patch: state_patch(LifecycleState::PreparingNormal, now, None),
                not_ready: None,
                status: None,
            });
            modified = true;
            missing -= 1;
        }
        if modified {
            return true;
        }
    }

    let is_new = |p: &CachedPod| {
        kruise_core::pods::is_pod_updated(p, update_rev, input.gates.preparing_update_as_update)
    };
    let diffs = calculate_diffs(
        cs,
        pods,
        current_rev,
        update_rev,
        &is_new,
        input.gates.partition_rollback,
        input.gates.exclude_preparing_delete,
        now,
    );

    if diffs.scale_up_num > diffs.scale_up_limit {
        out.events.push(EventRecord::warning(
            "ScaleUpLimited",
            format!(
                "scaleUp is limited because of scaleStrategy.maxUnavailable, limit: {}",
                diffs.scale_up_limit
            ),
        ));
    }

    // 2. Scale out.
    if diffs.scale_up_num > 0 {
        let creations = usize::try_from(diffs.scale_up_limit.max(0))
            .unwrap_or(0)
            .min(super::MAX_CREATIONS_PER_PLAN);
        let ids = available_ids(creations, pods, pvcs, input.instance_ids);
        let old_creations = usize::try_from(diffs.scale_up_num_old_revision.max(0)).unwrap_or(0);
        let existing: std::collections::BTreeSet<String> = pvcs
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        let mut created = false;
        for (i, id) in ids.iter().enumerate() {
            let revision = if i < old_creations {
                input.current_revision
            } else {
                input.update_revision
            };
            let Some(template) = template_for(cs, revision, update_rev) else {
                continue;
            };
            let pod = new_pod(
                cs,
                &template,
                name_of_revision(revision),
                id,
                input.gates.short_hash,
                now,
            );
            let claims = new_pvcs(cs, id)
                .into_iter()
                .filter(|c| {
                    c.metadata
                        .name
                        .as_ref()
                        .is_none_or(|n| !existing.contains(n))
                })
                .collect();
            out.actions.push(Action::CreatePod {
                pod: Box::new(pod),
                pvcs: claims,
            });
            created = true;
        }
        return created;
    }

    // 3. Pods already PreparingDelete: delete those whose preDelete hook is gone.
    let mut modified = false;
    for pod in &pre_deleting {
        modified |= delete_pod(input, pod, pvcs, out);
    }
    if modified {
        return true;
    }

    // 4. Specified deletes (not already pre-deleting): unready ones always, ready ones within
    //    the budget.
    let mut ready_budget = diffs.delete_ready_limit;
    let mut modified = false;
    for pod in specified
        .iter()
        .filter(|p| lifecycle_state(p) != Some(LifecycleState::PreparingDelete))
    {
        if is_ready(pod, now) {
            if ready_budget <= 0 {
                continue;
            }
            ready_budget -= 1;
        }
        modified |= delete_pod(input, pod, pvcs, out);
    }
    if modified {
        return true;
    }

    // 5. Scale in, only when nothing is specified or pre-deleting.
    if diffs.scale_down_num > 0 {
        if num_to_delete > 0 {
            return false;
        }
        let (updated, not_updated): (Vec<&CachedPod>, Vec<&CachedPod>) =
            pods.iter().partition(|p| at_revision(p, update_rev));
        let victims = choose_pods_to_delete(
            cs.spec.min_ready_seconds,
            now,
            diffs.scale_down_num,
            diffs.scale_down_num_old_revision,
            not_updated,
            updated,
        );
        let mut modified = false;
        for pod in victims {
            if is_ready(pod, now) {
                if ready_budget <= 0 {
                    continue;
                }
                ready_budget -= 1;
            }
            modified |= delete_pod(input, pod, pvcs, out);
        }
        return modified;
    }
    false
}

/// `deletePods` for one pod: a matching preDelete hook moves it to PreparingDelete instead.
fn delete_pod(
    input: &PlanInput<'_>,
    pod: &CachedPod,
    pvcs: &[PersistentVolumeClaim],
    out: &mut Plan,
) -> bool {
    let view: PodHookView<'_> = pod;
    let decision = match decide(
        lifecycle_state(pod),
        input.cloneset.spec.lifecycle.as_ref(),
        view,
        Intent::Delete,
    ) {
        Ok(d) => d,
        Err(_) => return false,
    };
    if decision.proceed {
        out.actions.push(Action::DeletePod {
            name: name_of(pod).to_string(),
            pvcs: pvcs_of(pod, pvcs),
        });
        return true;
    }
    match decision.next {
        Some(state) if lifecycle_state(pod) != Some(state) => {
            out.actions.push(Action::SetLifecycleState {
                name: name_of(pod).to_string(),
                patch: state_patch(state, input.now, None),
                not_ready: decision.not_ready,
                status: None,
            });
            true
        }
        _ => false,
    }
}

/// `choosePodsToDelete`: `old_diff` from the old-revision pods first, the rest from updated
/// pods; within a group sorted by [`compare_victims`] unless the whole group goes.
fn choose_pods_to_delete<'a>(
    min_ready: i32,
    now: Timestamp,
    total: i32,
    old_diff: i32,
    not_updated: Vec<&'a CachedPod>,
    updated: Vec<&'a CachedPod>,
) -> Vec<&'a CachedPod> {
    let choose = |mut group: Vec<&'a CachedPod>, n: i32| -> Vec<&'a CachedPod> {
        let n = usize::try_from(n.max(0)).unwrap_or(0);
        if n < group.len() {
            let ranks = same_node_ranks(&group);
            group.sort_by(|a, b| compare_victims(a, b, &ranks, min_ready, now));
        }
        group.truncate(n);
        group
    };
    if old_diff >= total {
        choose(not_updated, total)
    } else if old_diff > 0 {
        let mut v = choose(not_updated, old_diff);
        v.extend(choose(updated, total - old_diff));
        v
    } else {
        choose(updated, total)
    }
}

/// Same-node ranker: on a node with several of the group's pods, all but the best-placed one
/// get rank `count - i` (higher rank is deleted first).
fn same_node_ranks(pods: &[&CachedPod]) -> BTreeMap<String, f64> {
    let mut by_node: BTreeMap<&str, Vec<&CachedPod>> = BTreeMap::new();
    for p in pods {
        if let Some(node) = p.node_name().filter(|n| !n.is_empty()) {
            by_node.entry(node).or_default().push(p);
        }
    }
    let mut ranks = BTreeMap::new();
    for mut group in by_node.into_values() {
        if group.len() <= 1 {
            continue;
        }
        let empty = BTreeMap::new();
        group.sort_by(|a, b| compare_base(a, b, &empty, None));
        group.pop();
        let n = group.len();
        for (i, p) in group.iter().enumerate() {
            ranks.insert(name_of(p).to_string(), (n - i) as f64);
        }
    }
    ranks
}

fn compare_victims(
    a: &CachedPod,
    b: &CachedPod,
    ranks: &BTreeMap<String, f64>,
    min_ready: i32,
    now: Timestamp,
) -> Ordering {
    compare_base(a, b, ranks, Some((min_ready, now)))
}

/// CloneSet's `ActivePodsWithRanks` order (first is deleted first): unassigned < assigned;
/// Pending < Unknown < Running; not available < available (lifecycle-aware); not ready <
/// ready; lower deletion cost; higher rank; both ready: more recently ready; more restarts;
/// newer.
fn compare_base(
    a: &CachedPod,
    b: &CachedPod,
    ranks: &BTreeMap<String, f64>,
    available: Option<(i32, Timestamp)>,
) -> Ordering {
    let node = |p: &CachedPod| p.node_name().unwrap_or_default().to_string();
    let phase = |p: &CachedPod| match kruise_core::pods::pod_phase(p) {
        "Pending" => 0,
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    };
    let (na, nb) = (node(a), node(b));
    if na != nb && (na.is_empty() || nb.is_empty()) {
        return is_scheduled(a).cmp(&is_scheduled(b));
    }
    let rank = |p: &CachedPod| ranks.get(name_of(p)).copied().unwrap_or(0.0);
    phase(a)
        .cmp(&phase(b))
        .then_with(|| match available {
            Some((m, now)) => is_available(a, m, now).cmp(&is_available(b, m, now)),
            None => Ordering::Equal,
        })
        .then_with(|| is_pod_ready(a).cmp(&is_pod_ready(b)))
        .then_with(|| deletion_cost(a).cmp(&deletion_cost(b)))
        .then_with(|| rank(b).partial_cmp(&rank(a)).unwrap_or(Ordering::Equal))
        .then_with(|| {
            if is_pod_ready(a) && is_pod_ready(b) {
                // More recently ready first.
                later_or_zero_first(ready_since(a), ready_since(b))
            } else {
                Ordering::Equal
            }
        })
        .then_with(|| max_container_restarts(b).cmp(&max_container_restarts(a)))
        .then_with(|| {
            let t = |p: &CachedPod| p.meta().creation_timestamp.as_ref().map(|t| t.0);
            later_or_zero_first(t(a), t(b))
        })
}

/// Go's `afterOrZero`: a missing time sorts first, then the later time.
fn later_or_zero_first(a: Option<Timestamp>, b: Option<Timestamp>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => b.cmp(&a),
    }
}
