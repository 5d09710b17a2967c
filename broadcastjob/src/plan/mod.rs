//! The pure planners: `plan(&Input) -> Plan { actions, status, events, requeue_after }`, no
//! I/O, time an input.
//!
//! * [`broadcastjob`]: a BroadcastJob's pods, node by node;
//! * [`fit`]: whether a pod fits a node (OpenKruise's `checkNodeFitness`);
//! * [`cron`]: an AdvancedCronJob's children, run by run;
//! * [`schedule`]: cron schedules and their run times.

pub mod broadcastjob;
pub mod cron;
pub mod fit;
pub mod schedule;

pub use kruise_core::plan::EventRecord;
