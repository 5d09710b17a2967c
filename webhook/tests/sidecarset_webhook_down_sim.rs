//! A SidecarSet created while kruise-webhook is down is still enforced (issue 26, item 3):
//! kruise-sidecarset (in-process) admits it only after kruise-webhook's pod configuration
//! holds a fail-closed entry for its scope, so a pod it selects is refused rather than
//! created without the sidecar, while other pods are still created; with kruise-webhook
//! back, the pod gets its sidecar. With kruise-sidecarset down instead, no SidecarSet can be
//! created, so none is left unenforced. On kruise-sim, or the real API server of
//! `KRUISE_TEST_KUBECONFIG`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kruise_testkit as support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_sidecarset::api::v1beta1::SidecarSet;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

mod sidecarset_binaries;
use sidecarset_binaries::WEBHOOK_BIN as BIN;
const WAIT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_sidecar_set_created_while_kruise_webhook_is_down_is_enforced() {
    let binary = kruise_sidecarset::binary::binary().unwrap();
    let (cluster, client) = support::cluster_with_crds(1, binary.crd_definitions()).await;
    let mut binaries = sidecarset_binaries::start(&cluster, &[]).await;
    let (kubeconfig, webhook_port) = (cluster.kubeconfig_path(), binaries.webhook_port);

    binaries.webhook.stop(webhook_port).await;
    let sets: Api<SidecarSet> = Api::all(client.clone());
    let set: SidecarSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "for-x"},
        "spec": {"selector": {"matchLabels": {"app": "x"}},
                 "containers": [{"name": "sidecar1", "image": "centos:6.7",
                                 "command": ["sleep", "999d"]}]}
    }))
    .unwrap();
    sets.create(&PostParams::default(), &set).await.unwrap();

    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    // kruise-sidecarset admitted the SidecarSet once the fail-closed entry was written;
    // kube-apiserver calls it once its own watch of the configuration has it, a moment
    // later (kruise-sim at once). Pods created in that moment pass unenforced: on kruise-sim
    // there must be none; on a real API server they are deleted and counted.
    let attempts = std::sync::atomic::AtomicUsize::new(0);
    let err = support::eventually("a selected pod refused", WAIT, || async {
        let n = attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let name = format!("x-{n}");
        match pods
            .create(&PostParams::default(), &kruise_testkit::app_pod(&name, "x"))
            .await
        {
            Err(e) => Some(e.to_string()),
            Ok(_) => {
                pods.delete(&name, &DeleteParams::default()).await.unwrap();
                None
            }
        }
    })
    .await;
    assert!(err.contains("failed calling webhook"), "{err}");
    let unenforced = attempts.into_inner() - 1;
    if cluster.sim().is_some() {
        assert_eq!(
            unenforced, 0,
            "a pod the SidecarSet selects must not start without its sidecar"
        );
    } else if unenforced > 0 {
        eprintln!("{unenforced} pod(s) created before kube-apiserver saw the fail-closed entry");
    }
    // A pod no SidecarSet selects is created (K#634).
    pods.create(&PostParams::default(), &kruise_testkit::app_pod("y-1", "y"))
        .await
        .unwrap();

    // kruise-webhook back: the pod is created with its sidecar.
    binaries.webhook = support::spawn_replica(BIN, &kubeconfig, webhook_port, &[], &[]);
    let created = support::eventually("the pod created with its sidecar", WAIT, || async {
        pods.create(&PostParams::default(), &kruise_testkit::app_pod("x-2", "x"))
            .await
            .ok()
    })
    .await;
    let containers = sidecarset_binaries::container_names(&created);
    assert!(
        containers.contains(&"sidecar1".to_string()),
        "{containers:?}"
    );
    binaries.stop().await;
    cluster.shutdown().await;
}

/// kruise-webhook restarted while its first list of SidecarSets answers late (kruise-sim
/// delays it 8 s): a pod the SidecarSet selects is refused until the replica knows the
/// SidecarSets, never created without its sidecar, then created with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_only_a_restarted_kruise_webhook_injects_nothing_before_it_knows_the_sidecar_sets() {
    let binary = kruise_sidecarset::binary::binary().unwrap();
    let (cluster, client) = support::cluster_with_crds(1, binary.crd_definitions()).await;
    let sim = cluster
        .sim()
        .expect("the list latency is injected by kruise-sim");
    let mut binaries = sidecarset_binaries::start(&cluster, &[]).await;
    let (kubeconfig, webhook_port) = (cluster.kubeconfig_path(), binaries.webhook_port);
    let sets: Api<SidecarSet> = Api::all(client.clone());
    let set: SidecarSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "for-x"},
        "spec": {"selector": {"matchLabels": {"app": "x"}},
                 "containers": [{"name": "sidecar1", "image": "centos:6.7"}]}
    }))
    .unwrap();
    sets.create(&PostParams::default(), &set).await.unwrap();

    binaries.webhook.stop(webhook_port).await;
    sim.faults().add(
        kruise_sim::FaultRule::new()
            .verb("list")
            .resource("sidecarsets")
            .latency(Duration::from_secs(8))
            .times(1),
    );
    binaries.webhook = support::spawn_replica(BIN, &kubeconfig, webhook_port, &[], &[]);
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let attempts = std::sync::atomic::AtomicUsize::new(0);
    let refusals = std::sync::Mutex::new(Vec::new());
    let created = support::eventually("the pod created with its sidecar", WAIT, || async {
        let n = attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let name = format!("x-{n}");
        match pods
            .create(&PostParams::default(), &kruise_testkit::app_pod(&name, "x"))
            .await
        {
            Ok(pod) => Some(pod),
            Err(e) => {
                refusals.lock().unwrap().push(e.to_string());
                None
            }
        }
    })
    .await;
    let containers = sidecarset_binaries::container_names(&created);
    assert_eq!(
        containers,
        ["sidecar1", "main"],
        "a pod created before kruise-webhook knew the SidecarSets"
    );
    let refusals = refusals.into_inner().unwrap();
    assert!(
        refusals
            .iter()
            .any(|r| r.contains("the SidecarSets and namespaces are not known yet")),
        "{refusals:?}"
    );
    binaries.stop().await;
    cluster.shutdown().await;
}
