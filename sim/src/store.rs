//! The object store: one map per group/resource, one global resourceVersion counter,
//! a bounded history of changes for watches, and a broadcast of every committed change.
//!
//! Objects are kept serialized, as etcd keeps them: a decoded JSON value takes many times
//! its text in memory (every small map is a B-tree node), and a store of 10,000 pods is
//! most of the simulator's memory. Reads decode (each request and watch works on decoded
//! values, as before); a write serializes once.
//!
//! The history is what a watch resuming from an older resourceVersion replays (410 Gone
//! once its version has left it, as from kube-apiserver's watch cache). Its entries share
//! the store's buffers (an object's current state, and an update's previous state, are the
//! same bytes as in the store or the object's earlier entry), and it is bounded by entries
//! and by bytes ([`HISTORY_BYTES`]), so large objects cannot make it grow without bound.
//!
//! The store only enforces storage-level rules (existence, optimistic concurrency,
//! resourceVersion assignment). API semantics (defaults, generation, finalizers,
//! validation) live in `ops`; the in-process components of `cluster` (garbage collector,
//! scheduler, kubelet, Job controller) write through `ops` and follow changes through
//! [`Store::subscribe`].

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::broadcast;

use crate::error::{ApiError, ApiResult};
use crate::registry::{GroupResource, Registry};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed change. `object` is the stored object after the change (for
/// deletions: the last state, carrying the deletion's resourceVersion).
#[derive(Debug)]
pub struct StoreEvent {
    pub rv: u64,
    pub gr: GroupResource,
    pub namespace: String,
    pub name: String,
    pub event_type: EventType,
    pub object: Arc<Value>,
    pub previous: Option<Arc<Value>>,
}

/// (namespace, name); namespace is empty for cluster-scoped objects.
pub type ObjectKey = (String, String);

/// How many changes the broadcast to in-process consumers and watches holds for the one
/// furthest behind. Each holds its object and previous state decoded, many times their
/// text, so a consumer that falls further behind resyncs instead (an in-process component
/// from the store, a watch from the history, as after a 410 a client would).
pub const BROADCAST_CAPACITY: usize = 4_096;

/// The most bytes of serialized objects the watch history keeps (besides its entry limit).
pub const HISTORY_BYTES: usize = 64 * 1024 * 1024;

/// One change as the history keeps it (and a resumed watch replays it, decoded only when
/// its turn comes).
#[derive(Clone)]
pub struct HistoryEntry {
    rv: u64,
    gr: GroupResource,
    namespace: String,
    name: String,
    event_type: EventType,
    /// The object after the change, serialized (the store's buffer while it is current).
    object: Bytes,
    /// The object before it, serialized (the buffer the store held).
    previous: Option<Bytes>,
}

impl HistoryEntry {
    /// The bytes this entry accounts for (a shared `previous` counted again: an upper bound).
    fn size(&self) -> usize {
        self.object.len() + self.previous.as_ref().map_or(0, Bytes::len)
    }

    /// The resourceVersion the change was committed at.
    pub fn rv(&self) -> u64 {
        self.rv
    }

    /// The change as watches see it, decoded again.
    pub fn to_event(&self) -> StoreEvent {
        StoreEvent {
            rv: self.rv,
            gr: self.gr.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            event_type: self.event_type,
            object: decode(&self.object),
            previous: self.previous.as_ref().map(decode),
        }
    }
}

pub struct StoreState {
    pub rv: u64,
    /// Each resource's objects, serialized.
    objects: HashMap<GroupResource, BTreeMap<ObjectKey, Bytes>>,
    history: VecDeque<HistoryEntry>,
    history_limit: usize,
    /// The summed [`HistoryEntry::size`] of `history`.
    history_bytes: usize,
    /// Every event with rv <= compacted_rv has been dropped from history.
    compacted_rv: u64,
    /// Resources whose objects expire a fixed time after their last write.
    expiring: HashMap<GroupResource, Expiring>,
}

/// The objects of one resource that expire `ttl` after their last write, as etcd's
/// leases expire Events for kube-apiserver (`--event-ttl`).
struct Expiring {
    ttl: Duration,
    /// One entry per write, oldest first (a fixed TTL keeps deadlines in write order):
    /// (deadline, object, resourceVersion written). An entry whose object has been
    /// written since is stale and skipped.
    deadlines: VecDeque<(Instant, ObjectKey, u64)>,
}

pub struct Store {
    state: Mutex<StoreState>,
    pub registry: RwLock<Registry>,
    events_tx: broadcast::Sender<Arc<StoreEvent>>,
}

/// What a watch starts with: the retained changes after the requested version and a
/// receiver for everything committed afterwards (no gap, no duplicate).
pub struct WatchStart {
    /// Current objects, serialized, when a snapshot was asked for (watch without
    /// resourceVersion); [`decode`] each in turn.
    pub snapshot: Vec<Bytes>,
    /// Kept serialized: a watch resuming far behind replays thousands of changes.
    pub backlog: Vec<HistoryEntry>,
    pub receiver: broadcast::Receiver<Arc<StoreEvent>>,
    pub current_rv: u64,
}

impl Store {
    pub fn new(history_limit: usize, broadcast_capacity: usize) -> Self {
        let (events_tx, _) = broadcast::channel(broadcast_capacity.max(16));
        Store {
            state: Mutex::new(StoreState {
                rv: 1,
                objects: HashMap::new(),
                history: VecDeque::new(),
                history_limit: history_limit.max(1),
                history_bytes: 0,
                compacted_rv: 1,
                expiring: HashMap::new(),
            }),
            registry: RwLock::new(Registry::with_builtins()),
            events_tx,
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, StoreState> {
        // A poisoned lock only means another request panicked mid-way; the map is
        // still structurally valid, so keep serving.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn registry(&self) -> std::sync::RwLockReadGuard<'_, Registry> {
        self.registry.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn registry_mut(&self) -> std::sync::RwLockWriteGuard<'_, Registry> {
        self.registry.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Every committed change, for in-process consumers (controllers, tests).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<StoreEvent>> {
        self.events_tx.subscribe()
    }

    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    pub fn get(&self, gr: &GroupResource, ns: &str, name: &str) -> Option<Arc<Value>> {
        let bytes = self.lock().get_bytes(gr, ns, name);
        bytes.as_ref().map(decode)
    }

    /// Snapshot of objects (optionally in one namespace), ordered by key, plus the
    /// resourceVersion the snapshot is consistent with.
    pub fn list(&self, gr: &GroupResource, ns: Option<&str>) -> (Vec<Arc<Value>>, u64) {
        let (items, rv) = {
            let st = self.lock();
            (st.in_namespace(gr, ns), st.rv)
        };
        // Decoded outside the lock: the buffers are shared, not copied.
        (items.iter().map(decode).collect(), rv)
    }

    /// Like [`Store::list`], but only objects whose key sorts after `after`.
    pub fn list_after(
        &self,
        gr: &GroupResource,
        ns: Option<&str>,
        after: &ObjectKey,
    ) -> (Vec<Arc<Value>>, u64) {
        use std::ops::Bound;
        let (items, rv) = {
            let st = self.lock();
            let items: Vec<Bytes> = match st.objects.get(gr) {
                None => Vec::new(),
                Some(m) => m
                    .range((Bound::Excluded(after.clone()), Bound::Unbounded))
                    .take_while(|((n, _), _)| ns.is_none_or(|ns| n == ns))
                    .map(|(_, v)| v.clone())
                    .collect(),
            };
            (items, st.rv)
        };
        (items.iter().map(decode).collect(), rv)
    }

    pub fn count(&self, gr: &GroupResource) -> usize {
        self.lock().objects.get(gr).map_or(0, BTreeMap::len)
    }

    /// Starts a watch after `from_rv` (None: from now).
    pub fn watch_from(&self, gr: &GroupResource, from_rv: Option<u64>) -> ApiResult<WatchStart> {
        let st = self.lock();
        let receiver = self.events_tx.subscribe();
        let mut backlog = Vec::new();
        if let Some(rv) = from_rv {
            if rv < st.compacted_rv {
                return Err(ApiError::gone(format!(
                    "too old resource version: {} ({})",
                    rv, st.compacted_rv
                )));
            }
            // Oldest first; entries after `rv` are at the back.
            let start = st.history.partition_point(|e| e.rv <= rv);
            for entry in st.history.range(start..) {
                if entry.gr == *gr {
                    backlog.push(entry.clone());
                }
            }
        }
        Ok(WatchStart {
            snapshot: Vec::new(),
            backlog,
            receiver,
            current_rv: st.rv,
        })
    }

    /// Starts a watch with a consistent snapshot of current objects (for the initial
    /// ADDED events of a watch without a resourceVersion).
    pub fn watch_with_snapshot(&self, gr: &GroupResource, ns: Option<&str>) -> WatchStart {
        let (items, receiver, current_rv) = {
            let st = self.lock();
            (st.in_namespace(gr, ns), self.events_tx.subscribe(), st.rv)
        };
        WatchStart {
            snapshot: items,
            backlog: Vec::new(),
            receiver,
            current_rv,
        }
    }

    /// The oldest resourceVersion a watch may still start from.
    pub fn compacted_rv(&self) -> u64 {
        self.lock().compacted_rv
    }

    /// Drops all retained history (as an etcd compaction would): watches from any
    /// earlier resourceVersion get 410 Gone.
    pub fn compact(&self) {
        let mut st = self.lock();
        st.history.clear();
        st.history_bytes = 0;
        st.compacted_rv = st.rv;
    }

    /// Makes objects of `gr` expire `ttl` after their last write (creates and updates
    /// restart the clock), as kube-apiserver stores Events with `--event-ttl`. Objects
    /// already stored count from now.
    pub fn set_ttl(&self, gr: &GroupResource, ttl: Duration) {
        let mut st = self.lock();
        let deadline = Instant::now() + ttl;
        let deadlines = st
            .objects
            .get(gr)
            .into_iter()
            .flatten()
            .map(|(key, obj)| (deadline, key.clone(), resource_version(&decode(obj))))
            .collect();
        st.expiring.insert(gr.clone(), Expiring { ttl, deadlines });
    }

    /// Deletes the objects whose TTL ran out by `now` (a DELETED event each, as an etcd
    /// lease expiry gives watchers); returns how many.
    pub fn expire(&self, now: Instant) -> usize {
        let mut st = self.lock();
        let mut due: Vec<(GroupResource, ObjectKey, u64)> = Vec::new();
        for (gr, expiring) in st.expiring.iter_mut() {
            while let Some((deadline, _, _)) = expiring.deadlines.front()
                && *deadline <= now
            {
                if let Some((_, key, rv)) = expiring.deadlines.pop_front() {
                    due.push((gr.clone(), key, rv));
                }
            }
        }
        let mut expired = 0;
        for (gr, key, written_rv) in due {
            let Some(current_bytes) = st.objects.get(&gr).and_then(|m| m.get(&key)).cloned() else {
                continue;
            };
            let current = decode(&current_bytes);
            if resource_version(&current) != written_rv {
                continue;
            }
            if let Some(m) = st.objects.get_mut(&gr) {
                m.remove(&key);
            }
            st.rv += 1;
            let mut last = (*current).clone();
            if let Some(m) = crate::meta::metadata_mut(&mut last) {
                m.insert("resourceVersion".into(), Value::String(st.rv.to_string()));
            }
            let (ns, name) = key;
            self.record(
                &mut st,
                Change {
                    gr: &gr,
                    ns: &ns,
                    name: &name,
                    event_type: EventType::Deleted,
                    object: Arc::new(last),
                    previous: Some((current, current_bytes)),
                },
            );
            expired += 1;
        }
        expired
    }

    /// Commits a change under the lock. `f` sees the current object (if any) and
    /// returns the new object (None: delete). The store assigns resourceVersion.
    pub fn commit<F>(
        &self,
        gr: &GroupResource,
        ns: &str,
        name: &str,
        f: F,
    ) -> ApiResult<Option<Arc<Value>>>
    where
        F: FnOnce(&mut StoreState, Option<&Arc<Value>>) -> ApiResult<Commit>,
    {
        let mut st = self.lock();
        let key = (ns.to_string(), name.to_string());
        let current_bytes = st.objects.get(gr).and_then(|m| m.get(&key)).cloned();
        let current = current_bytes.as_ref().map(decode);
        let decision = f(&mut st, current.as_ref())?;
        let previous = current.clone().zip(current_bytes);
        match decision {
            Commit::Noop => Ok(current),
            Commit::Put(mut obj) => {
                st.rv += 1;
                let rv = st.rv;
                if let Some(m) = crate::meta::metadata_mut(&mut obj) {
                    m.insert("resourceVersion".into(), Value::String(rv.to_string()));
                }
                let obj = Arc::new(obj);
                if let Some(expiring) = st.expiring.get_mut(gr) {
                    let deadline = Instant::now() + expiring.ttl;
                    expiring.deadlines.push_back((deadline, key.clone(), rv));
                }
                let event_type = if previous.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                let bytes = self.record(
                    &mut st,
                    Change {
                        gr,
                        ns,
                        name,
                        event_type,
                        object: obj.clone(),
                        previous,
                    },
                );
                st.objects.entry(gr.clone()).or_default().insert(key, bytes);
                Ok(Some(obj))
            }
            Commit::Delete(mut last) => {
                st.rv += 1;
                let rv = st.rv;
                if let Some(m) = crate::meta::metadata_mut(&mut last) {
                    m.insert("resourceVersion".into(), Value::String(rv.to_string()));
                }
                let last = Arc::new(last);
                if let Some(m) = st.objects.get_mut(gr) {
                    m.remove(&key);
                }
                self.record(
                    &mut st,
                    Change {
                        gr,
                        ns,
                        name,
                        event_type: EventType::Deleted,
                        object: last.clone(),
                        previous,
                    },
                );
                Ok(Some(last))
            }
        }
    }

    /// Broadcasts a committed change and appends it to the history; the change's object
    /// serialized, which the store keeps.
    fn record(&self, st: &mut StoreState, change: Change<'_>) -> Bytes {
        let (previous, previous_bytes) = change.previous.unzip();
        let ev = Arc::new(StoreEvent {
            rv: st.rv,
            gr: change.gr.clone(),
            namespace: change.ns.to_string(),
            name: change.name.to_string(),
            event_type: change.event_type,
            object: change.object,
            previous,
        });
        let bytes = serialized(&ev.object);
        st.remember(HistoryEntry {
            rv: ev.rv,
            gr: ev.gr.clone(),
            namespace: ev.namespace.clone(),
            name: ev.name.clone(),
            event_type: ev.event_type,
            object: bytes.clone(),
            previous: previous_bytes,
        });
        // No receivers is fine: nobody is watching.
        let _ = self.events_tx.send(ev);
        bytes
    }
}

/// One committed change, for [`Store::record`].
struct Change<'a> {
    gr: &'a GroupResource,
    ns: &'a str,
    name: &'a str,
    event_type: EventType,
    /// The object after the change.
    object: Arc<Value>,
    /// The object before it, decoded and as the store held it.
    previous: Option<(Arc<Value>, Bytes)>,
}

/// `value` serialized (an empty object in the impossible case it does not serialize).
fn serialized(value: &Value) -> Bytes {
    serde_json::to_vec(value).map_or_else(|_| Bytes::from_static(b"{}"), Bytes::from)
}

/// An object the store serialized, decoded again (`null` in the impossible case it does not
/// decode: the store wrote every buffer from a value).
pub fn decode(bytes: &Bytes) -> Arc<Value> {
    Arc::new(serde_json::from_slice(bytes).unwrap_or(Value::Null))
}

impl StoreState {
    /// Appends `entry` to the history, then drops the oldest entries beyond its limits.
    fn remember(&mut self, entry: HistoryEntry) {
        self.history_bytes += entry.size();
        self.history.push_back(entry);
        while self.history.len() > self.history_limit
            || (self.history_bytes > HISTORY_BYTES && self.history.len() > 1)
        {
            let Some(old) = self.history.pop_front() else {
                break;
            };
            self.history_bytes -= old.size();
            self.compacted_rv = old.rv;
        }
    }

    /// The serialized objects of `gr` (in namespace `ns`), in key order.
    fn in_namespace(&self, gr: &GroupResource, ns: Option<&str>) -> Vec<Bytes> {
        match self.objects.get(gr) {
            None => Vec::new(),
            Some(m) => match ns {
                Some(ns) => m
                    .range((ns.to_string(), String::new())..)
                    .take_while(|((n, _), _)| n == ns)
                    .map(|(_, v)| v.clone())
                    .collect(),
                None => m.values().cloned().collect(),
            },
        }
    }

    fn get_bytes(&self, gr: &GroupResource, ns: &str, name: &str) -> Option<Bytes> {
        self.objects
            .get(gr)
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
            .cloned()
    }
}

/// What a commit closure decided.
pub enum Commit {
    /// Nothing changed: no new resourceVersion, no event.
    Noop,
    Put(Value),
    /// Remove the object; the value is its final state for the DELETED event.
    Delete(Value),
}

impl StoreState {
    /// The object, decoded (inside a commit: another object than the one committed).
    pub fn get(&self, gr: &GroupResource, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.get_bytes(gr, ns, name).as_ref().map(decode)
    }
}

/// The resourceVersion the store wrote into `obj` (0 if none).
fn resource_version(obj: &Value) -> u64 {
    crate::meta::meta_str(obj, "resourceVersion")
        .parse()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn put(store: &Store, gr: &GroupResource, name: &str, message: &str) {
        let obj = json!({"metadata": {"name": name, "namespace": "ns"}, "message": message});
        store
            .commit(gr, "ns", name, |_, _| Ok(Commit::Put(obj)))
            .unwrap();
    }

    #[test]
    fn an_object_reads_back_as_written() {
        let store = Store::new(100, 16);
        let gr = GroupResource::new("", "configmaps");
        let obj = json!({"metadata": {"name": "c", "namespace": "ns"},
            "data": {"f": 0.1, "big": u64::MAX, "neg": -7, "text": "caf\u{e9} \"q\"", "none": null, "list": [1, [], {}]}});
        let written = obj.clone();
        store
            .commit(&gr, "ns", "c", |_, _| Ok(Commit::Put(written)))
            .unwrap();
        let read = store.get(&gr, "ns", "c").unwrap();
        assert_eq!(read["data"], obj["data"]);
        assert_eq!(store.list(&gr, Some("ns")).0[0]["data"], obj["data"]);
    }

    #[test]
    fn a_resumed_watch_replays_the_retained_changes_with_their_previous_state() {
        let store = Store::new(100, 16);
        let pods = GroupResource::new("", "pods");
        put(&store, &pods, "a", "one");
        let after_create = store.current_rv();
        put(&store, &pods, "a", "two");
        put(&store, &GroupResource::new("", "configmaps"), "c", "x");
        store
            .commit(&pods, "ns", "a", |_, current| {
                Ok(Commit::Delete(
                    current.map(|c| (**c).clone()).unwrap_or_default(),
                ))
            })
            .unwrap();
        let start = store.watch_from(&pods, Some(after_create)).unwrap();
        let seen: Vec<(EventType, Value, Option<Value>)> = start
            .backlog
            .iter()
            .map(HistoryEntry::to_event)
            .map(|e| {
                (
                    e.event_type,
                    e.object["message"].clone(),
                    e.previous.as_ref().map(|p| p["message"].clone()),
                )
            })
            .collect();
        assert_eq!(
            seen,
            vec![
                (EventType::Modified, json!("two"), Some(json!("one"))),
                (EventType::Deleted, json!("two"), Some(json!("two"))),
            ]
        );
        assert_eq!(
            start.backlog[0].to_event().object["metadata"]["resourceVersion"],
            json!((after_create + 1).to_string())
        );
    }

    #[test]
    fn the_history_is_bounded_by_bytes_and_older_versions_are_gone() {
        let store = Store::new(1_000_000, 16);
        let gr = GroupResource::new("apps.kruise.io", "clonesets");
        let big = "x".repeat(HISTORY_BYTES / 8);
        let first_rv = store.current_rv();
        for i in 0..40 {
            put(&store, &gr, &format!("cs-{}", i % 3), &big);
        }
        let st = store.lock();
        assert!(st.history_bytes <= HISTORY_BYTES, "{}", st.history_bytes);
        assert!(st.history.len() < 40);
        let retained = st.history.len();
        drop(st);
        // What is retained still resumes; what left is 410 Gone, as kube-apiserver answers.
        let oldest_kept = store.compacted_rv();
        let start = store.watch_from(&gr, Some(oldest_kept)).unwrap();
        assert_eq!(start.backlog.len(), retained);
        let gone = store.watch_from(&gr, Some(first_rv)).err().unwrap();
        assert_eq!(gone.to_status()["code"], json!(410));
        // Every object is still stored whole.
        assert_eq!(store.count(&gr), 3);
    }

    #[test]
    fn an_update_restarts_the_ttl() {
        let store = Store::new(100, 16);
        let events = GroupResource::new("", "events");
        let ttl = Duration::from_secs(60);
        store.set_ttl(&events, ttl);
        put(&store, &events, "e", "first");
        let after_first_write = Instant::now();
        put(&store, &events, "e", "second");
        // The first write's deadline has passed, the second's has not.
        assert_eq!(store.expire(after_first_write + ttl), 0);
        assert!(store.get(&events, "ns", "e").is_some());
        assert_eq!(store.expire(Instant::now() + ttl), 1);
        assert!(store.get(&events, "ns", "e").is_none());
        // Nothing is left to expire twice.
        assert_eq!(store.expire(Instant::now() + ttl * 2), 0);
    }

    #[test]
    fn only_the_resource_with_a_ttl_expires() {
        let store = Store::new(100, 16);
        let events = GroupResource::new("", "events");
        let config_maps = GroupResource::new("", "configmaps");
        store.set_ttl(&events, Duration::from_secs(1));
        put(&store, &events, "e", "m");
        put(&store, &config_maps, "c", "m");
        assert_eq!(store.expire(Instant::now() + Duration::from_secs(2)), 1);
        assert!(store.get(&config_maps, "ns", "c").is_some());
    }
}
