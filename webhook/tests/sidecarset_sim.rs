//! kruise-webhook with SidecarSet injection, registered in kruise-sim (or the real API server
//! of `KRUISE_TEST_KUBECONFIG`) as a real webhook over HTTPS: a pod labelled app=nginx gets sidecar1 injected; the webhook configuration follows
//! the SidecarSets; with kruise-webhook stopped, pods no SidecarSet matches are still
//! created, and pods one does match are refused rather than started without the sidecar.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kruise_testkit as support;

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_kruise-webhook");

#[tokio::test]
async fn sidecar_injection_through_the_api_server() {
    let crd: CustomResourceDefinition = kruise_sidecarset::api::crd::crd().unwrap();
    let (cluster, client) = support::cluster_with_crds(0, &[crd]).await;
    let sidecarsets: Api<DynamicObject> =
        Api::all_with(client.clone(), &support::sidecarset_resource());
    let set: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "test-sidecarset"},
        "spec": {"selector": {"matchLabels": {"app": "nginx"}},
                 "containers": [{"name": "sidecar1", "image": "centos:6.7", "command": ["sleep", "999d"],
                                 // Set by the SidecarSet defaulting webhook (kruise-sidecarset), not run here.
                                 "podInjectPolicy": "BeforeAppContainer"}]}
    }))
    .unwrap();
    sidecarsets
        .create(&PostParams::default(), &set)
        .await
        .unwrap();
    // kruise-webhook starts after the SidecarSet exists: it must pick it up from its
    // initial list.
    let kubeconfig = cluster.kubeconfig_path();
    let port = support::free_port();
    let mut webhook = support::spawn_replica(
        BIN,
        &kubeconfig,
        port,
        &["--webhook-cert-check-interval", "1s"],
        &[],
    );

    // The configuration gains an entry scoped to the SidecarSet's selector.
    let configs: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    support::eventually(
        "a webhook entry for app=nginx",
        Duration::from_secs(60),
        || async {
            let c = configs
                .get_opt("kruise-mutating-webhook-configuration")
                .await
                .ok()??;
            c.webhooks?
                .iter()
                .any(|w| {
                    w.client_config.ca_bundle.is_some()
                        && w.failure_policy.as_deref() == Some("Fail")
                        && w.object_selector
                            .as_ref()
                            .and_then(|s| s.match_labels.as_ref())
                            .and_then(|l| l.get("app"))
                            .map(String::as_str)
                            == Some("nginx")
                })
                .then_some(())
        },
    )
    .await;

    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let nginx_1 = kruise_testkit::app_pod("nginx-1", "nginx");
    support::dry_run_until(
        &pods,
        &nginx_1,
        "kube-apiserver calling the app=nginx entry",
        |answer| (answer.ok()?.spec?.containers.len() == 2).then_some(()),
    )
    .await;
    let created = pods.create(&PostParams::default(), &nginx_1).await.unwrap();
    let spec = created.spec.unwrap();
    let names: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, vec!["sidecar1", "main"]);
    let annotations = created.metadata.annotations.unwrap();
    assert!(
        annotations.contains_key("kruise.io/sidecarset-hash"),
        "{annotations:?}"
    );
    let other = pods
        .create(
            &PostParams::default(),
            &kruise_testkit::app_pod("other-1", "other"),
        )
        .await
        .unwrap();
    assert_eq!(other.spec.unwrap().containers.len(), 1);

    // kruise-webhook stops.
    webhook.stop(port).await;
    // A pod no SidecarSet matches is created normally.
    let plain = pods
        .create(
            &PostParams::default(),
            &kruise_testkit::app_pod("other-2", "other"),
        )
        .await
        .unwrap();
    assert_eq!(plain.spec.unwrap().containers.len(), 1);
    // A pod the SidecarSet matches is refused, not started without its sidecar.
    let err = pods
        .create(
            &PostParams::default(),
            &kruise_testkit::app_pod("nginx-2", "nginx"),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 500),
        "{err:?}"
    );
    cluster.shutdown().await;
}
