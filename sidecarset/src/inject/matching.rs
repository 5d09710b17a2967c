//! Which SidecarSets a pod gets: namespace and selector matching, canaries, and the
//! revision to inject.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_core::pods::selector::selector_matches;

use super::{InjectError, InjectInput};
use crate::api::v1beta1::SidecarSet;
use crate::api::{
    LABEL_METADATA_NAME, SIDECARSET_BASE_ANNOTATION, SIDECARSET_CANARY_ANNOTATION,
    SidecarSetInjectRevision, SidecarSetInjectRevisionPolicy,
};

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
    Ok(!kruise_core::pods::selector::is_empty(sel) && matched)
}

/// Whether the SidecarSet is a canary, and its base.
pub fn canary_base(set: &SidecarSet) -> Option<&str> {
    let ann = set.metadata.annotations.as_ref()?;
    let base = ann.get(SIDECARSET_BASE_ANNOTATION)?;
    (ann.get(SIDECARSET_CANARY_ANNOTATION).map(String::as_str) == Some("true") && !base.is_empty())
        .then_some(base.as_str())
}

pub(super) fn set_name(set: &SidecarSet) -> &str {
    set.metadata.name.as_deref().unwrap_or("")
}

pub(super) fn annotation<'a>(set: &'a SidecarSet, key: &str) -> &'a str {
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
