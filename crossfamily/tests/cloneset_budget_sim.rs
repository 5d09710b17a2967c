//! CloneSet respects a PodUnavailableBudget on its own updates (§8 e2e, OpenKruise's
//! `PodUnavailableBudgetUpdateGate` pre-check): the CloneSet controller and the PUB
//! controller in-process against kruise-sim. A rollout to an image that never gets Ready
//! stops once the budget is spent, whatever the CloneSet's own maxUnavailable, and
//! completes once the image is fixed. The simulated kubelet's per-pod ready delay stands
//! in for the failing image: an hour to Ready.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../protection/tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kruise_cloneset::api::v1beta1::CloneSet;
use kruise_cloneset::controller::{self, Settings};
use kruise_runtime::{Metrics, Readiness, RunOptions};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::*;
use tokio_util::sync::CancellationToken;

/// The CloneSet controller in-process with the pre-check's gate on, until dropped.
fn start_cloneset(client: &Client) -> CancellationToken {
    let shutdown = CancellationToken::new();
    let opts = RunOptions {
        name: controller::CONTROLLER_NAME.into(),
        concurrency: 2,
        metrics: Metrics::new(),
        readiness: Readiness::default(),
        shutdown: shutdown.clone(),
        leadership: Default::default(),
    };
    let settings = Settings {
        namespace: Some(client.default_namespace().into()),
        pub_check: true,
        ..Settings::default()
    };
    let client = client.clone();
    tokio::spawn(async move { controller::run(client, settings, &Metrics::new(), opts).await });
    shutdown
}

fn template(image: &str, ready_delay: &str) -> serde_json::Value {
    json!({"metadata": {"labels": {"app": "web"},
                        "annotations": {"sim.kruise.io/ready-delay": ready_delay}},
           "spec": {"containers": [{"name": "main", "image": image}]}})
}

/// The images of the CloneSet's pods.
async fn images(client: &Client) -> Vec<String> {
    Api::<Pod>::default_namespaced(client.clone())
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            p.spec.as_ref().unwrap().containers[0]
                .image
                .clone()
                .unwrap()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_to_a_failing_image_stops_at_the_budget_and_completes_once_fixed() {
    let (cluster, client) = kruise_testkit::cluster_with_crds(
        2,
        &[
            kruise_protection::api::crd::crd().unwrap(),
            kruise_cloneset::api::crd::crd().unwrap(),
        ],
    )
    .await;
    let _budget_controller = start(&client);
    let _cloneset_controller = start_cloneset(&client).drop_guard();
    let clonesets = Api::<CloneSet>::default_namespaced(client.clone());
    let cs: CloneSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": template("nginx:1.25", "100ms"),
                 "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": "100%"}}}
    }))
    .unwrap();
    clonesets.create(&PostParams::default(), &cs).await.unwrap();
    budget(
        &client,
        "web",
        json!({"targetRef": {"apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet", "name": "web"},
        "maxUnavailable": 1}),
    )
    .await;
    wait_for_numbers(&client, "web", (1, 3, 2, 3)).await;

    // The failing image: one pod is updated, the budget is spent, the others wait.
    clonesets
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": template("nginx:broken", "1h")}})),
        )
        .await
        .unwrap();
    eventually("one pod on the failing image", WAIT, || {
        let client = client.clone();
        async move {
            let images = images(&client).await;
            images.iter().any(|i| i == "nginx:broken").then_some(())
        }
    })
    .await;
    // Held: for the next 5 s (five of the CloneSet's retries) no second pod is touched.
    let held_until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < held_until {
        let images = images(&client).await;
        let broken = images.iter().filter(|i| *i == "nginx:broken").count();
        assert_eq!(broken, 1, "{images:?}");
        assert_eq!(images.len(), 3, "{images:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_for_numbers(&client, "web", (0, 2, 2, 3)).await;

    // Fixed: the rollout completes, one pod at a time within the budget.
    clonesets
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": template("nginx:1.27", "100ms")}})),
        )
        .await
        .unwrap();
    eventually(
        "every pod on the fixed image and Ready",
        Duration::from_secs(120),
        || {
            let clonesets = clonesets.clone();
            async move {
                let status = clonesets.get("web").await.ok()?.status?;
                (status.updated_ready_replicas == 3 && status.ready_replicas == 3).then_some(())
            }
        },
    )
    .await;
    assert_eq!(images(&client).await, vec!["nginx:1.27".to_string(); 3]);
    wait_for_numbers(&client, "web", (1, 3, 2, 3)).await;
    cluster.shutdown().await;
}
