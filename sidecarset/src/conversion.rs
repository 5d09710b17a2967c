//! `v1alpha1` <-> `v1beta1` conversion, mapping fields as OpenKruise's
//! `apis/apps/v1alpha1/sidecarset_conversion.go` does (v1beta1 is the hub):
//!
//! * every other field — the nested types are identical — and fields the types do not know
//!   are carried over as they came
//!   ([`kruise_admission::conversion::VersionMapping`]);
//! * alpha `spec.namespace` (when set) becomes `namespaceSelector: {matchLabels:
//!   {kubernetes.io/metadata.name: <ns>}}` and wins over alpha's `namespaceSelector`;
//! * the alpha label `apps.kruise.io/sidecarset-custom-version` becomes beta
//!   `spec.customVersion` (and the label is removed); beta `customVersion` becomes that label;
//!
//! Lossy cases (all OpenKruise's too): alpha `namespace` comes back as a `namespaceSelector`;
//! an alpha `namespaceSelector` next to a `namespace` is dropped; an empty custom-version label
//! disappears; a beta object carrying the custom-version label itself loses it to
//! `customVersion` on the way back.

use kruise_admission::conversion::{
    ConversionError, VersionMapping, convert_object, object_field, remove_if_empty,
};
use kruise_core::api::version::APPS_V1BETA1;
use serde_json::{Map, Value, json};

use crate::api::{KIND, LABEL_METADATA_NAME, SIDECARSET_CUSTOM_VERSION_LABEL, v1beta1};

/// The `/convert` webhook's converter for SidecarSets.
#[derive(Clone, Copy, Debug, Default)]
pub struct SidecarSetConverter;

impl VersionMapping for SidecarSetConverter {
    fn kind(&self) -> &str {
        KIND
    }

    /// `v1alpha1` -> `v1beta1` (OpenKruise's `ConvertTo`).
    fn spoke_to_hub(&self, object: &mut Map<String, Value>) -> Result<(), ConversionError> {
        let mut custom_version = None;
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
            && let Some(labels) = metadata.get_mut("labels").and_then(Value::as_object_mut)
        {
            custom_version = labels.remove(SIDECARSET_CUSTOM_VERSION_LABEL);
            if custom_version.is_some() {
                remove_if_empty(metadata, "labels");
            }
        }
        let spec = object_field(object, "spec", KIND, "spec")?;
        match spec.remove("namespace") {
            Some(Value::String(namespace)) if !namespace.is_empty() => {
                spec.insert(
                    "namespaceSelector".into(),
                    json!({"matchLabels": {LABEL_METADATA_NAME: namespace}}),
                );
            }
            _ => {}
        }
        match custom_version {
            Some(Value::String(v)) if !v.is_empty() => {
                spec.insert("customVersion".into(), v.into());
            }
            _ => {}
        }
        Ok(())
    }

    /// `v1beta1` -> `v1alpha1` (OpenKruise's `ConvertFrom`).
    fn hub_to_spoke(&self, object: &mut Map<String, Value>) -> Result<(), ConversionError> {
        let spec = object_field(object, "spec", KIND, "spec")?;
        let custom_version = match spec.remove("customVersion") {
            Some(Value::String(v)) if !v.is_empty() => v,
            _ => return Ok(()),
        };
        let metadata = object_field(object, "metadata", KIND, "metadata")?;
        let labels = object_field(metadata, "labels", KIND, "metadata.labels")?;
        labels.insert(
            SIDECARSET_CUSTOM_VERSION_LABEL.into(),
            custom_version.into(),
        );
        Ok(())
    }
}

/// Decodes any served version as the storage version.
pub fn decode_as_v1beta1(object: &Value) -> Result<v1beta1::SidecarSet, String> {
    let beta = convert_object(&SidecarSetConverter, object.clone(), APPS_V1BETA1)
        .map_err(|e| e.to_string())?;
    serde_json::from_value(beta).map_err(|e| e.to_string())
}

#[cfg(test)]
pub(crate) mod tests;
