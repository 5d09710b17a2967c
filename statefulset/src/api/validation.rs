//! OpenKruise's StatefulSet validation (`pkg/webhook/statefulset/validating`), as field
//! errors with Kubernetes' paths and messages. The webhook runs it on CREATE and UPDATE of
//! either version (both decode to the same spec); the controller re-runs it and reports an
//! invalid set instead of acting on it.
//!
//! Checked: metadata name; podManagementPolicy; reserveOrdinals; scaleStrategy and
//! rollingUpdate maxUnavailable (positive, at least 1, anything but int 1 only with
//! Parallel); updateStrategy (type, OnDelete without rollingUpdate, partition,
//! minReadySeconds 0..300, podUpdatePolicy with the `InPlaceUpdateReady` readiness gate for
//! the in-place policies, unorderedUpdate only with Parallel and a valid priority strategy);
//! the retention policy; replicas; selector (required, non-empty, matching the template);
//! the template's labels and annotations (not its pod spec: Kubernetes' StatefulSet
//! validation, which OpenKruise calls, leaves that out), restartPolicy `Always`, no
//! activeDeadlineSeconds; on UPDATE the immutable fields and `InPlaceOnly`'s image-only rule.
//! With `StatefulSetAutoResizePVCGate`, the claim-template update rules of
//! `volumeClaimUpdateStrategy: OnPodRollingUpdate` ([`validate_claim_template_update`]) and,
//! for a template whose size changed, its StorageClass ([`validate_claim_template_expansion`],
//! the webhook reading the classes).

use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_compat::field::{
    BadValue, DNS1123_LABEL_EXAMPLE, DNS1123_LABEL_MESSAGE, Path, is_dns1123_label,
};
pub use kruise_compat::field::{ErrorList, FieldError, bracketed as to_message};
use kruise_compat::podtemplate::{validate_long_running_pod, validate_template_metadata};
use kruise_core::api::intstr::value_from_int_or_percent;
use kruise_core::api::keys::INPLACE_UPDATE_READY;
use kruise_core::inplace::{DiffOpKind, json_diff};
use kruise_core::pods::selector::validate_workload_selector;

use super::MAX_MIN_READY_SECONDS;
use super::ordinals::ReservedOrdinals;
use super::v1beta1::{
    PodManagementPolicy, PodUpdatePolicy, RetentionPolicyType, StatefulSet, StatefulSetSpec,
    UpdateStrategyType,
};

/// OpenKruise's message for a change to an immutable field.
pub const IMMUTABLE_FIELDS_MESSAGE: &str = "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'reserveOrdinals', 'lifecycle', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy', `volumeClaimTemplates`, `VolumeClaimUpdateStrategy` and 'updateStrategy' are forbidden";

/// Validates `set` (and, on UPDATE, its change from `old`).
pub fn validate(set: &StatefulSet, old: Option<&StatefulSet>) -> ErrorList {
    let mut errs = validate_name(set);
    errs.extend(validate_spec(&set.spec));
    if let Some(old) = old {
        errs.extend(validate_update(&set.spec, &old.spec));
    }
    errs
}

fn validate_name(set: &StatefulSet) -> ErrorList {
    let meta = &set.metadata;
    match (meta.name.as_deref(), meta.generate_name.as_deref()) {
        (Some(n), _) if !n.is_empty() => {
            // `ValidateStatefulSetName` is `NameIsDNSLabel`: no dots, at most 63 characters.
            if is_dns1123_label(n) {
                vec![]
            } else {
                vec![FieldError::invalid(
                    "metadata.name",
                    n,
                    format!("{DNS1123_LABEL_MESSAGE}{DNS1123_LABEL_EXAMPLE}"),
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

/// The spec checks shared by CREATE and UPDATE.
pub fn validate_spec(spec: &StatefulSetSpec) -> ErrorList {
    let mut errs = Vec::new();
    match &spec.pod_management_policy {
        None => errs.push(FieldError::required("spec.podManagementPolicy", "")),
        Some(PodManagementPolicy::OrderedReady | PodManagementPolicy::Parallel) => {}
        Some(PodManagementPolicy::Unknown(s)) if s.is_empty() => {
            errs.push(FieldError::required("spec.podManagementPolicy", ""));
        }
        Some(other) => errs.push(FieldError::invalid(
            "spec.podManagementPolicy",
            other.as_str(),
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    for (i, entry) in spec.reserve_ordinals.iter().enumerate() {
        if let Err(e) = ReservedOrdinals::parse(std::slice::from_ref(entry)) {
            errs.push(FieldError::invalid(
                "spec",
                BadValue::json(&spec.reserve_ordinals),
                format!("{i} th reserve ordinal is invalid: {}", e.reason),
            ));
        }
    }
    if let Some(max) = spec
        .scale_strategy
        .as_ref()
        .and_then(|s| s.max_unavailable.as_ref())
    {
        errs.extend(validate_max_unavailable(
            max,
            spec,
            "spec.scaleStrategy.maxUnavailable",
        ));
    }
    validate_update_strategy(&mut errs, spec);
    if let Some(policy) = &spec.persistent_volume_claim_retention_policy {
        errs.extend(validate_retention(
            policy.when_deleted.as_ref(),
            "spec.persistentVolumeClaimRetentionPolicy.whenDeleted",
        ));
        errs.extend(validate_retention(
            policy.when_scaled.as_ref(),
            "spec.persistentVolumeClaimRetentionPolicy.whenScaled",
        ));
    }
    let replicas = spec.replicas.unwrap_or(1);
    if replicas < 0 {
        errs.push(FieldError::invalid(
            "spec.replicas",
            replicas,
            "must be greater than or equal to 0",
        ));
    }
    validate_selector(&mut errs, spec);
    // As Kubernetes' `ValidatePodTemplateSpecForStatefulSet`, which OpenKruise calls: the
    // template's labels and annotations (at `spec.template.labels`, its path), not its pod
    // spec — a pod the API server refuses fails at creation, as under OpenKruise.
    if let Some(meta) = &spec.template.metadata {
        errs.extend(validate_template_metadata(
            meta,
            &Path::new("spec").child("template"),
        ));
    }
    if let Some(pod) = &spec.template.spec {
        errs.extend(validate_long_running_pod(pod, "StatefulSet"));
    }
    errs
}

fn validate_retention(policy: Option<&RetentionPolicyType>, path: &str) -> Option<FieldError> {
    match policy {
        Some(RetentionPolicyType::Retain | RetentionPolicyType::Delete) => None,
        other => Some(FieldError::not_supported(
            path,
            other.map_or("", RetentionPolicyType::as_str),
            &["Retain", "Delete"],
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

/// `validateMaxUnavailableField`: a non-negative int or an integer percentage, at least 1
/// once scaled against 1 (rounding up), and only int 1 unless Parallel.
fn validate_max_unavailable(max: &IntOrString, spec: &StatefulSetSpec, path: &str) -> ErrorList {
    let mut errs = Vec::new();
    match max {
        IntOrString::Int(i) if *i < 0 => errs.push(FieldError::invalid(
            path,
            render(max),
            "must be greater than or equal to 0",
        )),
        IntOrString::String(s) if value_from_int_or_percent(max, 100, true).is_err() => {
            errs.push(FieldError::invalid(
                path,
                s.as_str(),
                "must be an integer or percentage (e.g '5%')",
            ));
        }
        _ => {}
    }
    match value_from_int_or_percent(max, 1, true) {
        Err(e) => errs.push(FieldError::invalid(
            path,
            render(max),
            format!("getValueFromIntOrPercent error: {e}"),
        )),
        Ok(v) if v < 1 => errs.push(FieldError::invalid(
            path,
            render(max),
            "should not be less than 1",
        )),
        Ok(_) => {}
    }
    if !spec.is_parallel() && *max != IntOrString::Int(1) {
        errs.push(FieldError::invalid(
            path,
            render(max),
            "can only work with Parallel PodManagementPolicyType",
        ));
    }
    errs
}

fn validate_update_strategy(errs: &mut ErrorList, spec: &StatefulSetSpec) {
    let strategy = &spec.update_strategy;
    match &strategy.type_ {
        None => errs.push(FieldError::required("spec.updateStrategy", "")),
        Some(UpdateStrategyType::Unknown(s)) if s.is_empty() => {
            errs.push(FieldError::required("spec.updateStrategy", ""));
        }
        Some(UpdateStrategyType::OnDelete) => {
            if let Some(rolling) = &strategy.rolling_update {
                errs.push(FieldError::invalid(
                    "spec.updateStrategy.rollingUpdate",
                    BadValue::json(rolling),
                    "only allowed for updateStrategy 'RollingUpdate'",
                ));
            }
        }
        Some(UpdateStrategyType::RollingUpdate) => {
            let Some(rolling) = &strategy.rolling_update else {
                return;
            };
            let at = "spec.updateStrategy.rollingUpdate";
            if let Some(p) = rolling.partition
                && p < 0
            {
                errs.push(FieldError::invalid(
                    format!("{at}.partition"),
                    p,
                    "must be greater than or equal to 0",
                ));
            }
            if let Some(m) = rolling.min_ready_seconds {
                if m < 0 {
                    errs.push(FieldError::invalid(
                        format!("{at}.minReadySeconds"),
                        m,
                        "must be greater than or equal to 0",
                    ));
                } else if m > MAX_MIN_READY_SECONDS {
                    errs.push(FieldError::invalid(
                        format!("{at}.minReadySeconds"),
                        m,
                        "must be no more than 300 seconds",
                    ));
                }
            }
            match &rolling.max_unavailable {
                None => errs.push(FieldError::required(format!("{at}.maxUnavailable"), "")),
                Some(max) => errs.extend(validate_max_unavailable(
                    max,
                    spec,
                    &format!("{at}.maxUnavailable"),
                )),
            }
            match &rolling.pod_update_policy {
                None => errs.push(FieldError::required(format!("{at}.podUpdatePolicy"), "")),
                Some(PodUpdatePolicy::Unknown(s)) if s.is_empty() => {
                    errs.push(FieldError::required(format!("{at}.podUpdatePolicy"), ""));
                }
                Some(PodUpdatePolicy::ReCreate) => {}
                Some(p @ (PodUpdatePolicy::InPlaceIfPossible | PodUpdatePolicy::InPlaceOnly)) => {
                    let gates = spec
                        .template
                        .spec
                        .as_ref()
                        .and_then(|s| s.readiness_gates.as_ref());
                    let has_gate = gates
                        .into_iter()
                        .flatten()
                        .any(|g| g.condition_type == INPLACE_UPDATE_READY);
                    if !has_gate {
                        errs.push(FieldError::invalid(
                            "spec.template.spec.readinessGates",
                            BadValue::json(&gates),
                            format!(
                                "must contains {INPLACE_UPDATE_READY} when podUpdatePolicy is {p}"
                            ),
                        ));
                    }
                }
                Some(other) => errs.push(FieldError::invalid(
                    format!("{at}.podUpdatePolicy"),
                    other.as_str(),
                    "must be 'ReCreate', InPlaceIfPossible or 'InPlaceOnly'",
                )),
            }
            if let Some(unordered) = &rolling.unordered_update {
                let path = format!("{at}.unorderedUpdate");
                if !spec.is_parallel() {
                    errs.push(FieldError::required(
                        path.clone(),
                        "unorderedUpdate can only work with Parallel PodManagementPolicyType",
                    ));
                }
                let valid = unordered
                    .priority_strategy
                    .as_ref()
                    .map_or(Ok(()), |p| p.validate());
                if let Err(e) = valid {
                    errs.push(FieldError::required(
                        format!("{path}.priorityStrategy"),
                        e.to_string(),
                    ));
                }
            }
        }
        Some(other) => errs.push(FieldError::invalid(
            "spec.updateStrategy",
            BadValue::json(other.as_str()),
            "must be 'RollingUpdate' or 'OnDelete'",
        )),
    }
}

fn validate_selector(errs: &mut ErrorList, spec: &StatefulSetSpec) {
    let labels = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.as_ref());
    errs.extend(validate_workload_selector(
        spec.selector.as_ref(),
        labels,
        "statefulset",
    ));
}

/// `ValidateStatefulSetUpdate`: only the mutable fields may change; `InPlaceOnly` allows
/// only image changes in the template's spec.
fn validate_update(new: &StatefulSetSpec, old: &StatefulSetSpec) -> ErrorList {
    let mut errs = Vec::new();
    let mut frozen = new.clone();
    frozen.replicas = old.replicas;
    frozen.template = old.template.clone();
    frozen.update_strategy = old.update_strategy.clone();
    frozen.persistent_volume_claim_retention_policy =
        old.persistent_volume_claim_retention_policy.clone();
    frozen.scale_strategy = old.scale_strategy.clone();
    frozen.volume_claim_templates = old.volume_claim_templates.clone();
    frozen.volume_claim_update_strategy = old.volume_claim_update_strategy.clone();
    frozen.reserve_ordinals = old.reserve_ordinals.clone();
    frozen.lifecycle = old.lifecycle.clone();
    frozen.revision_history_limit = old.revision_history_limit;
    frozen.ordinals = old.ordinals.clone();
    if frozen != *old {
        errs.push(FieldError::forbidden("spec", IMMUTABLE_FIELDS_MESSAGE));
    }
    let in_place_only = new
        .update_strategy
        .rolling_update
        .as_ref()
        .is_some_and(|r| r.policy() == PodUpdatePolicy::InPlaceOnly);
    if in_place_only
        && let Some(e) = in_place_only_check(old.template.spec.as_ref(), new.template.spec.as_ref())
    {
        errs.push(e);
    }
    errs
}

/// With `StatefulSetAutoResizePVCGate` and `volumeClaimUpdateStrategy: OnPodRollingUpdate`
/// (OpenKruise's `ValidateVolumeClaimTemplateUpdate`): claim templates can be neither added,
/// removed nor renamed, nor change their storage class or access modes. Whether the
/// StorageClass of a resized template allows expansion is
/// [`validate_claim_template_expansion`]'s (it needs the classes).
pub fn validate_claim_template_update(new: &StatefulSetSpec, old: &StatefulSetSpec) -> ErrorList {
    use super::VolumeClaimUpdateStrategyType;
    if new.volume_claim_update_strategy.type_
        != Some(VolumeClaimUpdateStrategyType::OnPodRollingUpdate)
    {
        return Vec::new();
    }
    if new.volume_claim_templates.len() != old.volume_claim_templates.len() {
        return vec![FieldError::invalid(
            "spec.volumeClaimTemplates",
            BadValue::Omitted,
            "volumeClaimTemplate can not be added or deleted when OnRollingUpdate",
        )];
    }
    for template in &new.volume_claim_templates {
        let name = template.metadata.name.clone().unwrap_or_default();
        let at = format!("spec.volumeClaimTemplates[{name}]");
        let Some(previous) = old
            .volume_claim_templates
            .iter()
            .find(|t| t.metadata.name.as_deref() == Some(name.as_str()))
        else {
            return vec![FieldError::forbidden(
                format!("{at}.name"),
                "volumeClaimTemplate name can not be modified",
            )];
        };
        if !crate::plan::compatible_without_size(previous, template) {
            return vec![FieldError::invalid(
                at,
                BadValue::Omitted,
                "volumeClaimTemplate can not be modified when OnRollingUpdate",
            )];
        }
    }
    Vec::new()
}

/// The annotation that makes a StorageClass the cluster's default.
pub const DEFAULT_STORAGE_CLASS_KEY: &str = "storageclass.kubernetes.io/is-default-class";

/// A claim template whose storage request or limit changed, in an update
/// [`validate_claim_template_update`] allows: its StorageClass must allow expansion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResizedClaimTemplate {
    /// The template's name.
    pub name: String,
    /// Its `storageClassName` (`None`: the cluster's default class).
    pub storage_class: Option<String>,
}

/// The claim templates of an `OnPodRollingUpdate` set whose storage request or limit the
/// update changes (OpenKruise's `isPVCResize`: an absent value counts as zero), in order.
pub fn resized_claim_templates(
    new: &StatefulSetSpec,
    old: &StatefulSetSpec,
) -> Vec<ResizedClaimTemplate> {
    use super::VolumeClaimUpdateStrategyType;
    if new.volume_claim_update_strategy.type_
        != Some(VolumeClaimUpdateStrategyType::OnPodRollingUpdate)
    {
        return Vec::new();
    }
    new.volume_claim_templates
        .iter()
        .filter_map(|template| {
            let previous = old
                .volume_claim_templates
                .iter()
                .find(|t| t.metadata.name == template.metadata.name)?;
            let resized = crate::plan::compatible_without_size(previous, template)
                && crate::plan::storage_size(previous) != crate::plan::storage_size(template);
            resized.then(|| ResizedClaimTemplate {
                name: template.metadata.name.clone().unwrap_or_default(),
                storage_class: template
                    .spec
                    .as_ref()
                    .and_then(|s| s.storage_class_name.clone()),
            })
        })
        .collect()
}

/// The cluster's default StorageClass: of those annotated default, the newest (as
/// Kubernetes picks it).
fn default_storage_class(classes: &[StorageClass]) -> Option<&StorageClass> {
    classes
        .iter()
        .filter(|c| {
            c.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DEFAULT_STORAGE_CLASS_KEY))
                .is_some_and(|v| v == "true")
        })
        .max_by_key(|c| c.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// OpenKruise's StorageClass check of `ValidateVolumeClaimTemplateUpdate`: the class of each
/// resized template (its own, else the cluster's default; no default skips the check) must
/// not set `allowVolumeExpansion: false`. `classes` is the cluster's StorageClasses, or why
/// they could not be read. The first error only, as OpenKruise returns.
pub fn validate_claim_template_expansion(
    resized: &[ResizedClaimTemplate],
    classes: Result<&[StorageClass], &str>,
) -> ErrorList {
    for template in resized {
        let at = format!("spec.volumeClaimTemplates[{}].spec", template.name);
        let class = match (&template.storage_class, classes) {
            (None, Err(_)) => {
                return vec![FieldError::invalid(
                    format!("{at}.storageClassName"),
                    "nil",
                    "can not list storage class",
                )];
            }
            (None, Ok(classes)) => match default_storage_class(classes) {
                Some(class) => class,
                None => continue,
            },
            (Some(name), classes) => {
                let found = classes
                    .ok()
                    .and_then(|all| all.iter().find(|c| c.metadata.name.as_ref() == Some(name)));
                let Some(class) = found else {
                    return vec![FieldError::invalid(
                        format!("{at}.storageClassName"),
                        name,
                        "can not get sc",
                    )];
                };
                class
            }
        };
        if class.allow_volume_expansion == Some(false) {
            return vec![FieldError::forbidden(
                format!("{at}.resources.requests.storage"),
                format!(
                    "storage class {} does not support volume expansion",
                    class.metadata.name.as_deref().unwrap_or_default()
                ),
            )];
        }
    }
    Vec::new()
}

/// `InPlaceOnly` allows only `replace /containers/<i>/image` in `template.spec`.
fn in_place_only_check(old: Option<&PodSpec>, new: Option<&PodSpec>) -> Option<FieldError> {
    let old = serde_json::to_value(old).unwrap_or_default();
    let new = serde_json::to_value(new).unwrap_or_default();
    json_diff(&old, &new).into_iter().find_map(|op| {
        let parts: Vec<&str> = op.path.split('/').collect();
        let is_image = op.op == DiffOpKind::Replace
            && parts.len() == 4
            && parts[1] == "containers"
            && !parts[2].is_empty()
            && parts[2].bytes().all(|b| b.is_ascii_digit())
            && parts[3] == "image";
        let kind = match op.op {
            DiffOpKind::Add => "add",
            DiffOpKind::Remove => "remove",
            DiffOpKind::Replace => "replace",
        };
        (!is_image).then(|| {
            FieldError::forbidden(
                "spec.template",
                format!(
                    "InPlaceOnly update strategy can only update image, but found {kind} {}",
                    op.path
                ),
            )
        })
    })
}

#[cfg(test)]
mod tests;
