//! The node agent against kruise-sim's fake CRI for one node (kruise-sim, or the real API
//! server of `KRUISE_TEST_KUBECONFIG` with kruise-sim's nodes): a NodeImage tag version is
//! pulled through CRI and answered with the image's id, which the runtime then lists; a
//! new version of a present tag under `IfNotPresent` is answered without a pull; a job and
//! an image list end to end — controllers plus one agent per node — complete.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use kruise_cri::ImageServiceClient;
use kruise_cri::v1::ListImagesRequest;
use kruise_imagepull::agent::{self, AgentSettings};
use kruise_imagepull::api::v1beta1::{ImageListPullJob, ImagePullJob, NodeImage};
use kruise_imagepull::api::{ImagePullPhase, ImageTagStatus};
use kruise_imagepull::controller::{self, Settings};
use kruise_runtime::family::AgentContext;
use kruise_runtime::{Metrics, Readiness, RunOptions};
use kruise_testkit::{ClusterOptions, TestCluster, WAIT, eventually};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const NODE: &str = "sim-node-0";

/// `nodes` nodes with fake CRI sockets under a directory named after `dir`, and the CRDs.
async fn cluster(nodes: usize, dir: &str) -> (TestCluster, Client, PathBuf) {
    let cri_dir =
        std::env::temp_dir().join(format!("kruise-imagepull-{dir}-{}", std::process::id()));
    let (cluster, client) = kruise_testkit::cluster_with(
        ClusterOptions {
            nodes,
            cri_dir: Some(cri_dir.clone()),
            ..ClusterOptions::default()
        },
        &kruise_imagepull::api::crd::crds().unwrap(),
    )
    .await;
    (cluster, client, cri_dir)
}

fn start_agent(cluster: &TestCluster, client: &Client, node: &str, shutdown: &CancellationToken) {
    let ctx = AgentContext {
        client: client.clone(),
        node: node.into(),
        cri_socket: cluster.cri_socket(node).unwrap(),
        shutdown: shutdown.clone(),
    };
    let settings = AgentSettings {
        poll: Duration::from_millis(100),
        ..AgentSettings::default()
    };
    tokio::spawn(agent::run(ctx, settings));
}

async fn answer(client: &Client, image: &str, tag: &str, version: i64) -> Option<ImageTagStatus> {
    let ni = Api::<NodeImage>::all(client.clone())
        .get_opt(NODE)
        .await
        .unwrap()?;
    ni.status?
        .image_statuses
        .get(image)?
        .tags
        .iter()
        .find(|t| t.tag == tag && t.version == version && t.completion_time.is_some())
        .cloned()
}

fn tag(tag: &str, version: i64) -> serde_json::Value {
    json!({"tag": tag, "version": version, "createdAt": jiff::Timestamp::now().to_string(),
           "pullPolicy": {"timeoutSeconds": 60, "backoffLimit": 1, "ttlSecondsAfterFinished": 600}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_is_pulled_through_cri_and_answered_with_its_image_id() {
    let (cluster, client, dir) = cluster(1, "pull").await;
    let api: Api<NodeImage> = Api::all(client.clone());
    let node_image: NodeImage = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "NodeImage",
        "metadata": {"name": NODE},
        "spec": {"images": {"nginx": {"tags": [tag("1.25", 1)]}}},
    }))
    .unwrap();
    api.create(&PostParams::default(), &node_image)
        .await
        .unwrap();
    let shutdown = CancellationToken::new();
    start_agent(&cluster, &client, NODE, &shutdown);
    let done = eventually("nginx:1.25 answered", WAIT, || {
        let client = client.clone();
        async move { answer(&client, "nginx", "1.25", 1).await }
    })
    .await;
    assert_eq!(done.phase, Some(ImagePullPhase::Succeeded), "{done:?}");
    assert_eq!(done.progress, 100);
    assert!(
        done.image_id.starts_with("docker.io/library/nginx@sha256:"),
        "{}",
        done.image_id
    );
    // The runtime lists the image under that id.
    let mut images =
        ImageServiceClient::new(kruise_cri::connect(cluster.cri_socket(NODE).unwrap()).unwrap());
    let listed = images
        .list_images(ListImagesRequest::default())
        .await
        .unwrap()
        .into_inner()
        .images;
    assert!(
        listed
            .iter()
            .any(|i| i.repo_digests.contains(&done.image_id)),
        "{listed:?}"
    );

    // A new version of the present tag (IfNotPresent) is answered from the runtime's store.
    let patch = json!({"spec": {"images": {"nginx": {"tags": [tag("1.25", 2)]}}}});
    api.patch(NODE, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
    let again = eventually("version 2 answered", WAIT, || {
        let client = client.clone();
        async move { answer(&client, "nginx", "1.25", 2).await }
    })
    .await;
    assert_eq!(again.phase, Some(ImagePullPhase::Succeeded));
    assert_eq!(again.image_id, done.image_id);
    shutdown.cancel();
    cluster.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

fn start_controllers(client: &Client, shutdown: &CancellationToken) {
    let metrics = Metrics::new();
    let settings = Settings {
        creation_delay: Duration::ZERO,
        ..Settings::default()
    };
    for name in [
        controller::NODEIMAGE_CONTROLLER,
        controller::IMAGEPULLJOB_CONTROLLER,
        controller::IMAGELISTPULLJOB_CONTROLLER,
    ] {
        let opts = RunOptions {
            name: name.into(),
            concurrency: 3,
            metrics: metrics.clone(),
            readiness: Readiness::default(),
            shutdown: shutdown.clone(),
            leadership: Default::default(),
        };
        let (client, settings) = (client.clone(), settings.clone());
        tokio::spawn(async move {
            match name {
                controller::NODEIMAGE_CONTROLLER => {
                    controller::nodeimage::run(client, settings, opts).await
                }
                controller::IMAGEPULLJOB_CONTROLLER => {
                    controller::imagepulljob::run(client, settings, opts).await
                }
                _ => controller::imagelistpulljob::run(client, settings, opts).await,
            }
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_completes_with_the_controllers_and_an_agent_per_node() {
    let (cluster, client, dir) = cluster(3, "job").await;
    let shutdown = CancellationToken::new();
    start_controllers(&client, &shutdown);
    for i in 0..3 {
        start_agent(&cluster, &client, &format!("sim-node-{i}"), &shutdown);
    }
    eventually("three NodeImages", WAIT, || {
        let client = client.clone();
        async move {
            (Api::<NodeImage>::all(client)
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .len()
                == 3)
                .then_some(())
        }
    })
    .await;
    let job: ImagePullJob = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "ImagePullJob",
        "metadata": {"name": "everywhere"},
        "spec": {"image": "busybox:1.36", "parallelism": 2, "completionPolicy": {"type": "Always"}},
    }))
    .unwrap();
    let jobs: Api<ImagePullJob> = Api::default_namespaced(client.clone());
    jobs.create(&PostParams::default(), &job).await.unwrap();
    let done = eventually("the job completes", WAIT, || {
        let jobs = jobs.clone();
        async move {
            jobs.get("everywhere").await.ok().filter(|j| {
                j.status
                    .as_ref()
                    .is_some_and(|s| s.completion_time.is_some())
            })
        }
    })
    .await;
    let status = done.status.clone().unwrap();
    assert_eq!(
        (status.desired, status.succeeded, status.failed),
        (3, 3, 0),
        "{}",
        done.name_any()
    );
    shutdown.cancel();
    cluster.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_list_makes_one_child_per_image_and_completes() {
    let (cluster, client, dir) = cluster(2, "list").await;
    let shutdown = CancellationToken::new();
    start_controllers(&client, &shutdown);
    for i in 0..2 {
        start_agent(&cluster, &client, &format!("sim-node-{i}"), &shutdown);
    }
    eventually("two NodeImages", WAIT, || {
        let client = client.clone();
        async move {
            let n = Api::<NodeImage>::all(client)
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .len();
            (n == 2).then_some(())
        }
    })
    .await;
    let list: ImageListPullJob = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "ImageListPullJob",
        "metadata": {"name": "warm"},
        "spec": {"images": ["nginx:1.25", "redis:7"], "parallelism": 2,
                 "completionPolicy": {"type": "Always", "ttlSecondsAfterFinished": 2}},
    }))
    .unwrap();
    let lists: Api<ImageListPullJob> = Api::default_namespaced(client.clone());
    lists.create(&PostParams::default(), &list).await.unwrap();
    let done = eventually("the list completes", WAIT, || {
        let lists = lists.clone();
        async move {
            lists.get("warm").await.ok().filter(|l| {
                l.status
                    .as_ref()
                    .is_some_and(|s| s.completion_time.is_some())
            })
        }
    })
    .await;
    let status = done.status.clone().unwrap();
    assert_eq!(
        (status.desired, status.completed, status.succeeded),
        (2, 2, 2)
    );
    let children: Vec<ImagePullJob> = Api::<ImagePullJob>::default_namespaced(client.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    let mut images: Vec<&str> = children.iter().map(|c| c.spec.image.as_str()).collect();
    images.sort();
    assert_eq!(images, ["nginx:1.25", "redis:7"]);
    assert!(children.iter().all(|c| c.name_any().starts_with("warm-")));
    eventually("the list is deleted after its TTL", WAIT, || {
        let lists = lists.clone();
        async move { lists.get_opt("warm").await.unwrap().is_none().then_some(()) }
    })
    .await;
    shutdown.cancel();
    cluster.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}
