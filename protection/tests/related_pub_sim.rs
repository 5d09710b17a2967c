//! The related-pub step of kruise-webhook's mutating pod chain against kruise-sim: built as
//! kruise-webhook builds it from the protection family's registration, served over TLS and
//! published in `kruise-mutating-webhook-configuration`, it annotates each pod created
//! under a budget with the budget's name (a targetRef budget through the pod's ReplicaSet
//! to its Deployment), leaves other pods alone, and never fails a pod.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kruise_admission::AdmissionRoutes;
use kruise_admission::pod_chain::PodChain;
use kruise_admission::publish::Owned;
use kruise_core::featuregate::FeatureGates;
use kruise_runtime::Metrics;
use kruise_runtime::family::{LiveCluster, StepContext};
use kube::ResourceExt as _;
use kube::api::Api;
use serde_json::json;
use support::*;
use tokio_util::sync::CancellationToken;

const MUTATING: &str = "kruise-mutating-webhook-configuration";

fn related_pub(pod: &Pod) -> (Option<&str>, Option<&str>) {
    let annotations = pod.annotations();
    (
        annotations
            .get("pub.kruise.io/related-pub")
            .map(String::as_str),
        annotations.get("kruise.io/related-pub").map(String::as_str),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_created_under_a_budget_are_annotated_with_its_name() {
    let (cluster, client) = cluster(2).await;
    // The Deployment and its ReplicaSet, no pod yet; the ReplicaSet controller's pods are
    // refused (see `deployment`), so any annotation is the webhook's.
    deployment(&client, "web", 2, 0).await;
    budget(
        &client,
        "web",
        json!({"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
               "maxUnavailable": 1}),
    )
    .await;
    budget(
        &client,
        "db",
        json!({"selector": {"matchLabels": {"app": "db"}}, "maxUnavailable": 1}),
    )
    .await;

    // The step as kruise-webhook builds it: the pod step the family lends.
    kruise_runtime::install_crypto_provider();
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let step = kruise_protection::binary::LENT
        .pod_steps
        .iter()
        .find(|s| s.name == "protection")
        .unwrap();
    let chain = PodChain::new(vec![(step.build)(&StepContext {
        gates: FeatureGates::default(),
        live: Some(LiveCluster {
            client: client.clone(),
            refresh: Default::default(),
            shutdown: shutdown.clone(),
        }),
        metrics: Metrics::new(),
    })]);
    eventually("both budgets in the step's scopes", WAIT, || {
        let entries = chain.webhook_specs().len();
        async move { (entries == 2).then_some(()) }
    })
    .await;
    let owned = Owned {
        mutating: Some(MUTATING.into()),
        validating: None,
        crds: Vec::new(),
    };
    serve(
        &client,
        AdmissionRoutes::new().handler(chain),
        &owned,
        &shutdown,
    )
    .await;
    // The annotation is an optimisation (the controller sets it too): never fail a pod.
    let configuration = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get(MUTATING)
        .await
        .unwrap();
    let policies: Vec<Option<String>> = configuration
        .webhooks
        .iter()
        .flatten()
        .map(|w| w.failure_policy.clone())
        .collect();
    assert_eq!(policies, [Some("Ignore".into()), Some("Ignore".into())]);

    // A pod of the Deployment's ReplicaSet: the targetRef budget, both keys.
    let rs = Api::<ReplicaSet>::default_namespaced(client.clone())
        .get("web-7d4b9")
        .await
        .unwrap();
    let web: Pod = create(
        &client,
        json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-7d4b9-0", "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": "web-7d4b9", "uid": rs.uid().unwrap(), "controller": true}]},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}}),
    )
    .await;
    assert_eq!(related_pub(&web), (Some("web"), Some("web")));
    // A pod the selector budget matches.
    let db: Pod = create(
        &client,
        json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "db-0", "labels": {"app": "db"}},
        "spec": {"containers": [{"name": "main", "image": "postgres:16"}]}}),
    )
    .await;
    assert_eq!(related_pub(&db), (Some("db"), Some("db")));
    // A pod of its namespace no budget covers (the targetRef budget's entry sees it).
    let other: Pod = create(
        &client,
        json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "other", "labels": {"app": "other"}},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}}),
    )
    .await;
    assert_eq!(related_pub(&other), (None, None));
    cluster.shutdown().await;
}
