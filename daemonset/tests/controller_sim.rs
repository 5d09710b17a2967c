//! The DaemonSet controller in-process against kruise-sim, or the real API server of
//! `KRUISE_TEST_KUBECONFIG`: the scheduler (kruise-sim's or kube-scheduler) binds the pods
//! by their node affinity and the simulated kubelet makes them Ready. On the real control
//! plane kube-controller-manager's own daemonset controller runs too; it acts only on
//! `apps/v1` DaemonSets and their pods, so it leaves these alone. The `sim_only_*` tests
//! inject faults, which only the simulator can.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_daemonset::api::v1beta1::DaemonSet;
use kruise_daemonset::controller::{self, Settings};
use kruise_daemonset::plan::pods::{DAEMONSET_SCHEDULER_NAME, Placement};
use kruise_runtime::{Metrics, Readiness, RunOptions};
use kruise_testkit::{TestCluster, WAIT, eventually};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

async fn cluster(nodes: usize) -> (TestCluster, Client) {
    kruise_testkit::cluster_with_crds(nodes, &[kruise_daemonset::api::crd::crd().unwrap()]).await
}

async fn sim(nodes: usize) -> (kruise_sim::Sim, Client) {
    kruise_testkit::sim_with_crds(nodes, &[kruise_daemonset::api::crd::crd().unwrap()]).await
}

/// The controller in-process for the client's namespace; `stop` waits for in-flight reconciles.
struct Running {
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    fn start(client: &Client) -> Self {
        Self::start_placing(client, Placement::Scheduler)
    }

    fn start_placing(client: &Client, placement: Placement) -> Self {
        Self::start_with(
            client,
            Settings {
                placement,
                ..Settings::default()
            },
        )
    }

    fn start_with(client: &Client, settings: Settings) -> Self {
        let shutdown = CancellationToken::new();
        let opts = RunOptions {
            name: controller::CONTROLLER_NAME.into(),
            concurrency: 3,
            metrics: Metrics::new(),
            readiness: Readiness::default(),
            shutdown: shutdown.clone(),
            leadership: Default::default(),
        };
        let settings = Settings {
            namespace: Some(client.default_namespace().into()),
            ..settings
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

fn daemonset(name: &str, spec_extra: Value) -> DaemonSet {
    let mut spec = json!({
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "main", "image": "nginx:1"}]}
        }
    });
    json_patch::merge(&mut spec, &spec_extra);
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap()
}

async fn create(client: &Client, ds: &DaemonSet) {
    Api::<DaemonSet>::default_namespaced(client.clone())
        .create(&PostParams::default(), ds)
        .await
        .unwrap();
}

async fn patch_set(client: &Client, name: &str, patch: Value) {
    Api::<DaemonSet>::default_namespaced(client.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

async fn patch_node(client: &Client, name: &str, patch: Value) {
    Api::<Node>::all(client.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// The live pods of DaemonSet `app` (not terminating).
async fn pods_of(client: &Client, app: &str) -> Vec<Pod> {
    Api::<Pod>::default_namespaced(client.clone())
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

fn node_of(p: &Pod) -> String {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

fn image_of(p: &Pod) -> String {
    p.spec.as_ref().unwrap().containers[0]
        .image
        .clone()
        .unwrap_or_default()
}

fn ready(p: &Pod) -> bool {
    kruise_core::pods::is_pod_ready(p)
}

/// Waits until the Ready pods of `app` sit one each on exactly `nodes`, all with `image`.
async fn wait_for_pods(client: &Client, app: &str, nodes: &[String], image: &str) -> Vec<Pod> {
    let want: BTreeSet<String> = nodes.iter().cloned().collect();
    eventually(
        &format!("one Ready {image} pod of {app} on each of {want:?}"),
        WAIT,
        || {
            let (client, want) = (client.clone(), want.clone());
            async move {
                let pods = pods_of(&client, app).await;
                let on: Vec<String> = pods.iter().map(node_of).collect();
                let set: BTreeSet<String> = on.iter().cloned().collect();
                (on.len() == want.len()
                    && set == want
                    && pods.iter().all(|p| ready(p) && image_of(p) == image))
                .then_some(pods)
            }
        },
    )
    .await
}

/// Waits until the status of `name` satisfies `check` at the current generation: the
/// controller has seen the latest spec and the nodes as they are.
async fn wait_status(
    client: &Client,
    name: &str,
    what: &str,
    check: impl Fn(&kruise_daemonset::api::v1beta1::DaemonSetStatus) -> bool,
) {
    let check = &check;
    eventually(what, WAIT, || {
        let client = client.clone();
        async move {
            let ds = Api::<DaemonSet>::default_namespaced(client)
                .get(name)
                .await
                .ok()?;
            let status = ds.status.as_ref()?;
            (Some(status.observed_generation) == ds.metadata.generation && check(status))
                .then_some(())
        }
    })
    .await;
}

async fn node_names(client: &Client) -> Vec<String> {
    let mut names: Vec<String> = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|n| n.name_any())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_pod_per_node_then_a_rolling_update_replaces_every_pod_and_status_follows() {
    let (cluster, client) = cluster(3).await;
    let running = Running::start(&client);
    create(&client, &daemonset("agent", json!({}))).await;
    let nodes = node_names(&client).await;
    let first = wait_for_pods(&client, "agent", &nodes, "nginx:1").await;
    let set = eventually("status counts 3 available", WAIT, || {
        let client = client.clone();
        async move {
            Api::<DaemonSet>::default_namespaced(client)
                .get("agent")
                .await
                .ok()
                .filter(|d| d.status.as_ref().is_some_and(|s| s.number_available == 3))
        }
    })
    .await;
    let status = set.status.unwrap();
    assert_eq!(
        (
            status.desired_number_scheduled,
            status.current_number_scheduled,
            status.number_ready,
            status.updated_number_scheduled,
            status.number_misscheduled
        ),
        (3, 3, 3, 3, 0)
    );
    assert!(!status.update_revision.is_empty());
    for pod in &first {
        assert_eq!(
            pod.labels().get("controller-revision-hash"),
            Some(&status.update_revision)
        );
    }

    patch_set(
        &client,
        "agent",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}}),
    )
    .await;
    let second = wait_for_pods(&client, "agent", &nodes, "nginx:2").await;
    let old: BTreeSet<_> = first.iter().map(|p| p.name_any()).collect();
    assert!(second.iter().all(|p| !old.contains(&p.name_any())));
    running.stop().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_selector_places_pods_as_nodes_get_the_label_and_no_execute_evicts() {
    let (cluster, client) = cluster(3).await;
    let running = Running::start(&client);
    create(
        &client,
        &daemonset(
            "blue",
            json!({"template": {"spec": {"nodeSelector": {"color": "blue"}}}}),
        ),
    )
    .await;
    let nodes = node_names(&client).await;
    wait_status(&client, "blue", "synced with no node desired", |s| {
        s.desired_number_scheduled == 0
    })
    .await;
    assert!(
        pods_of(&client, "blue").await.is_empty(),
        "no node is blue yet"
    );
    patch_node(
        &client,
        &nodes[0],
        json!({"metadata": {"labels": {"color": "blue"}}}),
    )
    .await;
    wait_for_pods(&client, "blue", &nodes[..1], "nginx:1").await;
    patch_node(
        &client,
        &nodes[2],
        json!({"metadata": {"labels": {"color": "blue"}}}),
    )
    .await;
    let both = [nodes[0].clone(), nodes[2].clone()];
    wait_for_pods(&client, "blue", &both, "nginx:1").await;

    // NoSchedule keeps the pod; NoExecute removes it.
    patch_node(
        &client,
        &nodes[0],
        json!({"spec": {"taints": [{"key": "maintenance", "effect": "NoSchedule"}]}}),
    )
    .await;
    wait_status(&client, "blue", "the tainted node no longer desired", |s| {
        s.desired_number_scheduled == 1 && s.number_misscheduled == 1
    })
    .await;
    assert_eq!(
        pods_of(&client, "blue").await.len(),
        2,
        "NoSchedule keeps the pod"
    );
    patch_node(
        &client,
        &nodes[0],
        json!({"spec": {"taints": [{"key": "maintenance", "effect": "NoExecute"}]}}),
    )
    .await;
    wait_for_pods(&client, "blue", &nodes[2..], "nginx:1").await;
    running.stop().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_and_node_selector_bound_the_rollout_and_a_restart_resumes_it() {
    let (cluster, client) = cluster(4).await;
    let running = Running::start(&client);
    create(
        &client,
        &daemonset(
            "part",
            json!({"updateStrategy": {"type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": "100%", "partition": 2}}}),
        ),
    )
    .await;
    let nodes = node_names(&client).await;
    wait_for_pods(&client, "part", &nodes, "nginx:1").await;
    running.stop().await;

    // The template changes while no controller runs; the restarted one rolls it out.
    patch_set(
        &client,
        "part",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}}),
    )
    .await;
    let running = Running::start(&client);
    let images = |pods: &[Pod]| {
        let mut by_node: Vec<(String, String)> =
            pods.iter().map(|p| (node_of(p), image_of(p))).collect();
        by_node.sort();
        by_node
    };
    let settled = eventually("two nodes updated, two kept old", WAIT, || {
        let client = client.clone();
        async move {
            let pods = pods_of(&client, "part").await;
            let new = pods
                .iter()
                .filter(|p| image_of(p) == "nginx:2" && ready(p))
                .count();
            (pods.len() == 4 && new == 2 && pods.iter().all(ready)).then_some(pods)
        }
    })
    .await;
    // The last two nodes by name are updated first.
    let want: Vec<(String, String)> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            (
                n.clone(),
                if i >= 2 { "nginx:2" } else { "nginx:1" }.to_string(),
            )
        })
        .collect();
    assert_eq!(images(&settled), want);
    wait_status(&client, "part", "two updated, four available", |s| {
        s.updated_number_scheduled == 2 && s.number_available == 4
    })
    .await;
    assert_eq!(
        images(&pods_of(&client, "part").await),
        want,
        "partition holds"
    );

    // Partition 0 with a selector: only the selected node of the old two moves.
    patch_node(
        &client,
        &nodes[1],
        json!({"metadata": {"labels": {"canary": "yes"}}}),
    )
    .await;
    patch_set(
        &client,
        "part",
        json!({"spec": {"updateStrategy": {"rollingUpdate": {
            "partition": 0, "selector": {"matchLabels": {"canary": "yes"}}}}}}),
    )
    .await;
    let mut want = want;
    want[1].1 = "nginx:2".into();
    eventually("the canary node updated, node 0 kept", WAIT, || {
        let (client, want) = (client.clone(), want.clone());
        async move {
            let pods = pods_of(&client, "part").await;
            (pods.iter().all(ready) && images(&pods) == want).then_some(())
        }
    })
    .await;
    wait_status(&client, "part", "three updated, four available", |s| {
        s.updated_number_scheduled == 3 && s.number_available == 4
    })
    .await;
    assert_eq!(
        images(&pods_of(&client, "part").await),
        want,
        "selector holds"
    );
    running.stop().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn surge_creates_the_new_pod_before_deleting_the_old_one() {
    let (cluster, client) = cluster(3).await;
    let running = Running::start(&client);
    create(
        &client,
        &daemonset(
            "surge",
            json!({"updateStrategy": {"type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}}),
        ),
    )
    .await;
    let nodes = node_names(&client).await;
    wait_for_pods(&client, "surge", &nodes, "nginx:1").await;
    patch_set(
        &client,
        "surge",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}}),
    )
    .await;
    // Watch the rollout: never a node without a Ready pod, never two nodes doubled.
    eventually("every node runs nginx:2", WAIT, || {
        let (client, nodes) = (client.clone(), nodes.clone());
        async move {
            let pods = pods_of(&client, "surge").await;
            for node in &nodes {
                let on: Vec<&Pod> = pods.iter().filter(|p| &node_of(p) == node).collect();
                assert!(
                    on.iter().any(|p| ready(p)) || on.len() > 1,
                    "{node} lost its pod before the new one came: {on:?}"
                );
            }
            // A surge in flight is a node with two live pods, one of them not yet Ready.
            // An old pod already deleted (terminating) is no longer part of it (K#657); a
            // node whose new pod is Ready is done even while its old pod's delete is on the
            // way, and the next node's surge may be created first (as upstream does).
            let live = |p: &&Pod| p.metadata.deletion_timestamp.is_none();
            let surging = nodes
                .iter()
                .filter(|n| {
                    let on: Vec<&Pod> = pods
                        .iter()
                        .filter(live)
                        .filter(|p| &&node_of(p) == n)
                        .collect();
                    on.len() > 1 && on.iter().any(|p| !ready(p))
                })
                .count();
            // (name, node, image, Ready) of every live pod: which nodes surged, and why.
            let seen: Vec<(String, String, String, bool)> = pods
                .iter()
                .map(|p| {
                    (
                        p.metadata.name.clone().unwrap_or_default(),
                        node_of(p),
                        image_of(p),
                        ready(p),
                    )
                })
                .collect();
            assert!(surging <= 1, "{surging} nodes surged at once: {seen:?}");
            (pods.len() == 3 && pods.iter().all(|p| ready(p) && image_of(p) == "nginx:2"))
                .then_some(())
        }
    })
    .await;
    running.stop().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_not_ready_node_keeps_its_pod_and_pods_can_be_bound_without_the_scheduler() {
    let (cluster, client) = cluster(2).await;
    let running = Running::start_placing(&client, Placement::NodeName);
    create(&client, &daemonset("bound", json!({}))).await;
    let nodes = node_names(&client).await;
    let pods = wait_for_pods(&client, "bound", &nodes, "nginx:1").await;
    for pod in &pods {
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(
            spec.scheduler_name.as_deref(),
            Some(DAEMONSET_SCHEDULER_NAME)
        );
        assert!(spec.affinity.is_none(), "bound by nodeName, not affinity");
    }

    // NotReady as the node lifecycle controller marks it (kube-controller-manager's does so
    // on the real control plane as well): the condition, the not-ready NoExecute taint,
    // which daemon pods tolerate (deckhouse#8645), and the not-ready NoSchedule taint, which
    // they do not: no new pod would go there, the running one stays (misscheduled).
    Api::<Node>::all(client.clone())
        .patch_status(
            &nodes[0],
            &PatchParams::default(),
            &Patch::Strategic(json!({"status": {"conditions": [
                {"type": "Ready", "status": "False", "reason": "NodeStatusUnknown"}]}})),
        )
        .await
        .unwrap();
    patch_node(
        &client,
        &nodes[0],
        json!({"spec": {"unschedulable": true, "taints": [
            {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
            {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}}),
    )
    .await;
    // A change the controller does act on, so its next status shows it saw the node.
    patch_set(
        &client,
        "bound",
        json!({"spec": {"minReadySeconds": 0, "revisionHistoryLimit": 5}}),
    )
    .await;
    wait_status(
        &client,
        "bound",
        "synced after the node went NotReady",
        |s| s.desired_number_scheduled == 1 && s.number_misscheduled == 1,
    )
    .await;
    let kept: BTreeSet<String> = pods_of(&client, "bound")
        .await
        .iter()
        .map(|p| p.name_any())
        .collect();
    let before: BTreeSet<String> = pods.iter().map(|p| p.name_any()).collect();
    assert_eq!(kept, before, "no pod replaced on a NotReady, cordoned node");
    running.stop().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_only_injected_errors_and_dropped_watches_neither_double_create_nor_stall() {
    let (sim, client) = sim(3).await;
    // The controller sees every error itself (no client-side retries).
    let running = Running::start(&sim.client_without_retries().unwrap());
    let faults = sim.faults();
    faults.add(
        kruise_sim::FaultRule::new()
            .verb("create")
            .resource("pods")
            .error(500, 1.0)
            .times(2),
    );
    faults.add(
        kruise_sim::FaultRule::new()
            .verb("patch")
            .resource("daemonsets")
            .subresource("status")
            .error(409, 1.0)
            .times(2),
    );
    create(
        &client,
        &daemonset(
            "sturdy",
            json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}}),
        ),
    )
    .await;
    let nodes = node_names(&client).await;
    wait_for_pods(&client, "sturdy", &nodes, "nginx:1").await;

    faults.add(
        kruise_sim::FaultRule::new()
            .verb("delete")
            .resource("pods")
            .error(500, 1.0)
            .times(1),
    );
    patch_set(
        &client,
        "sturdy",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}}),
    )
    .await;
    faults.drop_watches();
    eventually(
        "every node on nginx:2, never two pods on a node",
        WAIT,
        || {
            let (client, nodes) = (client.clone(), nodes.clone());
            async move {
                let pods = pods_of(&client, "sturdy").await;
                for node in &nodes {
                    let on = pods.iter().filter(|p| &node_of(p) == node).count();
                    assert!(on <= 1, "{node} has {on} live pods");
                }
                (pods.len() == 3 && pods.iter().all(|p| ready(p) && image_of(p) == "nginx:2"))
                    .then_some(())
            }
        },
    )
    .await;
    wait_status(&client, "sturdy", "status caught up", |s| {
        s.updated_number_scheduled == 3 && s.number_available == 3
    })
    .await;
    let count = |verb: &str, resource: &str, subresource: &str, code: u16| {
        sim.counters().answered(verb, resource, subresource, code)
    };
    // Every injected error was met, and no pod was created twice for a node.
    assert_eq!(count("create", "pods", "", 500), 2);
    assert_eq!(count("delete", "pods", "", 500), 1);
    // (Besides the injected ones, a status write from a stale cache meets a real conflict.)
    assert!(count("patch", "daemonsets", "status", 409) >= 2);
    assert_eq!(count("create", "pods", "", 201), 6, "3 nodes, twice");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_surge_and_min_ready_seconds_the_old_pod_goes_once_they_elapse_k1012() {
    let (cluster, client) = cluster(1).await;
    let running = Running::start(&client);
    create(
        &client,
        &daemonset(
            "patient",
            json!({"minReadySeconds": 2, "updateStrategy": {"type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}}),
        ),
    )
    .await;
    let nodes = node_names(&client).await;
    wait_for_pods(&client, "patient", &nodes, "nginx:1").await;
    patch_set(
        &client,
        "patient",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}}),
    )
    .await;
    // The new pod turns Ready, then nothing happens in the cluster: only the requeue for
    // minReadySeconds can take the old pod away.
    let both = eventually("the surge pod Ready beside the old one", WAIT, || {
        let client = client.clone();
        async move {
            let pods = pods_of(&client, "patient").await;
            (pods.len() == 2 && pods.iter().all(ready)).then_some(pods)
        }
    })
    .await;
    let old = both
        .iter()
        .find(|p| image_of(p) == "nginx:1")
        .map(|p| p.name_any())
        .unwrap();
    wait_for_pods(&client, "patient", &nodes, "nginx:2").await;
    assert!(
        pods_of(&client, "patient")
            .await
            .iter()
            .all(|p| p.name_any() != old)
    );
    running.stop().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_selector_is_reported_and_selects_nothing() {
    let (cluster, client) = cluster(2).await;
    let running = Running::start(&client);
    // No webhook in this cluster: the controller's own validation catches it.
    let mut ds = daemonset("greedy", json!({}));
    ds.spec.selector = Some(Default::default());
    create(&client, &ds).await;
    kruise_testkit::wait_for_warning(
        &client,
        client.default_namespace(),
        "greedy",
        "SelectingAll",
    )
    .await;
    assert!(pods_of(&client, "greedy").await.is_empty());
    running.stop().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_delete_hook_holds_pods_in_preparing_delete_until_it_lets_go() {
    let (cluster, client) = cluster(2).await;
    let running = Running::start(&client);
    create(
        &client,
        &daemonset(
            "hooked",
            json!({"lifecycle": {"preDelete": {"labelsHandler": {"hold": "true"}}},
                "template": {"metadata": {"labels": {"hold": "true"}}}}),
        ),
    )
    .await;
    let nodes = node_names(&client).await;
    wait_for_pods(&client, "hooked", &nodes, "nginx:1").await;
    patch_set(
        &client,
        "hooked",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}}),
    )
    .await;
    let preparing = |pods: &[Pod]| -> Vec<String> {
        pods.iter()
            .filter(|p| {
                p.labels()
                    .get("lifecycle.apps.kruise.io/state")
                    .map(String::as_str)
                    == Some("PreparingDelete")
            })
            .map(|p| p.name_any())
            .collect()
    };
    let held = eventually("one pod PreparingDelete", WAIT, || {
        let client = client.clone();
        async move {
            let pods = pods_of(&client, "hooked").await;
            let held = preparing(&pods);
            (held.len() == 1).then(|| held[0].clone())
        }
    })
    .await;
    wait_status(&client, "hooked", "synced with the pod held", |s| {
        s.desired_number_scheduled == 2
    })
    .await;
    let pods = pods_of(&client, "hooked").await;
    assert_eq!(pods.len(), 2, "the held pod is not deleted");
    assert_eq!(
        preparing(&pods),
        std::slice::from_ref(&held),
        "one at a time (maxUnavailable 1)"
    );

    // Letting go: the held pod is deleted and replaced; the next one is held in turn.
    Api::<Pod>::default_namespaced(client.clone())
        .patch(
            &held,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"hold": null}}})),
        )
        .await
        .unwrap();
    eventually("the released pod replaced, the other held", WAIT, || {
        let (client, held) = (client.clone(), held.clone());
        async move {
            let pods = pods_of(&client, "hooked").await;
            let replaced = pods.iter().any(|p| image_of(p) == "nginx:2" && ready(p));
            let next = preparing(&pods);
            (pods.iter().all(|p| p.name_any() != held) && replaced && next.len() == 1).then_some(())
        }
    })
    .await;
    running.stop().await;
    cluster.shutdown().await;
}

/// The names of the ControllerRevisions in the client's namespace.
async fn revision_names(client: &Client) -> BTreeSet<String> {
    Api::<k8s_openapi::api::apps::v1::ControllerRevision>::default_namespaced(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|r| r.name_any())
        .collect()
}

async fn update_revision(client: &Client, name: &str) -> String {
    let ds = Api::<DaemonSet>::default_namespaced(client.clone())
        .get(name)
        .await
        .unwrap();
    ds.status.unwrap().update_revision
}

async fn wait_revisions(client: &Client, want: &[&str]) {
    let want: BTreeSet<String> = want.iter().map(|h| format!("agent-{h}")).collect();
    eventually(&format!("revisions {want:?}"), WAIT, || {
        let (client, want) = (client.clone(), want.clone());
        async move { (revision_names(&client).await == want).then_some(()) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revisions_follow_the_template_and_history_keeps_only_what_pods_use() {
    let (cluster, client) = cluster(2).await;
    let running = Running::start(&client);
    create(
        &client,
        &daemonset(
            "agent",
            json!({"revisionHistoryLimit": 0,
                   "updateStrategy": {"rollingUpdate": {"partition": 1}}}),
        ),
    )
    .await;
    let nodes = node_names(&client).await;
    let first = wait_for_pods(&client, "agent", &nodes, "nginx:1").await;
    wait_status(&client, "agent", "every pod updated", |s| {
        s.updated_number_scheduled == 2
    })
    .await;
    let h1 = update_revision(&client, "agent").await;
    wait_revisions(&client, &[&h1]).await;
    let revision =
        Api::<k8s_openapi::api::apps::v1::ControllerRevision>::default_namespaced(client.clone())
            .get(&format!("agent-{h1}"))
            .await
            .unwrap();
    assert_eq!(revision.labels().get("controller-revision-hash"), Some(&h1));
    let owner = &revision.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("DaemonSet", Some(true))
    );
    for pod in &first {
        assert_eq!(pod.labels().get("controller-revision-hash"), Some(&h1));
    }

    // Partition 1 keeps the first node on h1: its revision outlives the history limit of 0.
    let image = |i: &str| json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": i}]}}}});
    patch_set(&client, "agent", image("nginx:2")).await;
    wait_status(&client, "agent", "one pod updated", |s| {
        s.updated_number_scheduled == 1 && s.number_available == 2
    })
    .await;
    let h2 = update_revision(&client, "agent").await;
    assert_ne!(h1, h2);
    wait_revisions(&client, &[&h1, &h2]).await;

    // Once no pod uses h2 it goes; h1 stays for the partitioned pod.
    patch_set(&client, "agent", image("nginx:3")).await;
    wait_status(&client, "agent", "one pod on nginx:3", |s| {
        s.updated_number_scheduled == 1 && s.number_available == 2
    })
    .await;
    let h3 = update_revision(&client, "agent").await;
    wait_revisions(&client, &[&h1, &h3]).await;

    // With the partition lifted every pod moves to h3 and h1 goes too.
    patch_set(
        &client,
        "agent",
        json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}}),
    )
    .await;
    wait_for_pods(&client, "agent", &nodes, "nginx:3").await;
    wait_revisions(&client, &[&h3]).await;
    running.stop().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_name_taken_by_other_data_raises_collision_count() {
    let (cluster, client) = cluster(1).await;
    let set = daemonset("agent", json!({}));
    create(&client, &set).await;
    let stored = Api::<DaemonSet>::default_namespaced(client.clone())
        .get("agent")
        .await
        .unwrap();
    let template = serde_json::to_value(&stored.spec.template).unwrap();
    let taken = kruise_core::revision::template_hash(&template, None);
    let squatter: k8s_openapi::api::apps::v1::ControllerRevision = serde_json::from_value(json!({
        "metadata": {"name": format!("agent-{taken}")},
        "data": {"spec": {"template": {"metadata": {"labels": {"other": "data"}}}}},
        "revision": 1
    }))
    .unwrap();
    Api::default_namespaced(client.clone())
        .create(&PostParams::default(), &squatter)
        .await
        .unwrap();

    let running = Running::start(&client);
    wait_status(
        &client,
        "agent",
        "collisionCount 1 and the pod placed",
        |s| s.collision_count == Some(1) && s.number_available == 1,
    )
    .await;
    let renamed = kruise_core::revision::template_hash(&template, Some(1));
    assert_eq!(update_revision(&client, "agent").await, renamed);
    let names = revision_names(&client).await;
    assert!(names.contains(&format!("agent-{renamed}")), "{names:?}");
    let pods = pods_of(&client, "agent").await;
    assert_eq!(pods.len(), 1);
    assert_eq!(
        pods[0].labels().get("controller-revision-hash"),
        Some(&renamed)
    );
    running.stop().await;
    cluster.shutdown().await;
}

fn uid_by_name(pods: &[Pod]) -> BTreeSet<(String, String)> {
    pods.iter()
        .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
        .collect()
}

fn condition(p: &Pod, type_: &str) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_place_if_possible_keeps_names_and_uids_and_recreates_what_it_cannot() {
    let (cluster, client) = cluster(3).await;
    let running = Running::start(&client);
    create(
        &client,
        &daemonset(
            "agent",
            json!({"updateStrategy": {"rollingUpdate": {
                "rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": "100%"}}}),
        ),
    )
    .await;
    let nodes = node_names(&client).await;
    let first = wait_for_pods(&client, "agent", &nodes, "nginx:1").await;
    for pod in &first {
        let gates = pod.spec.as_ref().unwrap().readiness_gates.clone().unwrap();
        assert!(
            gates
                .iter()
                .any(|g| g.condition_type == "InPlaceUpdateReady")
        );
    }

    patch_set(
        &client,
        "agent",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}}),
    )
    .await;
    let updated = wait_for_pods(&client, "agent", &nodes, "nginx:2").await;
    assert_eq!(uid_by_name(&updated), uid_by_name(&first));
    wait_status(&client, "agent", "3 updated and available", |s| {
        s.updated_number_scheduled == 3 && s.number_available == 3
    })
    .await;
    let hash = update_revision(&client, "agent").await;
    for pod in pods_of(&client, "agent").await {
        let status = pod.status.as_ref().unwrap();
        let restarts = status.container_statuses.as_ref().unwrap()[0].restart_count;
        assert_eq!(restarts, 1, "{}", pod.name_any());
        assert_eq!(pod.labels().get("controller-revision-hash"), Some(&hash));
        assert_eq!(
            condition(&pod, "InPlaceUpdateReady").as_deref(),
            Some("True")
        );
        let state = pod
            .annotations()
            .get("apps.kruise.io/inplace-update-state")
            .unwrap();
        let state: Value = serde_json::from_str(state).unwrap();
        assert_eq!(state["revision"], json!(hash));
    }
    eventually("a SuccessfulUpdatePodInPlace event per pod", WAIT, || {
        let client = client.clone();
        async move {
            let events =
                kruise_testkit::events_about(&client, client.default_namespace(), "agent").await;
            let in_place = events
                .iter()
                .filter(|e| e.reason.as_deref() == Some("SuccessfulUpdatePodInPlace"))
                .count();
            (in_place == 3).then_some(())
        }
    })
    .await;

    // An env change cannot be made in place: the pods are recreated.
    patch_set(
        &client,
        "agent",
        json!({"spec": {"template": {"spec": {"containers": [
            {"name": "main", "image": "nginx:2", "env": [{"name": "MODE", "value": "x"}]}]}}}}),
    )
    .await;
    let hash_before = hash;
    wait_status(&client, "agent", "a new revision rolled out", |s| {
        s.update_revision != hash_before
            && s.updated_number_scheduled == 3
            && s.number_available == 3
    })
    .await;
    let recreated = wait_for_pods(&client, "agent", &nodes, "nginx:2").await;
    let old_names: BTreeSet<String> = first.iter().map(|p| p.name_any()).collect();
    assert!(recreated.iter().all(|p| !old_names.contains(&p.name_any())));
    running.stop().await;
    cluster.shutdown().await;
}

/// OpenKruise's e2e "should upgrade resources and image one by one on steps" (InplaceVPA):
/// with `InPlaceWorkloadVerticalScaling` an image and resources change is made in place —
/// the same pods, the container restarted once for the image, the new resources in spec
/// and status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_vertical_scaling_an_image_and_resources_change_is_made_in_place() {
    let (cluster, client) = cluster(2).await;
    image_and_resources_rollout(&client, &client).await;
    cluster.shutdown().await;
}

/// A resize the server refuses is sent again: the pod is not counted updated with its old
/// resources (the resize goes before the patch that moves the pod to the new revision).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_only_an_in_place_update_whose_resize_fails_is_not_counted_until_the_resize_lands() {
    let (sim, client) = sim(2).await;
    let refused = kruise_testkit::sim::fail_resizes(&sim, 2);
    // The controller sees every 500 itself (no client-side retries).
    image_and_resources_rollout(&client, &sim.client_without_retries().unwrap()).await;
    refused.all_met();
}

/// A DaemonSet `vpa` on two nodes, its image and resources then changed with
/// `InPlaceWorkloadVerticalScaling` on, by a controller on `controller_client`: the same
/// pods, each with the new image and resources in spec and status, restarted once.
async fn image_and_resources_rollout(client: &Client, controller_client: &Client) {
    let client = client.clone();
    let running = Running::start_with(
        controller_client,
        Settings {
            in_place_gates: kruise_core::inplace::InPlaceGates {
                env_from_metadata: true,
                vertical_scaling: true,
            },
            ..Settings::default()
        },
    );
    let resources = |cpu: &str, memory: &str| json!({"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}});
    create(
        &client,
        &daemonset(
            "vpa",
            json!({"updateStrategy": {"rollingUpdate": {
                    "rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": 1}},
                "template": {"spec": {"containers": [
                    {"name": "main", "image": "nginx:1", "resources": resources("100m", "100Mi")}]}}}),
        ),
    )
    .await;
    let nodes = node_names(&client).await;
    let first = wait_for_pods(&client, "vpa", &nodes, "nginx:1").await;
    patch_set(
        &client,
        "vpa",
        json!({"spec": {"template": {"spec": {"containers": [
            {"name": "main", "image": "nginx:2", "resources": resources("200m", "200Mi")}]}}}}),
    )
    .await;
    let updated = wait_for_pods(&client, "vpa", &nodes, "nginx:2").await;
    assert_eq!(uid_by_name(&updated), uid_by_name(&first));
    wait_status(&client, "vpa", "2 updated and available", |s| {
        s.updated_number_scheduled == 2 && s.number_available == 2
    })
    .await;
    let resized = eventually("every pod reports the new resources", WAIT, || {
        let client = client.clone();
        async move {
            let pods = pods_of(&client, "vpa").await;
            pods.iter()
                .all(|pod| {
                    let status = serde_json::to_value(pod.status.as_ref()).unwrap();
                    status["containerStatuses"][0]["resources"] == resources("200m", "200Mi")
                        && condition(pod, "InPlaceUpdateReady").as_deref() == Some("True")
                })
                .then_some(pods)
        }
    })
    .await;
    for pod in resized {
        let spec = serde_json::to_value(pod.spec.as_ref()).unwrap();
        assert_eq!(
            spec["containers"][0]["resources"],
            resources("200m", "200Mi")
        );
        let status = pod.status.clone().unwrap();
        let restarts = status.container_statuses.unwrap()[0].restart_count;
        assert_eq!(
            restarts,
            1,
            "{}: restarted once, for the image",
            pod.name_any()
        );
    }
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_started_mid_in_place_rollout_finishes_it() {
    let (cluster, client) = cluster(3).await;
    let running = Running::start(&client);
    create(
        &client,
        &daemonset(
            "agent",
            json!({"updateStrategy": {"rollingUpdate": {"rollingUpdateType": "InPlaceIfPossible"}}}),
        ),
    )
    .await;
    let nodes = node_names(&client).await;
    let first = wait_for_pods(&client, "agent", &nodes, "nginx:1").await;
    patch_set(
        &client,
        "agent",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}}),
    )
    .await;
    eventually("one pod updated in place", WAIT, || {
        let client = client.clone();
        async move {
            pods_of(&client, "agent")
                .await
                .iter()
                .any(|p| image_of(p) == "nginx:2")
                .then_some(())
        }
    })
    .await;
    running.stop().await;

    let restarted = Running::start(&client);
    let updated = wait_for_pods(&client, "agent", &nodes, "nginx:2").await;
    assert_eq!(uid_by_name(&updated), uid_by_name(&first));
    eventually("InPlaceUpdateReady True on every pod", WAIT, || {
        let client = client.clone();
        async move {
            pods_of(&client, "agent")
                .await
                .iter()
                .all(|p| condition(p, "InPlaceUpdateReady").as_deref() == Some("True"))
                .then_some(())
        }
    })
    .await;
    restarted.stop().await;
    cluster.shutdown().await;
}

/// Successful pod writes (create, patch, delete; any subresource) counted (see
/// `TestCluster::counters`: the simulated kubelet's are not).
fn pod_writes(cluster: &TestCluster) -> u64 {
    cluster
        .counters()
        .snapshot()
        .into_iter()
        .filter(|(k, _)| {
            k.resource == "pods"
                && matches!(k.verb.as_str(), "create" | "patch" | "update" | "delete")
                && (200..300).contains(&k.code)
        })
        .map(|(_, n)| n)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_pod_is_written_twice_when_placed_and_three_times_when_updated_in_place() {
    const NODES: usize = 20;
    let (cluster, client) = cluster(NODES).await;
    let running = Running::start(&client);
    create(
        &client,
        &daemonset(
            "agent",
            json!({"updateStrategy": {"rollingUpdate": {
                "rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": "100%"}}}),
        ),
    )
    .await;
    let nodes = node_names(&client).await;
    let first = wait_for_pods(&client, "agent", &nodes, "nginx:1").await;
    wait_status(&client, "agent", "every pod placed and Ready", |s| {
        s.number_ready == NODES as i32 && s.updated_number_scheduled == NODES as i32
    })
    .await;

    // The create, then InPlaceUpdateReady True.
    let before = pod_writes(&cluster);
    assert_eq!(before, 2 * NODES as u64);
    patch_set(
        &client,
        "agent",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}}),
    )
    .await;
    wait_status(&client, "agent", "every pod updated and Ready", |s| {
        s.updated_number_scheduled == NODES as i32 && s.number_ready == NODES as i32
    })
    .await;
    let updated = wait_for_pods(&client, "agent", &nodes, "nginx:2").await;
    assert_eq!(uid_by_name(&updated), uid_by_name(&first));
    // Stopped: every reconcile has finished, nothing more can be written.
    running.stop().await;
    // InPlaceUpdateReady False with the state, the image patch, InPlaceUpdateReady True.
    assert_eq!(pod_writes(&cluster) - before, 3 * NODES as u64);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_only_failed_in_place_condition_writes_are_retried_until_every_pod_is_ready() {
    let (sim, client) = sim(3).await;
    // The controller sees every error itself (no client-side retries).
    let running = Running::start(&sim.client_without_retries().unwrap());
    create(
        &client,
        &daemonset(
            "sturdy",
            json!({"updateStrategy": {"rollingUpdate": {
                "rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": "100%"}}}),
        ),
    )
    .await;
    let nodes = node_names(&client).await;
    let first = wait_for_pods(&client, "sturdy", &nodes, "nginx:1").await;

    // Condition writes fail: the unready ones of the updates, then those made as the
    // kubelet finishes (from the pod events or the passes).
    sim.faults().add(
        kruise_sim::FaultRule::new()
            .verb("patch")
            .resource("pods")
            .subresource("status")
            .error(500, 1.0)
            .times(5),
    );
    patch_set(
        &client,
        "sturdy",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}}),
    )
    .await;
    let updated = wait_for_pods(&client, "sturdy", &nodes, "nginx:2").await;
    assert_eq!(uid_by_name(&updated), uid_by_name(&first));
    for pod in &updated {
        assert_eq!(
            condition(pod, "InPlaceUpdateReady").as_deref(),
            Some("True")
        );
    }
    let refused: u64 = sim
        .counters()
        .snapshot()
        .into_iter()
        .filter(|(k, _)| k.resource == "pods" && k.subresource == "status" && k.code == 500)
        .map(|(_, n)| n)
        .sum();
    assert_eq!(refused, 5, "every injected failure was met");
    running.stop().await;
}
