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
    /// Execute: creating a pod or its claims.
    #[error("creating pod {0}")]
    CreatePod(#[source] WriteError),
    /// Execute: deleting a pod or its claims.
    #[error("deleting {0}")]
    DeletePod(#[source] WriteError),
    /// Execute: PVC clean-up or re-assignment.
    #[error("updating claim {0}")]
    Pvc(#[source] WriteError),
    /// Execute: writing the CloneSet's spec (`podsToDelete`).
    #[error("updating cloneset {0}")]
    CloneSet(#[source] WriteError),
    /// Execute: a pod's planned status did not encode (never written as `null`).
    #[error("encoding the status of pod {name}: {source}")]
    Encode {
        /// Pod name.
        name: String,
        /// The encoder's error.
        #[source]
        source: serde_json::Error,
    },
}

impl Error {
    /// A pod patch that failed (in-place update, lifecycle, release, specified-delete label,
    /// status).
    pub(super) fn update_pod(name: &str, source: kube::Error) -> Self {
        ShellError::UpdatePod(WriteError {
            name: name.to_string(),
            source,
        })
        .into()
    }
}

impl Error {
    /// True when the error is a pod write (create or patch) the API server refused as
    /// invalid (422): the same write fails the same way until the CloneSet changes.
    pub(super) fn is_invalid_pod_write(&self) -> bool {
        match self {
            Error::Shell(ShellError::UpdatePod(e)) | Error::CreatePod(e) => is_invalid(&e.source),
            _ => false,
        }
    }
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::Shell(e) => e.category(),
            Error::CreatePod(_) => "create_pods",
            Error::DeletePod(_) => "delete_pods",
            Error::Pvc(_) => "pvcs",
            Error::CloneSet(_) => "update_cloneset",
            Error::Encode { .. } => "encode",
        }
    }

    fn is_conflict(&self) -> bool {
        match self {
            Error::Shell(e) => e.is_conflict(),
            Error::Encode { .. } => false,
            Error::CreatePod(e) | Error::DeletePod(e) | Error::Pvc(e) | Error::CloneSet(e) => {
                e.is_conflict()
            }
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
        let other = Error::CreatePod(WriteError {
            name: "web-abcde".into(),
            source: kruise_runtime::errors::not_found("pod web-abcde"),
        });
        assert!(!other.is_conflict());
        assert_eq!(other.category(), "create_pods");
    }
}
