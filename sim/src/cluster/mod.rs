//! The rest of a cluster around the API server: the garbage collector, the ServiceAccount
//! controller (and admission), simulated nodes, a scheduler, the Job, Deployment and
//! ReplicaSet controllers, a PVC binder, one kubelet
//! loop for every simulated node and its fake CRI runtime. They all write through `SimShared`'s verbs (create, bind_pod, status updates,
//! delete) so clients see exactly the objects, resourceVersions and watch events a real
//! cluster would produce.

pub mod cri;
pub mod deployments;
pub mod gc;
pub mod images;
pub mod jobs;
pub mod kubelet;
pub mod kubelet_api;
pub mod nodes;
pub mod pvc;
pub mod quantity;
pub mod replicasets;
pub mod scheduler;
pub mod serviceaccounts;
pub(crate) mod workloads;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::time::Duration;

/// How long the simulated kubelet takes for each step of starting a container.
/// Small but non-zero by default, so controllers observe the intermediate states
/// (Pending, Running but not Ready) as they would on a real node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KubeletTimings {
    /// Image pull, paid when a container first starts or restarts with a new image.
    pub pull_delay: Duration,
    /// From pulled to running (`state.running`, `started: true`); per pod
    /// `sim.kruise.io/start-delay`.
    pub start_delay: Duration,
    /// From running to ready (no probes are simulated); per pod
    /// `sim.kruise.io/ready-delay`.
    pub ready_delay: Duration,
}

impl Default for KubeletTimings {
    fn default() -> Self {
        KubeletTimings {
            pull_delay: Duration::from_millis(50),
            start_delay: Duration::from_millis(50),
            ready_delay: Duration::from_millis(100),
        }
    }
}

/// Annotation: per-pod override of `KubeletTimings::start_delay` (e.g. "2s").
pub const ANN_START_DELAY: &str = "sim.kruise.io/start-delay";
/// Annotation: per-pod override of `KubeletTimings::ready_delay`.
pub const ANN_READY_DELAY: &str = "sim.kruise.io/ready-delay";
/// Annotation: containers of a restartPolicy Never/OnFailure pod exit this long after
/// they started.
pub const ANN_EXIT_AFTER: &str = "sim.kruise.io/exit-after";
/// Annotation: the exit code those containers exit with (default 0).
pub const ANN_EXIT_CODE: &str = "sim.kruise.io/exit-code";

/// Annotation: how long an exec (other than `sleep N`) or httpGet preStop hook of the
/// pod's containers runs (a `sleep` hook takes its own seconds).
pub const ANN_PRESTOP_DURATION: &str = "sim.kruise.io/prestop-duration";
/// Annotation: how long the containers take to exit after SIGTERM (default 100ms).
pub const ANN_STOP_DELAY: &str = "sim.kruise.io/stop-delay";
/// Annotation: how long an exec (other than `sleep N`) or httpGet postStart hook of the
/// pod's containers runs (a `sleep` hook takes its own seconds). A container is not
/// running until its hook is done.
pub const ANN_POSTSTART_DURATION: &str = "sim.kruise.io/poststart-duration";

/// The (protocol, hostPort) pairs `pod`'s containers ask for: what the scheduler's
/// NodePorts filter and the kubelet's admission hold against the node's other pods.
pub(crate) fn host_ports(pod: &serde_json::Value) -> Vec<(String, i64)> {
    ["containers", "initContainers"]
        .iter()
        .filter_map(|kind| pod.pointer(&format!("/spec/{kind}"))?.as_array())
        .flatten()
        .filter_map(|c| c.get("ports")?.as_array())
        .flatten()
        .filter_map(|p| {
            let port = p.get("hostPort")?.as_i64().filter(|p| *p > 0)?;
            let protocol = p.get("protocol").and_then(|v| v.as_str()).unwrap_or("TCP");
            Some((protocol.to_string(), port))
        })
        .collect()
}

/// The owner reference of `obj` marked `controller: true`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ControllerRef<'a> {
    pub kind: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
}

pub(crate) fn controller_of(obj: &serde_json::Value) -> Option<ControllerRef<'_>> {
    let r = crate::meta::metadata(obj)?
        .get("ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(|c| c.as_bool()) == Some(true))?;
    let text = |k: &str| r.get(k).and_then(|v| v.as_str()).unwrap_or("");
    Some(ControllerRef {
        kind: text("kind"),
        name: text("name"),
        uid: text("uid"),
    })
}

/// The pods in `ns` whose controller is the object of `uid`.
pub(crate) fn owned_pods(
    sh: &crate::SimShared,
    ns: &str,
    uid: &str,
) -> Vec<std::sync::Arc<serde_json::Value>> {
    let (pods, _) = sh
        .store
        .list(&crate::registry::GroupResource::new("", "pods"), Some(ns));
    pods.into_iter()
        .filter(|p| controller_of(p).is_some_and(|r| r.uid == uid))
        .collect()
}

/// A hash that depends only on `s` and `seed` (`DefaultHasher::new` has fixed keys), for the
/// ids and digests the simulated nodes derive from names and images.
pub(crate) fn stable_hash(s: &str, seed: u64) -> u64 {
    let mut h = DefaultHasher::new();
    seed.hash(&mut h);
    s.hash(&mut h);
    h.finish()
}

/// Parses a Go-style duration ("100ms", "2s", "1m30s", "1.5s"); a bare number is
/// seconds. Returns None for anything else.
/// How long a command that only sleeps runs (`sleep N`, `sh -c "sleep N"`), as OpenKruise's
/// e2e specs write their hooks; `None` for any other command.
pub(crate) fn sleeps_for<S: AsRef<str>>(command: &[S]) -> Option<Duration> {
    let words: Vec<&str> = command.iter().map(AsRef::as_ref).collect();
    let line = match words.as_slice() {
        [shell, "-c", script] if shell.ends_with("sh") => script.to_string(),
        words => words.join(" "),
    };
    match line.split_whitespace().collect::<Vec<_>>().as_slice() {
        [sleep, secs] if sleep.ends_with("sleep") => parse_duration(secs),
        _ => None,
    }
}

pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if let Ok(secs) = s.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let n: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += n * factor;
        rest = &rest[unit_len..];
    }
    (total.is_finite() && total >= 0.0).then(|| Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2s"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("150ms"), Some(Duration::from_millis(150)));
        assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("3"), Some(Duration::from_secs(3)));
        assert_eq!(parse_duration("x"), None);
        assert_eq!(parse_duration("-1"), None);
    }
}

/// Who records an event: the component and, for a kubelet, its node.
#[derive(Clone, Copy)]
pub(crate) struct EventSource<'a> {
    pub component: &'a str,
    pub host: Option<&'a str>,
}

/// A core/v1 Event about `object` as the cluster's components record it (named
/// `<object>.<16 hex>`, involvedObject with uid and resourceVersion, count 1), with the
/// namespace it goes to.
pub(crate) fn event_object(
    source: EventSource<'_>,
    object: &serde_json::Value,
    type_: &str,
    reason: &str,
    message: &str,
) -> (String, serde_json::Value) {
    use crate::meta;
    let namespace = match meta::meta_str(object, "namespace") {
        "" => "default",
        ns => ns,
    };
    let name = meta::name_of(object);
    let now = meta::now_rfc3339();
    let mut src = serde_json::json!({"component": source.component});
    if let Some(h) = source.host {
        src["host"] = serde_json::json!(h);
    }
    let event = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": format!("{name}.{:016x}", meta::random_u64()), "namespace": namespace},
        "involvedObject": {
            "apiVersion": object.get("apiVersion").cloned().unwrap_or_else(|| serde_json::json!("v1")),
            "kind": object.get("kind").cloned().unwrap_or_default(),
            "namespace": meta::meta_str(object, "namespace"),
            "name": name,
            "uid": meta::meta_str(object, "uid"),
            "resourceVersion": meta::meta_str(object, "resourceVersion"),
        },
        "type": type_,
        "reason": reason,
        "message": message,
        "source": src,
        "reportingComponent": source.component,
        "reportingInstance": source.host.unwrap_or(source.component),
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    });
    (namespace.to_string(), event)
}

/// Records a core/v1 Event about `object` (see [`event_object`]), so `kubectl describe`
/// and `kubectl get events` show it. Failures are logged only: an event is never worth
/// failing the action it describes.
pub(crate) async fn record_event(
    sh: &crate::SimShared,
    source: EventSource<'_>,
    object: &serde_json::Value,
    type_: &str,
    reason: &str,
    message: &str,
) {
    let Some(def) = sh.resolve("", "v1", "events") else {
        return;
    };
    let (namespace, event) = event_object(source, object, type_, reason, message);
    let opts = crate::ops::WriteOptions {
        user_agent: source.component.to_string(),
        ..Default::default()
    };
    if let Err(e) = sh.create(&def, "v1", &namespace, event, &opts).await {
        tracing::debug!(error = %e, reason, "recording an event failed");
    }
}
