//! The reconcile's errors: every step of this shell is one the kit's workload shells share
//! (expectations, revisions, pod creates, patches and deletes, status), so its error is the
//! kit's `ShellError`; what a failure means for the StatefulSet's conditions is here.

use kruise_runtime::errors::ShellError;

/// The reconcile's error.
pub type Error = ShellError;

/// The status condition a failure sets: `FailedCreatePod` for a create, `FailedUpdatePod`
/// for a pod update or delete, none for the others.
pub(super) fn failure_condition(error: &Error) -> Option<&'static str> {
    match error {
        ShellError::CreatePod(_) => Some(crate::api::condition::FAILED_CREATE_POD),
        ShellError::DeletePod(_) | ShellError::UpdatePod(_) => {
            Some(crate::api::condition::FAILED_UPDATE_POD)
        }
        _ => None,
    }
}
