use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::json;

use super::*;

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

fn time(secs: i64) -> Time {
    Time(at(secs))
}

fn pods(available: usize, unavailable: usize) -> Vec<PodState> {
    (0..available + unavailable)
        .map(|i| PodState {
            name: format!("web-{i}"),
            active: true,
            available: i < available,
        })
        .collect()
}

fn spec_max(v: IntOrString) -> PodUnavailableBudgetSpec {
    PodUnavailableBudgetSpec {
        max_unavailable: Some(v),
        ..Default::default()
    }
}

fn spec_min(v: IntOrString) -> PodUnavailableBudgetSpec {
    PodUnavailableBudgetSpec {
        min_available: Some(v),
        ..Default::default()
    }
}

fn pct(s: &str) -> IntOrString {
    IntOrString::String(s.into())
}

#[test]
fn desired_available_rounds_as_openkruise() {
    let cases = [
        (spec_max(pct("25%")), 4, 3),
        (spec_max(pct("25%")), 5, 3), // ceil(1.25) = 2 unavailable
        (spec_max(pct("30%")), 10, 7),
        (spec_max(pct("100%")), 4, 0),
        (spec_max(IntOrString::Int(1)), 4, 3),
        (spec_max(IntOrString::Int(9)), 4, 0), // never below 0
        (spec_min(pct("50%")), 5, 3),          // ceil(2.5)
        (spec_min(pct("0%")), 5, 0),
        (spec_min(IntOrString::Int(2)), 5, 2),
        (spec_min(IntOrString::Int(7)), 5, 7), // an int is taken as is
        (spec_max(pct("25%")), 0, 0),
        (PodUnavailableBudgetSpec::default(), 4, 0),
    ];
    for (spec, expected, want) in cases {
        assert_eq!(
            desired_available(&spec, expected).unwrap(),
            want,
            "{spec:?} of {expected}"
        );
    }
    // Kubernetes' helper: an integer percent only.
    assert!(desired_available(&spec_max(pct("12.5%")), 8).is_err());
    assert!(desired_available(&spec_min(pct("half")), 8).is_err());
}

#[test]
fn deployment_of_four_with_max_unavailable_25_percent() {
    // OpenKruise's e2e: allowed 1, current 4, desired 3, total 4.
    let spec = spec_max(pct("25%"));
    let pods = pods(4, 0);
    let status = PodUnavailableBudgetStatus::default();
    let plan = plan(&BudgetInput {
        spec: &spec,
        generation: 2,
        status: &status,
        pods: &pods,
        expected: 4,
        now: at(0),
    })
    .unwrap();
    assert_eq!(
        plan.status,
        PodUnavailableBudgetStatus {
            observed_generation: 2,
            unavailable_allowed: 1,
            current_available: 4,
            desired_available: 3,
            total_replicas: 4,
            ..Default::default()
        }
    );
    assert_eq!(plan.requeue_after, None);
}

#[test]
fn no_pods_and_nothing_expected_is_all_zeros() {
    let spec = spec_max(pct("25%"));
    let plan = plan(&BudgetInput {
        spec: &spec,
        generation: 1,
        status: &PodUnavailableBudgetStatus::default(),
        pods: &[],
        expected: 0,
        now: at(0),
    })
    .unwrap();
    assert_eq!(plan.status.unavailable_allowed, 0);
    assert_eq!(plan.status.current_available, 0);
    assert_eq!(plan.status.desired_available, 0);
    assert_eq!(plan.status.total_replicas, 0);
}

#[test]
fn records_expire_after_20_and_10_seconds_and_set_the_requeue() {
    let spec = spec_max(IntOrString::Int(2));
    let pods = pods(6, 0);
    let status = PodUnavailableBudgetStatus {
        disrupted_pods: [
            ("web-0", time(-21)),
            ("web-1", time(-20)),
            ("web-2", time(-5)),
            ("gone", time(-1)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
        unavailable_pods: [
            ("web-3", time(-11)),
            ("web-4", time(-10)),
            ("web-5", time(-2)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
        ..Default::default()
    };
    let plan = plan(&BudgetInput {
        spec: &spec,
        generation: 1,
        status: &status,
        pods: &pods,
        expected: 6,
        now: at(0),
    })
    .unwrap();
    let names =
        |m: &std::collections::BTreeMap<String, Time>| m.keys().cloned().collect::<Vec<_>>();
    // Expiry is strict: a record exactly at its timeout is kept; a pod that no longer
    // exists loses its record.
    assert_eq!(names(&plan.status.disrupted_pods), ["web-1", "web-2"]);
    assert_eq!(names(&plan.status.unavailable_pods), ["web-4", "web-5"]);
    assert_eq!(plan.extra, ["web-0"]);
    assert_eq!(
        plan.requeue_after,
        Some(std::time::Duration::from_secs(1)),
        "a second after the earliest record expires"
    );
    // 6 ready pods, 4 still recorded: 2 available, desired 4, none allowed.
    assert_eq!(plan.status.current_available, 2);
    assert_eq!(plan.status.unavailable_allowed, 0);
}

#[test]
fn inactive_and_unavailable_pods_do_not_count() {
    let spec = spec_max(IntOrString::Int(1));
    let mut pods = pods(3, 1);
    pods[0].active = false;
    let status = PodUnavailableBudgetStatus {
        disrupted_pods: [("web-0".to_string(), time(-1))].into_iter().collect(),
        ..Default::default()
    };
    let plan = plan(&BudgetInput {
        spec: &spec,
        generation: 1,
        status: &status,
        pods: &pods,
        expected: 4,
        now: at(0),
    })
    .unwrap();
    assert!(plan.status.disrupted_pods.is_empty());
    assert_eq!(plan.status.current_available, 2);
    assert_eq!(plan.status.unavailable_allowed, 0);
}

fn pod(value: serde_json::Value) -> Pod {
    serde_json::from_value(value).unwrap()
}

#[test]
fn availability_of_a_pod() {
    let ready = |labels: serde_json::Value, conditions: serde_json::Value| {
        pod(json!({
            "metadata": {"name": "web-0", "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}]},
            "status": {"phase": "Running", "conditions": conditions,
                       "containerStatuses": [{"name": "c", "image": "nginx", "imageID": "sha256:ffff", "ready": true,
                                              "restartCount": 0}]},
        }))
    };
    let ready_condition = json!([{"type": "Ready", "status": "True"}]);
    // Digest-pinned, Ready, imageID the config digest (containerd): available (K#2570).
    assert!(is_available(&ready(json!({}), ready_condition.clone())));
    // A specified-delete label changes nothing (K#2175: it never raises the allowed count).
    assert!(is_available(&ready(
        json!({"apps.kruise.io/specified-delete": "true"}),
        ready_condition.clone()
    )));
    assert!(!is_available(&ready(
        json!({"unavailable-pod.kruise.io/drain": "true"}),
        ready_condition.clone()
    )));
    assert!(!is_available(&ready(
        json!({}),
        json!([{"type": "Ready", "status": "False"}])
    )));
    assert!(!is_available(&ready(
        json!({}),
        json!([{"type": "Ready", "status": "True"}, {"type": "InPlaceUpdateReady", "status": "False"}])
    )));
    let pending = pod(
        json!({"metadata": {"name": "p"}, "status": {"phase": "Pending",
        "conditions": [{"type": "Ready", "status": "True"}]}}),
    );
    assert!(!is_available(&pending));
}

proptest! {
    /// The allowed disruptions never exceed what keeps `desired` pods available, and never
    /// go below 0.
    #[test]
    fn allowed_keeps_desired_available(
        available in 0usize..20,
        unavailable in 0usize..5,
        recorded in 0usize..20,
        max in 0i32..10,
    ) {
        let spec = spec_max(IntOrString::Int(max));
        let pods = pods(available, unavailable);
        let status = PodUnavailableBudgetStatus {
            disrupted_pods: (0..recorded).map(|i| (format!("web-{i}"), time(-1))).collect(),
            ..Default::default()
        };
        let expected = i32::try_from(available + unavailable).unwrap();
        let plan = plan(&BudgetInput { spec: &spec, generation: 1, status: &status, pods: &pods, expected, now: at(0) }).unwrap();
        let s = plan.status;
        prop_assert!(s.unavailable_allowed >= 0);
        prop_assert!(s.current_available - s.unavailable_allowed >= s.desired_available.min(s.current_available));
        prop_assert_eq!(s.current_available, i32::try_from(available.saturating_sub(recorded)).unwrap());
    }
}
