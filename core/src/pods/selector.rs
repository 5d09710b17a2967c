//! Label-selector matching (`metav1.LabelSelector`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_compat::field::{BadValue, FieldError};

/// An invalid selector.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// Unknown operator.
    #[error("{0:?} is not a valid label selector operator")]
    BadOperator(String),
    /// `In`/`NotIn` without values, or `Exists`/`DoesNotExist` with values.
    #[error("invalid values for operator {0:?}")]
    BadValues(String),
}

/// Whether `selector` has neither labels nor expressions (it selects everything, and a
/// workload with it claims nothing in particular).
pub fn is_empty(selector: &LabelSelector) -> bool {
    selector
        .match_labels
        .as_ref()
        .is_none_or(BTreeMap::is_empty)
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty)
}

/// OpenKruise's selector checks of a CloneSet or an Advanced StatefulSet (`kind` as their
/// messages spell it, `cloneset` or `statefulset`): `spec.selector` is required, not empty,
/// valid, and matches the template's labels.
pub fn validate_workload_selector(
    selector: Option<&LabelSelector>,
    template_labels: Option<&BTreeMap<String, String>>,
    kind: &str,
) -> Vec<FieldError> {
    let Some(selector) = selector else {
        return vec![FieldError::required("spec.selector", "")];
    };
    let mut errs = Vec::new();
    let empty = is_empty(selector);
    if empty {
        errs.push(FieldError::invalid(
            "spec.selector",
            BadValue::json(selector),
            format!("empty selector is invalid for {kind}"),
        ));
    }
    let no_labels = BTreeMap::new();
    let labels = template_labels.unwrap_or(&no_labels);
    match selector_matches(selector, labels) {
        Err(e) => errs.push(FieldError::invalid(
            "spec.selector",
            BadValue::json(selector),
            e.to_string(),
        )),
        Ok(false) if !empty => errs.push(FieldError::invalid(
            "spec.template.metadata.labels",
            BadValue::json(labels),
            "`selector` does not match template `labels`",
        )),
        Ok(_) => {}
    }
    errs
}

/// Whether `labels` match `selector`. An empty selector matches everything.
pub fn selector_matches(
    selector: &LabelSelector,
    labels: &BTreeMap<String, String>,
) -> Result<bool, SelectorError> {
    selector_matches_by(selector, |k| labels.get(k).map(String::as_str))
}

/// Whether the labels `label` looks up match `selector`. An empty selector matches everything.
pub fn selector_matches_by<'l>(
    selector: &LabelSelector,
    label: impl Fn(&str) -> Option<&'l str>,
) -> Result<bool, SelectorError> {
    let mut ok = true;
    if let Some(ml) = &selector.match_labels {
        ok &= ml.iter().all(|(k, v)| label(k) == Some(v.as_str()));
    }
    for e in selector.match_expressions.iter().flatten() {
        let values = e.values.as_deref().unwrap_or(&[]);
        let got = label(&e.key);
        let m = match e.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                return Err(SelectorError::BadValues(e.operator.clone()));
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                return Err(SelectorError::BadValues(e.operator.clone()));
            }
            "In" => got.is_some_and(|g| values.iter().any(|v| v == g)),
            "NotIn" => !got.is_some_and(|g| values.iter().any(|v| v == g)),
            "Exists" => got.is_some(),
            "DoesNotExist" => got.is_none(),
            other => return Err(SelectorError::BadOperator(other.to_string())),
        };
        ok &= m;
    }
    Ok(ok)
}

/// `metav1.FormatLabelSelector`: the selector as a string (`app=web,tier in (a,b)`), the form
/// a workload's `status.labelSelector` carries for the scale subresource. Requirements are
/// sorted by key, set values sorted and deduplicated, as Kubernetes prints them.
pub fn format_label_selector(selector: &LabelSelector) -> String {
    let mut reqs: Vec<(String, String)> = Vec::new();
    for (k, v) in selector.match_labels.iter().flatten() {
        reqs.push((k.clone(), format!("{k}={v}")));
    }
    for e in selector.match_expressions.iter().flatten() {
        let mut values = e.values.clone().unwrap_or_default();
        values.sort();
        values.dedup();
        let s = match e.operator.as_str() {
            "In" => format!("{} in ({})", e.key, values.join(",")),
            "NotIn" => format!("{} notin ({})", e.key, values.join(",")),
            "Exists" => e.key.clone(),
            "DoesNotExist" => format!("!{}", e.key),
            _ => continue,
        };
        reqs.push((e.key.clone(), s));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    reqs.into_iter()
        .map(|(_, s)| s)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    #[test]
    fn workload_selectors_are_required_not_empty_and_match_the_template() {
        let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
        let by = |k: &str, v: &str| LabelSelector {
            match_labels: Some(BTreeMap::from([(k.to_string(), v.to_string())])),
            ..Default::default()
        };
        let messages = |errs: Vec<FieldError>| -> Vec<String> {
            errs.iter().map(ToString::to_string).collect()
        };
        assert!(
            validate_workload_selector(Some(&by("app", "web")), Some(&labels), "cloneset")
                .is_empty()
        );
        assert_eq!(
            messages(validate_workload_selector(None, Some(&labels), "cloneset")),
            ["spec.selector: Required value"]
        );
        let empty = LabelSelector::default();
        assert!(is_empty(&empty));
        assert_eq!(
            messages(validate_workload_selector(
                Some(&empty),
                Some(&labels),
                "statefulset"
            )),
            ["spec.selector: Invalid value: {}: empty selector is invalid for statefulset"]
        );
        assert_eq!(
            messages(validate_workload_selector(
                Some(&by("app", "db")),
                None,
                "cloneset"
            )),
            [
                "spec.template.metadata.labels: Invalid value: {}: `selector` does not match template `labels`"
            ]
        );
    }

    fn req(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn matching_table() {
        let labels = BTreeMap::from([
            ("app".to_string(), "a".to_string()),
            ("zone".to_string(), "z1".to_string()),
        ]);
        let sel = |ml: &[(&str, &str)], me: Vec<LabelSelectorRequirement>| LabelSelector {
            match_labels: (!ml.is_empty()).then(|| {
                ml.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
            match_expressions: (!me.is_empty()).then_some(me),
        };
        assert_eq!(selector_matches(&sel(&[], vec![]), &labels), Ok(true));
        assert_eq!(
            selector_matches(&sel(&[("app", "a")], vec![]), &labels),
            Ok(true)
        );
        assert_eq!(
            selector_matches(&sel(&[("app", "b")], vec![]), &labels),
            Ok(false)
        );
        assert_eq!(
            selector_matches(&sel(&[], vec![req("zone", "In", &["z1", "z2"])]), &labels),
            Ok(true)
        );
        assert_eq!(
            selector_matches(&sel(&[], vec![req("zone", "NotIn", &["z1"])]), &labels),
            Ok(false)
        );
        assert_eq!(
            selector_matches(&sel(&[], vec![req("x", "NotIn", &["z1"])]), &labels),
            Ok(true)
        );
        assert_eq!(
            selector_matches(&sel(&[], vec![req("x", "Exists", &[])]), &labels),
            Ok(false)
        );
        assert_eq!(
            selector_matches(&sel(&[], vec![req("x", "DoesNotExist", &[])]), &labels),
            Ok(true)
        );
        assert!(selector_matches(&sel(&[], vec![req("x", "Gt", &["1"])]), &labels).is_err());
        assert!(selector_matches(&sel(&[], vec![req("x", "In", &[])]), &labels).is_err());
    }

    #[test]
    fn formats_like_kubernetes() {
        let sel = LabelSelector {
            match_labels: Some(BTreeMap::from([("zone".to_string(), "z1".to_string())])),
            match_expressions: Some(vec![
                req("app", "In", &["b", "a", "b"]),
                req("gone", "DoesNotExist", &[]),
            ]),
        };
        assert_eq!(format_label_selector(&sel), "app in (a,b),!gone,zone=z1");
        assert_eq!(format_label_selector(&LabelSelector::default()), "");
        // Labels and expressions sorted together by key.
        let sel = LabelSelector {
            match_labels: Some(BTreeMap::from([
                ("b".to_string(), "2".to_string()),
                ("a".to_string(), "1".to_string()),
            ])),
            match_expressions: Some(vec![
                req("c", "In", &["y", "x"]),
                req("d", "DoesNotExist", &[]),
                req("aa", "Exists", &[]),
            ]),
        };
        assert_eq!(format_label_selector(&sel), "a=1,aa,b=2,c in (x,y),!d");
    }
}
