//! kube-controller-manager's ReplicaSet controller, the part workloads rely on: a
//! ReplicaSet keeps `spec.replicas` active pods from its template (named `<rs>-<5 chars>`,
//! owned by it), deletes the surplus in upstream's order (unscheduled, pending and not-ready
//! pods first, then the lowest `controller.kubernetes.io/pod-deletion-cost`, the most
//! recently ready, the most restarted, the newest), and reports `replicas`,
//! `fullyLabeledReplicas`, `readyReplicas`, `availableReplicas` (ready for
//! `minReadySeconds`) and `observedGeneration`. The Deployment controller
//! (`deployments.rs`) scales ReplicaSets; this one makes their pods.

use std::cmp::Ordering;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use super::workloads::{
    Key, controller_manager, create_pods, delete_pods, pod_from_template, run_controller, typed,
    write_status,
};
use super::{EventSource, controller_of, owned_pods};
use crate::SimShared;
use crate::meta;
use crate::registry::GroupResource;
use crate::store::StoreEvent;

const SOURCE: EventSource<'static> = EventSource {
    component: "replicaset-controller",
    host: None,
};

/// Upstream's `burstReplicas`: at most this many pods created or deleted per sync.
const BURST: usize = 500;

/// The annotation whose lower value makes a pod go first on scale down.
pub const ANN_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// What the controller ranks an active pod by.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ActivePod {
    pub name: String,
    pub assigned: bool,
    /// Pending 0, Unknown 1, Running 2 (upstream's phase order).
    pub phase_rank: u8,
    pub ready: bool,
    pub deletion_cost: i64,
    /// When the pod became Ready (its condition's lastTransitionTime).
    pub ready_since: Option<Timestamp>,
    pub restarts: i64,
    pub created: String,
}

/// The order upstream's `ActivePodsWithRanks` deletes in: the pod that is cheapest to
/// lose first.
fn delete_first(a: &ActivePod, b: &ActivePod) -> Ordering {
    a.assigned
        .cmp(&b.assigned)
        .then(a.phase_rank.cmp(&b.phase_rank))
        .then(a.ready.cmp(&b.ready))
        .then(a.deletion_cost.cmp(&b.deletion_cost))
        // Ready for less time goes first: the later instant first.
        .then_with(|| match (a.ready, a.ready_since, b.ready_since) {
            (true, Some(x), Some(y)) => y.cmp(&x),
            _ => Ordering::Equal,
        })
        .then(b.restarts.cmp(&a.restarts))
        .then_with(|| b.created.cmp(&a.created))
}

/// How many pods to create, and which to delete, to bring `active` to `replicas`.
pub fn plan(replicas: i64, active: &[ActivePod]) -> (usize, Vec<String>) {
    let have = active.len() as i64;
    if have < replicas {
        return (((replicas - have) as usize).min(BURST), Vec::new());
    }
    let mut ranked: Vec<&ActivePod> = active.iter().collect();
    ranked.sort_by(|a, b| delete_first(a, b));
    let surplus = ((have - replicas) as usize).min(BURST);
    (
        0,
        ranked
            .into_iter()
            .take(surplus)
            .map(|p| p.name.clone())
            .collect(),
    )
}

/// Whether `pod` has been Ready for `min_ready_seconds` at `now` (upstream's
/// `IsPodAvailable`).
pub(crate) fn available(pod: &Value, min_ready_seconds: i64, now: Timestamp) -> bool {
    let Some(ready) = meta::condition(pod, "Ready") else {
        return false;
    };
    if ready.get("status").and_then(Value::as_str) != Some("True") {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    ready
        .get("lastTransitionTime")
        .and_then(Value::as_str)
        .and_then(meta::parse_time)
        .is_some_and(|t| now.duration_since(t).as_secs() >= min_ready_seconds)
}

fn active_pod(pod: &Value) -> ActivePod {
    let phase_rank = match pod.pointer("/status/phase").and_then(Value::as_str) {
        Some("Running") => 2,
        Some("Pending") | None => 0,
        _ => 1,
    };
    let ready_condition = meta::condition(pod, "Ready");
    let ready = meta::condition_is(pod, "Ready", "True");
    let restarts = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
        .max()
        .unwrap_or(0);
    ActivePod {
        name: meta::name_of(pod).to_string(),
        assigned: pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty()),
        phase_rank,
        ready,
        deletion_cost: meta::metadata(pod)
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(ANN_DELETION_COST))
            .and_then(Value::as_str)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0),
        ready_since: ready_condition
            .and_then(|c| c.get("lastTransitionTime"))
            .and_then(Value::as_str)
            .and_then(meta::parse_time),
        restarts,
        created: meta::meta_str(pod, "creationTimestamp").to_string(),
    }
}

/// Whether a pod counts toward a controller's replicas: not finished, not being deleted.
pub(crate) fn is_active(pod: &Value) -> bool {
    !meta::is_terminating(pod)
        && !matches!(
            pod.pointer("/status/phase").and_then(Value::as_str),
            Some("Succeeded" | "Failed")
        )
}

fn int(v: &Value, ptr: &str) -> i64 {
    v.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

/// The status the ReplicaSet's pods give it (zero counts omitted, as upstream's
/// `omitempty`, except `replicas`).
fn status_of(rs: &Value, pods: &[Arc<Value>], now: Timestamp) -> Value {
    let min_ready = int(rs, "/spec/minReadySeconds");
    let template_labels = rs
        .pointer("/spec/template/metadata/labels")
        .and_then(Value::as_object);
    let fully_labeled = pods
        .iter()
        .filter(|p| {
            let labels = meta::labels_of(p);
            template_labels
                .into_iter()
                .flatten()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        })
        .count();
    let ready = pods
        .iter()
        .filter(|p| meta::condition_is(p, "Ready", "True"))
        .count();
    let avail = pods.iter().filter(|p| available(p, min_ready, now)).count();
    let mut status = Map::new();
    status.insert("replicas".into(), json!(pods.len()));
    for (field, n) in [
        ("fullyLabeledReplicas", fully_labeled),
        ("readyReplicas", ready),
        ("availableReplicas", avail),
    ] {
        if n > 0 {
            status.insert(field.into(), json!(n));
        }
    }
    status.insert(
        "observedGeneration".into(),
        json!(int(rs, "/metadata/generation")),
    );
    // A creation failure's condition stays until a sync creates what it must.
    if let Some(c) = rs.pointer("/status/conditions") {
        status.insert("conditions".into(), c.clone());
    }
    Value::Object(status)
}

fn failure_condition(message: &str) -> Value {
    json!([{
        "type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
        "message": message, "lastTransitionTime": meta::now_rfc3339(),
    }])
}

/// One sync of the ReplicaSet `ns/name`; returns when to look again (a pod waiting out
/// `minReadySeconds`).
async fn sync(sh: &Arc<SimShared>, ns: &str, name: &str) -> Option<Duration> {
    let gr = GroupResource::new("apps", "replicasets");
    let rs = sh.store.get(&gr, ns, name)?;
    let involved = typed(&rs, "apps/v1", "ReplicaSet");
    let opts = controller_manager("replicaset-controller");
    let uid = meta::meta_str(&rs, "uid");
    let active: Vec<Arc<Value>> = owned_pods(sh, ns, uid)
        .into_iter()
        .filter(|p| is_active(p))
        .collect();
    let mut failure = None;
    if !meta::is_terminating(&rs) {
        let ranked: Vec<ActivePod> = active.iter().map(|p| active_pod(p)).collect();
        let (create, delete) = plan(int(&rs, "/spec/replicas"), &ranked);
        let pod = || pod_from_template(&rs, "apps/v1", "ReplicaSet");
        failure = create_pods(sh, SOURCE, &involved, create, pod, &opts)
            .await
            .1;
        delete_pods(sh, SOURCE, &involved, &delete, &opts).await;
    }
    let now = Timestamp::now();
    let pods: Vec<Arc<Value>> = owned_pods(sh, ns, uid)
        .into_iter()
        .filter(|p| is_active(p))
        .collect();
    let mut status = status_of(&rs, &pods, now);
    match failure {
        // The same failure again keeps its condition (and its transition time).
        Some(msg)
            if meta::condition(&rs, "ReplicaFailure")
                .and_then(|c| c.get("message"))
                .and_then(Value::as_str)
                == Some(msg.as_str()) => {}
        Some(msg) => status["conditions"] = failure_condition(&msg),
        None if pods.len() as i64 == int(&rs, "/spec/replicas") => {
            if let Some(s) = status.as_object_mut() {
                s.remove("conditions");
            }
        }
        None => {}
    }
    write_status(sh, ("apps", "replicasets"), &rs, &status, &opts).await;
    // Pods ready but not yet available: look again once a second until they are.
    let min_ready = int(&rs, "/spec/minReadySeconds");
    let waiting = pods
        .iter()
        .any(|p| meta::condition_is(p, "Ready", "True") && !available(p, min_ready, now));
    waiting.then_some(Duration::from_secs(1))
}

/// Runs the ReplicaSet controller until the store's change stream closes.
pub(crate) async fn run(sh: Arc<SimShared>) {
    let pods = GroupResource::new("", "pods");
    let owner_of = move |_: &SimShared, ev: &StoreEvent| {
        (ev.gr == pods)
            .then(|| controller_of(&ev.object).filter(|r| r.kind == "ReplicaSet"))
            .flatten()
            .map(|owner| (ev.namespace.clone(), owner.name.to_string()))
    };
    let sync = |sh: Arc<SimShared>, (ns, name): Key| async move { sync(&sh, &ns, &name).await };
    run_controller(
        sh,
        GroupResource::new("apps", "replicasets"),
        owner_of,
        sync,
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> ActivePod {
        ActivePod {
            name: name.into(),
            assigned: true,
            phase_rank: 2,
            ready: true,
            created: "2026-01-01T00:00:00Z".into(),
            ..Default::default()
        }
    }

    #[test]
    fn creates_up_to_replicas_within_the_burst() {
        assert_eq!(plan(3, &[pod("a")]), (2, vec![]));
        assert_eq!(plan(1000, &[]), (500, vec![]));
        assert_eq!(plan(1, &[pod("a")]), (0, vec![]));
    }

    #[test]
    fn deletes_the_cheapest_pods_first() {
        let unscheduled = ActivePod {
            assigned: false,
            phase_rank: 0,
            ready: false,
            ..pod("unscheduled")
        };
        let not_ready = ActivePod {
            ready: false,
            ..pod("not-ready")
        };
        let cheap = ActivePod {
            deletion_cost: -10,
            ..pod("cheap")
        };
        let newer = ActivePod {
            created: "2026-01-02T00:00:00Z".into(),
            ..pod("newer")
        };
        let restarted = ActivePod {
            restarts: 3,
            ..pod("restarted")
        };
        let pods = [
            pod("old"),
            newer.clone(),
            restarted.clone(),
            cheap.clone(),
            not_ready.clone(),
            unscheduled.clone(),
        ];
        let (_, order) = plan(0, &pods);
        assert_eq!(
            order,
            [
                "unscheduled",
                "not-ready",
                "cheap",
                "restarted",
                "newer",
                "old"
            ]
        );
        // Only the surplus goes.
        assert_eq!(plan(5, &pods).1, ["unscheduled"]);
    }

    #[test]
    fn the_most_recently_ready_goes_first() {
        let t = |s: &str| s.parse::<Timestamp>().ok();
        let early = ActivePod {
            ready_since: t("2026-01-01T00:00:00Z"),
            ..pod("early")
        };
        let late = ActivePod {
            ready_since: t("2026-01-01T00:05:00Z"),
            ..pod("late")
        };
        assert_eq!(plan(1, &[early, late]).1, ["late"]);
    }
}
