//! The PUB admission decision and its status write against kruise-sim: two webhook
//! replicas evicting concurrently never spend more than the budget; a replica deciding from
//! its watches refuses without an API request and grants with one write;
//! ignoredPodSelector, dry runs and a budget deleted meanwhile (K#1567).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kruise_protection::api::v1beta1::{PodUnavailableBudget, PubOperation};
use kruise_protection::plan::decision::Gates;
use kruise_protection::pod_admission::{PubAdmission, Verdict};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{reflector, watcher};
use serde_json::json;
use support::*;

const EXHAUSTED: &str = r#"podunavailablebudget.policy.kruise.io "web" is forbidden: pub unavailable allowed is negative"#;

async fn pod(client: &kube::Client, name: &str) -> Pod {
    Api::<Pod>::default_namespaced(client.clone())
        .get(name)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_evictions_across_two_replicas_spend_the_budget_once() {
    let (cluster, client) = cluster(2).await;
    let _controller = start(&client);
    deployment(&client, "web", 4, 4).await;
    budget(
        &client,
        "web",
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}),
    )
    .await;
    wait_for_numbers(&client, "web", (1, 4, 3, 4)).await;

    let replicas = [
        PubAdmission::new(cluster.client(), Gates::default(), None),
        PubAdmission::new(cluster.client(), Gates::default(), None),
    ];
    let mut tasks = Vec::new();
    for i in 0..4 {
        let admission = replicas[i % 2].clone();
        let pod = pod(&client, &format!("web-7d4b9-{i}")).await;
        tasks.push(tokio::spawn(async move {
            admission
                .admit(&pod, &PubOperation::Evict, false)
                .await
                .unwrap()
        }));
    }
    let mut verdicts = Vec::new();
    for task in tasks {
        verdicts.push(task.await.unwrap());
    }
    let allowed = verdicts.iter().filter(|v| **v == Verdict::Allowed).count();
    assert_eq!(allowed, 1, "{verdicts:?}");
    for verdict in &verdicts {
        if let Verdict::Denied(message) = verdict {
            assert!(
                message == EXHAUSTED
                    || message
                        == "Timeout: couldn't update PodUnavailableBudget web due to conflicts",
                "{message}"
            );
        }
    }
    let status = Api::<PodUnavailableBudget>::default_namespaced(client.clone())
        .get("web")
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(status.disrupted_pods.len(), 1);
    assert_eq!(status.unavailable_allowed, 0);

    // The pod already granted goes through again without spending anything.
    let granted = status.disrupted_pods.keys().next().unwrap().clone();
    assert_eq!(
        replicas[0]
            .admit(&pod(&client, &granted).await, &PubOperation::Delete, false)
            .await
            .unwrap(),
        Verdict::Allowed
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_pods_dry_runs_and_a_deleted_budget() {
    let (cluster, client) = cluster(2).await;
    let _controller = start(&client);
    deployment(&client, "web", 2, 2).await;
    budget(
        &client,
        "web",
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1,
        "ignoredPodSelector": {"matchLabels": {"drain": "ok"}}}),
    )
    .await;
    wait_for_numbers(&client, "web", (1, 2, 1, 2)).await;
    let admission = PubAdmission::new(client.clone(), Gates::default(), None);

    // A dry run is answered without spending the budget.
    let first = pod(&client, "web-7d4b9-0").await;
    assert_eq!(
        admission
            .admit(&first, &PubOperation::Evict, true)
            .await
            .unwrap(),
        Verdict::Allowed
    );
    wait_for_numbers(&client, "web", (1, 2, 1, 2)).await;
    assert_eq!(
        admission
            .admit(&first, &PubOperation::Evict, false)
            .await
            .unwrap(),
        Verdict::Allowed
    );
    let second = changed(&pod(&client, "web-7d4b9-1").await, Some("100m"), None);
    assert_eq!(
        admission
            .admit(&second, &PubOperation::Evict, false)
            .await
            .unwrap(),
        Verdict::Denied(EXHAUSTED.into())
    );
    // The update gate is off by default: an update is not checked.
    assert_eq!(
        admission
            .admit(&second, &PubOperation::Update, false)
            .await
            .unwrap(),
        Verdict::Allowed
    );

    // Labelled for the ignoredPodSelector, the pod bypasses the budget.
    let pods = Api::<Pod>::default_namespaced(client.clone());
    pods.patch(
        "web-7d4b9-1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"drain": "ok"}}})),
    )
    .await
    .unwrap();
    let ignored = pod(&client, "web-7d4b9-1").await;
    assert_eq!(
        admission
            .admit(&ignored, &PubOperation::Evict, false)
            .await
            .unwrap(),
        Verdict::Allowed
    );

    // A budget deleted meanwhile lets the deletion through (K#1567).
    pods.patch(
        "web-7d4b9-1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"drain": null}}})),
    )
    .await
    .unwrap();
    let covered = pod(&client, "web-7d4b9-1").await;
    assert_eq!(
        admission
            .admit(&covered, &PubOperation::Delete, false)
            .await
            .unwrap(),
        Verdict::Denied(EXHAUSTED.into())
    );
    Api::<PodUnavailableBudget>::default_namespaced(client.clone())
        .delete("web", &Default::default())
        .await
        .unwrap();
    eventually("the budget is gone", WAIT, || {
        let client = client.clone();
        async move {
            Api::<PodUnavailableBudget>::default_namespaced(client)
                .get_opt("web")
                .await
                .unwrap()
                .is_none()
                .then_some(())
        }
    })
    .await;
    assert_eq!(
        admission
            .admit(&covered, &PubOperation::Delete, false)
            .await
            .unwrap(),
        Verdict::Allowed
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_its_watches_a_replica_grants_with_one_write_and_confirms_a_refusal_with_one_read() {
    let (cluster, client) = cluster(2).await;
    let namespace = client.default_namespace().to_string();
    let controller = start(&client);
    deployment(&client, "web", 4, 4).await;
    budget(
        &client,
        "web",
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 2}),
    )
    .await;
    wait_for_numbers(&client, "web", (2, 4, 2, 4)).await;
    // Nothing else writes the budget from here on, so the requests counted are the
    // admission's own.
    controller.stop().await;

    let (budgets, budget_writer) = reflector::store::<PodUnavailableBudget>();
    let budget_watch = reflector::reflector(
        budget_writer,
        watcher::watcher(
            Api::default_namespaced(client.clone()),
            watcher::Config::default(),
        ),
    );
    let budget_watch = tokio::spawn(budget_watch.for_each(|_| async {}));
    // The pods' watch as it stands a moment behind the API: web-7d4b9-3 still NotReady
    // there, though it is Ready.
    let (pods, mut pod_writer) = reflector::store::<Pod>();
    let pod_api = Api::<Pod>::default_namespaced(client.clone());
    pod_writer.apply_watcher_event(&watcher::Event::Init);
    for mut cached in pod_api.list(&Default::default()).await.unwrap().items {
        if cached.metadata.name.as_deref() == Some("web-7d4b9-3") {
            for condition in cached
                .status
                .iter_mut()
                .flat_map(|s| s.conditions.iter_mut().flatten())
            {
                if condition.type_ == "Ready" {
                    condition.status = "False".into();
                }
            }
        }
        pod_writer.apply_watcher_event(&watcher::Event::InitApply(cached));
    }
    pod_writer.apply_watcher_event(&watcher::Event::InitDone);
    let admission = PubAdmission::watched(
        client.clone(),
        Gates::default(),
        None,
        budgets.clone(),
        pods,
    );
    // The watch holds the budget as the API does (the controller's last write included).
    let budget_api = Api::<PodUnavailableBudget>::default_namespaced(client.clone());
    eventually("the budget in the watch, current", WAIT, || {
        let budgets = budgets.clone();
        let budget_api = budget_api.clone();
        async move {
            let cached = budgets.state().into_iter().next()?;
            let current = budget_api.get("web").await.ok()?;
            (cached.status.as_ref()?.unavailable_allowed == 2
                && cached.metadata.resource_version == current.metadata.resource_version)
                .then_some(())
        }
    })
    .await;

    cluster.counters().reset();
    for name in ["web-7d4b9-0", "web-7d4b9-1"] {
        assert_eq!(
            admission
                .admit_eviction(&namespace, name, false)
                .await
                .unwrap(),
            Verdict::Allowed,
            "{name}"
        );
    }
    assert_eq!(
        admission
            .admit_eviction(&namespace, "web-7d4b9-2", false)
            .await
            .unwrap(),
        Verdict::Denied(EXHAUSTED.into())
    );
    let counters = cluster.counters();
    assert_eq!(
        counters.count_sub("update", "podunavailablebudgets", "status"),
        2,
        "one conditioned write per grant, the second on the first's version"
    );
    assert_eq!(counters.count("get", "podunavailablebudgets"), 0);
    assert_eq!(counters.count("list", "podunavailablebudgets"), 0);
    assert_eq!(
        counters.count("get", "pods"),
        1,
        "a refusal of an eviction is confirmed on the pod as the API has it"
    );

    // The watch's copy would exempt web-7d4b9-3 as unavailable; the pod as the API has it
    // is Ready, so it is refused.
    assert_eq!(
        admission
            .admit_eviction(&namespace, "web-7d4b9-3", false)
            .await
            .unwrap(),
        Verdict::Denied(EXHAUSTED.into())
    );
    assert_eq!(counters.count("get", "pods"), 2);
    let status = Api::<PodUnavailableBudget>::default_namespaced(client.clone())
        .get("web")
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(
        status.disrupted_pods.keys().collect::<Vec<_>>(),
        ["web-7d4b9-0", "web-7d4b9-1"]
    );
    assert_eq!(status.unavailable_allowed, 0);
    // The watch ends before the cluster does (it would reconnect to it forever).
    budget_watch.abort();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_grants_on_one_replica_write_once_and_the_others_are_refused_without_a_conflict()
{
    let (cluster, client) = cluster(2).await;
    let namespace = client.default_namespace().to_string();
    let controller = start(&client);
    deployment(&client, "web", 4, 4).await;
    budget(
        &client,
        "web",
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}),
    )
    .await;
    wait_for_numbers(&client, "web", (1, 4, 3, 4)).await;
    // Nothing else writes the budget from here on.
    controller.stop().await;

    let (budgets, budget_writer) = reflector::store::<PodUnavailableBudget>();
    let budget_watch = tokio::spawn(
        reflector::reflector(
            budget_writer,
            watcher::watcher(Api::all(client.clone()), watcher::Config::default()),
        )
        .for_each(|_| async {}),
    );
    let (pods, pod_writer) = reflector::store::<Pod>();
    let pod_watch = tokio::spawn(
        reflector::reflector(
            pod_writer,
            watcher::watcher(Api::<Pod>::all(client.clone()), watcher::Config::default()),
        )
        .for_each(|_| async {}),
    );
    let admission = PubAdmission::watched(
        client.clone(),
        Gates::default(),
        None,
        budgets.clone(),
        pods.clone(),
    );
    let budget_api = Api::<PodUnavailableBudget>::default_namespaced(client.clone());
    let current = budget_api
        .get("web")
        .await
        .unwrap()
        .metadata
        .resource_version;
    // (On a shared API server the watches hold other tests' objects too.)
    eventually("both watches holding the API's state", WAIT, || {
        let cached = budgets.get(&ObjectRef::new("web").within(namespace.as_str()));
        let pods_seen = pods
            .state()
            .iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(namespace.as_str()))
            .count();
        let current = current.clone();
        async move {
            (cached?.metadata.resource_version == current && pods_seen >= 4).then_some(())
        }
    })
    .await;

    cluster.counters().reset();
    let namespace = namespace.as_str();
    let evictions = (0..4).map(|i| {
        let admission = admission.clone();
        async move {
            admission
                .admit_eviction(namespace, &format!("web-7d4b9-{i}"), false)
                .await
                .unwrap()
        }
    });
    let verdicts = futures::future::join_all(evictions).await;
    let allowed = verdicts.iter().filter(|v| **v == Verdict::Allowed).count();
    assert_eq!(allowed, 1, "{verdicts:?}");
    let counters = cluster.counters();
    assert_eq!(
        counters.count_sub("update", "podunavailablebudgets", "status"),
        1,
        "the other decisions wait for the grant in flight and are refused on what it wrote"
    );
    assert_eq!(
        counters.count("get", "podunavailablebudgets"),
        0,
        "no conflict, so no read of the budget"
    );
    // The watches end before the cluster does (they would reconnect to it forever).
    budget_watch.abort();
    pod_watch.abort();
    // On kruise-sim the test ends without stopping the simulator, as before the test ran
    // on both: stopping it here made the test's runtime hang at exit about one run in five
    // (not understood yet); a real API server needs the clean-up.
    if cluster.sim().is_none() {
        cluster.shutdown().await;
    }
}

/// A change of the container's cpu request (`cpu`), or of its image.
fn changed(pod: &Pod, cpu: Option<&str>, image: Option<&str>) -> Pod {
    let mut pod = pod.clone();
    let container = &mut pod.spec.as_mut().unwrap().containers[0];
    if let Some(cpu) = cpu {
        let resources = container.resources.get_or_insert_with(Default::default);
        resources
            .requests
            .get_or_insert_with(Default::default)
            .insert(
                "cpu".into(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity(cpu.into()),
            );
    }
    if let Some(image) = image {
        container.image = Some(image.into());
    }
    pod
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resize_spends_a_budget_that_protects_resize_and_an_image_change_does_not() {
    use kruise_admission::pod_chain::{PodOperation, PodValidationRequest, PodVerdict};
    use kruise_core::featuregate::FeatureGates;
    use kruise_protection::pod_admission::pub_validator_step;
    use kruise_runtime::Metrics;
    use kruise_runtime::family::{LiveCluster, StepContext};
    use tokio_util::sync::CancellationToken;

    let (cluster, client) = cluster(2).await;
    let _controller = start(&client);
    deployment(&client, "web", 4, 4).await;
    budget(
        &client,
        "web",
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1,
               "protectOperations": ["RESIZE"]}),
    )
    .await;
    wait_for_numbers(&client, "web", (1, 4, 3, 4)).await;
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let step = pub_validator_step(&StepContext {
        gates: FeatureGates::parse(
            "PodUnavailableBudgetUpdateGate=true,InPlacePodVerticalScaling=true",
        )
        .unwrap(),
        live: Some(LiveCluster {
            client: client.clone(),
            refresh: Default::default(),
            shutdown: shutdown.clone(),
        }),
        metrics: Metrics::new(),
    });
    eventually("the budget's scope", WAIT, || {
        let ready = !step.scopes().is_empty();
        async move { ready.then_some(()) }
    })
    .await;
    let update = |old: Pod, new: Pod| PodValidationRequest {
        operation: PodOperation::Update,
        namespace: client.default_namespace().into(),
        name: old.metadata.name.clone().unwrap(),
        pod: Some(old),
        new_pod: Some(new),
        dry_run: false,
        username: "alice".into(),
    };

    // The pods as if they requested 100m (the Deployment's request none, and adding one
    // would change their QoS class, which makes it an UPDATE).
    let first = changed(&pod(&client, "web-7d4b9-0").await, Some("100m"), None);
    // An image change is an UPDATE, which this budget does not protect.
    let verdict = step
        .validate(&update(
            first.clone(),
            changed(&first, None, Some("nginx:1.26")),
        ))
        .await
        .unwrap();
    assert_eq!(verdict, PodVerdict::Allow);
    // A cpu change is a RESIZE: the first spends the budget (recorded as disrupted, as
    // OpenKruise records it), the second is refused.
    let verdict = step
        .validate(&update(first.clone(), changed(&first, Some("250m"), None)))
        .await
        .unwrap();
    assert_eq!(verdict, PodVerdict::Allow);
    let status = Api::<PodUnavailableBudget>::default_namespaced(client.clone())
        .get_status("web")
        .await
        .unwrap()
        .status
        .unwrap();
    assert!(
        status.disrupted_pods.contains_key("web-7d4b9-0"),
        "{status:?}"
    );
    let second = changed(&pod(&client, "web-7d4b9-1").await, Some("100m"), None);
    let verdict = step
        .validate(&update(
            second.clone(),
            changed(&second, Some("250m"), None),
        ))
        .await
        .unwrap();
    assert_eq!(verdict, PodVerdict::Deny(EXHAUSTED.into()));
    // The image change of the same pod still passes.
    let verdict = step
        .validate(&update(
            second.clone(),
            changed(&second, None, Some("nginx:1.26")),
        ))
        .await
        .unwrap();
    assert_eq!(verdict, PodVerdict::Allow);
    cluster.shutdown().await;
}
