//! The Advanced StatefulSet controller in-process against kruise-sim, or the real API server
//! of `KRUISE_TEST_KUBECONFIG` (the `sim_only_*` tests inject faults or resize claims,
//! which only the simulator can): OrderedReady scale-up
//! in order with identity and claims, an in-place image update that keeps each pod (name,
//! uid, node, IP, claim; restartCount 1) in descending order, partition, reserveOrdinals,
//! and a controller restart mid-rollout without a double create.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kruise_core::api::keys::{
    CONTROLLER_REVISION_HASH_KEY, POD_INDEX_KEY, STATEFULSET_POD_NAME_KEY,
};
use kruise_runtime::{Metrics, Readiness, RunOptions};
use kruise_statefulset::api::v1beta1::StatefulSet;
use kruise_statefulset::controller::{self, Settings};
use kruise_testkit::{WAIT, eventually};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// An in-process controller for the test's namespace.
struct RunningController {
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl RunningController {
    fn start(client: &Client) -> Self {
        Self::start_with(client, Settings::default())
    }

    /// Started with `settings`, watching the client's default namespace.
    fn start_with(client: &Client, settings: Settings) -> Self {
        let shutdown = CancellationToken::new();
        let metrics = Metrics::new();
        let opts = RunOptions {
            name: controller::CONTROLLER_NAME.into(),
            concurrency: 3,
            metrics: metrics.clone(),
            readiness: Readiness::default(),
            shutdown: shutdown.clone(),
            leadership: Default::default(),
        };
        let settings = Settings {
            namespace: Some(client.default_namespace().into()),
            ..settings
        };
        let client = kruise_testkit::controller_client(client, "statefulset");
        let task =
            tokio::spawn(async move { controller::run(client, settings, &metrics, opts).await });
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

/// Two nodes and the CRD: kruise-sim, or the API server of `KRUISE_TEST_KUBECONFIG`; the
/// client's default namespace is the test's.
async fn cluster() -> (kruise_testkit::TestCluster, Client) {
    kruise_testkit::cluster_with_crds(2, &[kruise_statefulset::api::crd::crd().unwrap()]).await
}

/// kruise-sim itself, for the `sim_only_*` tests.
async fn sim() -> (kruise_sim::Sim, Client) {
    kruise_testkit::sim_with_crds(2, &[kruise_statefulset::api::crd::crd().unwrap()]).await
}

/// A set `name` (defaulted as the webhook would) with 3 replicas of `image` and a claim
/// template `data`.
fn statefulset(name: &str, image: &str, extra_spec: serde_json::Value) -> StatefulSet {
    let mut spec = json!({
        "replicas": 3,
        "serviceName": name,
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {
                "readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
                "containers": [{"name": "main", "image": image}]
            }
        },
        "volumeClaimTemplates": [{"metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
    });
    json_patch::merge(&mut spec, &extra_spec);
    let mut set: StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap();
    kruise_statefulset::api::defaults::default_spec(&mut set.spec, Default::default());
    set
}

fn sets(client: &Client) -> Api<StatefulSet> {
    Api::default_namespaced(client.clone())
}

async fn pods_of(client: &Client, name: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::default_namespaced(client.clone());
    let mut pods: Vec<Pod> = api
        .list(&ListParams::default().labels(&format!("app={name}")))
        .await
        .unwrap()
        .items;
    pods.sort_by_key(|p| p.name_any());
    pods
}

fn names(pods: &[Pod]) -> Vec<String> {
    pods.iter().map(|p| p.name_any()).collect()
}

/// Waits until the set reports `total` updated, ready pods for its current generation.
async fn wait_rolled_out(client: &Client, name: &str, total: i32) -> StatefulSet {
    eventually(
        &format!("{name}: {total} updated ready pods"),
        WAIT,
        || async {
            let set = sets(client).get(name).await.unwrap();
            let s = set.status.clone()?;
            (s.replicas == total
                && s.ready_replicas == total
                && s.updated_replicas == total
                && s.current_revision == s.update_revision
                && s.observed_generation == set.metadata.generation.unwrap_or_default())
            .then_some(set)
        },
    )
    .await
}

/// The pods named in the set's events with `reason`, in the order they happened.
async fn pods_in_events(client: &Client, name: &str, reason: &str) -> Vec<String> {
    let mut events = kruise_testkit::events_about(client, client.default_namespace(), name).await;
    // The simulator's resourceVersions increase with every write.
    events.sort_by_key(|e| {
        e.metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
    });
    events
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| {
            let note = e.message.unwrap_or_default();
            note.split_whitespace()
                .find(|w| w.starts_with(&format!("{name}-")))
                .map(|w| {
                    w.trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
                        .to_string()
                })
        })
        .collect()
}

/// [`pods_in_events`] once `count` such events are there: events are published by a
/// background queue, after the writes they report.
async fn wait_pods_in_events(
    client: &Client,
    name: &str,
    reason: &str,
    count: usize,
) -> Vec<String> {
    eventually(
        &format!("{count} {reason} events about {name}"),
        WAIT,
        || async {
            let pods = pods_in_events(client, name, reason).await;
            (pods.len() >= count).then_some(pods)
        },
    )
    .await
}

async fn set_image(client: &Client, name: &str, image: &str, rolling: serde_json::Value) {
    let patch = json!({"spec": {
        "template": {"spec": {"containers": [{"name": "main", "image": image}]}},
        "updateStrategy": {"rollingUpdate": rolling}}});
    sets(client)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Successful pod patches (the pod and its status) the simulator served.
fn pod_writes(counters: &kruise_sim::Counters) -> u64 {
    counters
        .snapshot()
        .into_iter()
        .filter(|(k, _)| k.verb == "patch" && k.resource == "pods" && (200..300).contains(&k.code))
        .map(|(_, n)| n)
        .sum()
}

/// Successful pod creates the simulator served.
fn pod_creates(counters: &kruise_sim::Counters) -> u64 {
    counters
        .snapshot()
        .into_iter()
        .filter(|(k, _)| {
            k.verb == "create"
                && k.resource == "pods"
                && k.subresource.is_empty()
                && (200..300).contains(&k.code)
        })
        .map(|(_, n)| n)
        .sum()
}

#[tokio::test]
async fn ordered_ready_scales_to_three_in_order_with_identity_and_claims() {
    let (cluster, client) = cluster().await;
    let controller = RunningController::start(&client);
    sets(&client)
        .create(
            &PostParams::default(),
            &statefulset("web", "nginx:1", json!({})),
        )
        .await
        .unwrap();
    let set = wait_rolled_out(&client, "web", 3).await;
    let pods = pods_of(&client, "web").await;
    assert_eq!(names(&pods), ["web-0", "web-1", "web-2"]);
    assert_eq!(
        wait_pods_in_events(&client, "web", "SuccessfulCreate", 3).await,
        ["web-0", "web-1", "web-2"]
    );
    // Each pod was created only once its predecessor was ready.
    for pair in pods.windows(2) {
        let ready_at = pair[0]
            .status
            .as_ref()
            .unwrap()
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == "Ready")
            .unwrap()
            .last_transition_time
            .clone()
            .unwrap()
            .0;
        let created = pair[1].metadata.creation_timestamp.clone().unwrap().0;
        assert!(
            created >= ready_at,
            "{} created before {} was ready",
            pair[1].name_any(),
            pair[0].name_any()
        );
    }
    let status = set.status.unwrap();
    for (i, pod) in pods.iter().enumerate() {
        let name = pod.name_any();
        assert_eq!(pod.labels()[STATEFULSET_POD_NAME_KEY], name);
        assert_eq!(pod.labels()[POD_INDEX_KEY], i.to_string());
        assert_eq!(
            pod.labels()[CONTROLLER_REVISION_HASH_KEY],
            status.update_revision
        );
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some(name.as_str()));
        assert_eq!(spec.subdomain.as_deref(), Some("web"));
        let claim = format!("data-web-{i}");
        assert!(spec.volumes.iter().flatten().any(|v| {
            v.persistent_volume_claim
                .as_ref()
                .is_some_and(|c| c.claim_name == claim)
        }));
        let claims: Api<PersistentVolumeClaim> = Api::default_namespaced(client.clone());
        let pvc = claims.get(&claim).await.unwrap();
        assert_eq!(pvc.labels()["app"], "web");
    }
    assert_eq!(status.label_selector, "app=web");
    // Per pod: its claim, the pod, and the InPlaceUpdateReady=True its readiness gate needs.
    let claim_creates: u64 = cluster
        .counters()
        .snapshot()
        .into_iter()
        .filter(|(k, _)| {
            k.verb == "create"
                && k.resource == "persistentvolumeclaims"
                && (200..300).contains(&k.code)
        })
        .map(|(_, n)| n)
        .sum();
    assert_eq!(
        (
            claim_creates,
            pod_creates(cluster.counters()),
            pod_writes(cluster.counters())
        ),
        (3, 3, 3)
    );
    controller.stop().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn in_place_update_keeps_each_pod_and_goes_descending() {
    let (cluster, client) = cluster().await;
    let controller = RunningController::start(&client);
    let set = statefulset(
        "db",
        "nginx:1",
        json!({"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}}}),
    );
    sets(&client)
        .create(&PostParams::default(), &set)
        .await
        .unwrap();
    wait_rolled_out(&client, "db", 3).await;
    let before = pods_of(&client, "db").await;
    let writes_before = pod_writes(cluster.counters());
    set_image(&client, "db", "nginx:2", json!({})).await;
    eventually("db rolled to nginx:2", WAIT, || async {
        let set = sets(&client).get("db").await.unwrap();
        let s = set.status.clone()?;
        let pods = pods_of(&client, "db").await;
        (s.updated_replicas == 3
            && s.ready_replicas == 3
            && set.metadata.generation == Some(s.observed_generation)
            && pods.iter().all(|p| {
                p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some("nginx:2")
            }))
        .then_some(())
    })
    .await;
    let after = pods_of(&client, "db").await;
    for (old, new) in before.iter().zip(&after) {
        assert_eq!(old.name_any(), new.name_any());
        assert_eq!(old.uid(), new.uid(), "{} was recreated", old.name_any());
        let (os, ns) = (old.status.as_ref().unwrap(), new.status.as_ref().unwrap());
        assert_eq!(
            old.spec.as_ref().unwrap().node_name,
            new.spec.as_ref().unwrap().node_name
        );
        assert_eq!(os.pod_ip, ns.pod_ip);
        assert_eq!(ns.container_statuses.as_ref().unwrap()[0].restart_count, 1);
        assert_eq!(
            old.spec.as_ref().unwrap().volumes,
            new.spec.as_ref().unwrap().volumes,
            "same claim"
        );
    }
    assert_eq!(
        wait_pods_in_events(&client, "db", "SuccessfulUpdatePodInPlace", 3).await,
        ["db-2", "db-1", "db-0"]
    );
    // Per pod: InPlaceUpdateReady=False, the patch, InPlaceUpdateReady=True with the
    // lifecycle state back to Normal.
    assert_eq!(
        pod_writes(cluster.counters()) - writes_before,
        9,
        "3 writes per in-place update"
    );
    controller.stop().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn partition_and_reserved_ordinals() {
    let (cluster, client) = cluster().await;
    let controller = RunningController::start(&client);
    let set = statefulset("pt", "nginx:1", json!({"podManagementPolicy": "Parallel"}));
    sets(&client)
        .create(&PostParams::default(), &set)
        .await
        .unwrap();
    let old = wait_rolled_out(&client, "pt", 3)
        .await
        .status
        .unwrap()
        .update_revision;
    set_image(&client, "pt", "nginx:2", json!({"partition": 2})).await;
    let update = eventually("pt-2 updated", WAIT, || async {
        let s = sets(&client).get("pt").await.unwrap().status?;
        (s.updated_replicas == 1 && s.ready_replicas == 3 && s.update_revision != old)
            .then_some(s.update_revision)
    })
    .await;
    let pods = pods_of(&client, "pt").await;
    let revisions: Vec<String> = pods
        .iter()
        .map(|p| p.labels()[CONTROLLER_REVISION_HASH_KEY].clone())
        .collect();
    assert_eq!(revisions, [old.clone(), old, update]);

    let reserved = statefulset(
        "rs",
        "nginx:1",
        json!({"reserveOrdinals": [1], "podManagementPolicy": "Parallel"}),
    );
    sets(&client)
        .create(&PostParams::default(), &reserved)
        .await
        .unwrap();
    wait_rolled_out(&client, "rs", 3).await;
    assert_eq!(
        names(&pods_of(&client, "rs").await),
        ["rs-0", "rs-2", "rs-3"]
    );
    controller.stop().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_controller_restart_mid_rollout_creates_no_pod_twice() {
    let (cluster, client) = cluster().await;
    let controller = RunningController::start(&client);
    sets(&client)
        .create(
            &PostParams::default(),
            &statefulset("rr", "nginx:1", json!({})),
        )
        .await
        .unwrap();
    wait_rolled_out(&client, "rr", 3).await;
    assert_eq!(pod_creates(cluster.counters()), 3);
    set_image(&client, "rr", "nginx:2", json!({})).await;
    // Stop as soon as the first pod was recreated at the new revision.
    eventually("rr-2 recreated", WAIT, || async {
        let s = sets(&client).get("rr").await.unwrap().status?;
        (s.updated_replicas >= 1).then_some(())
    })
    .await;
    controller.stop().await;
    let controller = RunningController::start(&client);
    let set = wait_rolled_out(&client, "rr", 3).await;
    let update = set.status.unwrap().update_revision;
    let pods = pods_of(&client, "rr").await;
    assert!(
        pods.iter()
            .all(|p| p.labels()[CONTROLLER_REVISION_HASH_KEY] == update)
    );
    assert_eq!(
        pod_creates(cluster.counters()),
        6,
        "three pods, each recreated once"
    );
    let deletes: u64 = cluster
        .counters()
        .snapshot()
        .into_iter()
        .filter(|(k, _)| k.verb == "delete" && k.resource == "pods" && (200..300).contains(&k.code))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(deletes, 3, "each old pod deleted once");
    controller.stop().await;
    cluster.shutdown().await;
}

/// The benchmark's stall (docs/statefulset.md): a reconcile waiting on a request the API
/// server never answers held its set forever (kube-runtime reconciles one object at a time,
/// so later pod events only marked it dirty). With the request deadline every kruise-rs
/// client has (`kruise_runtime::deadline`, here 1 s instead of 70 s) the create
/// fails, the reconcile is requeued and the set completes.
#[tokio::test]
async fn sim_only_a_pod_create_the_server_never_answers_holds_back_no_set() {
    use kruise_sim::faults::FaultRule;
    let (sim, _) = sim().await;
    // The first pod create is answered after an hour: never, for this test.
    sim.faults().add(
        FaultRule::new()
            .verb("create")
            .resource("pods")
            .latency(Duration::from_secs(3600))
            .times(1),
    );
    let client = kruise_runtime::deadline::client_with_deadline(
        sim.client_config().unwrap(),
        Duration::from_secs(1),
    )
    .unwrap();
    let controller = RunningController::start(&client);
    sets(&client)
        .create(
            &PostParams::default(),
            &statefulset(
                "hang",
                "nginx:1",
                json!({"podManagementPolicy": "Parallel"}),
            ),
        )
        .await
        .unwrap();
    wait_rolled_out(&client, "hang", 3).await;
    assert_eq!(
        names(&pods_of(&client, "hang").await),
        ["hang-0", "hang-1", "hang-2"]
    );
    controller.stop().await;
}

#[tokio::test]
async fn sim_only_injected_errors_conflicts_and_watch_drops_break_no_bound() {
    use kruise_sim::faults::FaultRule;
    let (sim, client) = sim().await;
    let controller = RunningController::start(&client);
    let set = statefulset(
        "ft",
        "nginx:1",
        json!({"replicas": 5, "podManagementPolicy": "Parallel",
               "updateStrategy": {"rollingUpdate": {"maxUnavailable": 2}}}),
    );
    sets(&client)
        .create(&PostParams::default(), &set)
        .await
        .unwrap();
    let old = wait_rolled_out(&client, "ft", 5)
        .await
        .status
        .unwrap()
        .update_revision;
    let creates_before = pod_creates(sim.counters());
    assert_eq!(creates_before, 5);
    set_image(&client, "ft", "nginx:2", json!({})).await;
    sim.faults().add(
        FaultRule::new()
            .verb("create")
            .resource("pods")
            .error(500, 1.0)
            .times(2),
    );
    sim.faults().add(
        FaultRule::new()
            .verb("delete")
            .resource("pods")
            .error(500, 1.0)
            .times(2),
    );
    sim.faults().add(
        FaultRule::new()
            .verb("patch")
            .resource("statefulsets")
            .error(500, 1.0)
            .times(2),
    );
    sim.faults().force_conflicts("statefulsets", 2);
    // Watch the rollout: never more than 2 of the 5 ordinals unready (or missing).
    let mut most_unready = 0;
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut drops = 0;
    loop {
        let pods = pods_of(&client, "ft").await;
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
        most_unready = most_unready.max(5 - ready);
        let set = sets(&client).get("ft").await.unwrap();
        let s = set.status.clone().unwrap_or_default();
        if s.update_revision != old
            && set.metadata.generation == Some(s.observed_generation)
            && s.updated_replicas == 5
            && s.ready_replicas == 5
            && s.current_revision == s.update_revision
        {
            break;
        }
        if drops < 3 {
            sim.faults().drop_watches();
            drops += 1;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "rollout did not finish: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        most_unready <= 2,
        "{most_unready} ordinals unready at once (maxUnavailable 2)"
    );
    let failed: u64 = sim
        .counters()
        .snapshot()
        .into_iter()
        .filter(|(k, _)| k.resource == "pods" && k.code == 500)
        .map(|(_, n)| n)
        .sum();
    assert_eq!(
        failed, 4,
        "the injected pod create and delete errors were served"
    );
    for reason in ["FailedCreate", "FailedDelete"] {
        eventually(&format!("a {reason} event"), WAIT, || async {
            kruise_testkit::events_about(&client, client.default_namespace(), "ft")
                .await
                .iter()
                .any(|e| e.reason.as_deref() == Some(reason))
                .then_some(())
        })
        .await;
    }
    // The failure conditions went once the writes succeeded again.
    let status = sets(&client).get("ft").await.unwrap().status.unwrap();
    assert!(status.conditions.is_empty(), "{:?}", status.conditions);
    assert_eq!(
        pod_creates(sim.counters()) - creates_before,
        5,
        "each pod recreated exactly once"
    );
    controller.stop().await;
}

#[tokio::test]
async fn an_orphan_at_the_current_revision_is_adopted_without_a_restart() {
    use kruise_statefulset::plan::{IdentityGates, new_pod, plan_revisions};
    let (cluster, client) = cluster().await;
    let controller = RunningController::start(&client);
    let set = statefulset(
        "ad",
        "nginx:1",
        json!({"replicas": 2, "podManagementPolicy": "Parallel"}),
    );
    // ad-1 as OpenKruise would have left it after its set was deleted with --cascade=orphan:
    // same name, labels and revision, no owner.
    let revision = plan_revisions(&set, &[]).update.metadata.name.unwrap();
    let gates = IdentityGates {
        pod_index_label: true,
    };
    let mut orphan = new_pod(
        &set,
        &set.spec.template,
        &revision,
        1,
        gates,
        jiff::Timestamp::now(),
    );
    orphan.metadata.owner_references = None;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let orphan = pods.create(&PostParams::default(), &orphan).await.unwrap();
    let created = sets(&client)
        .create(&PostParams::default(), &set)
        .await
        .unwrap();
    wait_rolled_out(&client, "ad", 2).await;
    let adopted = pods.get("ad-1").await.unwrap();
    assert_eq!(adopted.uid(), orphan.uid(), "adopted, not recreated");
    let owner = adopted
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .cloned()
        .unwrap();
    assert_eq!(owner.uid, created.uid().unwrap());
    let restarts = adopted.status.unwrap().container_statuses.unwrap()[0].restart_count;
    assert_eq!(restarts, 0);
    assert_eq!(names(&pods_of(&client, "ad").await), ["ad-0", "ad-1"]);
    assert_eq!(pod_creates(cluster.counters()), 2, "the orphan and ad-0");
    // An orphan appearing later wakes the set its name names: ad-5 is adopted, and being
    // outside the window, scaled in.
    let mut late = new_pod(
        &set,
        &set.spec.template,
        &revision,
        5,
        gates,
        jiff::Timestamp::now(),
    );
    late.metadata.owner_references = None;
    pods.create(&PostParams::default(), &late).await.unwrap();
    eventually("ad-5 adopted and deleted", WAIT, || async {
        pods.get_opt("ad-5").await.unwrap().is_none().then_some(())
    })
    .await;
    // The event is recorded after the delete: on a real API server it can land later
    // than the pod's removal is seen.
    eventually("ad-5's SuccessfulDelete event", WAIT, || async {
        pods_in_events(&client, "ad", "SuccessfulDelete")
            .await
            .contains(&"ad-5".to_string())
            .then_some(())
    })
    .await;
    controller.stop().await;
    cluster.shutdown().await;
}

/// OpenKruise's e2e "should adopt matching orphans and release non-matching pods": a pod
/// whose labels are all removed leaves the controller's pod watch (it selects by label),
/// and is released all the same; with its labels back it is adopted again.
#[tokio::test]
async fn a_pod_stripped_of_its_labels_is_released_and_adopted_again_when_they_return() {
    let (cluster, client) = cluster().await;
    let controller = RunningController::start(&client);
    let set = statefulset("rel", "nginx:1", json!({"replicas": 1}));
    let created = sets(&client)
        .create(&PostParams::default(), &set)
        .await
        .unwrap();
    wait_rolled_out(&client, "rel", 1).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let before = pods.get("rel-0").await.unwrap();
    let labels = before.labels().clone();
    let controller_uid = |pod: &Pod| {
        pod.owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
            .map(|o| o.uid.clone())
    };
    assert_eq!(controller_uid(&before), created.uid());

    let strip = json!([{"op": "remove", "path": "/metadata/labels"}]);
    let strip: json_patch::Patch = serde_json::from_value(strip).unwrap();
    pods.patch("rel-0", &PatchParams::default(), &Patch::<()>::Json(strip))
        .await
        .unwrap();
    eventually("rel-0 released", WAIT, || async {
        let pod = pods.get("rel-0").await.unwrap();
        controller_uid(&pod).is_none().then_some(pod)
    })
    .await;

    let back = json!({"metadata": {"labels": labels}});
    pods.patch("rel-0", &PatchParams::default(), &Patch::Merge(&back))
        .await
        .unwrap();
    let adopted = eventually("rel-0 adopted again", WAIT, || async {
        let pod = pods.get("rel-0").await.unwrap();
        (controller_uid(&pod) == created.uid()).then_some(pod)
    })
    .await;
    assert_eq!(adopted.uid(), before.uid(), "the same pod throughout");
    controller.stop().await;
    cluster.shutdown().await;
}

fn claims_api(client: &Client) -> Api<PersistentVolumeClaim> {
    Api::default_namespaced(client.clone())
}

/// The names of the claims of set `name`, sorted.
async fn claim_names(client: &Client, name: &str) -> Vec<String> {
    let mut names: Vec<String> = claims_api(client)
        .list(&ListParams::default().labels(&format!("app={name}")))
        .await
        .unwrap()
        .items
        .iter()
        .map(|c| c.name_any())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn retention_delete_removes_scaled_away_claims_past_reserved_ordinals_then_the_rest() {
    let (cluster, client) = cluster().await;
    let controller = RunningController::start(&client);
    let spec = json!({
        "replicas": 4, "reserveOrdinals": [1], "podManagementPolicy": "Parallel",
        "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Delete"},
    });
    sets(&client)
        .create(&PostParams::default(), &statefulset("db", "nginx:1", spec))
        .await
        .unwrap();
    wait_rolled_out(&client, "db", 4).await;
    assert_eq!(
        names(&pods_of(&client, "db").await),
        ["db-0", "db-2", "db-3", "db-4"]
    );
    let set_uid = sets(&client).get("db").await.unwrap().uid().unwrap();
    for claim in claims_api(&client)
        .list(&ListParams::default())
        .await
        .unwrap()
    {
        let owners = claim.owner_references();
        assert_eq!(owners.len(), 1, "{}", claim.name_any());
        assert_eq!(
            (owners[0].uid.as_str(), owners[0].controller),
            (set_uid.as_str(), None)
        );
    }
    // The simulator's binder bound them.
    eventually("claims bound", WAIT, || async {
        let claims = claims_api(&client)
            .list(&ListParams::default())
            .await
            .ok()?;
        claims
            .iter()
            .all(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
            .then_some(())
    })
    .await;

    // Scale in: ordinals 3 and 4 leave the window (not 1 and 2: K#1530), with their claims.
    sets(&client)
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap();
    eventually("claims of db-3 and db-4 deleted", WAIT, || async {
        (claim_names(&client, "db").await == ["data-db-0", "data-db-2"]).then_some(())
    })
    .await;
    assert_eq!(names(&pods_of(&client, "db").await), ["db-0", "db-2"]);

    // Deleting the set takes the rest.
    sets(&client)
        .delete("db", &Default::default())
        .await
        .unwrap();
    eventually("every claim deleted with the set", WAIT, || async {
        claim_names(&client, "db").await.is_empty().then_some(())
    })
    .await;
    controller.stop().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn retain_keeps_claims_and_a_pending_pod_gets_its_deleted_claim_back() {
    let (cluster, client) = cluster().await;
    let controller = RunningController::start(&client);
    sets(&client)
        .create(
            &PostParams::default(),
            &statefulset("keep", "nginx:1", json!({"replicas": 2})),
        )
        .await
        .unwrap();
    wait_rolled_out(&client, "keep", 2).await;
    sets(&client)
        .patch(
            "keep",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    eventually("keep-1 gone", WAIT, || async {
        (names(&pods_of(&client, "keep").await) == ["keep-0"]).then_some(())
    })
    .await;
    assert_eq!(
        claim_names(&client, "keep").await,
        ["data-keep-0", "data-keep-1"]
    );

    // A pod no node accepts stays Pending; its claim, deleted, comes back.
    let unschedulable = json!({
        "replicas": 1,
        "template": {"spec": {"nodeSelector": {"sim.kruise.io/none": "x"}}},
    });
    sets(&client)
        .create(
            &PostParams::default(),
            &statefulset("pend", "nginx:1", unschedulable),
        )
        .await
        .unwrap();
    let old_uid = eventually("pend-0 pending with its claim", WAIT, || async {
        let pods = pods_of(&client, "pend").await;
        let pending = pods.first()?.status.as_ref()?.phase.as_deref() == Some("Pending");
        let claim = claims_api(&client).get("data-pend-0").await.ok()?;
        pending.then(|| claim.uid()).flatten()
    })
    .await;
    claims_api(&client)
        .delete("data-pend-0", &Default::default())
        .await
        .unwrap();
    eventually("data-pend-0 created again", WAIT, || async {
        let claim = claims_api(&client).get("data-pend-0").await.ok()?;
        (claim.uid() != Some(old_uid.clone())).then_some(())
    })
    .await;
    // Events are published by a background queue, after the write they report.
    eventually("the claim's SuccessfulCreate event", WAIT, || async {
        let events =
            kruise_testkit::events_about(&client, client.default_namespace(), "pend").await;
        events
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("SuccessfulCreate")
                    && e.message.as_deref()
                        == Some("create Claim data-pend-0 Pod pend-0 in StatefulSet pend success")
            })
            .then_some(())
    })
    .await;
    controller.stop().await;
    cluster.shutdown().await;
}

fn storage_class(name: &str, expandable: bool) -> k8s_openapi::api::storage::v1::StorageClass {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "provisioner": "sim.kruise.io/hostpath",
        "allowVolumeExpansion": expandable,
    }))
    .unwrap()
}

/// Claim template `data` of `size` in `class`.
fn claim_template(class: &str, size: &str) -> serde_json::Value {
    json!([{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
        "storageClassName": class, "resources": {"requests": {"storage": size}}}}])
}

#[tokio::test]
async fn sim_only_on_pod_rolling_update_expands_claims_before_each_in_place_update() {
    let (_sim, client) = sim().await;
    let classes: Api<k8s_openapi::api::storage::v1::StorageClass> = Api::all(client.clone());
    for (name, expandable) in [("elastic", true), ("fixed", false)] {
        classes
            .create(&PostParams::default(), &storage_class(name, expandable))
            .await
            .unwrap();
    }
    let settings = Settings {
        gates: kruise_statefulset::plan::PlanGates {
            auto_resize_pvc: true,
            ..Default::default()
        },
        ..Settings::default()
    };
    let controller = RunningController::start_with(&client, settings);
    for (name, class) in [("grow", "elastic"), ("stuck", "fixed")] {
        let spec = json!({
            "podManagementPolicy": "Parallel",
            "volumeClaimUpdateStrategy": {"type": "OnPodRollingUpdate"},
            "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}},
            "volumeClaimTemplates": claim_template(class, "1Gi"),
        });
        sets(&client)
            .create(&PostParams::default(), &statefulset(name, "nginx:1", spec))
            .await
            .unwrap();
    }
    for name in ["grow", "stuck"] {
        wait_rolled_out(&client, name, 3).await;
        eventually(
            &format!("{name}: 3 ready claims in status"),
            WAIT,
            || async {
                let set = sets(&client).get(name).await.ok()?;
                let claims = set.status?.volume_claims;
                (claims.len() == 1 && claims[0].compatible_ready_replicas == 3).then_some(())
            },
        )
        .await;
    }
    let before = pods_of(&client, "grow").await;

    for (name, class) in [("grow", "elastic"), ("stuck", "fixed")] {
        let patch = json!({"spec": {
            "volumeClaimTemplates": claim_template(class, "2Gi"),
            "template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}},
        }});
        sets(&client)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    let set = wait_rolled_out(&client, "grow", 3).await;
    eventually("grow: every claim 2Gi and ready", WAIT, || async {
        let set = sets(&client).get("grow").await.ok()?;
        let claims = set.status?.volume_claims;
        (claims[0].compatible_replicas == 3 && claims[0].compatible_ready_replicas == 3)
            .then_some(())
    })
    .await;
    for i in 0..3 {
        let claim = claims_api(&client)
            .get(&format!("data-grow-{i}"))
            .await
            .unwrap();
        let capacity = claim.status.clone().unwrap().capacity.unwrap()["storage"]
            .0
            .clone();
        assert_eq!(capacity, "2Gi");
        assert_eq!(claim.annotations()["apps.kruise.io/owned-by-asts"], "grow");
    }
    let after = pods_of(&client, "grow").await;
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(b.uid(), a.uid(), "{} updated in place", a.name_any());
    }
    assert_eq!(
        wait_pods_in_events(&client, "grow", "SuccessfulUpdatePodInPlace", 3).await,
        ["grow-2", "grow-1", "grow-0"]
    );
    assert_eq!(set.status.unwrap().updated_replicas, 3);

    // A class that cannot expand: FailedUpdatePVC, and no pod is updated.
    eventually("stuck: FailedUpdatePVC", WAIT, || async {
        let events =
            kruise_testkit::events_about(&client, client.default_namespace(), "stuck").await;
        events
            .iter()
            .find(|e| e.reason.as_deref() == Some("FailedUpdatePVC"))
            .map(|e| e.message.clone().unwrap_or_default())
    })
    .await;
    let stuck = sets(&client).get("stuck").await.unwrap().status.unwrap();
    assert_eq!(stuck.updated_replicas, 0);
    assert!(
        pods_in_events(&client, "stuck", "SuccessfulUpdatePodInPlace")
            .await
            .is_empty()
    );
    controller.stop().await;
}

#[tokio::test]
async fn pre_delete_holds_a_scaled_away_pod_until_its_hook_label_goes() {
    let (cluster, client) = cluster().await;
    let controller = RunningController::start(&client);
    let spec = json!({
        "lifecycle": {"preDelete": {"labelsHandler": {"hold": "true"}}},
        "template": {"metadata": {"labels": {"app": "hook", "hold": "true"}}},
    });
    sets(&client)
        .create(
            &PostParams::default(),
            &statefulset("hook", "nginx:1", spec),
        )
        .await
        .unwrap();
    wait_rolled_out(&client, "hook", 3).await;
    sets(&client)
        .patch(
            "hook",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    eventually("hook-2 PreparingDelete", WAIT, || async {
        let pod = pods.get("hook-2").await.ok()?;
        (pod.labels()
            .get("lifecycle.apps.kruise.io/state")
            .map(String::as_str)
            == Some("PreparingDelete"))
        .then_some(())
    })
    .await;
    let held = pods.get("hook-2").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_none());
    pods.patch(
        "hook-2",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"hold": null}}})),
    )
    .await
    .unwrap();
    eventually("hook-2 deleted", WAIT, || async {
        (names(&pods_of(&client, "hook").await) == ["hook-0", "hook-1"]).then_some(())
    })
    .await;
    controller.stop().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn an_orphan_revision_the_selector_matches_is_adopted() {
    let (cluster, client) = cluster().await;
    let revisions: Api<k8s_openapi::api::apps::v1::ControllerRevision> =
        Api::default_namespaced(client.clone());
    let orphan: k8s_openapi::api::apps::v1::ControllerRevision = serde_json::from_value(json!({
        "metadata": {"name": "orph-left-behind", "labels": {"app": "orph"}},
        "data": {"spec": {"template": {"$patch": "replace"}}},
        "revision": 1,
    }))
    .unwrap();
    revisions
        .create(&PostParams::default(), &orphan)
        .await
        .unwrap();
    let controller = RunningController::start(&client);
    sets(&client)
        .create(
            &PostParams::default(),
            &statefulset("orph", "nginx:1", json!({"replicas": 1})),
        )
        .await
        .unwrap();
    wait_rolled_out(&client, "orph", 1).await;
    let uid = sets(&client).get("orph").await.unwrap().uid().unwrap();
    let adopted = revisions.get("orph-left-behind").await.unwrap();
    let owner = &adopted.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("StatefulSet", uid.as_str(), Some(true))
    );
    controller.stop().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn pre_normal_holds_each_new_pod_until_its_hook_label_arrives() {
    let (cluster, client) = cluster().await;
    let controller = RunningController::start(&client);
    let spec =
        json!({"replicas": 2, "lifecycle": {"preNormal": {"labelsHandler": {"warm": "true"}}}});
    sets(&client)
        .create(
            &PostParams::default(),
            &statefulset("warm", "nginx:1", spec),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let state = |pod: Pod| {
        pod.labels()
            .get("lifecycle.apps.kruise.io/state")
            .cloned()
            .unwrap_or_default()
    };
    eventually("warm-0 ready and PreparingNormal", WAIT, || async {
        let pod = pods.get("warm-0").await.ok()?;
        let ready = kruise_core::pods::is_pod_ready(&pod);
        (ready && state(pod) == "PreparingNormal").then_some(())
    })
    .await;
    // OrderedReady waits: a PreparingNormal pod is not available.
    assert_eq!(names(&pods_of(&client, "warm").await), ["warm-0"]);
    pods.patch(
        "warm-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"warm": "true"}}})),
    )
    .await
    .unwrap();
    eventually("warm-0 Normal and warm-1 created", WAIT, || async {
        let normal = state(pods.get("warm-0").await.ok()?) == "Normal";
        let next = pods.get("warm-1").await.ok()?;
        (normal && state(next) == "PreparingNormal").then_some(())
    })
    .await;
    controller.stop().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn unordered_update_recreates_pods_in_priority_order() {
    let (cluster, client) = cluster().await;
    let controller = RunningController::start(&client);
    let spec = json!({
        "podManagementPolicy": "Parallel",
        "updateStrategy": {"rollingUpdate": {"unorderedUpdate": {"priorityStrategy": {
            "weightPriority": [{"weight": 50, "matchSelector": {"matchLabels": {"tier": "canary"}}}]}}}},
    });
    sets(&client)
        .create(
            &PostParams::default(),
            &statefulset("prio", "nginx:1", spec),
        )
        .await
        .unwrap();
    wait_rolled_out(&client, "prio", 3).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    pods.patch(
        "prio-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"tier": "canary"}}})),
    )
    .await
    .unwrap();
    set_image(&client, "prio", "nginx:2", json!({})).await;
    wait_rolled_out(&client, "prio", 3).await;
    assert_eq!(
        wait_pods_in_events(&client, "prio", "SuccessfulDelete", 3).await,
        ["prio-0", "prio-2", "prio-1"]
    );
    controller.stop().await;
    cluster.shutdown().await;
}

/// OpenKruise's e2e InplaceVPA rolling update "including resources": with
/// `InPlaceWorkloadVerticalScaling` an image and cpu/memory change is made in place — the
/// same pods, the container restarted once for the image, the new resources in spec and
/// status (resized through `pods/resize`, which the chart's role allows).
#[tokio::test]
async fn with_vertical_scaling_an_image_and_resources_change_is_made_in_place() {
    let (cluster, client) = cluster().await;
    image_and_resources_rollout(&client, &client).await;
    cluster.shutdown().await;
}

/// A resize the server refuses is sent again: the pod is not counted updated with its old
/// resources (the resize goes before the patch that moves the pod to the new revision).
#[tokio::test]
async fn sim_only_an_in_place_update_whose_resize_fails_is_not_counted_until_the_resize_lands() {
    let (sim, client) = sim().await;
    let refused = kruise_testkit::sim::fail_resizes(&sim, 2);
    // The controller sees every 500 itself (no client-side retries).
    image_and_resources_rollout(&client, &sim.client_without_retries().unwrap()).await;
    refused.all_met();
}

/// An Advanced StatefulSet `vpa` of 2, its image and resources then changed with
/// `InPlaceWorkloadVerticalScaling` on, by a controller on `controller_client`: the same
/// pods, each with the new image and resources in spec and status, restarted once.
async fn image_and_resources_rollout(client: &Client, controller_client: &Client) {
    let settings = Settings {
        gates: kruise_statefulset::plan::PlanGates {
            vertical_scaling: true,
            env_from_metadata: true,
            ..Default::default()
        },
        ..Settings::default()
    };
    let controller = RunningController::start_with(controller_client, settings);
    let client = client.clone();
    let resources = |cpu: &str, memory: &str| json!({"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}});
    let container = |image: &str, cpu: &str, memory: &str| json!([{"name": "main", "image": image, "resources": resources(cpu, memory)}]);
    let set = statefulset(
        "vpa",
        "nginx:1",
        json!({"replicas": 2,
               "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}},
               "template": {"spec": {"containers": container("nginx:1", "100m", "100Mi")}}}),
    );
    sets(&client)
        .create(&PostParams::default(), &set)
        .await
        .unwrap();
    wait_rolled_out(&client, "vpa", 2).await;
    let uids = |pods: &[Pod]| -> Vec<String> { pods.iter().filter_map(|p| p.uid()).collect() };
    let before = uids(&pods_of(&client, "vpa").await);
    sets(&client)
        .patch(
            "vpa",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"template": {"spec": {
                "containers": container("nginx:2", "200m", "200Mi")}}}})),
        )
        .await
        .unwrap();
    let resized = eventually(
        "every pod updated, the new resources reported",
        WAIT,
        || async {
            let pods = pods_of(&client, "vpa").await;
            (pods.len() == 2
                && pods.iter().all(|pod| {
                    let status = serde_json::to_value(pod.status.as_ref()).unwrap();
                    status["containerStatuses"][0]["resources"] == resources("200m", "200Mi")
                        && status["containerStatuses"][0]["image"] == "nginx:2"
                }))
            .then_some(pods)
        },
    )
    .await;
    wait_rolled_out(&client, "vpa", 2).await;
    assert_eq!(uids(&resized), before, "the same pods");
    for pod in resized {
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
