//! Nodes, scheduler and kubelet: a simulator started with `nodes: 3` behaves like a
//! small cluster for pods.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::common::{eventually, sim_with};

async fn cluster() -> kruise_sim::Sim {
    sim_with(kruise_sim::SimConfig {
        nodes: 3,
        ..Default::default()
    })
    .await
}

fn pod(name: &str, spec: Value) -> Pod {
    let mut p = json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]},
    });
    if let (Some(s), Some(extra)) = (p["spec"].as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            s.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(p).unwrap()
}

fn cond(p: &Pod, ty: &str) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == ty)
        .map(|c| c.status.clone())
}

fn cond_message(p: &Pod, ty: &str) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == ty)
        .and_then(|c| c.message.clone())
}

async fn node_of(api: &Api<Pod>, name: &str) -> String {
    eventually(5, &format!("{name} scheduled"), || async {
        api.get(name)
            .await
            .ok()
            .and_then(|p| p.spec.and_then(|s| s.node_name))
    })
    .await
}

async fn ready(api: &Api<Pod>, name: &str) -> Pod {
    eventually(5, &format!("{name} Ready"), || async {
        api.get(name)
            .await
            .ok()
            .filter(|p| cond(p, "Ready").as_deref() == Some("True"))
    })
    .await
}

/// Events about pod `name` with `reason` (waiting until there is at least one).
async fn events_for(
    sim: &kruise_sim::Sim,
    name: &str,
    reason: &str,
) -> Vec<k8s_openapi::api::core::v1::Event> {
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(sim.client().unwrap(), "default");
    eventually(5, &format!("{reason} event for {name}"), || async {
        let lp =
            ListParams::default().fields(&format!("involvedObject.name={name},reason={reason}"));
        let list = events.list(&lp).await.ok()?.items;
        (!list.is_empty()).then_some(list)
    })
    .await
}

async fn unschedulable_message(api: &Api<Pod>, name: &str) -> String {
    eventually(5, &format!("{name} Unschedulable"), || async {
        let p = api.get(name).await.ok()?;
        (cond(&p, "PodScheduled").as_deref() == Some("False"))
            .then(|| cond_message(&p, "PodScheduled"))
            .flatten()
    })
    .await
}

#[tokio::test]
async fn nodes_are_registered_ready_with_labels() {
    let sim = cluster().await;
    let nodes: Api<Node> = Api::all(sim.client().unwrap());
    let list = nodes.list(&ListParams::default()).await.unwrap();
    let names: Vec<String> = list
        .items
        .iter()
        .map(|n| n.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["sim-node-0", "sim-node-1", "sim-node-2"]);
    let mut zones = std::collections::BTreeSet::new();
    for n in &list.items {
        let labels = n.metadata.labels.clone().unwrap();
        assert_eq!(labels["kubernetes.io/os"], "linux");
        assert_eq!(labels["kubernetes.io/arch"], "amd64");
        assert_eq!(
            labels["kubernetes.io/hostname"],
            n.metadata.name.clone().unwrap()
        );
        zones.insert(labels["topology.kubernetes.io/zone"].clone());
        let st = n.status.clone().unwrap();
        assert_eq!(st.allocatable.unwrap()["pods"].0, "110");
        let ready = st.conditions.unwrap();
        assert!(
            ready
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        );
    }
    assert_eq!(zones.len(), 3);
    sim.shutdown().await;
}

#[tokio::test]
async fn scheduling_constraints() {
    let sim = cluster().await;
    let client = sim.client().unwrap();
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();

    // nodeName preset: the scheduler leaves it alone, the kubelet runs it.
    api.create(&pp, &pod("preset", json!({"nodeName": "sim-node-2"})))
        .await
        .unwrap();
    ready(&api, "preset").await;
    assert_eq!(node_of(&api, "preset").await, "sim-node-2");

    // nodeSelector.
    api.create(
        &pp,
        &pod(
            "selector",
            json!({"nodeSelector": {"kubernetes.io/hostname": "sim-node-1"}}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(node_of(&api, "selector").await, "sim-node-1");

    // Required affinity by label expression and by matchFields metadata.name.
    let affinity = |term: Value| json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}});
    api.create(
        &pp,
        &pod(
            "zone",
            affinity(json!({"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["sim-zone-a"]}]})),
        ),
    )
    .await
    .unwrap();
    assert_eq!(node_of(&api, "zone").await, "sim-node-0");
    api.create(
        &pp,
        &pod(
            "fields",
            affinity(json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["sim-node-2"]}]})),
        ),
    )
    .await
    .unwrap();
    assert_eq!(node_of(&api, "fields").await, "sim-node-2");

    // Unsatisfiable affinity: the scheduler's FitError message.
    api.create(
        &pp,
        &pod(
            "nowhere",
            json!({"nodeSelector": {"kubernetes.io/hostname": "missing"}}),
        ),
    )
    .await
    .unwrap();
    let msg = unschedulable_message(&api, "nowhere").await;
    assert!(
        msg.starts_with(
            "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
        ),
        "{msg}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn taints_tolerations_unschedulable_and_resources() {
    let sim = cluster().await;
    let client = sim.client().unwrap();
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let nodes: Api<Node> = Api::all(client.clone());
    let pp = PostParams::default();
    let taint = json!({"spec": {"taints": [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]}});
    for n in ["sim-node-0", "sim-node-1"] {
        nodes
            .patch(n, &PatchParams::default(), &Patch::Merge(taint.clone()))
            .await
            .unwrap();
    }
    nodes
        .patch(
            "sim-node-2",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": true}})),
        )
        .await
        .unwrap();
    api.create(&pp, &pod("plain", json!({}))).await.unwrap();
    let msg = unschedulable_message(&api, "plain").await;
    assert!(
        msg.starts_with("0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) had untolerated taint {dedicated: infra}."),
        "{msg}"
    );
    // A toleration opens the tainted nodes.
    api.create(
        &pp,
        &pod(
            "tolerant",
            json!({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}]}),
        ),
    )
    .await
    .unwrap();
    let n = node_of(&api, "tolerant").await;
    assert!(n == "sim-node-0" || n == "sim-node-1", "{n}");
    // Making the node schedulable again retries the pending pod.
    nodes
        .patch(
            "sim-node-2",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": null}})),
        )
        .await
        .unwrap();
    assert_eq!(node_of(&api, "plain").await, "sim-node-2");

    // Resource fit: sim-node-2 has 8 cpus; "plain" requests nothing.
    let big = |name: &str, cpu: &str| {
        pod(
            name,
            json!({"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}),
        )
    };
    api.create(&pp, &big("big-1", "6")).await.unwrap();
    assert_eq!(node_of(&api, "big-1").await, "sim-node-2");
    api.create(&pp, &big("big-2", "3")).await.unwrap();
    let msg = unschedulable_message(&api, "big-2").await;
    assert!(
        msg.starts_with("0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {dedicated: infra}."),
        "{msg}"
    );
    // The scheduler's events, as `kubectl describe pod` shows them.
    let failed = events_for(&sim, "big-2", "FailedScheduling").await;
    assert_eq!(
        failed.len(),
        1,
        "recorded once while the message is unchanged"
    );
    assert_eq!(failed[0].type_.as_deref(), Some("Warning"));
    assert_eq!(failed[0].message.as_deref(), Some(msg.as_str()));
    let scheduled = events_for(&sim, "big-1", "Scheduled").await;
    assert_eq!(
        scheduled[0].message.as_deref(),
        Some("Successfully assigned default/big-1 to sim-node-2")
    );
    // Freeing the cpu lets it schedule.
    api.delete("big-1", &DeleteParams::default()).await.unwrap();
    assert_eq!(node_of(&api, "big-2").await, "sim-node-2");
    sim.shutdown().await;
}

#[tokio::test]
async fn an_unschedulable_pod_waits_for_its_spec_or_the_cluster_to_change() {
    let sim = cluster().await;
    let client = sim.client().unwrap();
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let nodes: Api<Node> = Api::all(client.clone());
    let pp = PostParams::default();
    let taint = json!({"spec": {"taints": [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]}});
    for n in ["sim-node-0", "sim-node-1", "sim-node-2"] {
        nodes
            .patch(n, &PatchParams::default(), &Patch::Merge(taint.clone()))
            .await
            .unwrap();
    }
    api.create(&pp, &pod("waiting", json!({}))).await.unwrap();
    unschedulable_message(&api, "waiting").await;
    // Other pods coming and going leave it where it is (and cost no pass over it).
    api.create(
        &pp,
        &pod(
            "other",
            json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]}),
        ),
    )
    .await
    .unwrap();
    node_of(&api, "other").await;
    assert_eq!(
        events_for(&sim, "waiting", "FailedScheduling").await.len(),
        1
    );
    // A toleration added to its spec (pods may gain tolerations) is retried at once.
    api.patch(
        "waiting",
        &PatchParams::default(),
        &Patch::Strategic(
            json!({"spec": {"tolerations": [{"key": "dedicated", "operator": "Exists"}]}}),
        ),
    )
    .await
    .unwrap();
    assert!(node_of(&api, "waiting").await.starts_with("sim-node-"));
    sim.shutdown().await;
}

#[tokio::test]
async fn pods_spread_over_nodes() {
    let sim = cluster().await;
    let api: Api<Pod> = Api::namespaced(sim.client().unwrap(), "default");
    for i in 0..6 {
        api.create(&PostParams::default(), &pod(&format!("p{i}"), json!({})))
            .await
            .unwrap();
    }
    let mut per_node = std::collections::BTreeMap::new();
    for i in 0..6 {
        *per_node
            .entry(node_of(&api, &format!("p{i}")).await)
            .or_insert(0) += 1;
    }
    assert_eq!(per_node.values().copied().collect::<Vec<_>>(), [2, 2, 2]);
    sim.shutdown().await;
}

#[tokio::test]
async fn pod_lifecycle_phases_conditions_and_statuses() {
    let sim = cluster().await;
    let api: Api<Pod> = Api::namespaced(sim.client().unwrap(), "default");
    let p = pod(
        "web",
        json!({
            "initContainers": [{"name": "init", "image": "busybox"}],
            "containers": [{"name": "a", "image": "nginx:1.25"}, {"name": "b", "image": "redis:7"}],
        }),
    );
    api.create(&PostParams::default(), &p).await.unwrap();
    let p = ready(&api, "web").await;
    let st = p.status.clone().unwrap();
    assert_eq!(st.phase.as_deref(), Some("Running"));
    for c in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
        assert_eq!(cond(&p, c).as_deref(), Some("True"), "{c}");
    }
    assert!(st.pod_ip.clone().unwrap().starts_with("10.244."));
    assert!(st.host_ip.is_some() && st.start_time.is_some());
    let cs = st.container_statuses.unwrap();
    assert_eq!(cs.len(), 2);
    for c in &cs {
        assert!(c.ready && c.started == Some(true) && c.restart_count == 0);
        assert!(c.container_id.clone().unwrap().starts_with("containerd://"));
        assert!(c.state.clone().unwrap().running.is_some());
    }
    assert!(
        cs[0]
            .image_id
            .starts_with("docker.io/library/nginx@sha256:")
    );
    let init = st.init_container_statuses.unwrap();
    assert_eq!(
        init[0]
            .state
            .clone()
            .unwrap()
            .terminated
            .unwrap()
            .reason
            .as_deref(),
        Some("Completed")
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn readiness_gates_hold_ready_until_true() {
    let sim = cluster().await;
    let api: Api<Pod> = Api::namespaced(sim.client().unwrap(), "default");
    api.create(
        &PostParams::default(),
        &pod(
            "gated",
            json!({"readinessGates": [{"conditionType": "KruisePodReady"}]}),
        ),
    )
    .await
    .unwrap();
    let p = eventually(5, "containers ready", || async {
        api.get("gated")
            .await
            .ok()
            .filter(|p| cond(p, "ContainersReady").as_deref() == Some("True"))
    })
    .await;
    assert_eq!(cond(&p, "Ready").as_deref(), Some("False"));
    assert!(
        cond_message(&p, "Ready")
            .unwrap()
            .contains("readiness gate \"KruisePodReady\"")
    );
    api.patch_status(
        "gated",
        &PatchParams::default(),
        &Patch::Strategic(
            json!({"status": {"conditions": [{"type": "KruisePodReady", "status": "True"}]}}),
        ),
    )
    .await
    .unwrap();
    let p = ready(&api, "gated").await;
    // The kubelet kept the condition another writer owns.
    assert_eq!(cond(&p, "KruisePodReady").as_deref(), Some("True"));
    sim.shutdown().await;
}

#[tokio::test]
async fn image_change_restarts_only_that_container() {
    let sim = cluster().await;
    let api: Api<Pod> = Api::namespaced(sim.client().unwrap(), "default");
    api.create(
        &PostParams::default(),
        &pod(
            "inplace",
            json!({"containers": [{"name": "a", "image": "nginx:1.25"}, {"name": "b", "image": "redis:7"}]}),
        ),
    )
    .await
    .unwrap();
    let before = ready(&api, "inplace").await;
    let bst = before.status.clone().unwrap();
    let bcs = bst.container_statuses.clone().unwrap();
    api.patch(
        "inplace",
        &PatchParams::default(),
        &Patch::Strategic(json!({"spec": {"containers": [{"name": "a", "image": "nginx:1.26"}]}})),
    )
    .await
    .unwrap();
    let after = eventually(5, "container a restarted and ready", || async {
        let p = api.get("inplace").await.ok()?;
        let cs = p.status.clone()?.container_statuses?;
        (cs[0].restart_count == 1 && cs[0].ready && cond(&p, "Ready").as_deref() == Some("True"))
            .then_some(p)
    })
    .await;
    let ast = after.status.clone().unwrap();
    let acs = ast.container_statuses.clone().unwrap();
    assert_eq!(acs[0].image, "nginx:1.26");
    assert_ne!(acs[0].image_id, bcs[0].image_id);
    assert_ne!(acs[0].container_id, bcs[0].container_id);
    assert!(acs[0].last_state.clone().unwrap().terminated.is_some());
    // The other container is untouched.
    assert_eq!(acs[1].restart_count, 0);
    assert_eq!(acs[1].container_id, bcs[1].container_id);
    assert_eq!(acs[1].image_id, bcs[1].image_id);
    // Same pod: uid, IP, node.
    assert_eq!(after.metadata.uid, before.metadata.uid);
    assert_eq!(ast.pod_ip, bst.pod_ip);
    assert_eq!(
        after.spec.clone().unwrap().node_name,
        before.spec.clone().unwrap().node_name
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn job_pods_exit_with_the_configured_code() {
    let sim = cluster().await;
    let api: Api<Pod> = Api::namespaced(sim.client().unwrap(), "default");
    for (name, code, policy) in [("ok", "0", "Never"), ("bad", "3", "OnFailure")] {
        let mut p = pod(name, json!({"restartPolicy": policy}));
        p.metadata.annotations = Some(
            [
                ("sim.kruise.io/exit-after".to_string(), "200ms".to_string()),
                ("sim.kruise.io/exit-code".to_string(), code.to_string()),
            ]
            .into(),
        );
        api.create(&PostParams::default(), &p).await.unwrap();
    }
    for (name, phase, code) in [("ok", "Succeeded", 0), ("bad", "Failed", 3)] {
        let p = eventually(5, &format!("{name} {phase}"), || async {
            api.get(name)
                .await
                .ok()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some(phase))
        })
        .await;
        let cs = p.status.clone().unwrap().container_statuses.unwrap();
        let t = cs[0].state.clone().unwrap().terminated.unwrap();
        assert_eq!(t.exit_code, code);
        assert_eq!(cond(&p, "Ready").as_deref(), Some("False"));
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn job_containers_that_only_sleep_exit_when_the_sleep_is_over() {
    let sim = cluster().await;
    let api: Api<Pod> = Api::namespaced(sim.client().unwrap(), "default");
    let with = |name: &str, policy: &str, containers: serde_json::Value| {
        pod(
            name,
            json!({"restartPolicy": policy, "containers": containers}),
        )
    };
    let pp = PostParams::default();
    for p in [
        with(
            "sleeps",
            "Never",
            json!([{"name": "box", "image": "busybox:1.36", "command": ["/bin/sh", "-c", "sleep 1"]},
                   {"name": "args", "image": "busybox:1.36", "command": ["sleep"], "args": ["2"]}]),
        ),
        // A command that does more, or the image's own entrypoint, keeps running.
        with(
            "serves",
            "Never",
            json!([{"name": "box", "image": "busybox:1.36", "command": ["/bin/sh", "-c", "sleep 1"]},
                   {"name": "web", "image": "nginx:1.25"}]),
        ),
        // Under restartPolicy Always the kubelet would restart it; kruise-sim keeps it running.
        with(
            "always",
            "Always",
            json!([{"name": "box", "image": "busybox:1.36", "command": ["sleep", "1"]}]),
        ),
    ] {
        api.create(&pp, &p).await.unwrap();
    }
    let done = eventually(10, "sleeps Succeeded", || async {
        api.get("sleeps")
            .await
            .ok()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded"))
    })
    .await;
    for cs in done.status.unwrap().container_statuses.unwrap() {
        let t = cs.state.unwrap().terminated.unwrap();
        assert_eq!(t.exit_code, 0, "{}", cs.name);
    }
    for name in ["serves", "always"] {
        let p = api.get(name).await.unwrap();
        assert_eq!(
            p.status.and_then(|s| s.phase).as_deref(),
            Some("Running"),
            "{name}"
        );
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn an_image_from_an_unresolvable_registry_never_starts() {
    let sim = cluster().await;
    let api: Api<Pod> = Api::namespaced(sim.client().unwrap(), "default");
    const INVALID: &str = "invalid.registry.k8s.io/invalid/alpine:3.1";
    let waiting = |p: &Pod| {
        let cs = p.status.clone()?.container_statuses?;
        let w = cs[0].state.clone()?.waiting?;
        Some((w.reason?, cs[0].ready, cs[0].restart_count))
    };
    let pp = PostParams::default();
    api.create(
        &pp,
        &pod(
            "never",
            json!({"containers": [{"name": "c", "image": INVALID}]}),
        ),
    )
    .await
    .unwrap();
    let p = eventually(5, "never: ImagePullBackOff", || async {
        let p = api.get("never").await.ok()?;
        (waiting(&p)?.0 == "ImagePullBackOff").then_some(p)
    })
    .await;
    assert_eq!(p.status.clone().unwrap().phase.as_deref(), Some("Pending"));
    assert_eq!(cond(&p, "Ready").as_deref(), Some("False"));
    let message = p.status.unwrap().container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .waiting
        .unwrap()
        .message
        .unwrap();
    assert!(
        message.contains("no such host"),
        "the runtime's reason: {message}"
    );

    // A running container updated to the image is killed and its replacement never
    // starts; updated back, it runs again.
    api.create(&pp, &pod("update", json!({}))).await.unwrap();
    ready(&api, "update").await;
    let image_patch = |image: &str| {
        Patch::Strategic(json!({"spec": {"containers": [{"name": "c", "image": image}]}}))
    };
    api.patch("update", &PatchParams::default(), &image_patch(INVALID))
        .await
        .unwrap();
    let p = eventually(5, "update: waiting on the pull", || async {
        let p = api.get("update").await.ok()?;
        waiting(&p)
            .filter(|(reason, _, _)| reason == "ErrImagePull" || reason == "ImagePullBackOff")
            .map(|_| p)
    })
    .await;
    let (_, ready_now, restarts) = waiting(&p).unwrap();
    assert!(!ready_now);
    assert_eq!(restarts, 0, "the replacement was never created");
    let last = p.status.clone().unwrap().container_statuses.unwrap()[0]
        .last_state
        .clone()
        .unwrap();
    assert!(last.terminated.is_some(), "the killed container: {last:?}");
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Running"));
    api.patch(
        "update",
        &PatchParams::default(),
        &image_patch("nginx:1.26"),
    )
    .await
    .unwrap();
    ready(&api, "update").await;
    sim.shutdown().await;
}

#[tokio::test]
async fn a_pod_bound_to_a_node_whose_host_port_is_taken_is_rejected() {
    let sim = cluster().await;
    let api: Api<Pod> = Api::namespaced(sim.client().unwrap(), "default");
    let on_node = |name: &str| {
        pod(
            name,
            json!({"nodeName": "sim-node-0", "containers": [{"name": "c", "image": "nginx:1.25",
                "ports": [{"containerPort": 80, "hostPort": 21017}]}]}),
        )
    };
    let pp = PostParams::default();
    api.create(&pp, &on_node("holder")).await.unwrap();
    ready(&api, "holder").await;
    api.create(&pp, &on_node("second")).await.unwrap();
    let rejected = eventually(5, "second Failed", || async {
        api.get("second")
            .await
            .ok()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed"))
    })
    .await;
    let status = rejected.status.unwrap();
    assert_eq!(status.reason.as_deref(), Some("NodePorts"));
    assert_eq!(status.container_statuses, None, "no container was created");
    // Once the holder is gone the port is free again.
    api.delete("holder", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    eventually(5, "holder gone", || async {
        api.get_opt("holder")
            .await
            .ok()
            .and_then(|o| o.is_none().then_some(()))
    })
    .await;
    api.create(&pp, &on_node("third")).await.unwrap();
    ready(&api, "third").await;
    sim.shutdown().await;
}

#[tokio::test]
async fn graceful_deletion_completes() {
    let sim = cluster().await;
    let api: Api<Pod> = Api::namespaced(sim.client().unwrap(), "default");
    api.create(&PostParams::default(), &pod("bye", json!({})))
        .await
        .unwrap();
    ready(&api, "bye").await;
    let res = api.delete("bye", &DeleteParams::default()).await.unwrap();
    // Bound and running: the delete only marks it terminating (30s grace) ...
    assert!(res.is_left());
    // ... and the kubelet removes it well before the grace period ends.
    eventually(5, "pod removed", || async {
        api.get_opt("bye")
            .await
            .ok()
            .and_then(|o| o.is_none().then_some(()))
    })
    .await;
    sim.shutdown().await;
}

#[tokio::test]
async fn pre_stop_hook_and_grace_period_bound_termination() {
    let sim = cluster().await;
    let api: Api<Pod> = Api::namespaced(sim.client().unwrap(), "default");
    let with_hook = |name: &str, sleep: u64, grace: i64| {
        pod(
            name,
            json!({
                "terminationGracePeriodSeconds": grace,
                "containers": [{"name": "c", "image": "nginx:1.25",
                    "lifecycle": {"preStop": {"sleep": {"seconds": sleep}}}}],
            }),
        )
    };
    let pp = PostParams::default();
    // The hook runs to completion: 1s of preStop, then the container exits.
    api.create(&pp, &with_hook("hook", 1, 30)).await.unwrap();
    // The grace period cuts a longer hook short: 1s of grace for a 30s hook.
    api.create(&pp, &with_hook("cut", 30, 1)).await.unwrap();
    ready(&api, "hook").await;
    ready(&api, "cut").await;
    let started = std::time::Instant::now();
    for name in ["hook", "cut"] {
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }
    for name in ["hook", "cut"] {
        eventually(10, &format!("{name} removed"), || async {
            api.get_opt(name)
                .await
                .ok()
                .and_then(|o| o.is_none().then_some(()))
        })
        .await;
    }
    let took = started.elapsed();
    assert!(
        took >= std::time::Duration::from_secs(1),
        "removed after {took:?}"
    );
    assert!(
        took < std::time::Duration::from_secs(8),
        "the grace period bounds the 30s hook: {took:?}"
    );
    let killing = events_for(&sim, "hook", "Killing").await;
    assert_eq!(killing[0].message.as_deref(), Some("Stopping container c"));
    assert_eq!(
        killing[0]
            .source
            .as_ref()
            .and_then(|s| s.component.as_deref()),
        Some("kubelet")
    );
    sim.shutdown().await;
}

/// As the kubelet with in-place resize reports them: every running container's status
/// carries `resources` (`{}` when its spec asks for none), which OpenKruise's in-place update
/// waits on before its next priority batch.
#[tokio::test]
async fn a_running_container_reports_its_resources_even_when_it_asks_none() {
    let sim = cluster().await;
    let api: Api<Pod> = Api::namespaced(sim.client().unwrap(), "default");
    let p = pod(
        "res",
        json!({"containers": [
            {"name": "sized", "image": "nginx:1.25", "resources": {"requests": {"cpu": "100m"}}},
            {"name": "plain", "image": "redis:7"},
        ]}),
    );
    api.create(&PostParams::default(), &p).await.unwrap();
    let running = ready(&api, "res").await;
    let statuses = running.status.unwrap().container_statuses.unwrap();
    let by_name = |name: &str| {
        let status = statuses.iter().find(|s| s.name == name).unwrap();
        serde_json::to_value(status).unwrap()
    };
    assert_eq!(by_name("plain")["resources"], json!({}));
    assert!(by_name("plain").get("allocatedResources").is_none());
    assert_eq!(
        by_name("sized")["resources"],
        json!({"requests": {"cpu": "100m"}})
    );
    assert_eq!(
        by_name("sized")["allocatedResources"],
        json!({"cpu": "100m"})
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn resize_subresource_changes_resources_without_restart() {
    let sim = cluster().await;
    let api: Api<Pod> = Api::namespaced(sim.client().unwrap(), "default");
    let p = pod(
        "rz",
        json!({"containers": [{"name": "c", "image": "nginx:1.25", "resources": {
            "requests": {"cpu": "100m", "memory": "64Mi"},
            "limits": {"cpu": "200m", "memory": "128Mi"}}}]}),
    );
    api.create(&PostParams::default(), &p).await.unwrap();
    let before = ready(&api, "rz").await;
    let id = |p: &Pod| {
        p.status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()[0]
            .clone()
    };
    let pp = PatchParams::default();
    let resize = |body: Value| {
        let api = api.clone();
        let pp = pp.clone();
        async move {
            api.patch_subresource("resize", "rz", &pp, &Patch::Strategic(body))
                .await
        }
    };
    resize(json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "150m"}}}]}}))
        .await
        .unwrap();
    let after = eventually(5, "resized resources in status", || async {
        let p = api.get("rz").await.ok()?;
        let cs = id(&p);
        let cpu = cs
            .resources
            .as_ref()?
            .requests
            .as_ref()?
            .get("cpu")?
            .0
            .clone();
        (cpu == "150m").then_some(p)
    })
    .await;
    assert_eq!(id(&after).restart_count, 0, "a resize restarts nothing");
    assert_eq!(id(&after).container_id, id(&before).container_id);

    let reason = |e: kube::Error| match e {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("{other}"),
    };
    let (code, msg) = reason(
        resize(json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"ephemeral-storage": "1Gi"}}}]}}))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(
        msg.contains("only cpu and memory resources are mutable"),
        "{msg}"
    );
    let (_, msg) = reason(
        resize(json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"memory": null}}}]}}))
            .await
            .unwrap_err(),
    );
    assert!(msg.contains("resource requests cannot be removed"), "{msg}");
    let (_, msg) = reason(
        resize(json!({"spec": {"containers": [{"name": "c", "resources": {
            "requests": {"cpu": "200m", "memory": "128Mi"}}}]}}))
        .await
        .unwrap_err(),
    );
    assert!(
        msg.contains("Pod QOS Class may not change as a result of resizing"),
        "{msg}"
    );
    // Resources are not mutable through the pod itself.
    let (code, msg) = reason(
        api.patch(
            "rz",
            &pp,
            &Patch::Strategic(json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "120m"}}}]}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(msg.contains("pod updates may not change fields"), "{msg}");
    sim.shutdown().await;
}

#[tokio::test]
async fn library_default_has_no_nodes_and_leaves_pods_alone() {
    let sim = crate::common::sim().await;
    let client = sim.client().unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    assert!(
        nodes
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let api: Api<Pod> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &pod("idle", json!({})))
        .await
        .unwrap();
    let p = api.get("idle").await.unwrap();
    assert!(p.spec.unwrap().node_name.is_none());
    sim.shutdown().await;
}

#[tokio::test]
async fn per_pod_start_delay_and_resources_in_status() {
    let sim = cluster().await;
    let api: Api<Pod> = Api::namespaced(sim.client().unwrap(), "default");
    let mut p = pod(
        "slow",
        json!({"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "500m"}}}]}),
    );
    p.metadata.annotations =
        Some([("sim.kruise.io/start-delay".to_string(), "2s".to_string())].into());
    api.create(&PostParams::default(), &p).await.unwrap();
    // The kubelet reports the pod (IP, waiting container) before it starts.
    let pending = eventually(5, "Pending with a pod IP", || async {
        api.get("slow").await.ok().filter(|p| {
            let st = p.status.clone().unwrap_or_default();
            st.phase.as_deref() == Some("Pending") && st.pod_ip.is_some()
        })
    })
    .await;
    let cs = pending.status.unwrap().container_statuses.unwrap();
    assert_eq!(
        cs[0]
            .state
            .clone()
            .unwrap()
            .waiting
            .unwrap()
            .reason
            .as_deref(),
        Some("ContainerCreating")
    );
    assert!(!cs[0].ready && cs[0].started == Some(false));
    let p = ready(&api, "slow").await;
    let cs = p.status.unwrap().container_statuses.unwrap();
    let res = cs[0].resources.clone().unwrap();
    assert_eq!(res.requests.unwrap()["cpu"].0, "250m");
    assert_eq!(res.limits.unwrap()["cpu"].0, "500m");
    sim.shutdown().await;
}

#[tokio::test]
async fn few_writes_and_no_churn_once_ready() {
    let sim = cluster().await;
    let mut rx = sim.store().subscribe();
    let api: Api<Pod> = Api::namespaced(sim.client().unwrap(), "default");
    api.create(&PostParams::default(), &pod("quiet", json!({})))
        .await
        .unwrap();
    ready(&api, "quiet").await;
    // A second pod going through its whole lifecycle gives the first time to churn.
    api.create(&PostParams::default(), &pod("marker", json!({})))
        .await
        .unwrap();
    ready(&api, "marker").await;
    let mut writes = 0;
    while let Ok(ev) = rx.try_recv() {
        if ev.gr.resource == "pods" && ev.name == "quiet" {
            writes += 1;
        }
    }
    // create, binding (nodeName + PodScheduled), kubelet: Pending, Running, Ready.
    assert_eq!(writes, 6);
    sim.shutdown().await;
}

#[tokio::test]
async fn post_start_hook_holds_the_container_waiting_until_it_is_done() {
    let sim = cluster().await;
    let api: Api<Pod> = Api::namespaced(sim.client().unwrap(), "default");
    let p = pod(
        "post",
        json!({"containers": [
            {"name": "hooked", "image": "nginx:1.25",
             "lifecycle": {"postStart": {"sleep": {"seconds": 1}}}},
            {"name": "plain", "image": "nginx:1.25"}]}),
    );
    let started = std::time::Instant::now();
    api.create(&PostParams::default(), &p).await.unwrap();
    // The plain container runs while the hooked one is still in its hook.
    let status_of = |pod: &Pod, name: &str| {
        pod.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.name == name))
            .cloned()
    };
    let during = eventually(10, "plain running", || async {
        let pod = api.get("post").await.ok()?;
        status_of(&pod, "plain")?
            .state?
            .running
            .is_some()
            .then_some(pod)
    })
    .await;
    if started.elapsed() < std::time::Duration::from_millis(900) {
        let hooked = status_of(&during, "hooked").unwrap();
        assert_eq!(
            hooked.state.unwrap().waiting.unwrap().reason.as_deref(),
            Some("ContainerCreating")
        );
    }
    ready(&api, "post").await;
    assert!(started.elapsed() >= std::time::Duration::from_secs(1));
    // Once shown running, the hooked container reports the runtime's start, as the
    // kubelet does: the same moment as the plain one's, not the end of its hook.
    let pod = api.get("post").await.unwrap();
    let started_at = |name: &str| {
        status_of(&pod, name)
            .and_then(|c| c.state?.running?.started_at)
            .map(|t| t.0)
    };
    assert!(started_at("hooked").is_some());
    assert_eq!(started_at("hooked"), started_at("plain"));
    sim.shutdown().await;
}

#[tokio::test]
async fn every_namespace_has_a_default_service_account_made_again_when_deleted() {
    use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
    let sim = crate::common::sim().await;
    let client = sim.client().unwrap();
    // The namespaces a fresh cluster has, and one created later.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap(),
        )
        .await
        .unwrap();
    for ns in ["default", "kube-system", "team"] {
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
        eventually(5, &format!("{ns}/default ServiceAccount"), || {
            let accounts = accounts.clone();
            async move { accounts.get_opt("default").await.unwrap() }
        })
        .await;
    }
    // Deleted: made again, a new object.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "team");
    let first = accounts.get("default").await.unwrap().metadata.uid;
    accounts
        .delete("default", &DeleteParams::default())
        .await
        .unwrap();
    eventually(5, "the default ServiceAccount made again", || {
        let accounts = accounts.clone();
        let first = first.clone();
        async move {
            accounts
                .get_opt("default")
                .await
                .unwrap()
                .filter(|a| a.metadata.uid != first)
        }
    })
    .await;
}

#[tokio::test]
async fn a_pod_marked_failed_by_another_writer_stays_failed() {
    let sim = cluster().await;
    let api: Api<Pod> = Api::namespaced(sim.client().unwrap(), "default");
    api.create(
        &PostParams::default(),
        &pod(
            "evicted",
            json!({"containers": [{"name": "c", "image": "nginx:1.25"}]}),
        ),
    )
    .await
    .unwrap();
    ready(&api, "evicted").await;
    // What an eviction by a node-pressure manager or a test writes.
    api.patch_status(
        "evicted",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."}})),
    )
    .await
    .unwrap();
    let stopped = eventually(5, "the container stopped", || async {
        let p = api.get("evicted").await.ok()?;
        let c = p
            .status
            .as_ref()?
            .container_statuses
            .as_ref()?
            .first()?
            .clone();
        c.state.as_ref()?.terminated.as_ref().map(|_| p)
    })
    .await;
    // The kubelet's render that stopped the container kept the phase and the writer's
    // reason, and the pod is not Ready.
    let status = stopped.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("Evicted"));
    let ready = status
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.status, "False");
    let terminated = status.container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(terminated.exit_code, 137);
    sim.shutdown().await;
}
