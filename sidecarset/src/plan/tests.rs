use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use proptest::prelude::*;

use super::*;

fn pod(name: &str, ready: bool, labels: &[(&str, &str)]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some("node-a".into()),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

const OLD: PodUpgradeState = PodUpgradeState {
    updated: false,
    upgradable: true,
    consistent: true,
    ready: true,
};

fn ready_pods(n: usize) -> Vec<Pod> {
    (0..n).map(|i| pod(&format!("p{i}"), true, &[])).collect()
}

fn strategy(
    partition: Option<IntOrString>,
    max_unavailable: Option<IntOrString>,
) -> SidecarSetUpdateStrategy {
    SidecarSetUpdateStrategy {
        partition,
        max_unavailable,
        ..Default::default()
    }
}

#[test]
fn one_ready_pod_at_a_time_by_default() {
    let pods = ready_pods(5);
    let plan = next_upgrades(&strategy(None, None), &pods, &[OLD; 5]).unwrap();
    assert_eq!(plan.upgrade.len(), 1);
    assert!(!plan.done);
    // An upgraded pod that is not ready yet uses the budget up.
    let mut states = [OLD; 5];
    states[0] = PodUpgradeState {
        updated: true,
        ready: false,
        ..OLD
    };
    assert!(
        next_upgrades(&strategy(None, None), &pods, &states)
            .unwrap()
            .upgrade
            .is_empty()
    );
    // So does one whose upgrade is still in flight (status not consistent).
    states[0] = PodUpgradeState {
        updated: true,
        consistent: false,
        ..OLD
    };
    assert!(
        next_upgrades(&strategy(None, None), &pods, &states)
            .unwrap()
            .upgrade
            .is_empty()
    );
}

#[test]
fn unready_candidates_are_free_and_go_first() {
    let pods: Vec<Pod> = (0..5).map(|i| pod(&format!("p{i}"), i >= 3, &[])).collect();
    let states: Vec<PodUpgradeState> = (0..5)
        .map(|i| PodUpgradeState {
            ready: i >= 3,
            ..OLD
        })
        .collect();
    let plan = next_upgrades(&strategy(None, None), &pods, &states).unwrap();
    // The three unready pods, then one ready pod within maxUnavailable 1.
    assert_eq!(plan.upgrade.len(), 4);
    assert_eq!(&plan.upgrade[..3], &[0, 1, 2]);
}

#[test]
fn partition_keeps_pods_at_the_old_version() {
    let pods = ready_pods(5);
    let all = Some(IntOrString::String("100%".into()));
    let plan = next_upgrades(
        &strategy(Some(IntOrString::Int(2)), all.clone()),
        &pods,
        &[OLD; 5],
    )
    .unwrap();
    assert_eq!(plan.upgrade.len(), 3);
    // Three updated: the remaining two are the partition.
    let mut states = [OLD; 5];
    for s in states.iter_mut().take(3) {
        s.updated = true;
    }
    let pods_after = ready_pods(5);
    let plan = next_upgrades(
        &strategy(Some(IntOrString::Int(2)), all),
        &pods_after,
        &states,
    )
    .unwrap();
    assert!(plan.upgrade.is_empty() && !plan.done);
}

#[test]
fn small_percentages_still_progress() {
    let pods = ready_pods(5);
    let s = strategy(
        Some(IntOrString::String("5%".into())),
        Some(IntOrString::String("5%".into())),
    );
    let plan = next_upgrades(&s, &pods, &[OLD; 5]).unwrap();
    assert_eq!(plan.upgrade.len(), 1, "5% of 5 pods is 1, not 0");
}

#[test]
fn paused_and_not_update_stop_the_rollout() {
    let pods = ready_pods(3);
    let mut s = strategy(None, None);
    s.paused = true;
    assert!(
        next_upgrades(&s, &pods, &[OLD; 3])
            .unwrap()
            .upgrade
            .is_empty()
    );
    let mut s = strategy(None, None);
    s.type_ = Some(SidecarSetUpdateStrategyType::NotUpdate);
    assert!(
        next_upgrades(&s, &pods, &[OLD; 3])
            .unwrap()
            .upgrade
            .is_empty()
    );
}

#[test]
fn canary_selector_limits_the_rollout() {
    let pods = vec![
        pod("a", true, &[("canary", "true")]),
        pod("b", true, &[]),
        pod("c", true, &[("canary", "true")]),
    ];
    let mut s = strategy(None, Some(IntOrString::String("100%".into())));
    s.selector = Some(LabelSelector {
        match_labels: Some(BTreeMap::from([("canary".to_string(), "true".to_string())])),
        ..Default::default()
    });
    let mut plan = next_upgrades(&s, &pods, &[OLD; 3]).unwrap();
    plan.upgrade.sort();
    assert_eq!(plan.upgrade, vec![0, 2]);
}

#[test]
fn pods_that_cannot_be_upgraded_in_place_are_reported() {
    let pods = ready_pods(3);
    let mut states = [OLD; 3];
    states[1].upgradable = false;
    states[2].consistent = false;
    let s = strategy(None, Some(IntOrString::Int(3)));
    let plan = next_upgrades(&s, &pods, &states).unwrap();
    assert_eq!(plan.upgrade, vec![0]);
    assert_eq!(plan.not_upgradable, vec![1]);
}

#[test]
fn done_and_counts() {
    let pods = ready_pods(2);
    let updated = PodUpgradeState {
        updated: true,
        ..OLD
    };
    let plan = next_upgrades(&strategy(None, None), &pods, &[updated; 2]).unwrap();
    assert!(plan.done && plan.upgrade.is_empty());
    let c = count(&[
        updated,
        OLD,
        PodUpgradeState {
            updated: true,
            ready: false,
            ..OLD
        },
    ]);
    assert_eq!(
        c,
        PodCounts {
            matched: 3,
            updated: 2,
            ready: 2,
            updated_ready: 1
        }
    );
}

fn state() -> impl Strategy<Value = PodUpgradeState> {
    (
        any::<bool>(),
        prop::bool::weighted(0.9),
        prop::bool::weighted(0.8),
        any::<bool>(),
    )
        .prop_map(|(updated, upgradable, consistent, ready)| PodUpgradeState {
            updated,
            upgradable,
            consistent,
            ready,
        })
}

proptest! {
    /// Never more ready pods taken than the budget leaves, never a partitioned or
    /// non-candidate pod.
    #[test]
    fn bounds_hold(states in prop::collection::vec(state(), 0..30), max_u in 1i32..6, partition in 0i32..10) {
        let pods: Vec<Pod> = states.iter().enumerate().map(|(i, s)| pod(&format!("p{i:02}"), s.ready, &[])).collect();
        let s = strategy(Some(IntOrString::Int(partition)), Some(IntOrString::Int(max_u)));
        let plan = next_upgrades(&s, &pods, &states).unwrap();
        let candidates = states.iter().filter(|s| !s.updated && s.upgradable && s.consistent).count();
        prop_assert!(plan.upgrade.len() <= candidates.saturating_sub(partition as usize));
        for &i in &plan.upgrade {
            let st = states[i];
            prop_assert!(!st.updated && st.upgradable && st.consistent);
        }
        let unavailable = states.iter().filter(|s| s.updated && !(s.consistent && s.ready)).count();
        let ready_taken = plan.upgrade.iter().filter(|&&i| states[i].ready).count();
        prop_assert!(unavailable + ready_taken <= (max_u as usize).max(unavailable));
    }
}
