//! What one plan holds at most: a large scale-up or rollout goes on over several
//! reconciles, so the controller never holds thousands of pods' writes at once.

use super::*;

/// Writes to pods that exist (everything but creations).
fn existing_pod_writes(p: &Plan) -> usize {
    p.actions
        .iter()
        .filter(|a| a.pod_name().is_some() && !matches!(a, Action::CreatePod { .. }))
        .count()
}

fn status_writes(p: &Plan) -> usize {
    p.actions
        .iter()
        .filter(|a| matches!(a, Action::UpdatePodStatus { .. }))
        .count()
}

fn parallel(replicas: usize) -> StatefulSet {
    statefulset(
        "nginx:1",
        json!({"replicas": replicas, "podManagementPolicy": "Parallel",
               "updateStrategy": {"rollingUpdate": {"maxUnavailable": "100%",
                                                    "podUpdatePolicy": "InPlaceIfPossible"}}}),
    )
}

#[test]
fn a_parallel_scale_up_creates_at_most_500_pods_per_plan_in_ascending_ordinals() {
    let mut w = World::new(parallel(1_200));
    let batches: Vec<Vec<String>> = (0..3).map(|_| creates(&w.step())).collect();
    let expected = |range: std::ops::Range<usize>| -> Vec<String> {
        range.map(|o| format!("demo-{o}")).collect()
    };
    assert_eq!(batches[0], expected(0..500));
    assert_eq!(batches[1], expected(500..1_000));
    assert_eq!(batches[2], expected(1_000..1_200));
    assert!(w.created.values().all(|n| *n == 1), "no pod created twice");
    w.settle(10);
    assert_eq!(w.pods.len(), 1_200);
    assert!(w.pods.keys().all(|name| w.is_ready(name)));
}

#[test]
fn refreshes_and_in_place_updates_write_at_most_1000_existing_pods_per_plan() {
    let mut w = World::ready(parallel(1_200));
    assert!(w.pods.keys().all(|name| w.is_ready(name)));
    // Every pod lost its InPlaceUpdateReady condition (as new pods have none) and the
    // template changed: the refresh writes come first, 1,000 at a time, and the update
    // waits for them.
    for pod in w.pods.values_mut() {
        if let Some(conditions) = pod.status.as_mut().and_then(|s| s.conditions.as_mut()) {
            conditions.retain(|c| c.type_ != "InPlaceUpdateReady");
        }
    }
    w.set_image("nginx:2");
    let first = w.plan();
    assert_eq!(status_writes(&first), 1_000);
    assert!(in_place(&first).is_empty(), "{:?}", in_place(&first));
    w.apply(&first);
    // The other 200 (the highest ordinals) now, and the update within what is left of the
    // plan's 1,000 writes, from the highest ordinal not written by this plan down.
    let second = w.plan();
    assert_eq!(status_writes(&second), 200);
    let updated = in_place(&second);
    let expected: Vec<String> = (200..1_000).rev().map(|o| format!("demo-{o}")).collect();
    assert_eq!(updated, expected);
    assert_eq!(existing_pod_writes(&second), 1_000);
    w.apply(&second);
    w.kubelet();
    w.now += SignedDuration::from_secs(2);
    w.settle(20);
    let update = w.update_revision();
    assert!(w.pods.keys().all(|name| w.revision_of(name) == update));
    assert!(w.pods.keys().all(|name| w.is_ready(name)));
    for plan in &w.plans {
        assert!(existing_pod_writes(plan) <= 1_000);
    }
}
