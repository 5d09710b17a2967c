//! The pod annotations injection reads and writes: the SidecarSet hash annotations (in
//! Go's JSON encoding, byte for byte) and `patchPodMetadata`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::InjectError;
use crate::api::{SidecarSetPatchPodMetadata, SidecarSetPatchPolicy};

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
    Ok(kruise_compat::gojson::to_go_json(&doc))
}
