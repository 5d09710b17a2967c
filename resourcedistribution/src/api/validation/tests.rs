use kruise_compat::field::aggregate;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn spec(value: Value) -> ResourceDistributionSpec {
    serde_json::from_value(value).unwrap()
}

fn secret_spec(name: &str, targets: Value) -> ResourceDistributionSpec {
    spec(json!({
        "resource": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": {"k": "dg=="}},
        "targets": targets,
    }))
}

fn resource_error(
    spec: &ResourceDistributionSpec,
    old: Option<&ResourceDistributionSpec>,
) -> String {
    aggregate(&validate_resource(spec, old).unwrap_err())
}

#[test]
fn a_secret_or_a_configmap_passes_and_is_decoded() {
    let resource = validate_resource(&secret_spec("s", json!({})), None).unwrap();
    assert_eq!(
        (
            resource.api_version.as_str(),
            resource.kind.as_str(),
            resource.name.as_str()
        ),
        ("v1", "Secret", "s")
    );
    assert!(resource.is_secret());
    let configmap = spec(json!({
        "resource": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
        "targets": {},
    }));
    assert!(!validate_resource(&configmap, None).unwrap().is_secret());
}

#[test]
fn other_kinds_and_groups_are_refused_with_openkruises_message() {
    for (api_version, kind) in [("v1", "Pod"), ("apps/v1", "Secret"), ("v1", "Service")] {
        let s = spec(json!({
            "resource": {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}},
            "targets": {},
        }));
        let message = resource_error(&s, None);
        assert!(
            message.starts_with("spec.resource: Invalid value: {"),
            "{message}"
        );
        assert!(
            message.ends_with(
                ": unknown or unsupported resource GroupKind, only support [Secret ConfigMap]"
            ),
            "{message}"
        );
    }
}

#[test]
fn a_resource_without_kind_does_not_decode() {
    let s =
        spec(json!({"resource": {"apiVersion": "v1", "metadata": {"name": "x"}}, "targets": {}}));
    assert_eq!(
        resource_error(&s, None),
        "spec: Internal error: failed to deserialize resource, please check your spec.resource, err Object 'Kind' is missing in '{\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"x\"}}'"
    );
    let null = spec(json!({"resource": null, "targets": {}}));
    assert_eq!(
        resource_error(&null, None),
        "spec: Invalid value: null: empty resource is not allowed"
    );
}

#[test]
fn the_resources_apiversion_kind_and_name_are_immutable() {
    let old = secret_spec("s", json!({}));
    let renamed = secret_spec("t", json!({}));
    assert_eq!(
        resource_error(&renamed, Some(&old)),
        "spec.resource: Invalid value: null: resource apiVersion, kind, and name are immutable"
    );
    let mut new_data = old.clone();
    new_data.resource["data"] = json!({"k": "dzI="});
    assert!(validate_resource(&new_data, Some(&old)).is_ok());
}

#[test]
fn target_namespaces_must_be_dns_labels_and_not_both_included_and_excluded() {
    let targets = secret_spec(
        "s",
        json!({
            "includedNamespaces": {"list": [{"name": "ns-1"}, {"name": "Bad_NS"}]},
            "excludedNamespaces": {"list": [{"name": "ns-1"}, {"name": "ns-2"}]},
        }),
    )
    .targets;
    let errors = validate_targets(&targets);
    let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(
        messages[0],
        "spec.targets.includedNamespaces: Invalid value: {\"list\":[{\"name\":\"ns-1\"},{\"name\":\"Bad_NS\"}]}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
    );
    assert!(
        messages[1].starts_with("spec.targets: Invalid value: {"),
        "{}",
        messages[1]
    );
    assert!(
        messages[1].ends_with(
            ": ambiguous targets because namespace [ns-1] is in both IncludedNamespaces.List and ExcludedNamespaces.List"
        ),
        "{}",
        messages[1]
    );
}

#[test]
fn a_label_selector_that_is_not_one_is_refused() {
    let cases = [
        (
            json!({"key": "a", "operator": "In", "values": []}),
            "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            json!({"key": "a", "operator": "Exists", "values": ["x"]}),
            "values: Invalid value: []string{\"x\"}: values set must be empty for exists and does not exist",
        ),
        (
            json!({"key": "a", "operator": "Near"}),
            "\"Near\" is not a valid label selector operator",
        ),
    ];
    for (expression, message) in cases {
        let targets = secret_spec(
            "s",
            json!({"namespaceLabelSelector": {"matchExpressions": [expression]}}),
        )
        .targets;
        let errors = validate_targets(&targets);
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0]
                .to_string()
                .ends_with(&format!("labelSelectorAsSelector error: {message}")),
            "{}",
            errors[0]
        );
    }
    let fine = secret_spec(
        "s",
        json!({"allNamespaces": true, "namespaceLabelSelector": {"matchLabels": {"team": "a"}}}),
    );
    assert!(validate_targets(&fine.targets).is_empty());
}
