//! The admission runner against kruise-sim: certificates from a cert-manager style
//! directory are served and re-read when they change, and the caBundle follows into the
//! webhook configuration and the owned CRD's conversion settings.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_admission::AdmissionRoutes;
use kruise_admission::publish::Owned;
use kruise_admission::runner::{self, AdmissionFlags};
use kruise_runtime::Readiness;
use kruise_sim::{Sim, SimConfig};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.kruise.io"},
        "spec": {"group": "example.kruise.io", "scope": "Namespaced",
          "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
          "versions": [
            {"name": "v1alpha1", "served": true, "storage": false,
             "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
            {"name": "v1beta1", "served": true, "storage": true,
             "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap()
}

#[tokio::test]
async fn file_certificates_are_reloaded_and_the_ca_bundle_follows() {
    let sim = Sim::start(SimConfig::default()).await.unwrap();
    let client = sim.client().unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd()).await.unwrap();
    let dir = std::env::temp_dir().join(format!("kruise-certs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let first = support::write_certs(&dir, "first-ca");
    let port = support::free_port();
    let flags = AdmissionFlags {
        webhook_port: port,
        webhook_bind_address: "127.0.0.1".parse().unwrap(),
        webhook_cert_dir: Some(dir.clone()),
        webhook_secret: None,
        webhook_service: None,
        webhook_namespace: "default".into(),
        webhook_host: Some("127.0.0.1".into()),
        certs_renew_before: Duration::from_secs(3600),
        webhook_cert_check_interval: Duration::from_millis(200),
    };
    let owned = Owned {
        mutating: Some("test-mutating".into()),
        validating: None,
        crds: vec!["widgets.example.kruise.io".into()],
    };
    let readiness = Readiness::default();
    let stop = CancellationToken::new();
    let task = tokio::spawn(runner::run(
        client.clone(),
        "kruise-test",
        flags,
        AdmissionRoutes::new().handler(support::AllowAll("mpod.test.kruise.io")),
        owned,
        readiness.clone(),
        stop.clone(),
    ));
    let configs: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let published = |want: String| {
        let configs = configs.clone();
        let crds = crds.clone();
        async move {
            let c = configs.get_opt("test-mutating").await.ok()??;
            let hook = c.webhooks?.into_iter().next()?;
            let bundle = String::from_utf8(hook.client_config.ca_bundle?.0).ok()?;
            let crd = crds.get("widgets.example.kruise.io").await.ok()?;
            let conv = crd.spec.conversion?;
            let cc = conv.webhook?.client_config?;
            let crd_bundle = String::from_utf8(cc.ca_bundle?.0).ok()?;
            let ok = bundle == want
                && crd_bundle == want
                && conv.strategy == "Webhook"
                && cc.url.as_deref() == Some(&*format!("https://127.0.0.1:{port}/convert"));
            ok.then_some(())
        }
    };
    support::eventually("first caBundle published", Duration::from_secs(20), || {
        published(first.cert_pem.clone())
    })
    .await;
    assert!(readiness.failing().is_empty(), "{:?}", readiness.failing());
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    let review = support::review("", "v1", "Pod", "pods", json!({"metadata": {"name": "p"}}));
    let (code, _) = support::post_tls(addr, "127.0.0.1", &first.cert_pem, "/mutate-pod", &review)
        .await
        .unwrap();
    assert_eq!(code, 200);

    // cert-manager rotates the certificate and CA: served and published without a restart.
    let second = support::write_certs(&dir, "second-ca");
    support::wait_serving("new certificate served", addr, &second.cert_pem, &review).await;
    support::eventually("second caBundle published", Duration::from_secs(20), || {
        published(second.cert_pem.clone())
    })
    .await;
    assert!(
        support::post_tls(addr, "127.0.0.1", &first.cert_pem, "/mutate-pod", &review)
            .await
            .is_err()
    );

    stop.cancel();
    task.await.unwrap().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    sim.shutdown().await;
}
