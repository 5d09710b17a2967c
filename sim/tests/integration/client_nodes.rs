//! `kruise-sim nodes` (`client_nodes`): the simulated nodes and their kubelet as a client
//! of an API server they do not run in, here a bare simulator (no nodes, scheduler or
//! kubelet of its own, so every pod status below comes through the kube client).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use kruise_sim::client_nodes::{self, NOT_READY_TAINT, NodesFlags};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::common::{eventually, sim};

fn flags(kubeconfig: std::path::PathBuf) -> NodesFlags {
    NodesFlags {
        kubeconfig: Some(kubeconfig),
        nodes: 2,
        node_prefix: "ext".into(),
        cpu: "4".into(),
        memory: "8Gi".into(),
        max_pods: 30,
        pull_delay: Duration::from_millis(20),
        image_pulls: Vec::new(),
        start_delay: Duration::from_millis(20),
        ready_delay: Duration::from_millis(50),
        cri_dir: None,
        lease_renew_interval: Duration::from_secs(10),
        no_volume_provisioner: false,
    }
}

fn pod(name: &str, node: &str, extra: Value) -> Pod {
    let mut p = json!({
        "metadata": {"name": name},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx:1.25"}]},
    });
    if let Some(m) = extra.as_object() {
        for (k, v) in m {
            p[k.as_str()]
                .as_object_mut()
                .unwrap()
                .extend(v.as_object().unwrap().clone());
        }
    }
    serde_json::from_value(p).unwrap()
}

fn condition(p: &Pod, ty: &str) -> Option<(String, Option<String>)> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == ty)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

async fn wait_pod(api: &Api<Pod>, name: &str, what: &str, ok: impl Fn(&Pod) -> bool) -> Pod {
    eventually(10, &format!("{name}: {what}"), || async {
        api.get(name).await.ok().filter(|p| ok(p))
    })
    .await
}

#[tokio::test]
async fn nodes_register_ready_without_the_not_ready_taint_and_with_leases() {
    let sim = sim().await;
    let client = sim.client().unwrap();
    let node_api: Api<Node> = Api::all(client.clone());
    // As kube-apiserver's TaintNodesByCondition admission would have left it.
    let tainted: Node = serde_json::from_value(json!({
        "metadata": {"name": "ext-0"},
        "spec": {"taints": [
            {"key": NOT_READY_TAINT, "effect": "NoSchedule"},
            {"key": "dedicated", "value": "x", "effect": "NoSchedule"},
        ]},
    }))
    .unwrap();
    node_api
        .create(&PostParams::default(), &tainted)
        .await
        .unwrap();

    let nodes = client_nodes::start(&flags(sim.kubeconfig_path().unwrap()))
        .await
        .unwrap();
    assert_eq!(nodes.names, ["ext-0", "ext-1"]);
    for name in ["ext-0", "ext-1"] {
        let node = node_api.get(name).await.unwrap();
        let status = node.status.unwrap();
        let ready = status
            .conditions
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(ready.status, "True", "{name} Ready");
        let capacity = status.capacity.unwrap();
        assert_eq!(capacity["cpu"].0, "4");
        assert_eq!(capacity["pods"].0, "30");
        let taints: Vec<String> = node
            .spec
            .unwrap()
            .taints
            .unwrap_or_default()
            .into_iter()
            .map(|t| t.key)
            .collect();
        assert!(
            !taints.contains(&NOT_READY_TAINT.to_string()),
            "{name}: {taints:?}"
        );
        if name == "ext-0" {
            assert_eq!(taints, ["dedicated"], "other taints are kept");
        }
    }
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client, "kube-node-lease");
    let lease = eventually(10, "ext-1's Lease", || async {
        leases.get("ext-1").await.ok()
    })
    .await;
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("ext-1"));
    assert!(spec.renew_time.is_some());
    nodes.shutdown().await;
    sim.shutdown().await;
}

#[tokio::test]
async fn the_kubelet_runs_pods_bound_to_its_nodes_through_the_api() {
    let sim = sim().await;
    let client = sim.client().unwrap();
    let nodes = client_nodes::start(&flags(sim.kubeconfig_path().unwrap()))
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let pp = PostParams::default();

    // Started, reported Ready only once its readiness gate is True.
    let gated = pod(
        "gated",
        "ext-1",
        json!({"spec": {"readinessGates": [{"conditionType": "example.com/ok"}]}}),
    );
    pods.create(&pp, &gated).await.unwrap();
    let running = wait_pod(&pods, "gated", "containers ready, gate not", |p| {
        condition(p, "ContainersReady").map(|c| c.0).as_deref() == Some("True")
    })
    .await;
    assert_eq!(
        condition(&running, "Ready"),
        Some(("False".into(), Some("ReadinessGatesNotReady".into())))
    );
    let status = running.status.clone().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert_eq!(
        status.host_ip.as_deref(),
        Some("172.18.0.3"),
        "ext-1's address"
    );
    let ip = status.pod_ip.clone().unwrap();
    assert!(ip.starts_with("10.244.1."), "{ip}");
    let gate = json!({"status": {"conditions": [{"type": "example.com/ok", "status": "True"}]}});
    pods.patch_status("gated", &PatchParams::default(), &Patch::Strategic(&gate))
        .await
        .unwrap();
    wait_pod(&pods, "gated", "Ready", |p| {
        condition(p, "Ready").map(|c| c.0).as_deref() == Some("True")
    })
    .await;

    // A new image restarts the container in place: same uid and IP, restartCount 1.
    let uid = running.metadata.uid.clone().unwrap();
    let image = json!({"spec": {"containers": [{"name": "c", "image": "nginx:1.26"}]}});
    pods.patch("gated", &PatchParams::default(), &Patch::Strategic(&image))
        .await
        .unwrap();
    let restarted = wait_pod(&pods, "gated", "restarted with nginx:1.26, Ready", |p| {
        let s = p
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref());
        s.and_then(|cs| cs.first())
            .is_some_and(|c| c.image == "nginx:1.26" && c.restart_count == 1 && c.ready)
    })
    .await;
    assert_eq!(restarted.metadata.uid.as_deref(), Some(uid.as_str()));
    assert_eq!(
        restarted.status.unwrap().pod_ip.as_deref(),
        Some(ip.as_str())
    );

    // A job-style pod runs to completion as its annotations say.
    let job = pod(
        "once",
        "ext-0",
        json!({
            "metadata": {"annotations": {"sim.kruise.io/exit-after": "100ms"}},
            "spec": {"restartPolicy": "Never"},
        }),
    );
    pods.create(&pp, &job).await.unwrap();
    wait_pod(&pods, "once", "Succeeded", |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded")
    })
    .await;

    // A pod bound to a node of somebody else is left alone.
    pods.create(&pp, &pod("elsewhere", "other-node", json!({})))
        .await
        .unwrap();

    // A graceful delete ends with the kubelet's final delete.
    pods.delete("gated", &DeleteParams::default())
        .await
        .unwrap();
    eventually(10, "gated gone", || async {
        matches!(pods.get_opt("gated").await, Ok(None)).then_some(())
    })
    .await;
    let elsewhere = pods.get("elsewhere").await.unwrap();
    assert!(
        elsewhere
            .status
            .and_then(|s| s.container_statuses)
            .is_none(),
        "no kubelet of ours wrote a status for a pod on other-node"
    );
    nodes.shutdown().await;
    sim.shutdown().await;
}

#[tokio::test]
async fn the_volume_provisioner_pre_binds_a_volume_to_a_waiting_claim_and_deletes_it_once_released()
{
    let sim = sim().await;
    let client = sim.client().unwrap();
    let nodes = client_nodes::start(&flags(sim.kubeconfig_path().unwrap()))
        .await
        .unwrap();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let volumes: Api<PersistentVolume> = Api::all(client);
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "www-web-0"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }))
    .unwrap();
    let uid = claims
        .create(&PostParams::default(), &claim)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let name = format!("pvc-{uid}");
    let volume = eventually(20, "a volume pre-bound to the claim", || {
        let (volumes, name) = (volumes.clone(), name.clone());
        async move { volumes.get_opt(&name).await.unwrap() }
    })
    .await;
    let spec = volume.spec.unwrap();
    let claim_ref = spec.claim_ref.unwrap();
    assert_eq!(
        (claim_ref.name.as_deref(), claim_ref.uid.as_deref()),
        (Some("www-web-0"), Some(uid.as_str()))
    );
    assert_eq!(spec.capacity.unwrap()["storage"].0, "1Gi");

    // kube-controller-manager's PV controller marks it Released once the claim is gone.
    let released = json!({"status": {"phase": "Released"}});
    volumes
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&released))
        .await
        .unwrap();
    eventually(20, "the released volume is deleted", || {
        let (volumes, name) = (volumes.clone(), name.clone());
        async move {
            volumes
                .get_opt(&name)
                .await
                .unwrap()
                .is_none()
                .then_some(())
        }
    })
    .await;
    nodes.shutdown().await;
}

#[tokio::test]
async fn a_container_waits_for_its_config_map_key_read_through_the_api() {
    let sim = sim().await;
    let client = sim.client().unwrap();
    let nodes = client_nodes::start(&flags(sim.kubeconfig_path().unwrap()))
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let env = json!({"spec": {"containers": [{"name": "c", "image": "nginx:1.25", "env": [
        {"name": "KRUISE_CONTAINER_BARRIER",
         "valueFrom": {"configMapKeyRef": {"name": "gated-barrier", "key": "p_0"}}}]}]}});
    pods.create(&PostParams::default(), &pod("gated", "ext-0", env))
        .await
        .unwrap();
    let waiting = wait_pod(&pods, "gated", "waiting on its ConfigMap", |p| {
        let s = p
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref());
        s.and_then(|cs| cs.first())
            .and_then(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone())
            .as_deref()
            == Some("CreateContainerConfigError")
    })
    .await;
    assert_eq!(waiting.status.unwrap().phase.as_deref(), Some("Pending"));
    let barrier: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "gated-barrier"}, "data": {"p_0": "true"}}),
    )
    .unwrap();
    Api::namespaced(client, "default")
        .create(&PostParams::default(), &barrier)
        .await
        .unwrap();
    wait_pod(&pods, "gated", "running once the key exists", |p| {
        let s = p
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref());
        s.and_then(|cs| cs.first())
            .is_some_and(|c| c.state.as_ref().is_some_and(|st| st.running.is_some()))
    })
    .await;
    nodes.shutdown().await;
}
