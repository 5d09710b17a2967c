//! The reconcile's errors, one variant per step (and per kind of write in the execute step).

use kruise_runtime::ReconcileError;
use kruise_runtime::errors::{ShellError, WriteError};

/// Which step of a reconcile failed. Categories label `controller_runtime_reconcile_errors`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A step every workload controller shares: expectations, revisions, pod patches, status.
    #[error(transparent)]
    Shell(#[from] ShellError),
    /// Execute: creating a pod or one of its claims.
    #[error("creating {0}")]
    CreatePod(#[source] WriteError),
    /// Execute: deleting a pod.
    #[error("deleting pod {0}")]
    DeletePod(#[source] WriteError),
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
    /// A pod patch that failed.
    pub(super) fn update_pod(name: &str, source: kube::Error) -> Self {
        ShellError::UpdatePod(WriteError {
            name: name.to_string(),
            source,
        })
        .into()
    }

    /// The status condition this failure sets: `FailedCreatePod` for a create,
    /// `FailedUpdatePod` for a pod update or delete, none for the others.
    pub(super) fn condition(&self) -> Option<&'static str> {
        match self {
            Error::CreatePod(_) => Some(crate::api::condition::FAILED_CREATE_POD),
            Error::DeletePod(_) | Error::Shell(ShellError::UpdatePod(_)) => {
                Some(crate::api::condition::FAILED_UPDATE_POD)
            }
            _ => None,
        }
    }
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::Shell(e) => e.category(),
            Error::CreatePod(_) => "create_pods",
            Error::DeletePod(_) => "delete_pods",
            Error::Encode { .. } => "encode",
        }
    }

    fn is_conflict(&self) -> bool {
        match self {
            Error::Shell(e) => e.is_conflict(),
            Error::Encode { .. } => false,
            Error::CreatePod(e) | Error::DeletePod(e) => e.is_conflict(),
        }
    }
}
