//! kruise-webhook's `workloads` step against kruise-sim (or the real API server of
//! `KRUISE_TEST_KUBECONFIG`): gated pods get the `KruisePodReady` condition once, one
//! `pods/status` write per pod however many events the pod goes through before the write
//! shows in the watch (binding, the kubelet's statuses). With `KruisePodReadinessGate` on,
//! every pod is gated, so the pods need no owner (the garbage collector would delete pods of
//! a CloneSet that does not exist).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kruise_testkit as support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_core::pods::PodView as _;
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_kruise-webhook");
const AGENT: &str = "kruise-webhook/";
const PODS: usize = 40;

/// kruise-webhook's `pods/status` patches so far.
fn status_writes(cluster: &support::TestCluster) -> u64 {
    cluster
        .counters()
        .of_agent(AGENT, "patch", "pods", "status", None)
}

fn gated_pod(namespace: &str, name: &str) -> Pod {
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name.split('-').next()}},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]}}))
    .unwrap()
}

/// Whether the pod's condition `type_` is `True`.
fn is_true(pod: &Pod, type_: &str) -> bool {
    pod.condition(type_).is_some_and(|c| c.status == "True")
}

/// Creates `name` and waits until it is Ready with `KruisePodReady=True`.
async fn create_and_wait(pods: &Api<Pod>, namespace: &str, name: &str) {
    let created = pods
        .create(&PostParams::default(), &gated_pod(namespace, name))
        .await
        .unwrap();
    let gates = created.spec.unwrap().readiness_gates.unwrap_or_default();
    assert_eq!(gates.len(), 1, "{name} has the gate");
    support::eventually("the pod Ready", Duration::from_secs(60), || async {
        let pod = pods.get(name).await.ok()?;
        is_true(&pod, "Ready").then_some(())
    })
    .await;
}

#[tokio::test]
async fn one_readiness_write_per_pod() {
    let (cluster, client) = support::cluster_with_crds(3, &[]).await;
    let namespace = client.default_namespace().to_string();
    let port = support::free_port();
    let webhook = support::spawn_replica(
        BIN,
        &cluster.kubeconfig_path(),
        port,
        &[
            "--enable=workloads",
            "--feature-gates=KruisePodReadinessGate=true",
        ],
        &[],
    );
    webhook.wait_ready(Duration::from_secs(60)).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    // Once the published configuration reaches the API server, a pod gets the gate (pods
    // created before that have none, and kruise-webhook leaves them alone).
    let mut attempt = 0;
    support::eventually("the gate injected", Duration::from_secs(30), || {
        attempt += 1;
        let (pods, name) = (pods.clone(), format!("first-{attempt}"));
        let pod = gated_pod(&namespace, &name);
        async move {
            let created = pods.create(&PostParams::default(), &pod).await.ok()?;
            created.spec?.readiness_gates.is_some().then_some(name)
        }
    })
    .await;
    support::eventually(
        "the first gated pod Ready",
        Duration::from_secs(60),
        || async {
            let listed = pods.list(&ListParams::default()).await.ok()?;
            let gated = listed
                .items
                .iter()
                .find(|p| p.spec.as_ref().is_some_and(|s| s.readiness_gates.is_some()))?;
            is_true(gated, "Ready").then_some(())
        },
    )
    .await;
    let before = status_writes(&cluster);

    // Created all at once, so their binding and kubelet statuses queue behind each write.
    let creates = (0..PODS).map(|i| {
        let pods = pods.clone();
        let namespace = namespace.clone();
        async move {
            pods.create(
                &PostParams::default(),
                &gated_pod(&namespace, &format!("web-{i}")),
            )
            .await
            .unwrap()
        }
    });
    for created in futures::future::join_all(creates).await {
        assert!(created.spec.unwrap().readiness_gates.is_some());
    }
    support::eventually(
        "every pod Ready with KruisePodReady",
        Duration::from_secs(120),
        || async {
            let listed = pods
                .list(&ListParams::default().labels("app=web"))
                .await
                .ok()?;
            let ready = listed
                .items
                .iter()
                .filter(|p| is_true(p, "KruisePodReady") && is_true(p, "Ready"));
            (ready.count() == PODS).then_some(())
        },
    )
    .await;
    // kruise-webhook takes pod events in watch order: once a pod created after them has its
    // condition, every event of the others has been seen.
    create_and_wait(&pods, &namespace, "web-last").await;
    assert_eq!(
        status_writes(&cluster) - before,
        PODS as u64 + 1,
        "one KruisePodReady write per pod"
    );
    drop(webhook);
    cluster.shutdown().await;
}
