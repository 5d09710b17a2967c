#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn pod(annotations: Value, containers: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web-0", "namespace": "default", "annotations": annotations},
        "spec": {"containers": containers},
    }))
    .unwrap()
}

fn with_priorities(values: &[Option<&str>]) -> Pod {
    let containers: Vec<Value> = values
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Some(v) => {
                json!({"name": format!("c{i}"), "env": [{"name": PRIORITY_ENV, "value": v}]})
            }
            None => json!({"name": format!("c{i}")}),
        })
        .collect();
    pod(json!({}), Value::Array(containers))
}

fn barrier_keys(pod: &Pod) -> Vec<Option<(String, String)>> {
    pod.spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .map(|c| {
            c.env
                .iter()
                .flatten()
                .find(|e| e.name == BARRIER_ENV)
                .map(|e| {
                    let r = e
                        .value_from
                        .as_ref()
                        .unwrap()
                        .config_map_key_ref
                        .as_ref()
                        .unwrap();
                    (r.name.clone(), r.key.clone())
                })
        })
        .collect()
}

#[test]
fn priorities_follow_openkruise_rules() {
    let ordered = pod(
        json!({LAUNCH_PRIORITY_KEY: ORDERED}),
        json!([{"name": "a"}, {"name": "b"}, {"name": "c"}]),
    );
    let cases: Vec<(&str, Pod, Option<Vec<i32>>)> = vec![
        ("ordered: 0, -1, -2", ordered, Some(vec![0, -1, -2])),
        (
            "ordered with one container: nothing",
            pod(
                json!({LAUNCH_PRIORITY_KEY: ORDERED}),
                json!([{"name": "a"}]),
            ),
            None,
        ),
        (
            "another annotation value: env rules",
            pod(
                json!({LAUNCH_PRIORITY_KEY: "ordered"}),
                json!([{"name": "a"}, {"name": "b"}]),
            ),
            None,
        ),
        (
            "env priorities",
            with_priorities(&[Some("1"), None, Some("-5")]),
            Some(vec![1, 0, -5]),
        ),
        ("all zero", with_priorities(&[Some("0"), Some("0")]), None),
        ("all equal", with_priorities(&[Some("3"), Some("3")]), None),
        ("no env", with_priorities(&[None, None]), None),
        ("one container", with_priorities(&[Some("3")]), None),
    ];
    for (name, pod, want) in cases {
        assert_eq!(priorities(&pod).unwrap(), want, "{name}");
    }
}

#[test]
fn a_priority_that_is_not_an_integer_refuses_the_pod() {
    let pod = with_priorities(&[Some("high"), Some("1")]);
    let err = priorities(&pod).unwrap_err();
    assert_eq!(
        err.to_string(),
        "container c0: KRUISE_CONTAINER_PRIORITY \"high\" is not a 32-bit integer"
    );
}

#[test]
fn the_barrier_env_names_the_pods_configmap_and_its_priority_key() {
    let mut pod = with_priorities(&[Some("1"), None, Some("-1")]);
    assert!(inject_barrier(&mut pod, "abcde").unwrap());
    let want = ["p_1", "p_0", "p_-1"]
        .map(|k| Some(("web-0-barrier".to_string(), k.to_string())))
        .to_vec();
    assert_eq!(barrier_keys(&pod), want);
    // A second pass through the chain changes nothing.
    let again = pod.clone();
    assert!(!inject_barrier(&mut pod, "zzzzz").unwrap());
    assert_eq!(pod, again);
}

#[test]
fn a_generate_name_only_pod_is_named_at_admission() {
    // K#782: without a name the barrier's name would be "-barrier".
    let mut pod = pod(
        json!({LAUNCH_PRIORITY_KEY: ORDERED}),
        json!([{"name": "a"}, {"name": "b"}]),
    );
    pod.metadata.name = None;
    pod.metadata.generate_name = Some("web-".into());
    assert!(inject_barrier(&mut pod, "x7k2q").unwrap());
    assert_eq!(pod.metadata.name.as_deref(), Some("web-x7k2q"));
    assert_eq!(
        barrier_keys(&pod)[1],
        Some(("web-x7k2q-barrier".into(), "p_-1".into()))
    );

    let mut long = pod.clone();
    long.metadata.name = None;
    long.metadata.generate_name = Some("a".repeat(70));
    for c in &mut long.spec.as_mut().unwrap().containers {
        c.env = None;
    }
    inject_barrier(&mut long, "x7k2q").unwrap();
    assert_eq!(long.metadata.name.unwrap().len(), 63);
}

#[test]
fn a_pod_without_priorities_is_left_alone() {
    let mut pod = with_priorities(&[None, None]);
    let before = pod.clone();
    assert!(!inject_barrier(&mut pod, "abcde").unwrap());
    assert_eq!(pod, before);
}

/// An Ordered pod of `n` containers, the first `ready` of them ready.
fn running(n: usize, ready: usize, conditions: bool, annotations: Value) -> Pod {
    let mut pod = pod(
        annotations,
        Value::Array((0..n).map(|i| json!({"name": format!("c{i}")})).collect()),
    );
    pod.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(LAUNCH_PRIORITY_KEY.into(), ORDERED.into());
    inject_barrier(&mut pod, "").unwrap();
    let statuses: Vec<Value> = (0..n)
        .map(|i| {
            json!({"name": format!("c{i}"), "ready": i < ready, "restartCount": 0,
                        "image": "x", "imageID": ""})
        })
        .collect();
    let mut status = json!({"phase": "Pending", "containerStatuses": statuses});
    if conditions {
        status["conditions"] = json!([{"type": "ContainersReady", "status": if ready == n { "True" } else { "False" }}]);
    }
    pod.status = Some(serde_json::from_value(status).unwrap());
    pod
}

fn keys(keys: &[&str]) -> BTreeSet<String> {
    keys.iter().map(|k| k.to_string()).collect()
}

/// A barrier's data.
type Data = BTreeMap<String, String>;

fn data(keys: &[&str]) -> Data {
    keys.iter()
        .map(|k| (k.to_string(), "true".to_string()))
        .collect()
}

#[test]
fn the_controller_opens_keys_from_the_highest_priority_down() {
    let cases: Vec<(&str, Pod, Option<Data>, BarrierPlan)> = vec![
        (
            "no barrier yet: created with the first key",
            running(3, 0, true, json!({})),
            None,
            BarrierPlan {
                create: Some(keys(&["p_0"])),
                ..BarrierPlan::default()
            },
        ),
        (
            "first container ready: the second key",
            running(3, 1, true, json!({})),
            Some(data(&["p_0"])),
            BarrierPlan {
                open: keys(&["p_-1"]),
                ..BarrierPlan::default()
            },
        ),
        (
            "key already there: nothing",
            running(3, 1, true, json!({})),
            Some(data(&["p_0", "p_-1"])),
            BarrierPlan::default(),
        ),
        (
            "K#1283: no ContainersReady condition still progresses",
            running(3, 2, false, json!({})),
            Some(data(&["p_0", "p_-1"])),
            BarrierPlan {
                open: keys(&["p_-2"]),
                ..BarrierPlan::default()
            },
        ),
        (
            "all ready: completed",
            running(2, 2, true, json!({})),
            Some(data(&["p_0", "p_-1"])),
            BarrierPlan {
                complete: true,
                ..BarrierPlan::default()
            },
        ),
        (
            "completed already: nothing",
            running(2, 2, true, json!({COMPLETED_KEY: "true"})),
            Some(data(&["p_0", "p_-1"])),
            BarrierPlan::default(),
        ),
        (
            "K#914: a deleted barrier is recreated with every open key",
            running(3, 3, true, json!({COMPLETED_KEY: "true"})),
            None,
            BarrierPlan {
                create: Some(keys(&["p_0", "p_-1", "p_-2"])),
                ..BarrierPlan::default()
            },
        ),
    ];
    for (name, pod, barrier, want) in cases {
        assert_eq!(plan_barrier(&pod, barrier.as_ref()), want, "{name}");
    }
}

#[test]
fn containers_of_equal_priority_open_together_and_unprioritized_pods_are_ignored() {
    let mut pod = with_priorities(&[Some("2"), Some("2"), Some("1")]);
    inject_barrier(&mut pod, "").unwrap();
    assert_eq!(
        plan_barrier(&pod, Some(&data(&[]))),
        BarrierPlan {
            open: keys(&["p_2"]),
            ..BarrierPlan::default()
        }
    );
    let plain = with_priorities(&[None, None]);
    assert!(plan_barrier(&plain, None).is_idle());
}

#[test]
fn a_deleted_or_finished_pod_gets_no_barrier() {
    let mut deleting = running(2, 0, true, json!({}));
    deleting.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-01-01T00:00:00Z".parse().unwrap(),
        ));
    assert!(plan_barrier(&deleting, None).is_idle());
    let mut done = running(2, 0, true, json!({}));
    done.status.as_mut().unwrap().phase = Some("Succeeded".into());
    assert!(plan_barrier(&done, None).is_idle());
}

proptest! {
    /// Driving a pod with a kubelet that starts (and readies) a container only once its key
    /// exists, in any order and pace: every container starts, never before one of higher
    /// priority is ready, and the pod ends completed.
    #[test]
    fn containers_start_in_priority_order(
        raw in prop::collection::vec(-3i32..3, 2..6),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 0..40),
    ) {
        let values: Vec<String> = raw.iter().map(|p| p.to_string()).collect();
        let mut pod = with_priorities(&values.iter().map(|v| Some(v.as_str())).collect::<Vec<_>>());
        let injected = inject_barrier(&mut pod, "").unwrap();
        let distinct: BTreeSet<i32> = raw.iter().copied().collect();
        prop_assert_eq!(injected, distinct.len() > 1 && raw.iter().any(|p| *p != 0));
        prop_assume!(injected);
        let n = raw.len();
        pod.status = Some(serde_json::from_value(json!({"phase": "Pending", "containerStatuses":
            (0..n).map(|i| json!({"name": format!("c{i}"), "ready": false, "restartCount": 0, "image": "x", "imageID": ""})).collect::<Vec<_>>()})).unwrap());
        let mut barrier: Option<BTreeMap<String, String>> = None;
        let mut started: Vec<usize> = Vec::new();
        let mut picks = picks.into_iter();
        for _ in 0..(4 * n + 10) {
            let plan = plan_barrier(&pod, barrier.as_ref());
            if let Some(create) = plan.create { barrier = Some(create.into_iter().map(|k| (k, "true".into())).collect()); }
            if let Some(b) = barrier.as_mut() { for k in plan.open { b.insert(k, "true".into()); } }
            if plan.complete {
                pod.metadata.annotations.get_or_insert_with(Default::default).insert(COMPLETED_KEY.into(), "true".into());
            }
            // The kubelet starts one waiting container whose key exists.
            let startable: Vec<usize> = (0..n)
                .filter(|i| !started.contains(i))
                .filter(|i| barrier.as_ref().is_some_and(|b| b.contains_key(&barrier_key(raw[*i]))))
                .collect();
            if !startable.is_empty() {
                let i = match picks.next() { Some(ix) => startable[ix.index(startable.len())], None => startable[0] };
                for s in &started { prop_assert!(raw[*s] >= raw[i]); }
                prop_assert!(raw.iter().enumerate().all(|(j, p)| *p <= raw[i] || started.contains(&j)));
                started.push(i);
                pod.status.as_mut().unwrap().container_statuses.as_mut().unwrap()[i].ready = true;
            }
        }
        prop_assert_eq!(started.len(), n);
        prop_assert_eq!(pod.metadata.annotations.as_ref().unwrap().get(COMPLETED_KEY).map(String::as_str), Some("true"));
    }
}
