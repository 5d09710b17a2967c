//! SidecarSet injection as a step of the pod chain: scoped to each active SidecarSet's
//! selector, failing closed, and injecting through the chain's single patch.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use kruise_common::admission::FailurePolicy;
use kruise_common::admission::pod_chain::{KruisePodReadyGate, PodChain, PodMutator, PodRequest};
use kruise_sidecarset::admission::{SidecarSetInjectionStep, StaticSnapshot};
use kruise_sidecarset::api::v1beta1::SidecarSet;
use kube::core::admission::Operation;
use serde_json::json;

fn sidecar_set(name: &str, paused: bool) -> SidecarSet {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": "nginx"}},
            "injectionStrategy": {"paused": paused},
            "containers": [{"name": "sidecar1", "image": "centos:6.7", "command": ["sleep", "999d"],
                            "podInjectPolicy": "BeforeAppContainer"}]
        }
    }))
    .unwrap()
}

fn chain(sets: Vec<SidecarSet>) -> (PodChain, Arc<SidecarSetInjectionStep<StaticSnapshot>>) {
    let snapshot = StaticSnapshot {
        sidecar_sets: sets.into(),
        ..StaticSnapshot::default()
    };
    let step = Arc::new(SidecarSetInjectionStep::new(snapshot));
    let chain = PodChain::new(vec![
        step.clone() as Arc<dyn PodMutator>,
        Arc::new(KruisePodReadyGate { all_pods: false }),
    ]);
    (chain, step)
}

fn create() -> PodRequest {
    PodRequest {
        operation: Operation::Create,
        namespace: "default".into(),
        dry_run: false,
    }
}

/// The pod after the chain's patch.
async fn inject(chain: &PodChain, pod: &serde_json::Value) -> serde_json::Value {
    let patch = chain.run(&create(), pod).await.unwrap().unwrap();
    let mut injected = pod.clone();
    json_patch::patch(&mut injected, &patch).unwrap();
    injected
}

#[test]
fn each_active_sidecarset_is_one_fail_closed_entry() {
    let (chain, step) = chain(vec![
        sidecar_set("test-sidecarset", false),
        sidecar_set("paused", true),
    ]);
    assert_eq!(chain.step_names(), vec!["readiness-gate", "sidecarset"]);
    let scopes = step.scopes();
    assert_eq!(scopes.len(), 1, "the paused SidecarSet injects nothing");
    let specs = chain.webhook_specs();
    // The readiness gate's all-pods entry (Ignore) and the SidecarSet's (Fail).
    assert_eq!(specs.len(), 2);
    let sidecar = specs.iter().find(|s| s.object_selector.is_some()).unwrap();
    assert_eq!(sidecar.failure_policy, FailurePolicy::Fail);
    let labels = sidecar
        .object_selector
        .as_ref()
        .unwrap()
        .match_labels
        .clone()
        .unwrap();
    assert_eq!(labels.get("app").map(String::as_str), Some("nginx"));
    // No SidecarSet: no SidecarSet entry at all.
    let (chain, _) = self::chain(vec![]);
    assert_eq!(chain.webhook_specs().len(), 1);
}

#[tokio::test]
async fn the_chain_injects_sidecar1_before_the_app_container() {
    let (chain, _) = chain(vec![sidecar_set("test-sidecarset", false)]);
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "nginx"}},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}});
    let injected = inject(&chain, &pod).await;
    let names: Vec<&str> = injected["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["sidecar1", "main"]);
    let annotations = injected["metadata"]["annotations"].as_object().unwrap();
    assert!(
        annotations.contains_key("kruise.io/sidecarset-hash"),
        "{annotations:?}"
    );
    // Idempotent: a second pass changes nothing.
    assert_eq!(chain.run(&create(), &injected).await.unwrap(), None);
}

#[tokio::test]
async fn fields_newer_than_the_compiled_api_stay_on_the_app_container() {
    let (chain, _) = chain(vec![sidecar_set("test-sidecarset", false)]);
    // Neither field exists in Kubernetes 1.33's types, the API version compiled in.
    let rules = json!([{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]);
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "nginx"}},
        "spec": {"futureSchedulingHint": "spread",
                 "containers": [{"name": "main", "image": "nginx:1.25", "restartPolicyRules": rules}]}});
    let injected = inject(&chain, &pod).await;
    let containers = injected["spec"]["containers"].as_array().unwrap();
    assert_eq!(containers[0]["name"], "sidecar1");
    assert!(
        containers[0].get("restartPolicyRules").is_none(),
        "{containers:?}"
    );
    assert_eq!(containers[1]["name"], "main");
    assert_eq!(containers[1]["restartPolicyRules"], rules);
    assert_eq!(injected["spec"]["futureSchedulingHint"], "spread");
}
