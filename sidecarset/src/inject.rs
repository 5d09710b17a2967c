//! SidecarSet injection at pod creation: a pure function of the pod, its namespace's labels,
//! the SidecarSets, the time and a random sample — what OpenKruise's pod mutating webhook does
//! in `pkg/webhook/pod/mutating/sidecarset.go` with `pkg/control/sidecarcontrol`:
//!
//! 1. Candidates: SidecarSets whose `namespaceSelector` names the pod's namespace through the
//!    `kubernetes.io/metadata.name` label (`matchLabels` or an `In` expression), then the
//!    cluster-scoped ones (every other SidecarSet); each group by name. (OpenKruise lists them
//!    from an informer index, whose order inside a group Go does not define; by name is ours.)
//! 2. Skipped: `injectionStrategy.paused`; a `namespaceSelector` not matching the namespace's
//!    labels (or no namespace); a selector that is absent or empty.
//! 3. Revision: `injectionStrategy.revision` picks a historical SidecarSet through
//!    [`RevisionHistory`] (`Always`; `Partial`: pods outside `updateStrategy.selector`, else
//!    with the percent-partition probability, sampled from [`InjectInput::random`]).
//! 4. A canary SidecarSet (`apps.kruise.io/sidecarset-canary: "true"` with a base) removes its
//!    base from the matched list.
//! 5. `patchPodMetadata` of every matched SidecarSet (Retain / Overwrite / MergePatchJson).
//! 6. Per SidecarSet: init containers, then containers; each gets the shared volume mounts
//!    (`shareVolumePolicy`) and the env their `subPathExpr` names, `IS_INJECTED=true`, the
//!    `transferEnv` vars, shared volume devices; the SidecarSet volumes its mounts/devices name;
//!    hot-upgrade sidecars become `<n>-1` (image) and `<n>-2` (`hotUpgradeEmptyImage`) with
//!    `SIDECARSET_VERSION[_ALT]` env and version annotations.
//! 7. Merge: init sidecars by name, AfterAppContainer appended / BeforeAppContainer
//!    prepended; containers replace a same-name pod container in place, else BeforeApp
//!    prepended and AfterApp appended in SidecarSet order; volumes (pod's win) and
//!    imagePullSecrets (by name) merged; annotations `kruise.io/sidecarset-hash`,
//!    `…-hash-without-image`, `…-injected-list` (and the hot-upgrade ones) written.
//!
//! Not done here (see the crate report): `resourcesPolicy` (sidecar resources computed from
//! the app containers) — containers with one are injected with their resources unchanged.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, LocalObjectReference, ObjectFieldSelector, Pod, Volume,
    VolumeDevice, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_common::pods::selector::{SelectorError, selector_matches};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::v1beta1::SidecarSet;
use crate::api::{
    LABEL_METADATA_NAME, PodInjectPolicy, SIDECAR_ENV_KEY, SIDECARSET_BASE_ANNOTATION,
    SIDECARSET_CANARY_ANNOTATION, SIDECARSET_HASH_ANNOTATION,
    SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION, SIDECARSET_INJECTED_LIST_ANNOTATION,
    SIDECARSET_VERSION_ALT_ENV_KEY, SIDECARSET_VERSION_ENV_KEY,
    SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION, SidecarContainer,
    SidecarSetInjectRevision, SidecarSetInjectRevisionPolicy, SidecarSetPatchPodMetadata,
    SidecarSetPatchPolicy, hot_upgrade_container_names, is_native_sidecar, version_alt_annotation,
    version_annotation,
};

/// Why a pod could not be injected. The webhook denies the pod with this message, as
/// OpenKruise's does (HTTP 500 there).
#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    /// A SidecarSet selector is invalid.
    #[error("SidecarSet {sidecar_set}: invalid selector: {source}")]
    Selector {
        /// The SidecarSet.
        sidecar_set: String,
        /// Why.
        source: SelectorError,
    },
    /// An existing hash annotation on the pod does not parse.
    #[error("pod invalid annotations[{key}] value {value}, unmarshal failed: {reason}")]
    BadHashAnnotation {
        /// The annotation.
        key: String,
        /// Its value.
        value: String,
        /// The decoder's error.
        reason: String,
    },
    /// A MergePatchJson patch could not be applied to the pod annotation.
    #[error("SidecarSet {sidecar_set}: patchPodMetadata annotation {key}: {reason}")]
    PatchMetadata {
        /// The SidecarSet.
        sidecar_set: String,
        /// The annotation.
        key: String,
        /// Why.
        reason: String,
    },
    /// The revision to inject could not be resolved.
    #[error("SidecarSet {sidecar_set}: injection revision: {reason}")]
    Revision {
        /// The SidecarSet.
        sidecar_set: String,
        /// Why.
        reason: String,
    },
    /// The pod did not (de)serialize.
    #[error("encoding pod: {0}")]
    Encode(#[from] serde_json::Error),
}

/// Restores historical SidecarSets for `injectionStrategy.revision` (OpenKruise's
/// `HistoryControl.GetHistorySidecarSet`, backed by ControllerRevisions).
pub trait RevisionHistory {
    /// The SidecarSet as recorded by `revision` (by name, or the newest with the custom
    /// version). `Ok(None)` means "not found, inject the latest", as OpenKruise falls back.
    fn history_sidecar_set(
        &self,
        sidecar_set: &SidecarSet,
        revision: &SidecarSetInjectRevision,
    ) -> Result<Option<SidecarSet>, String>;
}

/// No history: every revision request injects the latest SidecarSet.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoHistory;

impl RevisionHistory for NoHistory {
    fn history_sidecar_set(
        &self,
        _: &SidecarSet,
        _: &SidecarSetInjectRevision,
    ) -> Result<Option<SidecarSet>, String> {
        Ok(None)
    }
}

/// Everything injection depends on.
pub struct InjectInput<'a> {
    /// The pod being created (its namespace may be empty: `default` is assumed, as OpenKruise).
    pub pod: &'a Pod,
    /// Labels of the pod's namespace, `None` when the namespace is unknown.
    /// `kubernetes.io/metadata.name` is added when missing (the API server always sets it).
    pub namespace_labels: Option<&'a BTreeMap<String, String>>,
    /// All SidecarSets (any order).
    pub sidecar_sets: &'a [SidecarSet],
    /// `updateTimestamp` written into the hash annotations.
    pub now: jiff::Timestamp,
    /// A uniform sample in `[0, 1)` for the `Partial` revision policy.
    pub random: f64,
    /// Historical revisions.
    pub history: &'a dyn RevisionHistory,
    /// Feature gate `EnableSortSidecarContainerByName` (default off).
    pub sort_sidecar_containers_by_name: bool,
}

/// The outcome of injection.
#[derive(Clone, Debug, PartialEq)]
pub struct Injection {
    /// The pod after injection (equal to the input when nothing applied).
    pub pod: Pod,
    /// Names of the SidecarSets that matched (after canary resolution), in injection order.
    pub matched: Vec<String>,
    /// RFC 6902 patch from the input pod to [`Injection::pod`] (empty when unchanged).
    pub patch: json_patch::Patch,
}

/// One entry of the pod's `kruise.io/sidecarset-hash` (and `…-without-image`) annotation,
/// fields in OpenKruise's order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SidecarSetUpgradeSpec {
    /// RFC 3339 seconds, UTC (`null` in legacy entries).
    #[serde(rename = "updateTimestamp", default)]
    pub update_timestamp: Option<String>,
    /// The SidecarSet hash the pod carries.
    #[serde(rename = "hash", default)]
    pub hash: String,
    /// The SidecarSet name.
    #[serde(rename = "sidecarSetName", default)]
    pub sidecar_set_name: String,
    /// Names of the SidecarSet's sidecars (containers and native-sidecar init containers).
    #[serde(rename = "sidecarList", default)]
    pub sidecar_list: Option<Vec<String>>,
    /// The ControllerRevision injected.
    #[serde(
        rename = "controllerRevision",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub controller_revision: String,
}

/// Parses a pod hash annotation: the map of [`SidecarSetUpgradeSpec`], or the legacy
/// `{name: hash}` form.
pub fn parse_hash_annotation(
    key: &str,
    value: &str,
) -> Result<BTreeMap<String, SidecarSetUpgradeSpec>, InjectError> {
    if value.is_empty() {
        return Ok(BTreeMap::new());
    }
    if let Ok(m) = serde_json::from_str::<BTreeMap<String, SidecarSetUpgradeSpec>>(value) {
        return Ok(m);
    }
    let legacy: BTreeMap<String, String> =
        serde_json::from_str(value).map_err(|e| InjectError::BadHashAnnotation {
            key: key.into(),
            value: value.into(),
            reason: e.to_string(),
        })?;
    Ok(legacy
        .into_iter()
        .map(|(name, hash)| {
            let spec = SidecarSetUpgradeSpec {
                hash,
                sidecar_set_name: name.clone(),
                ..Default::default()
            };
            (name, spec)
        })
        .collect())
}

/// Serializes as Go's `json.Marshal` does for these shapes: struct field order as declared,
/// map keys sorted, `<`, `>`, `&`, U+2028, U+2029 escaped.
pub fn go_marshal<T: Serialize>(v: &T) -> Result<String, serde_json::Error> {
    let s = serde_json::to_string(v)?;
    Ok(go_html_escape(&s))
}

fn go_html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// OpenKruise's field index value(s) for a SidecarSet: the namespaces its
/// `namespaceSelector` names through `kubernetes.io/metadata.name`, or `None` (cluster scope).
pub fn indexed_namespaces(set: &SidecarSet) -> Option<Vec<String>> {
    let sel = set.spec.namespace_selector.as_ref()?;
    if let Some(v) = sel
        .match_labels
        .as_ref()
        .and_then(|m| m.get(LABEL_METADATA_NAME))
    {
        return Some(vec![v.clone()]);
    }
    sel.match_expressions
        .iter()
        .flatten()
        .find(|e| e.key == LABEL_METADATA_NAME && e.operator == "In")
        .map(|e| e.values.clone().unwrap_or_default())
}

fn selector_is_empty(sel: &LabelSelector) -> bool {
    sel.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && sel.match_expressions.as_ref().is_none_or(|e| e.is_empty())
}

/// Whether the SidecarSet matches the pod (`PodMatchedSidecarSet`): namespace selector
/// against the namespace's labels, then a non-empty selector against the pod's labels.
pub fn pod_matches_sidecar_set(
    pod_labels: &BTreeMap<String, String>,
    namespace: &str,
    namespace_labels: Option<&BTreeMap<String, String>>,
    set: &SidecarSet,
) -> Result<bool, InjectError> {
    let name = set.metadata.name.clone().unwrap_or_default();
    let sel_err = |source| InjectError::Selector {
        sidecar_set: name.clone(),
        source,
    };
    if let Some(ns_sel) = &set.spec.namespace_selector {
        let Some(ns_labels) = namespace_labels else {
            return Ok(false);
        };
        let mut labels = ns_labels.clone();
        labels
            .entry(LABEL_METADATA_NAME.into())
            .or_insert_with(|| namespace.to_string());
        // An invalid namespace selector never matches (OpenKruise: IsSelectorNamespace).
        if !selector_matches(ns_sel, &labels).unwrap_or(false) {
            return Ok(false);
        }
    }
    let Some(sel) = &set.spec.selector else {
        return Ok(false);
    };
    // Validate the selector even when empty, as OpenKruise parses before checking emptiness.
    let matched = selector_matches(sel, pod_labels).map_err(sel_err)?;
    Ok(!selector_is_empty(sel) && matched)
}

/// Whether the SidecarSet is a canary, and its base.
pub fn canary_base(set: &SidecarSet) -> Option<&str> {
    let ann = set.metadata.annotations.as_ref()?;
    let base = ann.get(SIDECARSET_BASE_ANNOTATION)?;
    (ann.get(SIDECARSET_CANARY_ANNOTATION).map(String::as_str) == Some("true") && !base.is_empty())
        .then_some(base.as_str())
}

fn set_name(set: &SidecarSet) -> &str {
    set.metadata.name.as_deref().unwrap_or("")
}

fn annotation<'a>(set: &'a SidecarSet, key: &str) -> &'a str {
    set.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
        .unwrap_or("")
}

/// The SidecarSets matching the pod, in injection order, each at the revision to inject,
/// canary bases removed.
pub fn matched_sidecar_sets(input: &InjectInput<'_>) -> Result<Vec<SidecarSet>, InjectError> {
    let pod = input.pod;
    let namespace = match pod.metadata.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => ns,
        _ => "default",
    };
    let empty = BTreeMap::new();
    let pod_labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
    let mut scoped: Vec<&SidecarSet> = Vec::new();
    let mut cluster: Vec<&SidecarSet> = Vec::new();
    for set in input.sidecar_sets {
        match indexed_namespaces(set) {
            Some(nss) if nss.iter().any(|n| n == namespace) => scoped.push(set),
            Some(_) => {}
            None => cluster.push(set),
        }
    }
    scoped.sort_by(|a, b| set_name(a).cmp(set_name(b)));
    cluster.sort_by(|a, b| set_name(a).cmp(set_name(b)));
    let mut matched = Vec::new();
    let mut bases = BTreeSet::new();
    for set in scoped.into_iter().chain(cluster) {
        if set.spec.injection_strategy.paused {
            continue;
        }
        if !pod_matches_sidecar_set(pod_labels, namespace, input.namespace_labels, set)? {
            continue;
        }
        let suitable = suitable_revision(set, pod_labels, input)?;
        if let Some(base) = canary_base(&suitable) {
            bases.insert(base.to_string());
        }
        matched.push(suitable);
    }
    matched.retain(|s| !bases.contains(set_name(s)));
    Ok(matched)
}

/// `getSuitableRevisionSidecarSet` for CREATE.
fn suitable_revision(
    set: &SidecarSet,
    pod_labels: &BTreeMap<String, String>,
    input: &InjectInput<'_>,
) -> Result<SidecarSet, InjectError> {
    let Some(revision) = set.spec.injection_strategy.revision.as_ref() else {
        return Ok(set.clone());
    };
    if revision.revision_name.is_none() && revision.custom_version.is_none() {
        return Ok(set.clone());
    }
    let rev_err = |reason: String| InjectError::Revision {
        sidecar_set: set_name(set).to_string(),
        reason,
    };
    let history = input
        .history
        .history_sidecar_set(set, revision)
        .map_err(rev_err)?
        .unwrap_or_else(|| set.clone());
    if set.spec.update_strategy.paused {
        return Ok(history);
    }
    match revision.policy {
        Some(SidecarSetInjectRevisionPolicy::Partial) => {
            if let Some(sel) = &set.spec.update_strategy.selector {
                let m = selector_matches(sel, pod_labels).map_err(|e| rev_err(e.to_string()))?;
                if !m {
                    return Ok(history);
                }
            }
            match &set.spec.update_strategy.partition {
                Some(IntOrString::String(p)) => {
                    let probability = p
                        .strip_suffix('%')
                        .and_then(|n| n.parse::<f64>().ok())
                        .map(|v| v / 100.0)
                        .ok_or_else(|| rev_err(format!("invalid partition {p:?}")))?;
                    if input.random <= probability {
                        Ok(history)
                    } else {
                        Ok(set.clone())
                    }
                }
                _ => Ok(set.clone()),
            }
        }
        _ => Ok(history),
    }
}

/// Applies `patchPodMetadata` to the annotations; `Ok(true)` when they changed.
pub fn patch_pod_metadata(
    annotations: &mut BTreeMap<String, String>,
    patches: &[SidecarSetPatchPodMetadata],
    sidecar_set: &str,
) -> Result<bool, InjectError> {
    let before = annotations.clone();
    for patch in patches {
        match &patch.patch_policy {
            Some(SidecarSetPatchPolicy::Overwrite) => {
                for (k, v) in &patch.annotations {
                    annotations.insert(k.clone(), v.clone());
                }
            }
            Some(SidecarSetPatchPolicy::MergePatchJson) => {
                for (k, patch_json) in &patch.annotations {
                    let merged = match annotations.get(k) {
                        Some(origin) if !origin.is_empty() => merge_patch_json(origin, patch_json)
                            .map_err(|reason| InjectError::PatchMetadata {
                                sidecar_set: sidecar_set.into(),
                                key: k.clone(),
                                reason,
                            })?,
                        _ => patch_json.clone(),
                    };
                    annotations.insert(k.clone(), merged);
                }
            }
            // Retain, empty, and unknown policies (OpenKruise ignores unknown ones).
            Some(SidecarSetPatchPolicy::Retain) | None => {
                for (k, v) in &patch.annotations {
                    annotations.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
            Some(SidecarSetPatchPolicy::Unknown(_)) => {}
        }
    }
    Ok(*annotations != before)
}

/// RFC 7386 merge of `patch` into `origin`, written as Go's json-patch library writes it
/// (compact, keys sorted).
fn merge_patch_json(origin: &str, patch: &str) -> Result<String, String> {
    let mut doc: Value = serde_json::from_str(origin).map_err(|e| e.to_string())?;
    let patch: Value = serde_json::from_str(patch).map_err(|e| e.to_string())?;
    if !doc.is_object() {
        return Err("Invalid JSON Document".into());
    }
    json_patch::merge(&mut doc, &patch);
    Ok(kruise_common::revision::to_go_json(&doc))
}

fn env_value<'a>(c: &'a Container, name: &str) -> Option<&'a EnvVar> {
    c.env.iter().flatten().find(|e| e.name == name)
}

/// Whether a pod container was injected by a SidecarSet (`IS_INJECTED=true`).
pub fn is_injected_container(c: &Container) -> bool {
    env_value(c, SIDECAR_ENV_KEY).and_then(|e| e.value.as_deref()) == Some("true")
}

/// `$(VAR)` references in a `subPathExpr`.
fn sub_path_expr_vars(expr: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(start) = rest.find("$(") {
        let after = &rest[start + 2..];
        let Some(end) = after.find(')') else { break };
        let name = &after[..end];
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c == '-' || c == '.' || c == '_' || c.is_ascii_alphabetic())
            && name
                .chars()
                .all(|c| c == '-' || c == '.' || c == '_' || c.is_ascii_alphanumeric());
        if valid {
            out.push(name);
            rest = &after[end + 1..];
        } else {
            rest = after;
        }
    }
    out
}

/// The app containers' volume mounts (and the env their `subPathExpr` reads) for a sidecar
/// with `shareVolumePolicy: enabled` (`GetInjectedVolumeMountsAndEnvs`).
fn shared_mounts_and_envs(
    sidecar: &SidecarContainer,
    pod_containers: &[Container],
) -> (Vec<VolumeMount>, Vec<EnvVar>) {
    if !sidecar.shares_volume_mounts() {
        return (Vec::new(), Vec::new());
    }
    let mut mounts = Vec::new();
    let mut envs = Vec::new();
    for app in pod_containers.iter().filter(|c| !is_injected_container(c)) {
        for m in app.volume_mounts.iter().flatten() {
            mounts.push(m.clone());
            for var in sub_path_expr_vars(m.sub_path_expr.as_deref().unwrap_or("")) {
                if let Some(e) = env_value(app, var) {
                    envs.push(e.clone());
                }
            }
        }
    }
    (mounts, envs)
}

fn shared_devices(sidecar: &SidecarContainer, pod_containers: &[Container]) -> Vec<VolumeDevice> {
    if !sidecar.shares_volume_devices() {
        return Vec::new();
    }
    pod_containers
        .iter()
        .filter(|c| !is_injected_container(c))
        .flat_map(|c| c.volume_devices.iter().flatten().cloned())
        .collect()
}

/// Splits `metadata.labels['k']` into (`metadata.labels`, `k`).
fn split_subscripted_path(path: &str) -> Option<(&str, &str)> {
    let inner = path.strip_suffix("']")?;
    let (p, sub) = inner.split_once("['")?;
    Some((p, sub))
}

fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            })
    });
    name_ok && prefix_ok
}

/// The container a `transferEnv[].sourceContainerNameFrom.fieldRef` names
/// (`ExtractContainerNameFromFieldPath`: only subscripted labels / annotations).
pub fn container_name_from_field_ref(fr: &ObjectFieldSelector, pod: &Pod) -> Option<String> {
    let (path, key) = split_subscripted_path(&fr.field_path)?;
    let get = |m: &Option<BTreeMap<String, String>>| {
        m.as_ref()
            .and_then(|m| m.get(key))
            .cloned()
            .unwrap_or_default()
    };
    match path {
        "metadata.annotations" if is_qualified_name(&key.to_lowercase()) => {
            Some(get(&pod.metadata.annotations))
        }
        "metadata.labels" if is_qualified_name(key) => Some(get(&pod.metadata.labels)),
        _ => None,
    }
}

/// `GetSidecarTransferEnvs`: env vars copied from the named pod containers.
fn transfer_envs(
    sidecar: &SidecarContainer,
    pod: &Pod,
    pod_containers: &[Container],
) -> Vec<EnvVar> {
    let mut out = Vec::new();
    for t in &sidecar.transfer_env {
        let mut names: BTreeSet<&str> = t.env_names.iter().map(String::as_str).collect();
        if !t.env_name.is_empty() {
            names.insert(&t.env_name);
        }
        let source = match t
            .source_container_name_from
            .as_ref()
            .and_then(|s| s.field_ref.as_ref())
        {
            Some(fr) => match container_name_from_field_ref(fr, pod) {
                Some(n) => n,
                None => continue,
            },
            None => t.source_container_name.clone(),
        };
        // The last container of that name wins, as OpenKruise's map keyed by "<c>/<env>".
        for name in names {
            let found = pod_containers
                .iter()
                .rev()
                .filter(|c| c.name == source)
                .find_map(|c| c.env.iter().flatten().rfind(|e| e.name == name));
            if let Some(e) = found {
                out.push(e.clone());
            }
        }
    }
    out
}

/// `MergeEnvVar`: appends `additional` vars whose names are not present yet.
fn merge_env(original: &mut Vec<EnvVar>, additional: Vec<EnvVar>) {
    let mut names: BTreeSet<String> = original.iter().map(|e| e.name.clone()).collect();
    for e in additional {
        if names.insert(e.name.clone()) {
            original.push(e);
        }
    }
}

/// `MergeVolumeMounts`: appends mounts whose path is not used by a mount or device yet.
fn merge_mounts(c: &mut Container, additional: Vec<VolumeMount>) {
    let mut paths: BTreeSet<String> = c
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.clone())
        .chain(
            c.volume_devices
                .iter()
                .flatten()
                .map(|d| d.device_path.clone()),
        )
        .collect();
    let mut mounts = c.volume_mounts.take().unwrap_or_default();
    for m in additional {
        if paths.insert(m.mount_path.clone()) {
            mounts.push(m);
        }
    }
    c.volume_mounts = (!mounts.is_empty()).then_some(mounts);
}

/// `MergeVolumeDevices`: appends devices whose path is not used yet.
fn merge_devices(c: &mut Container, additional: Vec<VolumeDevice>) {
    let mut paths: BTreeSet<String> = c
        .volume_devices
        .iter()
        .flatten()
        .map(|d| d.device_path.clone())
        .chain(
            c.volume_mounts
                .iter()
                .flatten()
                .map(|m| m.mount_path.clone()),
        )
        .collect();
    let mut devices = c.volume_devices.take().unwrap_or_default();
    for d in additional {
        if paths.insert(d.device_path.clone()) {
            devices.push(d);
        }
    }
    c.volume_devices = (!devices.is_empty()).then_some(devices);
}

fn annotation_ref_env(name: &str, annotation: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: None,
                field_path: format!("metadata.annotations['{annotation}']"),
            }),
            ..Default::default()
        }),
    }
}

/// `<n>-1` (working) and `<n>-2` (empty image) with their version env.
fn hot_upgrade_pair(sidecar: &SidecarContainer) -> (SidecarContainer, SidecarContainer) {
    let (name1, name2) = hot_upgrade_container_names(sidecar.name());
    let mut c1 = sidecar.clone();
    let mut c2 = sidecar.clone();
    c1.container.name = name1;
    c2.container.name = name2;
    c2.container.image =
        Some(sidecar.upgrade_strategy.hot_upgrade_empty_image.clone()).filter(|i| !i.is_empty());
    for c in [&mut c1, &mut c2] {
        let env = c.container.env.get_or_insert_default();
        env.push(annotation_ref_env(
            SIDECARSET_VERSION_ENV_KEY,
            &version_annotation(&c.container.name),
        ));
        env.push(annotation_ref_env(
            SIDECARSET_VERSION_ALT_ENV_KEY,
            &version_alt_annotation(&c.container.name),
        ));
    }
    (c1, c2)
}

/// What the SidecarSets add to the pod.
#[derive(Default)]
struct Built {
    containers: Vec<SidecarContainer>,
    init_containers: Vec<SidecarContainer>,
    secrets: Vec<LocalObjectReference>,
    volumes: Vec<Volume>,
    annotations: BTreeMap<String, String>,
}

/// Prepares one sidecar (init or not) for this pod.
fn prepare_sidecar(
    sidecar: &SidecarContainer,
    pod: &Pod,
    pod_containers: &[Container],
    volumes_by_name: &BTreeMap<&str, &Volume>,
    built: &mut Built,
) -> SidecarContainer {
    let mut s = sidecar.clone();
    let (mounts, mount_envs) = shared_mounts_and_envs(&s, pod_containers);
    let mut transfer = transfer_envs(&s, pod, pod_containers);
    merge_env(&mut transfer, mount_envs);
    for name in s
        .container
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.name.as_str())
        .chain(
            s.container
                .volume_devices
                .iter()
                .flatten()
                .map(|d| d.name.as_str()),
        )
    {
        if let Some(v) = volumes_by_name.get(name) {
            built.volumes.push((*v).clone());
        }
    }
    merge_mounts(&mut s.container, mounts);
    let env = s.container.env.get_or_insert_default();
    env.push(EnvVar {
        name: SIDECAR_ENV_KEY.into(),
        value: Some("true".into()),
        value_from: None,
    });
    merge_env(env, transfer);
    let devices = shared_devices(&s, pod_containers);
    merge_devices(&mut s.container, devices);
    s
}

fn build_sidecars(
    pod: &Pod,
    sets: &[SidecarSet],
    now: jiff::Timestamp,
) -> Result<Built, InjectError> {
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    let get = |k: &str| annotations.get(k).map(String::as_str).unwrap_or("");
    let mut hashes =
        parse_hash_annotation(SIDECARSET_HASH_ANNOTATION, get(SIDECARSET_HASH_ANNOTATION))?;
    let mut hashes_without_image = parse_hash_annotation(
        SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION,
        get(SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION),
    )?;
    let mut working: BTreeMap<String, String> =
        serde_json::from_str(get(SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION))
            .unwrap_or_default();
    let mut names: BTreeSet<String> = BTreeSet::new();
    let list = get(SIDECARSET_INJECTED_LIST_ANNOTATION);
    if !list.is_empty() {
        names.extend(list.split(',').map(str::to_string));
    }
    let pod_containers: Vec<Container> = pod
        .spec
        .as_ref()
        .map(|s| s.containers.clone())
        .unwrap_or_default();
    let timestamp = now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let mut built = Built::default();
    let mut any_hot = false;

    let mut push_hot = |s: SidecarContainer,
                        out: &mut Vec<SidecarContainer>,
                        built_ann: &mut BTreeMap<String, String>| {
        let (c1, c2) = hot_upgrade_pair(&s);
        built_ann.insert(version_annotation(c1.name()), "1".into());
        built_ann.insert(version_alt_annotation(c1.name()), "0".into());
        built_ann.insert(version_annotation(c2.name()), "0".into());
        built_ann.insert(version_alt_annotation(c2.name()), "1".into());
        working.insert(s.name().to_string(), c1.name().to_string());
        out.push(c1);
        out.push(c2);
    };

    for set in sets {
        let name = set_name(set).to_string();
        names.insert(name.clone());
        let volumes_by_name: BTreeMap<&str, &Volume> = set
            .spec
            .volumes
            .iter()
            .map(|v| (v.name.as_str(), v))
            .collect();
        let mut sidecar_list: BTreeSet<String> = BTreeSet::new();
        let mut injecting = false;
        for init in &set.spec.init_containers {
            if is_native_sidecar(&init.container) {
                sidecar_list.insert(init.name().to_string());
            }
            let s = prepare_sidecar(init, pod, &pod_containers, &volumes_by_name, &mut built);
            injecting = true;
            if is_native_sidecar(&s.container) && s.is_hot_upgrade() {
                any_hot = true;
                let mut out = std::mem::take(&mut built.init_containers);
                push_hot(s, &mut out, &mut built.annotations);
                built.init_containers = out;
            } else {
                built.init_containers.push(s);
            }
        }
        built
            .secrets
            .extend(set.spec.image_pull_secrets.iter().cloned());
        for c in &set.spec.containers {
            sidecar_list.insert(c.name().to_string());
            let s = prepare_sidecar(c, pod, &pod_containers, &volumes_by_name, &mut built);
            injecting = true;
            if s.is_hot_upgrade() {
                any_hot = true;
                let mut out = std::mem::take(&mut built.containers);
                push_hot(s, &mut out, &mut built.annotations);
                built.containers = out;
            } else {
                built.containers.push(s);
            }
        }
        if injecting {
            let list: Vec<String> = sidecar_list.into_iter().collect();
            hashes.insert(
                name.clone(),
                SidecarSetUpgradeSpec {
                    update_timestamp: Some(timestamp.clone()),
                    hash: annotation(set, SIDECARSET_HASH_ANNOTATION).to_string(),
                    sidecar_set_name: name.clone(),
                    sidecar_list: Some(list.clone()),
                    controller_revision: set
                        .status
                        .as_ref()
                        .map(|s| s.latest_revision.clone())
                        .unwrap_or_default(),
                },
            );
            hashes_without_image.insert(
                name.clone(),
                SidecarSetUpgradeSpec {
                    update_timestamp: Some(timestamp.clone()),
                    hash: annotation(set, SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION).to_string(),
                    sidecar_set_name: name.clone(),
                    sidecar_list: Some(list),
                    controller_revision: String::new(),
                },
            );
        }
    }
    if any_hot {
        built.annotations.insert(
            SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION.into(),
            go_marshal(&working)?,
        );
    }
    built
        .annotations
        .insert(SIDECARSET_HASH_ANNOTATION.into(), go_marshal(&hashes)?);
    built.annotations.insert(
        SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION.into(),
        go_marshal(&hashes_without_image)?,
    );
    built.annotations.insert(
        SIDECARSET_INJECTED_LIST_ANNOTATION.into(),
        names.into_iter().collect::<Vec<_>>().join(","),
    );
    Ok(built)
}

/// `mergeSidecarContainers`: a sidecar replaces the pod container of the same name in place;
/// others go before (BeforeAppContainer) or after (anything else) the pod's containers.
fn merge_containers(origin: Vec<Container>, injected: Vec<SidecarContainer>) -> Vec<Container> {
    let index: BTreeMap<String, usize> = origin
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.clone(), i))
        .collect();
    let mut origin = origin;
    let mut before = Vec::new();
    let mut after = Vec::new();
    for s in injected {
        if let Some(&i) = index.get(s.name()) {
            origin[i] = s.container;
            continue;
        }
        match s.pod_inject_policy {
            Some(PodInjectPolicy::BeforeAppContainer) => before.push(s.container),
            _ => after.push(s.container),
        }
    }
    before.extend(origin);
    before.extend(after);
    before
}

/// Injects the matching SidecarSets into the pod being created.
pub fn inject(input: &InjectInput<'_>) -> Result<Injection, InjectError> {
    let original = input.pod;
    let unchanged = || Injection {
        pod: original.clone(),
        matched: Vec::new(),
        patch: json_patch::Patch(Vec::new()),
    };
    if !kruise_common::pods::is_pod_active(original) {
        return Ok(unchanged());
    }
    let sets = matched_sidecar_sets(input)?;
    if sets.is_empty() {
        return Ok(unchanged());
    }
    let mut pod = original.clone();
    let mut annotations = pod.metadata.annotations.clone().unwrap_or_default();
    for set in &sets {
        patch_pod_metadata(
            &mut annotations,
            &set.spec.patch_pod_metadata,
            set_name(set),
        )?;
    }
    // The hash and hot-upgrade annotations are read after patchPodMetadata, as OpenKruise does.
    let had_annotations = pod.metadata.annotations.is_some();
    pod.metadata.annotations = Some(annotations);
    let built = build_sidecars(&pod, &sets, input.now)?;
    let mut annotations = pod.metadata.annotations.take().unwrap_or_default();
    if !built.containers.is_empty() || !built.init_containers.is_empty() {
        let spec = pod.spec.get_or_insert_default();
        let mut init = built.init_containers;
        init.sort_by(|a, b| a.name().cmp(b.name()));
        let merged_init = merge_containers(spec.init_containers.take().unwrap_or_default(), init);
        spec.init_containers = (!merged_init.is_empty()).then_some(merged_init);
        let mut containers = built.containers;
        if input.sort_sidecar_containers_by_name {
            containers.sort_by(|a, b| a.name().cmp(b.name()));
        }
        spec.containers = merge_containers(std::mem::take(&mut spec.containers), containers);
        let mut volumes = spec.volumes.take().unwrap_or_default();
        let mut volume_names: BTreeSet<String> = volumes.iter().map(|v| v.name.clone()).collect();
        for v in built.volumes {
            if volume_names.insert(v.name.clone()) {
                volumes.push(v);
            }
        }
        spec.volumes = (!volumes.is_empty()).then_some(volumes);
        let mut secrets = Vec::new();
        let mut secret_names = BTreeSet::new();
        for s in spec
            .image_pull_secrets
            .take()
            .unwrap_or_default()
            .into_iter()
            .chain(built.secrets)
        {
            if secret_names.insert(s.name.clone()) {
                secrets.push(s);
            }
        }
        spec.image_pull_secrets = (!secrets.is_empty()).then_some(secrets);
        annotations.extend(built.annotations);
    }
    if had_annotations || !annotations.is_empty() {
        pod.metadata.annotations = Some(annotations);
    }
    let raw = serde_json::to_value(original)?;
    let patch = patch_against_raw(&raw, original, &pod)?;
    Ok(Injection {
        pod,
        matched: sets.iter().map(|s| set_name(s).to_string()).collect(),
        patch,
    })
}

/// The JSONPatch taking the pod object as the API server sent it (`raw`, which may carry
/// fields this build's Kubernetes types do not know) to the injected pod.
///
/// Injection changes only `metadata.annotations` and the containers, init containers,
/// volumes and pull secrets of the spec; those are rebuilt on the raw object, keeping the raw
/// element for every container / volume the injection left unchanged, so unknown fields stay
/// with their owner instead of being dropped or shifted by index.
pub fn patch_against_raw(
    raw: &Value,
    original: &Pod,
    injected: &Pod,
) -> Result<json_patch::Patch, InjectError> {
    let mut target = raw.clone();
    let annotations = serde_json::to_value(&injected.metadata.annotations)?;
    if let Some(meta) = target.get_mut("metadata").and_then(Value::as_object_mut) {
        if annotations.is_null() {
            meta.remove("annotations");
        } else {
            meta.insert("annotations".into(), annotations);
        }
    } else if !annotations.is_null()
        && let Some(obj) = target.as_object_mut()
    {
        obj.insert(
            "metadata".into(),
            serde_json::json!({ "annotations": annotations }),
        );
    }
    let empty = k8s_openapi::api::core::v1::PodSpec::default();
    let before = original.spec.as_ref().unwrap_or(&empty);
    let after = injected.spec.as_ref().unwrap_or(&empty);
    let raw_spec = raw.get("spec");
    let mut lists: Vec<(&str, Option<Value>)> = Vec::new();
    lists.push((
        "containers",
        Some(rebuild_named(
            raw_spec,
            "containers",
            &before.containers,
            &after.containers,
            |c| &c.name,
        )?),
    ));
    let init_before = before.init_containers.as_deref().unwrap_or(&[]);
    lists.push((
        "initContainers",
        after
            .init_containers
            .as_deref()
            .map(|a| rebuild_named(raw_spec, "initContainers", init_before, a, |c| &c.name))
            .transpose()?,
    ));
    let vol_before = before.volumes.as_deref().unwrap_or(&[]);
    lists.push((
        "volumes",
        after
            .volumes
            .as_deref()
            .map(|a| rebuild_named(raw_spec, "volumes", vol_before, a, |v| &v.name))
            .transpose()?,
    ));
    let secrets_before = before.image_pull_secrets.as_deref().unwrap_or(&[]);
    lists.push((
        "imagePullSecrets",
        after
            .image_pull_secrets
            .as_deref()
            .map(|a| rebuild_named(raw_spec, "imagePullSecrets", secrets_before, a, |s| &s.name))
            .transpose()?,
    ));
    if injected.spec.is_some() {
        if target.get("spec").is_none()
            && let Some(obj) = target.as_object_mut()
        {
            obj.insert("spec".into(), serde_json::json!({}));
        }
        if let Some(spec) = target.get_mut("spec").and_then(Value::as_object_mut) {
            for (key, value) in lists {
                match value {
                    Some(v) => {
                        spec.insert(key.into(), v);
                    }
                    None => {
                        spec.remove(key);
                    }
                }
            }
        }
    }
    Ok(json_patch::diff(raw, &target))
}

/// The `after` list as raw JSON: an element equal to the `before` element of the same name is
/// taken from the raw object (with any unknown fields), others are serialized.
fn rebuild_named<T: Serialize + PartialEq>(
    raw_spec: Option<&Value>,
    key: &str,
    before: &[T],
    after: &[T],
    name: impl Fn(&T) -> &String,
) -> Result<Value, InjectError> {
    let raw_items = raw_spec.and_then(|s| s.get(key)).and_then(Value::as_array);
    let mut out = Vec::with_capacity(after.len());
    for item in after {
        let unchanged = before
            .iter()
            .position(|b| name(b) == name(item) && b == item)
            .and_then(|i| raw_items.and_then(|r| r.get(i)));
        match unchanged {
            Some(raw) => out.push(raw.clone()),
            None => out.push(serde_json::to_value(item)?),
        }
    }
    Ok(Value::Array(out))
}

#[cfg(test)]
mod tests;
