use k8s_openapi::api::core::v1::Pod;
use kruise_compat::gohash::kubelet_container_hash;
use kruise_core::api::keys::{INPLACE_UPDATE_STATE_KEY, RUNTIME_CONTAINERS_META_KEY};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;
use crate::plan::agent::{RunState, RuntimeContainer};

const OLD: &str = "reg/busybox:2";
const NEW: &str = "reg/busybox:2-again";

/// A pod whose `main` was updated in place from OLD to NEW (one digest), its status still
/// naming OLD with the recorded image ID, as containerd 1.6 reports it: `main` under
/// `main_id`, `side` untouched.
fn updated_pod(main_id: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "annotations": {
            INPLACE_UPDATE_STATE_KEY: json!({"revision": "r2", "updateTimestamp": "2026-12-03T00:00:00Z",
                "lastContainerStatuses": {"main": {"imageID": "sha256:same"}}}).to_string()}},
        "spec": {"containers": [{"name": "main", "image": NEW}, {"name": "side", "image": "reg/busybox:1"}]},
        "status": {"containerStatuses": [
            {"name": "main", "image": OLD, "imageID": "sha256:same", "containerID": main_id, "ready": true, "restartCount": 1},
            {"name": "side", "image": "reg/busybox:1", "imageID": "sha256:one", "containerID": "containerd://side-0", "ready": true, "restartCount": 0}]}
    }))
    .unwrap()
}

fn container(name: &str, id: &str, attempt: i32, image: Option<&str>) -> RuntimeContainer {
    RuntimeContainer {
        name: name.into(),
        id: format!("containerd://{id}"),
        runtime_id: id.into(),
        state: RunState::Running,
        started_at: None,
        restart_count: attempt,
        kubelet_hash: image.map(|i| kubelet_container_hash(name, i)),
    }
}

#[test]
fn written_once_the_runtime_runs_every_container_under_the_specs_hash() {
    let pod = updated_pod("containerd://main-1");
    assert!(needs_runtime_meta(&pod));
    let runtime = [
        container("main", "main-1", 1, Some(NEW)),
        container("side", "side-0", 0, Some("reg/busybox:1")),
    ];
    let value = runtime_meta(&pod, &runtime).expect("the restarted container completes it");
    assert_eq!(
        serde_json::from_str::<Value>(&value).unwrap(),
        json!({"containers": [
            {"name": "main", "containerID": "containerd://main-1", "restartCount": 1,
             "hashes": {"plainHash": kubelet_container_hash("main", NEW), "plainHashWithoutResources": 0}},
            {"name": "side", "containerID": "containerd://side-0", "restartCount": 0,
             "hashes": {"plainHash": kubelet_container_hash("side", "reg/busybox:1"), "plainHashWithoutResources": 0}}]})
    );
    // The pod with it is complete; the agent has nothing more to write.
    let mut annotated = pod.clone();
    annotated
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(RUNTIME_CONTAINERS_META_KEY.into(), value);
    assert!(!needs_runtime_meta(&annotated));
}

#[test]
fn nothing_written_before_the_kubelet_restarted_the_container() {
    // The status still shows the old container, created from the old spec.
    let pod = updated_pod("containerd://main-0");
    let runtime = [
        container("main", "main-0", 0, Some(OLD)),
        container("side", "side-0", 0, Some("reg/busybox:1")),
    ];
    assert_eq!(runtime_meta(&pod, &runtime), None);
    // The runtime already runs the new one, the status does not show it yet.
    let runtime = [
        container("main", "main-1", 1, Some(NEW)),
        container("side", "side-0", 0, Some("reg/busybox:1")),
    ];
    assert_eq!(runtime_meta(&pod, &runtime), None);
}

#[test]
fn nothing_written_without_the_kubelets_hash_or_a_container() {
    let pod = updated_pod("containerd://main-1");
    // A runtime without the annotation, or an older kubelet's whole-container hash.
    let mut unhashed = container("main", "main-1", 1, None);
    let side = container("side", "side-0", 0, Some("reg/busybox:1"));
    assert_eq!(runtime_meta(&pod, &[unhashed.clone(), side.clone()]), None);
    unhashed.kubelet_hash = Some(12345);
    assert_eq!(runtime_meta(&pod, &[unhashed, side.clone()]), None);
    assert_eq!(runtime_meta(&pod, &[side]), None);
}

#[test]
fn only_an_unchanged_image_id_asks_the_runtime() {
    // A new digest: the status settles it.
    let mut pod = updated_pod("containerd://main-1");
    let statuses = pod
        .status
        .as_mut()
        .unwrap()
        .container_statuses
        .as_mut()
        .unwrap();
    statuses[0].image_id = "sha256:new".into();
    assert!(!needs_runtime_meta(&pod));
    // No in-place update.
    pod.metadata.annotations = None;
    assert!(!needs_runtime_meta(&pod));
}
