//! Container launch priority against kruise-sim, or the real API server of
//! `KRUISE_TEST_KUBECONFIG` with kruise-sim's nodes: the simulated kubelet holds a container
//! whose barrier key is missing (CreateContainerConfigError) and the controller opens the
//! keys as the higher-priority containers become ready. Pods are created as the pod webhook
//! would mutate them (`inject_barrier`; the chain itself is golden-tested).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kruise_crr::controller::launch_priority;
use kruise_crr::plan::launch_priority::{COMPLETED_KEY, inject_barrier};
use kruise_runtime::{Metrics, Readiness, RunOptions};
use kruise_testkit::{WAIT, eventually};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const CONTAINERS: [&str; 3] = ["app", "proxy", "log"];

/// Per container: started, ready, and the waiting reason.
fn states(pod: &Pod) -> Vec<(bool, bool, Option<String>)> {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    CONTAINERS
        .iter()
        .map(|name| {
            let status = statuses.iter().find(|s| s.name == *name);
            let started = status.is_some_and(|s| s.started == Some(true));
            let ready = status.is_some_and(|s| s.ready);
            let waiting = status.and_then(|s| s.state.as_ref()?.waiting.as_ref()?.reason.clone());
            (started, ready, waiting)
        })
        .collect()
}

#[tokio::test]
async fn launch_priority_starts_containers_in_priority_order() {
    let (cluster, client) = kruise_testkit::cluster_with_crds(1, &[]).await;
    let shutdown = CancellationToken::new();
    let opts = RunOptions {
        name: launch_priority::CONTROLLER_NAME.into(),
        concurrency: 4,
        metrics: Metrics::new(),
        readiness: Readiness::default(),
        shutdown: shutdown.clone(),
        leadership: Default::default(),
    };
    let controller = {
        let client = client.clone();
        tokio::spawn(async move { launch_priority::run(client, None, opts).await })
    };

    let mut pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "ordered", "annotations": {
            "apps.kruise.io/container-launch-priority": "Ordered",
            "sim.kruise.io/ready-delay": "300ms",
        }},
        "spec": {"nodeName": "sim-node-0", "containers": CONTAINERS.iter()
            .map(|c| json!({"name": c, "image": "busybox"})).collect::<Vec<_>>()},
    }))
    .unwrap();
    assert!(inject_barrier(&mut pod, "").unwrap());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    pods.create(&PostParams::default(), &pod).await.unwrap();

    // Watch the pod start: a container never starts before every earlier one is ready,
    // and the later ones are seen held with the kubelet's reason.
    let seen = Arc::new(Mutex::new((BTreeSet::new(), Vec::<usize>::new())));
    eventually("every container ready", WAIT, || {
        let (pods, seen) = (pods.clone(), seen.clone());
        async move {
            let pod = pods.get("ordered").await.ok()?;
            let states = states(&pod);
            let mut seen = seen.lock().unwrap();
            let (held, started_order) = &mut *seen;
            for (i, (started, _, waiting)) in states.iter().enumerate() {
                if *started {
                    assert!(
                        states[..i].iter().all(|(_, ready, _)| *ready),
                        "{} started before the ones ahead were ready: {states:?}",
                        CONTAINERS[i]
                    );
                    if !started_order.contains(&i) {
                        started_order.push(i);
                    }
                }
                if waiting.as_deref() == Some("CreateContainerConfigError") {
                    held.insert(i);
                }
            }
            states.iter().all(|(_, ready, _)| *ready).then_some(())
        }
    })
    .await;
    let (held, started_order) = seen.lock().unwrap().clone();
    assert_eq!(started_order, [0, 1, 2]);
    assert!(held.contains(&2), "log was never seen held: {held:?}");

    // The barrier holds every key and the pod is marked completed.
    let config_maps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let all_keys = BTreeSet::from(["p_0".to_string(), "p_-1".into(), "p_-2".into()]);
    let barrier = config_maps.get("ordered-barrier").await.unwrap();
    let keys: BTreeSet<String> = barrier.data.unwrap_or_default().into_keys().collect();
    assert_eq!(keys, all_keys);
    let owner = &barrier.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Pod", "ordered")
    );
    eventually("completed annotation", WAIT, || async {
        let pod = pods.get("ordered").await.ok()?;
        (pod.metadata.annotations?.get(COMPLETED_KEY)? == "true").then_some(())
    })
    .await;

    // K#914: a deleted barrier comes back with every key while the pod lives.
    config_maps
        .delete("ordered-barrier", &DeleteParams::default())
        .await
        .unwrap();
    eventually("barrier recreated", WAIT, || async {
        let barrier = config_maps.get_opt("ordered-barrier").await.ok()??;
        let keys: BTreeSet<String> = barrier.data?.into_keys().collect();
        (keys == all_keys).then_some(())
    })
    .await;

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(30), controller)
        .await
        .unwrap()
        .unwrap();
    cluster.shutdown().await;
}
