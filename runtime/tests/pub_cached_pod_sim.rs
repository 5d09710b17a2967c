//! `check_pod` on a controller's cached copy of a pod (CloneSet's pre-check before its own
//! updates): a copy that has not yet seen the pod become Ready would exempt it as
//! unavailable and let it be updated without spending the budget. That is how a rollout
//! under load moved a second pod to a failing image past `maxUnavailable: 1`. The exemption
//! is made again on the pod as the API has it, so the update spends the budget.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::Pod;
use kruise_core::pub_budget::decision::Gates;
use kruise_core::pub_budget::{PodUnavailableBudget, PodUnavailableBudgetStatus, PubOperation};
use kruise_runtime::pub_client::{Verdict, check_pod};
use kube::CustomResourceExt as _;
use kube::api::{Api, PostParams};
use serde_json::json;

const GATES: Gates = Gates {
    delete: true,
    update: true,
    in_place_vertical_scaling: false,
};

fn pod(name: &str, ready: bool) -> Pod {
    let ready = if ready { "True" } else { "False" };
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"},
                     "annotations": {"pub.kruise.io/related-pub": "web"}},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": ready}]}
    }))
    .unwrap()
}

/// Creates the pod in the API with its status (no kubelet runs: the status stays as set).
async fn create_pod(pods: &Api<Pod>, name: &str, ready: bool) {
    let created = pods
        .create(&PostParams::default(), &pod(name, ready))
        .await
        .unwrap();
    let mut with_status = pod(name, ready);
    with_status.metadata.resource_version = created.metadata.resource_version;
    pods.replace_status(name, &PostParams::default(), &with_status)
        .await
        .unwrap();
}

/// Creates the budget `web` with `spec`, its status allowing one disruption of `total`.
async fn create_budget(
    client: &kube::Client,
    spec: serde_json::Value,
    total: i32,
) -> Api<PodUnavailableBudget> {
    let budgets = Api::<PodUnavailableBudget>::namespaced(client.clone(), "default");
    let mut budget: PodUnavailableBudget = serde_json::from_value(json!({
        "apiVersion": "policy.kruise.io/v1beta1", "kind": "PodUnavailableBudget",
        "metadata": {"name": "web"}, "spec": spec
    }))
    .unwrap();
    budget = budgets
        .create(&PostParams::default(), &budget)
        .await
        .unwrap();
    budget.status = Some(PodUnavailableBudgetStatus {
        unavailable_allowed: 1,
        desired_available: total - 1,
        current_available: total,
        total_replicas: total,
        ..Default::default()
    });
    budgets
        .replace_status("web", &PostParams::default(), &budget)
        .await
        .unwrap();
    budgets
}

#[tokio::test]
async fn an_update_checked_on_a_stale_copy_spends_the_budget_of_the_pod_as_it_is() {
    let (_sim, client) = kruise_testkit::sim_with_crds(0, &[PodUnavailableBudget::crd()]).await;
    let budgets = create_budget(
        &client,
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}),
        3,
    )
    .await;
    let pods = Api::<Pod>::default_namespaced(client.clone());
    create_pod(&pods, "web-0", true).await;
    create_pod(&pods, "web-1", true).await;
    create_pod(&pods, "web-2", false).await;
    let update = PubOperation::Update;

    // The cache still shows web-0 starting; it is Ready: the update is granted and recorded.
    let stale = pod("web-0", false);
    let verdict = check_pod(&client, &stale, true, &update, false, GATES).await;
    assert_eq!(verdict.unwrap(), Verdict::Allowed);
    let status = budgets.get("web").await.unwrap().status.unwrap();
    assert_eq!(status.unavailable_allowed, 0);
    assert_eq!(
        status.unavailable_pods.keys().collect::<Vec<_>>(),
        ["web-0"]
    );

    // The same stale view of web-1 now finds the budget spent: refused, not exempted.
    let stale = pod("web-1", false);
    let verdict = check_pod(&client, &stale, true, &update, false, GATES).await;
    assert!(
        matches!(&verdict, Ok(Verdict::Denied(m)) if m.contains("pub unavailable allowed is negative")),
        "{verdict:?}"
    );

    // A pod that really is not Ready costs the budget nothing, as before.
    let verdict = check_pod(&client, &pod("web-2", false), true, &update, false, GATES).await;
    assert_eq!(verdict.unwrap(), Verdict::Allowed);
    let status = budgets.get("web").await.unwrap().status.unwrap();
    assert_eq!(
        status.unavailable_pods.keys().collect::<Vec<_>>(),
        ["web-0"],
        "web-1 was refused and web-2 is exempt: neither is recorded"
    );

    // A pod as a request carries it is decided on as it is: the admission path is unchanged.
    let verdict = check_pod(&client, &pod("web-1", false), false, &update, false, GATES).await;
    assert_eq!(verdict.unwrap(), Verdict::Allowed);
}

#[tokio::test]
async fn a_stale_copy_without_the_related_pub_annotation_still_finds_its_target_ref_budget() {
    let (_sim, client) = kruise_testkit::sim_with_crds(0, &[PodUnavailableBudget::crd()]).await;
    // A targetRef budget is found through the pod's related-pub annotation only (the
    // controller writes it); the workload itself is not read by the check.
    let budgets = create_budget(
        &client,
        json!({"targetRef": {"apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet", "name": "web"},
               "maxUnavailable": 1}),
        2,
    )
    .await;
    let pods = Api::<Pod>::default_namespaced(client.clone());
    create_pod(&pods, "web-0", true).await;

    // The cache's copy is Ready but predates the annotation: the budget is still spent.
    let mut stale = pod("web-0", true);
    stale.metadata.annotations = None;
    let verdict = check_pod(&client, &stale, true, &PubOperation::Update, false, GATES).await;
    assert_eq!(verdict.unwrap(), Verdict::Allowed);
    let status = budgets.get("web").await.unwrap().status.unwrap();
    assert_eq!(status.unavailable_allowed, 0);
    assert_eq!(
        status.unavailable_pods.keys().collect::<Vec<_>>(),
        ["web-0"]
    );
}
