//! The PodUnavailableBudget controller against kruise-sim: its scheduler binds the pods and
//! its kubelet makes them Ready; the controller counts them against the workloads' replicas.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kruise_common::runtime::{Metrics, Readiness, RunOptions};
use kruise_protection::api::v1beta1::{PodUnavailableBudget, PodUnavailableBudgetStatus};
use kruise_protection::controller;
use kruise_testkit::{WAIT, eventually, sim_with_crds};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The controller in-process until dropped.
struct Running(CancellationToken);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

fn start(client: &Client) -> Running {
    let shutdown = CancellationToken::new();
    let opts = RunOptions {
        name: controller::CONTROLLER_NAME.into(),
        concurrency: 2,
        metrics: Metrics::new(),
        readiness: Readiness::default(),
        shutdown: shutdown.clone(),
        leadership: Default::default(),
    };
    let client = client.clone();
    tokio::spawn(async move { controller::run(client, Some("default"), opts).await });
    Running(shutdown)
}

async fn create<K>(client: &Client, object: Value) -> K
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let object: K = serde_json::from_value(object).unwrap();
    Api::<K>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &object)
        .await
        .unwrap()
}

/// A Deployment of `replicas` (`app=<app>`), its ReplicaSet, and the ReplicaSet's pods, as
/// the Deployment controller would leave them (kruise-sim has none).
async fn deployment(client: &Client, app: &str, replicas: i32, pods: usize) {
    let selector = json!({"matchLabels": {"app": app}});
    let template = json!({"metadata": {"labels": {"app": app}},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}});
    let deploy: Deployment = create(
        client,
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": app},
        "spec": {"replicas": replicas, "selector": selector, "template": template}}),
    )
    .await;
    let rs: ReplicaSet = create(
        client,
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": format!("{app}-7d4b9"), "ownerReferences": [{"apiVersion": "apps/v1",
            "kind": "Deployment", "name": app, "uid": deploy.uid().unwrap(), "controller": true}]},
        "spec": {"replicas": replicas, "selector": selector, "template": template}}),
    )
    .await;
    for i in 0..pods {
        let _: Pod = create(
            client,
            json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{app}-7d4b9-{i}"), "labels": {"app": app},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": rs.name_any(), "uid": rs.uid().unwrap(), "controller": true}]},
            "spec": template["spec"]}),
        )
        .await;
    }
}

async fn budget(client: &Client, name: &str, spec: Value) {
    let _: PodUnavailableBudget = create(
        client,
        json!({"apiVersion": "policy.kruise.io/v1beta1",
        "kind": "PodUnavailableBudget", "metadata": {"name": name}, "spec": spec}),
    )
    .await;
}

/// Waits until the budget's (allowed, current, desired, total) are `want`.
async fn wait_for_numbers(
    client: &Client,
    name: &str,
    want: (i32, i32, i32, i32),
) -> PodUnavailableBudgetStatus {
    let api = Api::<PodUnavailableBudget>::namespaced(client.clone(), "default");
    eventually(&format!("{name} at {want:?}"), WAIT, || {
        let api = api.clone();
        async move {
            let status = api.get(name).await.ok()?.status?;
            let got = (
                status.unavailable_allowed,
                status.current_available,
                status.desired_available,
                status.total_replicas,
            );
            (got == want).then_some(status)
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_of_four_with_max_unavailable_25_percent() {
    let (_sim, client) = sim_with_crds(2, &[kruise_protection::api::crd::crd().unwrap()]).await;
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
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
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

    // Scaling the Deployment to 0 lowers the desired count to 0 (its pods are the
    // ReplicaSet's to delete; kruise-sim has no Deployment controller).
    Api::<Deployment>::namespaced(client.clone(), "default")
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await
        .unwrap();
    pods.delete("web-7d4b9-3", &Default::default())
        .await
        .unwrap();
    wait_for_numbers(&client, "web", (3, 3, 0, 0)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_created_before_its_workload_converges_once_the_pods_exist() {
    let (_sim, client) = sim_with_crds(2, &[kruise_protection::api::crd::crd().unwrap()]).await;
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protect_total_replicas_and_records_from_admission() {
    let (_sim, client) = sim_with_crds(2, &[kruise_protection::api::crd::crd().unwrap()]).await;
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
    let api = Api::<PodUnavailableBudget>::namespaced(client.clone(), "default");
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
}
