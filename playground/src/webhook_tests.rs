//! The CloneSet family's webhooks as `up` runs them, end to end: kruise-sim calls them over
//! HTTPS on loopback as kube-apiserver would, and the client sees what a kubectl user sees.
//! Large objects can be updated (the review of an update carries two copies of the object);
//! denials reach the client with OpenKruise's codes and a reason kubectl prints.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::serde_json::{self, Value, json};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use tokio_util::sync::CancellationToken;

use crate::start;

/// kruise-sim with the CloneSet family running in-process, its webhooks published.
struct Cluster {
    sim: kruise_sim::Sim,
    shutdown: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    clonesets: Api<DynamicObject>,
}

impl Cluster {
    async fn start() -> Cluster {
        let sim = kruise_sim::Sim::start(kruise_sim::SimConfig::default())
            .await
            .unwrap();
        let client = sim.client().unwrap();
        let kubeconfig = sim.kubeconfig_path().unwrap();
        let families = start::choose(crate::registry::families().unwrap(), "cloneset").unwrap();
        let shutdown = CancellationToken::new();
        let tasks = start::start(&sim, &kubeconfig, families, "", &shutdown)
            .await
            .unwrap();
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
        kruise_testkit::eventually(
            "the CloneSet webhooks published with their caBundle",
            Duration::from_secs(60),
            || async {
                let m = mutating.get_opt("kruise-cloneset-mutating").await.ok()??;
                let v = validating
                    .get_opt("kruise-cloneset-validating")
                    .await
                    .ok()??;
                let bundled = m
                    .webhooks?
                    .iter()
                    .map(|w| &w.client_config)
                    .chain(v.webhooks?.iter().map(|w| &w.client_config))
                    .all(|c| c.ca_bundle.as_ref().is_some_and(|b| !b.0.is_empty()));
                bundled.then_some(())
            },
        )
        .await;
        let resource = ApiResource {
            group: "apps.kruise.io".into(),
            version: "v1beta1".into(),
            api_version: "apps.kruise.io/v1beta1".into(),
            kind: "CloneSet".into(),
            plural: "clonesets".into(),
        };
        Cluster {
            clonesets: Api::namespaced_with(client, "default", &resource),
            sim,
            shutdown,
            tasks,
        }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        for task in self.tasks {
            let _ = task.await;
        }
        self.sim.shutdown().await;
    }
}

/// A CloneSet of no replicas whose container has `BLOB=<blob>`, selecting `app=<selects>`
/// (its template is labelled `app=<name>`).
fn cloneset(name: &str, labels: Value, selects: &str, blob: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": selects}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "nginx:alpine",
                    "env": [{"name": "BLOB", "value": blob}]}]}
            }
        }
    }))
    .unwrap()
}

fn blob(object: &DynamicObject) -> Option<&str> {
    object
        .data
        .pointer("/spec/template/spec/containers/0/env/0/value")
        .and_then(Value::as_str)
}

fn api_status(err: kube::Error) -> kube::core::Status {
    match err {
        kube::Error::Api(status) => *status,
        other => panic!("not an API error: {other:?}"),
    }
}

/// A CloneSet of about 1.4 MiB (under etcd's default 1.5 MiB request limit) is created and
/// then updated: the update's review carries the object twice, about 2.8 MiB, over the
/// 2 MB an HTTP server reads by default.
#[tokio::test]
async fn a_large_cloneset_is_created_and_updated_through_its_webhooks() {
    let cluster = Cluster::start().await;
    let size = 1400 * 1024;
    let created = cluster
        .clonesets
        .create(
            &PostParams::default(),
            &cloneset("large", json!({}), "large", &"x".repeat(size)),
        )
        .await
        .unwrap();
    assert_eq!(blob(&created).map(str::len), Some(size));
    // Defaulted by the mutating webhook.
    assert!(
        created.data.pointer("/spec/updateStrategy/type").is_some(),
        "{:?}",
        created.data.pointer("/spec/updateStrategy")
    );

    // The controller writes status meanwhile: retry on a conflict, as kubectl edit would.
    let updated = kruise_testkit::eventually(
        "the large CloneSet updated",
        Duration::from_secs(30),
        || async {
            let mut changed = cluster.clonesets.get("large").await.unwrap();
            changed.data["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] =
                json!("y".repeat(size));
            match cluster
                .clonesets
                .replace("large", &PostParams::default(), &changed)
                .await
            {
                Ok(updated) => Some(updated),
                Err(kube::Error::Api(s)) if s.code == 409 => None,
                Err(e) => panic!("updating the large CloneSet: {:.400}", e.to_string()),
            }
        },
    )
    .await;
    assert!(blob(&updated).is_some_and(|b| b.len() == size && b.starts_with('y')));
    assert_eq!(updated.metadata.generation, Some(2));
    cluster.stop().await;
}

/// Runs kubectl, if there is one, against the simulator; its stderr.
fn kubectl_stderr(kubeconfig: &std::path::Path, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .ok()?;
    Some(String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Deletion protection is a policy denial: 403 Forbidden, which kubectl prints as
/// `Error from server (Forbidden)`. An invalid spec is OpenKruise's 422 without a reason.
#[tokio::test]
async fn denials_reach_the_client_with_openkruise_codes_and_reasons() {
    let cluster = Cluster::start().await;
    let api = &cluster.clonesets;
    let protection = json!({"policy.kruise.io/delete-protection": "Always"});
    api.create(
        &PostParams::default(),
        &cloneset("protected", protection, "protected", "v"),
    )
    .await
    .unwrap();
    let status = api_status(
        api.delete("protected", &DeleteParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        status.message,
        "admission webhook \"vcloneset.kb.io\" denied the request: forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Always"
    );
    assert!(api.get_opt("protected").await.unwrap().is_some());

    let status = api_status(
        api.create(
            &PostParams::default(),
            &cloneset("invalid", json!({}), "other", "v"),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((status.code, status.reason.as_str()), (422, ""));
    assert_eq!(
        status.message,
        "admission webhook \"vcloneset.kb.io\" denied the request: spec.template.metadata.labels: Invalid value: {\"app\":\"invalid\"}: `selector` does not match template `labels`"
    );
    assert!(api.get_opt("invalid").await.unwrap().is_none());

    // What a kubectl user reads, when kubectl is installed.
    let kubeconfig = cluster.sim.kubeconfig_path().unwrap();
    let manifest =
        std::env::temp_dir().join(format!("invalid-cloneset-{}.json", std::process::id()));
    let invalid = cloneset("invalid", json!({}), "other", "v");
    std::fs::write(&manifest, serde_json::to_vec(&invalid).unwrap()).unwrap();
    let manifest_path = manifest.clone();
    let printed = tokio::task::spawn_blocking(move || {
        let delete = kubectl_stderr(
            &kubeconfig,
            &[
                "delete",
                "clonesets.apps.kruise.io",
                "protected",
                "-n",
                "default",
            ],
        )?;
        let create = kubectl_stderr(
            &kubeconfig,
            &["create", "-f", &manifest_path.display().to_string()],
        )?;
        Some((delete, create))
    })
    .await
    .unwrap();
    let _ = std::fs::remove_file(&manifest);
    match printed {
        Some((delete, create)) => {
            eprintln!("kubectl delete protected: {delete}kubectl create invalid: {create}");
            assert!(
                delete.contains(
                    "Error from server (Forbidden): admission webhook \"vcloneset.kb.io\" denied the request: forbidden by ResourcesProtectionDeletion"
                ),
                "{delete}"
            );
            assert!(
                create.contains(
                    "admission webhook \"vcloneset.kb.io\" denied the request: spec.template.metadata.labels: Invalid value"
                ),
                "{create}"
            );
        }
        None => eprintln!("skipping the kubectl check: no kubectl on PATH"),
    }
    cluster.stop().await;
}
