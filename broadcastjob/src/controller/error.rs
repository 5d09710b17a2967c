//! The reconciles' errors, one variant per step.

use kruise_runtime::ReconcileError;
use kruise_runtime::errors::{ShellError, WriteError};

/// Which step of a reconcile failed. Categories label `controller_runtime_reconcile_errors`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A step every controller shares: expectations, status.
    #[error(transparent)]
    Shell(#[from] ShellError),
    /// Creating a pod or a child.
    #[error("creating {0}")]
    Create(#[source] WriteError),
    /// Deleting a pod, a child or the job itself.
    #[error("deleting {0}")]
    Delete(#[source] WriteError),
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::Shell(e) => e.category(),
            Error::Create(_) => "create",
            Error::Delete(_) => "delete",
        }
    }

    fn is_conflict(&self) -> bool {
        match self {
            Error::Shell(e) => e.is_conflict(),
            Error::Create(e) | Error::Delete(e) => e.is_conflict(),
        }
    }
}
