//! SidecarSet injection as a step of the pod chain: scoped to each active SidecarSet's
//! selector, failing closed, and injecting through the chain's single patch.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use kruise_admission::FailurePolicy;
use kruise_admission::pod_chain::{KruisePodReadyGate, PodChain, PodMutator, PodRequest};
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

/// A SidecarSet whose `proxy` sidecar takes half the CPU and a fixed memory of the pod's
/// `app-*` containers, and which patches an annotation of the pod.
fn policy_set() -> SidecarSet {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "mesh"},
        "spec": {
            "selector": {"matchLabels": {"app": "nginx"}},
            "containers": [{"name": "proxy", "image": "envoy:1.30", "podInjectPolicy": "AfterAppContainer",
                "resourcesPolicy": {
                    "targetContainersMode": "sum",
                    "targetContainersNameRegex": "^app-",
                    "resourcesExpr": {
                        "limits": {"cpu": "max(cpu*50%, 50m)", "memory": "memory*25%"},
                        "requests": {"cpu": "cpu*50%", "memory": "64Mi"}
                    }
                }}],
            "patchPodMetadata": [{"annotations": {"mesh.io/inject": "true"}, "patchPolicy": "Overwrite"}]
        }
    }))
    .unwrap()
}

/// The AdmissionReview kube-apiserver sends for creating `pod`.
fn pod_review(pod: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE", "namespace": "default", "name": "",
            "userInfo": {}, "object": pod, "dryRun": false
        }
    }))
    .unwrap()
}

fn app_container(name: &str, cpu: &str, memory: &str) -> serde_json::Value {
    json!({"name": name, "image": "nginx:1.25",
           "resources": {"limits": {"cpu": cpu, "memory": memory}, "requests": {"cpu": cpu, "memory": memory}}})
}

#[tokio::test]
async fn golden_review_resources_policy_and_patched_annotations() {
    let snapshot = StaticSnapshot {
        sidecar_sets: vec![policy_set()].into(),
        ..StaticSnapshot::default()
    };
    let routes = kruise_admission::AdmissionRoutes::new()
        .handler(PodChain::new(vec![
            Arc::new(SidecarSetInjectionStep::new(snapshot)) as Arc<dyn PodMutator>,
        ]));
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "web", "namespace": "default", "labels": {"app": "nginx"},
                 "annotations": {"mesh.io/inject": "false"}},
    "spec": {"containers": [
        app_container("app-web", "300m", "512Mi"),
        app_container("app-worker", "500m", "1Gi"),
        app_container("logger", "4", "4Gi"),
    ]}});
    let response = routes
        .review("/mutate-pod", &pod_review(&pod))
        .await
        .unwrap();
    assert_eq!(response["response"]["allowed"], true, "{response}");
    let patch = response["response"]["patch"].as_str().unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(
        &base64::Engine::decode(&base64::engine::general_purpose::STANDARD, patch).unwrap(),
    )
    .unwrap();
    let mut injected = pod.clone();
    json_patch::patch(&mut injected, &patch).unwrap();
    let proxy = &injected["spec"]["containers"][3];
    assert_eq!(proxy["name"], "proxy");
    // app-web + app-worker: 800m and 1536Mi; logger does not match `^app-`.
    assert_eq!(
        proxy["resources"],
        json!({"limits": {"cpu": "400m", "memory": "384Mi"},
               "requests": {"cpu": "400m", "memory": "64Mi"}})
    );
    assert_eq!(
        injected["metadata"]["annotations"]["mesh.io/inject"],
        "true"
    );

    // A pod without an `app-` container is refused with OpenKruise's message (HTTP 500, as
    // OpenKruise's), prefixed by the pod chain with the step that failed.
    let mut lonely = pod.clone();
    lonely["spec"]["containers"] = json!([app_container("logger", "1", "1Gi")]);
    let response = routes
        .review("/mutate-pod", &pod_review(&lonely))
        .await
        .unwrap();
    assert_eq!(response["response"]["allowed"], false, "{response}");
    assert_eq!(response["response"]["status"]["code"], 500);
    assert_eq!(
        response["response"]["status"]["message"],
        r#"sidecarset: no containers match the regex pattern "^app-""#
    );
}

/// A snapshot still loading (a kruise-webhook replica that just started).
struct Loading;

impl kruise_sidecarset::admission::SidecarSetSnapshot for Loading {
    fn sidecar_sets(&self) -> Arc<[SidecarSet]> {
        Vec::new().into()
    }
    fn namespace_labels(&self, _: &str) -> Option<std::collections::BTreeMap<String, String>> {
        None
    }
    fn loaded(&self) -> bool {
        false
    }
    fn synced(&self) -> futures::future::BoxFuture<'_, Result<(), String>> {
        Box::pin(async { Err("the SidecarSets are not known yet".into()) })
    }
}

#[tokio::test]
async fn a_step_still_loading_publishes_nothing_and_refuses_pods() {
    use kruise_admission::AdmissionHandler as _;
    let step = Arc::new(SidecarSetInjectionStep::new(Loading));
    let loading = PodChain::new(vec![
        step as Arc<dyn PodMutator>,
        Arc::new(KruisePodReadyGate { all_pods: false }),
    ]);
    // Its (empty) scopes are not the cluster's: the entries in place must stay.
    assert!(!loading.webhooks_known());
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "nginx-1", "labels": {"app": "nginx"}},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]}});
    let refused = loading.run(&create(), &pod).await.unwrap_err();
    assert!(refused.to_string().contains("not known yet"), "{refused}");
    let (ready, _) = chain(vec![sidecar_set("test-sidecarset", false)]);
    assert!(ready.webhooks_known());
}
