//! The ImagePullJob, ImageListPullJob and NodeImage webhooks as the API server sees them:
//! AdmissionReview JSON in, response out (the JSONPatch of the defaults; a denial with HTTP
//! 422 and the field path), the ConversionReview at `/convert`, and arbitrary JSON never
//! panicking a handler.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use kruise_imagepull::admission::routes;
use kruise_imagepull::conversion::{
    IMAGELISTPULLJOB_CONVERTER, IMAGEPULLJOB_CONVERTER, NODEIMAGE_CONVERTER,
};
use kruise_testkit::admission::{self, Target, decoded_patch};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};

const IPJ_MUTATE: &str = "/mutate-apps-kruise-io-imagepulljob";
const IPJ_VALIDATE: &str = "/validate-apps-kruise-io-imagepulljob";
const ILPJ_MUTATE: &str = "/mutate-apps-kruise-io-imagelistpulljob";
const ILPJ_VALIDATE: &str = "/validate-apps-kruise-io-imagelistpulljob";
const NI_MUTATE: &str = "/mutate-apps-kruise-io-nodeimage";
const NI_VALIDATE: &str = "/validate-apps-kruise-io-nodeimage";
fn review_body(
    kind: &str,
    resource: &str,
    version: &str,
    operation: &str,
    object: Value,
    old: Value,
) -> Vec<u8> {
    let target = Target::apps(version, kind, resource, "demo");
    admission::review_body(target, operation, Some(object), Some(old))
}

fn object(kind: &str, version: &str, spec: Value) -> Value {
    json!({
        "apiVersion": format!("apps.kruise.io/{version}"),
        "kind": kind,
        "metadata": {"name": "demo", "namespace": "default"},
        "spec": spec,
    })
}

async fn answer(path: &str, body: &[u8]) -> Value {
    let out = routes().review(path, body).await.unwrap();
    admission::response_of(&out)
}

#[tokio::test]
async fn imagepulljob_create_gets_openkruise_defaults_in_both_versions() {
    for version in ["v1alpha1", "v1beta1"] {
        let spec =
            json!({"image": "nginx", "selector": {"matchLabels": {"pool": "a"}}, "x-unknown": 1});
        let body = review_body(
            "ImagePullJob",
            "imagepulljobs",
            version,
            "CREATE",
            object("ImagePullJob", version, spec),
            Value::Null,
        );
        let response = answer(IPJ_MUTATE, &body).await;
        assert_eq!(response["allowed"], true);
        assert_eq!(
            decoded_patch(&response),
            json!([
                {"op": "add", "path": "/spec/completionPolicy", "value": {"type": "Always"}},
                {"op": "add", "path": "/spec/imagePullPolicy", "value": "IfNotPresent"},
                {"op": "add", "path": "/spec/pullPolicy", "value": {"backoffLimit": 3, "timeoutSeconds": 600}}
            ]),
            "{version}"
        );
    }
}

#[tokio::test]
async fn imagelistpulljob_create_gets_openkruise_defaults() {
    let body = review_body(
        "ImageListPullJob",
        "imagelistpulljobs",
        "v1beta1",
        "CREATE",
        object(
            "ImageListPullJob",
            "v1beta1",
            json!({"images": ["nginx", "busybox"], "completionPolicy": {"type": "Never"}}),
        ),
        Value::Null,
    );
    let response = answer(ILPJ_MUTATE, &body).await;
    assert_eq!(
        decoded_patch(&response),
        json!([
            {"op": "add", "path": "/spec/pullPolicy", "value": {"backoffLimit": 3, "timeoutSeconds": 600}}
        ])
    );
}

#[tokio::test]
async fn nodeimage_tags_get_created_at_and_pull_policy() {
    let spec = json!({"images": {"nginx": {"tags": [{"tag": "1", "pullPolicy": {"ttlSecondsAfterFinished": 300}}]}}});
    let mut node_image = object("NodeImage", "v1beta1", spec);
    node_image["metadata"] = json!({"name": "node-1"});
    let body = review_body(
        "NodeImage",
        "nodeimages",
        "v1beta1",
        "CREATE",
        node_image,
        Value::Null,
    );
    let patch = decoded_patch(&answer(NI_MUTATE, &body).await);
    let ops = patch.as_array().unwrap();
    let paths: Vec<&str> = ops.iter().map(|op| op["path"].as_str().unwrap()).collect();
    assert_eq!(
        paths,
        [
            "/spec/images/nginx/tags/0/createdAt",
            "/spec/images/nginx/tags/0/pullPolicy/backoffLimit",
            "/spec/images/nginx/tags/0/pullPolicy/timeoutSeconds"
        ]
    );
    let created_at = ops[0]["value"].as_str().unwrap();
    assert!(
        created_at.parse::<jiff::Timestamp>().is_ok(),
        "{created_at}"
    );
}

#[tokio::test]
async fn invalid_objects_are_denied_422_with_the_field() {
    for (path, kind, resource, spec, message) in [
        (
            IPJ_VALIDATE,
            "ImagePullJob",
            "imagepulljobs",
            json!({"image": "nginx", "parallelism": "50%"}),
            "spec.parallelism: Invalid value: \"50%\": parallelism does not support percentage value",
        ),
        (
            ILPJ_VALIDATE,
            "ImageListPullJob",
            "imagelistpulljobs",
            json!({"images": ["nginx", "nginx"]}),
            "spec.images[1]: Duplicate value: \"nginx\"",
        ),
        (
            NI_VALIDATE,
            "NodeImage",
            "nodeimages",
            json!({"images": {"nginx": {"tags": [{"tag": "1", "createdAt": "2026-01-01T00:00:00Z"}]}}}),
            "spec.images[nginx].tags[0].pullPolicy: Required value: pullPolicy field for nginx/1 must set",
        ),
    ] {
        for version in ["v1alpha1", "v1beta1"] {
            let body = review_body(
                kind,
                resource,
                version,
                "CREATE",
                object(kind, version, spec.clone()),
                Value::Null,
            );
            let response = answer(path, &body).await;
            assert_eq!(response["allowed"], false, "{kind} {version}");
            assert_eq!(response["status"]["code"], 422);
            assert_eq!(response["status"]["message"], message);
        }
    }
}

#[tokio::test]
async fn an_imagepulljob_update_may_not_change_its_pull_secrets() {
    let old = object(
        "ImagePullJob",
        "v1beta1",
        json!({"image": "nginx", "pullSecrets": ["a"]}),
    );
    let parallelism_only = object(
        "ImagePullJob",
        "v1beta1",
        json!({"image": "nginx", "pullSecrets": ["a"], "parallelism": 4}),
    );
    let body = review_body(
        "ImagePullJob",
        "imagepulljobs",
        "v1beta1",
        "UPDATE",
        parallelism_only,
        old.clone(),
    );
    assert_eq!(answer(IPJ_VALIDATE, &body).await["allowed"], true);
    let secrets_changed = object(
        "ImagePullJob",
        "v1beta1",
        json!({"image": "nginx", "pullSecrets": ["b"]}),
    );
    let body = review_body(
        "ImagePullJob",
        "imagepulljobs",
        "v1beta1",
        "UPDATE",
        secrets_changed,
        old,
    );
    let response = answer(IPJ_VALIDATE, &body).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(
        response["status"]["message"],
        "spec.pullSecrets: Forbidden: spec.pullSecrets is immutable"
    );
}

#[test]
fn convert_serves_the_three_kinds() {
    let mut node_image = object(
        "NodeImage",
        "v1beta1",
        json!({"images": {"nginx": {"tags": [{"tag": "1"}]}}}),
    );
    node_image["metadata"] = json!({"name": "node-1"});
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": "c1",
            "desiredAPIVersion": "apps.kruise.io/v1alpha1",
            "objects": [
                object("ImagePullJob", "v1beta1", json!({"image": "nginx", "parallelism": 2})),
                object("ImageListPullJob", "v1beta1", json!({"images": ["nginx"]})),
                node_image,
            ]
        }
    });
    let converted = kruise_admission::conversion::review(
        &[
            Arc::new(IMAGEPULLJOB_CONVERTER),
            Arc::new(IMAGELISTPULLJOB_CONVERTER),
            Arc::new(NODEIMAGE_CONVERTER),
        ],
        &serde_json::to_vec(&review).unwrap(),
    )
    .unwrap();
    assert_eq!(converted["response"]["result"]["status"], "Success");
    let objects = converted["response"]["convertedObjects"]
        .as_array()
        .unwrap();
    let versions: Vec<&str> = objects
        .iter()
        .map(|o| o["apiVersion"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["apps.kruise.io/v1alpha1"; 3]);
    assert_eq!(objects[0]["spec"]["parallelism"], 2);
    assert_eq!(objects[2]["spec"]["images"]["nginx"]["tags"][0]["tag"], "1");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Whatever JSON a spec holds, every handler answers (allowed, denied or a decode
    /// error), never panics.
    #[test]
    fn arbitrary_specs_never_panic(spec in arbitrary_json(3)) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        for (path, kind, resource) in [
            (IPJ_MUTATE, "ImagePullJob", "imagepulljobs"),
            (IPJ_VALIDATE, "ImagePullJob", "imagepulljobs"),
            (ILPJ_MUTATE, "ImageListPullJob", "imagelistpulljobs"),
            (ILPJ_VALIDATE, "ImageListPullJob", "imagelistpulljobs"),
            (NI_MUTATE, "NodeImage", "nodeimages"),
            (NI_VALIDATE, "NodeImage", "nodeimages"),
        ] {
            for operation in ["CREATE", "UPDATE"] {
                let obj = object(kind, "v1beta1", spec.clone());
                let body = review_body(kind, resource, "v1beta1", operation, obj.clone(), obj);
                let _ = rt.block_on(routes().review(path, &body));
            }
        }
    }
}

fn arbitrary_json(depth: u32) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-zA-Z0-9 :/%@=_.-]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(depth, 32, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(
                proptest::sample::select(vec![
                    "image",
                    "images",
                    "nginx",
                    "tags",
                    "tag",
                    "selector",
                    "names",
                    "matchLabels",
                    "podSelector",
                    "parallelism",
                    "pullPolicy",
                    "completionPolicy",
                    "type",
                    "pullSecrets",
                    "imagePullPolicy",
                ])
                .prop_map(String::from),
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
