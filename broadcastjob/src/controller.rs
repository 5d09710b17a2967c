//! The two controllers of `kruise-broadcastjob`, each a shell around its planner:
//! **observe** (the caches, the expectations) -> **validate** -> **plan** (time an input,
//! read from [`Settings::clock`]) -> **execute** -> **status**.
//!
//! * [`broadcastjob`]: watches BroadcastJobs, their pods only (by the
//!   `broadcastjob-controller-uid` label), and nodes, passing a node change on only when
//!   what the fit check reads changed (labels, taints, unschedulable, allocatable).
//! * [`cron`]: watches AdvancedCronJobs and their children — batch/v1 Jobs and
//!   BroadcastJobs controlled by an AdvancedCronJob — and creates one child per run.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use jiff::tz::TimeZone;

use crate::plan::broadcastjob::PodBinding;

pub mod broadcastjob;
pub mod cron;

/// The reconciles' errors: each of their steps (creating and deleting pods and child jobs,
/// status) is one the kit's shells share.
pub use kruise_runtime::errors::ShellError as Error;

/// The BroadcastJob controller's name (metrics, readiness `controller/broadcastjob`).
pub const BROADCASTJOB_CONTROLLER: &str = "broadcastjob";
/// The AdvancedCronJob controller's name.
pub const ADVANCEDCRONJOB_CONTROLLER: &str = "advancedcronjob";
/// Reason of the Warning event on an object the validating webhook would have refused.
pub const REASON_INVALID_SPEC: &str = "InvalidSpec";

/// The controllers' clock: every reconcile reads the time once, from here.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// Settings of both controllers.
#[derive(Clone)]
pub struct Settings {
    /// Watch only this namespace (all when `None`).
    pub namespace: Option<String>,
    /// How long a scale expectation may stay unsatisfied before the planner acts anyway.
    pub expectation_timeout: jiff::SignedDuration,
    /// The time (tests set their own).
    pub clock: Clock,
    /// The zone of a schedule that names none (kruise-rs: UTC; OpenKruise: the manager's).
    pub default_zone: TimeZone,
    /// The longest a reconcile waits for its next one: a cron job looks at its schedule at
    /// least this often, so a clock that jumps is caught up with.
    pub max_requeue: Duration,
    /// How BroadcastJob pods are bound to their nodes (`--assign-bcj-pods-by-scheduler`).
    pub pod_binding: PodBinding,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            namespace: None,
            expectation_timeout: kruise_core::expectations::DEFAULT_EXPECTATION_TIMEOUT,
            clock: Arc::new(Timestamp::now),
            default_zone: TimeZone::UTC,
            max_requeue: Duration::from_secs(300),
            pod_binding: PodBinding::Scheduler,
        }
    }
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("namespace", &self.namespace)
            .field("expectation_timeout", &self.expectation_timeout)
            .field("default_zone", &self.default_zone.iana_name())
            .field("max_requeue", &self.max_requeue)
            .field("pod_binding", &self.pod_binding)
            .finish_non_exhaustive()
    }
}
