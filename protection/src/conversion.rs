//! `v1alpha1` <-> `v1beta1` conversion of PodUnavailableBudget, as OpenKruise's
//! `podunavailablebudget_conversion.go` maps it (v1beta1 is the hub): v1alpha1 carries
//! `protectOperations` and `protectTotalReplicas` as the annotations
//! `kruise.io/pub-protect-operations` (a comma list) and `pub.kruise.io/protect-total-replicas`.
//!
//! * to v1beta1: the annotations are parsed into the spec fields (an unknown operation or a
//!   count that is not an int32 fails the conversion, with OpenKruise's message); the
//!   annotations stay on the object, as OpenKruise leaves them;
//! * to v1alpha1: the spec fields are written into the annotations (or the annotations
//!   removed when the fields are unset) and leave the spec.
//!
//! Beyond OpenKruise, which drops `spec.ignoredPodSelector` on the way to v1alpha1 (so a
//! v1alpha1 client writing the object back erases it), kruise-rs carries it as JSON in the
//! annotation `pub.kruise.io/ignored-pod-selector` both ways. Every other field passes
//! through unchanged, fields the types do not know included.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_admission::conversion::{self, ConversionError, VersionMapping, convert_object};
use serde_json::{Map, Value};

use crate::api::{
    GROUP, IGNORED_POD_SELECTOR_ANNOTATION, KIND, PROTECT_OPERATIONS_ANNOTATION,
    PROTECT_TOTAL_REPLICAS_ANNOTATION, PubOperation,
};

/// The `/convert` converter for PodUnavailableBudget (`policy.kruise.io`).
#[derive(Debug, Clone, Copy, Default)]
pub struct PubConverter;

impl VersionMapping for PubConverter {
    fn kind(&self) -> &str {
        KIND
    }

    fn group(&self) -> &str {
        GROUP
    }

    fn spoke_to_hub(&self, object: &mut Map<String, Value>) -> Result<(), ConversionError> {
        to_v1beta1(object)
    }

    fn hub_to_spoke(&self, object: &mut Map<String, Value>) -> Result<(), ConversionError> {
        to_v1alpha1(object)
    }
}

/// Converts one PodUnavailableBudget to `desired_api_version`.
pub fn convert(object: Value, desired_api_version: &str) -> Result<Value, ConversionError> {
    convert_object(&PubConverter, object, desired_api_version)
}

/// v1alpha1 -> v1beta1: the annotations become spec fields (and stay).
fn to_v1beta1(object: &mut Map<String, Value>) -> Result<(), ConversionError> {
    let annotation = |key: &str| {
        object
            .get("metadata")
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    let operations = annotation(PROTECT_OPERATIONS_ANNOTATION)
        .map(|v| parse_operations(&v))
        .transpose()?
        .filter(|ops| !ops.is_empty());
    let total_replicas = annotation(PROTECT_TOTAL_REPLICAS_ANNOTATION)
        .map(|v| {
            v.parse::<i32>().map_err(|e| {
                ConversionError::Invalid(format!(
                    "failed to parse {PROTECT_TOTAL_REPLICAS_ANNOTATION}: {e}"
                ))
            })
        })
        .transpose()?;
    let ignored = annotation(IGNORED_POD_SELECTOR_ANNOTATION)
        .map(|v| {
            serde_json::from_str::<LabelSelector>(&v)
                .and_then(serde_json::to_value)
                .map_err(|e| {
                    ConversionError::Invalid(format!(
                        "failed to parse {IGNORED_POD_SELECTOR_ANNOTATION}: {e}"
                    ))
                })
        })
        .transpose()?;
    if operations.is_none() && total_replicas.is_none() && ignored.is_none() {
        return Ok(());
    }
    let spec = object_field(object, "spec")?;
    if let Some(ops) = operations {
        spec.insert("protectOperations".into(), Value::from(ops));
    }
    if let Some(n) = total_replicas {
        spec.insert("protectTotalReplicas".into(), Value::from(n));
    }
    if let Some(selector) = ignored {
        spec.insert("ignoredPodSelector".into(), selector);
    }
    Ok(())
}

/// v1beta1 -> v1alpha1: the spec fields become annotations (unset fields remove theirs).
fn to_v1alpha1(object: &mut Map<String, Value>) -> Result<(), ConversionError> {
    let (operations, total_replicas, ignored) = match object.get_mut("spec") {
        Some(Value::Object(spec)) => (
            spec.remove("protectOperations"),
            spec.remove("protectTotalReplicas"),
            spec.remove("ignoredPodSelector"),
        ),
        _ => (None, None, None),
    };
    let operations = operations
        .as_ref()
        .and_then(Value::as_array)
        .map(|ops| {
            ops.iter()
                .filter_map(Value::as_str)
                .filter(|op| !op.is_empty())
                .collect::<Vec<_>>()
                .join(",")
        })
        .filter(|joined| !joined.is_empty());
    let total_replicas = total_replicas
        .as_ref()
        .and_then(Value::as_i64)
        .map(|n| n.to_string());
    let ignored = ignored.filter(|s| !s.is_null()).map(|s| s.to_string());
    let metadata = object_field(object, "metadata")?;
    let annotations = object_field(metadata, "annotations")?;
    for (key, value) in [
        (PROTECT_OPERATIONS_ANNOTATION, operations),
        (PROTECT_TOTAL_REPLICAS_ANNOTATION, total_replicas),
        (IGNORED_POD_SELECTOR_ANNOTATION, ignored),
    ] {
        match value {
            Some(v) => {
                annotations.insert(key.into(), Value::from(v));
            }
            None => {
                annotations.remove(key);
            }
        }
    }
    if annotations.is_empty() {
        metadata.remove("annotations");
    }
    Ok(())
}

/// OpenKruise's `parsePubProtectOperations`: `DELETE, EVICT` -> `["DELETE", "EVICT"]`.
fn parse_operations(value: &str) -> Result<Vec<String>, ConversionError> {
    value
        .split(',')
        .map(str::trim)
        .filter(|op| !op.is_empty())
        .map(|op| match PubOperation::parse(op) {
            Some(known) => Ok(known.as_str().to_string()),
            None => Err(ConversionError::Invalid(format!(
                "invalid {PROTECT_OPERATIONS_ANNOTATION} value {op:?}"
            ))),
        })
        .collect()
}

/// The object at `field` (`spec`, `metadata`, `annotations`), created empty when absent or
/// null.
fn object_field<'a>(
    object: &'a mut Map<String, Value>,
    field: &str,
) -> Result<&'a mut Map<String, Value>, ConversionError> {
    conversion::object_field(object, field, KIND, field)
}

#[cfg(test)]
mod tests;
