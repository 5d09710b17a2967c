//! The object store: one map per group/resource, one global resourceVersion counter,
//! a bounded history of changes for watches, and a broadcast of every committed change.
//!
//! The store only enforces storage-level rules (existence, optimistic concurrency,
//! resourceVersion assignment). API semantics (defaults, generation, finalizers,
//! validation) live in `ops`; the in-process components of `cluster` (garbage collector,
//! scheduler, kubelet, Job controller) write through `ops` and follow changes through
//! [`Store::subscribe`].

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

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

pub struct StoreState {
    pub rv: u64,
    pub objects: HashMap<GroupResource, BTreeMap<ObjectKey, Arc<Value>>>,
    history: VecDeque<Arc<StoreEvent>>,
    history_limit: usize,
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

/// What a watch starts with: the retained events after the requested version and a
/// receiver for everything committed afterwards (no gap, no duplicate).
pub struct WatchStart {
    /// Current objects, when a snapshot was asked for (watch without resourceVersion).
    pub snapshot: Vec<Arc<Value>>,
    pub backlog: Vec<Arc<StoreEvent>>,
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
        let st = self.lock();
        st.objects
            .get(gr)
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
            .cloned()
    }

    /// Snapshot of objects (optionally in one namespace), ordered by key, plus the
    /// resourceVersion the snapshot is consistent with.
    pub fn list(&self, gr: &GroupResource, ns: Option<&str>) -> (Vec<Arc<Value>>, u64) {
        let st = self.lock();
        let items = match st.objects.get(gr) {
            None => Vec::new(),
            Some(m) => match ns {
                Some(ns) => m
                    .range((ns.to_string(), String::new())..)
                    .take_while(|((n, _), _)| n == ns)
                    .map(|(_, v)| v.clone())
                    .collect(),
                None => m.values().cloned().collect(),
            },
        };
        (items, st.rv)
    }

    /// Like [`Store::list`], but only objects whose key sorts after `after`.
    pub fn list_after(
        &self,
        gr: &GroupResource,
        ns: Option<&str>,
        after: &ObjectKey,
    ) -> (Vec<Arc<Value>>, u64) {
        use std::ops::Bound;
        let st = self.lock();
        let items = match st.objects.get(gr) {
            None => Vec::new(),
            Some(m) => m
                .range((Bound::Excluded(after.clone()), Bound::Unbounded))
                .take_while(|((n, _), _)| ns.is_none_or(|ns| n == ns))
                .map(|(_, v)| v.clone())
                .collect(),
        };
        (items, st.rv)
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
            for ev in st.history.iter() {
                if ev.rv > rv && ev.gr == *gr {
                    backlog.push(ev.clone());
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
        let st = self.lock();
        let receiver = self.events_tx.subscribe();
        let snapshot = match st.objects.get(gr) {
            None => Vec::new(),
            Some(m) => match ns {
                Some(ns) => m
                    .range((ns.to_string(), String::new())..)
                    .take_while(|((n, _), _)| n == ns)
                    .map(|(_, v)| v.clone())
                    .collect(),
                None => m.values().cloned().collect(),
            },
        };
        WatchStart {
            snapshot,
            backlog: Vec::new(),
            receiver,
            current_rv: st.rv,
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
            .map(|(key, obj)| (deadline, key.clone(), resource_version(obj)))
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
            let Some(current) = st.objects.get(&gr).and_then(|m| m.get(&key)).cloned() else {
                continue;
            };
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
                &gr,
                &ns,
                &name,
                EventType::Deleted,
                Arc::new(last),
                Some(current),
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
        let current = st.objects.get(gr).and_then(|m| m.get(&key)).cloned();
        let decision = f(&mut st, current.as_ref())?;
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
                st.objects
                    .entry(gr.clone())
                    .or_default()
                    .insert(key, obj.clone());
                let event_type = if current.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                self.record(&mut st, gr, ns, name, event_type, obj.clone(), current);
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
                    gr,
                    ns,
                    name,
                    EventType::Deleted,
                    last.clone(),
                    current,
                );
                Ok(Some(last))
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        st: &mut StoreState,
        gr: &GroupResource,
        ns: &str,
        name: &str,
        event_type: EventType,
        object: Arc<Value>,
        previous: Option<Arc<Value>>,
    ) {
        let ev = Arc::new(StoreEvent {
            rv: st.rv,
            gr: gr.clone(),
            namespace: ns.to_string(),
            name: name.to_string(),
            event_type,
            object,
            previous,
        });
        st.history.push_back(ev.clone());
        while st.history.len() > st.history_limit {
            if let Some(old) = st.history.pop_front() {
                st.compacted_rv = old.rv;
            }
        }
        // No receivers is fine: nobody is watching.
        let _ = self.events_tx.send(ev);
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
    pub fn get(&self, gr: &GroupResource, ns: &str, name: &str) -> Option<&Arc<Value>> {
        self.objects
            .get(gr)
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
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
