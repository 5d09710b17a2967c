//! The reconcile's errors, one variant per step (and per kind of write in the execute step).

use kruise_runtime::ReconcileError;
use kruise_runtime::errors::{ShellError, WriteError};

/// Which step of a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A step every controller shares: expectations, creates, deletes, status.
    #[error(transparent)]
    Shell(#[from] ShellError),
    /// Marking a pod `PreparingDelete`.
    #[error("marking {0} PreparingDelete")]
    PrepareDelete(#[source] WriteError),
    /// Updating a pod in place, or finishing such an update.
    #[error("updating {0} in place")]
    InPlace(#[source] WriteError),
    /// Another in-place write to the pod is under way, or the cache does not show the last
    /// one yet (retried shortly, as a conflict).
    #[error("pod {0} is being written")]
    Busy(String),
    /// Reading a pod to confirm what the cache shows of it.
    #[error("reading pod {0}")]
    ReadPod(#[source] WriteError),
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::Shell(e) => e.category(),
            Error::PrepareDelete(_) => "lifecycle",
            Error::InPlace(_) | Error::Busy(_) => "update",
            Error::ReadPod(_) => "read_pod",
        }
    }

    fn is_conflict(&self) -> bool {
        match self {
            Error::Shell(e) => e.is_conflict(),
            Error::PrepareDelete(e) | Error::InPlace(e) | Error::ReadPod(e) => e.is_conflict(),
            Error::Busy(_) => true,
        }
    }
}
