//! The DaemonSet webhooks as the API server sees them: AdmissionReview JSON in, response out
//! (the exact JSONPatch of the defaults, denials with field paths), for both served
//! versions; the ConversionReview at `/convert`; arbitrary JSON never panicking a handler.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kruise_daemonset::admission::{MUTATE_PATH, VALIDATE_PATH, routes};
use kruise_testkit::admission::{self, Target, decoded_patch};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn review_body(
    version: &str,
    operation: &str,
    object: Option<Value>,
    old: Option<Value>,
) -> Vec<u8> {
    let target = Target::apps(version, "DaemonSet", "daemonsets", "agent");
    admission::review_body(target, operation, object, old)
}

fn daemonset(version: &str, spec: Value) -> Value {
    json!({
        "apiVersion": format!("apps.kruise.io/{version}"),
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "default", "uid": "ds-uid"},
        "spec": spec,
    })
}

fn minimal_spec() -> Value {
    json!({
        "selector": {"matchLabels": {"app": "agent"}},
        "template": {
            "metadata": {"labels": {"app": "agent"}},
            "spec": {"containers": [{"name": "main", "image": "nginx:1", "x-unknown": "kept"}]}
        }
    })
}

async fn answer(path: &str, body: &[u8]) -> Value {
    let out = routes().review(path, body).await.unwrap();
    admission::response_of(&out)
}

#[tokio::test]
async fn create_of_either_version_gets_openkruise_defaults_as_a_patch() {
    for version in ["v1alpha1", "v1beta1"] {
        let body = review_body(
            version,
            "CREATE",
            Some(daemonset(version, minimal_spec())),
            None,
        );
        let response = answer(MUTATE_PATH, &body).await;
        assert_eq!(response["allowed"], true);
        assert_eq!(
            decoded_patch(&response),
            json!([
                {"op": "add", "path": "/spec/burstReplicas", "value": 250},
                {"op": "add", "path": "/spec/revisionHistoryLimit", "value": 10},
                {"op": "add", "path": "/spec/updateStrategy", "value": {
                    "type": "RollingUpdate", "rollingUpdate": {
                    "rollingUpdateType": "Standard", "maxUnavailable": 1, "maxSurge": 0}}}
            ]),
            "{version}"
        );
    }
}

#[tokio::test]
async fn v1alpha1_surging_is_defaulted_to_standard_with_surge() {
    let mut spec = minimal_spec();
    spec["burstReplicas"] = json!(250);
    spec["revisionHistoryLimit"] = json!(10);
    spec["updateStrategy"] = json!({"type": "RollingUpdate",
        "rollingUpdate": {"rollingUpdateType": "Surging"}});
    let body = review_body(
        "v1alpha1",
        "UPDATE",
        Some(daemonset("v1alpha1", spec.clone())),
        Some(daemonset("v1alpha1", spec)),
    );
    let response = answer(MUTATE_PATH, &body).await;
    assert_eq!(
        decoded_patch(&response),
        json!([
            {"op": "add", "path": "/spec/updateStrategy/rollingUpdate/maxSurge", "value": 1},
            {"op": "add", "path": "/spec/updateStrategy/rollingUpdate/maxUnavailable", "value": 0},
            {"op": "replace", "path": "/spec/updateStrategy/rollingUpdate/rollingUpdateType", "value": "Standard"}
        ])
    );
}

#[tokio::test]
async fn a_defaulted_sample_is_admitted_and_an_invalid_one_denied_with_paths() {
    let mut spec = minimal_spec();
    spec["updateStrategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {
        "rollingUpdateType": "Standard", "maxUnavailable": 1, "maxSurge": 0}});
    for version in ["v1alpha1", "v1beta1"] {
        let body = review_body(
            version,
            "CREATE",
            Some(daemonset(version, spec.clone())),
            None,
        );
        assert_eq!(
            answer(VALIDATE_PATH, &body).await["allowed"],
            true,
            "{version}"
        );
    }
    let mut bad = spec.clone();
    bad["updateStrategy"]["rollingUpdate"] = json!({
        "rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": 0, "maxSurge": "20%",
        "partition": "120%"});
    bad["template"]["spec"]["restartPolicy"] = json!("Never");
    let body = review_body("v1beta1", "CREATE", Some(daemonset("v1beta1", bad)), None);
    let response = answer(VALIDATE_PATH, &body).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 422);
    let message = response["status"]["message"].as_str().unwrap();
    for part in [
        "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
        "spec.updateStrategy.rollingUpdate.maxSurge: Required value: must be 0 for InPlaceIfPossible type",
        "spec.updateStrategy.rollingUpdate.partition: Invalid value: \"120%\": must not be greater than 100%",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    // Surging is v1alpha1's alone.
    let mut surging = spec.clone();
    surging["updateStrategy"]["rollingUpdate"] =
        json!({"rollingUpdateType": "Surging", "maxUnavailable": 0, "maxSurge": 1});
    for (version, allowed) in [("v1alpha1", true), ("v1beta1", false)] {
        let body = review_body(
            version,
            "CREATE",
            Some(daemonset(version, surging.clone())),
            None,
        );
        assert_eq!(
            answer(VALIDATE_PATH, &body).await["allowed"],
            allowed,
            "{version}"
        );
    }
}

#[tokio::test]
async fn update_of_an_immutable_field_is_forbidden_and_of_the_strategy_allowed() {
    let mut spec = minimal_spec();
    spec["updateStrategy"] = json!({"type": "OnDelete"});
    let old = daemonset("v1beta1", spec.clone());
    let mut strategy = spec.clone();
    strategy["updateStrategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {
        "maxUnavailable": "50%", "partition": 2, "selector": {"matchLabels": {"zone": "a"}}}});
    strategy["scaleStrategy"] = json!({"partitionedScaling": true});
    strategy["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
    let body = review_body(
        "v1beta1",
        "UPDATE",
        Some(daemonset("v1beta1", strategy)),
        Some(old.clone()),
    );
    assert_eq!(answer(VALIDATE_PATH, &body).await["allowed"], true);

    let mut selector = spec;
    selector["selector"] = json!({"matchLabels": {"app": "agent", "tier": "x"}});
    selector["template"]["metadata"]["labels"]["tier"] = json!("x");
    let body = review_body(
        "v1beta1",
        "UPDATE",
        Some(daemonset("v1beta1", selector)),
        Some(old),
    );
    let response = answer(VALIDATE_PATH, &body).await;
    assert_eq!(response["allowed"], false);
    assert!(
        response["status"]["message"]
            .as_str()
            .unwrap()
            .contains("spec: Forbidden: updates to daemonset spec for fields other than")
    );
}

#[test]
fn conversion_review_at_convert() {
    let converters: Vec<std::sync::Arc<dyn kruise_admission::Converter>> =
        vec![std::sync::Arc::new(
            kruise_daemonset::conversion::DaemonSetConverter,
        )];
    let mut alpha = daemonset("v1alpha1", minimal_spec());
    alpha["metadata"]["annotations"] =
        json!({"daemonset.kruise.io/progressive-create-pod": "true"});
    alpha["status"] = json!({"daemonSetHash": "5d4f6c7b8", "desiredNumberScheduled": 2});
    let body = serde_json::to_vec(&json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": "c1",
            "desiredAPIVersion": "apps.kruise.io/v1beta1",
            "objects": [alpha]
        }
    }))
    .unwrap();
    let out = kruise_admission::conversion::review(&converters, &body).unwrap();
    assert_eq!(out["response"]["uid"], "c1");
    assert_eq!(out["response"]["result"]["status"], "Success");
    let converted = &out["response"]["convertedObjects"][0];
    assert_eq!(converted["apiVersion"], "apps.kruise.io/v1beta1");
    assert_eq!(converted["metadata"]["uid"], "ds-uid");
    assert_eq!(
        converted["spec"]["scaleStrategy"],
        json!({"partitionedScaling": true})
    );
    assert_eq!(converted["status"]["updateRevision"], "5d4f6c7b8");
    assert_eq!(
        converted["spec"]["template"]["spec"]["containers"][0]["x-unknown"],
        "kept"
    );
}

#[test]
fn webhook_entries_carry_openkruise_names_and_rules() {
    let hooks = routes().webhooks();
    let names: Vec<(&str, &str)> = hooks
        .iter()
        .map(|(path, spec)| (path.as_str(), spec.name.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![
            (MUTATE_PATH, "mdaemonset.kb.io"),
            (VALIDATE_PATH, "vdaemonset.kb.io")
        ]
    );
    for (_, hook) in &hooks {
        assert_eq!(hook.rules[0].operations, vec!["CREATE", "UPDATE"]);
        assert_eq!(hook.rules[0].api_versions, vec!["v1alpha1", "v1beta1"]);
        assert_eq!(hook.rules[0].resources, vec!["daemonsets"]);
    }
}

fn arbitrary_json() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-zA-Z0-9%-]{0,6}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(
                prop_oneof![
                    Just("updateStrategy".to_string()),
                    Just("rollingUpdate".to_string()),
                    Just("rollingUpdateType".to_string()),
                    Just("maxUnavailable".to_string()),
                    Just("maxSurge".to_string()),
                    Just("partition".to_string()),
                    Just("burstReplicas".to_string()),
                    Just("template".to_string()),
                    Just("selector".to_string()),
                    "[a-z]{1,8}",
                ],
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest::proptest! {
    /// Any JSON as a spec, old spec or version never panics a handler: it is answered.
    #[test]
    fn arbitrary_objects_are_answered(spec in arbitrary_json(), old in arbitrary_json(), beta in proptest::bool::ANY) {
        let version = if beta { "v1beta1" } else { "v1alpha1" };
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        for (path, operation, old) in [
            (MUTATE_PATH, "CREATE", None),
            (VALIDATE_PATH, "CREATE", None),
            (VALIDATE_PATH, "UPDATE", Some(daemonset(version, old.clone()))),
        ] {
            let body = review_body(version, operation, Some(daemonset(version, spec.clone())), old);
            let out = runtime.block_on(routes().review(path, &body));
            proptest::prop_assert!(out.is_ok(), "{out:?}");
        }
    }
}
