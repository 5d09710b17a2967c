//! The reconcile's errors, one variant per step (and per kind of write in the execute step).

use kruise_runtime::ReconcileError;
use kruise_runtime::controller::is_invalid;
use kruise_runtime::errors::{ShellError, WriteError};

/// Which step of a reconcile failed. Categories label `controller_runtime_reconcile_errors`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A step every workload controller shares: expectations, revisions, pod patches, status.
    #[error(transparent)]
    Shell(#[from] ShellError),
    /// Execute: PVC clean-up or re-assignment.
    #[error("updating claim {0}")]
    Pvc(#[source] WriteError),
    /// Execute: writing the CloneSet's spec (`podsToDelete`).
    #[error("updating cloneset {0}")]
    CloneSet(#[source] WriteError),
}

impl Error {
    /// True when the error is a pod write (create or patch) the API server refused as
    /// invalid (422): the same write fails the same way until the CloneSet changes.
    pub(super) fn is_invalid_pod_write(&self) -> bool {
        match self {
            Error::Shell(ShellError::UpdatePod(e) | ShellError::CreatePod(e)) => {
                is_invalid(&e.source)
            }
            _ => false,
        }
    }
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::Shell(e) => e.category(),
            Error::Pvc(_) => "pvcs",
            Error::CloneSet(_) => "update_cloneset",
        }
    }

    fn is_conflict(&self) -> bool {
        match self {
            Error::Shell(e) => e.is_conflict(),
            Error::Pvc(e) | Error::CloneSet(e) => e.is_conflict(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicts_are_quiet() {
        let conflict = Error::CloneSet(WriteError {
            name: "web".into(),
            source: kube::Error::Api(Box::new(kube::core::Status {
                code: 409,
                reason: "Conflict".into(),
                ..Default::default()
            })),
        });
        assert!(conflict.is_conflict());
        assert_eq!(conflict.category(), "update_cloneset");
        let other = Error::from(ShellError::create_pod(
            "pod web-abcde",
            kruise_runtime::errors::not_found("pod web-abcde"),
        ));
        assert!(!other.is_conflict());
        assert_eq!(other.category(), "create_pods");
    }
}
