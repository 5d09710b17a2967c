//! Property tests: simulate planner -> apply -> kubelet over many steps and random
//! strategies; the bounds hold at every step.

use super::*;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_core::api::keys::{POD_DELETION_COST_KEY, SPECIFIED_DELETE_KEY};
use proptest::prelude::*;

fn ios(max_int: i32) -> impl Strategy<Value = IntOrString> {
    prop_oneof![
        (0..=max_int).prop_map(IntOrString::Int),
        prop_oneof![Just(0), Just(20), Just(34), Just(50), Just(100)]
            .prop_map(|p| IntOrString::String(format!("{p}%"))),
    ]
}

#[derive(Debug, Clone)]
struct Scenario {
    replicas: i32,
    max_unavailable: IntOrString,
    max_surge: IntOrString,
    in_place: bool,
    partition: IntOrString,
    /// (step, broken) template changes.
    changes: Vec<(usize, bool)>,
    /// Pods that crash at some step: (step, pod index).
    crashes: Vec<(usize, usize)>,
    min_ready_seconds: i32,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        1i32..7,
        ios(3),
        ios(2),
        any::<bool>(),
        ios(3),
        proptest::collection::vec((0usize..30, proptest::bool::weighted(0.3)), 1..4),
        proptest::collection::vec((0usize..30, 0usize..7), 0..2),
        prop_oneof![Just(0), Just(3), Just(7)],
    )
        .prop_map(
            |(
                replicas,
                max_unavailable,
                max_surge,
                in_place,
                partition,
                changes,
                crashes,
                min_ready_seconds,
            )| Scenario {
                replicas,
                max_unavailable,
                max_surge,
                in_place,
                partition,
                changes,
                crashes,
                min_ready_seconds,
            },
        )
}

fn build(s: &Scenario) -> CloneSet {
    cloneset(
        "img:0",
        json!({"replicas": s.replicas, "updateStrategy": {"rollingUpdate": {
            "podUpdatePolicy": if s.in_place { "InPlaceIfPossible" } else { "ReCreate" },
            "maxUnavailable": s.max_unavailable, "maxSurge": s.max_surge, "partition": s.partition}},
            "minReadySeconds": s.min_ready_seconds}),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn rollouts_stay_within_max_unavailable_max_surge_and_partition(s in scenario()) {
        let cs = build(&s);
        let (surge, unavailable) = diffs::surge_and_unavailable(&cs);
        // OpenKruise's validation rejects a strategy that cannot make progress.
        prop_assume!(unavailable >= 1 || surge >= 1);
        let partition = diffs::partition(&cs);
        let replicas = s.replicas as usize;
        let mut w = World::with_ready(cs);
        w.now += SignedDuration::from_secs(30);
        prop_assert_eq!(w.available(), replicas);
        let mut image = 0;
        let mut last_broken = false;
        for step in 0..45 {
            for &(at, broken) in &s.changes {
                if at == step {
                    image += 1;
                    let name = format!("img:{image}");
                    if broken {
                        w.broken_images.push(name.clone());
                    }
                    last_broken = broken;
                    w.set_image(&name);
                }
            }
            for &(at, idx) in &s.crashes {
                if at == step && idx < w.pods.len() {
                    let n = w.pods[idx].metadata.name.clone().unwrap();
                    w.broken.push(n);
                }
            }
            let update = rev_name(w.update_revision());
            let available_before = w.available();
            let old_before = w.pods.len() - w.count_at(&update);
            let p = w.plan();
            w.apply(&p);
            prop_assert!(
                w.pods.len() <= replicas + surge as usize,
                "step {}: {} pods > replicas {} + maxSurge {}", step, w.pods.len(), replicas, surge
            );
            let floor = (s.replicas - unavailable).max(0) as usize;
            prop_assert!(
                w.available() >= available_before.min(floor),
                "step {}: available {} (was {}) below replicas - maxUnavailable = {}",
                step, w.available(), available_before, floor
            );
            let old_after = w.pods.len() - w.count_at(&update);
            prop_assert!(
                old_after >= old_before.min(partition as usize),
                "step {}: old pods {} (was {}) crossed partition {}", step, old_after, old_before, partition
            );
            w.kubelet();
            w.now += SignedDuration::from_secs(2);
        }
        // With a good final image and no crashed pods the rollout converges to the partition.
        if !last_broken && s.crashes.is_empty() {
            w.settle(400);
            let update = rev_name(w.update_revision());
            prop_assert_eq!(w.pods.len(), replicas);
            prop_assert_eq!(w.count_at(&update), replicas - partition as usize);
        }
    }

    #[test]
    fn specified_deletes_go_first_and_scale_in_follows_the_documented_order(
        start in 2i32..8,
        shrink in 0i32..4,
        specified in proptest::collection::vec(any::<bool>(), 8),
        broken in proptest::collection::vec(proptest::bool::weighted(0.3), 8),
        costs in proptest::collection::vec(-2i32..3, 8),
        use_pods_to_delete in any::<bool>(),
    ) {
        let mut w = World::with_ready(cloneset("img:0", json!({"replicas": start, "updateStrategy": {"rollingUpdate": {"maxUnavailable": "100%"}}})));
        let names = w.names();
        let mut chosen = Vec::new();
        for (i, n) in names.iter().enumerate() {
            if broken[i] {
                w.broken.push(n.clone());
            }
            w.pod_mut(n).unwrap().metadata.annotations.get_or_insert_with(BTreeMap::new)
                .insert(POD_DELETION_COST_KEY.into(), costs[i].to_string());
            if specified[i] {
                chosen.push(n.clone());
                if use_pods_to_delete {
                    w.cs.spec.scale_strategy.pods_to_delete.push(n.clone());
                } else {
                    w.pod_mut(n).unwrap().metadata.labels.as_mut().unwrap()
                        .insert(SPECIFIED_DELETE_KEY.into(), "true".into());
                }
            }
        }
        w.kubelet();
        w.cs.spec.replicas = Some((start - shrink).max(0));
        let p = w.plan();
        let d = deletes(&p);
        if !chosen.is_empty() {
            // Only specified pods go; scale-in waits until they are gone.
            for n in &d {
                prop_assert!(chosen.contains(n), "deleted {} which was not specified", n);
            }
            prop_assert!(!d.is_empty(), "100% maxUnavailable: specified pods are deleted at once");
        } else {
            // Victims are never better placed than survivors in the documented order.
            let key = |n: &String| {
                let p = w.pod(n);
                (
                    kruise_core::pods::is_scheduled(p),
                    diffs::is_available(p, 0, w.now),
                    kruise_core::pods::is_pod_ready(p),
                    kruise_core::pods::deletion_cost(p),
                )
            };
            prop_assert_eq!(d.len() as i32, shrink.min(start));
            for v in &d {
                for s in names.iter().filter(|n| !d.contains(n)) {
                    prop_assert!(key(v) <= key(s), "deleted {} {:?} before {} {:?}", v, key(v), s, key(s));
                }
            }
        }
    }
}

proptest! {
    #[test]
    fn planner_never_panics_on_extreme_specs(
        replicas in prop_oneof![any::<i32>(), -3i32..10],
        partition in prop_oneof![any::<i32>().prop_map(IntOrString::Int), "[0-9a-z.%-]{0,6}".prop_map(IntOrString::String)],
        mu in prop_oneof![any::<i32>().prop_map(IntOrString::Int), "[0-9a-z.%-]{0,6}".prop_map(IntOrString::String)],
        surge in prop_oneof![any::<i32>().prop_map(IntOrString::Int), "[0-9a-z.%-]{0,6}".prop_map(IntOrString::String)],
        scale_mu in prop_oneof![any::<i32>().prop_map(IntOrString::Int), "[0-9%]{0,4}".prop_map(IntOrString::String)],
        min_ready in any::<i32>(),
        deadline in proptest::option::of(any::<i32>()),
    ) {
        let mut w = World::with_ready(cloneset("img:0", json!({"replicas": 2})));
        w.set_image("img:1");
        w.cs.spec.replicas = Some(replicas);
        w.cs.spec.min_ready_seconds = min_ready;
        w.cs.spec.progress_deadline_seconds = deadline;
        w.cs.spec.scale_strategy.max_unavailable = Some(scale_mu);
        let r = w.cs.spec.update_strategy.rolling_update.as_mut().unwrap();
        r.partition = Some(partition);
        r.max_unavailable = Some(mu);
        r.max_surge = Some(surge);
        // Only a few suffixes: huge replicas counts create at most that many pods.
        let _ = w.plan();
    }
}
