//! An in-place update of containers with launch priorities, against kruise-sim: the engine
//! patches the higher-priority sidecar first and the app only once the new sidecar is ready
//! (OpenKruise's container batches), on the same pod. Against kruise-sim, or the real API
//! server of `KRUISE_TEST_KUBECONFIG`.
//!
//! The pods carry the barrier env `KRUISE_CONTAINER_BARRIER` in the template, as the
//! launch-priority pod webhook (kruise-crr's, golden-tested there) would inject it; the
//! barrier ConfigMap holds every key, so the simulated kubelet starts the containers at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kruise_cloneset::api::v1beta1::CloneSet;
use kruise_core::api::keys::INPLACE_UPDATE_STATE_KEY;
use kruise_core::inplace::InPlaceUpdateState;
use kube::ResourceExt as _;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{RunningController, WAIT, cloneset, cluster_with_crd, eventually, pods_of};

fn barrier_env(priority: i32) -> serde_json::Value {
    json!([{"name": "KRUISE_CONTAINER_BARRIER", "valueFrom": {"configMapKeyRef": {
        "name": "web-barrier", "key": format!("p_{priority}")}}}])
}

fn containers(app_image: &str, sidecar_image: &str) -> serde_json::Value {
    json!([
        {"name": "app", "image": app_image, "env": barrier_env(0)},
        {"name": "sidecar", "image": sidecar_image, "env": barrier_env(1)},
    ])
}

/// Per container (app, sidecar): spec image, restart count, ready.
fn containers_of(pod: &Pod) -> [(String, i32, bool); 2] {
    ["app", "sidecar"].map(|name| {
        let image = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.iter().find(|c| c.name == name))
            .and_then(|c| c.image.clone())
            .unwrap_or_default();
        let status = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|v| v.iter().find(|s| s.name == name));
        (
            image,
            status.map_or(0, |s| s.restart_count),
            status.is_some_and(|s| s.ready),
        )
    })
}

#[tokio::test]
async fn in_place_update_restarts_the_higher_priority_sidecar_first() {
    let (cluster, client) = cluster_with_crd().await;
    let config_maps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    config_maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "web-barrier"},
                "data": {"p_0": "true", "p_1": "true"},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let controller = RunningController::start(&client);
    let clonesets: Api<CloneSet> = Api::default_namespaced(client.clone());
    clonesets
        .create(
            &PostParams::default(),
            &cloneset(
                "web",
                1,
                "unused",
                json!({
                    "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}},
                    // Long enough for the test to see the sidecar restarted but not ready, and
                    // longer than a second: startedAt is a Time, kept to whole seconds.
                    "template": {"metadata": {"annotations": {"sim.kruise.io/ready-delay": "1500ms"}},
                                 "spec": {"containers": containers("app:1", "sidecar:1")}},
                }),
            ),
        )
        .await
        .unwrap();
    let before = eventually("the pod runs, both containers ready", WAIT, || async {
        let pod = pods_of(&client, "web").await.pop()?;
        containers_of(&pod).iter().all(|c| c.2).then_some(pod)
    })
    .await;

    clonesets
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {
                "containers": containers("app:2", "sidecar:2")}}}})),
        )
        .await
        .unwrap();

    // Watch the update: the app's new image is never patched before the new sidecar is
    // ready, and the sidecar is seen restarted while the app still runs its old image.
    let seen_sidecar_first = Arc::new(Mutex::new(false));
    let after = eventually("both containers restarted on their new image", WAIT, || {
        let (client, seen) = (client.clone(), seen_sidecar_first.clone());
        async move {
            let pod = pods_of(&client, "web").await.pop()?;
            let [app, sidecar] = containers_of(&pod);
            if app.0 == "app:2" {
                assert!(
                    sidecar.0 == "sidecar:2" && sidecar.1 == 1 && sidecar.2,
                    "app patched before the new sidecar was ready: {app:?} {sidecar:?}"
                );
            }
            if sidecar.1 == 1 && app.0 == "app:1" && app.1 == 0 {
                *seen.lock().unwrap() = true;
            }
            (app.1 == 1 && app.2 && sidecar.1 == 1 && sidecar.2).then_some(pod)
        }
    })
    .await;
    assert!(
        *seen_sidecar_first.lock().unwrap(),
        "the sidecar was never seen restarted alone"
    );

    // Same pod, both containers restarted once on their new images.
    assert_eq!(
        (after.name_any(), after.uid()),
        (before.name_any(), before.uid())
    );
    assert_eq!(
        containers_of(&after),
        [("app:2".into(), 1, true), ("sidecar:2".into(), 1, true)]
    );
    // The state annotation records the two batches, as OpenKruise writes it.
    let state: InPlaceUpdateState =
        serde_json::from_str(&after.annotations()[INPLACE_UPDATE_STATE_KEY]).unwrap();
    let batches: Vec<Vec<String>> = state
        .container_batches_record
        .iter()
        .map(|b| b.containers.clone())
        .collect();
    assert_eq!(batches, [vec!["sidecar".to_string()], vec!["app".into()]]);
    assert!(!state.has_next_batch() && state.pre_check_before_next.is_none());
    assert_eq!(
        state
            .last_container_statuses
            .unwrap_or_default()
            .into_keys()
            .collect::<Vec<_>>(),
        ["app", "sidecar"]
    );
    // The app container started only after the new sidecar was ready (its ready delay of
    // 1.5 s, which whole-second timestamps show as at least one second).
    let started_at = |pod: &Pod, name: &str| {
        pod.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|v| v.iter().find(|s| s.name == name))
            .and_then(|s| s.state.as_ref()?.running.as_ref()?.started_at.clone())
            .unwrap()
            .0
    };
    let gap = started_at(&after, "app").duration_since(started_at(&after, "sidecar"));
    assert!(
        gap >= jiff::SignedDuration::from_secs(1),
        "app started {gap} after the sidecar"
    );

    // The CloneSet counts the pod updated and ready only now.
    eventually(
        "the CloneSet reports the pod updated and ready",
        WAIT,
        || async {
            let s = clonesets.get("web").await.ok()?.status?;
            (s.updated_ready_replicas == 1 && s.current_revision == s.update_revision).then_some(())
        },
    )
    .await;
    controller.stop().await;
    cluster.shutdown().await;
}
