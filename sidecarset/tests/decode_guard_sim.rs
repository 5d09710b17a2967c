//! A SidecarSet that does not decode never stalls the kind: the controller's watch skips it
//! with a Warning event, and every other SidecarSet keeps reconciling. Against kruise-sim,
//! or the real API server of `KRUISE_TEST_KUBECONFIG`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kruise_runtime::{Metrics, RunOptions};
use kruise_sidecarset::api::v1beta1::SidecarSet;
use kruise_sidecarset::controller::{self, Settings};
use kruise_testkit::{WAIT, cluster_with_crds, eventually};
use kube::ResourceExt as _;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn sidecar_set(name: &str, image: serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "SidecarSet",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "containers": [{"name": "sidecar", "image": image}],
        },
    })
}

#[tokio::test]
async fn a_sidecarset_that_does_not_decode_gets_a_warning_and_the_others_reconcile() {
    let (cluster, client) =
        cluster_with_crds(0, &[kruise_sidecarset::api::crd::crd().unwrap()]).await;
    let resource = ApiResource::erase::<SidecarSet>(&());
    let raw: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    // The container fields are schemaless: the API server stores an image that is a number.
    let mut uids = Vec::new();
    for (name, image) in [("undecodable", json!(5)), ("before", json!("sidecar:1"))] {
        let created = raw
            .create(
                &PostParams::default(),
                &serde_json::from_value(sidecar_set(name, image)).unwrap(),
            )
            .await
            .unwrap();
        uids.push(created.uid().unwrap());
    }

    let shutdown = CancellationToken::new();
    let opts = RunOptions {
        name: controller::CONTROLLER_NAME.into(),
        concurrency: 2,
        metrics: Metrics::new(),
        shutdown: shutdown.clone(),
        ..RunOptions::default()
    };
    let metrics = opts.metrics.clone();
    let settings = Settings {
        revision_namespace: client.default_namespace().into(),
        ..Settings::default()
    };
    let task = tokio::spawn(controller::run(client.clone(), settings, opts));

    // Events about a cluster-scoped object are recorded in `default`; this object's (by uid),
    // not an earlier run's on a shared API server.
    let warning = eventually("a FailedDecode warning about undecodable", WAIT, || async {
        kruise_testkit::events_about(&client, "default", "undecodable")
            .await
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("FailedDecode")
                    && e.involved_object.uid.as_deref() == Some(uids[0].as_str())
            })
            .and_then(|e| e.message)
    })
    .await;
    assert!(warning.contains("undecodable"), "{warning}");
    let sets: Api<SidecarSet> = Api::all(client.clone());
    let reconciled = |name: &'static str| {
        let sets = sets.clone();
        async move {
            let status = sets.get(name).await.ok()?.status?;
            (!status.latest_revision.is_empty()).then_some(())
        }
    };
    eventually("the SidecarSet listed with it reconciled", WAIT, || {
        reconciled("before")
    })
    .await;
    raw.create(
        &PostParams::default(),
        &serde_json::from_value(sidecar_set("after", json!("sidecar:1"))).unwrap(),
    )
    .await
    .unwrap();
    eventually("a SidecarSet created later reconciled", WAIT, || {
        reconciled("after")
    })
    .await;
    let encoded = metrics.encode().unwrap();
    assert!(
        encoded
            .lines()
            .any(|l| l.starts_with("kruise_watch_decode_errors_total{kind=\"SidecarSet\"}")),
        "{encoded}"
    );
    shutdown.cancel();
    tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
    cluster.shutdown().await;
}
