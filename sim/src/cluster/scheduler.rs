//! A scheduler with kube-scheduler's filters that matter to controllers: NodeName is
//! honoured by skipping bound pods, NodeUnschedulable, NodeAffinity (nodeSelector and
//! required node affinity incl. matchFields `metadata.name`), TaintToleration
//! (NoSchedule/NoExecute) and NodeResourcesFit (cpu, memory, pod count). Among
//! feasible nodes it picks the one with the fewest pods (then by name), so replicas
//! spread. Pods that fit nowhere get PodScheduled=False/Unschedulable with the
//! scheduler's FitError message and wait, as in kube-scheduler's unschedulable queue,
//! until their spec changes, capacity may have appeared (a node changes, a pod is deleted
//! or finishes) or a minute has passed — not retried on every change in the cluster, which
//! with thousands of unschedulable pods would cost a pass over all of them per write.

use std::collections::{BTreeMap, HashMap};
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
        pod.pointer(&format!("/spec/{k}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let mut r = Res {
        pods: 1,
        ..Default::default()
    };
    for c in list("containers") {
        r.cpu_m += req(&c, "cpu", quantity::millis);
        r.mem += req(&c, "memory", quantity::units);
    }
    for c in list("initContainers") {
        r.cpu_m = r.cpu_m.max(req(&c, "cpu", quantity::millis));
        r.mem = r.mem.max(req(&c, "memory", quantity::units));
    }
    r
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
/// TaintToleration, NodeAffinity, NodeResourcesFit), stopping at the first plugin
/// that rejects, as the framework does; Ok(()) when the pod fits, otherwise the reasons
/// (upstream's per-plugin messages).
fn filter(pod: &Value, req: Res, node: &Value, used: Res) -> Result<(), Vec<String>> {
    let taints: Vec<Value> = node
        .pointer("/spec/taints")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        let t = json!({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"});
        if untolerated_taint(pod, std::slice::from_ref(&t)).is_some() {
            return Err(vec!["node(s) were unschedulable".into()]);
        }
    }
    if let Some(t) = untolerated_taint(pod, &taints) {
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

/// One scheduling pass over every pending pod.
/// Pods found unschedulable: (namespace, name) -> (uid, generation) when last tried.
#[derive(Default)]
struct Unschedulable {
    pods: HashMap<(String, String), (String, i64)>,
    since: Option<Instant>,
}

/// kube-scheduler flushes its unschedulable queue after podMaxInUnschedulablePodsDuration
/// (5 minutes); the simulator retries sooner.
const UNSCHEDULABLE_FLUSH: Duration = Duration::from_secs(60);

impl Unschedulable {
    fn key(pod: &Value) -> (String, String) {
        (
            meta::meta_str(pod, "namespace").to_string(),
            meta::name_of(pod).to_string(),
        )
    }

    /// The pod's identity and spec version; a status write leaves it unchanged.
    fn version(pod: &Value) -> Option<(String, i64)> {
        let generation = pod
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)?;
        Some((meta::meta_str(pod, "uid").to_string(), generation))
    }

    fn skip(&self, pod: &Value) -> bool {
        Self::version(pod).is_some_and(|v| self.pods.get(&Self::key(pod)) == Some(&v))
    }

    fn remember(&mut self, pod: &Value) {
        if let Some(v) = Self::version(pod) {
            self.pods.insert(Self::key(pod), v);
            self.since.get_or_insert_with(Instant::now);
        }
    }

    fn clear(&mut self) {
        self.pods.clear();
        self.since = None;
    }

    /// Clears when `ev` may have made room: a node changed, a pod went away or finished.
    fn on_event(&mut self, ev: &StoreEvent) {
        let room = match ev.gr.resource.as_str() {
            "nodes" => true,
            "pods" => {
                ev.event_type == EventType::Deleted
                    || (is_terminal(&ev.object)
                        && ev.previous.as_deref().is_some_and(|p| !is_terminal(p)))
            }
            _ => false,
        };
        if room {
            self.clear();
        }
    }

    fn flush_if_due(&mut self) {
        if self
            .since
            .is_some_and(|t| t.elapsed() >= UNSCHEDULABLE_FLUSH)
        {
            self.clear();
        }
    }
}

async fn schedule_pass(sh: &Arc<SimShared>, unschedulable: &mut Unschedulable) {
    let pods_gr = GroupResource::new("", "pods");
    let (nodes, _) = sh.store.list(&GroupResource::new("", "nodes"), None);
    let (pods, _) = sh.store.list(&pods_gr, None);
    let mut used: HashMap<String, Res> = HashMap::new();
    let mut pending = Vec::new();
    for p in &pods {
        if wants_scheduling(p) {
            if !unschedulable.skip(p) {
                pending.push(p.clone());
            }
        } else if !node_of(p).is_empty() && !is_terminal(p) {
            let r = pod_requests(p);
            let u = used.entry(node_of(p).to_string()).or_default();
            u.cpu_m += r.cpu_m;
            u.mem += r.mem;
            u.pods += 1;
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
            let u = used.get(meta::name_of(n)).copied().unwrap_or_default();
            match filter(&pod, req, n, u) {
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
        let ns = meta::meta_str(&pod, "namespace").to_string();
        let name = meta::name_of(&pod).to_string();
        match best {
            Some((node, _)) => {
                let node_name = meta::name_of(node).to_string();
                let binding = json!({
                    "apiVersion": "v1", "kind": "Binding",
                    "metadata": {"name": name, "namespace": ns, "uid": meta::meta_str(&pod, "uid")},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
                });
                match sh.bind_pod(&ns, &name, &binding, &opts()).await {
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
                        let u = used.entry(node_name).or_default();
                        u.cpu_m += req.cpu_m;
                        u.mem += req.mem;
                        u.pods += 1;
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, pod = %name, "binding failed; retrying later")
                    }
                }
            }
            None => {
                unschedulable.remember(&pod);
                mark_unschedulable(sh, &pod, &fit_error(nodes.len(), &reasons)).await
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

fn relevant(gr: &GroupResource) -> bool {
    gr.group.is_empty() && (gr.resource == "pods" || gr.resource == "nodes")
}

/// Schedules on every pod or node change (coalesced), and once a second as a
/// safety net for changes the pass raced with.
pub async fn run(sh: Arc<SimShared>) {
    let mut rx = sh.store.subscribe();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut unschedulable = Unschedulable::default();
    loop {
        let mut dirty = tokio::select! {
            r = rx.recv() => match r {
                Ok(ev) => {
                    unschedulable.on_event(&ev);
                    relevant(&ev.gr)
                }
                Err(RecvError::Lagged(_)) => {
                    unschedulable.clear();
                    true
                }
                Err(RecvError::Closed) => return,
            },
            _ = tick.tick() => {
                unschedulable.flush_if_due();
                true
            }
        };
        loop {
            match rx.try_recv() {
                Ok(ev) => {
                    unschedulable.on_event(&ev);
                    dirty |= relevant(&ev.gr);
                }
                Err(TryRecvError::Lagged(_)) => {
                    unschedulable.clear();
                    dirty = true;
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Closed) => return,
            }
        }
        if dirty {
            schedule_pass(&sh, &mut unschedulable).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_error_message() {
        let mut r = BTreeMap::new();
        r.insert(
            "node(s) didn't match Pod's node affinity/selector".to_string(),
            2,
        );
        r.insert("Insufficient cpu".to_string(), 1);
        assert_eq!(
            fit_error(3, &r),
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        );
    }

    #[test]
    fn tolerations() {
        let taint = json!({"key": "a", "value": "b", "effect": "NoSchedule"});
        assert!(tolerates(
            &json!({"key": "a", "operator": "Exists"}),
            &taint
        ));
        assert!(tolerates(&json!({"key": "a", "value": "b"}), &taint));
        assert!(!tolerates(&json!({"key": "a", "value": "c"}), &taint));
        assert!(tolerates(&json!({"operator": "Exists"}), &taint));
        assert!(!tolerates(
            &json!({"operator": "Exists", "effect": "NoExecute"}),
            &taint
        ));
    }
}
