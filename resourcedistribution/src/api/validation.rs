//! OpenKruise's checks of a ResourceDistribution (its `vresourcedistribution.kb.io`
//! webhook), with its messages: the resource decodes, is a Secret or a ConfigMap, and keeps
//! its apiVersion, kind and name on update; the target namespace names are valid, none both
//! included and excluded, and the label selector is one. The webhook then creates the
//! resource with `dryRun` ([`crate::admission`]), which this module cannot do.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_compat::field::{BadValue, FieldError, dns1123_label_errors};
use kruise_compat::gojson::to_go_json;
use serde_json::Value;

use super::{
    ResourceDistributionSpec, ResourceDistributionTargetNamespaces, ResourceDistributionTargets,
};

/// The kinds a distribution may hold (group `""`), as OpenKruise prints its list.
pub const SUPPORTED_KINDS: [&str; 2] = ["Secret", "ConfigMap"];

/// The resource of a distribution, decoded as OpenKruise decodes it (an unstructured
/// object: any `apiVersion`, a `kind` required).
#[derive(Clone, Debug, PartialEq)]
pub struct Resource {
    /// Its `apiVersion`.
    pub api_version: String,
    /// Its `kind`.
    pub kind: String,
    /// Its `metadata.name`.
    pub name: String,
    /// The whole object, as the distribution holds it.
    pub object: Value,
}

impl Resource {
    /// Decodes `spec.resource` (errors at `spec`, as OpenKruise reports them).
    pub fn decode(raw: &Value) -> Result<Resource, FieldError> {
        let empty = match raw {
            Value::Null => true,
            // A RawExtension holds the field's bytes; only a missing field is empty.
            _ => false,
        };
        if empty {
            return Err(FieldError::invalid(
                "spec",
                BadValue::Null,
                "empty resource is not allowed",
            ));
        }
        let text = |key: &str| raw.get(key).and_then(Value::as_str).unwrap_or_default();
        let kind = text("kind");
        if !raw.is_object() || kind.is_empty() {
            return Err(FieldError::internal(
                "spec",
                format!(
                    "failed to deserialize resource, please check your spec.resource, err Object 'Kind' is missing in '{}'",
                    to_go_json(raw)
                ),
            ));
        }
        Ok(Resource {
            api_version: text("apiVersion").to_string(),
            kind: kind.to_string(),
            name: raw
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            object: raw.clone(),
        })
    }

    /// Its API group (`""` for the core group).
    pub fn group(&self) -> &str {
        match self.api_version.split_once('/') {
            Some((group, _)) => group,
            None => "",
        }
    }

    /// Whether it is a kind a distribution may hold.
    pub fn is_supported(&self) -> bool {
        self.group().is_empty() && SUPPORTED_KINDS.contains(&self.kind.as_str())
    }

    /// Whether it is a Secret (else a ConfigMap, once [`Resource::is_supported`]).
    pub fn is_secret(&self) -> bool {
        self.kind == "Secret"
    }
}

/// The checks of `spec.resource` (and, on UPDATE, its change from `old`): the resource when
/// it passes them, to be dry-run created; OpenKruise stops at the first that fails.
pub fn validate_resource(
    spec: &ResourceDistributionSpec,
    old: Option<&ResourceDistributionSpec>,
) -> Result<Resource, Vec<FieldError>> {
    let resource = Resource::decode(&spec.resource).map_err(|e| vec![e])?;
    let old = match old.map(|old| Resource::decode(&old.resource)) {
        Some(Err(e)) => return Err(vec![e]),
        Some(Ok(old)) => Some(old),
        None => None,
    };
    if !resource.is_supported() {
        return Err(vec![FieldError::invalid(
            "spec.resource",
            BadValue::json(&resource.object),
            format!(
                "unknown or unsupported resource GroupKind, only support [{}]",
                SUPPORTED_KINDS.join(" ")
            ),
        )]);
    }
    if let Some(old) = old
        && (old.api_version != resource.api_version
            || old.kind != resource.kind
            || old.name != resource.name)
    {
        return Err(vec![FieldError::invalid(
            "spec.resource",
            BadValue::Null,
            "resource apiVersion, kind, and name are immutable",
        )]);
    }
    Ok(resource)
}

/// The checks of `spec.targets`.
pub fn validate_targets(targets: &ResourceDistributionTargets) -> Vec<FieldError> {
    let mut errors = name_errors(
        "spec.targets.includedNamespaces",
        &targets.included_namespaces,
    );
    errors.extend(name_errors(
        "spec.targets.excludedNamespaces",
        &targets.excluded_namespaces,
    ));
    let conflicted: Vec<&str> = targets
        .excluded_namespaces
        .list
        .iter()
        .filter(|n| targets.included_namespaces.contains(&n.name))
        .map(|n| n.name.as_str())
        .collect();
    if !conflicted.is_empty() {
        errors.push(FieldError::invalid(
            "spec.targets",
            BadValue::json(targets),
            format!(
                "ambiguous targets because namespace [{}] is in both IncludedNamespaces.List and ExcludedNamespaces.List",
                conflicted.join(" ")
            ),
        ));
    }
    if let Err(message) = selector_error(&targets.namespace_label_selector) {
        errors.push(FieldError::invalid(
            "spec.targets.namespaceLabelSelector",
            BadValue::json(&targets.namespace_label_selector),
            format!("labelSelectorAsSelector error: {message}"),
        ));
    }
    errors
}

/// One error at `path` (the whole list its value) per problem with each name of `list`.
fn name_errors(path: &str, list: &ResourceDistributionTargetNamespaces) -> Vec<FieldError> {
    list.list
        .iter()
        .flat_map(|n| dns1123_label_errors(&n.name))
        .map(|message| FieldError::invalid(path, BadValue::json(list), message))
        .collect()
}

/// `metav1.LabelSelectorAsSelector`'s error for `selector`, if any (its operator and
/// value-count checks, with its messages).
fn selector_error(selector: &LabelSelector) -> Result<(), String> {
    for requirement in selector.match_expressions.iter().flatten() {
        let values = requirement.values.as_deref().unwrap_or_default();
        let go_values = format!(
            "[]string{{{}}}",
            values
                .iter()
                .map(|v| format!("{v:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        match requirement.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                return Err(format!(
                    "values: Invalid value: {go_values}: for 'in', 'notin' operators, values set can't be empty"
                ));
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                return Err(format!(
                    "values: Invalid value: {go_values}: values set must be empty for exists and does not exist"
                ));
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => return Err(format!("{other:?} is not a valid label selector operator")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
