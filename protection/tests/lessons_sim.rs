//! Lessons from OpenKruise's bug tracker and §8's e2e cases not covered elsewhere, against
//! kruise-sim: digest-pinned Ready pods count as available (K#2570, K#2563); a selector
//! budget created before its pods converges once they exist, counting a Deployment's
//! canary ReplicaSet as the Deployment's (K#1857, K#2571); specified-delete labels never
//! raise the allowed count (K#2175); through the validating pod chain, an eviction without
//! deleteOptions is decided like any other (K#706), and a pod the `ignoredPodSelector`
//! selects is evicted from an exhausted budget once labelled (e2e, v1beta1).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kruise_admission::AdmissionRoutes;
use kruise_admission::pod_chain::ValidatingPodChain;
use kruise_core::featuregate::FeatureGates;
use kruise_protection::pod_admission::pub_validator_step;
use kruise_runtime::Metrics;
use kruise_runtime::family::{LiveCluster, StepContext};
use kube::api::{Api, EvictParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};
use support::*;
use tokio_util::sync::CancellationToken;

const EXHAUSTED: &str = r#"podunavailablebudget.policy.kruise.io "web" is forbidden: pub unavailable allowed is negative"#;

/// A pod of ReplicaSet `rs` labelled `labels`, running `image`.
async fn replica_set_pod(client: &Client, rs: &ReplicaSet, name: &str, labels: Value, image: &str) {
    let _: Pod = create(
        client,
        json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": rs.name_any(), "uid": rs.uid().unwrap(), "controller": true}]},
        "spec": {"containers": [{"name": "main", "image": image}]}}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digest_pinned_ready_pods_count_as_available() {
    let (cluster, client) = cluster(2).await;
    let _controller = start(&client);
    let image = format!("nginx@sha256:{}", "a".repeat(64));
    // Kept from kube's Deployment and ReplicaSet controllers as `support::deployment` keeps
    // its own: paused, a ServiceAccount that does not exist, the ReplicaSet labelled.
    let template = json!({"metadata": {"labels": {"app": "web"}},
        "spec": {"serviceAccountName": NO_SUCH_ACCOUNT,
            "containers": [{"name": "main", "image": image}]}});
    let deploy: Deployment = create(
        &client,
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 4, "paused": true, "selector": {"matchLabels": {"app": "web"}},
            "template": template}}),
    )
    .await;
    let rs: ReplicaSet = create(
        &client,
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-digest", "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                "uid": deploy.uid().unwrap(), "controller": true}]},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
            "template": template}}),
    )
    .await;
    for i in 0..4 {
        replica_set_pod(
            &client,
            &rs,
            &format!("web-{i}"),
            json!({"app": "web"}),
            &image,
        )
        .await;
    }
    budget(
        &client,
        "web",
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}),
    )
    .await;
    // The kubelet reports an imageID whose digest is not the spec's, as containerd reports
    // the config digest; the Ready pods count all the same.
    let pods = Api::<Pod>::default_namespaced(client.clone());
    let image_id = eventually("web-0's container started", WAIT, || async {
        let status = pods.get("web-0").await.ok()?.status?;
        Some(status.container_statuses?.first()?.image_id.clone())
    })
    .await;
    assert!(!image_id.ends_with(&"a".repeat(64)), "{image_id}");
    wait_for_numbers(&client, "web", (1, 4, 3, 4)).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_created_before_its_pods_counts_a_canary_replica_set_as_its_deployment() {
    let (cluster, client) = cluster(2).await;
    let _controller = start(&client);
    budget(
        &client,
        "web",
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": "25%"}),
    )
    .await;
    wait_for_numbers(&client, "web", (0, 0, 0, 0)).await;
    // A Deployment of 4 mid-rollout, as Kruise Rollout leaves it: a stable ReplicaSet of 3
    // and a canary of 1, both the Deployment's.
    deployment(&client, "web", 4, 3).await;
    // The stable ReplicaSet at 3 (with the canary's 1, the Deployment's 4: kube's
    // Deployment controller scales a paused Deployment's ReplicaSets to add up).
    Api::<ReplicaSet>::default_namespaced(client.clone())
        .patch(
            "web-7d4b9",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    let deploy = Api::<Deployment>::default_namespaced(client.clone())
        .get("web")
        .await
        .unwrap();
    let canary: ReplicaSet = create(
        &client,
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-canary", "labels": {"app": "web", "track": "canary"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                "uid": deploy.uid().unwrap(), "controller": true}]},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web", "track": "canary"}},
            "template": {"metadata": {"labels": {"app": "web", "track": "canary"}},
                "spec": {"serviceAccountName": NO_SUCH_ACCOUNT,
                    "containers": [{"name": "main", "image": "nginx:1.26"}]}}}}),
    )
    .await;
    replica_set_pod(
        &client,
        &canary,
        "web-canary-0",
        json!({"app": "web", "track": "canary"}),
        "nginx:1.26",
    )
    .await;
    // Expected: the Deployment's 4 once (not 4 + 1 for the canary's own replicas).
    wait_for_numbers(&client, "web", (1, 4, 3, 4)).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn specified_delete_labels_never_raise_the_allowed_count() {
    let (cluster, client) = cluster(2).await;
    let _controller = start(&client);
    deployment(&client, "web", 4, 4).await;
    budget(
        &client,
        "web",
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}),
    )
    .await;
    wait_for_numbers(&client, "web", (1, 4, 3, 4)).await;
    let pods = Api::<Pod>::default_namespaced(client.clone());
    for name in ["web-7d4b9-0", "web-7d4b9-1"] {
        pods.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {"apps.kruise.io/specified-delete": "true"}}}),
            ),
        )
        .await
        .unwrap();
    }
    // The labelled pods still count as available: a third pod made unavailable after the
    // labels takes the budget to 0 allowed, 3 available (not 1 allowed, or 1 available).
    pods.patch(
        "web-7d4b9-2",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"unavailable-pod.kruise.io/drain": "true"}}})),
    )
    .await
    .unwrap();
    wait_for_numbers(&client, "web", (0, 3, 3, 4)).await;
    cluster.shutdown().await;
}

/// The PUB step of kruise-webhook's validating pod chain served over TLS and registered in
/// the cluster, until the token is cancelled.
async fn serve_pod_chain(client: &Client, shutdown: &CancellationToken) {
    kruise_runtime::install_crypto_provider();
    let step = pub_validator_step(&StepContext {
        gates: FeatureGates::default(),
        live: Some(LiveCluster {
            client: client.clone(),
            refresh: Arc::new(tokio::sync::Notify::new()),
            shutdown: shutdown.clone(),
        }),
        metrics: Metrics::new(),
    });
    let chain = ValidatingPodChain::new(vec![step]);
    // One entry each for the budget's scope. (On a shared API server the budgets of
    // earlier tests' namespaces, still being deleted, add theirs until they are gone.)
    eventually("the budget's scope alone", WAIT, || {
        let names: Vec<String> = chain.webhook_specs().into_iter().map(|s| s.name).collect();
        async move { (names == ["vpod.kb.io", "vpodeviction.kb.io"]).then_some(()) }
    })
    .await;
    serve_validating(client, AdmissionRoutes::new().handler(chain), shutdown).await;
}

/// POSTs an Eviction of `pod` with no deleteOptions, as old clients send it; the status
/// code and, on refusal, the message.
async fn evict_without_delete_options(client: &Client, pod: &str) -> (u16, String) {
    let body = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": pod, "namespace": client.default_namespace()}});
    let pods = Api::<Pod>::default_namespaced(client.clone());
    match pods
        .create_subresource::<Value, Value>("eviction", pod, &PostParams::default(), &body)
        .await
    {
        Ok(_) => (201, String::new()),
        Err(kube::Error::Api(status)) => (status.code, status.message),
        Err(other) => panic!("not an API error: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evictions_without_delete_options_and_ignored_pods_through_the_webhook() {
    let (cluster, client) = cluster(2).await;
    let _controller = start(&client);
    deployment(&client, "web", 4, 4).await;
    budget(
        &client,
        "web",
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1,
        "ignoredPodSelector": {"matchLabels": {"drain": "ok"}}}),
    )
    .await;
    wait_for_numbers(&client, "web", (1, 4, 3, 4)).await;
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    serve_pod_chain(&client, &shutdown).await;

    // K#706: an Eviction without deleteOptions spends the budget like any other, and the
    // next one is refused with 429.
    let plain = cluster.client_without_retries().await;
    let (code, message) = evict_without_delete_options(&plain, "web-7d4b9-0").await;
    assert_eq!(code, 201, "{message}");
    let (code, message) = evict_without_delete_options(&plain, "web-7d4b9-1").await;
    assert_eq!(code, 429, "{message}");
    assert_eq!(
        message,
        format!("admission webhook \"vpodeviction.kb.io\" denied the request: {EXHAUSTED}")
    );

    // ignoredPodSelector: refused while the pod is protected, evicted once labelled.
    let pods = Api::<Pod>::default_namespaced(plain.clone());
    let refused = pods
        .evict("web-7d4b9-2", &EvictParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 429),
        "{refused}"
    );
    pods.patch(
        "web-7d4b9-2",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"drain": "ok"}}})),
    )
    .await
    .unwrap();
    pods.evict("web-7d4b9-2", &EvictParams::default())
        .await
        .unwrap();
    eventually("the ignored pod evicted", WAIT, || {
        let pods = pods.clone();
        async move {
            match pods.get_opt("web-7d4b9-2").await.unwrap() {
                None => Some(()),
                Some(pod) => pod.metadata.deletion_timestamp.map(|_| ()),
            }
        }
    })
    .await;
    cluster.shutdown().await;
}
