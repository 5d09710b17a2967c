//! A SidecarSet that does not decode never stalls the kind: the controller's watch skips it
//! with a Warning event, and every other SidecarSet keeps reconciling.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_common::runtime::{Metrics, RunOptions};
use kruise_sidecarset::api::v1beta1::SidecarSet;
use kruise_sidecarset::controller::{self, Settings};
use kruise_sim::{Sim, SimConfig};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);

/// Polls `check` every 50 ms until it returns Some, or panics after `WAIT`.
async fn eventually<T, Fut: std::future::Future<Output = Option<T>>>(
    what: &str,
    mut check: impl FnMut() -> Fut,
) -> T {
    let start = std::time::Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(start.elapsed() <= WAIT, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

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

/// Warning events about `name` (cluster-scoped objects' events go to `default`).
async fn warnings_about(client: &Client, name: &str) -> Vec<(String, String)> {
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}

#[tokio::test]
async fn a_sidecarset_that_does_not_decode_gets_a_warning_and_the_others_reconcile() {
    let sim = Sim::start(SimConfig::default()).await.unwrap();
    let client = sim.client().unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(
            &PostParams::default(),
            &kruise_sidecarset::api::crd::crd().unwrap(),
        )
        .await
        .unwrap();
    let resource = ApiResource::erase::<SidecarSet>(&());
    let raw: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    eventually("the SidecarSet API", || {
        let raw = raw.clone();
        async move { raw.list(&ListParams::default()).await.ok() }
    })
    .await;
    // The container fields are schemaless: the API server stores an image that is a number.
    for (name, image) in [("undecodable", json!(5)), ("before", json!("sidecar:1"))] {
        raw.create(
            &PostParams::default(),
            &serde_json::from_value(sidecar_set(name, image)).unwrap(),
        )
        .await
        .unwrap();
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
        revision_namespace: "default".into(),
        ..Settings::default()
    };
    let task = tokio::spawn(controller::run(client.clone(), settings, opts));

    let warning = eventually("a FailedDecode warning", || async {
        warnings_about(&client, "undecodable")
            .await
            .into_iter()
            .find(|(reason, _)| reason == "FailedDecode")
    })
    .await;
    assert!(warning.1.contains("undecodable"), "{warning:?}");
    let sets: Api<SidecarSet> = Api::all(client.clone());
    let reconciled = |name: &'static str| {
        let sets = sets.clone();
        async move {
            let status = sets.get(name).await.ok()?.status?;
            (!status.latest_revision.is_empty()).then_some(())
        }
    };
    eventually("the SidecarSet listed with it reconciled", || {
        reconciled("before")
    })
    .await;
    raw.create(
        &PostParams::default(),
        &serde_json::from_value(sidecar_set("after", json!("sidecar:1"))).unwrap(),
    )
    .await
    .unwrap();
    eventually("a SidecarSet created later reconciled", || {
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
    sim.shutdown().await;
}
