//! SidecarSet validation as a list of `kruise_compat::field` errors (Kubernetes-style field
//! paths and reasons), following OpenKruise's `pkg/webhook/sidecarset/validating`.
//!
//! Checked: name (`^[a-zA-Z0-9-]+$`, at most 63); canary annotations (base not itself,
//! immutable, base exists and is not a canary, canary must be `NotUpdate`); native-sidecar
//! init containers need `NotUpdate`; `selector` required, valid and non-empty;
//! `namespaceSelector` valid and non-empty; `injectionStrategy.revision` names a revision or a
//! custom version, policy `Always`/`Partial`; for RollingUpdate: partition with selector
//! rejected, partition/maxUnavailable non-negative int or percent, priority and scatter terms;
//! at least one container; `podInjectPolicy`, `shareVolumePolicy`; transferEnv `fieldRef`
//! paths; the containers and volumes as kube-apiserver validates them in a pod
//! (`kruise_compat::podtemplate`: names, images, ports, env, mounts naming SidecarSet volumes,
//! resources, probes, volume names and sources); patchPodMetadata annotations, policy and
//! duplicate keys; on update: `upgradeType` of a container immutable and no new container
//! names; conflicts with other SidecarSets whose namespaces and selectors overlap (same
//! container / init container name, same volume name with other content, annotations patched
//! by both unless neither is Overwrite).
//!
//! kruise-rs additions (deliberate, see the crate report): a HotUpgrade container needs a
//! `hotUpgradeEmptyImage` different from its image, its `<n>-1`/`<n>-2` names must not clash
//! with another container, and `upgradeType` must be ColdUpgrade or HotUpgrade.
//!
//! The patchPodMetadata whitelist (the `kruise-configuration` ConfigMap) is checked by
//! [`patch_metadata_whitelist_error`], whose result the admission handler passes in.
//!
//! Not checked here: that an injection revision exists (needs ControllerRevisions).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_compat::field::{BadValue, Path, is_dns1123_label};
pub use kruise_compat::field::{ErrorList, FieldError, aggregate};
use kruise_compat::podtemplate::validate_pod_spec;
use kruise_core::api::strategy::validate_scatter;

use super::v1beta1::SidecarSet;
use super::{
    PodInjectPolicy, SIDECARSET_BASE_ANNOTATION, ShareVolumePolicyType, SidecarContainer,
    SidecarContainerUpgradeType, SidecarSetInjectRevisionPolicy, SidecarSetPatchPolicy,
    SidecarSetUpdateStrategyType, hot_upgrade_container_names, is_native_sidecar,
};
use crate::inject::{canary_base, compile_name_regex, validate_expression};

const NAME_MAX_LEN: usize = 63;

fn is_label_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn is_qualified_name(s: &str) -> bool {
    match s.rsplit_once('/') {
        Some((prefix, name)) => {
            !prefix.is_empty()
                && prefix.len() <= 253
                && prefix.split('.').all(is_dns1123_label)
                && is_label_name(name)
        }
        None => is_label_name(s),
    }
}

fn is_label_value(s: &str) -> bool {
    s.is_empty() || is_label_name(s)
}

/// `ValidateLabelSelector` plus OpenKruise's "empty selector is not valid for sidecarset".
fn validate_selector(sel: &LabelSelector, path: &str, out: &mut ErrorList) {
    for (k, v) in sel.match_labels.iter().flatten() {
        if !is_qualified_name(k) {
            out.push(FieldError::invalid(format!("{path}.matchLabels"), k, "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"));
        }
        if !is_label_value(v) {
            out.push(FieldError::invalid(format!("{path}.matchLabels"), v, "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"));
        }
    }
    for (i, e) in sel.match_expressions.iter().flatten().enumerate() {
        let p = format!("{path}.matchExpressions[{i}]");
        let values = e.values.as_deref().unwrap_or(&[]);
        match e.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => out.push(FieldError::required(
                format!("{p}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => out.push(FieldError::invalid(
                format!("{p}.values"),
                BadValue::Omitted,
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => out.push(FieldError::invalid(
                format!("{p}.operator"),
                other,
                "not a valid selector operator",
            )),
        }
        if !is_qualified_name(&e.key) {
            out.push(FieldError::invalid(format!("{p}.key"), &e.key, "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"));
        }
    }
    let empty = sel.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && sel.match_expressions.as_ref().is_none_or(|e| e.is_empty());
    if empty {
        out.push(FieldError::invalid(
            path,
            BadValue::raw("{}"),
            "empty selector is not valid for sidecarset.",
        ));
    }
}

/// Kubernetes' `ValidatePositiveIntOrPercent`.
fn validate_positive_int_or_percent(v: &IntOrString, path: &str, out: &mut ErrorList) {
    match v {
        IntOrString::Int(i) if *i < 0 => out.push(FieldError::invalid(
            path,
            *i,
            "must be greater than or equal to 0",
        )),
        IntOrString::Int(_) => {}
        IntOrString::String(s) => {
            let ok = s
                .strip_suffix('%')
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
            if !ok {
                out.push(FieldError::invalid(path, s, "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"));
            }
        }
    }
}

/// Whether two selectors can select a common object (OpenKruise's `IsSelectorOverlapping`,
/// a syntactic check on `In`/`Exists`/`NotIn`/`DoesNotExist`/matchLabels).
pub fn selectors_overlap(a: &LabelSelector, b: &LabelSelector) -> bool {
    !(is_disjoint(a, b) || is_disjoint(b, a))
}

fn is_disjoint(a: &LabelSelector, b: &LabelSelector) -> bool {
    // key -> allowed values; None = any value (Exists).
    let mut allowed: BTreeMap<&str, Option<Vec<&str>>> = BTreeMap::new();
    for (k, v) in a.match_labels.iter().flatten() {
        allowed.insert(k, Some(vec![v.as_str()]));
    }
    for e in a.match_expressions.iter().flatten() {
        match e.operator.as_str() {
            "In" => {
                let entry = allowed.entry(&e.key).or_insert_with(|| Some(Vec::new()));
                if let Some(vals) = entry {
                    vals.extend(e.values.iter().flatten().map(String::as_str));
                }
            }
            "Exists" => {
                allowed.insert(&e.key, None);
            }
            _ => {}
        }
    }
    for (k, v) in b.match_labels.iter().flatten() {
        if let Some(Some(vals)) = allowed.get(k.as_str())
            && !vals.contains(&v.as_str())
        {
            return true;
        }
    }
    for e in b.match_expressions.iter().flatten() {
        let got = allowed.get(e.key.as_str());
        let values: Vec<&str> = e.values.iter().flatten().map(String::as_str).collect();
        match e.operator.as_str() {
            "In" => {
                if let Some(Some(vals)) = got
                    && !vals.iter().any(|v| values.contains(v))
                {
                    return true;
                }
            }
            "NotIn" => {
                if let Some(Some(vals)) = got
                    && vals.iter().all(|v| values.contains(v))
                {
                    return true;
                }
            }
            "Exists" if got.is_none() => return true,
            "DoesNotExist" if got.is_some() => return true,
            _ => {}
        }
    }
    false
}

fn validate_transfer_env_field_ref(
    path: &str,
    out: &mut ErrorList,
    field_path: &str,
    api_version: Option<&str>,
) {
    let supported = if field_path == "metadata.name" {
        true
    } else if let Some(inner) = field_path.strip_suffix("']") {
        match inner.split_once("['") {
            Some(("metadata.labels", key)) => {
                if !is_qualified_name(key) {
                    out.push(FieldError::invalid(
                        format!("{path}.fieldPath"),
                        field_path,
                        "invalid key subscript",
                    ));
                }
                true
            }
            Some(("metadata.annotations", key)) => {
                if !is_qualified_name(&key.to_lowercase()) {
                    out.push(FieldError::invalid(
                        format!("{path}.fieldPath"),
                        field_path,
                        "invalid key subscript",
                    ));
                }
                true
            }
            _ => false,
        }
    } else {
        false
    };
    if !supported {
        out.push(FieldError::not_supported(
            format!("{path}.fieldPath"),
            field_path,
            &["metadata.annotations", "metadata.labels", "metadata.name"],
        ));
    }
    if api_version.is_some_and(|v| !v.is_empty() && v != "v1") {
        out.push(FieldError::invalid(
            format!("{path}.apiVersion"),
            api_version.unwrap_or_default(),
            "unsupported version",
        ));
    }
}

fn validate_containers(set: &SidecarSet, out: &mut ErrorList) {
    let spec = &set.spec;
    for (i, c) in spec.containers.iter().enumerate() {
        if !matches!(
            c.pod_inject_policy,
            Some(PodInjectPolicy::BeforeAppContainer | PodInjectPolicy::AfterAppContainer)
        ) {
            out.push(FieldError::invalid(
                "spec.container.podInjectPolicy",
                c.pod_inject_policy
                    .as_ref()
                    .map(|p| p.as_str())
                    .unwrap_or(""),
                "unsupported pod inject policy",
            ));
        }
        if !matches!(
            c.share_volume_policy.type_,
            Some(ShareVolumePolicyType::Enabled | ShareVolumePolicyType::Disabled)
        ) {
            out.push(FieldError::invalid(
                "spec.container.shareVolumePolicy",
                c.share_volume_policy
                    .type_
                    .as_ref()
                    .map(|p| p.as_str())
                    .unwrap_or(""),
                "unsupported share volume policy",
            ));
        }
        for t in &c.transfer_env {
            if let Some(fr) = t
                .source_container_name_from
                .as_ref()
                .and_then(|s| s.field_ref.as_ref())
            {
                validate_transfer_env_field_ref(
                    &format!("spec[{i}].transferEnv.fieldRef"),
                    out,
                    &fr.field_path,
                    fr.api_version.as_deref(),
                );
            }
        }
    }
    for (i, c) in spec.init_containers.iter().enumerate() {
        if c.resources_policy.is_some() {
            if !is_native_sidecar(&c.container) {
                out.push(FieldError::invalid(
                    format!("spec[{i}].resourcesPolicy"),
                    BadValue::Omitted,
                    "resourcesPolicy is only supported for containers with RestartPolicy Always",
                ));
            }
            validate_resources_policy(c, &format!("spec[{i}].resourcesPolicy"), out);
        }
    }
    for (i, c) in spec.containers.iter().enumerate() {
        if c.resources_policy.is_some() {
            validate_resources_policy(c, &format!("spec[{i}].resourcesPolicy"), out);
        }
    }
    // As the containers of a pod: OpenKruise validates them inside a fake pod holding the
    // SidecarSet's volumes (and a placeholder container when there are only init containers).
    let sidecars = |list: &[SidecarContainer]| -> Vec<Container> {
        list.iter().map(|c| c.container.clone()).collect()
    };
    let containers = if spec.containers.is_empty() {
        vec![Container {
            name: "test".into(),
            image: Some("busybox".into()),
            ..Container::default()
        }]
    } else {
        sidecars(&spec.containers)
    };
    let fake_pod = PodSpec {
        init_containers: Some(sidecars(&spec.init_containers)),
        containers,
        volumes: Some(spec.volumes.clone()),
        ..PodSpec::default()
    };
    out.extend(validate_pod_spec(&fake_pod, &Path::new("spec")));
    // kruise-rs: a hot-upgrade sidecar occupies `<n>-1` and `<n>-2` in the pod; those may not
    // clash with another container (plain names clashing with each other are reported above).
    let mut plain_names = BTreeSet::new();
    let mut hot_names = BTreeSet::new();
    let lists: [(&str, &[SidecarContainer]); 2] = [
        ("spec.initContainers", &spec.init_containers),
        ("spec.containers", &spec.containers),
    ];
    for (list, containers) in lists {
        for (i, c) in containers.iter().enumerate() {
            let p = format!("{list}[{i}]");
            let name = c.name();
            if c.is_hot_upgrade() {
                let (a, b) = hot_upgrade_container_names(name);
                for n in [a, b] {
                    if !name.is_empty()
                        && (plain_names.contains(&n) || !hot_names.insert(n.clone()))
                    {
                        out.push(FieldError::duplicate(format!("{p}.name"), &n));
                    }
                }
            } else {
                if hot_names.contains(name) {
                    out.push(FieldError::duplicate(format!("{p}.name"), name));
                }
                plain_names.insert(name.to_string());
            }
            validate_hot_upgrade(c, &p, out);
        }
    }
}

/// OpenKruise's `validateResourcesPolicy`.
fn validate_resources_policy(c: &SidecarContainer, path: &str, out: &mut ErrorList) {
    let Some(policy) = c.resources_policy.as_ref() else {
        return;
    };
    let resources = c.container.resources.as_ref();
    let has_resources = resources.is_some_and(|r| {
        r.limits.as_ref().is_some_and(|l| !l.is_empty())
            || r.requests.as_ref().is_some_and(|l| !l.is_empty())
    });
    if has_resources {
        out.push(FieldError::invalid(
            path,
            BadValue::Omitted,
            "resourcesPolicy and resources cannot be configured together",
        ));
        return;
    }
    let regex = &policy.target_containers_name_regex;
    if regex.is_empty() {
        out.push(FieldError::required(
            format!("{path}.targetContainersNameRegex"),
            "invalid empty regex",
        ));
    } else if let Err(e) = compile_name_regex(regex) {
        out.push(FieldError::invalid(
            format!("{path}.targetContainersNameRegex"),
            regex,
            format!("invalid regex pattern: {e}"),
        ));
    }
    let expr = &policy.resources_expr;
    if expr.limits.is_none() && expr.requests.is_none() {
        out.push(FieldError::invalid(
            format!("{path}.resourcesExpr"),
            BadValue::Omitted,
            "at least one of limits or requests must be configured",
        ));
        return;
    }
    for (kind, exprs) in [("limits", &expr.limits), ("requests", &expr.requests)] {
        let Some(exprs) = exprs else { continue };
        for (variable, text) in [("cpu", &exprs.cpu), ("memory", &exprs.memory)] {
            if text.is_empty() {
                continue;
            }
            if let Err(e) = validate_expression(text, variable) {
                out.push(FieldError::invalid(
                    format!("{path}.resourcesExpr.{kind}.{variable}"),
                    text,
                    e,
                ));
            }
        }
    }
}

/// kruise-rs: hot-upgrade fields must make an upgrade possible.
fn validate_hot_upgrade(c: &SidecarContainer, path: &str, out: &mut ErrorList) {
    let us = &c.upgrade_strategy;
    if let Some(SidecarContainerUpgradeType::Unknown(t)) = &us.upgrade_type {
        out.push(FieldError::not_supported(
            format!("{path}.upgradeStrategy.upgradeType"),
            t,
            &["ColdUpgrade", "HotUpgrade"],
        ));
    }
    if c.is_hot_upgrade() {
        if us.hot_upgrade_empty_image.is_empty() {
            out.push(FieldError::required(
                format!("{path}.upgradeStrategy.hotUpgradeEmptyImage"),
                "hotUpgradeEmptyImage is required for HotUpgrade",
            ));
        } else if c.container.image.as_deref() == Some(us.hot_upgrade_empty_image.as_str()) {
            out.push(FieldError::invalid(
                format!("{path}.upgradeStrategy.hotUpgradeEmptyImage"),
                &us.hot_upgrade_empty_image,
                "hotUpgradeEmptyImage must differ from the container image",
            ));
        }
    }
}

fn validate_canary(
    set: &SidecarSet,
    old: Option<&SidecarSet>,
    others: &[SidecarSet],
    out: &mut ErrorList,
) {
    let Some(base) = canary_base(set) else { return };
    let name = set.metadata.name.as_deref().unwrap_or("");
    let shown = || BadValue::json(&set.metadata.annotations);
    if base == name {
        out.push(FieldError::invalid(
            "metadata",
            shown(),
            "base sidecarSet cannot be itself",
        ));
    }
    if let Some(old) = old {
        let old_base = old
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SIDECARSET_BASE_ANNOTATION))
            .map(String::as_str)
            .unwrap_or("");
        if old_base != base {
            out.push(FieldError::invalid(
                "metadata",
                shown(),
                format!("annotations[{SIDECARSET_BASE_ANNOTATION}] is immutable"),
            ));
        }
    }
    match others.iter().find(|o| o.metadata.name.as_deref() == Some(base)) {
        None => out.push(FieldError::invalid("metadata", shown(), format!("fetch base sidecarSet[{base}] failed: sidecarsets.apps.kruise.io \"{base}\" not found"))),
        Some(b) if canary_base(b).is_some() => out.push(FieldError::invalid("metadata", shown(), "base sidecarSet cannot be canary")),
        Some(_) => {}
    }
    if set.spec.update_strategy.type_ != Some(SidecarSetUpdateStrategyType::NotUpdate) {
        out.push(FieldError::invalid(
            "metadata",
            shown(),
            "RollingUpdate is not supported for canary sidecarSet",
        ));
    }
}

fn validate_update_conflict(new: &SidecarSet, old: &SidecarSet, out: &mut ErrorList) {
    let old_types: BTreeMap<&str, Option<&SidecarContainerUpgradeType>> = old
        .spec
        .containers
        .iter()
        .map(|c| (c.name(), c.upgrade_strategy.upgrade_type.as_ref()))
        .collect();
    for c in &new.spec.containers {
        match old_types.get(c.name()) {
            Some(Some(t)) if c.upgrade_strategy.upgrade_type.as_ref() != Some(*t) => {
                out.push(FieldError::invalid(
                    "spec.containers.upgradeStrategy.upgradeType",
                    c.name(),
                    format!("container {} upgradeType is immutable", c.name()),
                ))
            }
            Some(_) => {}
            None => out.push(FieldError::invalid(
                "spec.containers.name",
                c.name(),
                format!("container {} is not found", c.name()),
            )),
        }
    }
}

fn validate_conflicts(set: &SidecarSet, others: &[SidecarSet], out: &mut ErrorList) {
    let name = set.metadata.name.as_deref().unwrap_or("");
    let base = canary_base(set);
    let Some(selector) = set.spec.selector.as_ref() else {
        return;
    };
    let mut init_in_others: BTreeMap<&str, &str> = BTreeMap::new();
    let mut containers_in_others: BTreeMap<&str, &str> = BTreeMap::new();
    let mut volumes_in_others: BTreeMap<&str, &SidecarSet> = BTreeMap::new();
    let mut annotations_in_others: BTreeMap<&str, (&str, &SidecarSetPatchPolicy)> = BTreeMap::new();
    for other in others {
        let other_name = other.metadata.name.as_deref().unwrap_or("");
        if other_name == name || base == Some(other_name) {
            continue;
        }
        let Some(other_selector) = other.spec.selector.as_ref() else {
            continue;
        };
        let ns_overlap = match (&set.spec.namespace_selector, &other.spec.namespace_selector) {
            (Some(a), Some(b)) => selectors_overlap(a, b),
            _ => true,
        };
        if !ns_overlap || !selectors_overlap(selector, other_selector) {
            continue;
        }
        for c in &other.spec.init_containers {
            init_in_others.insert(c.name(), other_name);
        }
        for c in &other.spec.containers {
            containers_in_others.insert(c.name(), other_name);
        }
        for v in &other.spec.volumes {
            volumes_in_others.insert(&v.name, other);
        }
        for p in &other.spec.patch_pod_metadata {
            let Some(policy) = p.patch_policy.as_ref() else {
                continue;
            };
            if *policy == SidecarSetPatchPolicy::Retain {
                continue;
            }
            for k in p.annotations.keys() {
                annotations_in_others.insert(k, (other_name, policy));
            }
        }
    }
    for (list, in_others) in [
        (&set.spec.init_containers, &init_in_others),
        (&set.spec.containers, &containers_in_others),
    ] {
        for c in list.iter() {
            if let Some(other) = in_others.get(c.name()) {
                out.push(FieldError::invalid(
                    "spec.containers",
                    c.name(),
                    format!("container {} already exist in {other}", c.name()),
                ));
            }
        }
    }
    for v in &set.spec.volumes {
        if let Some(other) = volumes_in_others.get(v.name.as_str())
            && other.spec.volumes.iter().find(|o| o.name == v.name) != Some(v)
        {
            out.push(FieldError::invalid(
                "spec.volumes",
                &v.name,
                format!(
                    "volume {} is in conflict with sidecarset {}",
                    v.name,
                    other.metadata.name.as_deref().unwrap_or("")
                ),
            ));
        }
    }
    for p in &set.spec.patch_pod_metadata {
        let Some(policy) = p.patch_policy.as_ref() else {
            continue;
        };
        if *policy == SidecarSetPatchPolicy::Retain {
            continue;
        }
        for k in p.annotations.keys() {
            if let Some((other, other_policy)) = annotations_in_others.get(k.as_str())
                && (*policy == SidecarSetPatchPolicy::Overwrite
                    || **other_policy == SidecarSetPatchPolicy::Overwrite)
            {
                out.push(FieldError::invalid(
                    "spec.patchPodMetadata",
                    k,
                    format!("annotation {k} is in conflict with sidecarset {other}"),
                ));
            }
        }
    }
}

/// The `kruise-configuration` ConfigMap key holding the patchPodMetadata whitelist.
pub const PATCH_METADATA_WHITELIST_KEY: &str = "SidecarSet_PatchPodMetadata_WhiteList";
/// The ConfigMap OpenKruise reads its configuration from, in the kruise namespace.
pub const KRUISE_CONFIGURATION: &str = "kruise-configuration";

/// `SidecarSet_PatchPodMetadata_WhiteList`: rules allowing annotation keys (Go regexps) to
/// the SidecarSets a rule's selector matches (every SidecarSet without a selector).
#[derive(Debug, Default, serde::Deserialize)]
struct PatchMetadataWhitelist {
    #[serde(default)]
    rules: Vec<PatchMetadataWhiteRule>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct PatchMetadataWhiteRule {
    #[serde(default)]
    selector: Option<LabelSelector>,
    #[serde(default)]
    allowed_annotation_key_exprs: Vec<String>,
}

/// OpenKruise's `ValidateSidecarSetPatchMetadataWhitelist`: why `set`'s patchPodMetadata is
/// not allowed by `configuration` (the `kruise-configuration` data, empty when the ConfigMap
/// is absent); `defaults_allowed` is the `SidecarSetPatchPodMetadataDefaultsAllowed` gate,
/// which allows every key when no whitelist (or no rule for the SidecarSet) exists.
pub fn patch_metadata_whitelist_error(
    set: &SidecarSet,
    configuration: &BTreeMap<String, String>,
    defaults_allowed: bool,
) -> Option<String> {
    if set.spec.patch_pod_metadata.is_empty() {
        return None;
    }
    let Some(raw) = configuration.get(PATCH_METADATA_WHITELIST_KEY) else {
        return (!defaults_allowed).then(|| "SidecarSet patch metadata whitelist not found".into());
    };
    let whitelist: PatchMetadataWhitelist = match serde_json::from_str(raw) {
        Ok(w) => w,
        Err(e) => return Some(e.to_string()),
    };
    let labels = set.metadata.labels.clone().unwrap_or_default();
    let mut allowed = Vec::new();
    for rule in &whitelist.rules {
        if let Some(selector) = &rule.selector {
            match kruise_core::pods::selector::selector_matches(selector, &labels) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => return Some(e.to_string()),
            }
        }
        for expr in &rule.allowed_annotation_key_exprs {
            match compile_name_regex(expr) {
                Ok(r) => allowed.push(r),
                Err(e) => return Some(e.to_string()),
            }
        }
    }
    if allowed.is_empty() {
        return (!defaults_allowed)
            .then(|| "sidecarSet patch metadata annotation is not allowed".into());
    }
    // Go ranges over the annotations map in random order; the first key by name is reported.
    set.spec
        .patch_pod_metadata
        .iter()
        .flat_map(|p| p.annotations.keys())
        .find(|key| !allowed.iter().any(|r| r.is_match(key)))
        .map(|key| format!("sidecarSet patch metadata annotation({key}) is not allowed"))
}

/// Validates a (defaulted) SidecarSet; `old` on UPDATE; `others` are the SidecarSets in the
/// cluster (the object itself among them is ignored). Conflicts are checked only when
/// everything else is valid, as OpenKruise does. The patchPodMetadata whitelist is not
/// checked (see [`validate_sidecar_set_admission`]).
pub fn validate_sidecar_set(
    set: &SidecarSet,
    old: Option<&SidecarSet>,
    others: &[SidecarSet],
) -> ErrorList {
    validate_sidecar_set_admission(set, old, others, None)
}

/// [`validate_sidecar_set`] as the webhook validates: `whitelist_error` is what
/// [`patch_metadata_whitelist_error`] (or reading the ConfigMap) found, reported at
/// `spec.patchPodMetadata` where OpenKruise reports it.
pub fn validate_sidecar_set_admission(
    set: &SidecarSet,
    old: Option<&SidecarSet>,
    others: &[SidecarSet],
    whitelist_error: Option<String>,
) -> ErrorList {
    let mut out = Vec::new();
    let name = set.metadata.name.as_deref().unwrap_or("");
    if name.is_empty() {
        out.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            out.push(FieldError::invalid("metadata.name", name, "sidecarset name must consist of alphanumeric characters or '-' (e.g. 'example-com', regex used for validation is '^[a-zA-Z0-9\\-]+$')"));
        }
        if name.len() > NAME_MAX_LEN {
            out.push(FieldError::invalid(
                "metadata.name",
                name,
                format!("must be no more than {NAME_MAX_LEN} characters"),
            ));
        }
    }
    validate_canary(set, old, others, &mut out);
    let spec = &set.spec;
    let rolling = spec.update_strategy.type_ == Some(SidecarSetUpdateStrategyType::RollingUpdate);
    for c in &spec.init_containers {
        if is_native_sidecar(&c.container) && rolling {
            out.push(FieldError::required(
                "spec.updateStrategy",
                "The initContainer in-place upgrade is not currently supported.",
            ));
        }
    }
    match &spec.selector {
        None => out.push(FieldError::required(
            "spec.selector",
            "no selector defined for SidecarSet",
        )),
        Some(sel) => validate_selector(sel, "spec.selector", &mut out),
    }
    if let Some(sel) = &spec.namespace_selector {
        validate_selector(sel, "spec.namespaceSelector", &mut out);
    }
    if let Some(r) = &spec.injection_strategy.revision {
        if r.revision_name.is_none() && r.custom_version.is_none() {
            out.push(FieldError::invalid(
                "revision",
                BadValue::Omitted,
                "revisionName and customVersion cannot be empty simultaneously",
            ));
        }
        if let Some(SidecarSetInjectRevisionPolicy::Unknown(p)) = &r.policy
            && !p.is_empty()
        {
            out.push(FieldError::invalid(
                "revision.policy",
                p,
                format!("Invalid policy {p}, supported: [Always, Partial]"),
            ));
        }
    }
    let us = &spec.update_strategy;
    if rolling {
        let partition_set = match &us.partition {
            Some(IntOrString::Int(i)) => *i != 0,
            Some(IntOrString::String(_)) => true,
            None => false,
        };
        if partition_set && us.selector.is_some() {
            out.push(FieldError::invalid(
                "updateStrategy",
                BadValue::Omitted,
                "Partition and Selector cannot be used together",
            ));
        }
        if let Some(sel) = &us.selector {
            validate_selector(sel, "spec.updateStrategy.selector", &mut out);
        }
        if let Some(p) = &us.partition {
            validate_positive_int_or_percent(p, "spec.updateStrategy.partition", &mut out);
        }
        if let Some(m) = &us.max_unavailable {
            validate_positive_int_or_percent(m, "spec.updateStrategy.maxUnavailable", &mut out);
        }
        if let Some(Err(e)) = us.priority_strategy.as_ref().map(|p| p.validate()) {
            out.push(FieldError::required(
                "spec.updateStrategy.priorityStrategy",
                e.to_string(),
            ));
        }
        if let Err(e) = validate_scatter(&us.scatter_strategy) {
            out.push(FieldError::required(
                "spec.updateStrategy.scatterStrategy",
                e.to_string(),
            ));
        }
    }
    if spec.init_containers.is_empty() && spec.containers.is_empty() {
        out.push(FieldError::required(
            "spec",
            "no initContainer or container defined for SidecarSet",
        ));
    } else {
        validate_containers(set, &mut out);
    }
    if let Some(error) = whitelist_error {
        out.push(FieldError::required("spec.patchPodMetadata", error));
    }
    let mut keys = BTreeSet::new();
    for p in &spec.patch_pod_metadata {
        if p.annotations.is_empty() {
            out.push(FieldError::required(
                "spec.patchPodMetadata",
                "no annotations defined for SidecarSet",
            ));
        }
        for k in p.annotations.keys() {
            if !is_qualified_name(k) {
                out.push(FieldError::invalid("patchPodMetadata.annotations", k, "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"));
            }
            if !keys.insert(k.as_str()) {
                out.push(FieldError::required(
                    "spec.patchPodMetadata",
                    format!("patch annotation[{k}] already exist"),
                ));
            }
        }
        match &p.patch_policy {
            None => out.push(FieldError::required(
                "spec.patchPodMetadata",
                "no patchPolicy defined for patchPodMetadata",
            )),
            Some(SidecarSetPatchPolicy::Unknown(v)) => out.push(FieldError::not_supported(
                "spec.patchPodMetadata.patchPolicy",
                v,
                &["Retain", "Overwrite", "MergePatchJson"],
            )),
            Some(_) => {}
        }
    }
    if let Some(old) = old {
        validate_update_conflict(set, old, &mut out);
    }
    if out.is_empty() {
        validate_conflicts(set, others, &mut out);
    }
    out
}

#[cfg(test)]
mod tests;
