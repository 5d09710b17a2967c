//! Image pre-download end to end against kruise-sim (or the real API server of
//! `KRUISE_TEST_KUBECONFIG` with kruise-sim's nodes), for each workload family that does it
//! (CloneSet, Advanced StatefulSet, Advanced DaemonSet), with the imagepull family and the
//! workload's controller in-process and an agent per node: a rollout to a slow image (3 s
//! per pull) creates the ImagePullJob before any pod updates (the partition holds them),
//! the job pulls on every node of the pods not yet updated, and once the partition is
//! released the updated pods start without the pull: the whole rollout takes less than
//! one pull.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_imagepull::agent::{self, AgentSettings};
use kruise_imagepull::api::v1beta1::{ImagePullJob, NodeImage};
use kruise_imagepull::controller::{self, Settings};
use kruise_runtime::family::AgentContext;
use kruise_runtime::{Metrics, Readiness, RunOptions};
use kruise_sim::ImagePull;
use kruise_testkit::{ClusterOptions, TestCluster, WAIT, eventually};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};
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

/// A workload family under test: its CRD, a workload of it with one pod per node held at
/// the old revision by its partition, the patch that releases the partition, and its
/// controller started with pre-download on.
struct Workload {
    kind: &'static str,
    crd: CustomResourceDefinition,
    manifest: Value,
    release: Value,
    start: fn(&Client, &Metrics, &CancellationToken),
}

fn template(image: &str) -> Value {
    json!({"metadata": {"labels": {"app": "web"}},
           "spec": {"containers": [{"name": "main", "image": image}],
                    "readinessGates": [{"conditionType": "InPlaceUpdateReady"}]}})
}

fn cloneset() -> Workload {
    Workload {
        kind: "CloneSet",
        crd: kruise_cloneset::api::crd::crd().unwrap(),
        manifest: json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": NODES,
                "selector": {"matchLabels": {"app": "web"}},
                "template": template(OLD),
                "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible",
                                                     "partition": NODES, "maxUnavailable": 1}},
            },
        }),
        release: json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}}),
        start: |client, metrics, shutdown| {
            let settings = kruise_cloneset::controller::Settings {
                pre_download: true,
                ..Default::default()
            };
            let name = kruise_cloneset::controller::CONTROLLER_NAME;
            let (c, m, o) = (
                client.clone(),
                metrics.clone(),
                run_options(name, metrics, shutdown),
            );
            tokio::spawn(async move { kruise_cloneset::controller::run(c, settings, &m, o).await });
        },
    }
}

fn statefulset() -> Workload {
    Workload {
        kind: "StatefulSet",
        crd: kruise_statefulset::api::crd::crd().unwrap(),
        manifest: json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": NODES,
                "serviceName": "web",
                "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": {"app": "web"}},
                "template": template(OLD),
                "updateStrategy": {"type": "RollingUpdate",
                                   "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible",
                                                     "partition": NODES, "maxUnavailable": 1}},
            },
        }),
        release: json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}}),
        start: |client, metrics, shutdown| {
            let settings = kruise_statefulset::controller::Settings {
                pre_download: true,
                ..Default::default()
            };
            let name = kruise_statefulset::controller::CONTROLLER_NAME;
            let (c, m, o) = (
                client.clone(),
                metrics.clone(),
                run_options(name, metrics, shutdown),
            );
            tokio::spawn(
                async move { kruise_statefulset::controller::run(c, settings, &m, o).await },
            );
        },
    }
}

fn daemonset() -> Workload {
    Workload {
        kind: "DaemonSet",
        crd: kruise_daemonset::api::crd::crd().unwrap(),
        manifest: json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet",
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": template(OLD),
                "updateStrategy": {"type": "RollingUpdate",
                                   "rollingUpdate": {"rollingUpdateType": "InPlaceIfPossible",
                                                     "partition": NODES, "maxUnavailable": 1}},
            },
        }),
        release: json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}}),
        start: |client, metrics, shutdown| {
            let settings = kruise_daemonset::controller::Settings {
                pre_download: true,
                ..Default::default()
            };
            let name = kruise_daemonset::controller::CONTROLLER_NAME;
            let (c, o) = (client.clone(), run_options(name, metrics, shutdown));
            tokio::spawn(async move { kruise_daemonset::controller::run(c, settings, o).await });
        },
    }
}

/// The NodeImage and ImagePullJob controllers, an agent per node and the workload's
/// controller with pre-download on.
fn start_families(
    cluster: &TestCluster,
    client: &Client,
    workload: &Workload,
    shutdown: &CancellationToken,
) {
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
            cri_socket: cluster.cri_socket(&node).unwrap(),
            node,
            shutdown: shutdown.clone(),
        };
        let settings = AgentSettings {
            poll: Duration::from_millis(100),
            ..AgentSettings::default()
        };
        tokio::spawn(agent::run(ctx, settings));
    }
    (workload.start)(client, &metrics, shutdown);
}

/// The workload's pods: `(node, spec image, running image and ready)` each.
async fn pods(client: &Client) -> Vec<(String, String, Option<(String, bool)>)> {
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let listed = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    listed
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let spec = p.spec.as_ref().unwrap();
            let running = p
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.name == "main"))
                .filter(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
                .map(|c| (c.image.clone(), c.ready));
            (
                spec.node_name.clone().unwrap_or_default(),
                spec.containers[0].image.clone().unwrap_or_default(),
                running,
            )
        })
        .collect()
}

/// Whether there are `NODES` pods, all running `image` and ready.
async fn all_running(client: &Client, image: &str) -> bool {
    let pods = pods(client).await;
    pods.len() == NODES
        && pods.iter().all(|(_, _, running)| {
            running
                .as_ref()
                .is_some_and(|(i, ready)| i == image && *ready)
        })
}

async fn pre_downloaded_images_spare_the_updated_pods_the_pull(workload: Workload) {
    let cri_dir = std::env::temp_dir().join(format!(
        "kruise-predownload-{}-{}",
        workload.kind,
        std::process::id()
    ));
    let mut crds = kruise_imagepull::api::crd::crds().unwrap();
    crds.push(workload.crd.clone());
    let slow_pull = ImagePull {
        delay: Some(SLOW_PULL),
        failure: None,
    };
    let (cluster, client) = kruise_testkit::cluster_with(
        ClusterOptions {
            nodes: NODES,
            cri_dir: Some(cri_dir.clone()),
            image_pulls: vec![(NEW.into(), slow_pull)],
        },
        &crds,
    )
    .await;
    let shutdown = CancellationToken::new();
    start_families(&cluster, &client, &workload, &shutdown);
    eventually("a NodeImage per node", WAIT, || async {
        let listed = Api::<NodeImage>::all(client.clone())
            .list(&ListParams::default())
            .await
            .unwrap();
        (listed.items.len() == NODES).then_some(())
    })
    .await;

    // Four pods, held at the old revision by the partition.
    let api: Api<DynamicObject> = Api::default_namespaced_with(
        client.clone(),
        &kruise_testkit::sim::stored_resource(&workload.crd),
    );
    let object: DynamicObject = serde_json::from_value(workload.manifest.clone()).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
    eventually("4 pods ready", WAIT, || async {
        all_running(&client, OLD).await.then_some(())
    })
    .await;
    let nodes: BTreeSet<String> = pods(&client).await.into_iter().map(|p| p.0).collect();

    // The new image: a job per changed container before any pod updates.
    let image_patch =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": NEW}]}}}});
    api.patch("web", &PatchParams::default(), &Patch::Merge(&image_patch))
        .await
        .unwrap();
    let jobs: Api<ImagePullJob> = Api::default_namespaced(client.clone());
    // (A DaemonSet created with a partition also gets a job for its first image, as
    // upstream's: no older revision, so every image counts as changed.)
    let job = eventually("the pre-download job", WAIT, || async {
        let listed = jobs.list(&ListParams::default()).await.unwrap();
        listed.items.into_iter().find(|j| j.spec.image == NEW)
    })
    .await;
    let uid = api.get("web").await.unwrap().uid().unwrap();
    assert!(job.name_any().ends_with("-main"), "{}", job.name_any());
    assert_eq!(job.spec.image, NEW);
    let owner = &job.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        (workload.kind, uid.as_str())
    );
    assert!(
        pods(&client).await.iter().all(|(_, image, _)| image == OLD),
        "no pod updated yet"
    );

    // It pulls on the nodes of the old pods.
    let done = eventually("the job succeeded on every node", WAIT, || async {
        let status = jobs.get(&job.name_any()).await.unwrap().status?;
        (status.desired > 0 && status.succeeded == status.desired).then_some(status)
    })
    .await;
    assert_eq!(
        (done.desired, done.failed),
        (i32::try_from(nodes.len()).unwrap(), 0),
        "one pull per node of the old pods"
    );

    // Released, the rollout of four pods one at a time takes less than one pull.
    let started = Instant::now();
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(&workload.release),
    )
    .await
    .unwrap();
    eventually("every pod updated and ready", WAIT, || async {
        all_running(&client, NEW).await.then_some(())
    })
    .await;
    let took = started.elapsed();
    assert!(
        took < SLOW_PULL,
        "the rollout took {took:?}, at least one pull of {SLOW_PULL:?}"
    );
    // Rolled out, the workload's jobs are removed.
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
    cluster.shutdown().await;
    let _ = std::fs::remove_dir_all(cri_dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloneset_pre_downloads_before_its_in_place_rollout() {
    pre_downloaded_images_spare_the_updated_pods_the_pull(cloneset()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statefulset_pre_downloads_before_its_in_place_rollout() {
    pre_downloaded_images_spare_the_updated_pods_the_pull(statefulset()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemonset_pre_downloads_before_its_in_place_rollout() {
    pre_downloaded_images_spare_the_updated_pods_the_pull(daemonset()).await;
}
