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

/// Event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
}

/// An event a plan records on its object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanEvent {
    /// Normal or Warning.
    pub type_: EventType,
    /// OpenKruise's reason.
    pub reason: &'static str,
    /// The message.
    pub message: String,
}

impl PlanEvent {
    /// A Normal event.
    pub fn normal(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            type_: EventType::Normal,
            reason,
            message: message.into(),
        }
    }

    /// A Warning event.
    pub fn warning(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            type_: EventType::Warning,
            reason,
            message: message.into(),
        }
    }
}
