//! The PodUnavailableBudget controller against kruise-sim or the real API server of
//! `KRUISE_TEST_KUBECONFIG`: the scheduler binds the pods and the simulated kubelet makes
//! them Ready; the controller counts them against the workloads' replicas.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kruise_protection::api::v1beta1::PodUnavailableBudget;
use kube::ResourceExt as _;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_of_four_with_max_unavailable_25_percent() {
    let (cluster, client) = cluster(2).await;
    let _controller = start(&client);
    deployment(&client, "web", 4, 4).await;
    budget(
        &client,
        "web",
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": "25%"}),
    )
    .await;
    // OpenKruise's e2e: allowed 1, current 4, desired 3, total 4.
    wait_for_numbers(&client, "web", (1, 4, 3, 4)).await;
    let pods = Api::<Pod>::default_namespaced(client.clone());
    let pod = pods.get("web-7d4b9-0").await.unwrap();
    let annotations = pod.annotations();
    assert_eq!(
        annotations
            .get("pub.kruise.io/related-pub")
            .map(String::as_str),
        Some("web")
    );
    assert_eq!(
        annotations.get("kruise.io/related-pub").map(String::as_str),
        Some("web")
    );

    // Scaling the Deployment to 0 lowers the desired count to 0; the pods left (the
    // ReplicaSet's to delete, which its controller does) are all allowed to go.
    Api::<Deployment>::default_namespaced(client.clone())
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await
        .unwrap();
    // The Deployment's change wakes the budget itself, well before its 30 s resync (the
    // ReplicaSet controller deletes pods too): the scale-down's and the garbage
    // collector's deletions are not refused.
    let api = Api::<PodUnavailableBudget>::default_namespaced(client.clone());
    eventually(
        "web: nothing desired, every pod left allowed",
        Duration::from_secs(10),
        || async {
            let status = api.get("web").await.ok()?.status?;
            (status.desired_available == 0
                && status.total_replicas == 0
                && status.unavailable_allowed == status.current_available)
                .then_some(())
        },
    )
    .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_created_before_its_workload_converges_once_the_pods_exist() {
    let (cluster, client) = cluster(2).await;
    let _controller = start(&client);
    budget(
        &client,
        "api",
        json!({"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"},
        "minAvailable": "50%"}),
    )
    .await;
    wait_for_numbers(&client, "api", (0, 0, 0, 0)).await;
    deployment(&client, "api", 3, 3).await;
    // minAvailable 50% of 3: ceil(1.5) = 2.
    wait_for_numbers(&client, "api", (1, 3, 2, 3)).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protect_total_replicas_and_records_from_admission() {
    let (cluster, client) = cluster(2).await;
    let _controller = start(&client);
    deployment(&client, "db", 2, 2).await;
    budget(
        &client,
        "db",
        json!({"selector": {"matchLabels": {"app": "db"}}, "maxUnavailable": 1,
        "protectTotalReplicas": 5}),
    )
    .await;
    // 2 pods of 5 expected, at most 1 unavailable: 4 desired, none allowed.
    wait_for_numbers(&client, "db", (0, 2, 4, 5)).await;

    // A deletion granted by admission just now keeps its pod out of the count for 20 s.
    let api = Api::<PodUnavailableBudget>::default_namespaced(client.clone());
    let now = jiff::Timestamp::now().to_string();
    api.patch_status(
        "db",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"disruptedPods": {"db-7d4b9-0": now}}})),
    )
    .await
    .unwrap();
    let status = wait_for_numbers(&client, "db", (0, 1, 4, 5)).await;
    assert!(status.disrupted_pods.contains_key("db-7d4b9-0"));
    // Gone after the 20 s: the pod counts again.
    let api2 = api.clone();
    eventually(
        "the disruption record expires",
        Duration::from_secs(40),
        || {
            let api = api2.clone();
            async move {
                let status = api.get("db").await.ok()?.status?;
                (status.disrupted_pods.is_empty() && status.current_available == 2).then_some(())
            }
        },
    )
    .await;
    cluster.shutdown().await;
}
