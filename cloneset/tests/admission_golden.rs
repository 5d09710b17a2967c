//! The CloneSet webhooks as the API server sees them: AdmissionReview JSON in, response out
//! (allowed or denied with OpenKruise's message and code, the exact JSONPatch of the
//! defaults), the ConversionReview at `/convert`, and arbitrary JSON never panicking a handler.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kruise_admission::AdmissionHandler as _;
use kruise_cloneset::admission::{
    MUTATE_PATH, MutateCloneSet, VALIDATE_PATH, ValidateCloneSet, routes, routes_for,
};
use kruise_testkit::admission::{self, Target, decoded_patch};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionReview};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};

fn review_body(
    version: &str,
    operation: &str,
    object: Option<Value>,
    old: Option<Value>,
) -> Vec<u8> {
    let target = Target::apps(version, "CloneSet", "clonesets", "web");
    admission::review_body(target, operation, object, old)
}

fn cloneset(version: &str, spec: Value) -> Value {
    json!({
        "apiVersion": format!("apps.kruise.io/{version}"),
        "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": "default", "uid": "cs-uid"},
        "spec": spec,
    })
}

fn minimal_spec() -> Value {
    json!({
        "replicas": 3,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "main", "image": "nginx:1", "x-unknown": "kept"}]}
        }
    })
}

/// The minimal spec as the defaulting webhook leaves it (what validation sees).
fn defaulted_spec(version: &str) -> Value {
    let mut spec = minimal_spec();
    spec["revisionHistoryLimit"] = json!(10);
    let strategy = json!({"partition": 0, "maxUnavailable": "20%", "maxSurge": 0});
    if version == "v1alpha1" {
        let mut s = strategy;
        s["type"] = json!("ReCreate");
        spec["updateStrategy"] = s;
    } else {
        let mut r = strategy;
        r["podUpdatePolicy"] = json!("ReCreate");
        spec["updateStrategy"] = json!({"type": "RollingUpdate", "rollingUpdate": r});
    }
    spec
}

async fn answer(path: &str, body: &[u8]) -> Value {
    let out = routes(None).review(path, body).await.unwrap();
    assert_eq!(out["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(out["kind"], "AdmissionReview");
    admission::response_of(&out)
}

/// The pod-template defaults a CREATE of [`minimal_spec`] gets (OpenKruise's
/// `SetDefaultPodSpec`, written as Go encodes the template).
fn template_default_ops() -> Vec<Value> {
    let add = |path: &str, value: Value| json!({"op": "add", "path": format!("/spec/template{path}"), "value": value});
    vec![
        add("/metadata/creationTimestamp", Value::Null),
        add("/spec/containers/0/imagePullPolicy", json!("Always")),
        add("/spec/containers/0/resources", json!({})),
        add(
            "/spec/containers/0/terminationMessagePath",
            json!("/dev/termination-log"),
        ),
        add("/spec/containers/0/terminationMessagePolicy", json!("File")),
        add("/spec/dnsPolicy", json!("ClusterFirst")),
        add("/spec/restartPolicy", json!("Always")),
        add("/spec/schedulerName", json!("default-scheduler")),
        add("/spec/securityContext", json!({})),
        add("/spec/terminationGracePeriodSeconds", json!(30)),
    ]
}

/// `first`, the template defaults, then `rest`: the order of the patch's paths.
fn with_template_defaults(first: Value, rest: Vec<Value>) -> Value {
    let mut ops = vec![first];
    ops.extend(template_default_ops());
    ops.extend(rest);
    Value::Array(ops)
}

#[tokio::test]
async fn v1alpha1_create_gets_openkruise_defaults_as_a_patch() {
    let body = review_body(
        "v1alpha1",
        "CREATE",
        Some(cloneset("v1alpha1", minimal_spec())),
        None,
    );
    let response = answer(MUTATE_PATH, &body).await;
    assert_eq!(response["allowed"], true);
    assert_eq!(
        decoded_patch(&response),
        with_template_defaults(
            json!({"op": "add", "path": "/spec/revisionHistoryLimit", "value": 10}),
            vec![
                json!({"op": "add", "path": "/spec/updateStrategy", "value": {
                "type": "ReCreate", "partition": 0, "maxUnavailable": "20%", "maxSurge": 0}})
            ]
        )
    );
}

#[tokio::test]
async fn v1beta1_create_gets_openkruise_defaults_and_keeps_unknown_fields() {
    let mut spec = minimal_spec();
    spec["updateStrategy"] = json!({"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}});
    let body = review_body("v1beta1", "CREATE", Some(cloneset("v1beta1", spec)), None);
    let response = answer(MUTATE_PATH, &body).await;
    assert_eq!(response["allowed"], true);
    assert_eq!(
        decoded_patch(&response),
        with_template_defaults(
            json!({"op": "add", "path": "/spec/revisionHistoryLimit", "value": 10}),
            vec![
                json!({"op": "add", "path": "/spec/updateStrategy/rollingUpdate/inPlaceUpdateStrategy", "value": {}}),
                json!({"op": "add", "path": "/spec/updateStrategy/rollingUpdate/maxSurge", "value": 0}),
                json!({"op": "add", "path": "/spec/updateStrategy/rollingUpdate/maxUnavailable", "value": "20%"}),
                json!({"op": "add", "path": "/spec/updateStrategy/rollingUpdate/partition", "value": 0}),
                json!({"op": "add", "path": "/spec/updateStrategy/type", "value": "RollingUpdate"}),
            ]
        )
    );
}

#[tokio::test]
async fn defaulting_leaves_fields_the_types_do_not_know_alone() {
    for version in ["v1alpha1", "v1beta1"] {
        let mut spec = minimal_spec();
        spec["futureSpecField"] = json!({"a": 1});
        spec["scaleStrategy"] = json!({"futureScaleKnob": true});
        spec["updateStrategy"] = json!({"futureUpdateKnob": "x"});
        let mut object = cloneset(version, spec);
        object["status"] = json!({"futureStatus": 1});
        let body = review_body(version, "CREATE", Some(object.clone()), None);
        let response = answer(MUTATE_PATH, &body).await;
        assert_eq!(response["allowed"], true, "{version}");
        let patch = decoded_patch(&response);
        assert!(
            patch
                .as_array()
                .unwrap()
                .iter()
                .all(|op| op["op"] != "remove"),
            "{version}: {patch}"
        );
        let patch: json_patch::Patch = serde_json::from_value(patch).unwrap();
        json_patch::patch(&mut object, &patch).unwrap();
        assert_eq!(object["spec"]["futureSpecField"], json!({"a": 1}));
        assert_eq!(object["spec"]["scaleStrategy"]["futureScaleKnob"], true);
        assert_eq!(object["spec"]["updateStrategy"]["futureUpdateKnob"], "x");
        assert_eq!(object["status"]["futureStatus"], 1);
        assert_eq!(object["spec"]["revisionHistoryLimit"], 10, "{version}");
    }
}

#[tokio::test]
async fn a_defaulted_cloneset_gets_no_patch() {
    let mut spec = minimal_spec();
    spec["revisionHistoryLimit"] = json!(10);
    spec["updateStrategy"] =
        json!({"type": "ReCreate", "partition": 0, "maxUnavailable": "20%", "maxSurge": 0});
    let body = review_body(
        "v1alpha1",
        "UPDATE",
        Some(cloneset("v1alpha1", spec.clone())),
        Some(cloneset("v1alpha1", spec)),
    );
    let response = answer(MUTATE_PATH, &body).await;
    assert_eq!(response["allowed"], true);
    assert!(response.get("patch").is_none(), "{response}");
}

/// OpenKruise injects the template defaults on UPDATE only when the template changed.
#[tokio::test]
async fn an_update_that_changes_the_template_gets_the_template_defaults() {
    let mut old = minimal_spec();
    old["revisionHistoryLimit"] = json!(10);
    old["updateStrategy"] =
        json!({"type": "ReCreate", "partition": 0, "maxUnavailable": "20%", "maxSurge": 0});
    let mut new = old.clone();
    new["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
    let body = review_body(
        "v1alpha1",
        "UPDATE",
        Some(cloneset("v1alpha1", new)),
        Some(cloneset("v1alpha1", old)),
    );
    let response = answer(MUTATE_PATH, &body).await;
    assert_eq!(response["allowed"], true);
    assert_eq!(
        decoded_patch(&response),
        Value::Array(template_default_ops())
    );
}

/// With `TemplateNoDefaults` only the CloneSet's own fields are defaulted.
#[tokio::test]
async fn template_no_defaults_keeps_the_template_as_sent() {
    let gates = kruise_core::featuregate::FeatureGates::parse("TemplateNoDefaults=true").unwrap();
    let body = review_body(
        "v1alpha1",
        "CREATE",
        Some(cloneset("v1alpha1", minimal_spec())),
        None,
    );
    let out = routes_for(None, &gates)
        .review(MUTATE_PATH, &body)
        .await
        .unwrap();
    let patch = decoded_patch(&out["response"]);
    assert!(
        patch
            .as_array()
            .unwrap()
            .iter()
            .all(|op| !op["path"].as_str().unwrap().starts_with("/spec/template")),
        "{patch}"
    );
}

#[tokio::test]
async fn a_valid_cloneset_is_allowed() {
    for version in ["v1alpha1", "v1beta1"] {
        let body = review_body(
            version,
            "CREATE",
            Some(cloneset(version, defaulted_spec(version))),
            None,
        );
        let response = answer(VALIDATE_PATH, &body).await;
        assert_eq!(response["allowed"], true, "{version}: {response}");
    }
}

#[tokio::test]
async fn a_selector_that_misses_the_template_is_denied_with_the_field_path() {
    let mut spec = defaulted_spec("v1beta1");
    spec["selector"] = json!({"matchLabels": {"app": "other"}});
    let body = review_body("v1beta1", "CREATE", Some(cloneset("v1beta1", spec)), None);
    let response = answer(VALIDATE_PATH, &body).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 422);
    assert_eq!(
        response["status"]["message"],
        "spec.template.metadata.labels: Invalid value: {\"app\":\"web\"}: `selector` does not match template `labels`"
    );
}

#[tokio::test]
async fn several_errors_are_listed_together() {
    let mut spec = defaulted_spec("v1alpha1");
    spec["replicas"] = json!(-1);
    spec["updateStrategy"]["maxSurge"] = json!("many");
    let body = review_body("v1alpha1", "CREATE", Some(cloneset("v1alpha1", spec)), None);
    let response = answer(VALIDATE_PATH, &body).await;
    assert_eq!(response["allowed"], false);
    let message = response["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with('[') && message.ends_with(']'),
        "{message}"
    );
    assert!(message.contains("spec.replicas"), "{message}");
    assert!(
        message.contains("spec.updateStrategy.maxSurge"),
        "{message}"
    );
}

#[tokio::test]
async fn changing_the_selector_is_forbidden() {
    let old = cloneset("v1alpha1", defaulted_spec("v1alpha1"));
    let mut spec = defaulted_spec("v1alpha1");
    spec["selector"] = json!({"matchLabels": {"app": "web", "tier": "front"}});
    spec["template"]["metadata"]["labels"]["tier"] = json!("front");
    let body = review_body(
        "v1alpha1",
        "UPDATE",
        Some(cloneset("v1alpha1", spec)),
        Some(old),
    );
    let response = answer(VALIDATE_PATH, &body).await;
    assert_eq!(response["allowed"], false);
    let message = response["status"]["message"].as_str().unwrap();
    assert!(
        message
            .contains("spec: Forbidden: updates to cloneset spec for fields other than 'replicas'"),
        "{message}"
    );
}

#[tokio::test]
async fn deletion_protection_on_delete() {
    let protected = |value: &str, replicas: i64| {
        let mut cs = cloneset("v1beta1", minimal_spec());
        cs["metadata"]["labels"] = json!({"policy.kruise.io/delete-protection": value});
        cs["spec"]["replicas"] = json!(replicas);
        review_body("v1beta1", "DELETE", None, Some(cs))
    };
    let response = answer(VALIDATE_PATH, &protected("Always", 0)).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 403);
    assert_eq!(
        response["status"]["message"],
        "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Always"
    );
    let response = answer(VALIDATE_PATH, &protected("Cascading", 3)).await;
    assert_eq!(
        response["status"]["message"],
        "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Cascading and replicas 3>0"
    );
    let response = answer(VALIDATE_PATH, &protected("Cascading", 0)).await;
    assert_eq!(response["allowed"], true);
    // Already being deleted (finalizers pending): OpenKruise lets the DELETE through.
    let mut deleting = cloneset("v1beta1", minimal_spec());
    deleting["metadata"]["labels"] = json!({"policy.kruise.io/delete-protection": "Always"});
    deleting["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
    let body = review_body("v1beta1", "DELETE", None, Some(deleting));
    assert_eq!(answer(VALIDATE_PATH, &body).await["allowed"], true);
    let body = review_body(
        "v1beta1",
        "DELETE",
        None,
        Some(cloneset("v1beta1", minimal_spec())),
    );
    assert_eq!(answer(VALIDATE_PATH, &body).await["allowed"], true);
}

#[tokio::test]
async fn an_undecodable_spec_is_denied_not_crashed() {
    let body = review_body(
        "v1beta1",
        "CREATE",
        Some(cloneset("v1beta1", json!({"replicas": "three"}))),
        None,
    );
    for path in [MUTATE_PATH, VALIDATE_PATH] {
        let response = answer(path, &body).await;
        assert_eq!(response["allowed"], false, "{path}");
        let message = response["status"]["message"].as_str().unwrap();
        assert!(message.starts_with("cannot decode CloneSet"), "{message}");
    }
}

#[test]
fn conversion_review_at_convert() {
    let converters: Vec<std::sync::Arc<dyn kruise_admission::Converter>> =
        vec![std::sync::Arc::new(
            kruise_cloneset::conversion::CloneSetConverter,
        )];
    let mut spec = minimal_spec();
    spec["updateStrategy"] = json!({"type": "InPlaceIfPossible", "partition": 1});
    let body = serde_json::to_vec(&json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": "c1",
            "desiredAPIVersion": "apps.kruise.io/v1beta1",
            "objects": [cloneset("v1alpha1", spec)]
        }
    }))
    .unwrap();
    let out = kruise_admission::conversion::review(&converters, &body).unwrap();
    assert_eq!(out["response"]["uid"], "c1");
    assert_eq!(out["response"]["result"]["status"], "Success");
    let converted = &out["response"]["convertedObjects"][0];
    assert_eq!(converted["apiVersion"], "apps.kruise.io/v1beta1");
    assert_eq!(converted["metadata"]["uid"], "cs-uid");
    assert_eq!(
        converted["spec"]["updateStrategy"]["rollingUpdate"]["podUpdatePolicy"],
        "InPlaceIfPossible"
    );
    assert_eq!(
        converted["spec"]["updateStrategy"]["rollingUpdate"]["partition"],
        1
    );
}

#[test]
fn webhook_entries_carry_openkruise_names_and_rules() {
    let hooks = routes(None).webhooks();
    let names: Vec<(&str, &str)> = hooks
        .iter()
        .map(|(path, spec)| (path.as_str(), spec.name.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![
            (MUTATE_PATH, "mcloneset.kb.io"),
            (VALIDATE_PATH, "vcloneset.kb.io")
        ]
    );
    let validating = &hooks[1].1;
    assert_eq!(
        validating.rules[0].operations,
        vec!["CREATE", "UPDATE", "DELETE"]
    );
    assert_eq!(
        validating.rules[0].api_versions,
        vec!["v1alpha1", "v1beta1"]
    );
    assert_eq!(validating.rules[0].resources, vec!["clonesets"]);
}

/// Arbitrary JSON: scalars, arrays and objects nested a few levels, with keys that include
/// the CloneSet fields so decoding gets deep before it fails.
fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-z0-9%-]{0,8}".prop_map(Value::from),
    ];
    let keys = prop_oneof![
        Just("replicas".to_string()),
        Just("selector".to_string()),
        Just("template".to_string()),
        Just("updateStrategy".to_string()),
        Just("rollingUpdate".to_string()),
        Just("scaleStrategy".to_string()),
        Just("podsToDelete".to_string()),
        Just("partition".to_string()),
        Just("maxUnavailable".to_string()),
        Just("maxSurge".to_string()),
        Just("type".to_string()),
        Just("matchLabels".to_string()),
        Just("metadata".to_string()),
        Just("labels".to_string()),
        "[a-z]{1,6}",
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(keys.clone(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn request(
    version: &str,
    operation: &str,
    spec: Value,
    old_spec: Value,
) -> Option<AdmissionRequest<DynamicObject>> {
    let body = review_body(
        version,
        operation,
        Some(cloneset(version, spec)),
        Some(cloneset(version, old_spec)),
    );
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(&body).ok()?;
    review.try_into().ok()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_json_never_panics_a_handler(
        spec in arbitrary_json(),
        old_spec in arbitrary_json(),
        version in prop_oneof![Just("v1alpha1"), Just("v1beta1"), Just("v2")],
        operation in prop_oneof![Just("CREATE"), Just("UPDATE"), Just("DELETE")],
    ) {
        let Some(req) = request(version, operation, spec, old_spec) else {
            return Ok(());
        };
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            // A panic fails the property; errors and denials are fine.
            let _ = MutateCloneSet::default().handle(&req).await;
            let _ = ValidateCloneSet { client: None }.handle(&req).await;
        });
    }
}
