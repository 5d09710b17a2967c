//! A running `kruise-cloneset` puts back what it publishes when someone else changes it
//! (issue 26, item 4): a caBundle removed from its ValidatingWebhookConfiguration, its CRD's
//! conversion caBundle replaced, its certificate Secret deleted. Only its own parts are
//! restored: an entry another party added to its configuration stays, and once repaired
//! it writes nothing more. A configuration deleted while it runs (how `helm uninstall`
//! begins) stays deleted until the next start. Against kruise-sim, or the real API server of
//! `KRUISE_TEST_KUBECONFIG` (the process's requests counted by the testkit's proxy).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kruise_testkit as support;

use std::process::Command;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingWebhook, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_cloneset::api::v1beta1::CloneSet;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_kruise-cloneset");
const VALIDATING: &str = "kruise-cloneset-validating";
const CRD: &str = "clonesets.apps.kruise.io";
/// "Within seconds": the watch sees the change at once; this leaves room for a slow CI.
const REPAIR_DEADLINE: Duration = Duration::from_secs(10);

fn clone_set(name: &str, replicas: i32) -> CloneSet {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "CloneSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "nginx:1"}]}
            }
        }
    }))
    .unwrap()
}

fn validating_ca(config: &ValidatingWebhookConfiguration) -> Option<Vec<u8>> {
    let hook = config
        .webhooks
        .as_ref()?
        .iter()
        .find(|w| w.name == "vcloneset.kb.io")?;
    hook.client_config
        .ca_bundle
        .clone()
        .map(|b| b.0)
        .filter(|b| !b.is_empty())
}

fn conversion_ca(crd: &CustomResourceDefinition) -> Option<Vec<u8>> {
    crd.spec
        .conversion
        .as_ref()?
        .webhook
        .as_ref()?
        .client_config
        .as_ref()?
        .ca_bundle
        .clone()
        .map(|b| b.0)
}

/// Another party's entry in our configuration: never called (it matches no resource).
fn foreign_entry() -> ValidatingWebhook {
    serde_json::from_value(json!({
        "name": "audit.example.com",
        "clientConfig": {"url": "https://audit.example.com/check"},
        "rules": [{"operations": ["CREATE"], "apiGroups": ["example.com"],
                   "apiVersions": ["v1"], "resources": ["audits"]}],
        "failurePolicy": "Ignore",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"]
    }))
    .unwrap()
}

#[tokio::test]
async fn tampered_webhook_configuration_and_conversion_are_restored() {
    let out = Command::new(BIN).arg("crd").output().unwrap();
    assert!(out.status.success());
    let crd: CustomResourceDefinition = serde_saphyr::from_str(
        String::from_utf8(out.stdout)
            .unwrap()
            .trim_start_matches("---\n"),
    )
    .unwrap();
    let (cluster, client) = support::cluster_with_crds(0, &[crd]).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let kubeconfig = cluster.kubeconfig_path();
    let port = support::free_port();
    let spawn = || {
        support::spawn_replica(
            BIN,
            &kubeconfig,
            port,
            &["--namespace", client.default_namespace()],
            &[],
        )
    };
    let binary = spawn();
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let clonesets: Api<CloneSet> = Api::default_namespaced(client.clone());
    let published = support::eventually("published caBundles", Duration::from_secs(30), || async {
        let config = validating.get_opt(VALIDATING).await.ok()??;
        let crd = crds.get(CRD).await.ok()?;
        let ca = validating_ca(&config)?;
        (conversion_ca(&crd)? == ca).then_some(ca)
    })
    .await;

    // (a) caBundle removed (and another party's entry added in the same write): every
    // CloneSet create would fail the TLS check. It is put back; the other entry stays.
    let mut config = validating.get(VALIDATING).await.unwrap();
    for hook in config.webhooks.iter_mut().flatten() {
        hook.client_config.ca_bundle = None;
    }
    config
        .webhooks
        .get_or_insert_default()
        .push(foreign_entry());
    validating
        .replace(VALIDATING, &PostParams::default(), &config)
        .await
        .unwrap();
    let repaired = support::eventually("caBundle restored", REPAIR_DEADLINE, || async {
        let config = validating.get(VALIDATING).await.ok()?;
        (validating_ca(&config)? == published).then_some(config)
    })
    .await;
    let names: Vec<&str> = repaired
        .webhooks
        .iter()
        .flatten()
        .map(|w| w.name.as_str())
        .collect();
    assert_eq!(names, ["vcloneset.kb.io", "audit.example.com"]);
    clonesets
        .create(&PostParams::default(), &clone_set("after-ca-removed", 1))
        .await
        .unwrap();

    // (c) The CRD's conversion caBundle replaced with another CA: put back.
    let other_ca = kruise_admission::certs::generate_ca(
        "someone-else",
        jiff::Timestamp::now(),
        Duration::from_secs(3600),
    )
    .unwrap();
    let mut tampered = crds.get(CRD).await.unwrap();
    if let Some(config) = tampered
        .spec
        .conversion
        .as_mut()
        .and_then(|c| c.webhook.as_mut())
        .and_then(|w| w.client_config.as_mut())
    {
        config.ca_bundle = Some(ByteString(other_ca.cert_pem.into_bytes()));
    }
    crds.replace(CRD, &PostParams::default(), &tampered)
        .await
        .unwrap();
    support::eventually("conversion caBundle restored", REPAIR_DEADLINE, || async {
        let crd = crds.get(CRD).await.ok()?;
        (conversion_ca(&crd)? == published).then_some(())
    })
    .await;

    // (d) The certificate Secret deleted (the replica keeps it in `default`:
    // `support::replica_args`): new certificates are issued into it, served, and
    // their caBundle published; CloneSets are admitted again.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    secrets
        .delete("kruise-cloneset-certs", &DeleteParams::default())
        .await
        .unwrap();
    let reissued: Vec<u8> =
        support::eventually("certificates re-issued", REPAIR_DEADLINE, || async {
            let secret = secrets.get_opt("kruise-cloneset-certs").await.ok()??;
            let ca = secret.data?.get("ca.crt")?.0.clone();
            (ca != published).then_some(ca)
        })
        .await;
    support::eventually("new caBundle published", REPAIR_DEADLINE, || async {
        let config = validating.get(VALIDATING).await.ok()?;
        let crd = crds.get(CRD).await.ok()?;
        (validating_ca(&config)? == reissued && conversion_ca(&crd)? == reissued).then_some(())
    })
    .await;
    support::eventually("a CloneSet admitted", REPAIR_DEADLINE, || async {
        clonesets
            .create(
                &PostParams::default(),
                &clone_set("after-secret-deleted", 1),
            )
            .await
            .ok()
    })
    .await;

    // Repaired, it writes nothing more: a change to a part it does not own (a label) is
    // checked (it reads the configuration again) and left alone.
    let updates = cluster
        .counters()
        .count("update", "validatingwebhookconfigurations");
    let creates = cluster
        .counters()
        .count("create", "validatingwebhookconfigurations");
    let crd_reads = cluster.counters().count("get", "customresourcedefinitions");
    let mut config = validating.get(VALIDATING).await.unwrap();
    config
        .metadata
        .labels
        .get_or_insert_default()
        .insert("team".into(), "platform".into());
    validating
        .replace(VALIDATING, &PostParams::default(), &config)
        .await
        .unwrap();
    // The CRD is read after the configurations: once it is, any write would have happened.
    support::eventually("the change checked", REPAIR_DEADLINE, || async {
        (cluster.counters().count("get", "customresourcedefinitions") > crd_reads).then_some(())
    })
    .await;
    assert_eq!(
        cluster
            .counters()
            .count("update", "validatingwebhookconfigurations"),
        updates + 1,
        "only the test's own label change"
    );
    assert_eq!(
        cluster
            .counters()
            .count("create", "validatingwebhookconfigurations"),
        creates
    );
    let labels = validating
        .get(VALIDATING)
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap_or_default();
    assert_eq!(labels.get("team").map(String::as_str), Some("platform"));

    // (b) The configuration deleted while the binary runs, as `helm uninstall` deletes it
    // before the Deployment: left deleted (re-created, it would outlive its Service and
    // fail every CloneSet admission). The binary has looked once it read the CRD again.
    let crd_reads = cluster.counters().count("get", "customresourcedefinitions");
    validating
        .delete(VALIDATING, &DeleteParams::default())
        .await
        .unwrap();
    support::eventually("the deletion checked", REPAIR_DEADLINE, || async {
        (cluster.counters().count("get", "customresourcedefinitions") > crd_reads).then_some(())
    })
    .await;
    assert!(validating.get_opt(VALIDATING).await.unwrap().is_none());
    assert_eq!(
        cluster
            .counters()
            .count("create", "validatingwebhookconfigurations"),
        creates
    );
    // The next start creates it again, and the webhook refuses what it refuses.
    drop(binary);
    let binary = spawn();
    support::eventually(
        "configuration created at start",
        REPAIR_DEADLINE,
        || async {
            let config = validating.get_opt(VALIDATING).await.ok()??;
            (validating_ca(&config)? == reissued).then_some(())
        },
    )
    .await;
    // A selector that misses the template: only the webhook refuses it (a negative
    // `spec.replicas` kube-apiserver itself refuses, at the CRD's scale path).
    let mut mismatched = serde_json::to_value(clone_set("mismatched", 1)).unwrap();
    mismatched["spec"]["selector"]["matchLabels"]["app"] = json!("other");
    let err = clonesets
        .create(
            &PostParams::default(),
            &serde_json::from_value(mismatched).unwrap(),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("vcloneset.kb.io") && err.contains("spec.template.metadata.labels"),
        "{err}"
    );
    // Stopped first, so it republishes nothing the clean-up removes.
    drop(binary);
    cluster.shutdown().await;
}
