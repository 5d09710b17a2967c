//! The NodeImage and ImagePullJob controllers against kruise-sim, or the real API server of
//! `KRUISE_TEST_KUBECONFIG` with kruise-sim's nodes, with a stand-in agent
//! (this test's loop answers each NodeImage tag version the way the node agent does).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Node, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_imagepull::api::v1beta1::{ImagePullJob, NodeImage};
use kruise_imagepull::api::{
    ImagePullPhase, ImageTagStatus, NodeImageStatus, SOURCE_SECRET_UID_LABEL,
};
use kruise_imagepull::controller::{self, Settings};
use kruise_runtime::{Metrics, Readiness, RunOptions};
use kruise_testkit::{WAIT, eventually};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::json;
use tokio_util::sync::CancellationToken;

struct Controllers {
    shutdown: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Controllers {
    fn start(client: &Client) -> Self {
        let settings = Settings {
            creation_delay: Duration::ZERO,
            ..Settings::default()
        };
        let client = kruise_testkit::controller_client(client, "imagepull");
        let shutdown = CancellationToken::new();
        let metrics = Metrics::new();
        let opts = |name: &str| RunOptions {
            name: name.into(),
            concurrency: 3,
            metrics: metrics.clone(),
            readiness: Readiness::default(),
            shutdown: shutdown.clone(),
            leadership: Default::default(),
        };
        let nodeimage = {
            let (client, settings, opts) = (
                client.clone(),
                settings.clone(),
                opts(controller::NODEIMAGE_CONTROLLER),
            );
            tokio::spawn(async move { controller::nodeimage::run(client, settings, opts).await })
        };
        let job = {
            let (client, opts) = (client.clone(), opts(controller::IMAGEPULLJOB_CONTROLLER));
            tokio::spawn(async move { controller::imagepulljob::run(client, settings, opts).await })
        };
        Self {
            shutdown,
            tasks: vec![nodeimage, job],
        }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        for task in self.tasks {
            tokio::time::timeout(Duration::from_secs(30), task)
                .await
                .unwrap()
                .unwrap();
        }
    }
}

/// Answers every unanswered tag version `delay` after first seeing it, Succeeded; records
/// the most NodeImages seen pulling at once.
struct FakeAgent {
    shutdown: CancellationToken,
    most_pulling: Arc<AtomicUsize>,
}

impl FakeAgent {
    fn start(client: &Client, delay: Duration) -> Self {
        let shutdown = CancellationToken::new();
        let most_pulling = Arc::new(AtomicUsize::new(0));
        let (client, stop, most) = (client.clone(), shutdown.clone(), most_pulling.clone());
        tokio::spawn(async move {
            let api: Api<NodeImage> = Api::all(client);
            let mut first_seen: BTreeMap<(String, String, String, i64), tokio::time::Instant> =
                BTreeMap::new();
            while !stop.is_cancelled() {
                let list = api.list(&Default::default()).await.unwrap();
                let mut pulling = 0;
                for ni in list.items {
                    let mut status = ni.status.clone().unwrap_or_default();
                    let mut changed = false;
                    let mut waiting_here = false;
                    for (image, spec) in &ni.spec.images {
                        for tag in &spec.tags {
                            let answered = status.image_statuses.get(image).is_some_and(|s| {
                                s.tags
                                    .iter()
                                    .any(|t| t.tag == tag.tag && t.version == tag.version)
                            });
                            if answered {
                                continue;
                            }
                            waiting_here = true;
                            let key = (ni.name_any(), image.clone(), tag.tag.clone(), tag.version);
                            let seen = *first_seen
                                .entry(key)
                                .or_insert_with(tokio::time::Instant::now);
                            if seen.elapsed() >= delay {
                                answer(&mut status, image, &tag.tag, tag.version);
                                changed = true;
                            }
                        }
                    }
                    if waiting_here {
                        pulling += 1;
                    }
                    if changed {
                        let patch = json!({"status": status});
                        let _ = api
                            .patch_status(
                                &ni.name_any(),
                                &PatchParams::default(),
                                &Patch::Merge(patch),
                            )
                            .await;
                    }
                }
                most.fetch_max(pulling, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Self {
            shutdown,
            most_pulling,
        }
    }
}

impl Drop for FakeAgent {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

fn answer(status: &mut NodeImageStatus, image: &str, tag: &str, version: i64) {
    let now = Time(jiff::Timestamp::now());
    let tags = &mut status.image_statuses.entry(image.into()).or_default().tags;
    tags.retain(|t| t.tag != tag);
    tags.push(ImageTagStatus {
        tag: tag.into(),
        phase: Some(ImagePullPhase::Succeeded),
        progress: 100,
        start_time: Some(now.clone()),
        completion_time: Some(now),
        version,
        image_id: format!("{image}@sha256:{:064}", 0),
        message: String::new(),
    });
}

async fn label_nodes(client: &Client, nodes: &[&str]) {
    let api: Api<Node> = Api::all(client.clone());
    for node in nodes {
        let patch = json!({"metadata": {"labels": {"pool": "pre"}}});
        api.patch(node, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
    }
}

async fn job(client: &Client, name: &str) -> Option<ImagePullJob> {
    Api::<ImagePullJob>::default_namespaced(client.clone())
        .get_opt(name)
        .await
        .unwrap()
}

async fn node_images(client: &Client) -> Vec<NodeImage> {
    Api::<NodeImage>::all(client.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items
}

/// Waits for the job `name` to complete.
async fn completed(client: &Client, name: &str) -> ImagePullJob {
    eventually(&format!("{name} completes"), WAIT, || {
        let client = client.clone();
        async move {
            job(&client, name).await.filter(|j| {
                j.status
                    .as_ref()
                    .is_some_and(|s| s.completion_time.is_some())
            })
        }
    })
    .await
}

const PROTECTION: &str = "apps.kruise.io/deletion-protection";

/// Waits for one NodeImage per node, the labelled nodes' labels mirrored (a job created
/// before would see fewer nodes, and rightly complete on those).
async fn wait_for_labelled_node_images(client: &Client) {
    eventually("five NodeImages, labels mirrored", WAIT, || {
        let client = client.clone();
        async move {
            let all = node_images(&client).await;
            let labelled = all
                .iter()
                .filter(|n| n.labels().get("pool").map(String::as_str) == Some("pre"))
                .count();
            (all.len() == 5 && labelled == 3).then_some(())
        }
    })
    .await;
}

const LABELLED: [&str; 3] = ["sim-node-0", "sim-node-2", "sim-node-4"];

fn pull_job(name: &str, ttl: Option<i32>) -> ImagePullJob {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "ImagePullJob",
        "metadata": {"name": name},
        "spec": {"image": "nginx:1.25", "parallelism": 1,
                 "selector": {"matchLabels": {"pool": "pre"}},
                 "completionPolicy": {"type": "Always", "ttlSecondsAfterFinished": ttl}},
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_on_three_of_five_nodes_by_label_completes_one_at_a_time_then_its_ttl_cleans_it() {
    let (cluster, client) =
        kruise_testkit::cluster_with_crds(5, &kruise_imagepull::api::crd::crds().unwrap()).await;
    let controllers = Controllers::start(&client);
    label_nodes(&client, &LABELLED).await;
    // One NodeImage per node, labelled as the node.
    wait_for_labelled_node_images(&client).await;
    let agent = FakeAgent::start(&client, Duration::from_millis(300));
    Api::<ImagePullJob>::default_namespaced(client.clone())
        .create(&PostParams::default(), &pull_job("warm", Some(3)))
        .await
        .unwrap();
    // Completed, then the finalizer released (the reconcile after the completion).
    let done = eventually("the job completes and drops its finalizer", WAIT, || {
        let client = client.clone();
        async move {
            job(&client, "warm").await.filter(|j| {
                j.status
                    .as_ref()
                    .is_some_and(|s| s.completion_time.is_some())
                    && !j.finalizers().iter().any(|f| f == PROTECTION)
            })
        }
    })
    .await;
    let status = done.status.clone().unwrap();
    assert_eq!(
        (
            status.desired,
            status.succeeded,
            status.failed,
            status.active
        ),
        (3, 3, 0, 0)
    );
    assert_eq!(status.message, "job has completed");
    assert!(
        agent.most_pulling.load(Ordering::SeqCst) <= 1,
        "parallelism 1 held"
    );
    // The three labelled nodes' NodeImages carry the tag, answered; the others none.
    for ni in node_images(&client).await {
        let has = ni
            .spec
            .images
            .get("nginx")
            .is_some_and(|i| i.tags.iter().any(|t| t.tag == "1.25"));
        assert_eq!(
            has,
            LABELLED.contains(&ni.name_any().as_str()),
            "{}",
            ni.name_any()
        );
        if has {
            let status = ni.status.unwrap();
            assert_eq!(
                status.image_statuses["nginx"].tags[0].phase,
                Some(ImagePullPhase::Succeeded)
            );
        }
    }
    // After its TTL the job is deleted, and its tags leave the NodeImages with it.
    eventually("the job is deleted after its TTL", WAIT, || {
        let client = client.clone();
        async move { job(&client, "warm").await.is_none().then_some(()) }
    })
    .await;
    eventually("the tag leaves every NodeImage", WAIT, || {
        let client = client.clone();
        async move {
            node_images(&client)
                .await
                .iter()
                .all(|n| n.spec.images.is_empty())
                .then_some(())
        }
    })
    .await;
    drop(agent);
    controllers.stop().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_restart_mid_job_neither_repeats_nor_loses_a_node() {
    let (cluster, client) =
        kruise_testkit::cluster_with_crds(5, &kruise_imagepull::api::crd::crds().unwrap()).await;
    let controllers = Controllers::start(&client);
    label_nodes(&client, &LABELLED).await;
    wait_for_labelled_node_images(&client).await;
    let agent = FakeAgent::start(&client, Duration::from_millis(800));
    Api::<ImagePullJob>::default_namespaced(client.clone())
        .create(&PostParams::default(), &pull_job("restart", None))
        .await
        .unwrap();
    eventually("the first node answered", WAIT, || {
        let client = client.clone();
        async move {
            job(&client, "restart")
                .await
                .filter(|j| j.status.as_ref().is_some_and(|s| s.succeeded >= 1))
        }
    })
    .await;
    controllers.stop().await;
    let controllers = Controllers::start(&client);
    let done = completed(&client, "restart").await;
    let status = done.status.unwrap();
    assert_eq!((status.desired, status.succeeded, status.failed), (3, 3, 0));
    assert!(agent.most_pulling.load(Ordering::SeqCst) <= 1);
    // Each node got the tag once: no version was bumped by a second hand-out.
    for ni in node_images(&client).await {
        if let Some(image) = ni.spec.images.get("nginx") {
            assert_eq!(
                image.tags.iter().map(|t| t.version).collect::<Vec<_>>(),
                [0],
                "{}",
                ni.name_any()
            );
        }
    }
    // Without a TTL the completed job and its tags stay.
    assert!(job(&client, "restart").await.is_some());
    drop(agent);
    controllers.stop().await;
    cluster.shutdown().await;
}

/// OpenKruise's e2e "pull image with secret", where no install created
/// `kruise-daemon-config`: the job creates the namespace with its first copy, the copy is
/// labelled with its source's UID (how v1.8.3's clients find it), the NodeImages name the
/// copy, and the job completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_with_a_pull_secret_copies_it_into_a_namespace_it_creates_and_completes() {
    let (cluster, client) =
        kruise_testkit::cluster_with_crds(5, &kruise_imagepull::api::crd::crds().unwrap()).await;
    let agent_namespace = controller::DEFAULT_AGENT_NAMESPACE;
    // On a shared real cluster an earlier run may have left it; kruise-sim starts without.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let created_here = namespaces.get_opt(agent_namespace).await.unwrap().is_none();
    let controllers = Controllers::start(&client);
    label_nodes(&client, &LABELLED).await;
    wait_for_labelled_node_images(&client).await;
    let source: Secret = serde_json::from_value(json!({
        "metadata": {"name": "registry-auth"},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": "eyJhdXRocyI6e319"},
    }))
    .unwrap();
    let source = Api::<Secret>::default_namespaced(client.clone())
        .create(&PostParams::default(), &source)
        .await
        .unwrap();
    let source_uid = source.uid().unwrap();
    let mut pull = pull_job("with-secret", None);
    pull.spec.template.pull_secrets = vec!["registry-auth".into()];
    Api::<ImagePullJob>::default_namespaced(client.clone())
        .create(&PostParams::default(), &pull)
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), agent_namespace);
    let by_uid = format!("{SOURCE_SECRET_UID_LABEL}={source_uid}");
    let copy = eventually("a copy found by its source's UID", WAIT, || {
        let (secrets, by_uid) = (secrets.clone(), by_uid.clone());
        async move {
            let list = secrets
                .list(&ListParams::default().labels(&by_uid))
                .await
                .ok()?;
            list.items.into_iter().next()
        }
    })
    .await;
    assert_eq!(copy.data, source.data);
    assert_eq!(copy.type_, source.type_);
    if created_here {
        assert!(namespaces.get_opt(agent_namespace).await.unwrap().is_some());
    }
    let named_by_a_node_image = node_images(&client).await.iter().any(|ni| {
        ni.spec.images.get("nginx").is_some_and(|image| {
            image
                .pull_secrets
                .iter()
                .any(|r| r.namespace == agent_namespace && r.name == copy.name_any())
        })
    });
    assert!(named_by_a_node_image, "a NodeImage names the copy");
    // A changed source is copied at once, though nothing else about the job changes (no
    // node has answered yet): OpenKruise's e2e gives it 10 s.
    let changed =
        json!({"data": {".dockerconfigjson": "eyJhdXRocyI6eyJleGFtcGxlLmNvbSI6e319fQ=="}});
    let source = Api::<Secret>::default_namespaced(client.clone())
        .patch(
            "registry-auth",
            &PatchParams::default(),
            &Patch::Merge(&changed),
        )
        .await
        .unwrap();
    eventually(
        "the copy follows its source",
        Duration::from_secs(10),
        || {
            let (secrets, copy, want) = (secrets.clone(), copy.name_any(), source.data.clone());
            async move { (secrets.get(&copy).await.ok()?.data == want).then_some(()) }
        },
    )
    .await;
    let agent = FakeAgent::start(&client, Duration::from_millis(1500));
    let done = completed(&client, "with-secret").await;
    let status = done.status.unwrap();
    assert_eq!((status.desired, status.succeeded, status.failed), (3, 3, 0));
    drop(agent);
    controllers.stop().await;
    cluster.shutdown().await;
}
