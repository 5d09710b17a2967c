//! Container launch priorities in the in-place engine: which containers each batch patches
//! (table), and whole updates driven through a scripted kubelet (property).

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::api::keys::INPLACE_UPDATE_STATE_KEY;
use crate::revision::template_revision_data;

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + s).unwrap()
}

/// A container as the launch-priority webhook leaves it: `Some(p)` carries the barrier env
/// with key `p_<p>`.
fn container(name: &str, image: &str, priority: Option<i32>) -> Value {
    let mut c = json!({"name": name, "image": image});
    if let Some(p) = priority {
        c["env"] = json!([{"name": "KRUISE_CONTAINER_BARRIER", "valueFrom": {"configMapKeyRef": {
            "name": "demo-barrier", "key": format!("p_{p}")}}}]);
    }
    c
}

/// A running pod, every container ready on image `<name>:1`.
fn pod(containers: &[(&str, Option<i32>)]) -> Pod {
    let specs: Vec<Value> = containers
        .iter()
        .map(|(n, p)| container(n, &format!("{n}:1"), *p))
        .collect();
    let statuses: Vec<Value> = containers
        .iter()
        .map(|(n, _)| {
            json!({"name": n, "image": format!("{n}:1"), "imageID": format!("id-{n}:1"),
            "ready": true, "restartCount": 0})
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": "demo-abcde", "namespace": "ns",
            "labels": {"app": "demo", "controller-revision-hash": "demo-old"}},
        "spec": {"containers": specs},
        "status": {"phase": "Running", "containerStatuses": statuses},
    }))
    .unwrap()
}

fn images(pod: &Pod) -> BTreeMap<String, String> {
    pod.spec
        .iter()
        .flat_map(|s| &s.containers)
        .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
        .collect()
}

fn image_spec(changed: &[&str]) -> UpdateSpec {
    UpdateSpec {
        revision: "demo-new".into(),
        container_images: changed
            .iter()
            .map(|n| (n.to_string(), format!("{n}:2")))
            .collect(),
        ..UpdateSpec::default()
    }
}

fn fresh_state() -> InPlaceUpdateState {
    InPlaceUpdateState {
        revision: "demo-new".into(),
        update_timestamp: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t(0)),
        last_container_statuses: None,
        update_env_from_metadata: false,
        update_resources: false,
        update_images: true,
        next_container_images: BTreeMap::new(),
        next_container_ref_metadata: BTreeMap::new(),
        next_container_resources: BTreeMap::new(),
        pre_check_before_next: None,
        container_batches_record: Vec::new(),
    }
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The first batch: which containers are patched now, which wait (with their new image),
/// and what must be ready before the next batch.
#[test]
fn first_batch_table() {
    struct Case {
        why: &'static str,
        containers: Vec<(&'static str, Option<i32>)>,
        changed: Vec<&'static str>,
        batch: Vec<&'static str>,
        next: Vec<&'static str>,
    }
    let cases = [
        Case {
            why: "no priorities: one batch",
            containers: vec![("app", None), ("sidecar", None)],
            changed: vec!["app", "sidecar"],
            batch: vec!["app", "sidecar"],
            next: vec![],
        },
        Case {
            why: "the higher-priority sidecar first",
            containers: vec![("app", Some(0)), ("sidecar", Some(1))],
            changed: vec!["app", "sidecar"],
            batch: vec!["sidecar"],
            next: vec!["app"],
        },
        Case {
            why: "Ordered (0, -1, -2): the first container first",
            containers: vec![("a", Some(0)), ("b", Some(-1)), ("c", Some(-2))],
            changed: vec!["a", "b", "c"],
            batch: vec!["a"],
            next: vec!["b", "c"],
        },
        Case {
            why: "equal priorities share a batch",
            containers: vec![("a", Some(2)), ("b", Some(2)), ("c", Some(1))],
            changed: vec!["a", "b", "c"],
            batch: vec!["a", "b"],
            next: vec!["c"],
        },
        Case {
            why: "a container without priority goes with the first batch",
            containers: vec![("plain", None), ("a", Some(1)), ("b", Some(0))],
            changed: vec!["plain", "a", "b"],
            batch: vec!["a", "plain"],
            next: vec!["b"],
        },
        Case {
            why: "only changed containers count: the highest changed one leads",
            containers: vec![("top", Some(5)), ("a", Some(1)), ("b", Some(0))],
            changed: vec!["a", "b"],
            batch: vec!["a"],
            next: vec!["b"],
        },
        Case {
            why: "a single changed prioritized container: one batch",
            containers: vec![("app", Some(0)), ("sidecar", Some(1))],
            changed: vec!["app"],
            batch: vec!["app"],
            next: vec![],
        },
    ];
    for case in cases {
        let pod = pod(&case.containers);
        let mut state = fresh_state();
        let (patched, _) = apply_spec_to_pod(&pod, &image_spec(&case.changed), &mut state, t(1));
        let imgs = images(&patched);
        for (name, _) in &case.containers {
            let want = if case.batch.contains(name) { 2 } else { 1 };
            assert_eq!(
                imgs[*name],
                format!("{name}:{want}"),
                "{}: {name}",
                case.why
            );
        }
        let next: BTreeMap<String, String> = case
            .next
            .iter()
            .map(|n| (n.to_string(), format!("{n}:2")))
            .collect();
        assert_eq!(state.next_container_images, next, "{}", case.why);
        let pre_check = (!case.next.is_empty()).then(|| PreCheckBeforeNext {
            containers_required_ready: names(&case.batch),
        });
        assert_eq!(state.pre_check_before_next, pre_check, "{}", case.why);
        assert_eq!(state.container_batches_record.len(), 1, "{}", case.why);
        assert_eq!(
            state.container_batches_record[0].containers,
            names(&case.batch),
            "{}",
            case.why
        );
        // imageIDs are recorded for the patched containers only.
        let recorded: Vec<String> = state
            .last_container_statuses
            .clone()
            .unwrap_or_default()
            .into_keys()
            .collect();
        assert_eq!(recorded, names(&case.batch), "{}", case.why);
        // The annotation carries the same state.
        assert_eq!(
            update_state(&patched).unwrap().unwrap(),
            state,
            "{}",
            case.why
        );
    }
}

/// A lower-priority container reading a label the batch changes (env from metadata) goes
/// with the batch: the label cannot hold two values.
#[test]
fn containers_sharing_changed_metadata_join_the_batch() {
    let pod = pod(&[("a", Some(1)), ("b", Some(0)), ("c", Some(-1))]);
    let meta = |key: &str| ObjectMeta {
        labels: Some(BTreeMap::from([(key.to_string(), "v2".to_string())])),
        ..ObjectMeta::default()
    };
    let spec = UpdateSpec {
        container_ref_metadata: BTreeMap::from([
            ("a".to_string(), meta("shared")),
            ("b".to_string(), meta("shared")),
            ("c".to_string(), meta("own")),
        ]),
        update_env_from_metadata: true,
        ..image_spec(&[])
    };
    let mut state = fresh_state();
    let (patched, _) = apply_spec_to_pod(&pod, &spec, &mut state, t(1));
    assert_eq!(
        state.container_batches_record[0].containers,
        names(&["a", "b"])
    );
    assert_eq!(
        state.next_container_ref_metadata.keys().collect::<Vec<_>>(),
        ["c"]
    );
    let labels = patched.metadata.labels.unwrap();
    assert_eq!(labels["shared"], "v2");
    assert!(!labels.contains_key("own"));
}

/// The state annotation with a batch pending, field for field as OpenKruise writes it.
#[test]
fn pending_batch_state_on_the_wire() {
    let pod = pod(&[("app", Some(0)), ("sidecar", Some(1))]);
    let mut state = fresh_state();
    let (patched, _) = apply_spec_to_pod(&pod, &image_spec(&["app", "sidecar"]), &mut state, t(1));
    let wire: Value =
        serde_json::from_str(&patched.metadata.annotations.unwrap()[INPLACE_UPDATE_STATE_KEY])
            .unwrap();
    assert_eq!(
        wire,
        json!({
            "revision": "demo-new",
            "updateTimestamp": "2023-11-14T22:13:20Z",
            "lastContainerStatuses": {"sidecar": {"imageID": "id-sidecar:1"}},
            "updateImages": true,
            "nextContainerImages": {"app": "app:2"},
            "preCheckBeforeNext": {"containersRequiredReady": ["sidecar"]},
            "containerBatchesRecord": [{"timestamp": "2023-11-14T22:13:21Z", "containers": ["sidecar"]}],
        })
    );
}

/// The scripted kubelet: a container whose spec image differs from its status restarts on
/// it (new imageID, restartCount + 1, not ready).
fn kubelet_restart(pod: &mut Pod) -> Vec<String> {
    let want = images(pod);
    let mut restarted = Vec::new();
    for cs in pod
        .status
        .as_mut()
        .and_then(|s| s.container_statuses.as_mut())
        .into_iter()
        .flatten()
    {
        if want.get(&cs.name) != Some(&cs.image) {
            cs.image = want[&cs.name].clone();
            cs.image_id = format!("id-{}", cs.image);
            cs.restart_count += 1;
            cs.ready = false;
            restarted.push(cs.name.clone());
        }
    }
    restarted
}

fn status_mut<'a>(pod: &'a mut Pod, name: &str) -> &'a mut ContainerStatus {
    pod.status
        .as_mut()
        .and_then(|s| s.container_statuses.as_mut())
        .and_then(|v| v.iter_mut().find(|c| c.name == name))
        .unwrap()
}

fn priority_of(containers: &[(String, Option<i32>)], name: &str) -> Option<i32> {
    containers.iter().find(|(n, _)| n == name).and_then(|c| c.1)
}

proptest! {
    /// Whatever the priorities and the changed containers, an in-place update driven by
    /// `begin_update` and `refresh` against a kubelet that readies containers one at a time
    /// patches every changed container exactly once, in batches of strictly decreasing
    /// priority (containers without priority in the first), each batch only once the
    /// previous one runs its new images and is ready, and ends complete.
    #[test]
    fn batches_follow_priorities_and_wait_for_readiness(
        spec in proptest::collection::vec((proptest::option::of(-2i32..=2), any::<bool>()), 1..6),
        ready_order_seed in any::<u64>(),
    ) {
        let containers: Vec<(String, Option<i32>)> = spec
            .iter()
            .enumerate()
            .map(|(i, (p, _))| (format!("c{i}"), *p))
            .collect();
        let changed: BTreeSet<String> = spec
            .iter()
            .enumerate()
            .filter(|(_, (_, c))| *c)
            .map(|(i, _)| format!("c{i}"))
            .collect();
        prop_assume!(!changed.is_empty());
        let refs: Vec<(&str, Option<i32>)> =
            containers.iter().map(|(n, p)| (n.as_str(), *p)).collect();
        let mut pod = pod(&refs);
        let revision_data = |version: &dyn Fn(&str) -> u32| {
            template_revision_data(&json!({"metadata": {"labels": {"app": "demo"}}, "spec": {
                "containers": containers.iter()
                    .map(|(n, p)| container(n, &format!("{n}:{}", version(n)), *p))
                    .collect::<Vec<_>>()}}))
        };
        let req = UpdateRequest {
            old_revision_data: revision_data(&|_| 1),
            new_revision_data: revision_data(&|n| if changed.contains(n) { 2 } else { 1 }),
            revision: "demo-new".into(),
            revision_labels: crate::revision::pod_revision_labels("demo-new", false),
            ..Default::default()
        };
        let begin = begin_update(&pod, &req, t(0)).unwrap();
        pod = begin.write.pod;
        let mut batches: Vec<Vec<String>> = Vec::new();
        let mut patched: Vec<String> = Vec::new();
        let mut seed = ready_order_seed;
        for step in 1..=20 {
            // The batch just patched: the containers whose spec image moved since.
            let now_patched: Vec<String> = images(&pod)
                .into_iter()
                .filter(|(n, img)| img.ends_with(":2") && !patched.contains(n))
                .map(|(n, _)| n)
                .collect();
            patched.extend(now_patched.iter().cloned());
            let record = update_state(&pod).unwrap().unwrap().container_batches_record;
            prop_assert_eq!(record.len(), batches.len() + 1);
            batches.push(record[record.len() - 1].containers.clone());
            // The kubelet restarts them; none is ready, so no next batch yet.
            let mut restarted = kubelet_restart(&mut pod);
            prop_assert!(
                !matches!(refresh(&pod, t(step), &CompletionCheck::default()), RefreshAction::Write(_)),
                "next batch before the previous one was ready"
            );
            // They become ready one at a time; the next batch comes only with the last one.
            let mut next = None;
            while !restarted.is_empty() {
                let i = (seed % restarted.len() as u64) as usize;
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let name = restarted.remove(i);
                status_mut(&mut pod, &name).ready = true;
                let action = refresh(&pod, t(step), &CompletionCheck::default());
                if let RefreshAction::Write(w) = action {
                    prop_assert!(restarted.is_empty(), "next batch with {:?} not ready", restarted);
                    next = Some(w.pod);
                }
            }
            match next {
                Some(p) => pod = p,
                None => break,
            }
        }
        prop_assert_eq!(check_update_completed(&pod, &CompletionCheck::default()), Ok(()));
        // Every changed container exactly once, nothing else.
        let mut sorted = patched.clone();
        sorted.sort();
        prop_assert_eq!(sorted, changed.iter().cloned().collect::<Vec<_>>());
        // Batches as recorded are the patched groups, in strictly decreasing priority.
        let mut last: Option<i32> = None;
        for (i, batch) in batches.iter().enumerate() {
            let prios: BTreeSet<Option<i32>> =
                batch.iter().map(|n| priority_of(&containers, n)).collect();
            let prioritized: BTreeSet<i32> = prios.iter().flatten().copied().collect();
            prop_assert!(prioritized.len() <= 1, "batch {:?} mixes priorities", batch);
            if i > 0 {
                prop_assert!(!prios.contains(&None), "a container without priority waited");
            }
            if let Some(p) = prioritized.iter().next() {
                prop_assert!(last.is_none_or(|l| *p < l), "batch {:?} after priority {:?}", batch, last);
                last = Some(*p);
            }
        }
        let distinct: BTreeSet<i32> =
            changed.iter().filter_map(|n| priority_of(&containers, n)).collect();
        prop_assert_eq!(batches.len(), distinct.len().max(1));
        for cs in pod.status.iter().flat_map(|s| s.container_statuses.iter().flatten()) {
            let restarts = i32::from(changed.contains(&cs.name));
            prop_assert_eq!(cs.restart_count, restarts, "{}", cs.name);
        }
    }
}
