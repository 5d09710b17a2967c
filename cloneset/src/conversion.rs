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
//! * everything else — metadata, status, the template, and fields the types do not know —
//!   is carried over as it came ([`kruise_admission::conversion::VersionMapping`]).
//!
//! Lossy cases (all OpenKruise's too; see the `documented_lossy_cases` test): an alpha
//! `OnDelete` strategy drops partition/maxUnavailable/maxSurge/paused/priority/scatter/
//! inPlaceUpdateStrategy; an empty or unknown alpha type becomes `ReCreate`; an empty
//! `inPlaceUpdateStrategy` (`{}`) disappears; beta `type` unset, `rollingUpdate` unset or
//! `podUpdatePolicy` unset come back as `RollingUpdate` / `{podUpdatePolicy: ReCreate}`;
//! `excludePreparingDelete: true` without the label is lost; beta -> alpha adds the
//! pre-download annotations to metadata; a string `imagePreDownloadParallelism` holding a
//! number comes back as an integer; alpha's own `inPlaceUpdateStrategy.imagePreDownload*`
//! fields (only the annotations count in alpha) are dropped. A field unknown to the types
//! inside beta's `rollingUpdate` lands in alpha's `updateStrategy` (where alpha keeps the
//! rolling fields) and stays there on the way back.

use kruise_admission::conversion::{ConversionError, VersionMapping, object_field};
use kruise_core::api::keys::{
    CLONESET_SCALING_EXCLUDE_PREPARING_DELETE_KEY, IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS_KEY,
    IMAGE_PREDOWNLOAD_PARALLELISM_KEY, IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_KEY,
};
use serde_json::{Map, Value};

use crate::api::KIND;

/// The fields alpha keeps in `updateStrategy` and beta in `updateStrategy.rollingUpdate`
/// (besides `inPlaceUpdateStrategy`, which also changes shape).
const ROLLING_FIELDS: [&str; 6] = [
    "partition",
    "maxUnavailable",
    "maxSurge",
    "paused",
    "priorityStrategy",
    "scatterStrategy",
];

/// The pre-download settings: beta field, alpha annotation.
const PRE_DOWNLOAD: [(&str, &str); 3] = [
    (
        "imagePreDownloadParallelism",
        IMAGE_PREDOWNLOAD_PARALLELISM_KEY,
    ),
    (
        "imagePreDownloadTimeoutSeconds",
        IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_KEY,
    ),
    (
        "imagePreDownloadMinUpdatedReadyPods",
        IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS_KEY,
    ),
];

/// The `/convert` webhook's converter for CloneSet (register it with `kruise_admission`).
#[derive(Debug, Clone, Copy, Default)]
pub struct CloneSetConverter;

impl VersionMapping for CloneSetConverter {
    fn kind(&self) -> &str {
        KIND
    }

    /// `v1alpha1` -> `v1beta1` (OpenKruise's `ConvertTo`).
    fn spoke_to_hub(&self, object: &mut Map<String, Value>) -> Result<(), ConversionError> {
        let metadata = object.get("metadata");
        let exclude = string_at(
            metadata,
            "labels",
            CLONESET_SCALING_EXCLUDE_PREPARING_DELETE_KEY,
        ) == Some("true");
        let pre_download: Vec<(&str, Value)> = PRE_DOWNLOAD
            .iter()
            .filter_map(|(field, key)| {
                let value = string_at(metadata, "annotations", key).filter(|v| !v.is_empty())?;
                pre_download_field(field, value).map(|v| (*field, v))
            })
            .collect();
        let spec = object_field(object, "spec", KIND, "spec")?;

        let scale = object_field(spec, "scaleStrategy", KIND, "spec.scaleStrategy")?;
        let disable_reuse = take_flag(scale, "disablePVCReuse");
        set_flag(scale, "enablePVCReuse", !disable_reuse);
        set_flag(scale, "excludePreparingDelete", exclude);

        let strategy = object_field(spec, "updateStrategy", KIND, "spec.updateStrategy")?;
        let policy = match strategy.get("type").and_then(Value::as_str) {
            Some("OnDelete") => None,
            Some(p @ ("InPlaceIfPossible" | "InPlaceOnly")) => Some(p.to_string()),
            // Empty, unknown or ReCreate.
            _ => Some("ReCreate".to_string()),
        };
        let mut rolling = Map::new();
        for key in ROLLING_FIELDS {
            if let Some(v) = strategy.remove(key) {
                rolling.insert(key.into(), v);
            }
        }
        let in_place = strategy.remove("inPlaceUpdateStrategy");
        let Some(policy) = policy else {
            // OnDelete has no rolling fields.
            strategy.insert("type".into(), "OnDelete".into());
            return Ok(());
        };
        strategy.insert("type".into(), "RollingUpdate".into());
        rolling.insert("podUpdatePolicy".into(), policy.into());
        if let Some(in_place) = in_place_to_hub(in_place, pre_download) {
            rolling.insert("inPlaceUpdateStrategy".into(), Value::Object(in_place));
        }
        strategy.insert("rollingUpdate".into(), Value::Object(rolling));
        Ok(())
    }

    /// `v1beta1` -> `v1alpha1` (OpenKruise's `ConvertFrom`).
    fn hub_to_spoke(&self, object: &mut Map<String, Value>) -> Result<(), ConversionError> {
        let spec = object_field(object, "spec", KIND, "spec")?;

        let scale = object_field(spec, "scaleStrategy", KIND, "spec.scaleStrategy")?;
        let enable_reuse = take_flag(scale, "enablePVCReuse");
        // Alpha carries it as the label, which stays in metadata.
        scale.remove("excludePreparingDelete");
        set_flag(scale, "disablePVCReuse", !enable_reuse);

        let strategy = object_field(spec, "updateStrategy", KIND, "spec.updateStrategy")?;
        let on_delete =
            strategy.remove("type").as_ref().and_then(Value::as_str) == Some("OnDelete");
        let rolling = match strategy.remove("rollingUpdate") {
            Some(Value::Object(r)) => Some(r),
            _ => None,
        };
        let policy = rolling
            .as_ref()
            .and_then(|r| r.get("podUpdatePolicy"))
            .and_then(Value::as_str);
        let alpha_type = match (on_delete, policy) {
            (true, _) => "OnDelete",
            (false, Some(p @ ("InPlaceIfPossible" | "InPlaceOnly"))) => p,
            _ => "ReCreate",
        }
        .to_string();
        strategy.insert("type".into(), alpha_type.into());
        let Some(mut rolling) = rolling else {
            return Ok(());
        };
        rolling.remove("podUpdatePolicy");
        let in_place = rolling.remove("inPlaceUpdateStrategy");
        strategy.extend(rolling);
        let mut annotations = Vec::new();
        if let Some(in_place) = in_place_from_hub(in_place, &mut annotations) {
            strategy.insert("inPlaceUpdateStrategy".into(), Value::Object(in_place));
        }
        if !annotations.is_empty() {
            let metadata = object_field(object, "metadata", KIND, "metadata")?;
            let existing = object_field(metadata, "annotations", KIND, "metadata.annotations")?;
            for (key, value) in annotations {
                existing.insert(key.into(), value.into());
            }
        }
        Ok(())
    }
}

/// `metadata.<map>[key]` as a string.
fn string_at<'a>(metadata: Option<&'a Value>, map: &str, key: &str) -> Option<&'a str> {
    metadata?.get(map)?.get(key)?.as_str()
}

/// Removes a boolean field, reading absent or not-a-boolean as false.
fn take_flag(object: &mut Map<String, Value>, key: &str) -> bool {
    object
        .remove(key)
        .and_then(|v| v.as_bool())
        .unwrap_or(false)
}

/// Writes `true`, or leaves the field out for false (as both versions' types do).
fn set_flag(object: &mut Map<String, Value>, key: &str, on: bool) {
    if on {
        object.insert(key.into(), true.into());
    } else {
        object.remove(key);
    }
}

/// A pre-download annotation's value as the beta field holds it: parallelism is an
/// int-or-string (Go's `intstr.Parse`), the others integers (unparsable ones are ignored, as
/// OpenKruise ignores them).
fn pre_download_field(field: &str, annotation: &str) -> Option<Value> {
    let number = annotation.parse::<i32>().ok();
    if field == "imagePreDownloadParallelism" {
        return Some(number.map_or_else(|| annotation.into(), Value::from));
    }
    number.map(Value::from)
}

/// Alpha's `inPlaceUpdateStrategy` with the pre-download settings from the annotations in
/// place of its own; `None` when there is neither.
fn in_place_to_hub(
    alpha: Option<Value>,
    pre_download: Vec<(&str, Value)>,
) -> Option<Map<String, Value>> {
    let alpha = match alpha {
        Some(Value::Object(m)) => Some(m),
        _ => None,
    };
    if alpha.is_none() && pre_download.is_empty() {
        return None;
    }
    let mut in_place = alpha.unwrap_or_default();
    for (field, _) in PRE_DOWNLOAD {
        in_place.remove(field);
    }
    for (field, value) in pre_download {
        in_place.insert(field.into(), value);
    }
    Some(in_place)
}

/// Beta's `inPlaceUpdateStrategy` without the pre-download settings, which move to
/// `annotations`; `None` when nothing is left and nothing moved.
fn in_place_from_hub(
    beta: Option<Value>,
    annotations: &mut Vec<(&'static str, String)>,
) -> Option<Map<String, Value>> {
    let Some(Value::Object(mut in_place)) = beta else {
        return None;
    };
    for (field, key) in PRE_DOWNLOAD {
        let Some(value) = in_place.remove(field) else {
            continue;
        };
        let text = match value {
            Value::String(s) => s,
            Value::Number(n) => n.to_string(),
            _ => continue,
        };
        annotations.push((key, text));
    }
    if in_place.get("gracePeriodSeconds").and_then(Value::as_i64) == Some(0) {
        in_place.remove("gracePeriodSeconds");
    }
    (!in_place.is_empty() || !annotations.is_empty()).then_some(in_place)
}

#[cfg(test)]
mod tests;
