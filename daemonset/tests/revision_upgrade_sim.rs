//! Upgrade safety against kruise-sim: a DaemonSet whose ControllerRevision an earlier
//! kruise-rs stored (the template as the user wrote it, before revision data was written as
//! Go encodes it) keeps that revision and its pods when the controller restarts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kruise_daemonset::api::v1beta1::DaemonSet;
use kruise_daemonset::controller::{self, Settings};
use kruise_runtime::{Metrics, Readiness, RunOptions};
use kruise_testkit::{WAIT, eventually};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::json;
use tokio_util::sync::CancellationToken;

struct Running {
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    fn start(client: &Client) -> Self {
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
            namespace: Some("default".into()),
            ..Settings::default()
        };
        let client = kruise_testkit::controller_client(client, "daemonset");
        let task = tokio::spawn(async move { controller::run(client, settings, opts).await });
        Self { shutdown, task }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .unwrap()
            .unwrap();
    }
}

/// Waits until the controller has written a status for the current generation that
/// satisfies `check`, and returns the DaemonSet.
async fn wait_status(
    client: &Client,
    what: &str,
    check: impl Fn(&kruise_daemonset::api::v1beta1::DaemonSetStatus) -> bool,
) -> DaemonSet {
    let check = &check;
    eventually(what, WAIT, || {
        let client = client.clone();
        async move {
            let ds = Api::<DaemonSet>::namespaced(client, "default")
                .get("agent")
                .await
                .ok()?;
            let status = ds.status.as_ref()?;
            (Some(status.observed_generation) == ds.metadata.generation && check(status))
                .then_some(ds.clone())
        }
    })
    .await
}

/// (name, uid, controller-revision-hash, image) of each live pod.
async fn pods(client: &Client) -> BTreeSet<(String, String, String, String)> {
    Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels("app=agent"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let hash = p
                .labels()
                .get("controller-revision-hash")
                .cloned()
                .unwrap_or_default();
            let image = p
                .spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.clone())
                .unwrap_or_default();
            (p.name_any(), p.uid().unwrap_or_default(), hash, image)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_stored_before_go_encoding_keeps_its_pods_across_a_controller_restart() {
    let (_sim, client) =
        kruise_testkit::sim_with_crds(2, &[kruise_daemonset::api::crd::crd().unwrap()]).await;
    // Forms an earlier kruise-rs stored verbatim and Go writes otherwise.
    let ds: DaemonSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
            "metadata": {"labels": {"app": "agent"}},
            "spec": {"containers": [{"name": "main", "image": "nginx:1",
                "resources": {"requests": {"cpu": "0.5", "memory": "1024Mi"}},
                "livenessProbe": {"exec": {"command": ["true"]}, "initialDelaySeconds": 0}}]}}}
    }))
    .unwrap();
    let sets = Api::<DaemonSet>::namespaced(client.clone(), "default");
    sets.create(&PostParams::default(), &ds).await.unwrap();
    let running = Running::start(&client);
    wait_status(&client, "two pods available", |s| s.number_available == 2).await;
    running.stop().await;

    // Put the revision back as the earlier kruise-rs wrote it: same name, labels, owner and
    // number, data the template as the user wrote it.
    let revisions = Api::<ControllerRevision>::namespaced(client.clone(), "default");
    let listed = revisions.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let mut earlier = listed[0].clone();
    let stored_set = sets.get("agent").await.unwrap();
    let template = serde_json::to_value(&stored_set.spec.template).unwrap();
    let earlier_data = kruise_core::revision::template_revision_data(&template);
    assert_ne!(
        earlier.data.as_ref().map(|d| &d.0),
        Some(&earlier_data),
        "the earlier encoding must differ from today's"
    );
    revisions
        .delete(&earlier.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    earlier.metadata.resource_version = None;
    earlier.metadata.uid = None;
    earlier.metadata.creation_timestamp = None;
    earlier.data = Some(RawExtension(earlier_data.clone()));
    revisions
        .create(&PostParams::default(), &earlier)
        .await
        .unwrap();
    let before = pods(&client).await;
    assert_eq!(before.len(), 2, "{before:?}");
    // A stale status, so the restarted controller's next status write shows it reconciled.
    sets.patch_status(
        "agent",
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": {"observedGeneration": 0}})),
    )
    .await
    .unwrap();

    let running = Running::start(&client);
    let after_restart = wait_status(&client, "status written after the restart", |s| {
        s.number_available == 2 && s.updated_number_scheduled == 2
    })
    .await;
    let status = after_restart.status.unwrap();
    assert_eq!(status.collision_count.unwrap_or(0), 0, "no collision");
    let listed = revisions.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(listed.len(), 1, "no new revision: {listed:?}");
    assert_eq!(listed[0].name_any(), earlier.name_any());
    assert_eq!(
        listed[0].data.as_ref().map(|d| &d.0),
        Some(&earlier_data),
        "the stored data is never rewritten"
    );
    assert_eq!(
        pods(&client).await,
        before,
        "no pod recreated or relabelled"
    );
    running.stop().await;
}
