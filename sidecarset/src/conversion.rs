//! `v1alpha1` <-> `v1beta1` conversion, mapping fields as OpenKruise's
//! `apis/apps/v1alpha1/sidecarset_conversion.go` does (v1beta1 is the hub):
//!
//! * every nested field is copied unchanged (the nested types are identical);
//! * alpha `spec.namespace` (when set) becomes `namespaceSelector: {matchLabels:
//!   {kubernetes.io/metadata.name: <ns>}}` and wins over alpha's `namespaceSelector`;
//! * the alpha label `apps.kruise.io/sidecarset-custom-version` becomes beta
//!   `spec.customVersion` (and the label is removed); beta `customVersion` becomes that label;
//! * metadata and status are copied.
//!
//! Lossy cases (all OpenKruise's too): alpha `namespace` comes back as a `namespaceSelector`;
//! an alpha `namespaceSelector` next to a `namespace` is dropped; an empty custom-version label
//! disappears; a beta object carrying the custom-version label itself loses it to
//! `customVersion` on the way back.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_common::admission::Converter;
use serde_json::Value;

use crate::api::{
    GROUP, KIND, LABEL_METADATA_NAME, SIDECARSET_CUSTOM_VERSION_LABEL, V1ALPHA1, V1BETA1, v1alpha1,
    v1beta1,
};

/// Why an object could not be converted.
#[derive(Debug, thiserror::Error)]
pub enum ConversionError {
    /// The object is not a SidecarSet of a known version.
    #[error("unsupported apiVersion {0:?} for SidecarSet conversion")]
    UnsupportedVersion(String),
    /// The object does not decode as a SidecarSet of its version.
    #[error("decoding SidecarSet {version}: {source}")]
    Decode {
        /// The object's apiVersion.
        version: String,
        /// The decoder's error.
        source: serde_json::Error,
    },
    /// The converted object does not encode.
    #[error("encoding SidecarSet: {0}")]
    Encode(serde_json::Error),
}

/// `v1alpha1` -> `v1beta1` (OpenKruise's `ConvertTo`).
pub fn to_v1beta1(src: &v1alpha1::SidecarSet) -> v1beta1::SidecarSet {
    let s = &src.spec;
    let mut metadata = src.metadata.clone();
    let namespace_selector = if !s.namespace.is_empty() {
        Some(LabelSelector {
            match_labels: Some([(LABEL_METADATA_NAME.to_string(), s.namespace.clone())].into()),
            match_expressions: None,
        })
    } else {
        s.namespace_selector.clone()
    };
    let mut custom_version = String::new();
    if let Some(labels) = metadata.labels.as_mut()
        && let Some(v) = labels.remove(SIDECARSET_CUSTOM_VERSION_LABEL)
    {
        custom_version = v;
    }
    let mut dst = v1beta1::SidecarSet::new(
        src.metadata.name.as_deref().unwrap_or(""),
        v1beta1::SidecarSetSpec {
            selector: s.selector.clone(),
            namespace_selector,
            init_containers: s.init_containers.clone(),
            containers: s.containers.clone(),
            volumes: s.volumes.clone(),
            update_strategy: s.update_strategy.clone(),
            injection_strategy: s.injection_strategy.clone(),
            image_pull_secrets: s.image_pull_secrets.clone(),
            revision_history_limit: s.revision_history_limit,
            patch_pod_metadata: s.patch_pod_metadata.clone(),
            custom_version,
        },
    );
    dst.metadata = metadata;
    dst.status = src.status.clone();
    dst
}

/// `v1beta1` -> `v1alpha1` (OpenKruise's `ConvertFrom`).
pub fn to_v1alpha1(src: &v1beta1::SidecarSet) -> v1alpha1::SidecarSet {
    let s = &src.spec;
    let mut metadata = src.metadata.clone();
    if !s.custom_version.is_empty() {
        metadata.labels.get_or_insert_default().insert(
            SIDECARSET_CUSTOM_VERSION_LABEL.into(),
            s.custom_version.clone(),
        );
    }
    let mut dst = v1alpha1::SidecarSet::new(
        src.metadata.name.as_deref().unwrap_or(""),
        v1alpha1::SidecarSetSpec {
            selector: s.selector.clone(),
            namespace: String::new(),
            namespace_selector: s.namespace_selector.clone(),
            init_containers: s.init_containers.clone(),
            containers: s.containers.clone(),
            volumes: s.volumes.clone(),
            update_strategy: s.update_strategy.clone(),
            injection_strategy: s.injection_strategy.clone(),
            image_pull_secrets: s.image_pull_secrets.clone(),
            revision_history_limit: s.revision_history_limit,
            patch_pod_metadata: s.patch_pod_metadata.clone(),
        },
    );
    dst.metadata = metadata;
    dst.status = src.status.clone();
    dst
}

/// Decodes any served version as the storage version.
pub fn decode_as_v1beta1(object: &Value) -> Result<v1beta1::SidecarSet, ConversionError> {
    let version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let decode_err = |source| ConversionError::Decode {
        version: version.clone(),
        source,
    };
    if version == format!("{GROUP}/{V1BETA1}") {
        serde_json::from_value(object.clone()).map_err(decode_err)
    } else if version == format!("{GROUP}/{V1ALPHA1}") {
        let alpha: v1alpha1::SidecarSet =
            serde_json::from_value(object.clone()).map_err(decode_err)?;
        Ok(to_v1beta1(&alpha))
    } else {
        Err(ConversionError::UnsupportedVersion(version))
    }
}

/// Converts a JSON SidecarSet to `desired_api_version`.
pub fn convert_value(object: Value, desired_api_version: &str) -> Result<Value, ConversionError> {
    let current = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if current == desired_api_version {
        return Ok(object);
    }
    let hub = decode_as_v1beta1(&object)?;
    if desired_api_version == format!("{GROUP}/{V1BETA1}") {
        serde_json::to_value(hub).map_err(ConversionError::Encode)
    } else if desired_api_version == format!("{GROUP}/{V1ALPHA1}") {
        serde_json::to_value(to_v1alpha1(&hub)).map_err(ConversionError::Encode)
    } else {
        Err(ConversionError::UnsupportedVersion(
            desired_api_version.to_string(),
        ))
    }
}

/// The `/convert` webhook's converter for SidecarSets.
#[derive(Clone, Copy, Debug, Default)]
pub struct SidecarSetConverter;

impl Converter for SidecarSetConverter {
    fn handles(&self, group: &str, kind: &str) -> bool {
        group == GROUP && kind == KIND
    }

    fn convert(&self, object: Value, desired_api_version: &str) -> Result<Value, String> {
        convert_value(object, desired_api_version).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
pub(crate) mod tests;
