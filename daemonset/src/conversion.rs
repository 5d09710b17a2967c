//! `v1alpha1` <-> `v1beta1` conversion for the `/convert` webhook, mapping the fields
//! OpenKruise's `apis/apps/v1alpha1/daemonset_conversion.go` maps (v1beta1 is the hub):
//!
//! * the annotation `daemonset.kruise.io/progressive-create-pod: "true"` <->
//!   `spec.scaleStrategy.partitionedScaling: true` (the annotation is moved, not copied, so
//!   it does not linger on the stored object and come back unasked);
//! * the deprecated `rollingUpdateType: Surging` -> `Standard`, as OpenKruise maps it; unlike
//!   OpenKruise, the stored object remembers it in the annotation
//!   [`SURGING_ANNOTATION`], so reading it back through `v1alpha1` shows `Surging` again;
//! * `status.daemonSetHash` <-> `status.updateRevision`;
//! * everything else — metadata, the template, the strategy, fields the types do not know —
//!   passes through as it came.
//!
//! Lossy cases (OpenKruise's too): a `v1beta1` `scaleStrategy` that is empty or has
//! `partitionedScaling: false` comes back without it; a `v1beta1` object that itself carries
//! the progressive-create-pod annotation `"true"` comes back with `partitionedScaling: true`;
//! an empty `metadata.annotations: {}` beside a moved annotation comes back absent.

use kruise_admission::conversion::{ConversionError, VersionMapping};
use serde_json::{Map, Value};

use crate::api::{KIND, PROGRESSIVE_CREATE_POD_ANNOTATION};

/// On a stored (`v1beta1`) object: its `v1alpha1` form said `rollingUpdateType: Surging`.
pub const SURGING_ANNOTATION: &str = "daemonset.kruise.io/v1alpha1-surging";

/// The `/convert` webhook's converter for DaemonSet.
#[derive(Debug, Clone, Copy, Default)]
pub struct DaemonSetConverter;

fn object_at<'a>(
    parent: &'a mut Map<String, Value>,
    path: &[&str],
) -> Option<&'a mut Map<String, Value>> {
    path.iter()
        .try_fold(parent, |map, key| map.get_mut(*key)?.as_object_mut())
}

/// Removes `key` from `metadata.annotations`, and the map itself if that emptied it.
fn take_annotation(object: &mut Map<String, Value>, key: &str) -> Option<Value> {
    let metadata = object_at(object, &["metadata"])?;
    let annotations = metadata.get_mut("annotations")?.as_object_mut()?;
    let value = annotations.remove(key)?;
    if annotations.is_empty() {
        metadata.remove("annotations");
    }
    Some(value)
}

/// Sets `metadata.annotations[key] = "true"`, creating what is missing.
fn set_annotation(object: &mut Map<String, Value>, key: &str) {
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(annotations) = annotations.as_object_mut() {
        annotations.insert(key.into(), "true".into());
    }
}

fn annotation_is_true(object: &mut Map<String, Value>, key: &str) -> bool {
    object_at(object, &["metadata", "annotations"])
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
        == Some("true")
}

fn rolling_update_type(object: &mut Map<String, Value>) -> Option<&mut Value> {
    object_at(object, &["spec", "updateStrategy", "rollingUpdate"])?.get_mut("rollingUpdateType")
}

/// Moves `status[from]` to `status[to]`.
fn rename_status_field(object: &mut Map<String, Value>, from: &str, to: &str) {
    if let Some(status) = object_at(object, &["status"])
        && let Some(value) = status.remove(from)
    {
        status.insert(to.into(), value);
    }
}

impl VersionMapping for DaemonSetConverter {
    fn kind(&self) -> &str {
        KIND
    }

    /// `v1alpha1` -> `v1beta1` (OpenKruise's `ConvertTo`).
    fn spoke_to_hub(&self, object: &mut Map<String, Value>) -> Result<(), ConversionError> {
        if annotation_is_true(object, PROGRESSIVE_CREATE_POD_ANNOTATION) {
            take_annotation(object, PROGRESSIVE_CREATE_POD_ANNOTATION);
            if let Some(spec) = object_at(object, &["spec"]) {
                spec.insert(
                    "scaleStrategy".into(),
                    serde_json::json!({"partitionedScaling": true}),
                );
            }
        }
        if let Some(type_) = rolling_update_type(object)
            && type_.as_str() == Some("Surging")
        {
            *type_ = "Standard".into();
            set_annotation(object, SURGING_ANNOTATION);
        }
        rename_status_field(object, "daemonSetHash", "updateRevision");
        Ok(())
    }

    /// `v1beta1` -> `v1alpha1` (OpenKruise's `ConvertFrom`).
    fn hub_to_spoke(&self, object: &mut Map<String, Value>) -> Result<(), ConversionError> {
        let partitioned = object_at(object, &["spec"])
            .and_then(|spec| spec.remove("scaleStrategy"))
            .and_then(|s| s.get("partitionedScaling").and_then(Value::as_bool))
            == Some(true);
        if partitioned {
            set_annotation(object, PROGRESSIVE_CREATE_POD_ANNOTATION);
        }
        if annotation_is_true(object, SURGING_ANNOTATION)
            && let Some(type_) = rolling_update_type(object)
            && type_.as_str() == Some("Standard")
        {
            *type_ = "Surging".into();
            take_annotation(object, SURGING_ANNOTATION);
        }
        rename_status_field(object, "updateRevision", "daemonSetHash");
        Ok(())
    }
}

#[cfg(test)]
mod tests;
