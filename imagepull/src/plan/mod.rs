//! Pure decision logic: plain data in, decisions out; no I/O, no clock (time is an input),
//! no randomness (jitter is an input). Table and property tests beside each planner.
//!
//! * [`imagepulljob`]: which nodes a job targets, its status, and which NodeImages get its
//!   tag next (parallelism), with the tag's pull policy and lifetime;
//! * [`imagelistpulljob`]: one child ImagePullJob per image of a list, stale ones
//!   replaced, the status aggregated;
//! * [`secrets`]: the pull secrets copied once per source into the agent's namespace,
//!   shared across jobs by a reference annotation;
//! * [`nodeimage`]: one NodeImage per Ready node, labels mirrored, tags pruned, tags the agent
//!   never answered failed, status counters;
//! * [`wakeups`]: which ImagePullJobs a NodeImage change concerns.

pub mod credentials;
pub mod imagelistpulljob;
pub mod imagepulljob;
pub mod nodeimage;
pub mod puller;
pub mod secrets;
pub mod wakeups;

use std::time::Duration;

use jiff::Timestamp;

/// What is left of `limit` seconds after `since`, or `None` once it passed.
pub(crate) fn left(now: Timestamp, since: Timestamp, limit_seconds: i64) -> Option<Duration> {
    let end = since.as_second().saturating_add(limit_seconds);
    let remaining = end.saturating_sub(now.as_second());
    (remaining > 0).then(|| Duration::from_secs(u64::try_from(remaining).unwrap_or(0)))
}
