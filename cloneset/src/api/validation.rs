//! Validation, as OpenKruise's validating webhook (`/validate-apps-kruise-io-cloneset`) does it,
//! returning every problem as a Kubernetes-style field error instead of failing on the first.
//!
//! Both versions get the same checks (OpenKruise's `v1alpha1` set). Deliberate differences
//! from OpenKruise's weaker `v1beta1` path: `progressDeadlineSeconds` and the `InPlaceOnly`
//! template check are enforced for `v1beta1` too, and the "maxUnavailable and maxSurge should
//! not both be less than 1" check does look at `maxSurge` (OpenKruise's `v1beta1` code shadows
//! it and rejects `maxUnavailable: 0, maxSurge: 1`).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_compat::field::{BadValue, DNS1123_SUBDOMAIN_MESSAGE, Path, is_dns1123_subdomain};
pub use kruise_compat::field::{ErrorList, FieldError, bracketed as to_message};
use kruise_compat::podtemplate::{validate_long_running_pod, validate_pod_template_with_claims};
use kruise_core::api::intstr::scaled_value_from_int_or_percent;
use kruise_core::api::strategy::validate_scatter;
use kruise_core::api::{InPlaceUpdateStrategy, UpdatePriorityStrategy, UpdateScatterTerm};
use kruise_core::inplace::{DiffOpKind, json_diff};
use kruise_core::pods::selector::validate_workload_selector;

use super::{v1alpha1, v1beta1};

/// What the API says about a pod named in a newly added `podsToDelete` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodLookup {
    /// The pod exists, is not terminating and is controlled by this CloneSet.
    Owned,
    /// The lookup failed (not found or another error), with the error text.
    Failed(String),
    /// The pod is being deleted.
    Terminating,
    /// The pod is controlled by something else (or nothing).
    NotOwned,
}

/// Looks up pods for the `podsToDelete` check (`None` skips it, e.g. the controller re-check).
pub type PodLookupFn<'a> = &'a dyn Fn(&str) -> PodLookup;

const MUTABLE_FIELDS_MESSAGE: &str = "updates to cloneset spec for fields other than 'replicas', 'template', 'lifecycle', 'scaleStrategy', 'updateStrategy', 'minReadySeconds', 'progressDeadlineSeconds', 'volumeClaimTemplates' and 'revisionHistoryLimit' are forbidden";

/// A version-independent view of what validation reads.
struct View<'a> {
    meta: &'a ObjectMeta,
    replicas: Option<i32>,
    selector: Option<&'a LabelSelector>,
    template: &'a PodTemplateSpec,
    vct_names: Vec<String>,
    pods_to_delete: &'a [String],
    min_ready_seconds: i32,
    progress_deadline_seconds: Option<i32>,
    in_place_only: bool,
}

/// The [`View`] of a CloneSet of either version (the fields it reads are alike in both).
macro_rules! view {
    ($cs:expr, $in_place_only:expr) => {{
        let cs = $cs;
        View {
            meta: &cs.metadata,
            replicas: cs.spec.replicas,
            selector: cs.spec.selector.as_ref(),
            template: &cs.spec.template,
            vct_names: vct_names(&cs.spec.volume_claim_templates),
            pods_to_delete: &cs.spec.scale_strategy.pods_to_delete,
            min_ready_seconds: cs.spec.min_ready_seconds,
            progress_deadline_seconds: cs.spec.progress_deadline_seconds,
            in_place_only: $in_place_only,
        }
    }};
}

/// Validates a `v1alpha1` CloneSet on create (`old = None`) or update.
pub fn validate_v1alpha1(
    new: &v1alpha1::CloneSet,
    old: Option<&v1alpha1::CloneSet>,
    lookup: Option<PodLookupFn<'_>>,
) -> ErrorList {
    use v1alpha1::CloneSetUpdateStrategyType as T;
    let s = &new.spec.update_strategy;
    let in_place_only = s.type_ == Some(T::InPlaceOnly);
    let view = view!(new, in_place_only);
    let old_view = old.map(|o| view!(o, false));
    let mut errs = validate_common(&view, old_view.as_ref(), lookup);
    let replicas = new.spec.replicas.unwrap_or(1);
    let path = "spec.updateStrategy";
    match &s.type_ {
        Some(T::ReCreate | T::InPlaceIfPossible | T::InPlaceOnly) => {}
        other => errs.push(FieldError::invalid(
            format!("{path}.type"),
            other.as_ref().map_or("", |t| t.as_str()),
            "must be 'ReCreate', InPlaceIfPossible or 'InPlaceOnly'",
        )),
    }
    validate_rolling(
        &mut errs,
        path,
        replicas,
        RollingFields {
            partition: s.partition.as_ref(),
            max_unavailable: s.max_unavailable.as_ref(),
            max_surge: s.max_surge.as_ref(),
            priority: s.priority_strategy.as_ref(),
            scatter: &s.scatter_strategy,
            in_place_only,
            in_place: None,
        },
    );
    errs
}

/// Validates a `v1beta1` CloneSet on create (`old = None`) or update.
pub fn validate_v1beta1(
    new: &v1beta1::CloneSet,
    old: Option<&v1beta1::CloneSet>,
    lookup: Option<PodLookupFn<'_>>,
) -> ErrorList {
    use v1beta1::CloneSetPodUpdatePolicy as P;
    use v1beta1::CloneSetUpdateStrategyType as T;
    let s = &new.spec.update_strategy;
    let in_place_only = s
        .rolling_update
        .as_ref()
        .is_some_and(|r| r.pod_update_policy == Some(P::InPlaceOnly));
    let view = view!(new, in_place_only);
    let old_view = old.map(|o| view!(o, false));
    let mut errs = validate_common(&view, old_view.as_ref(), lookup);
    let replicas = new.spec.replicas.unwrap_or(1);
    let path = "spec.updateStrategy";
    match &s.type_ {
        None | Some(T::RollingUpdate | T::OnDelete) => {}
        Some(T::Unknown(v)) if v.is_empty() => {}
        Some(other) => errs.push(FieldError::invalid(
            format!("{path}.type"),
            other.as_str(),
            "must be 'RollingUpdate' or 'OnDelete'",
        )),
    }
    if let Some(r) = &s.rolling_update {
        let rpath = format!("{path}.rollingUpdate");
        match &r.pod_update_policy {
            None | Some(P::ReCreate | P::InPlaceIfPossible | P::InPlaceOnly) => {}
            Some(P::Unknown(v)) if v.is_empty() => {}
            Some(other) => errs.push(FieldError::invalid(
                format!("{rpath}.podUpdatePolicy"),
                other.as_str(),
                "must be 'ReCreate', 'InPlaceIfPossible' or 'InPlaceOnly'",
            )),
        }
        validate_rolling(
            &mut errs,
            &rpath,
            replicas,
            RollingFields {
                partition: r.partition.as_ref(),
                max_unavailable: r.max_unavailable.as_ref(),
                max_surge: r.max_surge.as_ref(),
                priority: r.priority_strategy.as_ref(),
                scatter: &r.scatter_strategy,
                in_place_only,
                in_place: r.in_place_update_strategy.as_ref(),
            },
        );
    }
    errs
}

fn vct_names(vcts: &[k8s_openapi::api::core::v1::PersistentVolumeClaim]) -> Vec<String> {
    vcts.iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect()
}

fn validate_common(
    view: &View<'_>,
    old: Option<&View<'_>>,
    lookup: Option<PodLookupFn<'_>>,
) -> ErrorList {
    let mut errs = Vec::new();
    // metadata
    match (
        view.meta.name.as_deref(),
        view.meta.generate_name.as_deref(),
    ) {
        (Some(n), _) if !n.is_empty() => {
            if !is_dns1123_subdomain(n) {
                errs.push(FieldError::invalid(
                    "metadata.name",
                    n,
                    DNS1123_SUBDOMAIN_MESSAGE,
                ));
            }
        }
        (_, Some(g)) if !g.is_empty() => {}
        _ => errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        )),
    }
    if let Some(old) = old
        && old.selector != view.selector
    {
        errs.push(FieldError::forbidden("spec", MUTABLE_FIELDS_MESSAGE));
    }
    if let Some(old) = old
        && view.in_place_only
    {
        errs.extend(in_place_only_template_check(
            old.template.spec.as_ref(),
            view.template.spec.as_ref(),
        ));
    }
    let replicas = view.replicas.unwrap_or(1);
    if replicas < 0 {
        errs.push(FieldError::invalid(
            "spec.replicas",
            replicas,
            "must be greater than or equal to 0",
        ));
    }
    errs.extend(validate_workload_selector(
        view.selector,
        view.template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.as_ref()),
        "cloneset",
    ));
    validate_template(&mut errs, view);
    if let Some(deadline) = view.progress_deadline_seconds {
        if deadline < 0 {
            errs.push(FieldError::invalid(
                "spec.progressDeadlineSeconds",
                deadline,
                "must be greater than or equal to 0",
            ));
        }
        if deadline != i32::MAX && deadline <= view.min_ready_seconds {
            errs.push(FieldError::invalid(
                "spec.progressDeadlineSeconds",
                deadline,
                "must be greater than minReadySeconds",
            ));
        }
    }
    // podsToDelete: duplicates, then newly added names must name live pods of this CloneSet.
    let mut seen = BTreeSet::new();
    let dups: BTreeSet<&str> = view
        .pods_to_delete
        .iter()
        .filter(|n| !seen.insert(n.as_str()))
        .map(String::as_str)
        .collect();
    if !dups.is_empty() {
        errs.push(FieldError::invalid(
            "spec.scaleStrategy.podsToDelete",
            BadValue::json(view.pods_to_delete),
            format!("duplicated items {:?}", dups.iter().collect::<Vec<_>>()),
        ));
    } else if let Some(lookup) = lookup {
        let before: BTreeSet<&str> = old
            .map(|o| o.pods_to_delete.iter().map(String::as_str).collect())
            .unwrap_or_default();
        let added: BTreeSet<&str> = view
            .pods_to_delete
            .iter()
            .map(String::as_str)
            .filter(|n| !before.contains(n))
            .collect();
        for name in added {
            let detail = match lookup(name) {
                PodLookup::Owned => continue,
                PodLookup::Failed(e) => format!("find pod {name} failed: {e}"),
                PodLookup::Terminating => format!("find pod {name} already terminating"),
                PodLookup::NotOwned => format!("find pod {name} owner is not this CloneSet"),
            };
            errs.push(FieldError::invalid(
                "spec.scaleStrategy.podsToDelete",
                name,
                detail,
            ));
        }
    }
    errs
}

/// The template as kube-apiserver validates a pod template (`ValidatePodTemplateSpec`, with
/// the volumeClaimTemplates mocked in as volumes, as OpenKruise does), then CloneSet's own
/// rules (restartPolicy, activeDeadlineSeconds).
fn validate_template(errs: &mut Vec<FieldError>, view: &View<'_>) {
    errs.extend(validate_pod_template_with_claims(
        view.template,
        view.vct_names.iter().map(String::as_str),
        &Path::new("spec").child("template"),
    ));
    let Some(spec) = view.template.spec.as_ref() else {
        return;
    };
    errs.extend(validate_long_running_pod(spec, "cloneset"));
}

/// `InPlaceOnly` allows only `replace /containers/<i>/image` in `template.spec`.
pub fn in_place_only_template_check(
    old: Option<&PodSpec>,
    new: Option<&PodSpec>,
) -> Option<FieldError> {
    let old = serde_json::to_value(old).unwrap_or_default();
    let new = serde_json::to_value(new).unwrap_or_default();
    for op in json_diff(&old, &new) {
        let is_image = op.op == DiffOpKind::Replace && {
            let parts: Vec<&str> = op.path.split('/').collect();
            parts.len() == 4
                && parts[0].is_empty()
                && parts[1] == "containers"
                && !parts[2].is_empty()
                && parts[2].bytes().all(|b| b.is_ascii_digit())
                && parts[3] == "image"
        };
        if !is_image {
            let kind = match op.op {
                DiffOpKind::Add => "add",
                DiffOpKind::Remove => "remove",
                DiffOpKind::Replace => "replace",
            };
            return Some(FieldError::forbidden(
                "spec",
                format!(
                    "only allowed to update images in spec for InPlaceOnly, but found {kind} {}",
                    op.path
                ),
            ));
        }
    }
    None
}

struct RollingFields<'a> {
    partition: Option<&'a IntOrString>,
    max_unavailable: Option<&'a IntOrString>,
    max_surge: Option<&'a IntOrString>,
    priority: Option<&'a UpdatePriorityStrategy>,
    scatter: &'a [UpdateScatterTerm],
    in_place_only: bool,
    in_place: Option<&'a InPlaceUpdateStrategy>,
}

/// An int-or-string as Go's `IntOrString.String()` gives it, quoted as Kubernetes quotes
/// string values in field errors.
fn render_int_or_string(v: Option<&IntOrString>) -> BadValue {
    match v {
        None => BadValue::from("<nil>"),
        Some(IntOrString::Int(i)) => BadValue::from(i.to_string()),
        Some(IntOrString::String(s)) => BadValue::from(s),
    }
}

fn validate_rolling(errs: &mut Vec<FieldError>, path: &str, replicas: i32, f: RollingFields<'_>) {
    // Go validates the partition even when nil (defaulting normally fills it): nil fails.
    let partition = match scaled_value_from_int_or_percent(f.partition, replicas, true) {
        Ok(p) => p,
        Err(e) => {
            errs.push(FieldError::invalid(
                format!("{path}.partition"),
                render_int_or_string(f.partition),
                format!("failed GetScaledValueFromIntOrPercent for partition: {e}"),
            ));
            0
        }
    };
    if partition < 0 {
        errs.push(FieldError::invalid(
            format!("{path}.partition"),
            partition,
            "must be greater than or equal to 0",
        ));
    }
    if let Some(p) = f.priority
        && let Err(e) = p.validate()
    {
        errs.push(FieldError::required(
            format!("{path}.priorityStrategy"),
            e.to_string(),
        ));
    }
    if let Err(e) = validate_scatter(f.scatter) {
        errs.push(FieldError::required(
            format!("{path}.scatterStrategy"),
            e.to_string(),
        ));
    }
    let mut max_unavailable = 0;
    if let Some(v) = f.max_unavailable {
        match scaled_value_from_int_or_percent(Some(v), replicas, true) {
            Ok(n) => max_unavailable = n,
            Err(e) => errs.push(FieldError::invalid(
                format!("{path}.maxUnavailable"),
                render_int_or_string(Some(v)),
                format!("failed GetScaledValueFromIntOrPercent for maxUnavailable: {e}"),
            )),
        }
    }
    let mut max_surge = 0;
    if let Some(v) = f.max_surge {
        match scaled_value_from_int_or_percent(Some(v), replicas, true) {
            Ok(n) => max_surge = n,
            Err(e) => errs.push(FieldError::invalid(
                format!("{path}.maxSurge"),
                render_int_or_string(Some(v)),
                format!("failed GetScaledValueFromIntOrPercent for maxSurge: {e}"),
            )),
        }
        if f.in_place_only && max_surge > 0 {
            errs.push(FieldError::invalid(
                format!("{path}.maxSurge"),
                render_int_or_string(Some(v)),
                "can not use maxSurge with strategy type InPlaceOnly",
            ));
        }
    }
    if replicas > 0 && max_unavailable < 1 && max_surge < 1 {
        errs.push(FieldError::invalid(
            format!("{path}.maxUnavailable"),
            render_int_or_string(f.max_unavailable),
            "maxUnavailable and maxSurge should not both be less than 1",
        ));
    }
    if let Some(ip) = f.in_place {
        let ipath = format!("{path}.inPlaceUpdateStrategy");
        match &ip.image_pre_download_parallelism {
            Some(IntOrString::String(s)) if s.ends_with('%') => errs.push(FieldError::invalid(
                format!("{ipath}.imagePreDownloadParallelism"),
                s,
                "imagePreDownloadParallelism does not support percentage value",
            )),
            Some(IntOrString::String(s)) => match s.parse::<i32>() {
                Err(e) => errs.push(FieldError::invalid(
                    format!("{ipath}.imagePreDownloadParallelism"),
                    s,
                    format!("imagePreDownloadParallelism must be a valid integer: {e}"),
                )),
                Ok(n) if n < 0 => errs.push(FieldError::invalid(
                    format!("{ipath}.imagePreDownloadParallelism"),
                    s,
                    "imagePreDownloadParallelism must be non-negative",
                )),
                Ok(_) => {}
            },
            Some(IntOrString::Int(n)) if *n < 0 => errs.push(FieldError::invalid(
                format!("{ipath}.imagePreDownloadParallelism"),
                n,
                "imagePreDownloadParallelism must be non-negative",
            )),
            _ => {}
        }
        for (name, v) in [
            (
                "imagePreDownloadTimeoutSeconds",
                ip.image_pre_download_timeout_seconds,
            ),
            (
                "imagePreDownloadMinUpdatedReadyPods",
                ip.image_pre_download_min_updated_ready_pods,
            ),
        ] {
            if let Some(v) = v
                && v < 0
            {
                errs.push(FieldError::invalid(
                    format!("{ipath}.{name}"),
                    v,
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests;
