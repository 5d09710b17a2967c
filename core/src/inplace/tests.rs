use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;
use crate::api::keys::*;
use crate::revision::template_revision_data;

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + s).unwrap()
}

fn data(containers: Value) -> Value {
    template_revision_data(&json!({
        "metadata": {"labels": {"app": "demo", "ver": "1"}},
        "spec": {"containers": containers}
    }))
}

fn main_c(image: &str) -> Value {
    json!({"name": "main", "image": image})
}

fn calc(old: &Value, new: &Value, gates: InPlaceGates) -> Result<UpdateSpec, RecreateReason> {
    calculate_update_spec(old, new, "demo-new", gates, 0)
}

#[test]
fn image_change_is_in_place() {
    let spec = calc(
        &data(json!([main_c("nginx:1")])),
        &data(json!([main_c("nginx:2")])),
        InPlaceGates::default(),
    )
    .unwrap();
    assert_eq!(
        spec.container_images,
        BTreeMap::from([("main".to_string(), "nginx:2".to_string())])
    );
    assert_eq!(spec.revision, "demo-new");
    assert!(spec.meta_data_patch.is_none());
}

#[test]
fn recreate_table() {
    let base = json!([{"name": "main", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]}]);
    let cases: Vec<(&str, Value)> = vec![
        (
            "image + env change",
            json!([{"name": "main", "image": "nginx:2", "env": [{"name": "A", "value": "2"}]}]),
        ),
        (
            "env change",
            json!([{"name": "main", "image": "nginx:1", "env": [{"name": "A", "value": "2"}]}]),
        ),
        (
            "command added",
            json!([{"name": "main", "image": "nginx:1", "env": [{"name": "A", "value": "1"}], "command": ["x"]}]),
        ),
        (
            "container added",
            json!([{"name": "main", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]}, main_c("side:1")]),
        ),
        ("container removed", json!([])),
    ];
    for (why, new) in cases {
        assert!(
            calc(&data(base.clone()), &data(new), InPlaceGates::default()).is_err(),
            "{why}"
        );
    }
    let with_volume = template_revision_data(&json!({
        "metadata": {"labels": {"app": "demo", "ver": "1"}},
        "spec": {"containers": base, "volumes": [{"name": "v", "emptyDir": {}}]}
    }));
    assert!(matches!(
        calc(
            &data(
                json!([{"name": "main", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]}])
            ),
            &with_volume,
            InPlaceGates::default()
        ),
        Err(RecreateReason::SpecChanged { .. })
    ));
}

#[test]
fn metadata_change_is_in_place_with_patch() {
    let old = data(json!([main_c("nginx:1")]));
    let mut new = old.clone();
    new["spec"]["template"]["metadata"]["labels"]["ver"] = json!("2");
    new["spec"]["template"]["metadata"]["annotations"] = json!({"a/b": "x"});
    let spec = calc(&old, &new, InPlaceGates::default()).unwrap();
    assert!(spec.container_images.is_empty() && !spec.update_env_from_metadata);
    assert_eq!(
        spec.meta_data_patch,
        Some(json!({"metadata": {"labels": {"ver": "2"}, "annotations": {"a/b": "x"}}}))
    );
}

#[test]
fn env_from_metadata_gate() {
    let c = json!([{"name": "main", "image": "nginx:1", "env": [
        {"name": "VER", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['ver']"}}}
    ]}, main_c("side:1")]);
    let old = data(c.clone());
    let mut new = old.clone();
    new["spec"]["template"]["metadata"]["labels"]["ver"] = json!("2");
    let spec = calc(
        &old,
        &new,
        InPlaceGates {
            env_from_metadata: true,
            vertical_scaling: false,
        },
    )
    .unwrap();
    assert!(spec.update_env_from_metadata);
    assert_eq!(
        spec.container_ref_metadata["main"].labels.as_ref().unwrap()["ver"],
        "2"
    );
    assert!(!spec.container_ref_metadata.contains_key("side"));
    assert_eq!(
        spec.meta_data_patch,
        Some(json!({})),
        "the key moved out of the generic patch"
    );
    let off = calc(
        &old,
        &new,
        InPlaceGates {
            env_from_metadata: false,
            vertical_scaling: false,
        },
    )
    .unwrap();
    assert!(!off.update_env_from_metadata && off.container_ref_metadata.is_empty());
    assert_eq!(
        off.meta_data_patch,
        Some(json!({"metadata": {"labels": {"ver": "2"}}}))
    );
}

fn res(cpu_req: &str, cpu_lim: &str, mem: &str) -> Value {
    json!({"requests": {"cpu": cpu_req, "memory": mem}, "limits": {"cpu": cpu_lim, "memory": mem}})
}

#[test]
fn vertical_scaling_and_qos() {
    let v = InPlaceGates {
        env_from_metadata: true,
        vertical_scaling: true,
    };
    let c = |r: Value| data(json!([{"name": "main", "image": "nginx:1", "resources": r}]));
    // Burstable -> Burstable: in place with the gate
    let spec = calc(&c(res("100m", "1", "1Gi")), &c(res("200m", "1", "1Gi")), v).unwrap();
    assert_eq!(
        spec.container_resources["main"].requests.as_ref().unwrap()["cpu"].0,
        "200m"
    );
    assert!(spec.vertical_update_only());
    // without the gate: recreate
    assert!(
        calc(
            &c(res("100m", "1", "1Gi")),
            &c(res("200m", "1", "1Gi")),
            InPlaceGates::default()
        )
        .is_err()
    );
    // Guaranteed -> Burstable: QoS class change recreates
    assert_eq!(
        calc(&c(res("1", "1", "1Gi")), &c(res("500m", "1", "1Gi")), v),
        Err(RecreateReason::QosClassChanged {
            from: "Guaranteed",
            to: "Burstable"
        })
    );
    // adding a resource recreates
    assert!(matches!(
        calc(
            &c(json!({"requests": {"cpu": "1"}})),
            &c(json!({"requests": {"cpu": "1", "memory": "1Gi"}})),
            v
        ),
        Err(RecreateReason::Resource { .. })
    ));
    // non cpu/memory
    assert!(
        calc(
            &c(json!({"limits": {"nvidia.com/gpu": "1"}})),
            &c(json!({"limits": {"nvidia.com/gpu": "2"}})),
            v
        )
        .is_err()
    );
}

fn running_pod(image: &str, image_id: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "demo-abcde", "namespace": "ns", "resourceVersion": "42",
            "labels": {"app": "demo", "ver": "1", "controller-revision-hash": "demo-old"}},
        "spec": {"containers": [{"name": "main", "image": image}],
            "readinessGates": [{"conditionType": "InPlaceUpdateReady"}]},
        "status": {"phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "ContainersReady", "status": "True"},
                {"type": "InPlaceUpdateReady", "status": "True"}],
            "containerStatuses": [{"name": "main", "image": image, "imageID": image_id, "ready": true, "restartCount": 0}]}
    }))
    .unwrap()
}

fn request(old_img: &str, new_img: &str, grace: i32) -> UpdateRequest {
    UpdateRequest {
        old_revision_data: data(json!([main_c(old_img)])),
        new_revision_data: data(json!([main_c(new_img)])),
        revision: "demo-new".into(),
        grace_period_seconds: grace,
        revision_labels: crate::revision::pod_revision_labels("demo-new", false),
        extra_labels: BTreeMap::from([(LIFECYCLE_STATE_KEY.to_string(), "Updating".to_string())]),
        ..Default::default()
    }
}

fn cond<'a>(
    s: &'a k8s_openapi::api::core::v1::PodStatus,
    ty: &str,
) -> &'a k8s_openapi::api::core::v1::PodCondition {
    s.conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == ty)
        .unwrap()
}

/// The pod's one container status `main`, ready with `image` and `image_id`; returned for
/// further changes.
fn set_status<'a>(pod: &'a mut Pod, image: &str, image_id: &str) -> &'a mut ContainerStatus {
    let statuses = pod
        .status
        .as_mut()
        .unwrap()
        .container_statuses
        .insert(vec![ContainerStatus {
            name: "main".into(),
            image: image.into(),
            image_id: image_id.into(),
            ready: true,
            ..Default::default()
        }]);
    &mut statuses[0]
}

#[test]
fn begin_update_writes_unready_then_spec_and_state() {
    let pod = running_pod("nginx:1", "sha256:aaa");
    let b = begin_update(&pod, &request("nginx:1", "nginx:2", 0), t(0)).unwrap();
    let st = b
        .unready_status
        .expect("pod with the gate goes unready first");
    assert_eq!(cond(&st, INPLACE_UPDATE_READY).status, "False");
    assert_eq!(
        cond(&st, INPLACE_UPDATE_READY).reason.as_deref(),
        Some("StartInPlaceUpdate")
    );
    assert_eq!(cond(&st, "Ready").status, "False");
    assert_eq!(
        cond(&st, "Ready").reason.as_deref(),
        Some("ReadinessGatesNotReady")
    );
    let p = &b.write.pod;
    assert_eq!(
        p.spec.as_ref().unwrap().containers[0].image.as_deref(),
        Some("nginx:2")
    );
    let ann = p.metadata.annotations.as_ref().unwrap();
    assert!(!ann.contains_key(INPLACE_UPDATE_GRACE_KEY));
    let state: Value = serde_json::from_str(&ann[INPLACE_UPDATE_STATE_KEY]).unwrap();
    assert_eq!(
        state,
        json!({
            "revision": "demo-new",
            "updateTimestamp": "2023-11-14T22:13:20Z",
            "lastContainerStatuses": {"main": {"imageID": "sha256:aaa"}},
            "updateImages": true,
            "containerBatchesRecord": [{"timestamp": "2023-11-14T22:13:20Z", "containers": ["main"]}]
        })
    );
    assert_eq!(
        b.write.patch,
        Some(json!({
            "metadata": {
                "labels": {"controller-revision-hash": "demo-new", "pod-template-hash": "new",
                    "lifecycle.apps.kruise.io/state": "Updating"},
                "annotations": {INPLACE_UPDATE_STATE_KEY: ann[INPLACE_UPDATE_STATE_KEY]}
            },
            "spec": {"containers": [{"name": "main", "image": "nginx:2"}]}
        }))
    );
    assert_eq!(b.requeue_after, None);
    // not complete until the kubelet reports a new imageID
    let mut after = b.write.pod.clone();
    assert_eq!(
        check_update_completed(&after, &CompletionCheck::default()),
        Err(NotCompleted::ImageNotChanged("main".into()))
    );
    set_status(&mut after, "nginx:2", "sha256:bbb");
    assert_eq!(
        check_update_completed(&after, &CompletionCheck::default()),
        Ok(())
    );
}

#[test]
fn tag_change_resolving_to_same_digest_completes() {
    let pod = running_pod("nginx:1", "sha256:same");
    let b = begin_update(&pod, &request("nginx:1", "nginx:1-alias", 0), t(0)).unwrap();
    let mut p = b.write.pod.clone();
    // kubelet restarted the container with the new tag; the digest (imageID) is unchanged
    set_status(&mut p, "nginx:1-alias", "sha256:same");
    assert_eq!(
        check_update_completed(&p, &CompletionCheck::default()),
        Ok(())
    );
    // Still the old tag reported: not yet, as far as the status can tell. (containerd 1.6
    // reports a container's image by the digest's first tag, restarted or not: the node
    // agent's runtime-containers-meta, with the kubelet's hash of the running container,
    // settles it below.)
    set_status(&mut p, "nginx:1", "sha256:same").container_id = Some("containerd://new".into());
    assert_eq!(
        check_update_completed(&p, &CompletionCheck::default()),
        Err(NotCompleted::ImageNotChanged("main".into()))
    );
    let hash_of = |image: &str| kruise_compat::gohash::kubelet_container_hash("main", image);
    let with_meta = |pod: &Pod, id: &str, hash: u64| {
        let mut pod = pod.clone();
        pod.metadata.annotations.as_mut().unwrap().insert(
            RUNTIME_CONTAINERS_META_KEY.into(),
            json!({"containers": [{"name": "main", "containerID": id, "restartCount": 1,
                "hashes": {"plainHash": hash, "plainHashWithoutResources": 0, "extractedEnvFromMetadataHash": 0}}]})
            .to_string(),
        );
        pod
    };
    assert_eq!(
        check_update_completed(
            &with_meta(&p, "containerd://new", hash_of("nginx:1-alias")),
            &CompletionCheck::default()
        ),
        Ok(())
    );
    // The container still runs the old spec, or the meta is of an earlier container.
    for (id, image) in [
        ("containerd://new", "nginx:1"),
        ("containerd://old", "nginx:1-alias"),
    ] {
        assert_eq!(
            check_update_completed(
                &with_meta(&p, id, hash_of(image)),
                &CompletionCheck::default()
            ),
            Err(NotCompleted::ImageNotChanged("main".into())),
            "{id} {image}"
        );
    }
}

#[test]
fn untagged_image_compared_as_latest_and_missing_status() {
    let pod = running_pod("nginx:1", "sha256:x");
    let b = begin_update(&pod, &request("nginx:1", "nginx", 0), t(0)).unwrap();
    let mut p = b.write.pod.clone();
    set_status(&mut p, "nginx:latest", "sha256:x");
    assert_eq!(
        check_update_completed(&p, &CompletionCheck::default()),
        Ok(())
    );
    p.status.as_mut().unwrap().container_statuses = Some(vec![]);
    assert_eq!(
        check_update_completed(&p, &CompletionCheck::default()),
        Err(NotCompleted::StatusMissing(vec!["main".into()]))
    );
    let require_ready = CompletionCheck {
        require_ready: true,
        ..Default::default()
    };
    set_status(&mut p, "nginx:latest", "sha256:y").ready = false;
    assert_eq!(
        check_update_completed(&p, &require_ready),
        Err(NotCompleted::NotReady("main".into()))
    );
    assert_eq!(
        check_update_completed(&p, &CompletionCheck::default()),
        Ok(())
    );
}

#[test]
fn grace_period_then_apply_then_ready() {
    let pod = running_pod("nginx:1", "sha256:aaa");
    let b = begin_update(&pod, &request("nginx:1", "nginx:2", 10), t(0)).unwrap();
    assert_eq!(b.requeue_after, Some(SignedDuration::from_secs(10)));
    let p = b.write.pod.clone();
    assert_eq!(
        p.spec.as_ref().unwrap().containers[0].image.as_deref(),
        Some("nginx:1"),
        "spec waits for the grace"
    );
    let ann = p.metadata.annotations.as_ref().unwrap();
    let grace: Value = serde_json::from_str(&ann[INPLACE_UPDATE_GRACE_KEY]).unwrap();
    assert_eq!(
        grace,
        json!({"revision": "demo-new", "containerImages": {"main": "nginx:2"}, "graceSeconds": 10})
    );
    let state: Value = serde_json::from_str(&ann[INPLACE_UPDATE_STATE_KEY]).unwrap();
    assert_eq!(state["lastContainerStatuses"], Value::Null);
    assert_eq!(
        check_update_completed(&p, &CompletionCheck::default()),
        Err(NotCompleted::InGrace)
    );
    // a restarted controller sees only the annotations:
    let c = CompletionCheck::default();
    assert_eq!(
        refresh(&p, t(4) + SignedDuration::from_millis(500), &c),
        RefreshAction::WaitGrace {
            requeue_after: SignedDuration::from_secs(6)
        }
    );
    let RefreshAction::Write(w) = refresh(&p, t(10), &c) else {
        panic!("grace over: apply")
    };
    assert_eq!(
        w.pod.spec.as_ref().unwrap().containers[0].image.as_deref(),
        Some("nginx:2")
    );
    let ann = w.pod.metadata.annotations.as_ref().unwrap();
    assert!(!ann.contains_key(INPLACE_UPDATE_GRACE_KEY));
    let state: InPlaceUpdateState = serde_json::from_str(&ann[INPLACE_UPDATE_STATE_KEY]).unwrap();
    assert_eq!(
        state.last_container_statuses.unwrap()["main"].image_id,
        "sha256:aaa"
    );
    assert_eq!(
        w.patch.as_ref().unwrap()["metadata"]["annotations"][INPLACE_UPDATE_GRACE_KEY],
        Value::Null
    );
    // kubelet done -> refresh sets InPlaceUpdateReady=True (pod status still has it False)
    let mut done = w.pod.clone();
    set_status(&mut done, "nginx:2", "sha256:bbb");
    let st = b.unready_status.clone().unwrap();
    done.status.as_mut().unwrap().conditions = st.conditions.clone();
    assert_eq!(refresh(&done, t(20), &c).clone(), {
        let RefreshAction::SetReady(s) = refresh(&done, t(20), &c) else {
            panic!("ready")
        };
        assert_eq!(cond(&s, INPLACE_UPDATE_READY).status, "True");
        RefreshAction::SetReady(s)
    });
    // not done -> nothing
    let mut not_done = w.pod.clone();
    not_done.status.as_mut().unwrap().conditions = st.conditions;
    assert_eq!(refresh(&not_done, t(20), &c), RefreshAction::Nothing);
}

#[test]
fn grace_dropped_when_revision_changed() {
    let pod = running_pod("nginx:1", "sha256:aaa");
    let b = begin_update(&pod, &request("nginx:1", "nginx:2", 10), t(0)).unwrap();
    let mut p = b.write.pod.clone();
    p.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert(CONTROLLER_REVISION_HASH_KEY.into(), "demo-other".into());
    let RefreshAction::Write(w) = refresh(&p, t(1), &CompletionCheck::default()) else {
        panic!("drop grace")
    };
    assert!(
        !w.pod
            .metadata
            .annotations
            .as_ref()
            .unwrap()
            .contains_key(INPLACE_UPDATE_GRACE_KEY)
    );
    assert_eq!(
        w.pod.spec.as_ref().unwrap().containers[0].image.as_deref(),
        Some("nginx:1")
    );
}

#[test]
fn fresh_pod_gets_ready_condition_and_no_gate_no_write() {
    let mut pod = running_pod("nginx:1", "sha256:aaa");
    pod.status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap()
        .retain(|c| c.type_ != INPLACE_UPDATE_READY);
    assert!(matches!(
        refresh(&pod, t(0), &CompletionCheck::default()),
        RefreshAction::SetReady(_)
    ));
    let ready = running_pod("nginx:1", "sha256:aaa");
    assert_eq!(
        refresh(&ready, t(0), &CompletionCheck::default()),
        RefreshAction::Nothing
    );
    let mut no_gate = pod.clone();
    no_gate.spec.as_mut().unwrap().readiness_gates = None;
    assert_eq!(
        refresh(&no_gate, t(0), &CompletionCheck::default()),
        RefreshAction::Nothing
    );
    assert!(
        begin_update(&no_gate, &request("nginx:1", "nginx:2", 0), t(0))
            .unwrap()
            .unready_status
            .is_none()
    );
    inject_readiness_gate(&mut no_gate);
    inject_readiness_gate(&mut no_gate);
    assert_eq!(
        no_gate
            .spec
            .as_ref()
            .unwrap()
            .readiness_gates
            .as_ref()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn container_priority_batches() {
    let barrier = |p: i32| json!([{"name": "KRUISE_CONTAINER_BARRIER", "valueFrom": {"configMapKeyRef": {"name": "x-barrier", "key": format!("p_{p}")}}}]);
    let mut pod = running_pod("a:1", "id-a");
    pod.spec.as_mut().unwrap().containers = serde_json::from_value(json!([
        {"name": "a", "image": "a:1", "env": barrier(10)},
        {"name": "b", "image": "b:1", "env": barrier(1)},
    ]))
    .unwrap();
    pod.status.as_mut().unwrap().container_statuses = serde_json::from_value(json!([
        {"name": "a", "image": "a:1", "imageID": "id-a", "ready": true, "restartCount": 0},
        {"name": "b", "image": "b:1", "imageID": "id-b", "ready": true, "restartCount": 0},
    ]))
    .unwrap();
    let req = UpdateRequest {
        old_revision_data: data(
            json!([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]),
        ),
        new_revision_data: data(
            json!([{"name": "a", "image": "a:2"}, {"name": "b", "image": "b:2"}]),
        ),
        revision: "demo-new".into(),
        revision_labels: crate::revision::pod_revision_labels("demo-new", false),
        ..Default::default()
    };
    let b = begin_update(&pod, &req, t(0)).unwrap();
    let p = b.write.pod.clone();
    let imgs: Vec<_> = p
        .spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .map(|c| c.image.clone().unwrap())
        .collect();
    assert_eq!(imgs, ["a:2", "b:1"], "only the highest priority first");
    let state = update_state(&p).unwrap().unwrap();
    assert_eq!(
        state.next_container_images,
        BTreeMap::from([("b".to_string(), "b:2".to_string())])
    );
    assert_eq!(
        state
            .pre_check_before_next
            .as_ref()
            .unwrap()
            .containers_required_ready,
        ["a"]
    );
    assert_eq!(
        check_update_completed(&p, &CompletionCheck::default()),
        Err(NotCompleted::NextBatches)
    );
    // a restarted, container not yet ready: wait
    let mut p2 = p.clone();
    p2.status.as_mut().unwrap().container_statuses = serde_json::from_value(json!([
        {"name": "a", "image": "a:2", "imageID": "id-a2", "ready": false, "restartCount": 1},
        {"name": "b", "image": "b:1", "imageID": "id-b", "ready": true, "restartCount": 0},
    ]))
    .unwrap();
    assert_eq!(
        refresh(&p2, t(5), &CompletionCheck::default()),
        RefreshAction::Nothing
    );
    p2.status
        .as_mut()
        .unwrap()
        .container_statuses
        .as_mut()
        .unwrap()[0]
        .ready = true;
    let RefreshAction::Write(w) = refresh(&p2, t(6), &CompletionCheck::default()) else {
        panic!("next batch")
    };
    let imgs: Vec<_> = w
        .pod
        .spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .map(|c| c.image.clone().unwrap())
        .collect();
    assert_eq!(imgs, ["a:2", "b:2"]);
    let state = update_state(&w.pod).unwrap().unwrap();
    assert!(!state.has_next_batch() && state.pre_check_before_next.is_none());
    assert_eq!(state.container_batches_record.len(), 2);
    assert_eq!(state.last_container_statuses.unwrap().len(), 2);
}

/// OpenKruise's e2e "in-place update two container image, resource with priorities": the
/// later batch's resources go out with its image, once the first batch is done — which
/// needs every container's status `resources`, `{}` for one that asks none (Go's
/// `IsUpdateCompleted`; the kubelet reports `{}` for a running container).
#[test]
fn a_later_batch_carries_its_resize_once_every_container_reports_resources() {
    let barrier = |p: i32| json!([{"name": "KRUISE_CONTAINER_BARRIER", "valueFrom": {"configMapKeyRef": {"name": "x-barrier", "key": format!("p_{p}")}}}]);
    let gates = InPlaceGates {
        env_from_metadata: true,
        vertical_scaling: true,
    };
    let mut pod = running_pod("nginx:1", "id-n");
    pod.spec.as_mut().unwrap().containers = serde_json::from_value(json!([
        {"name": "nginx", "image": "nginx:1", "env": barrier(0), "resources": res("200m", "1", "1Gi")},
        {"name": "redis", "image": "redis:1", "env": barrier(10)},
    ]))
    .unwrap();
    pod.status.as_mut().unwrap().container_statuses = serde_json::from_value(json!([
        {"name": "nginx", "image": "nginx:1", "imageID": "id-n", "ready": true, "restartCount": 0,
         "resources": res("200m", "1", "1Gi")},
        {"name": "redis", "image": "redis:1", "imageID": "id-r", "ready": true, "restartCount": 0,
         "resources": {}},
    ]))
    .unwrap();
    let req = UpdateRequest {
        old_revision_data: data(json!([
            {"name": "nginx", "image": "nginx:1", "resources": res("200m", "1", "1Gi")},
            {"name": "redis", "image": "redis:1"},
        ])),
        new_revision_data: data(json!([
            {"name": "nginx", "image": "nginx:2", "resources": res("100m", "800m", "800Mi")},
            {"name": "redis", "image": "redis:2"},
        ])),
        revision: "demo-new".into(),
        gates,
        ..Default::default()
    };
    let b = begin_update(&pod, &req, t(0)).unwrap();
    assert_eq!(b.write.resize_patch, None, "nginx waits for redis");
    let state = update_state(&b.write.pod).unwrap().unwrap();
    assert!(state.next_container_resources.contains_key("nginx"));
    let check = CompletionCheck {
        vertical_scaling: true,
        ..Default::default()
    };
    // redis restarted on its new image and Ready.
    let mut p = b.write.pod.clone();
    let restarted = |redis_resources: Value| -> Vec<k8s_openapi::api::core::v1::ContainerStatus> {
        let mut redis = json!({"name": "redis", "image": "redis:2", "imageID": "id-r2",
            "ready": true, "restartCount": 1});
        if !redis_resources.is_null() {
            redis["resources"] = redis_resources;
        }
        serde_json::from_value(json!([
            {"name": "nginx", "image": "nginx:1", "imageID": "id-n", "ready": true,
             "restartCount": 0, "resources": res("200m", "1", "1Gi")},
            redis,
        ]))
        .unwrap()
    };
    // Without redis's status resources the batch is not done (as in Go).
    p.status.as_mut().unwrap().container_statuses = Some(restarted(Value::Null));
    assert_eq!(refresh(&p, t(5), &check), RefreshAction::Nothing);
    p.status.as_mut().unwrap().container_statuses = Some(restarted(json!({})));
    let RefreshAction::Write(w) = refresh(&p, t(6), &check) else {
        panic!("the next batch")
    };
    assert_eq!(
        w.resize_patch,
        Some(
            json!({"spec": {"containers": [{"name": "nginx", "resources": res("100m", "800m", "800Mi")}]}})
        )
    );
    let nginx = &w.pod.spec.as_ref().unwrap().containers[0];
    assert_eq!(nginx.image.as_deref(), Some("nginx:2"));
    let state = update_state(&w.pod).unwrap().unwrap();
    assert!(!state.has_next_batch());
    let batches: Vec<Vec<String>> = state
        .container_batches_record
        .iter()
        .map(|b| b.containers.clone())
        .collect();
    assert_eq!(
        batches,
        [vec!["redis".to_string()], vec!["nginx".to_string()]]
    );
}

#[test]
fn vertical_resize_patch_and_completion() {
    let v = InPlaceGates {
        env_from_metadata: true,
        vertical_scaling: true,
    };
    let mut pod = running_pod("nginx:1", "id");
    pod.spec.as_mut().unwrap().containers[0].resources =
        serde_json::from_value(res("100m", "1", "1Gi")).ok();
    let req = UpdateRequest {
        old_revision_data: data(
            json!([{"name": "main", "image": "nginx:1", "resources": res("100m", "1", "1Gi")}]),
        ),
        new_revision_data: data(
            json!([{"name": "main", "image": "nginx:1", "resources": res("200m", "1", "1Gi")}]),
        ),
        revision: "demo-new".into(),
        gates: v,
        ..Default::default()
    };
    let b = begin_update(&pod, &req, t(0)).unwrap();
    assert!(
        b.unready_status.is_none(),
        "resources-only change without RestartContainer policy keeps the pod ready"
    );
    assert_eq!(
        b.write.resize_patch,
        Some(
            json!({"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "200m"}}}]}})
        )
    );
    let mut p = b.write.pod.clone();
    let check = CompletionCheck {
        vertical_scaling: true,
        ..Default::default()
    };
    assert!(matches!(
        check_update_completed(&p, &check),
        Err(NotCompleted::ResourcesNotResized(_))
    ));
    p.status
        .as_mut()
        .unwrap()
        .container_statuses
        .as_mut()
        .unwrap()[0]
        .resources = serde_json::from_value(res("0.2", "1000m", "1Gi")).ok();
    assert_eq!(check_update_completed(&p, &check), Ok(()));
}

#[test]
fn reads_go_written_annotations_and_legacy_keys() {
    let mut pod = running_pod("nginx:2", "sha256:new");
    let go_state = r#"{"revision":"demo-7f8","updateTimestamp":"2024-01-02T03:04:05Z","lastContainerStatuses":{"main":{"imageID":"sha256:old"}},"updateImages":true}"#;
    pod.metadata.annotations = Some(BTreeMap::from([(
        INPLACE_UPDATE_STATE_KEY_OLD.to_string(),
        go_state.to_string(),
    )]));
    let s = update_state(&pod).unwrap().unwrap();
    assert_eq!(s.revision, "demo-7f8");
    assert_eq!(
        serde_json::to_string(&s).unwrap(),
        go_state,
        "re-serialized byte-identically"
    );
    assert_eq!(
        check_update_completed(&pod, &CompletionCheck::default()),
        Ok(())
    );
    // Go's UpdateSpec with a []byte metaDataPatch (base64 of {"metadata":{"labels":{"a":"b"}}})
    let go_spec = r#"{"revision":"r","metaDataPatch":"eyJtZXRhZGF0YSI6eyJsYWJlbHMiOnsiYSI6ImIifX19","graceSeconds":3}"#;
    let spec: UpdateSpec = serde_json::from_str(go_spec).unwrap();
    assert_eq!(
        spec.meta_data_patch,
        Some(json!({"metadata": {"labels": {"a": "b"}}}))
    );
    assert_eq!(serde_json::to_string(&spec).unwrap(), go_spec);
    // runtime-containers-meta for env-from-metadata: containerID must match status
    let mut envp = running_pod("nginx:1", "id");
    envp.status
        .as_mut()
        .unwrap()
        .container_statuses
        .as_mut()
        .unwrap()[0]
        .container_id = Some("containerd://2".into());
    let st = r#"{"revision":"r","updateTimestamp":"2024-01-02T03:04:05Z","lastContainerStatuses":null,"updateEnvFromMetadata":true}"#;
    envp.metadata.annotations = Some(BTreeMap::from([(
        INPLACE_UPDATE_STATE_KEY.to_string(),
        st.to_string(),
    )]));
    assert!(matches!(
        check_update_completed(&envp, &CompletionCheck::default()),
        Err(NotCompleted::HashNotConsistent(_))
    ));
    let meta = |id: &str| {
        format!(
            r#"{{"containers":[{{"name":"main","containerID":"{id}","restartCount":1,"hashes":{{"plainHash":1,"extractedEnvFromMetadataHash":7}}}}]}}"#
        )
    };
    envp.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(RUNTIME_CONTAINERS_META_KEY.into(), meta("containerd://1"));
    assert!(check_update_completed(&envp, &CompletionCheck::default()).is_err());
    envp.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(RUNTIME_CONTAINERS_META_KEY.into(), meta("containerd://2"));
    assert_eq!(
        check_update_completed(&envp, &CompletionCheck::default()),
        Ok(())
    );
    let wrong = |_: &k8s_openapi::api::core::v1::Container, _: &Pod| 8u64;
    assert!(
        check_update_completed(
            &envp,
            &CompletionCheck {
                env_hash: Some(&wrong),
                ..Default::default()
            }
        )
        .is_err()
    );
}

#[test]
fn env_from_metadata_apply_sets_labels() {
    let c = json!([{"name": "main", "image": "nginx:1", "env": [
        {"name": "VER", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['ver']"}}}
    ]}]);
    let old = data(c.clone());
    let mut new = old.clone();
    new["spec"]["template"]["metadata"]["labels"]["ver"] = json!("2");
    new["spec"]["template"]["metadata"]["labels"]["other"] = json!("x");
    let pod = running_pod("nginx:1", "id");
    let req = UpdateRequest {
        old_revision_data: old,
        new_revision_data: new,
        revision: "demo-new".into(),
        ..Default::default()
    };
    let b = begin_update(&pod, &req, t(0)).unwrap();
    let labels = b.write.pod.metadata.labels.clone().unwrap();
    assert_eq!(labels["ver"], "2");
    assert_eq!(labels["other"], "x");
    let state = update_state(&b.write.pod).unwrap().unwrap();
    assert!(state.update_env_from_metadata && !state.update_images);
}

#[test]
fn json_diff_ops() {
    let ops = json_diff(
        &json!({"a": [1, 2], "b": {"c/d": 1}}),
        &json!({"a": [1], "b": {"c/d": 2}, "e": true}),
    );
    let paths: Vec<_> = ops.iter().map(|o| (o.op, o.path.as_str())).collect();
    assert_eq!(
        paths,
        [
            (DiffOpKind::Remove, "/a/1"),
            (DiffOpKind::Replace, "/b/c~1d"),
            (DiffOpKind::Add, "/e")
        ]
    );
}

#[test]
fn revisions_variant_and_vct_gate() {
    use k8s_openapi::api::apps::v1::ControllerRevision;
    use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
    let cr = |name: &str, img: &str, vct: Option<&str>| ControllerRevision {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            annotations: vct
                .map(|v| BTreeMap::from([(CLONESET_VCT_HASH_KEY.to_string(), v.to_string())])),
            ..Default::default()
        },
        data: Some(RawExtension(data(json!([main_c(img)])))),
        revision: 1,
    };
    let g = InPlaceGates::default();
    let spec = calculate_update_spec_for_revisions(
        Some(&cr("a", "x:1", Some("1"))),
        Some(&cr("b", "x:2", Some("1"))),
        g,
        0,
        true,
    )
    .unwrap();
    assert_eq!(spec.revision, "b");
    assert_eq!(
        calculate_update_spec_for_revisions(
            Some(&cr("a", "x:1", Some("1"))),
            Some(&cr("b", "x:2", Some("2"))),
            g,
            0,
            true
        ),
        Err(RecreateReason::VolumeClaimTemplatesChanged)
    );
    assert!(
        calculate_update_spec_for_revisions(
            Some(&cr("a", "x:1", Some("1"))),
            Some(&cr("b", "x:2", Some("2"))),
            g,
            0,
            false
        )
        .is_ok()
    );
    assert!(
        calculate_update_spec_for_revisions(
            Some(&cr("a", "x:1", None)),
            Some(&cr("b", "x:2", Some("2"))),
            g,
            0,
            true
        )
        .is_ok()
    );
    assert!(
        calculate_update_spec_for_revisions(None, Some(&cr("b", "x:2", None)), g, 0, true).is_err()
    );
}

#[test]
fn go_artefacts_in_old_revision_do_not_force_recreate() {
    // Revision written by OpenKruise (Go artefacts, defaulted empty structs) vs ours.
    let go_old: Value = serde_json::from_str(
        r#"{"spec":{"template":{"$patch":"replace","metadata":{"creationTimestamp":null,"labels":{"app":"demo"}},"spec":{"containers":[{"env":[],"image":"nginx:1","name":"main","resources":{}}],"securityContext":{}}}}}"#,
    )
    .unwrap();
    let ours = template_revision_data(&json!({
        "metadata": {"labels": {"app": "demo"}},
        "spec": {"containers": [{"name": "main", "image": "nginx:2"}]}
    }));
    let spec = calc(&go_old, &ours, InPlaceGates::default()).unwrap();
    assert_eq!(spec.container_images["main"], "nginx:2");
}
