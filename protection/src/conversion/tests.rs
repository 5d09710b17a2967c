use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::api::{POLICY_V1ALPHA1, POLICY_V1BETA1};
use kruise_admission::Converter as _;

fn object(api_version: &str, annotations: Value, spec: Value) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": "PodUnavailableBudget",
        "metadata": {"name": "web", "namespace": "default", "annotations": annotations},
        "spec": spec,
        "status": {"unavailableAllowed": 1, "currentAvailable": 4, "desiredAvailable": 3, "totalReplicas": 4,
                   "disruptedPods": {"web-0": "2026-01-01T00:00:00Z"}},
    })
}

#[test]
fn v1alpha1_annotations_become_v1beta1_fields_and_stay() {
    let alpha = object(
        POLICY_V1ALPHA1,
        json!({"kruise.io/pub-protect-operations": "DELETE, EVICT", "pub.kruise.io/protect-total-replicas": "15", "keep": "me"}),
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": "25%"}),
    );
    let beta = convert(alpha, POLICY_V1BETA1).unwrap();
    assert_eq!(beta["apiVersion"], POLICY_V1BETA1);
    assert_eq!(
        beta["spec"]["protectOperations"],
        json!(["DELETE", "EVICT"])
    );
    assert_eq!(beta["spec"]["protectTotalReplicas"], 15);
    assert_eq!(beta["spec"]["maxUnavailable"], "25%");
    assert_eq!(beta["metadata"]["annotations"]["keep"], "me");
    assert_eq!(
        beta["metadata"]["annotations"]["pub.kruise.io/protect-total-replicas"],
        "15"
    );
    assert_eq!(
        beta["status"]["disruptedPods"]["web-0"],
        "2026-01-01T00:00:00Z"
    );
}

#[test]
fn v1beta1_fields_become_v1alpha1_annotations() {
    let beta = object(
        POLICY_V1BETA1,
        json!({"keep": "me"}),
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1,
               "protectOperations": ["DELETE", "RESIZE"], "protectTotalReplicas": 9,
               "ignoredPodSelector": {"matchLabels": {"kruise.io/force-deletable": "true"}}}),
    );
    let alpha = convert(beta, POLICY_V1ALPHA1).unwrap();
    assert_eq!(
        alpha["metadata"]["annotations"],
        json!({"keep": "me", "kruise.io/pub-protect-operations": "DELETE,RESIZE",
               "pub.kruise.io/protect-total-replicas": "9",
               "pub.kruise.io/ignored-pod-selector": r#"{"matchLabels":{"kruise.io/force-deletable":"true"}}"#})
    );
    assert_eq!(
        alpha["spec"],
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1})
    );
}

#[test]
fn unset_v1beta1_fields_drop_stale_v1alpha1_annotations() {
    // OpenKruise's TestPodUnavailableBudgetConvertFromV1beta1DropsDefaultProtectOperationsAnnotation.
    let beta = object(
        POLICY_V1BETA1,
        json!({"kruise.io/pub-protect-operations": "DELETE", "pub.kruise.io/protect-total-replicas": "3"}),
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}),
    );
    let alpha = convert(beta, POLICY_V1ALPHA1).unwrap();
    assert!(alpha["metadata"].get("annotations").is_none(), "{alpha}");
}

#[test]
fn bad_annotations_fail_the_conversion_with_openkruise_message() {
    let with = |annotations: Value| {
        convert(
            object(POLICY_V1ALPHA1, annotations, json!({})),
            POLICY_V1BETA1,
        )
        .unwrap_err()
        .to_string()
    };
    assert_eq!(
        with(json!({"kruise.io/pub-protect-operations": "DELETE,PATCH"})),
        r#"invalid kruise.io/pub-protect-operations value "PATCH""#
    );
    assert_eq!(
        with(json!({"pub.kruise.io/protect-total-replicas": "many"})),
        "failed to parse pub.kruise.io/protect-total-replicas: invalid digit found in string"
    );
    assert!(
        with(json!({"pub.kruise.io/ignored-pod-selector": "{"}))
            .starts_with("failed to parse pub.kruise.io/ignored-pod-selector")
    );
}

#[test]
fn other_kinds_and_versions_are_refused() {
    assert_eq!(
        convert(
            object("policy.kruise.io/v2", json!({}), json!({})),
            POLICY_V1BETA1
        )
        .unwrap_err()
        .to_string(),
        r#"unsupported apiVersion "policy.kruise.io/v2" for PodUnavailableBudget conversion"#
    );
    assert!(PubConverter.handles("policy.kruise.io", "PodUnavailableBudget"));
    assert!(!PubConverter.handles("apps.kruise.io", "PodUnavailableBudget"));
}

#[test]
fn fields_the_types_do_not_know_survive_a_round_trip() {
    let beta = object(
        POLICY_V1BETA1,
        json!({}),
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1, "aFutureField": {"x": 1}}),
    );
    let back = convert(
        convert(beta.clone(), POLICY_V1ALPHA1).unwrap(),
        POLICY_V1BETA1,
    )
    .unwrap();
    assert_eq!(back["spec"]["aFutureField"], json!({"x": 1}));
}

fn selector() -> impl Strategy<Value = Value> {
    prop_oneof![
        "[a-z]{1,5}".prop_map(|v| json!({"matchLabels": {"app": v}})),
        "[a-z]{1,5}".prop_map(|k| json!({"matchExpressions": [{"key": k, "operator": "Exists"}]})),
    ]
}

fn int_or_percent() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0i64..50).prop_map(Value::from),
        (0u32..=100).prop_map(|p| Value::from(format!("{p}%"))),
    ]
}

/// v1beta1 specs: every field either unset or set, operations any non-empty subset.
fn beta_spec() -> impl Strategy<Value = Value> {
    (
        selector(),
        any::<bool>(),
        int_or_percent(),
        proptest::sample::subsequence(PubOperation::KNOWN.to_vec(), 0..=4),
        proptest::option::of(1i32..1000),
        proptest::option::of(selector()),
    )
        .prop_map(|(selector, by_ref, budget, ops, total, ignored)| {
            let mut spec = if by_ref {
                json!({"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}})
            } else {
                json!({"selector": selector})
            };
            spec["maxUnavailable"] = budget;
            if !ops.is_empty() {
                spec["protectOperations"] = json!(ops);
            }
            if let Some(n) = total {
                spec["protectTotalReplicas"] = json!(n);
            }
            if let Some(s) = ignored {
                spec["ignoredPodSelector"] = s;
            }
            spec
        })
}

proptest! {
    /// v1beta1 -> v1alpha1 -> v1beta1 keeps spec and status exactly; metadata gains only
    /// the annotations that v1alpha1 carries the fields in.
    #[test]
    fn beta_alpha_beta_keeps_spec_and_status(spec in beta_spec()) {
        let beta = object(POLICY_V1BETA1, json!({"keep": "me"}), spec);
        let alpha = convert(beta.clone(), POLICY_V1ALPHA1).unwrap();
        let back = convert(alpha.clone(), POLICY_V1BETA1).unwrap();
        prop_assert_eq!(&back["spec"], &beta["spec"]);
        prop_assert_eq!(&back["status"], &beta["status"]);
        prop_assert_eq!(&back["metadata"]["annotations"], &alpha["metadata"]["annotations"]);
        prop_assert_eq!(&back["metadata"]["annotations"]["keep"], "me");
    }

    /// v1alpha1 -> v1beta1 -> v1alpha1 is the identity for annotations in their canonical
    /// form (what kruise-rs writes).
    #[test]
    fn alpha_beta_alpha_is_lossless(spec in beta_spec()) {
        let alpha = convert(object(POLICY_V1BETA1, json!({"keep": "me"}), spec), POLICY_V1ALPHA1).unwrap();
        let back = convert(convert(alpha.clone(), POLICY_V1BETA1).unwrap(), POLICY_V1ALPHA1).unwrap();
        prop_assert_eq!(back, alpha);
    }
}
