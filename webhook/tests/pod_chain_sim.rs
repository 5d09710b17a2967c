//! kruise-webhook against kruise-sim (or the real API server of `KRUISE_TEST_KUBECONFIG`,
//! which reaches it by URL on 127.0.0.1): it publishes its configuration with the caBundle of
//! the certificate it generated, and answers a real pod AdmissionReview over TLS with the
//! chain's JSONPatch, which keeps fields newer than the compiled API where they were.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kruise_testkit as support;

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_kruise-webhook");

#[tokio::test]
async fn cloneset_pods_get_the_kruise_pod_ready_gate() {
    let (cluster, client) = support::cluster_with_crds(0, &[]).await;
    let kubeconfig = cluster.kubeconfig_path();
    let port = support::free_port();
    let mut webhook = support::spawn_replica(BIN, &kubeconfig, port, &[], &[]);
    let configs: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
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
            "metadata": {"name": "web-abcde", "namespace": client.default_namespace(), "ownerReferences": [
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
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
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
    cluster.shutdown().await;
}

/// A pod carrying a container field newer than the compiled Kubernetes API (1.33), created
/// through the simulator (which, like a newer API server, keeps it) with a SidecarSet that
/// injects before the app container: the field stays on the app container.
#[tokio::test]
async fn fields_newer_than_the_compiled_api_stay_on_the_app_container() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{ApiResource, DynamicObject};

    let crd: CustomResourceDefinition = kruise_sidecarset::api::crd::crd().unwrap();
    let (cluster, client) = support::cluster_with_crds(0, &[crd]).await;
    let sidecar_set_resource = support::sidecarset_resource();
    let before_app = json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "before-app"},
        "spec": {"selector": {"matchLabels": {"app": "future"}},
                 "containers": [{"name": "sidecar1", "image": "envoy:1.30",
                                 "podInjectPolicy": "BeforeAppContainer"}]}
    });
    Api::<DynamicObject>::all_with(client.clone(), &sidecar_set_resource)
        .create(
            &PostParams::default(),
            &serde_json::from_value(before_app).unwrap(),
        )
        .await
        .unwrap();
    let mut webhook = support::spawn_replica(
        BIN,
        &cluster.kubeconfig_path(),
        support::free_port(),
        &[],
        &[],
    );
    let configs: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    support::eventually(
        "the SidecarSet's webhook entry",
        Duration::from_secs(60),
        || async {
            let hooks = configs
                .get_opt("kruise-mutating-webhook-configuration")
                .await
                .ok()??
                .webhooks?;
            hooks
                .iter()
                .any(|w| w.client_config.ca_bundle.is_some() && w.object_selector.is_some())
                .then_some(())
        },
    )
    .await;

    let rules = json!([{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]);
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "future-1", "labels": {"app": "future"}},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.25",
                                 // kube-apiserver requires a container restartPolicy with rules.
                                 "restartPolicy": "Never", "restartPolicyRules": rules}]}});
    let pods: Api<DynamicObject> =
        Api::default_namespaced_with(client, &ApiResource::erase::<Pod>(&()));
    // kube-apiserver applies a webhook configuration a moment after it is written.
    let future_1: DynamicObject = serde_json::from_value(pod).unwrap();
    support::dry_run_until(
        &pods,
        &future_1,
        "kube-apiserver calling the SidecarSet's entry",
        |answer| (answer.ok()?.data["spec"]["containers"][0]["name"] == "sidecar1").then_some(()),
    )
    .await;
    let created = pods
        .create(&PostParams::default(), &future_1)
        .await
        .unwrap();
    let containers = created.data["spec"]["containers"].as_array().unwrap();
    let names: Vec<&str> = containers
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["sidecar1", "main"]);
    assert!(
        containers[0].get("restartPolicyRules").is_none(),
        "{containers:?}"
    );
    assert_eq!(containers[1]["restartPolicyRules"], rules);

    let _ = webhook.child.kill();
    let _ = webhook.child.wait();
    cluster.shutdown().await;
}
