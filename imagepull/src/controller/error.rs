//! The reconciles' errors, one variant per step.

use kruise_runtime::ReconcileError;
use kruise_runtime::errors::{ShellError, WriteError};

/// Which step of a reconcile failed. Categories label `controller_runtime_reconcile_errors`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A step every controller shares: expectations, status.
    #[error(transparent)]
    Shell(#[from] ShellError),
    /// Reading what the cache does not hold (secrets, pods).
    #[error("reading {0}")]
    Read(#[source] WriteError),
    /// Creating a NodeImage or a secret copy.
    #[error("creating {0}")]
    Create(#[source] WriteError),
    /// Updating a NodeImage, a secret copy, or a job's finalizers.
    #[error("updating {0}")]
    Update(#[source] WriteError),
    /// Deleting a NodeImage, a secret copy or the job itself.
    #[error("deleting {0}")]
    Delete(#[source] WriteError),
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::Shell(e) => e.category(),
            Error::Read(_) => "read",
            Error::Create(_) => "create",
            Error::Update(_) => "update",
            Error::Delete(_) => "delete",
        }
    }

    fn is_conflict(&self) -> bool {
        match self {
            Error::Shell(e) => e.is_conflict(),
            Error::Read(e) | Error::Create(e) | Error::Update(e) | Error::Delete(e) => {
                e.is_conflict()
            }
        }
    }
}
