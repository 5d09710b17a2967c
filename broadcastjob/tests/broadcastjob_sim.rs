//! The BroadcastJob controller against kruise-sim, or the real API server of
//! `KRUISE_TEST_KUBECONFIG`: the scheduler binds the pods by their node affinity and the
//! simulated kubelet runs them to their exit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_broadcastjob::api::v1beta1::BroadcastJob;
use kube::ResourceExt as _;
use kube::api::{Api, PostParams};
use serde_json::json;
use support::*;

async fn create(client: &kube::Client, job: &BroadcastJob) {
    Api::<BroadcastJob>::default_namespaced(client.clone())
        .create(&PostParams::default(), job)
        .await
        .unwrap();
}

fn is_active(p: &Pod) -> bool {
    let phase = p
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending");
    p.metadata.deletion_timestamp.is_none() && phase != "Succeeded" && phase != "Failed"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_on_four_nodes_completes_with_four_succeeded_then_its_ttl_deletes_it() {
    let (cluster, client) = cluster_with_crds(4).await;
    let controllers = Controllers::start(&client);
    create(
        &client,
        &broadcastjob(
            "everywhere",
            json!({"template": job_template("300ms", 0), "completionPolicy": {"ttlSecondsAfterFinished": 2}}),
        ),
    )
    .await;
    let done = eventually("the job completes", WAIT, || {
        let client = client.clone();
        async move {
            get_job(&client, "everywhere")
                .await
                .filter(|j| j.status.as_ref().is_some_and(|s| s.phase == "completed"))
        }
    })
    .await;
    let status = done.status.unwrap();
    assert_eq!(
        (
            status.desired,
            status.succeeded,
            status.failed,
            status.active
        ),
        (4, 4, 0, 0)
    );
    assert_eq!(status.conditions[0].type_, "Complete");
    let pods = pods_of(&client, "everywhere").await;
    let nodes: BTreeSet<String> = pods
        .iter()
        .filter_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
        .collect();
    assert_eq!(pods.len(), 4, "one pod per node");
    assert_eq!(nodes.len(), 4, "{nodes:?}");
    eventually("the TTL deletes the job", WAIT, || {
        let client = client.clone();
        async move { get_job(&client, "everywhere").await.is_none().then_some(()) }
    })
    .await;
    controllers.stop().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallelism_one_runs_one_node_at_a_time() {
    let (cluster, client) = cluster_with_crds(3).await;
    let controllers = Controllers::start(&client);
    create(
        &client,
        &broadcastjob(
            "serial",
            json!({"template": job_template("200ms", 0), "parallelism": 1}),
        ),
    )
    .await;
    let mut most_active = 0;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let pods = pods_of(&client, "serial").await;
        most_active = most_active.max(pods.iter().filter(|p| is_active(p)).count());
        let job = get_job(&client, "serial").await.unwrap();
        if job.status.as_ref().is_some_and(|s| s.phase == "completed") {
            assert_eq!(job.status.unwrap().succeeded, 3);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not completed: {:?}",
            job.status
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(most_active, 1);
    controllers.stop().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_fast_fails_the_job_on_a_failing_container_and_leaves_no_pod_running() {
    let (cluster, client) = cluster_with_crds(3).await;
    let controllers = Controllers::start(&client);
    create(
        &client,
        &broadcastjob("failing", json!({"template": job_template("200ms", 3)})),
    )
    .await;
    let failed = eventually("the job fails", WAIT, || {
        let client = client.clone();
        async move {
            get_job(&client, "failing")
                .await
                .filter(|j| j.status.as_ref().is_some_and(|s| s.phase == "failed"))
        }
    })
    .await;
    let status = failed.status.unwrap();
    assert!(status.failed >= 1, "{status:?}");
    assert_eq!(status.conditions[0].type_, "Failed");
    assert_eq!(status.conditions[0].reason, "failed pod is found");
    eventually("no pod of the job runs", WAIT, || {
        let client = client.clone();
        async move {
            let pods = pods_of(&client, "failing").await;
            (!pods.iter().any(is_active)).then_some(())
        }
    })
    .await;
    kruise_testkit::wait_for_warning(
        &client,
        client.default_namespace(),
        "failing",
        "failed pod is found",
    )
    .await;
    controllers.stop().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_never_job_runs_on_a_node_whose_taint_is_removed() {
    // K#1199 and node churn: a node that becomes fit gets its pod, a Never job stays running.
    let (cluster, client) = cluster_with_crds(2).await;
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let patch =
        |taints: serde_json::Value| kube::api::Patch::Merge(json!({"spec": {"taints": taints}}));
    nodes
        .patch(
            "sim-node-1",
            &kube::api::PatchParams::default(),
            &patch(json!([{"key": "maintenance", "value": "x", "effect": "NoSchedule"}])),
        )
        .await
        .unwrap();
    let controllers = Controllers::start(&client);
    create(
        &client,
        &broadcastjob(
            "daemonish",
            json!({"template": job_template("100ms", 0), "completionPolicy": {"type": "Never"}}),
        ),
    )
    .await;
    eventually("node 0 ran its pod", WAIT, || {
        let client = client.clone();
        async move {
            get_job(&client, "daemonish").await.filter(|j| {
                j.status
                    .as_ref()
                    .is_some_and(|s| s.succeeded == 1 && s.desired == 1)
            })
        }
    })
    .await;
    nodes
        .patch(
            "sim-node-1",
            &kube::api::PatchParams::default(),
            &patch(json!(null)),
        )
        .await
        .unwrap();
    let job = eventually("node 1 ran its pod once untainted", WAIT, || {
        let client = client.clone();
        async move {
            get_job(&client, "daemonish").await.filter(|j| {
                j.status
                    .as_ref()
                    .is_some_and(|s| s.succeeded == 2 && s.desired == 2)
            })
        }
    })
    .await;
    assert_eq!(job.status.unwrap().phase, "running");
    let pods = pods_of(&client, "daemonish").await;
    assert_eq!(
        pods.len(),
        2,
        "{:?}",
        pods.iter().map(|p| p.name_any()).collect::<Vec<_>>()
    );
    controllers.stop().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deadline_holds_across_a_controller_restart() {
    // K#1409: the restarted controller fails the job at its deadline with no other event.
    let (cluster, client) = cluster_with_crds(2).await;
    let controllers = Controllers::start(&client);
    create(
        &client,
        &broadcastjob(
            "slow",
            json!({"template": job_template("10m", 0), "completionPolicy": {"activeDeadlineSeconds": 3}}),
        ),
    )
    .await;
    eventually("both pods running", WAIT, || {
        let client = client.clone();
        async move {
            let pods = pods_of(&client, "slow").await;
            let running = pods
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .count();
            (running == 2).then_some(())
        }
    })
    .await;
    controllers.stop().await;
    let controllers = Controllers::start(&client);
    let failed = eventually("the job fails at its deadline", WAIT, || {
        let client = client.clone();
        async move {
            get_job(&client, "slow")
                .await
                .filter(|j| j.status.as_ref().is_some_and(|s| s.phase == "failed"))
        }
    })
    .await;
    let status = failed.status.unwrap();
    assert_eq!(status.conditions[0].reason, "DeadlineExceeded");
    let started = status.start_time.unwrap().0;
    let finished = status.completion_time.unwrap().0;
    assert!(
        finished.duration_since(started) >= jiff::SignedDuration::from_secs(3),
        "failed {} after its start",
        finished.duration_since(started)
    );
    eventually("its pods are deleted", WAIT, || {
        let client = client.clone();
        async move { (!pods_of(&client, "slow").await.iter().any(is_active)).then_some(()) }
    })
    .await;
    controllers.stop().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_job_that_bypassed_the_webhook_is_reported_not_run() {
    let (cluster, client) = cluster_with_crds(2).await;
    let controllers = Controllers::start(&client);
    let mut template = job_template("100ms", 0);
    template["spec"]["restartPolicy"] = json!("Always");
    create(
        &client,
        &broadcastjob("invalid", json!({"template": template})),
    )
    .await;
    let message = kruise_testkit::wait_for_warning(
        &client,
        client.default_namespace(),
        "invalid",
        "InvalidSpec",
    )
    .await;
    assert!(
        message.contains("spec.template.spec.restartPolicy: Invalid value: \"Always\""),
        "{message}"
    );
    assert!(pods_of(&client, "invalid").await.is_empty());
    controllers.stop().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_scheduler_pods_are_bound_by_node_name() {
    // `--assign-bcj-pods-by-scheduler=false`.
    let (cluster, client) = cluster_with_crds(2).await;
    let controllers = Controllers::start_binding(
        &client,
        None,
        kruise_broadcastjob::plan::broadcastjob::PodBinding::NodeName,
    );
    create(
        &client,
        &broadcastjob("named", json!({"template": job_template("100ms", 0)})),
    )
    .await;
    eventually("the job completes", WAIT, || {
        let client = client.clone();
        async move {
            get_job(&client, "named").await.filter(|j| {
                j.status
                    .as_ref()
                    .is_some_and(|s| s.phase == "completed" && s.succeeded == 2)
            })
        }
    })
    .await;
    for pod in pods_of(&client, "named").await {
        let spec = pod.spec.unwrap();
        assert!(spec.affinity.is_none(), "bound by nodeName, not affinity");
        assert!(spec.node_name.is_some());
    }
    controllers.stop().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_never_job_follows_nodes_that_join_and_leave() {
    let (cluster, client) = cluster_with_crds(2).await;
    let controllers = Controllers::start(&client);
    create(
        &client,
        &broadcastjob(
            "follow",
            json!({"template": job_template("100ms", 0), "completionPolicy": {"type": "Never"}}),
        ),
    )
    .await;
    let status_is = |desired: i32, succeeded: i32| {
        let client = client.clone();
        move || {
            let client = client.clone();
            async move {
                get_job(&client, "follow").await.filter(|j| {
                    j.status
                        .as_ref()
                        .is_some_and(|s| s.desired == desired && s.succeeded == succeeded)
                })
            }
        }
    };
    eventually("both nodes ran their pod", WAIT, status_is(2, 2)).await;
    // A node joins (a kubelet-less Node object: its pod is bound, never run).
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let joined: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
        "metadata": {"name": "joined", "labels": {"kubernetes.io/hostname": "joined"}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &joined).await.unwrap();
    eventually("a pod for the node that joined", WAIT, || {
        let client = client.clone();
        async move {
            let pods = pods_of(&client, "follow").await;
            pods.iter()
                .any(|p| {
                    kruise_broadcastjob::plan::broadcastjob::assigned_node(p).as_deref()
                        == Some("joined")
                })
                .then_some(())
        }
    })
    .await;
    eventually("desired counts the new node", WAIT, || {
        let client = client.clone();
        async move {
            get_job(&client, "follow").await.filter(|j| {
                j.status
                    .as_ref()
                    .is_some_and(|s| s.desired == 3 && s.active == 1)
            })
        }
    })
    .await;
    // It leaves again: no longer desired.
    nodes.delete("joined", &Default::default()).await.unwrap();
    let job = eventually("desired drops with the node", WAIT, || {
        let client = client.clone();
        async move {
            get_job(&client, "follow")
                .await
                .filter(|j| j.status.as_ref().is_some_and(|s| s.desired == 2))
        }
    })
    .await;
    assert_eq!(job.status.unwrap().phase, "running");
    assert_eq!(
        pods_of(&client, "follow").await.len(),
        3,
        "no pod made twice"
    );
    controllers.stop().await;
    cluster.shutdown().await;
}
