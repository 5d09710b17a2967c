//! `v1alpha1` <-> `v1beta1` conversion, as OpenKruise's `containerrecreaterequest_conversion.go`
//! maps it (v1beta1 is the hub). The spec is the same in both versions. Two status fields
//! exist only in v1beta1; v1alpha1 carries them as annotations:
//!
//! * `status.containerStatusSnapshot` <-> `crr.apps.kruise.io/sync-container-statuses` (JSON);
//! * the True `PreRecreateGrace` condition <-> `crr.apps.kruise.io/unready-acquired` (its
//!   `lastTransitionTime`, RFC 3339 in UTC).
//!
//! Unlike OpenKruise, which keeps the legacy annotations on the v1beta1 object too, the hub
//! form holds only the typed fields: a v1alpha1-created request reads in v1beta1 with typed
//! fields and no legacy annotations, and converting back yields the annotations again. An
//! annotation that does not parse is kept as it is (OpenKruise drops it with a warning).

use jiff::Timestamp;
use kruise_admission::conversion::{
    ConversionError, VersionMapping, object_field, remove_if_empty,
};
use serde_json::{Map, Value, json};

use crate::api::{
    KIND, PRE_RECREATE_GRACE, SYNC_CONTAINER_STATUSES_KEY, SyncContainerStatus,
    UNREADY_ACQUIRED_KEY,
};

/// The condition's reason, as OpenKruise writes it.
pub const PRE_RECREATE_GRACE_REASON: &str = "PreRecreateGrace";
/// The condition's message, as OpenKruise writes it.
pub const PRE_RECREATE_GRACE_MESSAGE: &str =
    "Pod has been forced to not-ready for unreadyGracePeriodSeconds drain";

/// The `/convert` converter for ContainerRecreateRequest.
#[derive(Debug, Clone, Copy, Default)]
pub struct CrrConverter;

/// `time` as OpenKruise writes it: RFC 3339 in UTC, whole seconds.
pub fn rfc3339_seconds(time: Timestamp) -> String {
    time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The True `PreRecreateGrace` condition acquired at `time`.
pub fn pre_recreate_grace_condition(time: &str) -> Value {
    json!({
        "type": PRE_RECREATE_GRACE,
        "status": "True",
        "lastTransitionTime": time,
        "reason": PRE_RECREATE_GRACE_REASON,
        "message": PRE_RECREATE_GRACE_MESSAGE,
    })
}

impl VersionMapping for CrrConverter {
    fn kind(&self) -> &str {
        KIND
    }

    fn spoke_to_hub(&self, object: &mut Map<String, Value>) -> Result<(), ConversionError> {
        let metadata = object_field(object, "metadata", KIND, "metadata")?;
        let mut snapshot = None;
        let mut acquired = None;
        if let Some(annotations) = metadata
            .get_mut("annotations")
            .and_then(Value::as_object_mut)
        {
            let parsed = annotations
                .get(SYNC_CONTAINER_STATUSES_KEY)
                .and_then(Value::as_str)
                .filter(|raw| !raw.is_empty())
                .and_then(|raw| serde_json::from_str::<Vec<SyncContainerStatus>>(raw).ok());
            if let Some(statuses) = parsed {
                annotations.remove(SYNC_CONTAINER_STATUSES_KEY);
                snapshot = Some(statuses);
            }
            let parsed = annotations
                .get(UNREADY_ACQUIRED_KEY)
                .and_then(Value::as_str)
                .and_then(|raw| raw.parse::<Timestamp>().ok());
            if let Some(time) = parsed {
                annotations.remove(UNREADY_ACQUIRED_KEY);
                acquired = Some(rfc3339_seconds(time));
            }
        }
        if snapshot.is_none() && acquired.is_none() {
            return Ok(());
        }
        remove_if_empty(metadata, "annotations");
        let status = object_field(object, "status", KIND, "status")?;
        if let Some(statuses) = snapshot {
            let encoded = serde_json::to_value(statuses).map_err(|_| not_an_object("status"))?;
            status.insert("containerStatusSnapshot".into(), encoded);
        }
        if let Some(time) = acquired {
            status.insert(
                "conditions".into(),
                Value::Array(vec![pre_recreate_grace_condition(&time)]),
            );
        }
        Ok(())
    }

    fn hub_to_spoke(&self, object: &mut Map<String, Value>) -> Result<(), ConversionError> {
        let mut snapshot = None;
        let mut acquired = None;
        if let Some(status) = object.get_mut("status").and_then(Value::as_object_mut) {
            if let Some(raw) = status.remove("containerStatusSnapshot") {
                let statuses: Vec<SyncContainerStatus> = serde_json::from_value(raw)
                    .map_err(|_| not_an_object("status.containerStatusSnapshot"))?;
                snapshot = Some(
                    serde_json::to_string(&statuses)
                        .map_err(|_| not_an_object("status.containerStatusSnapshot"))?,
                );
            }
            if let Some(Value::Array(conditions)) = status.remove("conditions") {
                acquired = conditions
                    .iter()
                    .find(|c| c["type"] == PRE_RECREATE_GRACE && c["status"] == "True")
                    .and_then(|c| c["lastTransitionTime"].as_str())
                    .and_then(|t| t.parse::<Timestamp>().ok())
                    .map(rfc3339_seconds);
            }
        }
        if snapshot.is_none() && acquired.is_none() {
            return Ok(());
        }
        let metadata = object_field(object, "metadata", KIND, "metadata")?;
        let annotations = object_field(metadata, "annotations", KIND, "metadata.annotations")?;
        if let Some(raw) = snapshot {
            annotations.insert(SYNC_CONTAINER_STATUSES_KEY.into(), raw.into());
        }
        if let Some(time) = acquired {
            annotations.insert(UNREADY_ACQUIRED_KEY.into(), time.into());
        }
        Ok(())
    }
}

fn not_an_object(field: &str) -> ConversionError {
    ConversionError::NotAnObject {
        kind: KIND.to_string(),
        field: field.to_string(),
    }
}

#[cfg(test)]
mod tests;
