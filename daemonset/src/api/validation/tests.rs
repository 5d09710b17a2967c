use super::*;
use crate::api::defaults::default_spec;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn sample() -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet",
        "metadata": {"name": "sample", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "sample"}},
            "template": {
                "metadata": {"labels": {"app": "sample"}},
                "spec": {"containers": [{"name": "main", "image": "nginx:alpine"}]}
            }
        }
    })
}

fn daemonset(value: &Value, served: Served) -> DaemonSet {
    let mut ds: DaemonSet = serde_json::from_value(value.clone()).unwrap();
    default_spec(&mut ds.spec, served);
    ds
}

fn pairs(errors: ErrorList) -> Vec<(String, String)> {
    errors
        .into_iter()
        .map(|e| (e.field.as_str().to_string(), e.detail))
        .collect()
}

/// The (path, detail) of each error `patch` (a merge patch) applied to the defaulted
/// sample causes on CREATE through `served`.
fn errors_as(patch: Value, served: Served) -> Vec<(String, String)> {
    let mut value = sample();
    json_patch::merge(&mut value, &patch);
    pairs(validate(&daemonset(&value, served), None, served))
}

fn errors_of(patch: Value) -> Vec<(String, String)> {
    errors_as(patch, Served::V1beta1)
}

fn one(path: &str, detail: &str) -> Vec<(String, String)> {
    vec![(path.to_string(), detail.to_string())]
}

fn rolling(r: Value) -> Value {
    json!({"spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": r}}})
}

#[test]
fn the_defaulted_sample_is_valid_in_either_version() {
    assert_eq!(errors_of(json!({})), vec![]);
    assert_eq!(errors_as(json!({}), Served::V1alpha1), vec![]);
}

#[test]
fn name_selector_and_template_rules() {
    assert_eq!(
        errors_of(json!({"metadata": {"name": "Bad_Name"}})),
        one("metadata.name", DNS1123_SUBDOMAIN_MESSAGE)
    );
    assert_eq!(
        errors_of(json!({"spec": {"selector": {"matchLabels": {"app": "other"}}}})),
        one(
            "spec.template.metadata.labels",
            "`selector` does not match template `labels`"
        )
    );
    assert_eq!(
        errors_of(json!({"spec": {"selector": {"matchLabels": null}}})),
        one("spec.selector", "empty selector is invalid for daemonset")
    );
    assert_eq!(
        errors_of(json!({"spec": {"template": {"spec": {"restartPolicy": "OnFailure"}}}})),
        one(
            "spec.template.spec.restartPolicy",
            "supported values: \"Always\""
        )
    );
    assert_eq!(
        errors_of(json!({"spec": {"template": {"spec": {"activeDeadlineSeconds": 5}}}})),
        one(
            "spec.template.spec.activeDeadlineSeconds",
            "activeDeadlineSeconds in DaemonSet is not Supported"
        )
    );
    assert_eq!(
        errors_of(json!({"spec": {"minReadySeconds": -1, "revisionHistoryLimit": -1}})),
        vec![
            ("spec.minReadySeconds".into(), NON_NEGATIVE.into()),
            ("spec.revisionHistoryLimit".into(), NON_NEGATIVE.into()),
        ]
    );
    assert_eq!(
        errors_of(json!({"spec": {"lifecycle": {"inPlaceUpdate": {"labelsHandler": {"a": "b"}}}}})),
        one(
            "spec.lifecycle.inPlaceUpdate",
            "inPlaceUpdate hook has not supported yet"
        )
    );
    assert_eq!(
        errors_of(json!({"spec": {"lifecycle": {"preDelete": {"labelsHandler": {"a": "b"}}}}})),
        vec![]
    );
}

#[test]
fn update_strategy_rules() {
    assert_eq!(
        errors_of(json!({"spec": {"updateStrategy": {"type": "Sometimes"}}})),
        one(
            "spec.updateStrategy",
            "supported values: \"RollingUpdate\", \"OnDelete\""
        )
    );
    let at = "spec.updateStrategy.rollingUpdate";
    let table: Vec<(Value, Vec<(String, String)>)> = vec![
        (json!({"maxUnavailable": "100%"}), vec![]),
        (json!({"maxUnavailable": 0, "maxSurge": "30%"}), vec![]),
        (
            json!({"maxUnavailable": 0, "maxSurge": 0}),
            one(
                &format!("{at}.maxUnavailable"),
                "cannot be 0 when maxSurge is 0",
            ),
        ),
        (
            json!({"maxUnavailable": 0, "maxSurge": "0%"}),
            one(
                &format!("{at}.maxUnavailable"),
                "cannot be 0 when maxSurge is 0",
            ),
        ),
        (
            json!({"maxUnavailable": 1, "maxSurge": 1}),
            one(
                &format!("{at}.maxSurge"),
                "may not be set when maxUnavailable is non-zero",
            ),
        ),
        (
            json!({"maxUnavailable": -1, "maxSurge": 0}),
            one(&format!("{at}.maxUnavailable"), NON_NEGATIVE),
        ),
        (
            json!({"maxUnavailable": "150%", "maxSurge": 0}),
            one(
                &format!("{at}.maxUnavailable"),
                "must not be greater than 100%",
            ),
        ),
        (
            json!({"maxUnavailable": "5", "maxSurge": 0}),
            one(&format!("{at}.maxUnavailable"), PERCENT_MESSAGE),
        ),
        (
            json!({"rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": 0, "maxSurge": 1}),
            one(
                &format!("{at}.maxSurge"),
                "must be 0 for InPlaceIfPossible type",
            ),
        ),
        (
            json!({"rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": "10%"}),
            vec![],
        ),
        (
            json!({"rollingUpdateType": "Surging", "maxUnavailable": 0, "maxSurge": 1}),
            one(
                &format!("{at}.rollingUpdateType"),
                "supported values: \"Standard\", \"InPlaceIfPossible\"",
            ),
        ),
        (
            json!({"rollingUpdateType": "Fast"}),
            one(
                &format!("{at}.rollingUpdateType"),
                "supported values: \"Standard\", \"InPlaceIfPossible\"",
            ),
        ),
        (json!({"partition": 3}), vec![]),
        (json!({"partition": "40%"}), vec![]),
        (
            json!({"partition": -1}),
            one(&format!("{at}.partition"), NON_NEGATIVE),
        ),
        (
            json!({"partition": "101%"}),
            one(&format!("{at}.partition"), "must not be greater than 100%"),
        ),
    ];
    for (r, want) in table {
        assert_eq!(errors_of(rolling(r.clone())), want, "{r}");
    }
}

#[test]
fn rolling_update_is_required_for_rolling_update_type() {
    let value = sample();
    let mut ds = daemonset(&value, Served::V1beta1);
    ds.spec.update_strategy.rolling_update = None;
    assert_eq!(
        pairs(validate(&ds, None, Served::V1beta1)),
        vec![(
            "spec.updateStrategy.rollingUpdate".to_string(),
            String::new()
        )]
    );
}

#[test]
fn surging_is_v1alpha1_only_and_then_needs_no_unavailable() {
    // Undefaulted, as a v1alpha1 object may reach the validator when the mutating webhook
    // is not installed.
    let mut value = sample();
    json_patch::merge(
        &mut value,
        &rolling(json!({"rollingUpdateType": "Surging", "maxUnavailable": 1})),
    );
    let ds: DaemonSet = serde_json::from_value(value).unwrap();
    assert_eq!(
        pairs(validate(&ds, None, Served::V1alpha1)),
        one(
            "spec.updateStrategy.rollingUpdate.maxUnavailable",
            "must be 0 for Surging type"
        )
    );
    assert_eq!(
        errors_as(
            rolling(json!({"rollingUpdateType": "Surging"})),
            Served::V1alpha1
        ),
        vec![]
    );
}

#[test]
fn on_update_only_the_mutable_fields_may_change() {
    let old = daemonset(&sample(), Served::V1beta1);
    let mut new = old.clone();
    new.spec.min_ready_seconds = 10;
    new.spec.burst_replicas = Some(IntOrString::Int(5));
    new.spec.revision_history_limit = Some(3);
    new.spec.scale_strategy = Some(crate::api::DaemonSetScaleStrategy {
        partitioned_scaling: true,
    });
    new.spec.update_strategy.type_ = Some(UpdateStrategyType::OnDelete);
    assert_eq!(pairs(validate(&new, Some(&old), Served::V1beta1)), vec![]);

    let mut changed_selector = old.clone();
    changed_selector.spec.selector = serde_json::from_value(
        json!({"matchLabels": {"app": "sample"}, "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}),
    )
    .unwrap();
    assert_eq!(
        pairs(validate(&changed_selector, Some(&old), Served::V1beta1)),
        one("spec", IMMUTABLE_FIELDS_MESSAGE)
    );
    // v1alpha1 has no scaleStrategy, and its own message.
    assert_eq!(
        pairs(validate(&changed_selector, Some(&old), Served::V1alpha1)),
        one("spec", IMMUTABLE_FIELDS_MESSAGE_V1ALPHA1)
    );
}

#[test]
fn messages_read_as_kube_apiserver_prints_them() {
    let mut value = sample();
    json_patch::merge(
        &mut value,
        &rolling(json!({"maxUnavailable": "150%", "maxSurge": 0})),
    );
    let ds = daemonset(&value, Served::V1beta1);
    let errors = validate(&ds, None, Served::V1beta1);
    assert_eq!(
        errors[0].to_string(),
        "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: \"150%\": must not be greater than 100%"
    );
}

/// With `hostNetwork`, a port's hostPort must equal its containerPort, an unset one too (as
/// OpenKruise's webhook validates, the template not being defaulted).
#[test]
fn host_network_ports_need_their_host_port() {
    let with_ports = |ports: Value| {
        json!({"spec": {"template": {"spec": {"hostNetwork": true,
            "containers": [{"name": "main", "image": "nginx:alpine", "ports": ports}]}}}})
    };
    assert_eq!(
        errors_of(with_ports(json!([{"containerPort": 80, "hostPort": 80}]))),
        vec![]
    );
    let must_match = "must match `containerPort` when `hostNetwork` is true";
    assert_eq!(
        errors_of(with_ports(json!([{"containerPort": 80}]))),
        one(
            "spec.template.spec.containers[0].ports[0].hostPort",
            must_match
        )
    );
    assert_eq!(
        errors_of(with_ports(json!([{"containerPort": 80, "hostPort": 8080}]))),
        one(
            "spec.template.spec.containers[0].ports[0].hostPort",
            must_match
        )
    );
}
