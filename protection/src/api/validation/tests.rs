use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_compat::field::aggregate;
use serde_json::{Value, json};

use super::*;

fn pub_from(spec: Value, annotations: Value) -> PodUnavailableBudget {
    serde_json::from_value(json!({
        "apiVersion": "policy.kruise.io/v1beta1",
        "kind": "PodUnavailableBudget",
        "metadata": {"name": "web", "namespace": "default", "annotations": annotations},
        "spec": spec,
    }))
    .unwrap()
}

fn messages(spec: Value) -> String {
    aggregate(&validate(&pub_from(spec, json!({}))))
}

#[test]
fn a_valid_budget_has_no_errors() {
    for spec in [
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": "25%"}),
        json!({"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "minAvailable": 2}),
        json!({"selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}, "maxUnavailable": 0,
               "protectOperations": ["DELETE", "RESIZE"], "protectTotalReplicas": 4,
               "ignoredPodSelector": {"matchLabels": {"drain": "ok"}}}),
        json!({"selector": {"matchLabels": {"app": "web"}}, "minAvailable": "100%"}),
    ] {
        assert_eq!(messages(spec.clone()), "", "{spec}");
    }
}

#[test]
fn each_rule_reports_openkruise_message() {
    let cases = [
        (
            json!({"maxUnavailable": 1}),
            "spec.selector, targetRef: Required value: no selector or targetRef defined in PodUnavailableBudget",
        ),
        (
            json!({"selector": {"matchLabels": {"a": "b"}}, "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "w"}, "maxUnavailable": 1}),
            "spec.selector, targetRef: Required value: selector and targetRef are mutually exclusive",
        ),
        (
            json!({"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment"}, "maxUnavailable": 1}),
            r#"spec.targetRef: Invalid value: {"apiVersion":"apps/v1","kind":"Deployment"}: empty targetRef is not valid for PodUnavailableBudget"#,
        ),
        (
            json!({"targetRef": {"apiVersion": "a/b/c", "kind": "Deployment", "name": "w"}, "maxUnavailable": 1}),
            r#"spec.targetRef: Invalid value: {"apiVersion":"a/b/c","kind":"Deployment","name":"w"}: unexpected GroupVersion string: a/b/c"#,
        ),
        (
            json!({"selector": {}, "maxUnavailable": 1}),
            "spec.selector: Invalid value: {}: empty selector is not valid for PodUnavailableBudget.",
        ),
        (
            json!({"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}, "maxUnavailable": 1}),
            "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
        ),
        (
            json!({"selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}, "maxUnavailable": 1}),
            r#"spec.selector.matchExpressions[0].operator: Invalid value: "Near": not a valid selector operator"#,
        ),
        (
            json!({"selector": {"matchLabels": {"a": "b"}}}),
            "spec.maxUnavailable, minAvailable: Required value: no maxUnavailable or minAvailable defined in PodUnavailableBudget",
        ),
        (
            json!({"selector": {"matchLabels": {"a": "b"}}, "maxUnavailable": 1, "minAvailable": 1}),
            "spec.maxUnavailable, minAvailable: Required value: maxUnavailable and minAvailable are mutually exclusive",
        ),
        (
            json!({"selector": {"matchLabels": {"a": "b"}}, "maxUnavailable": -1}),
            "spec.maxUnavailable: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            json!({"selector": {"matchLabels": {"a": "b"}}, "minAvailable": "120%"}),
            r#"spec.minAvailable: Invalid value: "120%": must not be greater than 100%"#,
        ),
        (
            json!({"selector": {"matchLabels": {"a": "b"}}, "maxUnavailable": "12.5%"}),
            r#"spec.maxUnavailable: Invalid value: "12.5%": a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"#,
        ),
        (
            json!({"selector": {"matchLabels": {"a": "b"}}, "maxUnavailable": 1, "protectOperations": ["DELETE", "PATCH"]}),
            r#"spec.protectOperations[1]: Unsupported value: "PATCH": supported values: "DELETE", "UPDATE", "EVICT", "RESIZE""#,
        ),
        (
            json!({"selector": {"matchLabels": {"a": "b"}}, "maxUnavailable": 1, "ignoredPodSelector": {}}),
            "spec.ignoredPodSelector: Invalid value: {}: empty ignoredPodSelector is not valid for PodUnavailableBudget",
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(messages(spec.clone()), want, "{spec}");
    }
}

#[test]
fn the_total_replicas_annotation_must_be_an_int32_matching_the_spec() {
    let spec = json!({"selector": {"matchLabels": {"a": "b"}}, "maxUnavailable": 1, "protectTotalReplicas": 5});
    let check = |value: &str| {
        aggregate(&validate(&pub_from(
            spec.clone(),
            json!({"pub.kruise.io/protect-total-replicas": value}),
        )))
    };
    assert_eq!(check("5"), "");
    assert_eq!(
        check("five"),
        r#"metadata.annotations[pub.kruise.io/protect-total-replicas]: Invalid value: "five": must be a valid int32"#
    );
    assert_eq!(
        check("6"),
        r#"metadata.annotations[pub.kruise.io/protect-total-replicas]: Invalid value: "6": must match spec.protectTotalReplicas when both are set"#
    );
}

#[test]
fn selector_and_target_cannot_change_on_update() {
    let old = pub_from(
        json!({"selector": {"matchLabels": {"a": "b"}}, "maxUnavailable": 1}),
        json!({}),
    );
    let budget_only = pub_from(
        json!({"selector": {"matchLabels": {"a": "b"}}, "maxUnavailable": 2}),
        json!({}),
    );
    assert!(validate_update(&budget_only, &old).is_empty());
    let moved = pub_from(
        json!({"selector": {"matchLabels": {"a": "c"}}, "maxUnavailable": 1}),
        json!({}),
    );
    assert_eq!(
        aggregate(&validate_update(&moved, &old)),
        "spec.selector, targetRef: Required value: selector and targetRef cannot be modified"
    );
}

#[test]
fn a_second_budget_on_the_same_pods_conflicts() {
    let named = |name: &str, spec: Value| {
        let mut p = pub_from(spec, json!({}));
        p.metadata.name = Some(name.into());
        p
    };
    let deploy = json!({"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxUnavailable": 1});
    let other_version = json!({"targetRef": {"apiVersion": "apps/v1beta1", "kind": "Deployment", "name": "web"}, "maxUnavailable": 1});
    let other_name = json!({"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"}, "maxUnavailable": 1});
    let mine = named("a", deploy.clone());
    assert_eq!(
        aggregate(&validate_conflicts(
            &mine,
            &[named("a", deploy), named("b", other_version)]
        )),
        r#"spec.targetReference: Invalid value: {"apiVersion":"apps/v1","kind":"Deployment","name":"web"}: pub.spec.targetReference is in conflict with other PodUnavailableBudget b"#
    );
    assert!(validate_conflicts(&mine, &[named("c", other_name)]).is_empty());

    let sel = |s: Value| json!({"selector": s, "maxUnavailable": 1});
    let mine = named("a", sel(json!({"matchLabels": {"app": "web"}})));
    let overlapping = named(
        "b",
        sel(
            json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]}),
        ),
    );
    assert_eq!(
        aggregate(&validate_conflicts(&mine, &[overlapping])),
        r#"spec.selector: Invalid value: {"matchLabels":{"app":"web"}}: pub.spec.selector is in conflict with other PodUnavailableBudget b"#
    );
    let other_app = named("b", sel(json!({"matchLabels": {"app": "api"}})));
    let more_keys = named(
        "c",
        sel(json!({"matchLabels": {"app": "web", "tier": "x"}})),
    );
    assert!(validate_conflicts(&mine, &[other_app, more_keys]).is_empty());
}

#[test]
fn loose_overlap_follows_openkruise_operator_table() {
    let s = |op: &str, values: &[&str]| LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "k".into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }]),
        ..Default::default()
    };
    let cases = [
        (s("In", &["a"]), s("In", &["a", "b"]), true),
        (s("In", &["a"]), s("In", &["b"]), false),
        (s("In", &["a"]), s("Exists", &[]), true),
        (s("In", &["a"]), s("NotIn", &["a"]), false),
        (s("In", &["a"]), s("NotIn", &["b"]), true),
        (s("Exists", &[]), s("DoesNotExist", &[]), false),
        (s("NotIn", &["a"]), s("DoesNotExist", &[]), true),
        (s("DoesNotExist", &[]), s("DoesNotExist", &[]), true),
    ];
    for (a, b, want) in cases {
        assert_eq!(selectors_loosely_overlap(&a, &b), want, "{a:?} {b:?}");
        assert_eq!(selectors_loosely_overlap(&b, &a), want, "{b:?} {a:?}");
    }
}
