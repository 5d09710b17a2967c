//! CloneSets whose pod writes the API server refused as invalid (422): they back off
//! (1 s doubling to 5 minutes) instead of retrying hot, until a write succeeds or the spec
//! changes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use jiff::Timestamp;
use kruise_runtime::controller::invalid_write_backoff;

/// Per CloneSet (`namespace/name`): its pod writes the API server refused as invalid.
#[derive(Debug, Default)]
pub(super) struct RefusedPodWrites(Mutex<HashMap<String, Refusal>>);

/// A CloneSet whose pod writes the API server refused as invalid (422), consecutively.
#[derive(Debug, Clone)]
struct Refusal {
    /// `metadata.generation` of the CloneSet the refused writes came from: a spec change
    /// may fix them, so it ends the backoff.
    generation: Option<i64>,
    /// Consecutive refusals.
    failures: u32,
    /// No pod writes before this.
    retry_at: Timestamp,
    /// The condition type set for the refusal, cleared once a write succeeds.
    condition: &'static str,
}

impl RefusedPodWrites {
    /// How long the CloneSet `key` must still wait before writing pods again, after its
    /// pod writes were refused as invalid; `None` when it may write (no refusal, the spec
    /// changed since, or the backoff is over).
    pub(super) fn wait(
        &self,
        key: &str,
        generation: Option<i64>,
        now: Timestamp,
    ) -> Option<Duration> {
        let refused = self.0.lock().ok()?;
        let entry = refused.get(key)?;
        // The entry stays until a write succeeds: its condition is cleared then.
        if entry.generation != generation {
            return None;
        }
        let wait = now.duration_until(entry.retry_at);
        (wait.is_positive()).then(|| wait.unsigned_abs())
    }

    /// Whether `key`'s last pod writes were refused as invalid (its backoff may be over).
    pub(super) fn any(&self, key: &str) -> bool {
        self.0.lock().map(|r| r.contains_key(key)).unwrap_or(false)
    }

    /// Records one more refused write of `key`; the backoff before the next attempt.
    pub(super) fn record(
        &self,
        key: &str,
        generation: Option<i64>,
        condition: &'static str,
        now: Timestamp,
    ) -> Duration {
        let Ok(mut refused) = self.0.lock() else {
            return invalid_write_backoff(u32::MAX);
        };
        let failures = match refused.get(key) {
            Some(e) if e.generation == generation => e.failures.saturating_add(1),
            _ => 1,
        };
        let wait = invalid_write_backoff(failures);
        let retry_at = jiff::SignedDuration::try_from(wait)
            .ok()
            .and_then(|d| now.checked_add(d).ok())
            .unwrap_or(now);
        refused.insert(
            key.to_string(),
            Refusal {
                generation,
                failures,
                retry_at,
                condition,
            },
        );
        wait
    }

    /// Forgets `key`'s refused writes after a reconcile whose writes all succeeded; the
    /// condition type that was set for them, if any.
    pub(super) fn clear(&self, key: &str) -> Option<&'static str> {
        self.0
            .lock()
            .ok()
            .and_then(|mut r| r.remove(key))
            .map(|e| e.condition)
    }
}
