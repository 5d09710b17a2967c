//! kruise-webhook against kruise-sim: it publishes its configuration with the caBundle of
//! the certificate it generated, and answers a real pod AdmissionReview over TLS with the
//! chain's JSONPatch.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kruise_testkit as support;

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Pod;
use kruise_sim::{Sim, SimConfig};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_kruise-webhook");

#[tokio::test]
async fn cloneset_pods_get_the_kruise_pod_ready_gate() {
    let sim = Sim::start(SimConfig::default()).await.unwrap();
    let kubeconfig = sim.kubeconfig_path().unwrap();
    let port = support::free_port();
    let mut webhook = support::spawn_replica(BIN, &kubeconfig, port, &[], &[]);
    let configs: Api<MutatingWebhookConfiguration> = Api::all(sim.client().unwrap());
    let ca_bundle = support::eventually("published caBundle", Duration::from_secs(30), || async {
        let c = configs
            .get_opt("kruise-mutating-webhook-configuration")
            .await
            .ok()??;
        let hook = c.webhooks?.into_iter().next()?;
        String::from_utf8(hook.client_config.ca_bundle?.0).ok()
    })
    .await;
    let pod = |owner_api: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-abcde", "namespace": "default", "ownerReferences": [
                {"apiVersion": owner_api, "kind": "CloneSet", "name": "web", "uid": "u1", "controller": true}]},
            "spec": {"containers": [{"name": "main", "image": "nginx"}]}})
    };
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    let body = support::review("", "v1", "Pod", "pods", pod("apps.kruise.io/v1alpha1"));
    let (code, text) = support::post_tls(addr, "127.0.0.1", &ca_bundle, "/mutate-pod", &body)
        .await
        .unwrap();
    assert_eq!(code, 200, "{text}");
    let review: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(review["response"]["allowed"], true);
    use base64::Engine as _;
    let patch = base64::engine::general_purpose::STANDARD
        .decode(review["response"]["patch"].as_str().unwrap())
        .unwrap();
    let patch: serde_json::Value = serde_json::from_slice(&patch).unwrap();
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/spec/readinessGates", "value": [{"conditionType": "KruisePodReady"}]}])
    );
    // A Deployment's pod passes untouched.
    let body = support::review("", "v1", "Pod", "pods", pod("apps/v1"));
    let (_, text) = support::post_tls(addr, "127.0.0.1", &ca_bundle, "/mutate-pod", &body)
        .await
        .unwrap();
    let review: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(review["response"]["allowed"], true);
    assert!(review["response"]["patch"].is_null(), "{text}");

    // Through the API server: the simulator calls the webhook on pod creation.
    let pods: Api<Pod> = Api::namespaced(sim.client().unwrap(), "default");
    let mut owned_pod = pod("apps.kruise.io/v1beta1");
    owned_pod["metadata"]["name"] = json!("web-through-api");
    let created = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(owned_pod).unwrap(),
        )
        .await
        .unwrap();
    let gates = created.spec.unwrap().readiness_gates.unwrap();
    assert_eq!(gates[0].condition_type, "KruisePodReady");

    // With kruise-webhook stopped, pods are still created: the chain's only entry here
    // is best-effort (failurePolicy Ignore).
    webhook.stop(port).await;
    let mut later = pod("apps.kruise.io/v1beta1");
    later["metadata"]["name"] = json!("web-while-down");
    let created = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(later).unwrap(),
        )
        .await
        .unwrap();
    assert!(created.spec.unwrap().readiness_gates.is_none());
    sim.shutdown().await;
}
