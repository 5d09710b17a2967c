//! CloneSet pre-download end to end against kruise-sim, with both families in-process and
//! an agent per node: a rollout to a slow image (3 s per pull) creates the ImagePullJob
//! before any pod updates (the partition holds them), the job pulls on every node of the
//! pods not yet updated, and once the partition is released the updated pods start without
//! the pull: the whole rollout takes less than one pull.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use kruise_common::family::AgentContext;
use kruise_common::runtime::{Metrics, Readiness, RunOptions};
use kruise_imagepull::agent::{self, AgentSettings};
use kruise_imagepull::api::v1beta1::{ImagePullJob, NodeImage};
use kruise_imagepull::controller::{self, Settings};
use kruise_sim::{ImagePulls, Sim, SimConfig};
use kruise_testkit::{WAIT, eventually};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const NODES: usize = 4;
const OLD: &str = "registry.local/web:v1";
const NEW: &str = "registry.local/web:v2";
const SLOW_PULL: Duration = Duration::from_secs(3);

fn run_options(name: &str, metrics: &Metrics, shutdown: &CancellationToken) -> RunOptions {
    RunOptions {
        name: name.into(),
        concurrency: 3,
        metrics: metrics.clone(),
        readiness: Readiness::default(),
        shutdown: shutdown.clone(),
        leadership: Default::default(),
    }
}

/// The NodeImage and ImagePullJob controllers, an agent per node and the CloneSet
/// controller with pre-download on.
fn start_families(sim: &Sim, client: &Client, shutdown: &CancellationToken) {
    let metrics = Metrics::new();
    let settings = Settings {
        creation_delay: Duration::ZERO,
        ..Settings::default()
    };
    let (c, s, o) = (
        client.clone(),
        settings.clone(),
        run_options(controller::NODEIMAGE_CONTROLLER, &metrics, shutdown),
    );
    tokio::spawn(async move { controller::nodeimage::run(c, s, o).await });
    let (c, o) = (
        client.clone(),
        run_options(controller::IMAGEPULLJOB_CONTROLLER, &metrics, shutdown),
    );
    tokio::spawn(async move { controller::imagepulljob::run(c, settings, o).await });
    for i in 0..NODES {
        let node = format!("sim-node-{i}");
        let ctx = AgentContext {
            client: client.clone(),
            cri_socket: sim.cri_socket(&node).unwrap(),
            node,
            shutdown: shutdown.clone(),
        };
        let settings = AgentSettings {
            poll: Duration::from_millis(100),
            ..AgentSettings::default()
        };
        tokio::spawn(agent::run(ctx, settings));
    }
    let cloneset_settings = kruise_cloneset::controller::Settings {
        pre_download: true,
        ..Default::default()
    };
    let (c, o) = (
        client.clone(),
        run_options(
            kruise_cloneset::controller::CONTROLLER_NAME,
            &metrics,
            shutdown,
        ),
    );
    tokio::spawn(async move {
        kruise_cloneset::controller::run(c, cloneset_settings, &metrics, o).await
    });
}

fn clonesets(client: &Client) -> Api<DynamicObject> {
    let crd = kruise_cloneset::api::crd::crd().unwrap();
    Api::namespaced_with(
        client.clone(),
        "default",
        &kruise_testkit::sim::stored_resource(&crd),
    )
}

/// `(updatedReadyReplicas, readyReplicas)` of the CloneSet `web`.
async fn rollout(client: &Client) -> (i64, i64) {
    let cs = clonesets(client).get("web").await.unwrap();
    let field = |k: &str| cs.data["status"][k].as_i64().unwrap_or(0);
    (field("updatedReadyReplicas"), field("readyReplicas"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_downloaded_images_spare_the_updated_pods_the_pull() {
    let cri_dir = std::env::temp_dir().join(format!("kruise-predownload-{}", std::process::id()));
    let sim = Sim::start(SimConfig {
        nodes: NODES,
        cri_dir: Some(cri_dir.clone()),
        image_pulls: ImagePulls::default().delay(NEW, SLOW_PULL),
        ..Default::default()
    })
    .await
    .unwrap();
    let client = sim.client().unwrap();
    let mut crds = kruise_imagepull::api::crd::crds().unwrap();
    crds.push(kruise_cloneset::api::crd::crd().unwrap());
    kruise_testkit::sim::install_crds(&client, &crds).await;
    let shutdown = CancellationToken::new();
    start_families(&sim, &client, &shutdown);
    eventually("a NodeImage per node", WAIT, || async {
        let listed = Api::<NodeImage>::all(client.clone())
            .list(&ListParams::default())
            .await
            .unwrap();
        (listed.items.len() == NODES).then_some(())
    })
    .await;

    // Four pods, one per node, held at the old revision by the partition.
    let cloneset: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": NODES,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "main", "image": OLD}]}},
            "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible",
                                                 "partition": NODES, "maxUnavailable": 1}},
        },
    }))
    .unwrap();
    let api = clonesets(&client);
    api.create(&PostParams::default(), &cloneset).await.unwrap();
    eventually("4 pods ready", WAIT, || async {
        (rollout(&client).await.1 == NODES as i64).then_some(())
    })
    .await;

    // The new image: a job per changed container before any pod updates.
    let image_patch =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": NEW}]}}}});
    api.patch("web", &PatchParams::default(), &Patch::Merge(&image_patch))
        .await
        .unwrap();
    let jobs: Api<ImagePullJob> = Api::namespaced(client.clone(), "default");
    let job = eventually("the pre-download job", WAIT, || async {
        jobs.list(&ListParams::default()).await.unwrap().items.pop()
    })
    .await;
    let cs_uid = api.get("web").await.unwrap().uid().unwrap();
    assert!(job.name_any().ends_with("-main"), "{}", job.name_any());
    assert_eq!(job.spec.image, NEW);
    let owner = &job.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("CloneSet", cs_uid.as_str())
    );
    assert_eq!(rollout(&client).await.0, 0, "no pod updated yet");

    // It pulls on the nodes of the four old pods.
    let done = eventually("the job succeeded on every node", WAIT, || async {
        let status = jobs.get(&job.name_any()).await.unwrap().status?;
        (status.succeeded == NODES as i32).then_some(status)
    })
    .await;
    assert_eq!(done.failed, 0);

    // Released, the rollout of four pods one at a time takes less than one pull.
    let started = Instant::now();
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}})),
    )
    .await
    .unwrap();
    eventually("every pod updated and ready", WAIT, || async {
        (rollout(&client).await.0 == NODES as i64).then_some(())
    })
    .await;
    let took = started.elapsed();
    assert!(
        took < SLOW_PULL,
        "the rollout took {took:?}, at least one pull of {SLOW_PULL:?}"
    );
    // Rolled out, the CloneSet's jobs are removed.
    eventually("the job deleted", WAIT, || async {
        jobs.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    shutdown.cancel();
    sim.shutdown().await;
    let _ = std::fs::remove_dir_all(cri_dir);
}
