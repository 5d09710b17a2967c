//! What every family's pure planner hands its shell: one [`Plan`] — the writes (each saying
//! how it is scheduled: [`Lane`], [`Scheduled`]), the events it decided to record
//! ([`EventRecord`]), the status, and when to look again. The planners build it without a
//! client; `kruise_runtime` records the events and runs the writes.

use std::time::Duration;

use jiff::SignedDuration;
use k8s_openapi::api::core::v1::ObjectReference;

/// A planner's answer, the same shape in every family: `A` its actions, `S` its status, and
/// `X` what only its own shell reads besides (nothing for most).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan<A, S, X = ()> {
    /// The writes, in order (the executor schedules them by their lane).
    pub actions: Vec<A>,
    /// Events to record now.
    pub events: Vec<EventRecord>,
    /// The status to write (the shell writes it when it differs from the cached one).
    pub status: S,
    /// Look again after this long even when nothing changes (a deadline, a grace period,
    /// `minReadySeconds`); `None`: only on a change.
    pub requeue_after: Option<Duration>,
    /// What only this family's shell reads of the plan.
    pub extra: X,
}

/// No writes, no events, the default status, no requeue (not derived: the actions need no
/// default of their own).
impl<A, S: Default, X: Default> Default for Plan<A, S, X> {
    fn default() -> Self {
        Plan {
            actions: Vec::new(),
            events: Vec::new(),
            status: S::default(),
            requeue_after: None,
            extra: X::default(),
        }
    }
}

impl<A, S, X> Plan<A, S, X> {
    /// Look again within `wait` at the latest: the sooner of it and any wait already
    /// planned. A wait that is already over (zero or negative) adds nothing: whatever it
    /// waited for is acted on in this plan.
    pub fn requeue_within(&mut self, wait: SignedDuration) {
        if wait <= SignedDuration::ZERO {
            return;
        }
        let wait = wait.unsigned_abs();
        self.requeue_after = Some(self.requeue_after.map_or(wait, |cur| cur.min(wait)));
    }
}

/// Normal or Warning, as events.k8s.io spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
}

/// One event a controller records: what the planner or the executor decided to say.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    /// Normal or Warning.
    pub type_: EventType,
    /// OpenKruise's reason, e.g. `SuccessfulCreate`.
    pub reason: String,
    /// OpenKruise's message.
    pub message: String,
    /// The object it also concerns (a pod), if any (boxed: plans carry many events
    /// without one).
    pub related: Option<Box<ObjectReference>>,
}

impl EventRecord {
    /// A Normal event.
    pub fn normal(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(EventType::Normal, reason, message)
    }

    /// A Warning event.
    pub fn warning(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(EventType::Warning, reason, message)
    }

    /// An event of `type_`.
    pub fn new(type_: EventType, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            type_,
            reason: reason.into(),
            message: message.into(),
            related: None,
        }
    }

    /// The same event, also about `related`.
    pub fn related_to(mut self, related: Option<ObjectReference>) -> Self {
        self.related = related.map(Box::new);
        self
    }
}

/// A reference to the pod `name` in `namespace`, as an event's related object.
pub fn pod_reference(namespace: Option<&str>, name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(name.into()),
        namespace: namespace.map(str::to_string),
        ..Default::default()
    }
}

/// How the executor schedules an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane<'a> {
    /// In slow-start batches, before everything else.
    SlowStart,
    /// In the write group of this object (a pod's name): in order, after the group's
    /// earlier actions succeeded.
    Group(&'a str),
    /// In a group of its own.
    Alone,
}

/// An action the executor can schedule.
pub trait Scheduled {
    /// Its lane.
    fn lane(&self) -> Lane<'_>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requeue_within_keeps_the_soonest_future_wait() {
        let mut plan: Plan<(), ()> = Plan::default();
        plan.requeue_within(SignedDuration::from_secs(30));
        plan.requeue_within(SignedDuration::from_secs(40));
        assert_eq!(plan.requeue_after, Some(Duration::from_secs(30)));
        plan.requeue_within(SignedDuration::from_millis(1500));
        assert_eq!(plan.requeue_after, Some(Duration::from_millis(1500)));
        plan.requeue_within(SignedDuration::ZERO);
        plan.requeue_within(SignedDuration::from_secs(-5));
        assert_eq!(plan.requeue_after, Some(Duration::from_millis(1500)));
    }
}
