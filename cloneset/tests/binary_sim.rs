//! The `kruise-cloneset` binary: `crd` and `manifests` output, and `run` against kruise-sim
//! or the real API server of `KRUISE_TEST_KUBECONFIG` — it publishes its webhooks (by URL on
//! 127.0.0.1) with the caBundle of its own certificate, the API server calls them (defaults
//! written, an invalid CloneSet rejected with the field path), and its controller creates
//! the pods.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kruise_testkit as support;

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_cloneset::api::v1beta1::CloneSet;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_kruise-cloneset");

fn stdout_of(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn crd_prints_both_versions_with_v1beta1_stored() {
    let yaml = stdout_of(&["crd"]);
    let crd: CustomResourceDefinition =
        serde_saphyr::from_str(yaml.trim_start_matches("---\n")).unwrap();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("clonesets.apps.kruise.io")
    );
    let versions: Vec<(String, bool, bool)> = crd
        .spec
        .versions
        .iter()
        .map(|v| (v.name.clone(), v.served, v.storage))
        .collect();
    assert_eq!(
        versions,
        vec![
            ("v1alpha1".to_string(), true, false),
            ("v1beta1".to_string(), true, true)
        ]
    );
}

#[test]
fn manifests_print_the_webhook_configurations() {
    let yaml = stdout_of(&["manifests", "--webhook-host", "127.0.0.1"]);
    assert!(yaml.contains("name: kruise-cloneset-mutating"), "{yaml}");
    assert!(yaml.contains("name: kruise-cloneset-validating"), "{yaml}");
    assert!(yaml.contains("mcloneset.kb.io"), "{yaml}");
    assert!(yaml.contains("vcloneset.kb.io"), "{yaml}");
    assert!(yaml.contains("/mutate-apps-kruise-io-cloneset"), "{yaml}");
    assert!(yaml.contains("/validate-apps-kruise-io-cloneset"), "{yaml}");
}

#[tokio::test]
async fn run_serves_its_webhooks_and_controls_clonesets() {
    let crd: CustomResourceDefinition = {
        let yaml = stdout_of(&["crd"]);
        serde_saphyr::from_str(yaml.trim_start_matches("---\n")).unwrap()
    };
    let (cluster, client) = support::cluster_with_crds(0, &[crd]).await;
    let kubeconfig = cluster.kubeconfig_path();
    let port = support::free_port();
    let binary = support::spawn_replica(
        BIN,
        &kubeconfig,
        port,
        &["--namespace", client.default_namespace()],
        &[],
    );
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    support::eventually("published caBundles", Duration::from_secs(30), || async {
        let m = mutating.get_opt("kruise-cloneset-mutating").await.ok()??;
        let v = validating
            .get_opt("kruise-cloneset-validating")
            .await
            .ok()??;
        let has_ca = |b: Option<&k8s_openapi::ByteString>| b.is_some_and(|b| !b.0.is_empty());
        (has_ca(m.webhooks?.first()?.client_config.ca_bundle.as_ref())
            && has_ca(v.webhooks?.first()?.client_config.ca_bundle.as_ref()))
        .then_some(())
    })
    .await;

    let clonesets: Api<CloneSet> = Api::default_namespaced(client.clone());
    let manifest = |name: &str, selector: &str| -> CloneSet {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1",
            "kind": "CloneSet",
            "metadata": {"name": name},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": selector}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "main", "image": "nginx:1"}]}
                }
            }
        }))
        .unwrap()
    };
    // The validating webhook rejects a selector that misses the template.
    let err = clonesets
        .create(&PostParams::default(), &manifest("bad", "other"))
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("spec.template.metadata.labels") && message.contains("vcloneset.kb.io"),
        "{message}"
    );
    // The mutating webhook fills the defaults.
    let created = clonesets
        .create(&PostParams::default(), &manifest("web", "web"))
        .await
        .unwrap();
    assert_eq!(created.spec.revision_history_limit, Some(10));
    let rolling = created.spec.update_strategy.rolling_update.clone().unwrap();
    assert_eq!(
        serde_json::to_value(&rolling).unwrap()["maxUnavailable"],
        json!("20%")
    );
    // The controller (this replica leads: --leader-elect=false) creates the pods.
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    support::eventually("two pods", Duration::from_secs(30), || async {
        let list = pods.list(&ListParams::default()).await.ok()?;
        (list.items.len() == 2).then_some(())
    })
    .await;
    support::eventually("status.replicas 2", Duration::from_secs(30), || async {
        let cs = clonesets.get("web").await.ok()?;
        (cs.status?.replicas == 2).then_some(())
    })
    .await;
    // The binary's own requests: counted by kruise-sim's server, or on a real API server
    // by the testkit's proxy the binary's kubeconfig names.
    assert_eq!(cluster.counters().count("create", "pods"), 2);
    // Stopped first, so it republishes nothing the clean-up removes.
    drop(binary);
    cluster.shutdown().await;
}
