//! What a family's pure planner hands its shell besides the writes themselves: the events
//! it decided to record ([`EventRecord`]) and how each write is scheduled ([`Lane`],
//! [`Scheduled`]). The planners build these without a client; `kruise_runtime` records the
//! events and runs the writes.

use k8s_openapi::api::core::v1::ObjectReference;

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
