//! The ContainerRecreateRequest webhook as the API server sees it: AdmissionReview JSON in,
//! response out (the JSONPatch that fills the request from its pod; a denial with
//! OpenKruise's code and message), the ConversionReview at `/convert`, and arbitrary JSON
//! never panicking the handler.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use base64::Engine as _;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_crr::admission::{MUTATE_PATH, PodSource, routes};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};

const UID: &str = "705ab4f5-6393-11e8-b7cc-42010a800002";

/// Fixed pods and nodes.
struct Fixed {
    pods: Vec<Pod>,
    nodes: Vec<Node>,
}

impl PodSource for Fixed {
    fn pod<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Pod>, String>> {
        let found = self.pods.iter().find(|p| {
            p.metadata.namespace.as_deref() == Some(namespace)
                && p.metadata.name.as_deref() == Some(name)
        });
        Box::pin(std::future::ready(Ok(found.cloned())))
    }

    fn node<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Node>, String>> {
        let found = self
            .nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(name));
        Box::pin(std::future::ready(Ok(found.cloned())))
    }
}

fn pod(name: &str, patch: impl FnOnce(&mut Value)) -> Pod {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": "pod-uid-1"},
        "spec": {
            "nodeName": "node-1",
            "terminationGracePeriodSeconds": 45,
            "containers": [
                {"name": "app", "image": "nginx",
                 "ports": [{"containerPort": 80, "name": "http"}],
                 "lifecycle": {"preStop": {"httpGet": {"path": "/quit", "port": "http"}}}},
                {"name": "sidecar", "image": "busybox",
                 "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "sleep 1"]}}}},
                {"name": "plain", "image": "busybox"},
                {"name": "starting", "image": "busybox"},
            ],
        },
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {"name": "app", "containerID": "containerd://aaa", "restartCount": 2, "ready": true, "image": "nginx", "imageID": ""},
                {"name": "sidecar", "containerID": "containerd://bbb", "restartCount": 0, "ready": true, "image": "busybox", "imageID": ""},
                {"name": "plain", "containerID": "containerd://ccc", "restartCount": 0, "ready": true, "image": "busybox", "imageID": ""},
                {"name": "starting", "restartCount": 0, "ready": false, "image": "busybox", "imageID": ""},
            ],
        },
    });
    patch(&mut pod);
    serde_json::from_value(pod).unwrap()
}

fn node(name: &str, labels: Value) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
}

fn cluster(pods: Vec<Pod>) -> Arc<dyn PodSource> {
    Arc::new(Fixed {
        pods,
        nodes: vec![
            node("node-1", json!({})),
            node("vk", json!({"type": "virtual-kubelet"})),
        ],
    })
}

fn crr(version: &str, spec: Value) -> Value {
    json!({
        "apiVersion": format!("apps.kruise.io/{version}"),
        "kind": "ContainerRecreateRequest",
        "metadata": {"name": "demo", "namespace": "default"},
        "spec": spec,
    })
}

fn review(version: &str, operation: &str, object: Value, old: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": UID,
            "kind": {"group": "apps.kruise.io", "version": version, "kind": "ContainerRecreateRequest"},
            "resource": {"group": "apps.kruise.io", "version": version, "resource": "containerrecreaterequests"},
            "name": "demo",
            "namespace": "default",
            "operation": operation,
            "userInfo": {"username": "admin"},
            "object": object,
            "oldObject": old,
            "dryRun": false
        }
    }))
    .unwrap()
}

async fn answer_with(source: Arc<dyn PodSource>, gate: bool, body: &[u8]) -> Value {
    let out = routes(Some(source), gate)
        .review(MUTATE_PATH, body)
        .await
        .unwrap();
    assert_eq!(out["response"]["uid"], UID);
    out["response"].clone()
}

async fn create(version: &str, spec: Value) -> Value {
    let body = review(version, "CREATE", crr(version, spec), Value::Null);
    answer_with(cluster(vec![pod("pod-0", |_| {})]), true, &body).await
}

fn patched(object: &Value, response: &Value) -> Value {
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(response["patchType"], "JSONPatch");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(response["patch"].as_str().unwrap())
        .unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
    let mut object = object.clone();
    json_patch::patch(&mut object, &patch).unwrap();
    object
}

fn denial(response: &Value) -> (i64, String) {
    assert_eq!(response["allowed"], false, "{response}");
    (
        response["status"]["code"].as_i64().unwrap(),
        response["status"]["message"].as_str().unwrap().to_string(),
    )
}

#[tokio::test]
async fn create_is_filled_from_the_pod_in_both_versions() {
    for version in ["v1alpha1", "v1beta1"] {
        let spec = json!({
            "podName": "pod-0",
            "containers": [{"name": "app"}, {"name": "sidecar"}, {"name": "plain"}],
            "strategy": {"orderedRecreate": true, "aFutureField": 1},
            "ttlSecondsAfterFinished": 10,
        });
        let object = crr(version, spec.clone());
        let response = create(version, spec).await;
        assert_eq!(
            patched(&object, &response),
            json!({
                "apiVersion": format!("apps.kruise.io/{version}"),
                "kind": "ContainerRecreateRequest",
                "metadata": {"name": "demo", "namespace": "default", "labels": {
                    "crr.apps.kruise.io/active": "true",
                    "crr.apps.kruise.io/node-name": "node-1",
                    "crr.apps.kruise.io/pod-uid": "pod-uid-1",
                }},
                "spec": {
                    "podName": "pod-0",
                    "containers": [
                        {"name": "app",
                         "preStop": {"httpGet": {"path": "/quit", "port": "http"}},
                         "ports": [{"containerPort": 80, "name": "http"}],
                         "statusContext": {"containerID": "containerd://aaa", "restartCount": 2}},
                        {"name": "sidecar",
                         "preStop": {"exec": {"command": ["sh", "-c", "sleep 1"]}},
                         "statusContext": {"containerID": "containerd://bbb", "restartCount": 0}},
                        {"name": "plain",
                         "statusContext": {"containerID": "containerd://ccc", "restartCount": 0}},
                    ],
                    "strategy": {"orderedRecreate": true, "aFutureField": 1,
                                 "failurePolicy": "Fail", "terminationGracePeriodSeconds": 45},
                    "ttlSecondsAfterFinished": 10,
                },
            }),
            "{version}"
        );
    }
}

#[tokio::test]
async fn a_given_grace_period_and_policy_are_kept_and_strategy_defaults_to_empty() {
    let spec = json!({"podName": "pod-0", "containers": [{"name": "plain"}],
                      "strategy": {"failurePolicy": "Ignore", "terminationGracePeriodSeconds": 0}});
    let out = patched(
        &crr("v1beta1", spec.clone()),
        &create("v1beta1", spec).await,
    );
    assert_eq!(
        out["spec"]["strategy"],
        json!({"failurePolicy": "Ignore", "terminationGracePeriodSeconds": 0})
    );
    let spec = json!({"podName": "pod-0", "containers": [{"name": "plain"}]});
    let out = patched(
        &crr("v1beta1", spec.clone()),
        &create("v1beta1", spec).await,
    );
    assert_eq!(
        out["spec"]["strategy"],
        json!({"failurePolicy": "Fail", "terminationGracePeriodSeconds": 45})
    );
}

#[tokio::test]
async fn requests_are_refused_with_openkruise_messages() {
    let cases = [
        (
            json!({"containers": [{"name": "app"}]}),
            "podName can not be empty",
        ),
        (
            json!({"podName": "pod-0", "containers": []}),
            "containers list can not be null",
        ),
        (
            json!({"podName": "pod-0"}),
            "containers list can not be null",
        ),
        (
            json!({"podName": "pod-0", "containers": [{"name": "app"}], "activeDeadlineSeconds": 2}),
            "activeDeadlineSeconds can not be less than 3s",
        ),
        (
            json!({"podName": "pod-0", "containers": [{"name": "app"}], "strategy": {"terminationGracePeriodSeconds": -1}}),
            "terminationGracePeriodSeconds must be non-negative integer",
        ),
        (
            json!({"podName": "pod-0", "containers": [{"name": "app"}], "strategy": {"unreadyGracePeriodSeconds": -1}}),
            "unreadyGracePeriodSeconds must be non-negative integer",
        ),
        (
            json!({"podName": "pod-0", "containers": [{"name": "app"}], "strategy": {"failurePolicy": "Retry"}}),
            "unknown failurePolicy Retry",
        ),
        (
            json!({"podName": "nope", "containers": [{"name": "app"}]}),
            "no found Pod named nope",
        ),
        (
            json!({"podName": "pod-0", "containers": [{"name": "app"}, {"name": "app"}]}),
            "can not recreate app multi times",
        ),
        (
            json!({"podName": "pod-0", "containers": [{"name": "ghost"}]}),
            "container ghost not found in Pod",
        ),
        (
            json!({"podName": "pod-0", "containers": [{"name": "starting"}]}),
            "no containerID in starting containerStatus, maybe the container has not been initialized",
        ),
        (
            json!({"podName": "pod-0", "containers": [{"name": "app", "statusContext": {"containerID": "x", "restartCount": 0}}]}),
            "preStop, ports, statusContext in container are ready-only fields",
        ),
        (
            json!({"podName": "pod-0", "containers": [{"name": "app", "ports": []}]}),
            "preStop, ports, statusContext in container are ready-only fields",
        ),
    ];
    for (spec, message) in cases {
        for version in ["v1alpha1", "v1beta1"] {
            assert_eq!(
                denial(&create(version, spec.clone()).await),
                (400, message.to_string()),
                "{spec}"
            );
        }
    }
}

#[tokio::test]
async fn the_pod_must_be_active_scheduled_and_on_a_known_node() {
    let cases = [
        (
            pod("pod-0", |p| p["status"]["phase"] = json!("Succeeded")),
            "not allowed to recreate containers in an inactive Pod",
        ),
        (
            pod("pod-0", |p| {
                p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z")
            }),
            "not allowed to recreate containers in an inactive Pod",
        ),
        (
            pod("pod-0", |p| p["spec"]["nodeName"] = Value::Null),
            "not allowed to recreate containers in a pending Pod",
        ),
        (
            pod("pod-0", |p| p["spec"]["nodeName"] = json!("gone")),
            "failed to get Node gone: nodes \"gone\" not found",
        ),
    ];
    let spec = json!({"podName": "pod-0", "containers": [{"name": "plain"}]});
    for (pod, message) in cases {
        let body = review(
            "v1beta1",
            "CREATE",
            crr("v1beta1", spec.clone()),
            Value::Null,
        );
        let response = answer_with(cluster(vec![pod]), true, &body).await;
        assert_eq!(denial(&response), (400, message.to_string()));
    }
    // A pod stopped by the sidecar terminator still takes requests.
    let terminated = pod("pod-0", |p| {
        p["status"]["phase"] = json!("Failed");
        p["status"]["conditions"] = json!([{"type": "SidecarTerminated", "status": "True"}]);
    });
    let body = review(
        "v1beta1",
        "CREATE",
        crr("v1beta1", spec.clone()),
        Value::Null,
    );
    let response = answer_with(cluster(vec![terminated]), true, &body).await;
    assert_eq!(response["allowed"], true);
}

#[tokio::test]
async fn a_virtual_kubelet_node_is_labelled_and_long_pod_names_work() {
    // K#1046: the pod's name is in no label value, so an 80-character name is fine.
    let name = "p".repeat(80);
    let vk_pod = pod(&name, |p| p["spec"]["nodeName"] = json!("vk"));
    let spec = json!({"podName": name, "containers": [{"name": "plain"}]});
    let object = crr("v1beta1", spec);
    let body = review("v1beta1", "CREATE", object.clone(), Value::Null);
    let response = answer_with(cluster(vec![vk_pod]), true, &body).await;
    let out = patched(&object, &response);
    assert_eq!(
        out["metadata"]["labels"],
        json!({
            "crr.apps.kruise.io/active": "true",
            "crr.apps.kruise.io/node-name": "vk",
            "crr.apps.kruise.io/pod-uid": "pod-uid-1",
            "type": "virtual-kubelet",
        })
    );
    for value in out["metadata"]["labels"].as_object().unwrap().values() {
        assert!(value.as_str().unwrap().len() <= 63);
    }
}

#[tokio::test]
async fn updates_keep_spec_and_identity_labels() {
    let spec = json!({"podName": "pod-0", "containers": [{"name": "app"}]});
    let mut old = crr("v1beta1", spec.clone());
    old["metadata"]["labels"] = json!({
        "crr.apps.kruise.io/pod-uid": "u", "crr.apps.kruise.io/node-name": "n", "crr.apps.kruise.io/active": "true"});
    let update = |version: &str, new: Value, old: Value| review(version, "UPDATE", new, old);
    let source = || cluster(vec![]);

    // Removing the active label (as the controller does on completion) is allowed.
    let mut done = old.clone();
    done["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("crr.apps.kruise.io/active");
    let r = answer_with(source(), true, &update("v1beta1", done, old.clone())).await;
    assert_eq!(r["allowed"], true);
    assert!(r.get("patch").is_none());

    let mut changed = old.clone();
    changed["spec"]["podName"] = json!("pod-1");
    let r = answer_with(source(), true, &update("v1beta1", changed, old.clone())).await;
    assert_eq!(
        denial(&r),
        (403, "spec of ContainerRecreateRequest is immutable".into())
    );

    for key in ["crr.apps.kruise.io/pod-uid", "crr.apps.kruise.io/node-name"] {
        let mut relabelled = old.clone();
        relabelled["metadata"]["labels"][key] = json!("other");
        let r = answer_with(source(), true, &update("v1beta1", relabelled, old.clone())).await;
        assert_eq!(
            denial(&r),
            (403, format!("not allowed to update immutable label {key}"))
        );
    }

    // v1alpha1: the unready-acquired annotation, once set, stays.
    let mut acquired = old.clone();
    acquired["metadata"]["annotations"] =
        json!({"crr.apps.kruise.io/unready-acquired": "2026-01-01T00:00:00Z"});
    let mut moved = acquired.clone();
    moved["metadata"]["annotations"]["crr.apps.kruise.io/unready-acquired"] =
        json!("2026-01-01T00:00:09Z");
    let r = answer_with(source(), true, &update("v1alpha1", moved, acquired.clone())).await;
    assert_eq!(
        denial(&r),
        (
            403,
            "not allowed to update immutable annotation crr.apps.kruise.io/unready-acquired".into()
        )
    );
    let r = answer_with(source(), true, &update("v1alpha1", acquired, old)).await;
    assert_eq!(r["allowed"], true);
}

#[tokio::test]
async fn without_the_kruise_daemon_gate_requests_are_forbidden() {
    let spec = json!({"podName": "pod-0", "containers": [{"name": "app"}]});
    let body = review("v1beta1", "CREATE", crr("v1beta1", spec), Value::Null);
    let response = answer_with(cluster(vec![pod("pod-0", |_| {})]), false, &body).await;
    assert_eq!(
        denial(&response),
        (403, "feature-gate KruiseDaemon is not enabled".into())
    );
}

#[test]
fn convert_review_serves_the_kind() {
    let mut object = crr(
        "v1beta1",
        json!({"podName": "pod-0", "containers": [{"name": "app"}]}),
    );
    object["status"] = json!({"phase": "Recreating", "containerStatusSnapshot": [
        {"name": "app", "ready": true, "restartCount": 3, "containerID": "containerd://x"}]});
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "c1", "desiredAPIVersion": "apps.kruise.io/v1alpha1", "objects": [object]},
    });
    let converted = kruise_admission::conversion::review(
        &[Arc::new(kruise_crr::conversion::CrrConverter)],
        &serde_json::to_vec(&review).unwrap(),
    )
    .unwrap();
    assert_eq!(converted["response"]["result"]["status"], "Success");
    let out = &converted["response"]["convertedObjects"][0];
    assert_eq!(out["apiVersion"], "apps.kruise.io/v1alpha1");
    assert_eq!(
        out["metadata"]["annotations"]["crr.apps.kruise.io/sync-container-statuses"],
        r#"[{"name":"app","ready":true,"restartCount":3,"containerID":"containerd://x"}]"#
    );
    assert!(out["status"].get("containerStatusSnapshot").is_none());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Whatever JSON a spec holds, the handler answers (allowed, denied or a decode error),
    /// never panics.
    #[test]
    fn arbitrary_specs_never_panic(spec in arbitrary_json(3), op in proptest::sample::select(vec!["CREATE", "UPDATE"])) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        for version in ["v1alpha1", "v1beta1"] {
            let old = crr(version, json!({"podName": "pod-0", "containers": [{"name": "app"}]}));
            let body = review(version, op, crr(version, spec.clone()), old);
            let _ = rt.block_on(routes(Some(cluster(vec![pod("pod-0", |_| {})])), true).review(MUTATE_PATH, &body));
        }
    }
}

fn arbitrary_json(depth: u32) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-zA-Z0-9 _-]{0,8}".prop_map(Value::from),
        Just(Value::from("pod-0")),
        Just(Value::from("app")),
    ];
    leaf.prop_recursive(depth, 32, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(
                proptest::sample::select(vec![
                    "podName",
                    "containers",
                    "name",
                    "strategy",
                    "failurePolicy",
                    "terminationGracePeriodSeconds",
                    "activeDeadlineSeconds",
                    "preStop",
                    "ports",
                    "statusContext",
                ])
                .prop_map(String::from),
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
