//! Property tests: random specs, template and replica changes, crashing pods, pods stuck
//! Terminating, orphaned pods (adopted again) and reserved ordinals, driven through many reconciles; every plan is checked
//! against the bounds on the state it saw.

use super::*;
use kruise_core::api::intstr::value_from_int_or_percent;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Event {
    Image(u8),
    Replicas(i32),
    Break(u8),
    Heal,
    Stick(u8),
    Reserve(Vec<i32>),
    Partition(i32),
    Orphan(u8),
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        (1u8..4).prop_map(Event::Image),
        (0i32..6).prop_map(Event::Replicas),
        (0u8..6).prop_map(Event::Break),
        Just(Event::Heal),
        (0u8..6).prop_map(Event::Stick),
        proptest::collection::vec(0i32..6, 0..3).prop_map(Event::Reserve),
        (0i32..4).prop_map(Event::Partition),
        (0u8..6).prop_map(Event::Orphan),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    parallel: bool,
    in_place: bool,
    max_unavailable: i32,
    replicas: i32,
    events: Vec<(usize, Event)>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        any::<bool>(),
        any::<bool>(),
        1i32..4,
        0i32..6,
        proptest::collection::vec((0usize..40, event()), 0..10),
    )
        .prop_map(
            |(parallel, in_place, max_unavailable, replicas, events)| Case {
                parallel,
                in_place,
                max_unavailable: if parallel { max_unavailable } else { 1 },
                replicas,
                events,
            },
        )
}

/// The bounds one plan must respect, on the world it was planned from.
fn check(w: &World, p: &Plan) -> Result<(), TestCaseError> {
    let set = &w.set;
    let reserved = ReservedOrdinals::from_spec(&set.spec.reserve_ordinals);
    let window = reserved.replica_ordinals(0, i64::from(set.replicas()));
    let ready = |n: &str| w.pods.contains_key(n) && w.is_ready(n);
    for name in creates(p) {
        let ordinal = ordinal_of("demo", &name).unwrap();
        prop_assert!(!w.pods.contains_key(&name), "{name} has a pod already");
        prop_assert!(
            !reserved.contains(ordinal),
            "reserved ordinal {ordinal} got a pod"
        );
        prop_assert!(window.contains(&ordinal), "{name} outside the window");
        if !set.spec.is_parallel() {
            prop_assert_eq!(creates(p).len(), 1);
            // Never two ordinals in flight: every lower ordinal is up and ready.
            for lower in window.iter().filter(|o| **o < ordinal) {
                prop_assert!(
                    ready(&pod_name("demo", *lower)),
                    "created {} while demo-{} is not ready",
                    name,
                    lower
                );
            }
        }
    }
    let rolling = set
        .spec
        .update_strategy
        .rolling_update
        .clone()
        .unwrap_or_default();
    let max = usize::try_from(
        value_from_int_or_percent(
            rolling.max_unavailable.as_ref().unwrap(),
            window.len() as i32,
            false,
        )
        .unwrap()
        .max(1),
    )
    .unwrap();
    let mut targets: BTreeSet<String> = in_place(p).into_iter().collect();
    targets.extend(
        deletes(p)
            .into_iter()
            .filter(|(_, r)| matches!(r, DeleteReason::Update | DeleteReason::SpecifiedDelete))
            .map(|(n, _)| n),
    );
    let partition = usize::try_from(rolling.partition.unwrap_or(0)).unwrap();
    // Partition counts window positions: the lowest `partition` ordinals stay.
    for name in &targets {
        let ordinal = ordinal_of("demo", name).unwrap();
        let position = window.iter().position(|o| *o == ordinal).unwrap();
        prop_assert!(
            position >= partition,
            "{name} is below partition {partition}"
        );
    }
    if !targets.is_empty() {
        let mut unavailable: BTreeSet<String> = window
            .iter()
            .map(|o| pod_name("demo", *o))
            .filter(|n| !ready(n))
            .collect();
        let before = unavailable.len();
        unavailable.extend(targets.iter().cloned());
        prop_assert!(
            unavailable.len() <= max.max(before),
            "{} unavailable with {targets:?} updated, max {max}",
            unavailable.len()
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn bounds_hold_through_random_changes(c in case()) {
        let policy = if c.in_place { "InPlaceIfPossible" } else { "ReCreate" };
        let set = statefulset("v0", json!({
            "replicas": c.replicas,
            "podManagementPolicy": if c.parallel { "Parallel" } else { "OrderedReady" },
            "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": policy, "maxUnavailable": c.max_unavailable}},
        }));
        let mut w = World::new(set);
        for step in 0..48 {
            for (_, e) in c.events.iter().filter(|(at, _)| *at == step) {
                match e {
                    Event::Image(v) => w.set_image(&format!("v{v}")),
                    Event::Replicas(r) => w.set.spec.replicas = Some(*r),
                    Event::Break(o) => { w.broken.insert(pod_name("demo", i64::from(*o))); }
                    Event::Heal => { w.broken.clear(); w.stuck.clear(); }
                    Event::Stick(o) => { w.stuck.insert(pod_name("demo", i64::from(*o))); }
                    Event::Reserve(r) => w.set.spec.reserve_ordinals = r.iter().map(|o| IntOrString::Int(*o)).collect(),
                    Event::Partition(p) => w.set.spec.update_strategy.rolling_update.as_mut().unwrap().partition = Some(*p),
                    Event::Orphan(o) => {
                        if let Some(p) = w.pods.get_mut(&pod_name("demo", i64::from(*o))) {
                            p.metadata.owner_references = None;
                        }
                    }
                }
            }
            // A stuck pod finishes terminating after a while.
            if step % 7 == 6 {
                let gone: Vec<String> = w.pods.iter().filter(|(_, p)| p.metadata.deletion_timestamp.is_some()).map(|(n, _)| n.clone()).collect();
                for n in gone { w.pods.remove(&n); }
            }
            let p = w.plan();
            check(&w, &p)?;
            w.apply(&p);
            w.kubelet();
            w.now += SignedDuration::from_secs(2);
        }
        // Healed, the set converges: every window ordinal ready, the update done above the partition.
        w.broken.clear();
        w.stuck.clear();
        w.pods.retain(|_, p| p.metadata.deletion_timestamp.is_none());
        for _ in 0..60 {
            let p = w.plan();
            check(&w, &p)?;
            w.apply(&p);
            w.kubelet();
            w.now += SignedDuration::from_secs(2);
        }
        let reserved = ReservedOrdinals::from_spec(&w.set.spec.reserve_ordinals);
        let window: Vec<String> = reserved.replica_ordinals(0, i64::from(w.set.replicas())).into_iter().map(|o| pod_name("demo", o)).collect();
        prop_assert_eq!(w.names(), { let mut v = window.clone(); v.sort(); v });
        let partition = usize::try_from(w.set.spec.update_strategy.rolling_update.as_ref().unwrap().partition.unwrap_or(0)).unwrap();
        let update = w.update_revision();
        for (position, name) in window.iter().enumerate() {
            prop_assert!(w.is_ready(name), "{} not ready", name);
            if position >= partition {
                prop_assert_eq!(w.revision_of(name), update.clone(), "{} not updated", name);
            }
        }
    }
}

/// The owner references one plan writes on claims, checked against the policy and the
/// window the plan saw: a pod's reference only on a claim of a condemned ordinal with
/// `whenScaled: Delete` (a claim in the window never goes with its pod), the set's only
/// with `whenDeleted: Delete`.
fn check_claim_owners(w: &World, p: &Plan, retention: Retention) -> Result<(), TestCaseError> {
    let reserved = ReservedOrdinals::from_spec(&w.set.spec.reserve_ordinals);
    let window = reserved.replica_ordinals(0, i64::from(w.set.replicas()));
    for action in &p.actions {
        let Action::SetClaimOwners {
            pod,
            owner_references,
            ..
        } = action
        else {
            continue;
        };
        let ordinal = ordinal_of("demo", pod).unwrap();
        for owner in owner_references {
            match owner.kind.as_str() {
                "Pod" => prop_assert!(
                    retention.delete_when_scaled && !window.contains(&ordinal),
                    "{pod}'s claim given its pod with {retention:?}, window {window:?}"
                ),
                "StatefulSet" => prop_assert!(retention.delete_with_set),
                other => prop_assert!(false, "unexpected owner kind {other}"),
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn claim_retention_follows_the_policy_through_random_scaling(
        c in case(),
        delete_with_set in any::<bool>(),
        delete_when_scaled in any::<bool>(),
    ) {
        let word = |delete: bool| if delete { "Delete" } else { "Retain" };
        let set = statefulset("v0", json!({
            "replicas": c.replicas,
            "podManagementPolicy": if c.parallel { "Parallel" } else { "OrderedReady" },
            "persistentVolumeClaimRetentionPolicy": {
                "whenDeleted": word(delete_with_set), "whenScaled": word(delete_when_scaled)},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
        }));
        let retention = Retention { delete_with_set, delete_when_scaled };
        let mut w = World::new(set);
        for step in 0..48 {
            for (_, e) in c.events.iter().filter(|(at, _)| *at == step) {
                match e {
                    Event::Replicas(r) => w.set.spec.replicas = Some(*r),
                    Event::Stick(o) => { w.stuck.insert(pod_name("demo", i64::from(*o))); }
                    Event::Heal => { w.broken.clear(); w.stuck.clear(); }
                    Event::Reserve(r) => w.set.spec.reserve_ordinals = r.iter().map(|o| IntOrString::Int(*o)).collect(),
                    _ => {}
                }
            }
            if step % 7 == 6 {
                w.pods.retain(|_, p| p.metadata.deletion_timestamp.is_none());
                w.collect_garbage();
            }
            let p = w.plan();
            check(&w, &p)?;
            check_claim_owners(&w, &p, retention)?;
            w.apply(&p);
            w.kubelet();
            w.now += SignedDuration::from_secs(2);
        }
        w.stuck.clear();
        w.pods.retain(|_, p| p.metadata.deletion_timestamp.is_none());
        w.collect_garbage();
        for _ in 0..60 {
            let p = w.plan();
            check_claim_owners(&w, &p, retention)?;
            w.apply(&p);
            w.kubelet();
            w.now += SignedDuration::from_secs(2);
        }
        // Converged: every window pod has its claim, carrying the set's reference exactly
        // when whenDeleted is Delete and never its pod's.
        let reserved = ReservedOrdinals::from_spec(&w.set.spec.reserve_ordinals);
        for ordinal in reserved.replica_ordinals(0, i64::from(w.set.replicas())) {
            let claim = format!("data-demo-{ordinal}");
            prop_assert!(w.claims.contains_key(&claim), "{} missing", claim);
            prop_assert_eq!(
                w.claim_owners(&claim),
                if delete_with_set { vec!["sts-uid".to_string()] } else { vec![] },
                "{}", claim
            );
        }
    }
}
