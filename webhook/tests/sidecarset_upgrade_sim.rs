//! SidecarSet end to end on kruise-sim (or the real API server of `KRUISE_TEST_KUBECONFIG`
//! with kruise-sim's nodes): kruise-webhook (a real HTTPS webhook) injects the
//! sidecar at pod creation, kruise-sidecarset (in-process: CRD webhooks and controller)
//! upgrades it in place when only the image changes, honouring maxUnavailable, partition,
//! paused and a canary selector; the scheduler and the simulated kubelet run the pods.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kruise_testkit as support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::core::v1::Pod;
use kruise_sidecarset::api::v1beta1::SidecarSet;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt as _};
use serde_json::json;
use tokio_util::sync::CancellationToken;

mod sidecarset_binaries;

const WAIT: Duration = Duration::from_secs(60);

struct Cluster {
    cluster: support::TestCluster,
    client: Client,
    binaries: sidecarset_binaries::Binaries,
}

/// Two nodes, kruise-sidecarset in-process, kruise-webhook as a process. kruise-sidecarset
/// keeps its revisions in `kruise-system` (no `POD_NAMESPACE`), created when missing.
async fn cluster() -> Cluster {
    let binary = kruise_sidecarset::binary::binary().unwrap();
    let (cluster, client) = support::cluster_with_crds(2, binary.crd_definitions()).await;
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "kruise-system"}})).unwrap();
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(e) => panic!("creating kruise-system: {e}"),
    }
    let binaries =
        sidecarset_binaries::start(&cluster, &["--webhook-cert-check-interval", "1s"]).await;
    Cluster {
        cluster,
        client,
        binaries,
    }
}

impl Cluster {
    async fn shutdown(self) {
        self.binaries.stop().await;
        self.cluster.shutdown().await;
    }
}

/// Creates `set`, defaulted by kruise-sidecarset (live since `sidecarset_binaries::start`).
async fn create_defaulted(sets: &Api<SidecarSet>, set: &SidecarSet) {
    let created = sets.create(&PostParams::default(), set).await.unwrap();
    assert!(
        created
            .annotations()
            .contains_key("kruise.io/sidecarset-hash"),
        "{:?}",
        created.metadata
    );
}

fn pod(name: &str, labels: serde_json::Value) -> Pod {
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}}))
    .unwrap()
}

fn container_image(pod: &Pod, name: &str) -> Option<String> {
    pod.spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == name)?
        .image
        .clone()
}

fn restarts(pod: &Pod, name: &str) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == name))
        .map(|c| c.restart_count)
        .unwrap_or(-1)
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn status(sets: &Api<SidecarSet>, name: &str) -> (i64, i32, i32, i32, i32) {
    let s = sets.get(name).await.unwrap();
    let st = s.status.clone().unwrap_or_default();
    (
        s.metadata.generation.unwrap_or(0) - st.observed_generation,
        st.matched_pods,
        st.updated_pods,
        st.ready_pods,
        st.updated_ready_pods,
    )
}

/// Waits until the SidecarSet observed its generation and reports these counts
/// (matched, updated, ready).
async fn wait_status(sets: &Api<SidecarSet>, name: &str, want: (i32, i32, i32)) {
    support::eventually(&format!("{name} status {want:?}"), WAIT, || async {
        let (lag, m, u, r, _) = status(sets, name).await;
        (lag == 0 && (m, u, r) == want).then_some(())
    })
    .await;
}

async fn set_spec(sets: &Api<SidecarSet>, name: &str, spec: serde_json::Value) {
    sets.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": spec })),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn sidecar_upgrades_in_place_within_the_update_strategy() {
    let c = cluster().await;
    let sets: Api<SidecarSet> = Api::all(c.client.clone());
    let set: SidecarSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "test-sidecarset"},
        "spec": {"selector": {"matchLabels": {"app": "nginx"}},
                 "containers": [{"name": "sidecar1", "image": "busybox:1.34",
                                 "command": ["sleep", "999d"]}]}
    }))
    .unwrap();
    create_defaulted(&sets, &set).await;

    // Pods are injected once kruise-webhook's entry for app=nginx is live.
    let pods: Api<Pod> = Api::default_namespaced(c.client.clone());
    for i in 0..4 {
        let name = format!("nginx-{i}");
        let labels = if i == 3 {
            json!({"app": "nginx", "canary": "true"})
        } else {
            json!({"app": "nginx"})
        };
        support::eventually(&format!("{name} created with sidecar1"), WAIT, || async {
            let created = pods
                .create(&PostParams::default(), &pod(&name, labels.clone()))
                .await
                .ok()?;
            if container_image(&created, "sidecar1").is_some() {
                return Some(());
            }
            pods.delete(&name, &Default::default()).await.ok();
            support::eventually("pod gone", WAIT, || async {
                pods.get_opt(&name).await.ok()?.is_none().then_some(())
            })
            .await;
            None
        })
        .await;
    }
    wait_status(&sets, "test-sidecarset", (4, 4, 4)).await;
    let before: BTreeMap<String, Pod> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| (p.name_any(), p))
        .collect();

    // Only the image changes: every pod is upgraded in place, one at a time
    // (maxUnavailable defaults to 1).
    let max_unready = Arc::new(AtomicUsize::new(0));
    let watching = CancellationToken::new();
    let sampler = {
        let pods = pods.clone();
        let max_unready = max_unready.clone();
        let watching = watching.clone();
        tokio::spawn(async move {
            while !watching.is_cancelled() {
                if let Ok(list) = pods.list(&ListParams::default()).await {
                    let unready = list.items.iter().filter(|p| !is_ready(p)).count();
                    max_unready.fetch_max(unready, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    set_spec(
        &sets,
        "test-sidecarset",
        json!({"containers": [{"name": "sidecar1", "image": "busybox:1.35", "command": ["sleep", "999d"]}]}),
    )
    .await;
    wait_status(&sets, "test-sidecarset", (4, 4, 4)).await;
    watching.cancel();
    sampler.await.unwrap();
    assert!(
        max_unready.load(Ordering::SeqCst) >= 1,
        "restarting sidecars make their pods unready for a while"
    );
    assert!(
        max_unready.load(Ordering::SeqCst) <= 1,
        "at most maxUnavailable (1) pod unready at once, saw {}",
        max_unready.load(Ordering::SeqCst)
    );
    for p in pods.list(&ListParams::default()).await.unwrap().items {
        let old = &before[&p.name_any()];
        assert_eq!(p.uid(), old.uid(), "{} kept its uid", p.name_any());
        assert_eq!(
            container_image(&p, "sidecar1").as_deref(),
            Some("busybox:1.35")
        );
        assert_eq!(
            restarts(&p, "sidecar1"),
            restarts(old, "sidecar1") + 1,
            "sidecar restarted once"
        );
        assert_eq!(
            restarts(&p, "main"),
            restarts(old, "main"),
            "app container untouched"
        );
        let state = p.annotations()["kruise.io/sidecarset-inplace-update-state"].clone();
        assert!(state.contains("test-sidecarset"), "{state}");
        let cond = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "SidecarSetUpgradable"))
            .cloned()
            .unwrap();
        assert_eq!(cond.status, "True");
    }

    // paused: a new image goes nowhere.
    set_spec(
        &sets,
        "test-sidecarset",
        json!({"updateStrategy": {"paused": true},
               "containers": [{"name": "sidecar1", "image": "busybox:1.36", "command": ["sleep", "999d"]}]}),
    )
    .await;
    wait_status(&sets, "test-sidecarset", (4, 0, 4)).await;
    let on_136 = |list: &[Pod]| -> Vec<String> {
        list.iter()
            .filter(|p| container_image(p, "sidecar1").as_deref() == Some("busybox:1.36"))
            .map(|p| p.name_any())
            .collect()
    };
    assert!(on_136(&pods.list(&Default::default()).await.unwrap().items).is_empty());

    // A canary selector: unpaused, only canary=true pods are upgraded.
    set_spec(
        &sets,
        "test-sidecarset",
        json!({"updateStrategy": {"paused": false, "selector": {"matchLabels": {"canary": "true"}}}}),
    )
    .await;
    wait_status(&sets, "test-sidecarset", (4, 1, 4)).await;
    assert_eq!(
        on_136(&pods.list(&Default::default()).await.unwrap().items),
        vec!["nginx-3".to_string()]
    );

    // partition 2 of 4, selector removed: exactly two pods on the new image.
    set_spec(
        &sets,
        "test-sidecarset",
        json!({"updateStrategy": {"selector": null, "partition": 2}}),
    )
    .await;
    wait_status(&sets, "test-sidecarset", (4, 2, 4)).await;
    assert_eq!(
        on_136(&pods.list(&Default::default()).await.unwrap().items).len(),
        2
    );

    // The partition lifted: the rest follow.
    set_spec(
        &sets,
        "test-sidecarset",
        json!({"updateStrategy": {"partition": null}}),
    )
    .await;
    wait_status(&sets, "test-sidecarset", (4, 4, 4)).await;
    c.shutdown().await;
}

#[tokio::test]
async fn a_change_beyond_images_is_not_applied_and_marks_pods_not_upgradable() {
    let c = cluster().await;
    let sets: Api<SidecarSet> = Api::all(c.client.clone());
    let set: SidecarSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "cmd-change"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "containers": [{"name": "sidecar1", "image": "busybox:1.34", "command": ["sleep", "1d"]}]}
    }))
    .unwrap();
    create_defaulted(&sets, &set).await;
    let pods: Api<Pod> = Api::default_namespaced(c.client.clone());
    support::eventually("web-0 created with sidecar1", WAIT, || async {
        let created = pods
            .create(&PostParams::default(), &pod("web-0", json!({"app": "web"})))
            .await
            .ok()?;
        if container_image(&created, "sidecar1").is_some() {
            return Some(());
        }
        pods.delete("web-0", &Default::default()).await.ok();
        support::eventually("pod gone", WAIT, || async {
            pods.get_opt("web-0").await.ok()?.is_none().then_some(())
        })
        .await;
        None
    })
    .await;
    wait_status(&sets, "cmd-change", (1, 1, 1)).await;
    set_spec(
        &sets,
        "cmd-change",
        json!({"containers": [{"name": "sidecar1", "image": "busybox:1.35", "command": ["sleep", "2d"]}]}),
    )
    .await;
    let cond = support::eventually("SidecarSetUpgradable=False", WAIT, || async {
        let p = pods.get("web-0").await.ok()?;
        p.status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "SidecarSetUpgradable" && c.status == "False")
    })
    .await;
    assert_eq!(cond.reason.as_deref(), Some("UpdateImmutableField"));
    assert_eq!(cond.message.as_deref(), Some(r#"{"cmd-change":false}"#));
    let p = pods.get("web-0").await.unwrap();
    assert_eq!(
        container_image(&p, "sidecar1").as_deref(),
        Some("busybox:1.34"),
        "nothing is changed in place"
    );
    wait_status(&sets, "cmd-change", (1, 0, 1)).await;
    c.shutdown().await;
}

/// Whether a container runs (status `running`) an image other than `empty`.
fn serving(pod: &Pod, name: &str, empty: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == name))
        .is_some_and(|c| c.image != empty && c.state.as_ref().is_some_and(|s| s.running.is_some()))
}

#[tokio::test]
async fn hot_upgrade_migrates_then_resets_with_a_sidecar_always_running() {
    let c = cluster().await;
    let sets: Api<SidecarSet> = Api::all(c.client.clone());
    let sidecar = |image: &str| {
        json!([{"name": "envoy", "image": image,
                "lifecycle": {"postStart": {"exec": {"command": ["/migrate.sh"]}}},
                "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "envoy-empty:1"}}])
    };
    let set: SidecarSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "hot"},
        "spec": {"selector": {"matchLabels": {"app": "mesh"}}, "containers": sidecar("envoy:1")}
    }))
    .unwrap();
    create_defaulted(&sets, &set).await;
    let pods: Api<Pod> = Api::default_namespaced(c.client.clone());
    let mut mesh = pod("mesh-0", json!({"app": "mesh"}));
    // The postStart hook (the migration) takes 500ms in the simulated kubelet.
    mesh.metadata.annotations = Some(BTreeMap::from([(
        "sim.kruise.io/poststart-duration".to_string(),
        "500ms".to_string(),
    )]));
    support::eventually("mesh-0 created with envoy-1 and envoy-2", WAIT, || async {
        let created = pods.create(&PostParams::default(), &mesh).await.ok()?;
        if container_image(&created, "envoy-2").is_some() {
            return Some(());
        }
        pods.delete("mesh-0", &Default::default()).await.ok();
        support::eventually("pod gone", WAIT, || async {
            pods.get_opt("mesh-0").await.ok()?.is_none().then_some(())
        })
        .await;
        None
    })
    .await;
    wait_status(&sets, "hot", (1, 1, 1)).await;
    let p = pods.get("mesh-0").await.unwrap();
    assert_eq!(container_image(&p, "envoy-1").as_deref(), Some("envoy:1"));
    assert_eq!(
        container_image(&p, "envoy-2").as_deref(),
        Some("envoy-empty:1")
    );

    for (image, working, idle) in [
        ("envoy:2", "envoy-2", "envoy-1"),
        ("envoy:3", "envoy-1", "envoy-2"),
    ] {
        // Sample the pod throughout the upgrade: some container always serves.
        let gaps = Arc::new(AtomicUsize::new(0));
        let samples = Arc::new(AtomicUsize::new(0));
        let watching = CancellationToken::new();
        let sampler = {
            let (pods, gaps, samples, watching) = (
                pods.clone(),
                gaps.clone(),
                samples.clone(),
                watching.clone(),
            );
            tokio::spawn(async move {
                while !watching.is_cancelled() {
                    if let Ok(p) = pods.get("mesh-0").await {
                        samples.fetch_add(1, Ordering::SeqCst);
                        if !serving(&p, "envoy-1", "envoy-empty:1")
                            && !serving(&p, "envoy-2", "envoy-empty:1")
                        {
                            gaps.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
        };
        let before = pods.get("mesh-0").await.unwrap();
        set_spec(&sets, "hot", json!({"containers": sidecar(image)})).await;
        support::eventually(
            &format!("{working} serving {image}, {idle} reset"),
            WAIT,
            || async {
                let p = pods.get("mesh-0").await.ok()?;
                (container_image(&p, working).as_deref() == Some(image)
                    && container_image(&p, idle).as_deref() == Some("envoy-empty:1")
                    && serving(&p, working, "envoy-empty:1")
                    && is_ready(&p))
                .then_some(())
            },
        )
        .await;
        wait_status(&sets, "hot", (1, 1, 1)).await;
        watching.cancel();
        sampler.await.unwrap();
        assert!(samples.load(Ordering::SeqCst) > 10);
        assert_eq!(
            gaps.load(Ordering::SeqCst),
            0,
            "a moment with no sidecar running"
        );
        let p = pods.get("mesh-0").await.unwrap();
        assert_eq!(p.uid(), before.uid());
        assert_eq!(
            p.annotations()["kruise.io/sidecarset-working-hotupgrade-container"],
            format!(r#"{{"envoy":"{working}"}}"#)
        );
        assert_eq!(
            p.annotations()[&format!("version.sidecarset.kruise.io/{idle}")],
            "0"
        );
        assert_eq!(
            restarts(&p, "main"),
            restarts(&before, "main"),
            "app untouched"
        );
    }
    c.shutdown().await;
}
