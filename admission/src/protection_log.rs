//! OpenKruise's protection audit log (`--protection-log-path`): every operation a protection
//! refuses — a pod disruption a PodUnavailableBudget holds, a deletion the
//! `policy.kruise.io/delete-protection` label holds — appended as one JSON line to
//! `<path>/protection.log`, with OpenKruise's fields and their order:
//! `{"Event":"PodUnavailableBudget","Kind":"Deployment","Namespace":"default","Name":"web","UserAgent":"alice"}`.
//! Allowed operations are not logged, as in OpenKruise.
//!
//! Process-wide, as OpenKruise's logger: the handlers that refuse live in several families
//! and are composed by kruise-webhook, which opens the log once from its flag; until then
//! (and in every other process) [`record`] does nothing.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use serde::Serialize;

/// `Event` of a PodUnavailableBudget refusal.
pub const EVENT_PUB: &str = "PodUnavailableBudget";
/// `Event` of a deletion-protection refusal.
pub const EVENT_DELETION_PROTECTION: &str = "DeletionProtection";
/// The file in the log's directory.
pub const FILE_NAME: &str = "protection.log";

static LOG: OnceLock<Mutex<File>> = OnceLock::new();

/// Why the log could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ProtectionLogError {
    /// Creating the directory or opening the file failed.
    #[error("opening the protection log {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Opens (creating it and its directory) `<dir>/protection.log` for appending; records go
/// there from now on. A second call keeps the first file.
pub fn init(dir: &Path) -> Result<(), ProtectionLogError> {
    let path = dir.join(FILE_NAME);
    let open = || {
        std::fs::create_dir_all(dir)?;
        OpenOptions::new().create(true).append(true).open(&path)
    };
    let file = open().map_err(|source| ProtectionLogError::Open {
        path: path.clone(),
        source,
    })?;
    let _ = LOG.set(Mutex::new(file));
    Ok(())
}

/// One record, OpenKruise's `ProtectionLoggerInfo`.
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Record<'a> {
    event: &'a str,
    kind: &'a str,
    namespace: &'a str,
    name: &'a str,
    user_agent: &'a str,
}

/// The line of one refusal (without the newline).
pub fn line(event: &str, kind: &str, namespace: &str, name: &str, user_agent: &str) -> String {
    let record = Record {
        event,
        kind,
        namespace,
        name,
        user_agent,
    };
    // Serialising string fields cannot fail.
    serde_json::to_string(&record).unwrap_or_default()
}

/// Appends the refusal to the log, when one is open; a failed write is logged, never fatal.
pub fn record(event: &str, kind: &str, namespace: &str, name: &str, user_agent: &str) {
    let Some(log) = LOG.get() else {
        return;
    };
    let mut text = line(event, kind, namespace, name, user_agent);
    text.push('\n');
    let written = match log.lock() {
        Ok(mut file) => file.write_all(text.as_bytes()),
        Err(_) => return,
    };
    if let Err(e) = written {
        tracing::warn!(error = %e, "writing the protection log");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_openkruise_json_line() {
        assert_eq!(
            line(
                EVENT_PUB,
                "ReplicaSet",
                "default",
                "web-7d4b9",
                "system:serviceaccount:kube-system:generic"
            ),
            r#"{"Event":"PodUnavailableBudget","Kind":"ReplicaSet","Namespace":"default","Name":"web-7d4b9","UserAgent":"system:serviceaccount:kube-system:generic"}"#
        );
        assert_eq!(
            line(
                EVENT_DELETION_PROTECTION,
                "Namespace",
                "",
                "team-a",
                "alice"
            ),
            r#"{"Event":"DeletionProtection","Kind":"Namespace","Namespace":"","Name":"team-a","UserAgent":"alice"}"#
        );
    }
}
