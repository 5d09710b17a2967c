//! A scheduler with kube-scheduler's filters that matter to controllers: NodeName is
//! honoured by skipping bound pods, NodeUnschedulable, NodeAffinity (nodeSelector and
//! required node affinity incl. matchFields `metadata.name`), TaintToleration
//! (NoSchedule/NoExecute) and NodeResourcesFit (cpu, memory, pod count). Among
//! feasible nodes it picks the one with the fewest pods (then by name), so replicas
//! spread. Pods that fit nowhere get PodScheduled=False/Unschedulable with the
//! scheduler's FitError message and wait, as in kube-scheduler's unschedulable queue,
//! until their spec changes, a node changes, room may have appeared (a pod is deleted or
//! finishes: only for pods some node lacked room for, as only kube-scheduler's
//! NodeResourcesFit asks to be woken by that) or a minute has passed. Like kube-scheduler
//! it keeps its own cache, fed by the change stream, of the pods waiting and of what each
//! node's pods request, so a pass costs the pods waiting, never a walk over every pod in
//! the cluster.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use super::quantity;
use crate::SimShared;
use crate::meta;
use crate::ops::{Subresource, WriteOptions};
use crate::registry::GroupResource;
use crate::store::{EventType, StoreEvent};

fn opts() -> WriteOptions {
    WriteOptions {
        user_agent: "kube-scheduler/v1.33.0 (linux/amd64) kubernetes/scheduler".into(),
        ..Default::default()
    }
}

/// Requested resources of a pod or used/allocatable on a node.
#[derive(Debug, Clone, Copy, Default)]
struct Res {
    cpu_m: i64,
    mem: i64,
    pods: i64,
}

/// Effective requests as upstream computes them: max(sum of containers, largest init
/// container), per resource.
fn pod_requests(pod: &Value) -> Res {
    let req = |c: &Value, key: &str, f: fn(&Value) -> i64| {
        c.pointer("/resources/requests")
            .and_then(|r| r.get(key))
            .map_or(0, f)
    };
    let list = |k: &str| {
        pod.get("spec")
            .and_then(|s| s.get(k))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    };
    let mut r = Res {
        pods: 1,
        ..Default::default()
    };
    for c in list("containers") {
        r.cpu_m += req(c, "cpu", quantity::millis);
        r.mem += req(c, "memory", quantity::units);
    }
    for c in list("initContainers") {
        r.cpu_m = r.cpu_m.max(req(c, "cpu", quantity::millis));
        r.mem = r.mem.max(req(c, "memory", quantity::units));
    }
    r
}

/// The pod's effective requests of resources other than cpu, memory and pods (extended
/// resources such as `example.com/gpu`, `ephemeral-storage`, hugepages), in their units.
fn scalar_requests(pod: &Value) -> BTreeMap<String, i64> {
    let mut sums: BTreeMap<String, i64> = BTreeMap::new();
    let requests = |c: &Value| {
        c.pointer("/resources/requests")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter(|(name, _)| !matches!(name.as_str(), "cpu" | "memory" | "pods"))
            .map(|(name, q)| (name.clone(), quantity::units(q)))
            .collect::<Vec<_>>()
    };
    let list = |k: &str| {
        pod.get("spec")
            .and_then(|s| s.get(k))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    for c in list("containers") {
        for (name, n) in requests(&c) {
            *sums.entry(name).or_default() += n;
        }
    }
    for c in list("initContainers") {
        for (name, n) in requests(&c) {
            let sum = sums.entry(name).or_default();
            *sum = (*sum).max(n);
        }
    }
    sums
}

fn is_terminal(pod: &Value) -> bool {
    matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    )
}

fn node_of(pod: &Value) -> &str {
    pod.pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// A pod the scheduler is responsible for right now.
fn wants_scheduling(pod: &Value) -> bool {
    node_of(pod).is_empty()
        && !meta::is_terminating(pod)
        && !is_terminal(pod)
        && pod
            .pointer("/spec/schedulerName")
            .and_then(Value::as_str)
            .is_none_or(|s| s == "default-scheduler")
        && pod
            .pointer("/spec/schedulingGates")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
}

fn expr_matches(e: &Value, value: Option<&str>) -> bool {
    let values: Vec<&str> = e
        .get("values")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let int = |s: &str| s.parse::<i64>().ok();
    match e.get("operator").and_then(Value::as_str).unwrap_or("") {
        "In" => value.is_some_and(|v| values.contains(&v)),
        "NotIn" => value.is_none_or(|v| !values.contains(&v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => {
            matches!((value.and_then(int), values.first().and_then(|s| int(s))), (Some(a), Some(b)) if a > b)
        }
        "Lt" => {
            matches!((value.and_then(int), values.first().and_then(|s| int(s))), (Some(a), Some(b)) if a < b)
        }
        _ => false,
    }
}

/// One NodeSelectorTerm: all expressions and fields must match; an empty term matches
/// nothing (as `nodeaffinity.NewNodeSelector` treats it).
fn term_matches(term: &Value, node: &Value) -> bool {
    let exprs = term
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let fields = term
        .get("matchFields")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = meta::labels_of(node);
    exprs.iter().all(|e| {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        let v = labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        expr_matches(e, v)
    }) && fields.iter().all(|e| {
        // metadata.name is the only field selector upstream supports here.
        e.get("key").and_then(Value::as_str) == Some("metadata.name")
            && expr_matches(e, Some(meta::name_of(node)))
    })
}

fn affinity_matches(pod: &Value, node: &Value) -> bool {
    if let Some(sel) = pod.pointer("/spec/nodeSelector").and_then(Value::as_object) {
        let labels = meta::labels_of(node);
        let ok = sel
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)).and_then(Value::as_str) == v.as_str());
        if !ok {
            return false;
        }
    }
    match pod.pointer(
        "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms",
    ) {
        Some(Value::Array(terms)) => terms.iter().any(|t| term_matches(t, node)),
        _ => true,
    }
}

fn tolerates(tol: &Value, taint: &Value) -> bool {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let (t_key, t_val, t_eff) = (s(taint, "key"), s(taint, "value"), s(taint, "effect"));
    let effect = s(tol, "effect");
    if !effect.is_empty() && effect != t_eff {
        return false;
    }
    let key = s(tol, "key");
    if !key.is_empty() && key != t_key {
        return false;
    }
    match s(tol, "operator").as_str() {
        "Exists" => true,
        "" | "Equal" => s(tol, "value") == t_val,
        _ => false,
    }
}

/// The first NoSchedule/NoExecute taint the pod does not tolerate.
fn untolerated_taint<'a>(pod: &Value, taints: &'a [Value]) -> Option<&'a Value> {
    let tols = pod
        .pointer("/spec/tolerations")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    taints.iter().find(|t| {
        matches!(
            t.get("effect").and_then(Value::as_str),
            Some("NoSchedule" | "NoExecute")
        ) && !tols.iter().any(|tol| tolerates(tol, t))
    })
}

fn allocatable(node: &Value) -> Res {
    let a = node.pointer("/status/allocatable");
    let get = |k: &str, f: fn(&Value) -> i64| a.and_then(|a| a.get(k)).map_or(0, f);
    Res {
        cpu_m: get("cpu", quantity::millis),
        mem: get("memory", quantity::units),
        pods: get("pods", quantity::units),
    }
}

/// Runs the filters for one node in the default profile's order (NodeUnschedulable,
/// TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit), stopping at the first plugin
/// that rejects, as the framework does; Ok(()) when the pod fits, otherwise the reasons
/// (upstream's per-plugin messages).
fn filter(
    pod: &Value,
    req: Res,
    node: &Value,
    used: Res,
    taken_ports: &[(String, i64)],
) -> Result<(), Vec<String>> {
    let taints = node
        .pointer("/spec/taints")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        let t = json!({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"});
        if untolerated_taint(pod, std::slice::from_ref(&t)).is_some() {
            return Err(vec!["node(s) were unschedulable".into()]);
        }
    }
    if let Some(t) = untolerated_taint(pod, taints) {
        let s = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or("");
        return Err(vec![format!(
            "node(s) had untolerated taint {{{}: {}}}",
            s("key"),
            s("value")
        )]);
    }
    if !affinity_matches(pod, node) {
        return Err(vec![
            "node(s) didn't match Pod's node affinity/selector".into(),
        ]);
    }
    if super::host_ports(pod)
        .iter()
        .any(|p| taken_ports.contains(p))
    {
        return Err(vec![
            "node(s) didn't have free ports for the requested pod ports".into(),
        ]);
    }
    let alloc = allocatable(node);
    let mut reasons = Vec::new();
    if used.pods + 1 > alloc.pods {
        reasons.push("Too many pods".to_string());
    }
    if req.cpu_m > 0 && used.cpu_m + req.cpu_m > alloc.cpu_m {
        reasons.push("Insufficient cpu".into());
    }
    if req.mem > 0 && used.mem + req.mem > alloc.mem {
        reasons.push("Insufficient memory".into());
    }
    // Other resources against the node's allocatable alone (what other pods hold of them
    // is not tracked): a resource the node does not advertise fits no request.
    for (name, requested) in scalar_requests(pod) {
        let allocatable = node
            .pointer("/status/allocatable")
            .and_then(|a| a.get(&name))
            .map_or(0, quantity::units);
        if requested > allocatable {
            reasons.push(format!("Insufficient {name}"));
        }
    }
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(reasons)
    }
}

/// `FitError.Error()`: "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) ...."
/// with the reasons sorted as strings, plus the preemption postfix.
fn fit_error(total: usize, reasons: &BTreeMap<String, usize>) -> String {
    let mut parts: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    let mut msg = format!("0/{total} nodes are available");
    if parts.is_empty() {
        msg.push('.');
    } else {
        msg.push_str(&format!(": {}.", parts.join(", ")));
    }
    msg.push_str(&format!(
        " preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling."
    ));
    msg
}

/// The scheduler's view of the cluster, kept up to date from the store's change stream
/// like kube-scheduler's cache and queues: which pods wait to be scheduled (`active`),
/// which were found unschedulable and wait for room or a spec change (`parked`), and
/// what the bound pods request on each node. A pass looks only at the active pods, so
/// its cost follows the pods waiting, not every pod in the cluster.
#[derive(Default)]
struct Queue {
    active: HashSet<Key>,
    /// Pods found unschedulable, and why.
    parked: HashMap<Key, Parked>,
    parked_since: Option<Instant>,
    /// Each bound, non-terminal pod's node and requests, and their sums per node.
    bound: HashMap<Key, (String, Res)>,
    used: HashMap<String, Res>,
    /// The host ports each bound pod holds, and each node's.
    ports: HashMap<Key, Vec<(String, i64)>>,
    taken_ports: HashMap<String, Vec<(String, i64)>>,
    /// Each node's resourceVersion as last seen, to tell after a lag whether one changed.
    node_versions: HashMap<String, String>,
}

type Key = (String, String);

/// A pod found unschedulable.
struct Parked {
    /// Its (uid, generation) when last tried: a spec change wakes it.
    version: (String, i64),
    /// Some node lacked room for it (pod count, cpu, memory): a pod deleted or finished
    /// may make room. A pod no node admits for other reasons (affinity, taints,
    /// cordons) waits for a node change, as kube-scheduler's queueing hints have it: a
    /// pod going away wakes only the pods NodeResourcesFit rejected.
    waits_for_room: bool,
}

/// Whether a filter reason is NodeResourcesFit's: the node has no room left.
fn is_room_reason(reason: &str) -> bool {
    reason == "Too many pods" || reason.starts_with("Insufficient ")
}

/// kube-scheduler flushes its unschedulable queue after podMaxInUnschedulablePodsDuration
/// (5 minutes); the simulator retries sooner.
const UNSCHEDULABLE_FLUSH: Duration = Duration::from_secs(60);

fn node_versions(nodes: &[Arc<Value>]) -> HashMap<String, String> {
    nodes
        .iter()
        .map(|n| {
            (
                meta::name_of(n).to_string(),
                meta::meta_str(n, "resourceVersion").to_string(),
            )
        })
        .collect()
}

fn key_of(pod: &Value) -> Key {
    (
        meta::meta_str(pod, "namespace").to_string(),
        meta::name_of(pod).to_string(),
    )
}

/// The pod's identity and spec version; a status write leaves it unchanged.
fn spec_version(pod: &Value) -> Option<(String, i64)> {
    let generation = pod
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)?;
    Some((meta::meta_str(pod, "uid").to_string(), generation))
}

impl Res {
    fn add(&mut self, r: Res, sign: i64) {
        self.cpu_m += sign * r.cpu_m;
        self.mem += sign * r.mem;
        self.pods += sign * r.pods;
    }
}

impl Queue {
    /// Built from every stored pod (at start, and by [`Queue::resync`]).
    fn rebuild(pods: &[Arc<Value>]) -> Self {
        let mut q = Queue::default();
        for p in pods {
            q.observe(key_of(p), Some(p));
        }
        q
    }

    /// Rebuilt after the change stream lagged: the pods' state from the store, but a parked
    /// pod whose spec is unchanged stays parked unless it waits for room (a missed pod
    /// deletion may have made some) or a node changed meanwhile. Re-trying every pod that
    /// fits nowhere after each lag made a pass over 10,000 of them times every node, long
    /// enough for the stream to lag again.
    fn resync(&mut self, pods: &[Arc<Value>], nodes: &[Arc<Value>]) {
        let mut next = Queue::rebuild(pods);
        next.node_versions = node_versions(nodes);
        if next.node_versions == self.node_versions {
            for pod in pods {
                let key = key_of(pod);
                let still_parked = self.parked.get(&key).is_some_and(|parked| {
                    !parked.waits_for_room && spec_version(pod).as_ref() == Some(&parked.version)
                });
                if still_parked
                    && next.active.remove(&key)
                    && let Some(parked) = self.parked.remove(&key)
                {
                    next.parked.insert(key, parked);
                }
            }
            if !next.parked.is_empty() {
                next.parked_since = self.parked_since;
            }
        }
        *self = next;
    }

    /// Takes a pod's latest state (None: deleted).
    fn observe(&mut self, key: Key, pod: Option<&Value>) {
        self.unbind(&key);
        let Some(pod) = pod else {
            self.active.remove(&key);
            self.parked.remove(&key);
            return;
        };
        if wants_scheduling(pod) {
            let unchanged = match (self.parked.get(&key), spec_version(pod)) {
                (Some(parked), Some(v)) => parked.version == v,
                _ => false,
            };
            if !unchanged {
                self.parked.remove(&key);
                self.active.insert(key);
            }
            return;
        }
        self.active.remove(&key);
        self.parked.remove(&key);
        if !node_of(pod).is_empty() && !is_terminal(pod) {
            self.bind(key, node_of(pod), pod_requests(pod), super::host_ports(pod));
        }
    }

    fn bind(&mut self, key: Key, node: &str, req: Res, ports: Vec<(String, i64)>) {
        self.unbind(&key);
        self.used.entry(node.to_string()).or_default().add(req, 1);
        if !ports.is_empty() {
            let taken = self.taken_ports.entry(node.to_string()).or_default();
            taken.extend(ports.iter().cloned());
            self.ports.insert(key.clone(), ports);
        }
        self.bound.insert(key, (node.to_string(), req));
    }

    fn unbind(&mut self, key: &Key) {
        let Some((node, req)) = self.bound.remove(key) else {
            return;
        };
        if let Some(u) = self.used.get_mut(&node) {
            u.add(req, -1);
        }
        if let (Some(ports), Some(taken)) =
            (self.ports.remove(key), self.taken_ports.get_mut(&node))
        {
            for port in ports {
                if let Some(i) = taken.iter().position(|p| *p == port) {
                    taken.swap_remove(i);
                }
            }
        }
    }

    fn park(&mut self, key: Key, pod: &Value, waits_for_room: bool) {
        if let Some(version) = spec_version(pod) {
            self.parked.insert(
                key,
                Parked {
                    version,
                    waits_for_room,
                },
            );
            self.parked_since.get_or_insert_with(Instant::now);
        } else {
            // Without a generation a spec change cannot be told apart: keep trying.
            self.active.insert(key);
        }
    }

    /// The parked pods that wait for room are tried again.
    fn unpark_waiting_for_room(&mut self) {
        let waking: Vec<Key> = self
            .parked
            .iter()
            .filter(|(_, parked)| parked.waits_for_room)
            .map(|(key, _)| key.clone())
            .collect();
        for key in waking {
            self.parked.remove(&key);
            self.active.insert(key);
        }
        if self.parked.is_empty() {
            self.parked_since = None;
        }
    }

    /// Every parked pod is tried again (a node changed, or the minute is up).
    fn unpark_all(&mut self) {
        self.active.extend(self.parked.drain().map(|(k, _)| k));
        self.parked_since = None;
    }

    fn on_event(&mut self, ev: &StoreEvent) {
        if !ev.gr.group.is_empty() {
            return;
        }
        match ev.gr.resource.as_str() {
            "nodes" => {
                if ev.event_type == EventType::Deleted {
                    self.node_versions.remove(&ev.name);
                } else {
                    self.node_versions.insert(
                        ev.name.clone(),
                        meta::meta_str(&ev.object, "resourceVersion").to_string(),
                    );
                }
                self.unpark_all();
            }
            "pods" => {
                let key = (ev.namespace.clone(), ev.name.clone());
                let deleted = ev.event_type == EventType::Deleted;
                // Room may have appeared: a pod went away or finished.
                let room = deleted
                    || (is_terminal(&ev.object)
                        && ev.previous.as_deref().is_some_and(|p| !is_terminal(p)));
                self.observe(key, (!deleted).then_some(&*ev.object));
                if room {
                    self.unpark_waiting_for_room();
                }
            }
            _ => {}
        }
    }

    fn flush_if_due(&mut self) {
        if self
            .parked_since
            .is_some_and(|t| t.elapsed() >= UNSCHEDULABLE_FLUSH)
        {
            self.unpark_all();
        }
    }
}

/// One scheduling pass over the active pods, oldest first.
async fn schedule_pass(sh: &Arc<SimShared>, queue: &mut Queue) {
    if queue.active.is_empty() {
        return;
    }
    let pods_gr = GroupResource::new("", "pods");
    let (nodes, _) = sh.store.list(&GroupResource::new("", "nodes"), None);
    let mut pending: Vec<Arc<Value>> = Vec::with_capacity(queue.active.len());
    for key in std::mem::take(&mut queue.active) {
        // The store is ahead of the change stream: act on the pod as it is now; its
        // event, still on the way, files it again.
        match sh.store.get(&pods_gr, &key.0, &key.1) {
            Some(p) if wants_scheduling(&p) => pending.push(p),
            _ => {}
        }
    }
    // Oldest first, like the scheduling queue's FIFO order for equal priority.
    pending.sort_by(|a, b| {
        meta::meta_str(a, "creationTimestamp")
            .cmp(meta::meta_str(b, "creationTimestamp"))
            .then_with(|| meta::name_of(a).cmp(meta::name_of(b)))
    });
    for pod in pending {
        let req = pod_requests(&pod);
        let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
        let mut best: Option<(&Value, i64)> = None;
        for n in &nodes {
            let u = queue
                .used
                .get(meta::name_of(n))
                .copied()
                .unwrap_or_default();
            let taken = queue
                .taken_ports
                .get(meta::name_of(n))
                .map(Vec::as_slice)
                .unwrap_or_default();
            match filter(&pod, req, n, u, taken) {
                Ok(()) => {
                    if best.is_none_or(|(_, c)| u.pods < c) {
                        best = Some((n, u.pods));
                    }
                }
                Err(rs) => {
                    for r in rs {
                        *reasons.entry(r).or_default() += 1;
                    }
                }
            }
        }
        let key = key_of(&pod);
        let (ns, name) = (&key.0, &key.1);
        match best {
            Some((node, _)) => {
                let node_name = meta::name_of(node).to_string();
                let binding = json!({
                    "apiVersion": "v1", "kind": "Binding",
                    "metadata": {"name": name, "namespace": ns, "uid": meta::meta_str(&pod, "uid")},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
                });
                match sh.bind_pod(ns, name, &binding, &opts()).await {
                    Ok(()) => {
                        let message = format!("Successfully assigned {ns}/{name} to {node_name}");
                        super::record_event(
                            sh,
                            SCHEDULER,
                            &pod_ref(&pod),
                            "Normal",
                            "Scheduled",
                            &message,
                        )
                        .await;
                        // Counted now, so the next pod in this pass sees the room taken;
                        // the binding's event later replaces this with the same figures.
                        queue.bind(key, &node_name, req, super::host_ports(&pod));
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, pod = %name, "binding failed; retrying later");
                        queue.active.insert(key);
                    }
                }
            }
            None => {
                mark_unschedulable(sh, &pod, &fit_error(nodes.len(), &reasons)).await;
                let waits_for_room = reasons.keys().any(|r| is_room_reason(r));
                queue.park(key, &pod, waits_for_room);
            }
        }
    }
}

const SCHEDULER: super::EventSource<'static> = super::EventSource {
    component: "default-scheduler",
    host: None,
};

/// The pod as an event's involved object (the store's objects carry no kind).
fn pod_ref(pod: &Value) -> Value {
    let mut p = pod.clone();
    if let Some(m) = p.as_object_mut() {
        m.insert("apiVersion".into(), json!("v1"));
        m.insert("kind".into(), json!("Pod"));
    }
    p
}

/// Sets PodScheduled=False/Unschedulable with the FitError message and records a
/// FailedScheduling event, both only when the message changed (the scheduler retries
/// every second; repeating either would only churn).
async fn mark_unschedulable(sh: &Arc<SimShared>, pod: &Value, message: &str) {
    let Some(def) = sh.resolve("", "v1", "pods") else {
        return;
    };
    let (ns, name) = (meta::meta_str(pod, "namespace"), meta::name_of(pod));
    let already = meta::condition_is(pod, "PodScheduled", "False")
        && meta::condition(pod, "PodScheduled")
            .and_then(|c| c.get("message"))
            .and_then(Value::as_str)
            == Some(message);
    if already {
        return;
    }
    super::record_event(
        sh,
        SCHEDULER,
        &pod_ref(pod),
        "Warning",
        "FailedScheduling",
        message,
    )
    .await;
    let res = sh
        .update_with(&def, "v1", ns, name, Subresource::Status, &opts(), |cur| {
            let mut next = cur.clone();
            let conds = next
                .pointer_mut("/status")
                .and_then(Value::as_object_mut)
                .map(|s| s.entry("conditions").or_insert_with(|| json!([])));
            if let Some(Value::Array(list)) = conds {
                let same = list.iter().any(|c| {
                    c.get("type").and_then(Value::as_str) == Some("PodScheduled")
                        && c.get("status").and_then(Value::as_str) == Some("False")
                        && c.get("message").and_then(Value::as_str) == Some(message)
                });
                // Rewriting an identical condition would only churn resourceVersions.
                if !same {
                    list.retain(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"));
                    list.push(json!({
                        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                        "message": message, "lastProbeTime": null,
                        "lastTransitionTime": meta::now_rfc3339(),
                    }));
                }
            }
            Ok(next)
        })
        .await;
    if let Err(e) = res
        && e.code != 404
    {
        tracing::debug!(error = %e, pod = %name, "recording Unschedulable failed");
    }
}

/// Schedules the active pods after every batch of changes, and once a second as a
/// safety net (and to flush the parked pods after a minute).
pub async fn run(sh: Arc<SimShared>) {
    let pods_gr = GroupResource::new("", "pods");
    let nodes_gr = GroupResource::new("", "nodes");
    let mut rx = sh.store.subscribe();
    let mut queue = Queue::rebuild(&sh.store.list(&pods_gr, None).0);
    queue.node_versions = node_versions(&sh.store.list(&nodes_gr, None).0);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        let mut lagged = false;
        tokio::select! {
            r = rx.recv() => match r {
                Ok(ev) => queue.on_event(&ev),
                Err(RecvError::Lagged(_)) => lagged = true,
                Err(RecvError::Closed) => return,
            },
            _ = tick.tick() => queue.flush_if_due(),
        }
        loop {
            match rx.try_recv() {
                Ok(ev) => queue.on_event(&ev),
                Err(TryRecvError::Lagged(_)) => lagged = true,
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Closed) => return,
            }
        }
        if lagged {
            // Changes were missed: start again from what is stored.
            queue.resync(
                &sh.store.list(&pods_gr, None).0,
                &sh.store.list(&nodes_gr, None).0,
            );
        }
        schedule_pass(&sh, &mut queue).await;
    }
}

#[cfg(test)]
mod tests;
