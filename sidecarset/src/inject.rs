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
//! Steps 1–4 live in `matching`, 5 and the hash annotations' encoding in `annotations`, 6 and
//! 7 in `sidecars` (with `env` for `transferEnv` and `volumes` for the shared mounts). The
//! result is a typed pod; the webhook's JSONPatch is built by the pod chain on the pod as sent
//! (`kruise_admission::raw_patch`), so fields these types do not know are kept.
//!
//! A sidecar with a `resourcesPolicy` gets its resources computed from the pod's containers
//! in step 6 (`resources`, with OpenKruise's expression `calculator`).

mod annotations;
mod calculator;
mod env;
mod matching;
mod resources;
mod sidecars;
mod volumes;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kruise_core::pods::selector::SelectorError;

use crate::api::v1beta1::SidecarSet;

pub use annotations::{
    SidecarSetUpgradeSpec, go_marshal, parse_hash_annotation, patch_pod_metadata,
};
pub use env::{container_name_from_field_ref, is_injected_container};
pub use matching::{
    NoHistory, RevisionHistory, canary_base, indexed_namespaces, matched_sidecar_sets,
    pod_matches_sidecar_set,
};
pub use resources::{compile_name_regex, expression_variable, validate_expression};

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
    /// A sidecar's `resourcesPolicy` could not be applied to the pod (no container matches
    /// its regex, an expression fails); the message is OpenKruise's.
    #[error(transparent)]
    ResourcesPolicy(#[from] resources::ResourcesPolicyError),
    /// The pod did not (de)serialize.
    #[error("encoding pod: {0}")]
    Encode(#[from] serde_json::Error),
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
}

/// Injects the matching SidecarSets into the pod being created.
pub fn inject(input: &InjectInput<'_>) -> Result<Injection, InjectError> {
    let original = input.pod;
    let unchanged = || Injection {
        pod: original.clone(),
        matched: Vec::new(),
    };
    if !kruise_core::pods::is_pod_active(original) {
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
            matching::set_name(set),
        )?;
    }
    // The hash and hot-upgrade annotations are read after patchPodMetadata, as OpenKruise does.
    let had_annotations = pod.metadata.annotations.is_some();
    pod.metadata.annotations = Some(annotations);
    let built = sidecars::build_sidecars(&pod, &sets, input.now)?;
    let mut annotations = pod.metadata.annotations.take().unwrap_or_default();
    if built.injects_any() {
        let added_annotations = built.merge_into(
            pod.spec.get_or_insert_default(),
            input.sort_sidecar_containers_by_name,
        );
        annotations.extend(added_annotations);
    }
    if had_annotations || !annotations.is_empty() {
        pod.metadata.annotations = Some(annotations);
    }
    Ok(Injection {
        pod,
        matched: sets
            .iter()
            .map(|s| matching::set_name(s).to_string())
            .collect(),
    })
}

#[cfg(test)]
mod tests;
