//! The pieces of the webhooks a family serves for its own kinds
//! (`kruise_core::admission::crd_webhooks`), with the one that writes the protection log.

pub use kruise_core::admission::crd_webhooks::*;

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use serde_json::Value;

use crate::protection_log;

/// OpenKruise's `ValidateWorkloadDeletion`: on DELETE of an object not already being
/// deleted, `policy.kruise.io/delete-protection: Always` forbids deleting the workload,
/// `Cascading` forbids it while the replicas at `replicas_pointer` (e.g. `/spec/replicas`;
/// absent counts as 1, the API default) are above 0. `None` lets the request through.
pub fn deny_protected_deletion(
    request: &AdmissionRequest<DynamicObject>,
    replicas_pointer: &str,
) -> Option<AdmissionResponse> {
    if request.operation != Operation::Delete || request.sub_resource.is_some() {
        return None;
    }
    let old = request.old_object.as_ref()?;
    if old.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let replicas = old
        .data
        .pointer(replicas_pointer)
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let message = deletion_protection(old.metadata.labels.as_ref(), replicas)?;
    protection_log::record(
        protection_log::EVENT_DELETION_PROTECTION,
        &request.kind.kind,
        old.metadata.namespace.as_deref().unwrap_or_default(),
        old.metadata.name.as_deref().unwrap_or_default(),
        request.user_info.username.as_deref().unwrap_or_default(),
    );
    Some(deny_forbidden(request, message))
}
