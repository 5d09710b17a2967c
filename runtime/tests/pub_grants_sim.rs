//! `BudgetCache::check_pod` under concurrent grants on one budget, as a webhook replica sees
//! them when a budget frees up: every grant queued while one is written goes out in the next
//! write, each decided on what the write before it left, so no more pods are granted than
//! the budget allows and far fewer status writes are made than pods granted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kruise_core::pub_budget::decision::Gates;
use kruise_core::pub_budget::{PodUnavailableBudget, PodUnavailableBudgetStatus, PubOperation};
use kruise_runtime::pub_client::{BudgetCache, Verdict};
use kube::api::{Api, PostParams};
use kube::runtime::{reflector, watcher};
use kube::{CustomResourceExt as _, ResourceExt as _};
use serde_json::json;
use std::sync::Arc;

const PODS: usize = 12;
const ALLOWED: i32 = 3;

fn ready_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .unwrap()
}

fn status_writes(sim: &kruise_sim::Sim) -> u64 {
    sim.counters()
        .snapshot()
        .into_iter()
        .filter(|(key, _)| {
            key.resource == "podunavailablebudgets"
                && key.subresource == "status"
                && key.verb == "update"
        })
        .map(|(_, n)| n)
        .sum()
}

#[tokio::test]
async fn concurrent_grants_on_one_budget_share_status_writes_and_never_exceed_it() {
    let (sim, client) = kruise_testkit::sim_with_crds(0, &[PodUnavailableBudget::crd()]).await;
    let budgets = Api::<PodUnavailableBudget>::namespaced(client.clone(), "default");
    let mut budget: PodUnavailableBudget = serde_json::from_value(json!({
        "apiVersion": "policy.kruise.io/v1beta1", "kind": "PodUnavailableBudget",
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": ALLOWED}
    }))
    .unwrap();
    budget = budgets
        .create(&PostParams::default(), &budget)
        .await
        .unwrap();
    budget.status = Some(PodUnavailableBudgetStatus {
        unavailable_allowed: ALLOWED,
        desired_available: PODS as i32 - ALLOWED,
        current_available: PODS as i32,
        total_replicas: PODS as i32,
        ..Default::default()
    });
    budgets
        .replace_status("web", &PostParams::default(), &budget)
        .await
        .unwrap();

    let (store, writer) = reflector::store::<PodUnavailableBudget>();
    let stream = reflector::reflector(writer, watcher(budgets.clone(), Default::default()));
    let drive = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while stream.next().await.is_some() {}
    });
    store.wait_until_ready().await.unwrap();
    kruise_testkit::eventually(
        "the budget's status in the watch",
        kruise_testkit::WAIT,
        || {
            let seen = store.state().iter().any(|b| {
                b.status
                    .as_ref()
                    .is_some_and(|s| s.unavailable_allowed == ALLOWED)
            });
            async move { seen.then_some(()) }
        },
    )
    .await;

    let cache = Arc::new(BudgetCache::new(store));
    let writes_before = status_writes(&sim);
    let reviews: Vec<_> = (0..PODS)
        .map(|i| {
            let cache = cache.clone();
            let client = client.clone();
            tokio::spawn(async move {
                let pod = ready_pod(&format!("web-{i}"));
                let verdict = cache
                    .check_pod(
                        &client,
                        &pod,
                        false,
                        &PubOperation::Evict,
                        false,
                        Gates::default(),
                    )
                    .await
                    .unwrap();
                (pod.name_any(), verdict)
            })
        })
        .collect();
    let mut granted = Vec::new();
    let mut refused = 0;
    for review in reviews {
        match review.await.unwrap() {
            (name, Verdict::Allowed) => granted.push(name),
            (_, Verdict::Denied(message)) => {
                assert!(
                    message.contains("pub unavailable allowed is negative"),
                    "{message}"
                );
                refused += 1;
            }
        }
    }
    let writes = status_writes(&sim) - writes_before;
    let status = budgets.get("web").await.unwrap().status.unwrap();

    assert_eq!(granted.len(), ALLOWED as usize, "granted {granted:?}");
    assert_eq!(refused, PODS - ALLOWED as usize);
    assert_eq!(status.unavailable_allowed, 0);
    granted.sort();
    assert_eq!(
        status.disrupted_pods.keys().cloned().collect::<Vec<_>>(),
        granted,
        "every grant is recorded in the budget"
    );
    // The first grant is written alone; the others queued behind it go out together.
    assert!(
        writes < ALLOWED as u64,
        "{writes} status writes for {} grants",
        granted.len()
    );
    drive.abort();
}
