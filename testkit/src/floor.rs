//! The minimal writer: an in-place rollout done with nothing but the writes it needs, the
//! floor this simulator on this machine sets for any controller, measured in the same run
//! as the controller's own rollout.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

/// Creates `namespace` and `count` pods in it, `pod(i)` the i-th, 32 requests in flight.
pub async fn create_pods_in(
    client: &kube::Client,
    namespace: &str,
    count: i64,
    pod: impl Fn(i64) -> serde_json::Value,
) {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap(),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    futures::stream::iter(0..count)
        .map(|i| {
            let (pods, pod): (_, Pod) = (pods.clone(), serde_json::from_value(pod(i)).unwrap());
            async move {
                pods.create(&PostParams::default(), &pod).await.unwrap();
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<()>>()
        .await;
}

/// The same in-place rollout done by a minimal writer instead of the controller, on `n`
/// pods of their own (readiness gate `InPlaceUpdateReady`, as the CloneSet's): each pod
/// gets the three writes the controller makes (condition False, image, condition True
/// once the new container is ready) as soon as it can, with nothing else (no reconcile,
/// no revisions, no status, no events). Its time is what this simulator on this machine
/// allows any controller, the floor the controller's own rollout is compared with.
pub async fn minimal_writer_rollout(client: &kube::Client, n: i64) -> Duration {
    const NS: &str = "minimal-writer";
    const GATE: &str = "InPlaceUpdateReady";
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let gate = |status: &str| {
        Patch::Strategic(json!({"status": {"conditions": [
            {"type": GATE, "status": status, "lastTransitionTime": jiff::Timestamp::now().to_string()}
        ]}}))
    };
    let ready_with = |pod: &Pod, image: &str| {
        let status = pod.status.as_ref();
        let container_ready = status
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|cs| cs.iter().all(|c| c.ready && c.image == image));
        let condition = |t: &str| {
            status
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == t))
                .map(|c| c.status == "True")
        };
        (container_ready, condition(GATE), condition("Ready"))
    };
    // Set up (not timed): n gated pods, running and Ready.
    create_pods_in(client, NS, n, |i| {
        json!({
            "metadata": {"name": format!("pod-{i}"), "labels": {"app": "minimal"}},
            "spec": {"readinessGates": [{"conditionType": GATE}],
                     "containers": [{"name": "app", "image": "nginx:1.25",
                                     "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}
        })
    })
    .await;
    // One loop for both: a pod whose gate opened early can be Ready before the last gate
    // is opened, and its Ready event is not seen again.
    let (mut opened, mut ready) = (
        std::collections::HashSet::new(),
        std::collections::HashSet::new(),
    );
    let mut events = watcher(pods.clone(), watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while ready.len() < n as usize {
        let pod = events.next().await.unwrap().unwrap();
        let name = pod.metadata.name.clone().unwrap();
        let (container_ready, _, pod_ready) = ready_with(&pod, "nginx:1.25");
        if pod_ready == Some(true) {
            ready.insert(name);
        } else if container_ready && opened.insert(name.clone()) {
            pods.patch_status(&name, &PatchParams::default(), &gate("True"))
                .await
                .unwrap();
        }
    }

    // The timed rollout: condition False and the new image for every pod (32 requests in
    // flight, as the controller), condition True for each as its new container is ready.
    let started = Instant::now();
    let image = "nginx:1.26";
    let writer = {
        let pods = pods.clone();
        tokio::spawn(async move {
            futures::stream::iter(0..n)
                .map(|i| {
                    let pods = pods.clone();
                    async move {
                        let name = format!("pod-{i}");
                        pods.patch_status(&name, &PatchParams::default(), &gate("False"))
                            .await
                            .unwrap();
                        let spec =
                            json!({"spec": {"containers": [{"name": "app", "image": image}]}});
                        pods.patch(&name, &PatchParams::default(), &Patch::Strategic(spec))
                            .await
                            .unwrap();
                    }
                })
                .buffer_unordered(32)
                .collect::<Vec<()>>()
                .await
        })
    };
    let mut closing = futures::stream::FuturesUnordered::new();
    let (mut closed, mut done) = (
        std::collections::HashSet::new(),
        std::collections::HashSet::new(),
    );
    while done.len() < n as usize {
        tokio::select! {
            event = events.next() => {
                let pod = event.unwrap().unwrap();
                let name = pod.metadata.name.clone().unwrap();
                match ready_with(&pod, image) {
                    (true, Some(false), _) if closed.insert(name.clone()) => {
                        let pods = pods.clone();
                        closing.push(async move {
                            pods.patch_status(&name, &PatchParams::default(), &gate("True"))
                                .await
                                .unwrap();
                        });
                    }
                    (true, Some(true), Some(true)) => {
                        done.insert(name);
                    }
                    _ => {}
                }
            }
            Some(()) = closing.next(), if !closing.is_empty() => {}
        }
    }
    let took = started.elapsed();
    writer.await.unwrap();
    // Gone again before the next step, so it runs as it would have without this one.
    pods.delete_collection(&Default::default(), &Default::default())
        .await
        .unwrap();
    crate::eventually("minimal-writer pods gone", Duration::from_secs(120), || {
        let pods = pods.clone();
        async move {
            pods.list(&Default::default())
                .await
                .ok()
                .filter(|l| l.items.is_empty())
                .map(|_| ())
        }
    })
    .await;
    took
}
