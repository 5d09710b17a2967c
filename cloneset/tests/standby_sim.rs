//! Two `kruise-cloneset` replicas in-process against kruise-sim (or the real API server of
//! `KRUISE_TEST_KUBECONFIG`, through the testkit's counting proxy): the standby fills its caches
//! at once and keeps them warm, so when the leader steps down it takes over without listing
//! anything again — it only acquires the lease and goes on from its watches.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kruise_cloneset::api::v1beta1::CloneSet;
use kruise_sim::Counters;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{WAIT, cloneset, cluster_with_crd, eventually, pods_of};
use tokio_util::sync::CancellationToken;

/// What the controller watches.
const WATCHED: &[&str] = &[
    "clonesets",
    "pods",
    "persistentvolumeclaims",
    "controllerrevisions",
];

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts a replica with a short lease; cancel the token to stop it (it releases the lease).
fn start_replica(
    kubeconfig: &std::path::Path,
    namespace: &str,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let argv: Vec<String> = [
        "kruise-cloneset",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--namespace",
        namespace,
        "--leader-elect-namespace",
        namespace,
        "--leader-elect-lease-duration",
        "2s",
        "--leader-elect-renew-deadline",
        "1s",
        "--leader-elect-retry-period",
        "200ms",
        "--webhook-host",
        "127.0.0.1",
        "--webhook-bind-address",
        "127.0.0.1",
        "--webhook-port",
        &free_port().to_string(),
        "--webhook-namespace",
        namespace,
        "--metrics-addr",
        "127.0.0.1:0",
        "--health-addr",
        "127.0.0.1:0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let stop = CancellationToken::new();
    let token = stop.clone();
    let binary = kruise_cloneset::binary::binary().unwrap();
    let task = tokio::spawn(async move {
        binary.run_argv(argv, token).await.unwrap();
    });
    (stop, task)
}

/// The controller replicas' list requests per watched kind (the test's own not counted).
fn lists(counters: &Counters) -> Vec<(String, u64)> {
    let snapshot = counters.snapshot();
    WATCHED
        .iter()
        .map(|resource| {
            let n = snapshot
                .iter()
                .filter(|(k, _)| {
                    k.verb == "list"
                        && k.resource == *resource
                        && k.user_agent.starts_with("kruise-cloneset/")
                })
                .map(|(_, n)| n)
                .sum();
            (resource.to_string(), n)
        })
        .collect()
}

#[tokio::test]
async fn a_standby_takes_over_without_listing_again() {
    let (cluster, client) = cluster_with_crd().await;
    let kubeconfig = cluster.kubeconfig_path();
    let namespace = client.default_namespace();
    let clonesets: Api<CloneSet> = Api::default_namespaced(client.clone());
    clonesets
        .create(
            &PostParams::default(),
            &cloneset("web", 2, "nginx:1", json!({})),
        )
        .await
        .unwrap();
    let (leader, leader_task) = start_replica(&kubeconfig, namespace);
    eventually("the leader's pods", WAIT, || async {
        (pods_of(&client, "web").await.len() == 2).then_some(())
    })
    .await;
    let (standby, standby_task) = start_replica(&kubeconfig, namespace);
    // Both replicas listed every watched kind once: the standby's caches are warm.
    eventually("the standby's first lists", WAIT, || async {
        lists(cluster.counters())
            .iter()
            .all(|(_, n)| *n >= 2)
            .then_some(())
    })
    .await;
    let before = lists(cluster.counters());
    assert!(before.iter().all(|(_, n)| *n == 2), "{before:?}");

    leader.cancel();
    tokio::time::timeout(Duration::from_secs(30), leader_task)
        .await
        .unwrap()
        .unwrap();
    // Each replica serves admission on a port of its own here (in a cluster both are behind
    // one Service), and the configurations call whichever replica published last, maybe the
    // one just stopped: removed, they are published again by the standby's repair.
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let _ = mutating
        .delete("kruise-cloneset-mutating", &DeleteParams::default())
        .await;
    let _ = validating
        .delete("kruise-cloneset-validating", &DeleteParams::default())
        .await;
    eventually(
        "the CloneSet scaled through the standby's webhooks",
        WAIT,
        || async {
            clonesets
                .patch(
                    "web",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"replicas": 3}})),
                )
                .await
                .ok()
        },
    )
    .await;
    eventually("the new leader scaling up", WAIT, || async {
        (pods_of(&client, "web").await.len() == 3).then_some(())
    })
    .await;
    eventually("the status the new leader wrote", WAIT, || async {
        let cs = clonesets.get("web").await.ok()?;
        (cs.status?.replicas == 3).then_some(())
    })
    .await;
    assert_eq!(
        lists(cluster.counters()),
        before,
        "the new leader listed again"
    );

    standby.cancel();
    tokio::time::timeout(Duration::from_secs(30), standby_task)
        .await
        .unwrap()
        .unwrap();
    cluster.shutdown().await;
}
