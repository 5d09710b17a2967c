//! Container launch priority as kruise-webhook's pod chain runs it: AdmissionReview JSON in,
//! the JSONPatch adding the barrier env (and a generated name) out.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use base64::Engine as _;
use kruise_admission::AdmissionRoutes;
use kruise_admission::pod_chain::{MUTATE_POD_PATH, PodChain, PodMutator};
use kruise_crr::admission::launch_priority::{LaunchPriorityStep, random_name_suffix};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};

const UID: &str = "705ab4f5-6393-11e8-b7cc-42010a800002";

fn routes() -> AdmissionRoutes {
    let step: Arc<dyn PodMutator> = Arc::new(LaunchPriorityStep::new(|| "x7k2q".to_string()));
    AdmissionRoutes::new().handler(PodChain::new(vec![step]))
}

fn review(pod: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": UID,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "admin"},
            "object": pod,
            "dryRun": false
        }
    }))
    .unwrap()
}

async fn answer(pod: &Value) -> Value {
    let out = routes()
        .review(MUTATE_POD_PATH, &review(pod))
        .await
        .unwrap();
    assert_eq!(out["response"]["uid"], UID);
    out["response"].clone()
}

fn patch_of(response: &Value) -> Value {
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(response["patchType"], "JSONPatch");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(response["patch"].as_str().unwrap())
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

fn barrier(pod: &str, key: &str) -> Value {
    json!({"name": "KRUISE_CONTAINER_BARRIER",
           "valueFrom": {"configMapKeyRef": {"name": format!("{pod}-barrier"), "key": key}}})
}

#[tokio::test]
async fn an_ordered_pod_gets_the_barrier_env_in_container_order() {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": "default",
                     "annotations": {"apps.kruise.io/container-launch-priority": "Ordered"}},
        "spec": {"containers": [
            {"name": "app", "image": "nginx", "env": [{"name": "A", "value": "1"}]},
            {"name": "sidecar", "image": "busybox"}
        ]}
    });
    assert_eq!(
        patch_of(&answer(&pod).await),
        json!([
            {"op": "add", "path": "/spec/containers/0/env/1", "value": barrier("web-0", "p_0")},
            {"op": "add", "path": "/spec/containers/1/env", "value": [barrier("web-0", "p_-1")]},
        ])
    );
}

#[tokio::test]
async fn env_priorities_give_their_keys_and_a_generate_name_only_pod_is_named() {
    // K#782: the barrier's name needs the pod's, which the API server would pick later.
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "web-", "namespace": "default"},
        "spec": {"containers": [
            {"name": "app", "image": "nginx"},
            {"name": "proxy", "image": "envoy",
             "env": [{"name": "KRUISE_CONTAINER_PRIORITY", "value": "10"}]}
        ]}
    });
    assert_eq!(
        patch_of(&answer(&pod).await),
        json!([
            {"op": "add", "path": "/metadata/name", "value": "web-x7k2q"},
            {"op": "add", "path": "/spec/containers/0/env", "value": [barrier("web-x7k2q", "p_0")]},
            {"op": "add", "path": "/spec/containers/1/env/1", "value": barrier("web-x7k2q", "p_10")},
        ])
    );
}

#[tokio::test]
async fn pods_without_priorities_pass_unchanged() {
    for pod in [
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "one"},
               "spec": {"containers": [{"name": "a", "image": "x",
                   "env": [{"name": "KRUISE_CONTAINER_PRIORITY", "value": "1"}]}]}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "equal"},
               "spec": {"containers": [
                   {"name": "a", "image": "x", "env": [{"name": "KRUISE_CONTAINER_PRIORITY", "value": "2"}]},
                   {"name": "b", "image": "x", "env": [{"name": "KRUISE_CONTAINER_PRIORITY", "value": "2"}]}]}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"},
               "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "x"}]}}),
    ] {
        let response = answer(&pod).await;
        assert_eq!(response["allowed"], true, "{response}");
        assert!(response.get("patch").is_none(), "{response}");
    }
}

#[tokio::test]
async fn a_priority_that_is_not_an_integer_is_refused() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"},
        "spec": {"containers": [
            {"name": "a", "image": "x", "env": [{"name": "KRUISE_CONTAINER_PRIORITY", "value": "high"}]},
            {"name": "b", "image": "x"}]}});
    let response = answer(&pod).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(response["status"]["code"], 500);
    let message = response["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("container a: KRUISE_CONTAINER_PRIORITY \"high\" is not a 32-bit integer"),
        "{message}"
    );
}

#[test]
fn generated_suffixes_use_the_api_servers_alphabet() {
    for _ in 0..50 {
        let suffix = random_name_suffix();
        assert_eq!(suffix.len(), 5);
        assert!(
            suffix
                .chars()
                .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)),
            "{suffix}"
        );
    }
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[a-zA-Z_-]{0,8}".prop_map(Value::String),
        Just(json!("Ordered")),
        Just(json!("KRUISE_CONTAINER_PRIORITY")),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("metadata".to_string()),
                    Just("spec".to_string()),
                    Just("containers".to_string()),
                    Just("env".to_string()),
                    Just("name".to_string()),
                    Just("value".to_string()),
                    Just("annotations".to_string()),
                    "[a-z]{1,6}"
                ],
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    /// Whatever the API server sends, the chain answers with a review and never panics.
    #[test]
    fn arbitrary_pods_never_panic_the_step(object in arbitrary_json()) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let out = runtime.block_on(routes().review(MUTATE_POD_PATH, &review(&object)));
        if let Ok(out) = out {
            prop_assert_eq!(&out["response"]["uid"], UID);
        }
    }
}
