//! The in-place update engine, as pure functions.
//!
//! 1. [`calculate_update_spec`] diffs two revisions' data and yields an [`UpdateSpec`] — or a
//!    [`RecreateReason`] when the change cannot be made in place.
//! 2. [`begin_update`] turns the spec into the writes for one pod: the `InPlaceUpdateReady=False`
//!    status (sent first, so endpoints drop the pod), then the pod patch carrying the new
//!    images, revision labels, the `apps.kruise.io/inplace-update-state` annotation and — with
//!    a grace period — the `apps.kruise.io/inplace-update-grace` annotation instead of the
//!    spec change.
//! 3. [`refresh`] is called for every pod on every reconcile and finishes whatever is half
//!    done from the annotations alone: the grace period, the next container batch, and
//!    finally `InPlaceUpdateReady=True`.
//! 4. [`check_update_completed`] decides whether the kubelet has finished.
//!
//! The annotations are written exactly as OpenKruise writes them (same JSON field names,
//! `metaDataPatch` as base64 like Go's `[]byte`), so pods updated by either implementation are
//! understood by both.

mod apply;
mod complete;
mod diff;
mod readiness;
mod types;

pub use apply::{
    BeginUpdate, InPlaceWrites, PodWrite, UpdateRequest, apply_spec_to_pod, begin_update,
    container_priority, pod_patch,
};
pub use complete::{CompletionCheck, NotCompleted, RefreshAction, check_update_completed, refresh};
pub use diff::{
    DiffOp, DiffOpKind, InPlaceGates, RecreateReason, calculate_update_spec,
    calculate_update_spec_for_revisions, json_diff, pod_qos_class,
};
pub use readiness::{
    has_inplace_readiness_gate, inject_readiness_gate, needs_unready, not_ready_status,
    ready_status,
};
pub use types::{
    ContainerBatch, ContainerStatusRecord, InPlaceUpdateState, PreCheckBeforeNext, UpdateSpec,
    grace_spec, update_state,
};

#[cfg(test)]
mod priority_tests;
#[cfg(test)]
mod tests;
