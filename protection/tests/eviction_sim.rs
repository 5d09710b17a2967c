//! The PUB step of the validating pod chain end to end: kruise-sim or kube-apiserver (with
//! `KRUISE_TEST_KUBECONFIG`) calls `/validate-pod` over HTTPS for pod deletions and evictions, and answers a refused eviction with the
//! webhook's 429 (as kube-apiserver answers one a PodDisruptionBudget forbids).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kruise_admission::AdmissionRoutes;
use kruise_admission::pod_chain::ValidatingPodChain;
use kruise_core::featuregate::FeatureGates;
use kruise_protection::pod_admission::pub_validator_step;
use kruise_runtime::Metrics;
use kruise_runtime::family::{LiveCluster, StepContext};
use kube::api::{Api, EvictParams};
use serde_json::json;
use support::*;
use tokio_util::sync::CancellationToken;

const EXHAUSTED: &str = r#"podunavailablebudget.policy.kruise.io "web" is forbidden: pub unavailable allowed is negative"#;

fn api_error(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(status) => (status.code, status.message),
        other => panic!("not an API error: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evictions_and_deletions_are_refused_once_the_budget_is_used() {
    let (cluster, client) = cluster(2).await;
    let namespace = client.default_namespace().to_string();
    let _controller = start(&client);
    deployment(&client, "web", 4, 4).await;
    budget(
        &client,
        "web",
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}),
    )
    .await;
    wait_for_numbers(&client, "web", (1, 4, 3, 4)).await;

    // kruise-webhook's `--protection-log-path`.
    let log_dir = std::env::temp_dir().join(format!("kruise-eviction-sim-{}", std::process::id()));
    kruise_admission::protection_log::init(&log_dir).unwrap();

    // The step as kruise-webhook builds it, served over TLS, its entries published.
    kruise_runtime::install_crypto_provider();
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    // kruise-webhook's registry, the one its `/metrics` serves.
    let metrics = Metrics::new();
    let step = pub_validator_step(&StepContext {
        gates: FeatureGates::default(),
        live: Some(LiveCluster {
            client: client.clone(),
            refresh: Arc::new(tokio::sync::Notify::new()),
            shutdown: shutdown.clone(),
        }),
        metrics: metrics.clone(),
    });
    let chain = ValidatingPodChain::new(vec![step]);
    // One entry each for the budget's scope. (On a shared API server the budgets of
    // earlier tests' namespaces, still being deleted, add theirs until they are gone.)
    eventually("the budget's scope alone", WAIT, || {
        let specs = chain.webhook_specs();
        async move {
            let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            (names == ["vpod.kb.io", "vpodeviction.kb.io"]).then_some(())
        }
    })
    .await;

    serve_validating(&client, AdmissionRoutes::new().handler(chain), &shutdown).await;

    // kube's client retries a 429 (15 times, with backoff): this one shows it.
    let pods = Api::<Pod>::default_namespaced(cluster.client_without_retries().await);
    // The first eviction spends the budget.
    pods.evict("web-7d4b9-0", &EvictParams::default())
        .await
        .unwrap();
    // The second is refused with 429, the reason OpenKruise gives.
    let (code, message) = api_error(
        pods.evict("web-7d4b9-1", &EvictParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 429, "{message}");
    assert_eq!(
        message,
        format!("admission webhook \"vpodeviction.kb.io\" denied the request: {EXHAUSTED}")
    );
    // A deletion too, with 403.
    let (code, message) = api_error(
        pods.delete("web-7d4b9-2", &Default::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 403, "{message}");
    assert_eq!(
        message,
        format!("admission webhook \"vpod.kb.io\" denied the request: {EXHAUSTED}")
    );
    // Each refusal is one line of the protection log, naming the pod's controller and who
    // asked; the granted eviction none.
    let logged = std::fs::read_to_string(log_dir.join("protection.log")).unwrap();
    let lines: Vec<&str> = logged.lines().collect();
    assert_eq!(lines.len(), 2, "{logged}");
    for line in lines {
        let start = format!(
            r#"{{"Event":"PodUnavailableBudget","Kind":"ReplicaSet","Namespace":"{namespace}","Name":"web-7d4b9","UserAgent":""#
        );
        assert!(line.starts_with(&start), "{line}");
    }
    let _ = std::fs::remove_dir_all(&log_dir);
    // And counted as OpenKruise counts them, per controller and user.
    let exposed = metrics.encode().unwrap();
    let refusals: Vec<&str> = exposed
        .lines()
        .filter(|l| l.starts_with("pod_unavailable_budget_total{"))
        .collect();
    assert_eq!(refusals.len(), 1, "{exposed}");
    assert!(
        refusals[0].contains(&format!(
            r#"kind_namespace_name="ReplicaSet_{namespace}_web-7d4b9""#
        )) && refusals[0].ends_with(" 2"),
        "{exposed}"
    );
    // A pod no budget covers is never sent to the webhook.
    let _: Pod = create(
        &client,
        json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "other", "labels": {"app": "other"}},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}}),
    )
    .await;
    pods.delete("other", &Default::default()).await.unwrap();
    cluster.shutdown().await;
}
