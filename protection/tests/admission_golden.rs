//! The PodUnavailableBudget webhooks as the API server sees them: AdmissionReview JSON in,
//! response out (allowed, or denied with HTTP 400 and OpenKruise's message), the
//! ConversionReview at `/convert`, and arbitrary JSON never panicking the handler.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use futures::future::BoxFuture;
use kruise_core::featuregate::FeatureGates;
use kruise_protection::admission::{NamespaceBudgets, NoBudgets, VALIDATE_PATH, routes};
use kruise_protection::api::v1beta1::PodUnavailableBudget;
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};

const UID: &str = "705ab4f5-6393-11e8-b7cc-42010a800002";

fn review_body(version: &str, operation: &str, object: Value, old: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": UID,
            "kind": {"group": "policy.kruise.io", "version": version, "kind": "PodUnavailableBudget"},
            "resource": {"group": "policy.kruise.io", "version": version, "resource": "podunavailablebudgets"},
            "name": "web",
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

fn object(version: &str, name: &str, annotations: Value, spec: Value) -> Value {
    json!({
        "apiVersion": format!("policy.kruise.io/{version}"),
        "kind": "PodUnavailableBudget",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": spec,
    })
}

/// A namespace holding these budgets.
struct Fixed(Vec<PodUnavailableBudget>);

impl NamespaceBudgets for Fixed {
    fn list<'a>(
        &'a self,
        _namespace: &'a str,
    ) -> BoxFuture<'a, Result<Vec<PodUnavailableBudget>, String>> {
        Box::pin(async move { Ok(self.0.clone()) })
    }
}

/// A namespace the API server cannot list.
struct Unlistable;

impl NamespaceBudgets for Unlistable {
    fn list<'a>(
        &'a self,
        _namespace: &'a str,
    ) -> BoxFuture<'a, Result<Vec<PodUnavailableBudget>, String>> {
        Box::pin(async { Err("connection refused".to_string()) })
    }
}

async fn answer_with(gates: &str, budgets: Arc<dyn NamespaceBudgets>, body: &[u8]) -> Value {
    let gates = FeatureGates::parse(gates).unwrap();
    let out = routes(&gates, budgets)
        .review(VALIDATE_PATH, body)
        .await
        .unwrap();
    assert_eq!(out["response"]["uid"], UID);
    out["response"].clone()
}

async fn answer(body: &[u8]) -> Value {
    answer_with("", Arc::new(NoBudgets), body).await
}

fn denial(response: &Value) -> (i64, String) {
    assert_eq!(response["allowed"], false, "{response}");
    (
        response["status"]["code"].as_i64().unwrap(),
        response["status"]["message"].as_str().unwrap().to_string(),
    )
}

#[tokio::test]
async fn a_valid_budget_is_allowed_in_both_versions() {
    let spec = json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": "25%"});
    for version in ["v1alpha1", "v1beta1"] {
        let body = review_body(
            version,
            "CREATE",
            object(version, "web", json!({}), spec.clone()),
            Value::Null,
        );
        assert_eq!(answer(&body).await["allowed"], true, "{version}");
    }
}

#[tokio::test]
async fn an_invalid_budget_is_denied_400_with_the_fields() {
    let body = review_body(
        "v1beta1",
        "CREATE",
        object(
            "v1beta1",
            "web",
            json!({}),
            json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1, "minAvailable": 1, "protectOperations": ["PATCH"]}),
        ),
        Value::Null,
    );
    assert_eq!(
        denial(&answer(&body).await),
        (400, r#"[spec.maxUnavailable, minAvailable: Required value: maxUnavailable and minAvailable are mutually exclusive, spec.protectOperations[0]: Unsupported value: "PATCH": supported values: "DELETE", "UPDATE", "EVICT", "RESIZE"]"#.to_string())
    );
}

#[tokio::test]
async fn a_v1alpha1_budget_is_checked_in_its_v1beta1_form() {
    let spec = json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1});
    let bad_operation = review_body(
        "v1alpha1",
        "CREATE",
        object(
            "v1alpha1",
            "web",
            json!({"kruise.io/pub-protect-operations": "DELETE,PATCH"}),
            spec.clone(),
        ),
        Value::Null,
    );
    assert_eq!(
        denial(&answer(&bad_operation).await),
        (400, r#"cannot decode PodUnavailableBudget: failed to convert v1alpha1 PUB to v1beta1: invalid kruise.io/pub-protect-operations value "PATCH""#.to_string())
    );
    let good = review_body(
        "v1alpha1",
        "CREATE",
        object(
            "v1alpha1",
            "web",
            json!({"kruise.io/pub-protect-operations": "EVICT", "pub.kruise.io/protect-total-replicas": "3"}),
            spec,
        ),
        Value::Null,
    );
    assert_eq!(answer(&good).await["allowed"], true);
}

#[tokio::test]
async fn selector_and_target_are_immutable() {
    let old = object(
        "v1beta1",
        "web",
        json!({}),
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}),
    );
    let new = object(
        "v1beta1",
        "web",
        json!({}),
        json!({"selector": {"matchLabels": {"app": "api"}}, "maxUnavailable": 1}),
    );
    assert_eq!(
        denial(&answer(&review_body("v1beta1", "UPDATE", new, old.clone())).await),
        (
            400,
            "spec.selector, targetRef: Required value: selector and targetRef cannot be modified"
                .to_string()
        )
    );
    let wider = object(
        "v1beta1",
        "web",
        json!({}),
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 2}),
    );
    assert_eq!(
        answer(&review_body("v1beta1", "UPDATE", wider, old)).await["allowed"],
        true
    );
}

#[tokio::test]
async fn a_second_budget_on_the_same_workload_is_denied() {
    let target = json!({"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxUnavailable": 1});
    let existing: PodUnavailableBudget =
        serde_json::from_value(object("v1beta1", "first", json!({}), target.clone())).unwrap();
    let body = review_body(
        "v1beta1",
        "CREATE",
        object("v1beta1", "second", json!({}), target),
        Value::Null,
    );
    let response = answer_with("", Arc::new(Fixed(vec![existing])), &body).await;
    assert_eq!(
        denial(&response),
        (400, r#"spec.targetReference: Invalid value: {"apiVersion":"apps/v1","kind":"Deployment","name":"web"}: pub.spec.targetReference is in conflict with other PodUnavailableBudget first"#.to_string())
    );
    let unlistable = answer_with("", Arc::new(Unlistable), &body).await;
    assert_eq!(
        denial(&unlistable),
        (
            400,
            ": Internal error: query other podUnavailableBudget failed, err: connection refused"
                .to_string()
        )
    );
}

#[tokio::test]
async fn both_gates_off_refuses_every_budget() {
    let body = review_body(
        "v1beta1",
        "CREATE",
        object(
            "v1beta1",
            "web",
            json!({}),
            json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}),
        ),
        Value::Null,
    );
    let response = answer_with(
        "PodUnavailableBudgetDeleteGate=false",
        Arc::new(NoBudgets),
        &body,
    )
    .await;
    assert_eq!(
        denial(&response),
        (400, "feature PodUnavailableBudget is invalid, please open via feature-gate(PodUnavailableBudgetDeleteGate, PodUnavailableBudgetUpdateGate)".to_string())
    );
    // The update gate alone is enough.
    let response = answer_with(
        "PodUnavailableBudgetDeleteGate=false,PodUnavailableBudgetUpdateGate=true",
        Arc::new(NoBudgets),
        &body,
    )
    .await;
    assert_eq!(response["allowed"], true);
}

#[test]
fn routes_declare_openkruise_webhook_entry() {
    let routes = routes(&FeatureGates::default(), Arc::new(NoBudgets));
    let webhooks = routes.webhooks();
    assert_eq!(webhooks.len(), 1);
    let (path, spec) = &webhooks[0];
    assert_eq!(path, VALIDATE_PATH);
    assert_eq!(spec.name, "vpodunavailablebudget.kb.io");
    let rule = &spec.rules[0];
    assert_eq!(rule.operations, ["CREATE", "UPDATE"]);
    assert_eq!(rule.api_groups, ["policy.kruise.io"]);
    assert_eq!(rule.api_versions, ["v1alpha1", "v1beta1"]);
    assert_eq!(rule.resources, ["podunavailablebudgets"]);
}

#[test]
fn convert_serves_podunavailablebudget() {
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": "c1",
            "desiredAPIVersion": "policy.kruise.io/v1alpha1",
            "objects": [object("v1beta1", "web", json!({}), json!({"selector": {"matchLabels": {"app": "web"}},
                "maxUnavailable": 1, "protectOperations": ["EVICT"], "protectTotalReplicas": 3}))]
        }
    });
    let converted = kruise_admission::conversion::review(
        &[Arc::new(kruise_protection::conversion::PubConverter)],
        &serde_json::to_vec(&review).unwrap(),
    )
    .unwrap();
    assert_eq!(converted["response"]["result"]["status"], "Success");
    let out = &converted["response"]["convertedObjects"][0];
    assert_eq!(out["apiVersion"], "policy.kruise.io/v1alpha1");
    assert_eq!(
        out["metadata"]["annotations"],
        json!({"kruise.io/pub-protect-operations": "EVICT", "pub.kruise.io/protect-total-replicas": "3"})
    );
    assert!(out["spec"].get("protectOperations").is_none());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Whatever JSON a spec or annotations hold, the handler answers, never panics.
    #[test]
    fn arbitrary_budgets_never_panic(spec in arbitrary_json(3), annotation in "[A-Z,0-9 ]{0,12}") {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        for version in ["v1alpha1", "v1beta1"] {
            let annotations = json!({"kruise.io/pub-protect-operations": annotation, "pub.kruise.io/protect-total-replicas": annotation});
            let body = review_body(version, "CREATE", object(version, "web", annotations, spec.clone()), Value::Null);
            let _ = rt.block_on(routes(&FeatureGates::default(), Arc::new(NoBudgets)).review(VALIDATE_PATH, &body));
        }
    }
}

fn arbitrary_json(depth: u32) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-zA-Z0-9 %/-]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(depth, 32, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(
                proptest::sample::select(vec![
                    "selector",
                    "targetRef",
                    "maxUnavailable",
                    "minAvailable",
                    "protectOperations",
                    "protectTotalReplicas",
                    "ignoredPodSelector",
                    "matchLabels",
                    "matchExpressions",
                    "operator",
                    "values",
                    "apiVersion",
                    "kind",
                    "name",
                ])
                .prop_map(String::from),
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
