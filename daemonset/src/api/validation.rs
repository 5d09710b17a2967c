//! OpenKruise's DaemonSet validation (`pkg/webhook/daemonset/validating`), as field errors
//! with Kubernetes' paths and messages. The webhook runs it on CREATE and UPDATE of either
//! version (a `v1alpha1` object decodes as the `v1beta1` type; [`Served`] says which
//! version's rules apply).
//!
//! Checked: metadata name; selector (valid, non-empty, matching the template's labels); the
//! template (`kruise_compat::podtemplate`), restartPolicy `Always` (empty counts as `Always`),
//! no activeDeadlineSeconds; minReadySeconds and revisionHistoryLimit non-negative; no
//! `lifecycle.inPlaceUpdate`; the update strategy (type, rollingUpdate required,
//! maxUnavailable / maxSurge positive, at most 100%, exactly one of them non-zero,
//! rollingUpdateType known, `InPlaceIfPossible` without surge, `v1alpha1` `Surging` without
//! unavailable, partition non-negative and at most 100%); on UPDATE, that only the mutable
//! fields changed.
//!
//! One deliberate difference: OpenKruise reports an unknown rollingUpdateType and a bad
//! partition at `spec.updateStrategy.rollingUpdate.rollingUpdate.type` / `.partition` (the
//! segment doubled); here the paths are the fields' own,
//! `spec.updateStrategy.rollingUpdate.rollingUpdateType` / `.partition`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_compat::field::{BadValue, DNS1123_SUBDOMAIN_MESSAGE, Path, is_dns1123_subdomain};
pub use kruise_compat::field::{ErrorList, FieldError};
use kruise_compat::podtemplate::{validate_long_running_pod, validate_pod_template};
use kruise_core::pods::selector::{self, selector_matches};

use super::Served;
use super::v1beta1::{
    DaemonSet, DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet, RollingUpdateType,
    UpdateStrategyType,
};

/// OpenKruise's message for a change to an immutable field through `v1beta1`.
pub const IMMUTABLE_FIELDS_MESSAGE: &str = "updates to daemonset spec for fields other than 'BurstReplicas', 'template', 'lifecycle', 'scaleStrategy', 'updateStrategy', 'minReadySeconds', and 'revisionHistoryLimit' are forbidden";
/// The same through `v1alpha1` (which has no scaleStrategy).
pub const IMMUTABLE_FIELDS_MESSAGE_V1ALPHA1: &str = "updates to daemonset spec for fields other than 'BurstReplicas', 'template', 'lifecycle',  'updateStrategy', 'minReadySeconds', and 'revisionHistoryLimit' are forbidden";

/// Kubernetes' `IsValidPercent` message.
const PERCENT_MESSAGE: &str = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";
const NON_NEGATIVE: &str = "must be greater than or equal to 0";

/// Validates `ds` as sent through `served` (and, on UPDATE, its change from `old`).
pub fn validate(ds: &DaemonSet, old: Option<&DaemonSet>, served: Served) -> ErrorList {
    let mut errs = match old {
        None => validate_name(ds),
        Some(old) => validate_update(&ds.spec, &old.spec, served),
    };
    errs.extend(validate_spec(&ds.spec, served));
    errs
}

fn validate_name(ds: &DaemonSet) -> ErrorList {
    let meta = &ds.metadata;
    match (meta.name.as_deref(), meta.generate_name.as_deref()) {
        (Some(n), _) if !n.is_empty() => {
            if is_dns1123_subdomain(n) {
                vec![]
            } else {
                vec![FieldError::invalid(
                    "metadata.name",
                    n,
                    DNS1123_SUBDOMAIN_MESSAGE,
                )]
            }
        }
        (_, Some(g)) if !g.is_empty() => vec![],
        _ => vec![FieldError::required(
            "metadata.name",
            "name or generateName is required",
        )],
    }
}

/// Only burstReplicas, template, lifecycle, updateStrategy, minReadySeconds,
/// revisionHistoryLimit (and through `v1beta1`, scaleStrategy) may change.
fn validate_update(new: &DaemonSetSpec, old: &DaemonSetSpec, served: Served) -> ErrorList {
    let mut kept = new.clone();
    kept.template = old.template.clone();
    kept.update_strategy = old.update_strategy.clone();
    kept.lifecycle = old.lifecycle.clone();
    kept.burst_replicas = old.burst_replicas.clone();
    kept.min_ready_seconds = old.min_ready_seconds;
    kept.revision_history_limit = old.revision_history_limit;
    let message = match served {
        Served::V1beta1 => {
            kept.scale_strategy = old.scale_strategy.clone();
            IMMUTABLE_FIELDS_MESSAGE
        }
        Served::V1alpha1 => IMMUTABLE_FIELDS_MESSAGE_V1ALPHA1,
    };
    if kept == *old {
        vec![]
    } else {
        vec![FieldError::forbidden("spec", message)]
    }
}

/// The spec checks shared by CREATE and UPDATE.
pub fn validate_spec(spec: &DaemonSetSpec, served: Served) -> ErrorList {
    let mut errs = Vec::new();
    validate_selector(&mut errs, spec);
    errs.extend(validate_pod_template(
        &spec.template,
        &Path::new("spec").child("template"),
    ));
    if let Some(pod) = &spec.template.spec {
        errs.extend(validate_long_running_pod(pod, "DaemonSet"));
    }
    if spec.min_ready_seconds < 0 {
        errs.push(FieldError::invalid(
            "spec.minReadySeconds",
            spec.min_ready_seconds,
            NON_NEGATIVE,
        ));
    }
    validate_update_strategy(&mut errs, &spec.update_strategy, served);
    if let Some(limit) = spec.revision_history_limit
        && limit < 0
    {
        errs.push(FieldError::invalid(
            "spec.revisionHistoryLimit",
            limit,
            NON_NEGATIVE,
        ));
    }
    if spec
        .lifecycle
        .as_ref()
        .is_some_and(|l| l.in_place_update.is_some())
    {
        errs.push(FieldError::forbidden(
            "spec.lifecycle.inPlaceUpdate",
            "inPlaceUpdate hook has not supported yet",
        ));
    }
    errs
}

fn validate_selector(errs: &mut ErrorList, spec: &DaemonSetSpec) {
    let labels = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let Some(selector) = &spec.selector else {
        // A missing selector selects nothing, so it matches no template.
        errs.push(mismatch(&labels));
        return;
    };
    let empty = selector::is_empty(selector);
    match selector_matches(selector, &labels) {
        Err(e) => errs.push(FieldError::invalid(
            "spec.selector",
            BadValue::json(selector),
            e.to_string(),
        )),
        Ok(false) => errs.push(mismatch(&labels)),
        Ok(true) => {}
    }
    if empty {
        errs.push(FieldError::invalid(
            "spec.selector",
            BadValue::json(selector),
            "empty selector is invalid for daemonset",
        ));
    }
}

fn mismatch(labels: &BTreeMap<String, String>) -> FieldError {
    FieldError::invalid(
        "spec.template.metadata.labels",
        BadValue::json(labels),
        "`selector` does not match template `labels`",
    )
}

fn validate_update_strategy(
    errs: &mut ErrorList,
    strategy: &DaemonSetUpdateStrategy,
    served: Served,
) {
    match &strategy.type_ {
        Some(UpdateStrategyType::OnDelete) => {}
        Some(UpdateStrategyType::RollingUpdate) => match &strategy.rolling_update {
            None => errs.push(FieldError::required(
                "spec.updateStrategy.rollingUpdate",
                "",
            )),
            Some(rolling) => validate_rolling_update(errs, rolling, served),
        },
        _ => errs.push(FieldError::not_supported(
            "spec.updateStrategy",
            BadValue::json(strategy),
            &["RollingUpdate", "OnDelete"],
        )),
    }
}

/// An int-or-string as kube-apiserver prints it: a bare number, or a quoted string.
fn render(v: &IntOrString) -> BadValue {
    match v {
        IntOrString::Int(i) => BadValue::raw(i.to_string()),
        IntOrString::String(s) => BadValue::from(s),
    }
}

/// The percent of a valid percent string (`"25%"`).
fn percent(s: &str) -> Option<i64> {
    let digits = s.strip_suffix('%')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// OpenKruise's `getIntOrPercentValue`: the percent of a percent string, else the value as
/// an integer (a string that is no integer counts as 0).
fn int_or_percent_value(v: &IntOrString) -> i64 {
    match v {
        IntOrString::Int(i) => i64::from(*i),
        IntOrString::String(s) => percent(s).unwrap_or_else(|| s.parse().unwrap_or(0)),
    }
}

/// Kubernetes' `ValidatePositiveIntOrPercent` (despite its name: non-negative) and
/// `IsNotMoreThan100Percent`.
fn validate_int_or_percent(v: &IntOrString, path: &str) -> ErrorList {
    match v {
        IntOrString::Int(i) if *i < 0 => vec![FieldError::invalid(path, *i, NON_NEGATIVE)],
        IntOrString::Int(_) => vec![],
        IntOrString::String(s) => match percent(s) {
            None => vec![FieldError::invalid(path, render(v), PERCENT_MESSAGE)],
            Some(p) if p > 100 => vec![FieldError::invalid(
                path,
                render(v),
                "must not be greater than 100%",
            )],
            Some(_) => vec![],
        },
    }
}

fn non_zero(v: Option<&IntOrString>) -> Option<&IntOrString> {
    v.filter(|v| int_or_percent_value(v) != 0)
}

fn validate_rolling_update(errs: &mut ErrorList, rolling: &RollingUpdateDaemonSet, served: Served) {
    const AT: &str = "spec.updateStrategy.rollingUpdate";
    let unavailable_path = format!("{AT}.maxUnavailable");
    let surge_path = format!("{AT}.maxSurge");
    let unavailable = non_zero(rolling.max_unavailable.as_ref());
    let surge = non_zero(rolling.max_surge.as_ref());
    if let Some(v) = unavailable {
        errs.extend(validate_int_or_percent(v, &unavailable_path));
    }
    if let Some(v) = surge {
        errs.extend(validate_int_or_percent(v, &surge_path));
    }
    match (unavailable, surge) {
        (Some(_), Some(s)) => errs.push(FieldError::invalid(
            surge_path.as_str(),
            render(s),
            "may not be set when maxUnavailable is non-zero",
        )),
        (None, None) => errs.push(FieldError::required(
            unavailable_path.as_str(),
            "cannot be 0 when maxSurge is 0",
        )),
        _ => {}
    }
    match &rolling.type_ {
        None | Some(RollingUpdateType::Standard) => {}
        Some(RollingUpdateType::Unknown(s)) if s.is_empty() => {}
        Some(RollingUpdateType::InPlaceIfPossible) => {
            if surge.is_some() {
                errs.push(FieldError::required(
                    surge_path.as_str(),
                    "must be 0 for InPlaceIfPossible type",
                ));
            }
        }
        Some(RollingUpdateType::Surging) if served == Served::V1alpha1 => {
            if unavailable.is_some() {
                errs.push(FieldError::required(
                    unavailable_path.as_str(),
                    "must be 0 for Surging type",
                ));
            }
        }
        Some(other) => {
            let supported: &[&str] = match served {
                Served::V1alpha1 => &["Standard", "Surging", "InPlaceIfPossible"],
                Served::V1beta1 => &["Standard", "InPlaceIfPossible"],
            };
            errs.push(FieldError::not_supported(
                format!("{AT}.rollingUpdateType"),
                other.as_str(),
                supported,
            ));
        }
    }
    if let Some(partition) = &rolling.partition {
        errs.extend(validate_int_or_percent(
            partition,
            &format!("{AT}.partition"),
        ));
    }
}

#[cfg(test)]
mod tests;
