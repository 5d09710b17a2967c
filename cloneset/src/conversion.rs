//! `v1alpha1` <-> `v1beta1` conversion, mapping fields exactly as OpenKruise's
//! `apis/apps/v1alpha1/cloneset_conversion.go` does (v1beta1 is the hub):
//!
//! * `type` `OnDelete` <-> `OnDelete` (no `rollingUpdate`); `ReCreate` / `InPlaceIfPossible` /
//!   `InPlaceOnly` (and empty or unknown, as `ReCreate`) <-> `RollingUpdate` with that
//!   `podUpdatePolicy`; partition, maxUnavailable, maxSurge, paused, priorityStrategy,
//!   scatterStrategy move under `rollingUpdate`;
//! * `scaleStrategy.disablePVCReuse` <-> `!scaleStrategy.enablePVCReuse`;
//! * the `apps.kruise.io/cloneset-scaling-exclude-preparing-delete: "true"` label sets
//!   `scaleStrategy.excludePreparingDelete` (not converted back: the label stays in metadata);
//! * the image pre-download annotations <-> `rollingUpdate.inPlaceUpdateStrategy.imagePreDownload*`
//!   (beta -> alpha writes the annotations; alpha -> beta reads them, keeping them in metadata);
//! * metadata and status are copied.
//!
//! Lossy cases (all OpenKruise's too; see the `documented_lossy_cases` test): an alpha
//! `OnDelete` strategy drops partition/maxUnavailable/maxSurge/paused/priority/scatter/
//! inPlaceUpdateStrategy; an empty or unknown alpha type becomes `ReCreate`; an empty
//! `inPlaceUpdateStrategy` (`{}`) disappears; beta `type` unset, `rollingUpdate` unset or
//! `podUpdatePolicy` unset come back as `RollingUpdate` / `{podUpdatePolicy: ReCreate}`;
//! `excludePreparingDelete: true` without the label is lost; beta -> alpha adds the
//! pre-download annotations to metadata; a string `imagePreDownloadParallelism` holding a
//! number comes back as an integer; alpha's own `inPlaceUpdateStrategy.imagePreDownload*`
//! fields (only the annotations count in alpha) are dropped.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_common::admission::conversion::Converter;
use kruise_common::api::InPlaceUpdateStrategy;
use kruise_common::api::keys::{
    CLONESET_SCALING_EXCLUDE_PREPARING_DELETE_KEY, IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS_KEY,
    IMAGE_PREDOWNLOAD_PARALLELISM_KEY, IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_KEY,
};
use serde_json::Value;

use crate::api::{GROUP, KIND, V1ALPHA1, V1BETA1, v1alpha1, v1beta1};

/// Why an object could not be converted.
#[derive(Debug, thiserror::Error)]
pub enum ConversionError {
    /// The object is not a CloneSet of a known version.
    #[error("unsupported apiVersion {0:?} for CloneSet conversion")]
    UnsupportedVersion(String),
    /// The object does not decode as a CloneSet of its version.
    #[error("decoding CloneSet {version}: {source}")]
    Decode {
        /// The object's apiVersion.
        version: String,
        /// The decoder's error.
        source: serde_json::Error,
    },
    /// The converted object does not encode.
    #[error("encoding CloneSet: {0}")]
    Encode(serde_json::Error),
}

/// `v1alpha1` -> `v1beta1` (OpenKruise's `ConvertTo`).
pub fn to_v1beta1(src: &v1alpha1::CloneSet) -> v1beta1::CloneSet {
    use v1alpha1::CloneSetUpdateStrategyType as A;
    use v1beta1::{CloneSetPodUpdatePolicy as P, CloneSetUpdateStrategyType as B};
    let s = &src.spec;
    let exclude = src
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(CLONESET_SCALING_EXCLUDE_PREPARING_DELETE_KEY))
        .is_some_and(|v| v == "true");
    let us = &s.update_strategy;
    let policy = match &us.type_ {
        Some(A::OnDelete) => None,
        Some(A::InPlaceIfPossible) => Some(P::InPlaceIfPossible),
        Some(A::InPlaceOnly) => Some(P::InPlaceOnly),
        Some(A::ReCreate | A::Unknown(_)) | None => Some(P::ReCreate),
    };
    let update_strategy = match policy {
        None => v1beta1::CloneSetUpdateStrategy {
            type_: Some(B::OnDelete),
            rolling_update: None,
        },
        Some(policy) => v1beta1::CloneSetUpdateStrategy {
            type_: Some(B::RollingUpdate),
            rolling_update: Some(v1beta1::RollingUpdateCloneSetStrategy {
                partition: us.partition.clone(),
                max_unavailable: us.max_unavailable.clone(),
                max_surge: us.max_surge.clone(),
                pod_update_policy: Some(policy),
                paused: us.paused,
                priority_strategy: us.priority_strategy.clone(),
                scatter_strategy: us.scatter_strategy.clone(),
                in_place_update_strategy: in_place_to_v1beta1(
                    us.in_place_update_strategy.as_ref(),
                    src.metadata.annotations.as_ref(),
                ),
            }),
        },
    };
    v1beta1::CloneSet {
        metadata: src.metadata.clone(),
        spec: v1beta1::CloneSetSpec {
            replicas: s.replicas,
            selector: s.selector.clone(),
            template: s.template.clone(),
            volume_claim_templates: s.volume_claim_templates.clone(),
            scale_strategy: v1beta1::CloneSetScaleStrategy {
                pods_to_delete: s.scale_strategy.pods_to_delete.clone(),
                max_unavailable: s.scale_strategy.max_unavailable.clone(),
                enable_pvc_reuse: !s.scale_strategy.disable_pvc_reuse,
                exclude_preparing_delete: exclude,
            },
            update_strategy,
            revision_history_limit: s.revision_history_limit,
            min_ready_seconds: s.min_ready_seconds,
            lifecycle: s.lifecycle.clone(),
            progress_deadline_seconds: s.progress_deadline_seconds,
        },
        status: src.status.clone(),
    }
}

/// `v1beta1` -> `v1alpha1` (OpenKruise's `ConvertFrom`).
pub fn to_v1alpha1(src: &v1beta1::CloneSet) -> v1alpha1::CloneSet {
    use v1alpha1::CloneSetUpdateStrategyType as A;
    use v1beta1::CloneSetPodUpdatePolicy as P;
    let s = &src.spec;
    let mut metadata = src.metadata.clone();
    let ru = s.update_strategy.rolling_update.as_ref();
    let type_ = if s.update_strategy.is_on_delete() {
        A::OnDelete
    } else {
        match ru.and_then(|r| r.pod_update_policy.as_ref()) {
            Some(P::InPlaceIfPossible) => A::InPlaceIfPossible,
            Some(P::InPlaceOnly) => A::InPlaceOnly,
            Some(P::ReCreate | P::Unknown(_)) | None => A::ReCreate,
        }
    };
    let mut update_strategy = v1alpha1::CloneSetUpdateStrategy {
        type_: Some(type_),
        ..Default::default()
    };
    if let Some(r) = ru {
        update_strategy.partition = r.partition.clone();
        update_strategy.max_unavailable = r.max_unavailable.clone();
        update_strategy.max_surge = r.max_surge.clone();
        update_strategy.paused = r.paused;
        update_strategy.priority_strategy = r.priority_strategy.clone();
        update_strategy.scatter_strategy = r.scatter_strategy.clone();
        update_strategy.in_place_update_strategy = in_place_from_v1beta1(
            r.in_place_update_strategy.as_ref(),
            &mut metadata.annotations,
        );
    }
    v1alpha1::CloneSet {
        metadata,
        spec: v1alpha1::CloneSetSpec {
            replicas: s.replicas,
            selector: s.selector.clone(),
            template: s.template.clone(),
            volume_claim_templates: s.volume_claim_templates.clone(),
            scale_strategy: v1alpha1::CloneSetScaleStrategy {
                pods_to_delete: s.scale_strategy.pods_to_delete.clone(),
                max_unavailable: s.scale_strategy.max_unavailable.clone(),
                disable_pvc_reuse: !s.scale_strategy.enable_pvc_reuse,
            },
            update_strategy,
            revision_history_limit: s.revision_history_limit,
            min_ready_seconds: s.min_ready_seconds,
            lifecycle: s.lifecycle.clone(),
            progress_deadline_seconds: s.progress_deadline_seconds,
        },
        status: src.status.clone(),
    }
}

/// Go's `intstr.Parse`: an integer if the string is one, else the string.
fn parse_int_or_string(s: &str) -> IntOrString {
    s.parse::<i32>()
        .map_or_else(|_| IntOrString::String(s.to_string()), IntOrString::Int)
}

fn in_place_to_v1beta1(
    src: Option<&InPlaceUpdateStrategy>,
    annotations: Option<&BTreeMap<String, String>>,
) -> Option<InPlaceUpdateStrategy> {
    let get = |k: &str| {
        annotations
            .and_then(|a| a.get(k))
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    };
    let parallelism = get(IMAGE_PREDOWNLOAD_PARALLELISM_KEY);
    let timeout = get(IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_KEY);
    let min_ready = get(IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS_KEY);
    let has_annotations = parallelism.is_some() || timeout.is_some() || min_ready.is_some();
    if src.is_none() && !has_annotations {
        return None;
    }
    Some(InPlaceUpdateStrategy {
        grace_period_seconds: src.map_or(0, |s| s.grace_period_seconds),
        image_pre_download_parallelism: parallelism.map(parse_int_or_string),
        // Unparsable numbers are ignored, as OpenKruise ignores them.
        image_pre_download_timeout_seconds: timeout.and_then(|v| v.parse().ok()),
        image_pre_download_min_updated_ready_pods: min_ready.and_then(|v| v.parse().ok()),
    })
}

fn in_place_from_v1beta1(
    src: Option<&InPlaceUpdateStrategy>,
    annotations: &mut Option<BTreeMap<String, String>>,
) -> Option<InPlaceUpdateStrategy> {
    let src = src?;
    let has_content = src.grace_period_seconds != 0
        || src.image_pre_download_parallelism.is_some()
        || src.image_pre_download_timeout_seconds.is_some()
        || src.image_pre_download_min_updated_ready_pods.is_some();
    if !has_content {
        return None;
    }
    let annotations = annotations.get_or_insert_with(BTreeMap::new);
    if let Some(p) = &src.image_pre_download_parallelism {
        let v = match p {
            IntOrString::Int(i) => i.to_string(),
            IntOrString::String(s) => s.clone(),
        };
        annotations.insert(IMAGE_PREDOWNLOAD_PARALLELISM_KEY.into(), v);
    }
    if let Some(t) = src.image_pre_download_timeout_seconds {
        annotations.insert(IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_KEY.into(), t.to_string());
    }
    if let Some(m) = src.image_pre_download_min_updated_ready_pods {
        annotations.insert(
            IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS_KEY.into(),
            m.to_string(),
        );
    }
    Some(InPlaceUpdateStrategy {
        grace_period_seconds: src.grace_period_seconds,
        ..Default::default()
    })
}

/// Converts a CloneSet JSON object to `desired_api_version`.
///
/// Decodes through the typed structs (as OpenKruise's Go webhook does, so unknown spec fields
/// are dropped) but carries `spec.template`, `spec.volumeClaimTemplates` and metadata (other
/// than annotations, which beta -> alpha may add to) over byte for byte, so the pod template
/// a revision is hashed from is never reshaped by a conversion.
pub fn convert_value(object: Value, desired_api_version: &str) -> Result<Value, ConversionError> {
    let from = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if from == desired_api_version {
        return Ok(object);
    }
    let decode_err = |source| ConversionError::Decode {
        version: from.clone(),
        source,
    };
    let mut converted = match (from.as_str(), desired_api_version) {
        (V1ALPHA1, V1BETA1) => {
            let typed: v1alpha1::CloneSet =
                serde_json::from_value(object.clone()).map_err(decode_err)?;
            serde_json::to_value(to_v1beta1(&typed)).map_err(ConversionError::Encode)?
        }
        (V1BETA1, V1ALPHA1) => {
            let typed: v1beta1::CloneSet =
                serde_json::from_value(object.clone()).map_err(decode_err)?;
            serde_json::to_value(to_v1alpha1(&typed)).map_err(ConversionError::Encode)?
        }
        (V1ALPHA1 | V1BETA1, other) => {
            return Err(ConversionError::UnsupportedVersion(other.to_string()));
        }
        (other, _) => return Err(ConversionError::UnsupportedVersion(other.to_string())),
    };
    // Keep the original metadata, template and claim templates exactly as they came.
    if let (Some(out), Some(original_meta)) = (converted.as_object_mut(), object.get("metadata")) {
        let annotations = out
            .get("metadata")
            .and_then(|m| m.get("annotations"))
            .cloned();
        let mut meta = original_meta.clone();
        if let (Some(meta_obj), Some(a)) = (meta.as_object_mut(), annotations) {
            meta_obj.insert("annotations".into(), a);
        }
        out.insert("metadata".into(), meta);
    }
    for key in ["template", "volumeClaimTemplates"] {
        if let Some(original) = object.get("spec").and_then(|s| s.get(key))
            && let Some(spec) = converted.get_mut("spec").and_then(Value::as_object_mut)
        {
            spec.insert(key.into(), original.clone());
        }
    }
    if let Some(out) = converted.as_object_mut() {
        out.insert(
            "apiVersion".into(),
            Value::String(desired_api_version.into()),
        );
        out.insert("kind".into(), Value::String(KIND.into()));
    }
    Ok(converted)
}

/// The `/convert` webhook's converter for CloneSet (register it with `common::admission`).
#[derive(Debug, Clone, Copy, Default)]
pub struct CloneSetConverter;

impl Converter for CloneSetConverter {
    fn handles(&self, group: &str, kind: &str) -> bool {
        group == GROUP && kind == KIND
    }

    fn convert(&self, object: Value, desired_api_version: &str) -> Result<Value, String> {
        convert_value(object, desired_api_version).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests;
