//! A SidecarSet sidecar upgrade held by a PodUnavailableBudget (§8 e2e, OpenKruise's
//! "selector SidecarSet, inject sidecar container, update failed sidecar image, block").
//! OpenKruise's SidecarSet controller does not consult budgets itself: its in-place pod
//! update is an UPDATE the PUB step of the validating pod webhook checks under
//! `PodUnavailableBudgetUpdateGate`, refused once the budget is spent, and the controller
//! tries again later. Here the same parts run in-process against kruise-sim or the real API
//! server of `KRUISE_TEST_KUBECONFIG` (which calls the webhooks by URL): the PUB
//! controller, the SidecarSet controller, and over TLS SidecarSet defaulting (its hash
//! annotations), sidecar injection and the PUB step, as kruise-sidecarset and kruise-webhook
//! serve them. The failing sidecar image is one whose pull takes an hour.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../protection/tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kruise_admission::pod_chain::{PodChain, ValidatingPodChain};
use kruise_admission::publish::Owned;
use kruise_core::featuregate::FeatureGates;
use kruise_protection::pod_admission::pub_validator_step;
use kruise_runtime::family::{LiveCluster, StepContext};
use kruise_runtime::{Metrics, RunOptions};
use kruise_sidecarset::admission::{SidecarSetInjectionStep, StaticSnapshot};
use kruise_sidecarset::api::v1beta1::SidecarSet;
use kruise_sidecarset::controller::{self as sidecarset_controller, Settings};
use kruise_sim::ImagePull;
use kruise_testkit::{ClusterOptions, TestCluster};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::*;
use tokio_util::sync::CancellationToken;

const BROKEN: &str = "busybox:broken";

/// Two simulated nodes whose kubelet takes an hour to pull [`BROKEN`], both CRDs:
/// kruise-sim, or the real API server of `KRUISE_TEST_KUBECONFIG`.
async fn sidecar_cluster() -> (TestCluster, Client) {
    let broken = ImagePull {
        delay: Some(Duration::from_secs(3600)),
        failure: None,
    };
    kruise_testkit::cluster_with(
        ClusterOptions {
            nodes: 2,
            image_pulls: vec![(BROKEN.into(), broken)],
            ..ClusterOptions::default()
        },
        &[
            kruise_protection::api::crd::crd().unwrap(),
            kruise_sidecarset::api::crd::crd().unwrap(),
        ],
    )
    .await
}

/// The SidecarSet controller in-process until `shutdown`.
fn start_sidecarset(client: &Client, shutdown: &CancellationToken) {
    let opts = RunOptions {
        name: sidecarset_controller::CONTROLLER_NAME.into(),
        shutdown: shutdown.clone(),
        ..RunOptions::default()
    };
    let client = client.clone();
    tokio::spawn(
        async move { sidecarset_controller::run(client, Settings::default(), opts).await },
    );
}

/// The sidecar image of each of the workload's pods.
async fn sidecar_images(client: &Client) -> Vec<String> {
    Api::<Pod>::default_namespaced(client.clone())
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(|p| {
            p.spec
                .as_ref()?
                .containers
                .iter()
                .find(|c| c.name == "log-agent")?
                .image
                .clone()
        })
        .collect()
}

async fn set_sidecar_image(client: &Client, image: &str) {
    Api::<SidecarSet>::all(client.clone())
        .patch(
            "log-agent",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([
                    {"op": "replace", "path": "/spec/containers/0/image", "value": image}
                ]))
                .unwrap(),
            ),
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sidecar_upgrade_to_a_failing_image_stops_at_the_budget_and_completes_once_fixed() {
    let (cluster, client) = sidecar_cluster().await;
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "kruise-system"}})).unwrap();
    let _ = Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await;
    let _budget_controller = start(&client);
    start_sidecarset(&client, &shutdown);

    budget(
        &client,
        "web",
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}),
    )
    .await;

    // kruise-sidecarset's defaulting webhook (the set's hash annotations), kruise-webhook's
    // injection step and PUB step (update gate on), one TLS server.
    let live = LiveCluster {
        client: client.clone(),
        refresh: Arc::new(tokio::sync::Notify::new()),
        shutdown: shutdown.clone(),
    };
    let injection = PodChain::new(vec![Arc::new(SidecarSetInjectionStep::new(
        kruise_sidecarset::admission::live::start(
            client.clone(),
            Arc::new(tokio::sync::Notify::new()),
            shutdown.clone(),
        ),
    ))]);
    let validation = ValidatingPodChain::new(vec![pub_validator_step(&StepContext {
        gates: FeatureGates::parse("PodUnavailableBudgetUpdateGate=true").unwrap(),
        live: Some(live),
        metrics: Metrics::new(),
    })]);
    let sets: SidecarSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "log-agent"},
        "spec": {"namespace": client.default_namespace(), "selector": {"matchLabels": {"app": "web"}},
                 "containers": [{"name": "log-agent", "image": "busybox:1.36",
                                 "command": ["sleep", "infinity"]}],
                 "updateStrategy": {"type": "RollingUpdate", "maxUnavailable": "100%"}}
    }))
    .unwrap();
    let sidecarset_routes = kruise_sidecarset::binary::routes(Arc::new(StaticSnapshot::default()));
    serve(
        &client,
        sidecarset_routes,
        &Owned {
            mutating: Some("kruise-sidecarset-mutating".into()),
            validating: Some("kruise-sidecarset-validating".into()),
            crds: Vec::new(),
        },
        &shutdown,
    )
    .await;
    Api::<SidecarSet>::all(client.clone())
        .create(&PostParams::default(), &sets)
        .await
        .unwrap();
    eventually(
        "the SidecarSet and the budget in the chains' watches",
        WAIT,
        || {
            let ready =
                !injection.webhook_specs().is_empty() && !validation.webhook_specs().is_empty();
            async move { ready.then_some(()) }
        },
    )
    .await;
    let pod_routes = kruise_admission::AdmissionRoutes::new()
        .handler(injection)
        .handler(validation);
    serve(
        &client,
        pod_routes,
        &Owned {
            mutating: Some("kruise-mutating-webhook-configuration".into()),
            validating: Some("kruise-validating-webhook-configuration".into()),
            crds: Vec::new(),
        },
        &shutdown,
    )
    .await;

    deployment(&client, "web", 5, 5).await;
    eventually("the sidecar injected into every pod", WAIT, || {
        let client = client.clone();
        async move {
            let images = sidecar_images(&client).await;
            (images == vec!["busybox:1.36".to_string(); 5]).then_some(())
        }
    })
    .await;
    wait_for_numbers(&client, "web", (1, 5, 4, 5)).await;

    // The failing image: one pod's sidecar is upgraded, the budget is spent, the rest wait
    // although the SidecarSet allows all five at once.
    set_sidecar_image(&client, BROKEN).await;
    eventually("one sidecar on the failing image", WAIT, || {
        let client = client.clone();
        async move {
            let images = sidecar_images(&client).await;
            images.iter().any(|i| i == BROKEN).then_some(())
        }
    })
    .await;
    let held_until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < held_until {
        let images = sidecar_images(&client).await;
        assert_eq!(
            images.iter().filter(|i| *i == BROKEN).count(),
            1,
            "{images:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_for_numbers(&client, "web", (0, 4, 4, 5)).await;
    let sidecar_sets = Api::<SidecarSet>::all(client.clone());
    eventually(
        "the SidecarSet counts one updated pod, not ready",
        WAIT,
        || {
            let sidecar_sets = sidecar_sets.clone();
            async move {
                let status = sidecar_sets.get("log-agent").await.ok()?.status?;
                (status.matched_pods == 5
                    && status.updated_pods == 1
                    && status.updated_ready_pods == 0
                    && status.ready_pods == 4)
                    .then_some(())
            }
        },
    )
    .await;

    // Fixed: the upgrade completes, within the budget.
    set_sidecar_image(&client, "busybox:1.37").await;
    eventually(
        "every sidecar on the fixed image and Ready",
        Duration::from_secs(120),
        || {
            let sidecar_sets = sidecar_sets.clone();
            async move {
                let status = sidecar_sets.get("log-agent").await.ok()?.status?;
                (status.updated_pods == 5
                    && status.updated_ready_pods == 5
                    && status.ready_pods == 5)
                    .then_some(())
            }
        },
    )
    .await;
    assert_eq!(
        sidecar_images(&client).await,
        vec!["busybox:1.37".to_string(); 5]
    );
    wait_for_numbers(&client, "web", (1, 5, 4, 5)).await;
    cluster.shutdown().await;
}
