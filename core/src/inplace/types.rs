//! Wire types of the in-place annotations.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;

use crate::pods::PodView;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::api::keys::{
    INPLACE_UPDATE_GRACE_KEY, INPLACE_UPDATE_GRACE_KEY_OLD, INPLACE_UPDATE_STATE_KEY,
    INPLACE_UPDATE_STATE_KEY_OLD,
};

/// What to change in a pod (OpenKruise `inplaceupdate.UpdateSpec`). Stored whole in
/// `apps.kruise.io/inplace-update-grace` while the grace period runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateSpec {
    /// Target revision (ControllerRevision name, or the workload's own revision string).
    #[serde(default)]
    pub revision: String,
    /// New image per container name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub container_images: BTreeMap<String, String>,
    /// Labels / annotations each container reads through the downward API, with new values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub container_ref_metadata: BTreeMap<String, ObjectMeta>,
    /// New cpu/memory per container name (`InPlaceWorkloadVerticalScaling`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub container_resources: BTreeMap<String, ResourceRequirements>,
    /// Strategic-merge patch of the pod's metadata (`{"metadata":{...}}`); base64 on the wire.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "go_bytes_json"
    )]
    #[schemars(with = "Option<String>")]
    pub meta_data_patch: Option<Value>,
    /// Containers must restart to pick up env from changed metadata.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub update_env_from_metadata: bool,
    /// Grace period between `InPlaceUpdateReady=False` and the spec change.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub grace_seconds: i32,
    /// Old template (OpenKruise leaves it unset; kept for round-tripping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_template: Option<Value>,
    /// New template (OpenKruise leaves it unset; kept for round-tripping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_template: Option<Value>,
}

impl UpdateSpec {
    /// Only resources change (`VerticalUpdateOnly`).
    pub fn vertical_update_only(&self) -> bool {
        !self.container_resources.is_empty()
            && self.container_images.is_empty()
            && !self.update_env_from_metadata
    }
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// `apps.kruise.io/inplace-update-state` (OpenKruise `pub.InPlaceUpdateState`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdateState {
    /// Target revision.
    #[serde(default)]
    pub revision: String,
    /// When the update started.
    pub update_timestamp: Time,
    /// Per updated container, the status recorded before the update (imageID). `null` until
    /// the spec is applied, as OpenKruise writes it.
    #[serde(default)]
    pub last_container_statuses: Option<BTreeMap<String, ContainerStatusRecord>>,
    /// Env-from-metadata restart requested.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub update_env_from_metadata: bool,
    /// Resources changed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub update_resources: bool,
    /// Images changed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub update_images: bool,
    /// Images for lower-priority containers, applied in a later batch.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub next_container_images: BTreeMap<String, String>,
    /// Ref-metadata for lower-priority containers, applied in a later batch.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub next_container_ref_metadata: BTreeMap<String, ObjectMeta>,
    /// Resources for lower-priority containers, applied in a later batch.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub next_container_resources: BTreeMap<String, ResourceRequirements>,
    /// What must hold before the next batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_check_before_next: Option<PreCheckBeforeNext>,
    /// Batches applied so far.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_batches_record: Vec<ContainerBatch>,
}

impl InPlaceUpdateState {
    /// Whether later batches remain.
    pub fn has_next_batch(&self) -> bool {
        !self.next_container_images.is_empty()
            || !self.next_container_ref_metadata.is_empty()
            || !self.next_container_resources.is_empty()
    }
}

/// Pre-check before the next container batch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreCheckBeforeNext {
    /// Containers that must be ready first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers_required_ready: Vec<String>,
}

/// One applied container batch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerBatch {
    /// When it was applied.
    pub timestamp: Time,
    /// Containers in it (sorted).
    #[serde(default)]
    pub containers: Vec<String>,
}

/// A container's recorded status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatusRecord {
    /// The imageID the container ran before the update.
    #[serde(default, rename = "imageID", skip_serializing_if = "String::is_empty")]
    pub image_id: String,
}

fn annotation<'a, P: PodView + ?Sized>(pod: &'a P, key: &str, old: &str) -> Option<&'a str> {
    pod.annotation(key).or_else(|| pod.annotation(old))
}

/// The pod's in-place update state (new key, else the legacy key). `Some(Err)` if unparsable.
pub fn update_state<P: PodView + ?Sized>(
    pod: &P,
) -> Option<Result<InPlaceUpdateState, serde_json::Error>> {
    annotation(pod, INPLACE_UPDATE_STATE_KEY, INPLACE_UPDATE_STATE_KEY_OLD)
        .map(serde_json::from_str)
}

/// The pending grace-period spec (new key, else the legacy key). `Some(Err)` if unparsable.
pub fn grace_spec<P: PodView + ?Sized>(pod: &P) -> Option<Result<UpdateSpec, serde_json::Error>> {
    annotation(pod, INPLACE_UPDATE_GRACE_KEY, INPLACE_UPDATE_GRACE_KEY_OLD)
        .map(serde_json::from_str)
}

/// Go marshals `[]byte` as base64 (standard alphabet, padded); the bytes here are JSON.
mod go_bytes_json {
    use super::*;

    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    pub fn encode(data: &[u8]) -> String {
        let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
        for chunk in data.chunks(3) {
            let b = [
                chunk[0],
                *chunk.get(1).unwrap_or(&0),
                *chunk.get(2).unwrap_or(&0),
            ];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    pub fn decode(s: &str) -> Option<Vec<u8>> {
        let s = s.trim_end_matches('=');
        let mut out = Vec::with_capacity(s.len() * 3 / 4);
        let mut acc = 0u32;
        let mut bits = 0u32;
        for c in s.bytes() {
            let v = ALPHABET.iter().position(|&a| a == c)? as u32;
            acc = (acc << 6) | v;
            bits += 6;
            if bits >= 8 {
                bits -= 8;
                out.push(((acc >> bits) & 0xff) as u8);
            }
        }
        Some(out)
    }

    pub fn serialize<S: Serializer>(v: &Option<Value>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.serialize_str(&encode(kruise_compat::gojson::to_go_json(v).as_bytes())),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
        let Some(s) = Option::<String>::deserialize(d)? else {
            return Ok(None);
        };
        let bytes =
            decode(&s).ok_or_else(|| serde::de::Error::custom("metaDataPatch: invalid base64"))?;
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(serde::de::Error::custom)
    }

    #[cfg(test)]
    #[test]
    fn base64_round_trip() {
        for s in ["", "a", "ab", "abc", "abcd", "{\"metadata\":{}}"] {
            let e = encode(s.as_bytes());
            assert_eq!(decode(&e).unwrap(), s.as_bytes());
        }
        assert_eq!(encode(b"{}"), "e30=");
    }
}
