//! The CloneSet controller in-process against kruise-sim, or the real API server of
//! `KRUISE_TEST_KUBECONFIG`: creation, scaling with `scaleStrategy.maxUnavailable`,
//! `podsToDelete`, in-place update, partition, status, and a controller restart mid-rollout
//! — with the API writes counted. The `sim_only_*` tests inject faults, which only the
//! simulator can.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use k8s_openapi::api::core::v1::Pod;
use kruise_cloneset::api::v1beta1::CloneSet;
use kruise_core::api::keys::{
    CLONESET_INSTANCE_ID_KEY, CONTROLLER_REVISION_HASH_KEY, INPLACE_UPDATE_READY,
    INPLACE_UPDATE_STATE_KEY,
};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::json;
use support::{
    RunningController, WAIT, cloneset, cluster_with_crd, eventually, pods_of, set_schedulable,
    sim_with_crd,
};

fn clonesets(client: &Client) -> Api<CloneSet> {
    Api::default_namespaced(client.clone())
}

async fn get(client: &Client, name: &str) -> CloneSet {
    clonesets(client).get(name).await.unwrap()
}

/// Waits until the CloneSet reports `ready` ready pods of `total`, all at the update revision.
async fn wait_rolled_out(client: &Client, name: &str, total: i32) -> CloneSet {
    eventually(
        &format!("{name}: {total} updated ready pods"),
        WAIT,
        || async {
            let cs = get(client, name).await;
            let s = cs.status.clone()?;
            (s.replicas == total
                && s.ready_replicas == total
                && s.available_replicas == total
                && s.updated_ready_replicas == total
                && s.observed_generation == cs.metadata.generation.unwrap_or_default())
            .then_some(cs)
        },
    )
    .await
}

async fn patch_spec(client: &Client, name: &str, spec: serde_json::Value) {
    clonesets(client)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": spec })),
        )
        .await
        .unwrap();
}

async fn event_reasons(client: &Client, name: &str) -> Vec<String> {
    kruise_testkit::events_about(client, client.default_namespace(), name)
        .await
        .into_iter()
        .filter_map(|e| e.reason)
        .collect()
}

/// Successful (2xx) requests with this verb on pods/`subresource`.
fn successful(counters: &kruise_sim::Counters, verb: &str, subresource: &str) -> u64 {
    counters
        .snapshot()
        .into_iter()
        .filter(|(k, _)| {
            k.verb == verb
                && k.resource == "pods"
                && k.subresource == subresource
                && (200..300).contains(&k.code)
        })
        .map(|(_, n)| n)
        .sum()
}

fn container_image(pod: &Pod) -> String {
    pod.spec.as_ref().unwrap().containers[0]
        .image
        .clone()
        .unwrap_or_default()
}

#[tokio::test]
async fn creates_pods_with_identity_and_reports_status() {
    let (cluster, client) = cluster_with_crd().await;
    let controller = RunningController::start(&client);
    clonesets(&client)
        .create(
            &PostParams::default(),
            &cloneset("web", 3, "nginx:1", json!({})),
        )
        .await
        .unwrap();
    let cs = wait_rolled_out(&client, "web", 3).await;
    let status = cs.status.clone().unwrap();
    let uid = cs.uid().unwrap();
    let pods = pods_of(&client, "web").await;
    assert_eq!(pods.len(), 3);
    for pod in &pods {
        let name = pod.name_any();
        let id = pod.labels()[CLONESET_INSTANCE_ID_KEY].clone();
        assert_eq!(name, format!("web-{id}"));
        assert_eq!(id.len(), 5);
        let owner = &pod.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("CloneSet", uid.as_str(), Some(true))
        );
        let gates = pod.spec.as_ref().unwrap().readiness_gates.clone().unwrap();
        assert!(
            gates
                .iter()
                .any(|g| g.condition_type == INPLACE_UPDATE_READY),
            "{gates:?}"
        );
        assert_eq!(
            pod.labels()[CONTROLLER_REVISION_HASH_KEY],
            status.update_revision
        );
        assert_eq!(pod.labels()["app"], "web");
    }
    assert_eq!(status.current_revision, status.update_revision);
    assert_eq!(status.updated_replicas, 3);
    assert_eq!(status.updated_available_replicas, 3);
    assert_eq!(status.expected_updated_replicas, 3);
    assert!(status.label_selector.contains("app=web"), "{status:?}");
    // One create per pod, never more.
    // Per pod: one create, then one status-subresource patch once it is scheduled that
    // carries both InPlaceUpdateReady=True and the PreparingNormal -> Normal labels.
    assert_eq!(cluster.counters().count("create", "pods"), 3);
    assert_eq!(cluster.counters().count_sub("patch", "pods", ""), 0);
    assert_eq!(cluster.counters().count_sub("patch", "pods", "status"), 3);
    assert_eq!(cluster.counters().count("delete", "pods"), 0);
    eventually("SuccessfulCreate events", WAIT, || async {
        let reasons = event_reasons(&client, "web").await;
        (reasons.iter().filter(|r| *r == "SuccessfulCreate").count() >= 3).then_some(())
    })
    .await;
    controller.stop().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn scale_up_respects_max_unavailable_and_pods_to_delete_removes_the_named_pod() {
    let (cluster, client) = cluster_with_crd().await;
    let controller = RunningController::start(&client);
    clonesets(&client)
        .create(
            &PostParams::default(),
            &cloneset(
                "web",
                2,
                "nginx:1",
                json!({"scaleStrategy": {"maxUnavailable": 1}}),
            ),
        )
        .await
        .unwrap();
    wait_rolled_out(&client, "web", 2).await;

    // With the nodes cordoned, the new pods never become ready: one at a time.
    set_schedulable(&client, false).await;
    patch_spec(&client, "web", json!({"replicas": 4})).await;
    eventually("one new pod", WAIT, || async {
        (pods_of(&client, "web").await.len() == 3).then_some(())
    })
    .await;
    eventually("ScaleUpLimited event", WAIT, || async {
        event_reasons(&client, "web")
            .await
            .iter()
            .any(|r| r == "ScaleUpLimited")
            .then_some(())
    })
    .await;
    assert_eq!(pods_of(&client, "web").await.len(), 3);
    set_schedulable(&client, true).await;
    wait_rolled_out(&client, "web", 4).await;
    assert_eq!(cluster.counters().count("create", "pods"), 4);

    // podsToDelete: exactly the named pod goes, a replacement comes, the list is cleaned.
    let victim = pods_of(&client, "web").await[1].name_any();
    patch_spec(
        &client,
        "web",
        json!({"scaleStrategy": {"podsToDelete": [victim.clone()]}}),
    )
    .await;
    eventually("victim replaced and podsToDelete cleaned", WAIT, || async {
        let pods = pods_of(&client, "web").await;
        let cs = get(&client, "web").await;
        (pods.len() == 4
            && pods.iter().all(|p| p.name_any() != victim)
            && cs.spec.scale_strategy.pods_to_delete.is_empty()
            && cs.status?.ready_replicas == 4)
            .then_some(())
    })
    .await;
    assert_eq!(cluster.counters().count("delete", "pods"), 1);
    assert_eq!(cluster.counters().count("create", "pods"), 5);

    // Scale down.
    patch_spec(&client, "web", json!({"replicas": 1})).await;
    wait_rolled_out(&client, "web", 1).await;
    eventually("pods deleted", WAIT, || async {
        (pods_of(&client, "web")
            .await
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .count()
            == 1)
            .then_some(())
    })
    .await;
    assert_eq!(cluster.counters().count("delete", "pods"), 4);
    controller.stop().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn in_place_update_keeps_pod_identity_and_partition_keeps_old_pods() {
    let (cluster, client) = cluster_with_crd().await;
    let controller = RunningController::start(&client);
    clonesets(&client)
        .create(
            &PostParams::default(),
            &cloneset(
                "web",
                3,
                "nginx:1",
                json!({"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1}}}),
            ),
        )
        .await
        .unwrap();
    let before = wait_rolled_out(&client, "web", 3).await;
    let old_pods = pods_of(&client, "web").await;
    let creates = cluster.counters().count("create", "pods");
    let spec_patches = cluster.counters().count_sub("patch", "pods", "");
    let status_patches = successful(cluster.counters(), "patch", "status");

    // Partition 2 of 3: exactly one pod moves to the new image.
    patch_spec(
        &client,
        "web",
        json!({
            "updateStrategy": {"rollingUpdate": {"partition": 2}},
            "template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}
        }),
    )
    .await;
    eventually("one pod updated in place", WAIT, || async {
        let cs = get(&client, "web").await;
        let s = cs.status?;
        (s.updated_replicas == 1
            && s.updated_ready_replicas == 1
            && s.ready_replicas == 3
            && s.update_revision != before.status.as_ref()?.update_revision)
            .then_some(())
    })
    .await;
    let pods = pods_of(&client, "web").await;
    assert_eq!(
        pods.iter()
            .filter(|p| container_image(p) == "nginx:2")
            .count(),
        1
    );

    // Partition 0: all three, in place — same names and uids, restartCount 1.
    patch_spec(
        &client,
        "web",
        json!({"updateStrategy": {"rollingUpdate": {"partition": 0}}}),
    )
    .await;
    let after = eventually("all updated in place", WAIT, || async {
        let cs = get(&client, "web").await;
        let s = cs.status.clone()?;
        (s.updated_ready_replicas == 3
            && s.ready_replicas == 3
            && s.current_revision == s.update_revision)
            .then_some(cs)
    })
    .await;
    let pods = pods_of(&client, "web").await;
    assert_eq!(
        pods.iter()
            .map(|p| (p.name_any(), p.uid()))
            .collect::<Vec<_>>(),
        old_pods
            .iter()
            .map(|p| (p.name_any(), p.uid()))
            .collect::<Vec<_>>()
    );
    // The simulated kubelet restarted the container in place: same node and IP.
    let placement = |p: &Pod| {
        (
            p.name_any(),
            p.spec.as_ref().and_then(|s| s.node_name.clone()),
            p.status.as_ref().and_then(|s| s.pod_ip.clone()),
        )
    };
    assert_eq!(
        pods.iter().map(placement).collect::<Vec<_>>(),
        old_pods.iter().map(placement).collect::<Vec<_>>()
    );
    for pod in &pods {
        assert_eq!(container_image(pod), "nginx:2");
        assert!(pod.annotations().contains_key(INPLACE_UPDATE_STATE_KEY));
        assert_eq!(
            pod.labels()[CONTROLLER_REVISION_HASH_KEY],
            after.status.as_ref().unwrap().update_revision
        );
        let restarts = pod
            .status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()[0]
            .restart_count;
        assert_eq!(restarts, 1, "{}", pod.name_any());
    }
    assert_eq!(cluster.counters().count("create", "pods"), creates);
    assert_eq!(cluster.counters().count("delete", "pods"), 0);
    // Three writes per pod: InPlaceUpdateReady=False (status), the spec patch (image,
    // revision labels, state annotation, lifecycle Updating), and InPlaceUpdateReady=True
    // with the lifecycle back to Normal (status). kruise-sim's kubelet writes in-process,
    // so the counters see only the controller.
    assert_eq!(
        cluster.counters().count_sub("patch", "pods", "") - spec_patches,
        3
    );
    assert_eq!(
        successful(cluster.counters(), "patch", "status") - status_patches,
        6
    );
    eventually("SuccessfulUpdatePodInPlace events", WAIT, || async {
        let reasons = event_reasons(&client, "web").await;
        (reasons
            .iter()
            .filter(|r| *r == "SuccessfulUpdatePodInPlace")
            .count()
            >= 3)
            .then_some(())
    })
    .await;
    controller.stop().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_controller_restart_mid_rollout_does_not_double_create() {
    let (cluster, client) = cluster_with_crd().await;
    set_schedulable(&client, false).await;
    let first = RunningController::start(&client);
    clonesets(&client)
        .create(
            &PostParams::default(),
            &cloneset(
                "web",
                6,
                "nginx:1",
                json!({"scaleStrategy": {"maxUnavailable": 2}}),
            ),
        )
        .await
        .unwrap();
    eventually("the first two pods", WAIT, || async {
        (pods_of(&client, "web").await.len() == 2).then_some(())
    })
    .await;
    first.stop().await;
    let second = RunningController::start(&client);
    set_schedulable(&client, true).await;
    wait_rolled_out(&client, "web", 6).await;
    assert_eq!(pods_of(&client, "web").await.len(), 6);
    assert_eq!(cluster.counters().count("create", "pods"), 6);
    assert_eq!(cluster.counters().count("delete", "pods"), 0);
    second.stop().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn an_invalid_cloneset_gets_a_condition_instead_of_pods() {
    let (cluster, client) = cluster_with_crd().await;
    let controller = RunningController::start(&client);
    // The selector does not match the template labels (no webhook in front of the sim).
    let mut cs = cloneset("bad", 2, "nginx:1", json!({}));
    cs.spec.selector = serde_json::from_value(json!({"matchLabels": {"app": "other"}})).unwrap();
    clonesets(&client)
        .create(&PostParams::default(), &cs)
        .await
        .unwrap();
    let condition = eventually("InvalidSpec condition", WAIT, || async {
        let cs = get(&client, "bad").await;
        cs.status?
            .conditions
            .into_iter()
            .find(|c| c.reason == "InvalidSpec")
    })
    .await;
    assert_eq!(condition.type_, "FailedScale");
    assert!(
        condition.message.contains("spec.template.metadata.labels"),
        "{}",
        condition.message
    );
    eventually("InvalidSpec event", WAIT, || async {
        event_reasons(&client, "bad")
            .await
            .iter()
            .any(|r| r == "InvalidSpec")
            .then_some(())
    })
    .await;
    assert!(pods_of(&client, "bad").await.is_empty());
    assert_eq!(cluster.counters().count("create", "pods"), 0);
    controller.stop().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn sim_only_failed_creates_stop_the_slow_start_batch_and_never_double_create() {
    let (sim, client) = sim_with_crd().await;
    // The controller sees every 500 itself (no client-side retries).
    let controller = RunningController::start(&sim.client_without_retries().unwrap());
    sim.faults().add(
        kruise_sim::FaultRule::new()
            .verb("create")
            .resource("pods")
            .error(500, 1.0)
            .times(2),
    );
    clonesets(&client)
        .create(
            &PostParams::default(),
            &cloneset(
                "web",
                4,
                "nginx:1",
                json!({"scaleStrategy": {"maxUnavailable": 4}}),
            ),
        )
        .await
        .unwrap();
    wait_rolled_out(&client, "web", 4).await;
    // Each failed reconcile tried one pod (a batch of 1) and stopped; then 1 + 2 + 1.
    assert_eq!(sim.counters().answered("create", "pods", "", 500), 2);
    assert_eq!(sim.counters().answered("create", "pods", "", 201), 4);
    assert_eq!(pods_of(&client, "web").await.len(), 4);
    eventually("FailedCreate events", WAIT, || async {
        event_reasons(&client, "web")
            .await
            .iter()
            .any(|r| r == "FailedCreate")
            .then_some(())
    })
    .await;
    controller.stop().await;
    sim.shutdown().await;
}

#[tokio::test]
async fn sim_only_conflicts_and_dropped_watches_do_not_break_the_bounds() {
    let (sim, client) = sim_with_crd().await;
    let controller = RunningController::start(&sim.client_without_retries().unwrap());
    sim.faults().force_conflicts("clonesets", 3);
    clonesets(&client)
        .create(
            &PostParams::default(),
            &cloneset("web", 3, "nginx:1", json!({})),
        )
        .await
        .unwrap();
    wait_rolled_out(&client, "web", 3).await;
    sim.faults().drop_watches();
    patch_spec(&client, "web", json!({"replicas": 5})).await;
    sim.faults().drop_watches();
    wait_rolled_out(&client, "web", 5).await;
    assert_eq!(pods_of(&client, "web").await.len(), 5);
    assert_eq!(sim.counters().count("create", "pods"), 5);
    assert_eq!(sim.counters().count("delete", "pods"), 0);
    controller.stop().await;
    sim.shutdown().await;
}

#[tokio::test]
async fn sim_only_expired_scale_expectations_are_an_event_and_a_metric() {
    let (sim, client) = sim_with_crd().await;
    let controller = RunningController::start_with(
        &sim.client_without_retries().unwrap(),
        kruise_cloneset::controller::Settings {
            namespace: Some(client.default_namespace().into()),
            expectation_timeout: jiff::SignedDuration::from_secs(1),
            ..Default::default()
        },
    );
    clonesets(&client)
        .create(
            &PostParams::default(),
            &cloneset("web", 1, "nginx:1", json!({})),
        )
        .await
        .unwrap();
    eventually("the first pod", WAIT, || async {
        (pods_of(&client, "web").await.len() == 1).then_some(())
    })
    .await;
    // Freeze the controller's pod cache: it cannot list or watch pods any more, so the
    // next create is never observed.
    for verb in ["list", "watch"] {
        sim.faults().add(
            kruise_sim::FaultRule::new()
                .verb(verb)
                .resource("pods")
                .error(500, 1.0),
        );
    }
    sim.faults().drop_watches();
    patch_spec(&client, "web", json!({"replicas": 2})).await;
    eventually("ScaleExpectationsExpired event", WAIT, || async {
        event_reasons(&client, "web")
            .await
            .iter()
            .any(|r| r == "ScaleExpectationsExpired")
            .then_some(())
    })
    .await;
    let metrics = controller.metrics.encode().unwrap();
    assert!(
        metrics.lines().any(
            |l| l.starts_with("kruise_cloneset_scale_expectations_expired_total ")
                && !l.ends_with(" 0")
        ),
        "{metrics}"
    );
    // The status says so too, for `kubectl get cloneset -o yaml` readers.
    eventually("ScaleExpectationsExpired condition", WAIT, || async {
        let cs = clonesets(&client).get("web").await.ok()?;
        cs.status?
            .conditions
            .iter()
            .any(|c| c.type_ == "ScaleExpectationsExpired" && c.status == "True")
            .then_some(())
    })
    .await;
    sim.faults().clear();
    controller.stop().await;
    sim.shutdown().await;
}

#[tokio::test]
async fn each_pod_gets_its_claims_and_they_go_with_it_and_scale_subresource_works() {
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    let (cluster, client) = cluster_with_crd().await;
    let controller = RunningController::start(&client);
    clonesets(&client)
        .create(
            &PostParams::default(),
            &cloneset(
                "web",
                2,
                "nginx:1",
                json!({"volumeClaimTemplates": [{
                    "metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
                }]}),
            ),
        )
        .await
        .unwrap();
    wait_rolled_out(&client, "web", 2).await;
    let claims: Api<PersistentVolumeClaim> = Api::default_namespaced(client.clone());
    let claim_names = || async {
        let mut names: Vec<String> = claims
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .map(|c| c.name_any())
            .collect();
        names.sort();
        names
    };
    let pods = pods_of(&client, "web").await;
    let mut expected: Vec<String> = pods
        .iter()
        .map(|p| format!("data-web-{}", p.labels()[CLONESET_INSTANCE_ID_KEY]))
        .collect();
    expected.sort();
    assert_eq!(claim_names().await, expected);
    for pod in &pods {
        let volumes = pod.spec.as_ref().unwrap().volumes.clone().unwrap();
        let claim = volumes
            .iter()
            .find(|v| v.name == "data")
            .and_then(|v| v.persistent_volume_claim.as_ref())
            .unwrap();
        assert_eq!(
            claim.claim_name,
            format!("data-web-{}", pod.labels()[CLONESET_INSTANCE_ID_KEY])
        );
    }
    assert_eq!(
        cluster.counters().count("create", "persistentvolumeclaims"),
        2
    );

    // `kubectl scale` goes through the scale subresource.
    clonesets(&client)
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    wait_rolled_out(&client, "web", 1).await;
    let remaining = eventually("one pod and its claim", WAIT, || async {
        let pods: Vec<Pod> = pods_of(&client, "web")
            .await
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let names = claim_names().await;
        (pods.len() == 1 && names.len() == 1).then_some((pods, names))
    })
    .await;
    assert_eq!(
        remaining.1,
        vec![format!(
            "data-web-{}",
            remaining.0[0].labels()[CLONESET_INSTANCE_ID_KEY]
        )]
    );
    let scale = clonesets(&client).get_scale("web").await.unwrap();
    assert_eq!(scale.status.unwrap().replicas, 1);
    controller.stop().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn recreate_update_replaces_pods_within_max_unavailable() {
    let (cluster, client) = cluster_with_crd().await;
    let controller = RunningController::start(&client);
    clonesets(&client)
        .create(
            &PostParams::default(),
            &cloneset(
                "web",
                3,
                "nginx:1",
                json!({"updateStrategy": {"rollingUpdate": {"maxUnavailable": 1}}}),
            ),
        )
        .await
        .unwrap();
    wait_rolled_out(&client, "web", 3).await;
    let old_names: Vec<String> = pods_of(&client, "web")
        .await
        .iter()
        .map(|p| p.name_any())
        .collect();
    patch_spec(
        &client,
        "web",
        json!({"template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}),
    )
    .await;
    // Sampled while it rolls: never fewer than replicas - maxUnavailable ready pods.
    eventually("all pods recreated at nginx:2", WAIT, || async {
        let pods = pods_of(&client, "web").await;
        let ready = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        assert!(
            ready >= 2,
            "only {ready} ready pods: {:?}",
            pods.iter().map(|p| p.name_any()).collect::<Vec<_>>()
        );
        let cs = get(&client, "web").await;
        let s = cs.status?;
        (s.updated_ready_replicas == 3
            && s.ready_replicas == 3
            && pods.len() == 3
            && pods
                .iter()
                .all(|p| container_image(p) == "nginx:2" && !old_names.contains(&p.name_any())))
        .then_some(())
    })
    .await;
    assert_eq!(cluster.counters().count("delete", "pods"), 3);
    assert_eq!(cluster.counters().count("create", "pods"), 6);
    controller.stop().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_pod_deleted_by_someone_else_is_replaced() {
    let (cluster, client) = cluster_with_crd().await;
    let controller = RunningController::start(&client);
    clonesets(&client)
        .create(
            &PostParams::default(),
            &cloneset("web", 2, "nginx:1", json!({})),
        )
        .await
        .unwrap();
    wait_rolled_out(&client, "web", 2).await;
    let victim = pods_of(&client, "web").await[0].name_any();
    Api::<Pod>::default_namespaced(client.clone())
        .delete(&victim, &Default::default())
        .await
        .unwrap();
    eventually("a replacement", WAIT, || async {
        let pods = pods_of(&client, "web").await;
        (pods.len() == 2 && pods.iter().all(|p| p.name_any() != victim)).then_some(())
    })
    .await;
    wait_rolled_out(&client, "web", 2).await;
    assert_eq!(cluster.counters().count("create", "pods"), 3);
    controller.stop().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn priority_strategy_orders_the_in_place_update() {
    let (cluster, client) = cluster_with_crd().await;
    let controller = RunningController::start(&client);
    clonesets(&client)
        .create(
            &PostParams::default(),
            &cloneset(
                "web",
                4,
                "nginx:1",
                json!({"updateStrategy": {"rollingUpdate": {
                    "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1,
                    "priorityStrategy": {"weightPriority": [
                        {"weight": 50, "matchSelector": {"matchLabels": {"tier": "canary"}}}
                    ]},
                }}}),
            ),
        )
        .await
        .unwrap();
    wait_rolled_out(&client, "web", 4).await;
    // Mark the last pod (by name) so the default order would not pick it first.
    let canary = pods_of(&client, "web").await[3].name_any();
    Api::<Pod>::default_namespaced(client.clone())
        .patch(
            &canary,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"tier": "canary"}}})),
        )
        .await
        .unwrap();
    // The label reaches the controller through its pod watch, the template change through
    // its CloneSet watch: stage the change paused, wait until a reconcile after the label
    // saw it, then release it, so the rollout plans with the label in its cache.
    patch_spec(
        &client,
        "web",
        json!({"updateStrategy": {"rollingUpdate": {"paused": true}},
               "template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}),
    )
    .await;
    eventually("the paused change observed", WAIT, || async {
        let cs = get(&client, "web").await;
        let s = cs.status?;
        (s.observed_generation == cs.metadata.generation.unwrap_or_default()
            && s.update_revision != s.current_revision)
            .then_some(())
    })
    .await;
    patch_spec(
        &client,
        "web",
        json!({"updateStrategy": {"rollingUpdate": {"paused": false}}}),
    )
    .await;
    let first = eventually("the first updated pod", WAIT, || async {
        let updated: Vec<String> = pods_of(&client, "web")
            .await
            .iter()
            .filter(|p| container_image(p) == "nginx:2")
            .map(|p| p.name_any())
            .collect();
        (!updated.is_empty()).then_some(updated)
    })
    .await;
    assert_eq!(first, vec![canary], "the weighted pod goes first, alone");
    wait_rolled_out(&client, "web", 4).await;
    controller.stop().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn pre_delete_hook_holds_a_scaled_down_pod_until_released() {
    let (cluster, client) = cluster_with_crd().await;
    let controller = RunningController::start(&client);
    let mut cs = cloneset(
        "web",
        2,
        "nginx:1",
        json!({"lifecycle": {"preDelete": {"labelsHandler": {"example.com/drain": "true"}}}}),
    );
    cs.spec
        .template
        .metadata
        .get_or_insert_default()
        .labels
        .get_or_insert_default()
        .insert("example.com/drain".into(), "true".into());
    clonesets(&client)
        .create(&PostParams::default(), &cs)
        .await
        .unwrap();
    wait_rolled_out(&client, "web", 2).await;
    patch_spec(&client, "web", json!({"replicas": 1})).await;
    // One pod enters PreparingDelete and stays: its hook label is still there.
    let held = eventually("a pod in PreparingDelete", WAIT, || async {
        pods_of(&client, "web").await.into_iter().find(|p| {
            p.labels()
                .get("lifecycle.apps.kruise.io/state")
                .map(String::as_str)
                == Some("PreparingDelete")
        })
    })
    .await;
    assert_eq!(
        cluster.counters().count("delete", "pods"),
        0,
        "held by the hook"
    );
    assert_eq!(pods_of(&client, "web").await.len(), 2);
    // The owner of the hook releases it: the pod goes.
    Api::<Pod>::default_namespaced(client.clone())
        .patch(
            &held.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"example.com/drain": null}}})),
        )
        .await
        .unwrap();
    eventually("the released pod deleted", WAIT, || async {
        let pods = pods_of(&client, "web").await;
        (pods.len() == 1 && pods[0].name_any() != held.name_any()).then_some(())
    })
    .await;
    controller.stop().await;
    cluster.shutdown().await;
}

/// The controller for the client's namespace, with the planner's feature gates `gates`.
fn start_with_gates(client: &Client, gates: kruise_cloneset::plan::PlanGates) -> RunningController {
    RunningController::start_with(
        client,
        kruise_cloneset::controller::Settings {
            namespace: Some(client.default_namespace().into()),
            gates,
            ..Default::default()
        },
    )
}

#[tokio::test]
async fn partition_rollback_gate_rolls_updated_pods_back_when_the_partition_rises() {
    let (cluster, client) = cluster_with_crd().await;
    let controller = start_with_gates(
        &client,
        kruise_cloneset::plan::PlanGates {
            partition_rollback: true,
            ..Default::default()
        },
    );
    clonesets(&client)
        .create(
            &PostParams::default(),
            &cloneset(
                "web",
                4,
                "nginx:1",
                json!({"updateStrategy": {"rollingUpdate": {
                    "partition": 2, "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 4}}}),
            ),
        )
        .await
        .unwrap();
    wait_rolled_out(&client, "web", 4).await;
    let images = |client: Client| async move {
        let mut v: Vec<String> = pods_of(&client, "web")
            .await
            .iter()
            .map(container_image)
            .collect();
        v.sort();
        v
    };
    patch_spec(
        &client,
        "web",
        json!({"template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}),
    )
    .await;
    eventually(
        "two pods updated, two kept by the partition",
        WAIT,
        || async {
            (images(client.clone()).await == ["nginx:1", "nginx:1", "nginx:2", "nginx:2"])
                .then_some(())
        },
    )
    .await;
    // Raising the partition to 3 rolls one updated pod back to the current revision.
    patch_spec(
        &client,
        "web",
        json!({"updateStrategy": {"rollingUpdate": {"partition": 3}}}),
    )
    .await;
    let cs = eventually("one pod rolled back", WAIT, || async {
        let cs = get(&client, "web").await;
        let s = cs.status.clone()?;
        (images(client.clone()).await == ["nginx:1", "nginx:1", "nginx:1", "nginx:2"]
            && s.updated_replicas == 1
            && s.ready_replicas == 4)
            .then_some(cs)
    })
    .await;
    let s = cs.status.unwrap();
    assert_ne!(s.update_revision, s.current_revision);
    assert_eq!(
        cluster.counters().count("delete", "pods"),
        0,
        "rolled back in place"
    );
    controller.stop().await;
    cluster.shutdown().await;
}

fn lifecycle_state(pod: &Pod) -> String {
    pod.labels()
        .get("lifecycle.apps.kruise.io/state")
        .cloned()
        .unwrap_or_default()
}

async fn set_pod_label(client: &Client, pod: &str, key: &str, value: Option<&str>) {
    Api::<Pod>::default_namespaced(client.clone())
        .patch(
            pod,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {key: value}}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn in_place_update_hook_holds_the_update_until_released_and_waits_for_it_again() {
    const HOOK: &str = "example.com/unready-blocker";
    let (cluster, client) = cluster_with_crd().await;
    let controller = RunningController::start(&client);
    let mut cs = cloneset(
        "web",
        1,
        "nginx:1",
        json!({"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}},
               "lifecycle": {"inPlaceUpdate": {"labelsHandler": {HOOK: "true"}}}}),
    );
    cs.spec
        .template
        .metadata
        .get_or_insert_default()
        .labels
        .get_or_insert_default()
        .insert(HOOK.into(), "true".into());
    clonesets(&client)
        .create(&PostParams::default(), &cs)
        .await
        .unwrap();
    wait_rolled_out(&client, "web", 1).await;
    let pod = pods_of(&client, "web").await.remove(0);
    assert_eq!(lifecycle_state(&pod), "Normal");
    patch_spec(
        &client,
        "web",
        json!({"template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}),
    )
    .await;
    // Hooked: the pod waits in PreparingUpdate with its old image.
    let held = eventually("PreparingUpdate", WAIT, || async {
        let p = pods_of(&client, "web").await.pop()?;
        (lifecycle_state(&p) == "PreparingUpdate").then_some(p)
    })
    .await;
    assert_eq!(container_image(&held), "nginx:1");
    // The hook's owner releases it: updated in place, then Updated until the label is back.
    set_pod_label(&client, &pod.name_any(), HOOK, None).await;
    let updated = eventually("Updated in place", WAIT, || async {
        let p = pods_of(&client, "web").await.pop()?;
        (lifecycle_state(&p) == "Updated" && container_image(&p) == "nginx:2").then_some(p)
    })
    .await;
    assert_eq!(updated.uid(), pod.uid(), "the same pod");
    set_pod_label(&client, &pod.name_any(), HOOK, Some("true")).await;
    eventually("Normal again", WAIT, || async {
        let p = pods_of(&client, "web").await.pop()?;
        (lifecycle_state(&p) == "Normal").then_some(())
    })
    .await;
    wait_rolled_out(&client, "web", 1).await;
    controller.stop().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn pre_normal_hook_keeps_new_pods_unavailable_until_hooked() {
    const HOOK: &str = "example.com/registered";
    let (cluster, client) = cluster_with_crd().await;
    let controller = RunningController::start(&client);
    clonesets(&client)
        .create(
            &PostParams::default(),
            &cloneset(
                "web",
                2,
                "nginx:1",
                json!({"lifecycle": {"preNormal": {"labelsHandler": {HOOK: "true"}}}}),
            ),
        )
        .await
        .unwrap();
    // Running and ready, but PreparingNormal: not available to the CloneSet.
    let pods = eventually("2 ready pods in PreparingNormal", WAIT, || async {
        let cs = get(&client, "web").await;
        let pods = pods_of(&client, "web").await;
        let s = cs.status?;
        (pods.len() == 2
            && pods.iter().all(|p| lifecycle_state(p) == "PreparingNormal")
            && s.ready_replicas == 2)
            .then_some(pods)
    })
    .await;
    assert_eq!(
        get(&client, "web").await.status.unwrap().available_replicas,
        0
    );
    // Whoever registers the pods adds the hook label: Normal, available.
    for p in &pods {
        set_pod_label(&client, &p.name_any(), HOOK, Some("true")).await;
    }
    eventually("both Normal", WAIT, || async {
        let pods = pods_of(&client, "web").await;
        pods.iter()
            .all(|p| lifecycle_state(p) == "Normal")
            .then_some(())
    })
    .await;
    wait_rolled_out(&client, "web", 2).await;
    controller.stop().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn scatter_strategy_interleaves_the_in_place_update() {
    let (cluster, client) = cluster_with_crd().await;
    let controller = RunningController::start(&client);
    clonesets(&client)
        .create(
            &PostParams::default(),
            &cloneset(
                "web",
                6,
                "nginx:1",
                json!({"updateStrategy": {"rollingUpdate": {
                    "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1}}}),
            ),
        )
        .await
        .unwrap();
    wait_rolled_out(&client, "web", 6).await;
    // Three pods in zone a, three elsewhere; scatter on zone=a.
    let mut names: Vec<String> = pods_of(&client, "web")
        .await
        .iter()
        .map(|p| p.name_any())
        .collect();
    names.sort();
    for name in &names[..3] {
        set_pod_label(&client, name, "zone", Some("a")).await;
    }
    // Staged paused (see the priority test: labels and spec reach the controller apart).
    patch_spec(
        &client,
        "web",
        json!({"updateStrategy": {"rollingUpdate": {"paused": true,
                                  "scatterStrategy": [{"key": "zone", "value": "a"}]}},
               "template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}),
    )
    .await;
    eventually("the paused change observed", WAIT, || async {
        let cs = get(&client, "web").await;
        let s = cs.status?;
        (s.observed_generation == cs.metadata.generation.unwrap_or_default()
            && s.update_revision != s.current_revision)
            .then_some(())
    })
    .await;
    patch_spec(
        &client,
        "web",
        json!({"updateStrategy": {"rollingUpdate": {"paused": false}}}),
    )
    .await;
    // Record the order in which pods take the new image (polled by hand: the order is
    // state kept across polls).
    let mut order: Vec<String> = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while order.len() < 6 {
        for p in pods_of(&client, "web").await {
            if container_image(&p) == "nginx:2" && !order.contains(&p.name_any()) {
                order.push(p.name_any());
            }
        }
        assert!(std::time::Instant::now() < deadline, "rollout: {order:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // One at a time (maxUnavailable 1), the order recomputed at each step as OpenKruise's
    // scatter sort does: 3 of 6 matched -> a first; then 2 matched of 5 candidates with the
    // population denser in unmatched pods -> an unmatched one; then a matched one.
    let zones: Vec<bool> = order.iter().map(|n| names[..3].contains(n)).collect();
    assert_eq!(
        zones[..3],
        [true, false, true],
        "scattered by zone: {order:?} (zone a: {:?})",
        &names[..3]
    );
    wait_rolled_out(&client, "web", 6).await;
    controller.stop().await;
    cluster.shutdown().await;
}

/// The UIDs of the CloneSet's live pods, sorted.
async fn pod_uids(client: &Client, name: &str) -> Vec<String> {
    let mut uids: Vec<String> = pods_of(client, name)
        .await
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.uid)
        .collect();
    uids.sort();
    uids
}

/// OpenKruise's e2e "CloneSet Update with VolumeClaimTemplate changes" with
/// `RecreatePodWhenChangeVCTInCloneSetGate` on: an image and claim change recreates the pods;
/// a claim-only change rolls nothing (no new revision); the next image-only change recreates
/// them, since the claims of the pods' revision differ; under `InPlaceOnly` an image change
/// stays in place whatever the claims.
#[tokio::test]
async fn with_the_vct_gate_a_claim_change_is_carried_by_the_next_image_update_as_a_recreate() {
    let (cluster, client) = cluster_with_crd().await;
    let controller = start_with_gates(
        &client,
        kruise_cloneset::plan::PlanGates {
            recreate_on_vct_change: true,
            ..Default::default()
        },
    );
    let claims = |first: &str, second: &str| {
        json!([
            {"metadata": {"name": "data-vol1"},
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": first}}}},
            {"metadata": {"name": "data-vol2"},
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": second}}}}
        ])
    };
    let policy =
        |policy: &str| json!({"rollingUpdate": {"podUpdatePolicy": policy, "maxUnavailable": 4}});
    clonesets(&client)
        .create(
            &PostParams::default(),
            &cloneset(
                "web",
                4,
                "nginx:1",
                json!({"updateStrategy": policy("ReCreate"), "volumeClaimTemplates": claims("1Gi", "1Gi")}),
            ),
        )
        .await
        .unwrap();
    wait_rolled_out(&client, "web", 4).await;
    let created = pod_uids(&client, "web").await;

    let image = |image: &str| json!({"containers": [{"name": "main", "image": image}]});
    patch_spec(
        &client,
        "web",
        json!({"template": {"spec": image("nginx:2")}, "volumeClaimTemplates": claims("2Gi", "1Gi"),
               "updateStrategy": policy("InPlaceIfPossible")}),
    )
    .await;
    wait_rolled_out(&client, "web", 4).await;
    let after_image_and_claims = pod_uids(&client, "web").await;
    assert!(
        after_image_and_claims
            .iter()
            .all(|uid| !created.contains(uid)),
        "an image and claim change recreates every pod"
    );

    patch_spec(
        &client,
        "web",
        json!({"volumeClaimTemplates": claims("2Gi", "2Gi")}),
    )
    .await;
    wait_rolled_out(&client, "web", 4).await;
    assert_eq!(
        pod_uids(&client, "web").await,
        after_image_and_claims,
        "a claim-only change rolls no pod"
    );

    patch_spec(
        &client,
        "web",
        json!({"template": {"spec": image("redis:7")}}),
    )
    .await;
    let recreated = eventually("every pod recreated for redis:7", WAIT, || async {
        let cs = get(&client, "web").await;
        let s = cs.status.clone()?;
        let uids = pod_uids(&client, "web").await;
        (s.updated_ready_replicas == 4
            && s.observed_generation == cs.metadata.generation.unwrap_or_default()
            && uids.len() == 4)
            .then_some(uids)
    })
    .await;
    assert!(
        recreated
            .iter()
            .all(|uid| !after_image_and_claims.contains(uid)),
        "the image update after a claim-only change recreates every pod"
    );

    patch_spec(
        &client,
        "web",
        json!({"template": {"spec": image("httpd:2")}, "volumeClaimTemplates": claims("3Gi", "3Gi"),
               "updateStrategy": policy("InPlaceOnly")}),
    )
    .await;
    wait_rolled_out(&client, "web", 4).await;
    assert_eq!(
        pod_uids(&client, "web").await,
        recreated,
        "InPlaceOnly updates in place whatever the claims"
    );
    controller.stop().await;
    cluster.shutdown().await;
}

/// OpenKruise's e2e InplaceVPA "in-place update image and resource": with
/// `InPlaceWorkloadVerticalScaling` an image and cpu/memory change is made in place — the
/// same pods, the container restarted once for the image, the new resources in spec and
/// status (resized through `pods/resize`, which the chart's role allows).
#[tokio::test]
async fn with_vertical_scaling_an_image_and_resources_change_is_made_in_place() {
    let (cluster, client) = cluster_with_crd().await;
    image_and_resources_rollout(&client, &client).await;
    cluster.shutdown().await;
}

/// A resize the server refuses is sent again: the pod is not counted updated with its old
/// resources (the resize goes before the patch that moves the pod to the new revision).
#[tokio::test]
async fn sim_only_an_in_place_update_whose_resize_fails_is_not_counted_until_the_resize_lands() {
    let (sim, client) = sim_with_crd().await;
    let refused = kruise_testkit::sim::fail_resizes(&sim, 2);
    // The controller sees every 500 itself (no client-side retries).
    image_and_resources_rollout(&client, &sim.client_without_retries().unwrap()).await;
    refused.all_met();
    sim.shutdown().await;
}

/// Requests and limits of `cpu` and `memory`.
fn resources(cpu: &str, memory: &str) -> serde_json::Value {
    json!({"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}})
}

/// A template's one container, `main`, with these image and resources.
fn container(image: &str, cpu: &str, memory: &str) -> serde_json::Value {
    json!([{"name": "main", "image": image, "resources": resources(cpu, memory)}])
}

/// A CloneSet `vpa` of 2 rolled out, its image and resources then changed with
/// `InPlaceWorkloadVerticalScaling` on, by a controller on `controller_client`: the same
/// pods, each with the new image and resources in spec and status, restarted once.
async fn image_and_resources_rollout(client: &Client, controller_client: &Client) {
    let controller = start_with_gates(
        controller_client,
        kruise_cloneset::plan::PlanGates {
            vertical_scaling: true,
            env_from_metadata: true,
            ..Default::default()
        },
    );
    clonesets(client)
        .create(
            &PostParams::default(),
            &cloneset(
                "vpa",
                2,
                "nginx:1",
                json!({"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}},
                       "template": {"spec": {"containers": container("nginx:1", "100m", "100Mi")}}}),
            ),
        )
        .await
        .unwrap();
    wait_rolled_out(client, "vpa", 2).await;
    let before = pod_uids(client, "vpa").await;
    patch_spec(
        client,
        "vpa",
        json!({"template": {"spec": {"containers": container("nginx:2", "200m", "200Mi")}}}),
    )
    .await;
    wait_rolled_out(client, "vpa", 2).await;
    let resized = eventually("every pod reports the new resources", WAIT, || async {
        let pods = pods_of(client, "vpa").await;
        pods.iter()
            .all(|pod| {
                let status = serde_json::to_value(pod.status.as_ref()).unwrap();
                status["containerStatuses"][0]["resources"] == resources("200m", "200Mi")
            })
            .then_some(pods)
    })
    .await;
    assert_eq!(pod_uids(client, "vpa").await, before, "the same pods");
    for pod in resized {
        let spec = serde_json::to_value(pod.spec.as_ref()).unwrap();
        assert_eq!(
            spec["containers"][0]["resources"],
            resources("200m", "200Mi")
        );
        assert_eq!(container_image(&pod), "nginx:2");
        let restarts = pod
            .status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()[0]
            .restart_count;
        assert_eq!(restarts, 1, "restarted once, for the image");
    }
    controller.stop().await;
}
