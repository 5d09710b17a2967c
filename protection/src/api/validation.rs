//! OpenKruise's PodUnavailableBudget validation (`validatingPodUnavailableBudgetFnV1beta1`):
//! the checks of one object ([`validate`]), of an update ([`validate_update`]) and against
//! the other budgets of its namespace ([`validate_conflicts`]), as field errors. A v1alpha1
//! object is converted to v1beta1 first, as OpenKruise does.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_compat::field::{BadValue, ErrorList, FieldError, Path};
use kruise_core::pods::selector;

use super::v1beta1::PodUnavailableBudget;
use super::{PROTECT_TOTAL_REPLICAS_ANNOTATION, PubOperation};

/// The checks of one PodUnavailableBudget (CREATE and UPDATE).
pub fn validate(pub_: &PodUnavailableBudget) -> ErrorList {
    let mut errors = ErrorList::new();
    if let Some(value) = pub_
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PROTECT_TOTAL_REPLICAS_ANNOTATION))
    {
        let path = Path::new("metadata")
            .child("annotations")
            .key(PROTECT_TOTAL_REPLICAS_ANNOTATION);
        match value.parse::<i32>() {
            Err(_) => errors.push(FieldError::invalid(path, value, "must be a valid int32")),
            Ok(_) => {
                // Compared as text, as OpenKruise does: "+3" does not match 3.
                if pub_
                    .spec
                    .protect_total_replicas
                    .is_some_and(|spec| value != &spec.to_string())
                {
                    errors.push(FieldError::invalid(
                        path,
                        value,
                        "must match spec.protectTotalReplicas when both are set",
                    ));
                }
            }
        }
    }
    validate_spec(pub_, &mut errors);
    errors
}

fn validate_spec(pub_: &PodUnavailableBudget, errors: &mut ErrorList) {
    let spec = &pub_.spec;
    let path = Path::new("spec");
    match (&spec.selector, &spec.target_reference) {
        (None, None) => errors.push(FieldError::required(
            path.child("selector, targetRef"),
            "no selector or targetRef defined in PodUnavailableBudget",
        )),
        (Some(_), Some(_)) => errors.push(FieldError::required(
            path.child("selector, targetRef"),
            "selector and targetRef are mutually exclusive",
        )),
        (None, Some(target)) => {
            let value = BadValue::json(target);
            if target.api_version.is_empty() || target.name.is_empty() || target.kind.is_empty() {
                errors.push(FieldError::invalid(
                    path.child("targetRef"),
                    value.clone(),
                    "empty targetRef is not valid for PodUnavailableBudget",
                ));
            }
            if target.api_version.matches('/').count() > 1 {
                errors.push(FieldError::invalid(
                    path.child("targetRef"),
                    value,
                    format!("unexpected GroupVersion string: {}", target.api_version),
                ));
            }
        }
        (Some(selector), None) => {
            validate_label_selector(selector, &path.child("selector"), errors);
            if selector::is_empty(selector) {
                errors.push(FieldError::invalid(
                    path.child("selector"),
                    BadValue::json(selector),
                    "empty selector is not valid for PodUnavailableBudget.",
                ));
            }
        }
    }

    match (&spec.max_unavailable, &spec.min_available) {
        (None, None) => errors.push(FieldError::required(
            path.child("maxUnavailable, minAvailable"),
            "no maxUnavailable or minAvailable defined in PodUnavailableBudget",
        )),
        (Some(_), Some(_)) => errors.push(FieldError::required(
            path.child("maxUnavailable, minAvailable"),
            "maxUnavailable and minAvailable are mutually exclusive",
        )),
        (Some(v), None) => validate_budget_value(v, &path.child("maxUnavailable"), errors),
        (None, Some(v)) => validate_budget_value(v, &path.child("minAvailable"), errors),
    }

    for (i, operation) in spec.protect_operations.iter().enumerate() {
        if let PubOperation::Unknown(value) = operation {
            errors.push(FieldError::not_supported(
                path.child("protectOperations").index(i),
                value,
                &PubOperation::KNOWN,
            ));
        }
    }

    if let Some(ignored) = &spec.ignored_pod_selector {
        validate_label_selector(ignored, &path.child("ignoredPodSelector"), errors);
        if selector::is_empty(ignored) {
            errors.push(FieldError::invalid(
                path.child("ignoredPodSelector"),
                BadValue::json(ignored),
                "empty ignoredPodSelector is not valid for PodUnavailableBudget",
            ));
        }
    }
}

/// An UPDATE: `selector` and `targetRef` cannot change.
pub fn validate_update(new: &PodUnavailableBudget, old: &PodUnavailableBudget) -> ErrorList {
    if new.spec.selector != old.spec.selector
        || new.spec.target_reference != old.spec.target_reference
    {
        return vec![FieldError::required(
            Path::new("spec").child("selector, targetRef"),
            "selector and targetRef cannot be modified",
        )];
    }
    Vec::new()
}

/// The first other budget of the namespace that covers the same workload (same group, kind
/// and name) or whose selector loosely overlaps (OpenKruise's `IsSelectorLooseOverlap`).
pub fn validate_conflicts(
    pub_: &PodUnavailableBudget,
    others: &[PodUnavailableBudget],
) -> ErrorList {
    let name = pub_.metadata.name.as_deref().unwrap_or("");
    for other in others {
        let other_name = other.metadata.name.as_deref().unwrap_or("");
        if other_name == name {
            continue;
        }
        let conflict = if let (Some(mine), Some(theirs)) =
            (&pub_.spec.target_reference, &other.spec.target_reference)
        {
            mine.same_target(theirs).then(|| {
                FieldError::invalid(
                    Path::new("spec").child("targetReference"),
                    BadValue::json(mine),
                    format!("pub.spec.targetReference is in conflict with other PodUnavailableBudget {other_name}"),
                )
            })
        } else if let (Some(mine), Some(theirs)) = (&pub_.spec.selector, &other.spec.selector) {
            selectors_loosely_overlap(mine, theirs).then(|| {
                FieldError::invalid(
                    Path::new("spec").child("selector"),
                    BadValue::json(mine),
                    format!("pub.spec.selector is in conflict with other PodUnavailableBudget {other_name}"),
                )
            })
        } else {
            None
        };
        if let Some(error) = conflict {
            return vec![error];
        }
    }
    Vec::new()
}

/// metav1's `ValidateLabelSelector`, for the operators and their values.
fn validate_label_selector(selector: &LabelSelector, path: &Path, errors: &mut ErrorList) {
    for (i, e) in selector.match_expressions.iter().flatten().enumerate() {
        let p = path.child("matchExpressions").index(i);
        let has_values = e.values.as_ref().is_some_and(|v| !v.is_empty());
        match e.operator.as_str() {
            "In" | "NotIn" if !has_values => errors.push(FieldError::required(
                p.child("values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if has_values => errors.push(FieldError::forbidden(
                p.child("values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errors.push(FieldError::invalid(
                p.child("operator"),
                other,
                "not a valid selector operator",
            )),
        }
    }
}

/// Kubernetes' `ValidatePositiveIntOrPercent` and `IsNotMoreThan100Percent`.
fn validate_budget_value(value: &IntOrString, path: &Path, errors: &mut ErrorList) {
    match value {
        IntOrString::Int(i) if *i < 0 => errors.push(FieldError::invalid(
            path.clone(),
            *i,
            "must be greater than or equal to 0",
        )),
        IntOrString::Int(_) => {}
        IntOrString::String(s) => {
            let percent = s
                .strip_suffix('%')
                .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
            match percent.map(str::parse::<u64>) {
                None => errors.push(FieldError::invalid(
                    path.clone(),
                    s,
                    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
                )),
                Some(Ok(p)) if p <= 100 => {}
                Some(_) => errors.push(FieldError::invalid(
                    path.clone(),
                    s,
                    "must not be greater than 100%",
                )),
            }
        }
    }
}

/// OpenKruise's `IsSelectorLooseOverlap`: every key of either selector is constrained by
/// the other, and each pair of constraints could hold together.
pub fn selectors_loosely_overlap(a: &LabelSelector, b: &LabelSelector) -> bool {
    let a = requirements(a);
    let b = requirements(b);
    a.len() == b.len()
        && a.iter().all(|(key, ra)| {
            b.get(key)
                .is_some_and(|rb| requirement_overlaps(ra, rb) && requirement_overlaps(rb, ra))
        })
}

/// The selector as one requirement per key; `matchLabels` win over an expression on the
/// same key, as in OpenKruise.
fn requirements(selector: &LabelSelector) -> BTreeMap<&str, (&str, Vec<&str>)> {
    let mut out: BTreeMap<&str, (&str, Vec<&str>)> = BTreeMap::new();
    for LabelSelectorRequirement {
        key,
        operator,
        values,
    } in selector.match_expressions.iter().flatten()
    {
        let values = values.iter().flatten().map(String::as_str).collect();
        out.insert(key, (operator, values));
    }
    for (key, value) in selector.match_labels.iter().flatten() {
        out.insert(key, ("In", vec![value.as_str()]));
    }
    out
}

fn requirement_overlaps(a: &(&str, Vec<&str>), b: &(&str, Vec<&str>)) -> bool {
    let overlaps = |x: &[&str], y: &[&str]| y.iter().any(|v| x.contains(v));
    let contains = |x: &[&str], y: &[&str]| y.iter().all(|v| x.contains(v));
    match (a.0, b.0) {
        ("In", "Exists") => true,
        ("In", "In") => overlaps(&b.1, &a.1),
        ("In", "NotIn") => !contains(&b.1, &a.1),
        ("Exists", "In" | "NotIn" | "Exists") => true,
        ("NotIn", "Exists" | "DoesNotExist" | "NotIn") => true,
        ("NotIn", "In") => !contains(&a.1, &b.1),
        ("DoesNotExist", "DoesNotExist" | "NotIn") => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests;
