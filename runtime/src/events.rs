//! Publishing events.k8s.io/v1 Events with bounded memory.
//!
//! Same wire behaviour as kube's `Recorder`: the first event of a key (type, reason, action,
//! reporter, regarding, related) is created; a repeat within six minutes becomes a `series`
//! on that event (count, lastObservedTime), as `kubectl events` expects. What differs is the
//! memory: kube's recorder keeps every event it published for six minutes as a whole `Event`
//! and scans them all on each publish, so a controller that creates 10,000 pods holds 10,000
//! events (~30 MB) and spends O(n) per event. This publisher keeps at most [`CAPACITY`]
//! series, each a key and an event name, evicting the oldest first (client-go's event
//! correlator is also an LRU of 4,096).
//!
//! Controllers send events through an [`EventQueue`]: one background task publishes them in
//! order, so a burst of events neither holds up a reconcile nor opens a connection per
//! event, and a queue that is full drops events and counts them (client-go's broadcaster
//! also drops beyond its queue of 1,000).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
pub use kruise_core::plan::{EventRecord, pod_reference};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
pub use kube::runtime::events::{Event, EventType, Reporter};
use prometheus_client::metrics::counter::Counter;
use serde_json::json;
use tokio::sync::mpsc;

/// How many events wait for the background publisher at most.
pub const QUEUE_CAPACITY: usize = 1000;
/// How many event series are remembered at most.
pub const CAPACITY: usize = 4096;
/// How long a repeat still joins the earlier event's series (kube's recorder: 6 minutes).
pub const SERIES_TTL: SignedDuration = SignedDuration::from_mins(6);

/// An event series that can still be continued.
#[derive(Debug, Clone, PartialEq)]
struct Series {
    namespace: String,
    name: String,
    count: i32,
    last: Timestamp,
}

/// Recently published series by key, oldest first in `order`.
#[derive(Debug, Default)]
struct SeriesCache {
    by_key: HashMap<String, Series>,
    order: VecDeque<String>,
}

impl SeriesCache {
    /// The live series of `key`, if any.
    fn get(&self, key: &str, now: Timestamp) -> Option<Series> {
        self.by_key
            .get(key)
            .filter(|s| s.last + SERIES_TTL > now)
            .cloned()
    }

    /// Remembers `series` under `key` (replacing an expired one), evicting the keys first
    /// published longest ago beyond `capacity`; `order` holds each key once.
    fn put(&mut self, key: String, series: Series, capacity: usize) {
        if self.by_key.insert(key.clone(), series).is_none() {
            self.order.push_back(key);
        }
        while self.by_key.len() > capacity {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            self.by_key.remove(&oldest);
        }
    }
}

/// The series key: the fields kube's recorder and client-go correlate events by.
fn series_key(ev: &Event, regarding: &ObjectReference, reporter: &Reporter) -> String {
    format!(
        "{}\0{}\0{}\0{}\0{}\0{}\0{}",
        type_name(ev.type_),
        ev.reason,
        ev.action,
        reference_key(regarding),
        ev.secondary.as_ref().map(reference_key).unwrap_or_default(),
        reporter.controller,
        reporter.instance.as_deref().unwrap_or_default()
    )
}

fn reference_key(r: &ObjectReference) -> String {
    format!(
        "{}/{}/{}/{}/{}",
        r.api_version.as_deref().unwrap_or_default(),
        r.kind.as_deref().unwrap_or_default(),
        r.namespace.as_deref().unwrap_or_default(),
        r.name.as_deref().unwrap_or_default(),
        r.uid.as_deref().unwrap_or_default()
    )
}

fn type_name(t: EventType) -> &'static str {
    match t {
        EventType::Normal => "Normal",
        EventType::Warning => "Warning",
    }
}

/// Publishes events for a controller; cheap to clone (the series cache is shared).
#[derive(Clone)]
pub struct EventPublisher {
    client: Client,
    reporter: Reporter,
    series: Arc<Mutex<SeriesCache>>,
    capacity: usize,
}

impl EventPublisher {
    /// A publisher reporting as `reporter`.
    pub fn new(client: Client, reporter: Reporter) -> Self {
        Self::with_capacity(client, reporter, CAPACITY)
    }

    /// A publisher remembering at most `capacity` series.
    pub fn with_capacity(client: Client, reporter: Reporter, capacity: usize) -> Self {
        Self {
            client,
            reporter,
            series: Arc::default(),
            capacity: capacity.max(1),
        }
    }

    fn new_event(&self, ev: &Event, regarding: &ObjectReference, now: Timestamp) -> K8sEvent {
        K8sEvent {
            metadata: ObjectMeta {
                namespace: regarding.namespace.clone(),
                name: Some(format!(
                    "{}.{:x}",
                    regarding
                        .name
                        .as_deref()
                        .unwrap_or(&self.reporter.controller),
                    now.as_nanosecond()
                )),
                ..Default::default()
            },
            action: Some(ev.action.clone()),
            reason: Some(ev.reason.clone()),
            note: ev.note.clone(),
            type_: Some(type_name(ev.type_).into()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            related: ev.secondary.clone(),
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            ..Default::default()
        }
    }

    /// Creates the event, or continues its series when the same key was published within
    /// [`SERIES_TTL`]. Cluster-scoped objects' events go to `default`.
    pub async fn publish(
        &self,
        ev: &Event,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = series_key(ev, regarding, &self.reporter);
        let existing = self.series.lock().ok().and_then(|c| c.get(&key, now));
        let series = match existing {
            Some(s) => {
                let count = s.count.saturating_add(1);
                let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &s.namespace);
                api.patch(
                    &s.name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"series": {
                        "count": count,
                        "lastObservedTime": MicroTime(now),
                    }})),
                )
                .await?;
                Series {
                    count,
                    last: now,
                    ..s
                }
            }
            None => {
                let namespace = regarding
                    .namespace
                    .clone()
                    .unwrap_or_else(|| "default".into());
                let event = self.new_event(ev, regarding, now);
                let name = event.metadata.name.clone().unwrap_or_default();
                let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
                api.create(&PostParams::default(), &event).await?;
                Series {
                    namespace,
                    name,
                    count: 1,
                    last: now,
                }
            }
        };
        if let Ok(mut c) = self.series.lock() {
            c.put(key, series, self.capacity);
        }
        Ok(())
    }
}

/// Events waiting to be published in order by one background task; cheap to clone.
#[derive(Clone)]
pub struct EventQueue {
    tx: mpsc::Sender<(Event, ObjectReference)>,
    dropped: Counter,
}

impl EventQueue {
    /// Starts the publishing task (on the current tokio runtime); it ends when the last
    /// clone of the queue is dropped, after publishing what is queued.
    pub fn start(publisher: EventPublisher, capacity: usize) -> Self {
        let (tx, mut rx) = mpsc::channel::<(Event, ObjectReference)>(capacity.max(1));
        tokio::spawn(async move {
            while let Some((event, regarding)) = rx.recv().await {
                if let Err(e) = publisher.publish(&event, &regarding).await {
                    tracing::debug!(error = %e, reason = %event.reason, "publishing an event failed");
                }
            }
        });
        Self {
            tx,
            dropped: Counter::default(),
        }
    }

    /// The queue a controller publishes through: reporting as `controller` from the pod
    /// `POD_NAME` names (the instance), with [`CAPACITY`] series remembered, [`QUEUE_CAPACITY`]
    /// events queued, and the dropped-events counter registered with `metrics`.
    pub fn for_controller(client: Client, controller: &str, metrics: &super::Metrics) -> Self {
        let reporter = Reporter {
            controller: controller.into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        let queue = Self::start(EventPublisher::new(client, reporter), QUEUE_CAPACITY);
        queue.register(metrics);
        queue
    }

    /// Queues an event about `regarding`; drops it (and counts it) when the queue is full.
    pub fn send(&self, event: Event, regarding: ObjectReference) {
        if self.tx.try_send((event, regarding)).is_err() {
            self.dropped.inc();
        }
    }

    /// Events dropped because the queue was full (register it as
    /// `kruise_events_dropped_total`).
    pub fn dropped(&self) -> Counter {
        self.dropped.clone()
    }

    /// Registers the dropped-events counter with the process metrics.
    pub fn register(&self, metrics: &super::Metrics) {
        metrics.register(
            "kruise_events_dropped",
            "Events dropped because the background publisher's queue was full",
            self.dropped(),
        );
    }
}

/// Records events about one object through the controller's [`EventQueue`]: the one event
/// recorder every controller uses.
#[derive(Clone)]
pub struct Recorder {
    queue: EventQueue,
    regarding: ObjectReference,
}

impl Recorder {
    /// Events regarding `regarding`.
    pub fn new(queue: &EventQueue, regarding: ObjectReference) -> Self {
        Self {
            queue: queue.clone(),
            regarding,
        }
    }

    /// Events regarding `object`, referred to by the kind and apiVersion of its type.
    pub fn about<K: kube::Resource<DynamicType = ()>>(queue: &EventQueue, object: &K) -> Self {
        Self::new(queue, object.object_ref(&()))
    }

    /// The object these events regard.
    pub fn regarding(&self) -> &ObjectReference {
        &self.regarding
    }

    /// Queues one event (published in the background, in order).
    pub fn record(&self, record: EventRecord) {
        // The related object keeps one event per pod: events.k8s.io aggregates events
        // that differ only in their note.
        let event = Event {
            type_: match record.type_ {
                kruise_core::plan::EventType::Normal => EventType::Normal,
                kruise_core::plan::EventType::Warning => EventType::Warning,
            },
            reason: record.reason.clone(),
            note: Some(record.message),
            action: record.reason,
            secondary: record.related.map(|related| *related),
        };
        self.queue.send(event, self.regarding.clone());
    }

    /// Queues the events in order.
    pub fn record_all(&self, records: impl IntoIterator<Item = EventRecord>) {
        for record in records {
            self.record(record);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(name: &str, last: Timestamp) -> Series {
        Series {
            namespace: "default".into(),
            name: name.into(),
            count: 1,
            last,
        }
    }

    #[test]
    fn a_repeat_within_the_ttl_continues_the_series_and_an_old_one_does_not() {
        let t0: Timestamp = "2026-11-24T00:00:00Z".parse().unwrap();
        let mut c = SeriesCache::default();
        c.put("k".into(), series("e1", t0), 10);
        assert_eq!(
            c.get("k", t0 + SignedDuration::from_mins(5)).unwrap().name,
            "e1"
        );
        assert_eq!(c.get("k", t0 + SERIES_TTL), None);
        c.put("k".into(), series("e2", t0 + SERIES_TTL), 10);
        assert_eq!(c.get("k", t0 + SERIES_TTL).unwrap().name, "e2");
        assert_eq!(c.order.len(), 1);
    }

    #[test]
    fn the_cache_never_holds_more_than_its_capacity_and_evicts_the_oldest() {
        let t0: Timestamp = "2026-11-24T00:00:00Z".parse().unwrap();
        let mut c = SeriesCache::default();
        for i in 0..10_000 {
            c.put(format!("k{i}"), series(&format!("e{i}"), t0), 100);
            assert!(c.by_key.len() <= 100);
            assert_eq!(c.order.len(), c.by_key.len());
        }
        assert!(c.get("k0", t0).is_none());
        assert_eq!(c.get("k9999", t0).unwrap().name, "e9999");
        // Updating a key in place does not grow the queue.
        for _ in 0..1000 {
            c.put("k9999".into(), series("e9999", t0), 100);
        }
        assert_eq!(c.by_key.len(), 100);
        assert_eq!(c.order.len(), 100);
    }

    #[test]
    fn keys_tell_apart_reasons_objects_and_related_objects() {
        let reporter = Reporter {
            controller: "kruise-manager".into(),
            instance: None,
        };
        let key = |reason: &str, name: &str, related: &str| {
            let ev = Event {
                type_: EventType::Normal,
                reason: reason.into(),
                note: Some(format!("about {related}")),
                action: reason.into(),
                secondary: Some(ObjectReference {
                    name: Some(related.into()),
                    ..Default::default()
                }),
            };
            let regarding = ObjectReference {
                name: Some(name.into()),
                ..Default::default()
            };
            series_key(&ev, &regarding, &reporter)
        };
        let a = key("SuccessfulCreate", "cs", "p1");
        assert_ne!(a, key("SuccessfulCreate", "cs", "p2"));
        assert_ne!(a, key("SuccessfulDelete", "cs", "p1"));
        assert_ne!(a, key("SuccessfulCreate", "other", "p1"));
        assert_eq!(a, key("SuccessfulCreate", "cs", "p1"));
    }
}
