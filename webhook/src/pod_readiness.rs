//! The `KruisePodReady` condition for pods the `workloads` step gave the gate (OpenKruise's
//! `podreadiness` controller): a pod carrying the gate without the condition gets it `True`,
//! so it can become Ready; writers such as lifecycle hooks then add and remove not-ready
//! keys. It runs wherever the gate is injected, so the two never come apart.
//!
//! One write per pod: the watch delivers events in order, and those queued before our write
//! still show the pod without the condition. The resourceVersion our patch returned is
//! recorded, and events older than it (or arriving while the write is in flight) are passed
//! over ([`Written`]); a later event without the condition (someone removed it) gets it
//! again. Writes to different pods go out concurrently.

use std::collections::{BTreeSet, HashMap};

use futures::StreamExt as _;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_core::api::keys::KRUISE_POD_READY;
use kruise_core::expectations::{ResourceVersionExpectations, Satisfaction};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Client, ResourceExt as _};
use serde_json::json;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Whether the pod has the `KruisePodReady` gate but not the condition (and is not terminating).
pub fn needs_condition(pod: &Pod) -> bool {
    // Scoped here: its `namespace()` would shadow kube's `ResourceExt` below.
    use kruise_core::pods::PodView as _;
    pod.has_readiness_gate(KRUISE_POD_READY)
        && pod.condition(KRUISE_POD_READY).is_none()
        && pod.metadata.deletion_timestamp.is_none()
}

/// The condition writes in flight or not yet seen in the watch, by pod uid.
#[derive(Debug, Default)]
pub struct Written {
    unseen: ResourceVersionExpectations,
    in_flight: BTreeSet<String>,
}

impl Written {
    /// Whether `pod`, as a watch event shows it at `now`, needs the condition written: it
    /// [`needs_condition`], no write to it is in flight and the event is not older than our
    /// last write to it.
    pub fn needs_write(&mut self, pod: &Pod, now: Timestamp) -> bool {
        let meta = &pod.metadata;
        if let (Some(uid), Some(version)) = (&meta.uid, &meta.resource_version) {
            if self.in_flight.contains(uid) {
                return false;
            }
            match self.unseen.satisfied(uid, version, now) {
                Satisfaction::Satisfied => {}
                Satisfaction::Pending { .. } => return false,
                // Never seen in five minutes (a watch that lost it): judge the pod as shown.
                Satisfaction::Expired { .. } => self.unseen.delete(uid),
            }
        }
        needs_condition(pod)
    }

    /// Records a write sent to the pod `uid`.
    pub fn sending(&mut self, uid: &str) {
        self.in_flight.insert(uid.to_string());
    }

    /// Records the end of the write to `uid`: with the pod it returned, events older than it
    /// are passed over; a failed write leaves the next event to judge.
    pub fn sent(&mut self, uid: &str, written: Option<&Pod>) {
        self.in_flight.remove(uid);
        if let Some(version) = written.and_then(|p| p.metadata.resource_version.as_deref()) {
            self.unseen.expect(uid, version);
        }
    }

    /// Forgets a deleted pod.
    pub fn deleted(&mut self, pod: &Pod) {
        if let Some(uid) = &pod.metadata.uid {
            self.unseen.delete(uid);
        }
    }
}

/// The condition writes sent at once: a scale-up's pods become Ready at the rate the API
/// server answers, not one round trip after another.
const IN_FLIGHT: usize = 16;

/// One condition write's outcome: the pod's `namespace/name` and the written pod.
type WriteOutcome = (String, kube::Result<Pod>);

/// Watches pods until `shutdown`, adding the condition where [`Written::needs_write`].
pub async fn run(client: Client, shutdown: CancellationToken) {
    let stream =
        watcher(Api::<Pod>::all(client.clone()), watcher::Config::default()).default_backoff();
    tokio::pin!(stream);
    let mut written = Written::default();
    let mut writes: JoinSet<WriteOutcome> = JoinSet::new();
    // The pod uid of each write in flight, by task.
    let mut uids: HashMap<tokio::task::Id, String> = HashMap::new();
    loop {
        let event = tokio::select! {
            _ = shutdown.cancelled() => return,
            Some(outcome) = writes.join_next_with_id(), if !writes.is_empty() => {
                let task = match &outcome {
                    Ok((task, _)) => *task,
                    Err(e) => e.id(),
                };
                let uid = uids.remove(&task).unwrap_or_default();
                match outcome {
                    Ok((_, (_, Ok(pod)))) => written.sent(&uid, Some(&pod)),
                    Ok((_, (pod, Err(e)))) => {
                        written.sent(&uid, None);
                        tracing::warn!(%pod, error = %e, "setting KruisePodReady");
                    }
                    Err(e) => {
                        written.sent(&uid, None);
                        tracing::warn!(error = %e, "a KruisePodReady write panicked");
                    }
                }
                continue;
            }
            next = stream.next(), if writes.len() < IN_FLIGHT => match next {
                None => return,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "pod watch");
                    continue;
                }
                Some(Ok(event)) => event,
            },
        };
        let pod = match event {
            Event::Apply(pod) | Event::InitApply(pod) => pod,
            Event::Delete(pod) => {
                written.deleted(&pod);
                continue;
            }
            Event::Init | Event::InitDone => continue,
        };
        if !written.needs_write(&pod, Timestamp::now()) {
            continue;
        }
        let uid = pod.uid().unwrap_or_default();
        written.sending(&uid);
        let (namespace, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
        let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
        let task = writes.spawn(async move {
            let now = Time(Timestamp::now());
            let body = json!({"status": {"conditions": [
                {"type": KRUISE_POD_READY, "status": "True", "lastTransitionTime": now}
            ]}});
            let result = api
                .patch_status(&name, &PatchParams::default(), &Patch::Strategic(body))
                .await;
            (format!("{namespace}/{name}"), result)
        });
        uids.insert(task.id(), uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn only_gated_pods_without_the_condition() {
        let gated = json!({"spec": {"containers": [], "readinessGates": [{"conditionType": "KruisePodReady"}]}});
        assert!(needs_condition(&pod(gated.clone())));
        let mut with = gated.clone();
        with["status"] = json!({"conditions": [{"type": "KruisePodReady", "status": "False"}]});
        assert!(!needs_condition(&pod(with)), "a writer's False is kept");
        assert!(!needs_condition(&pod(json!({"spec": {"containers": []}}))));
        let mut deleting = gated;
        deleting["metadata"] = json!({"deletionTimestamp": "2026-11-24T00:00:00Z"});
        assert!(!needs_condition(&pod(deleting)));
    }

    fn at(version: &str, condition: bool) -> Pod {
        let mut p = json!({"metadata": {"uid": "u1", "resourceVersion": version},
            "spec": {"containers": [], "readinessGates": [{"conditionType": "KruisePodReady"}]}});
        if condition {
            p["status"] = json!({"conditions": [{"type": "KruisePodReady", "status": "True"}]});
        }
        pod(p)
    }

    #[test]
    fn events_older_than_our_write_are_passed_over() {
        let now = Timestamp::now();
        let mut written = Written::default();
        assert!(written.needs_write(&at("10", false), now));
        written.sending("u1");
        // While the write is in flight.
        assert!(!written.needs_write(&at("11", false), now));
        written.sent("u1", Some(&at("14", true)));
        // Queued before our write: the pod bound, the kubelet's status.
        assert!(!written.needs_write(&at("11", false), now));
        assert!(!written.needs_write(&at("13", false), now));
        // Our write seen: nothing to do, and nothing kept.
        assert!(!written.needs_write(&at("14", true), now));
        // Someone removed the condition later: it is written again.
        assert!(written.needs_write(&at("20", false), now));
    }

    #[test]
    fn a_write_never_seen_stops_holding_back_after_the_timeout() {
        let now = Timestamp::now();
        let mut written = Written::default();
        written.sent("u1", Some(&at("14", true)));
        assert!(!written.needs_write(&at("11", false), now));
        let later = now + jiff::SignedDuration::from_secs(301);
        assert!(written.needs_write(&at("12", false), later));
    }

    #[test]
    fn a_deleted_pod_is_forgotten() {
        let now = Timestamp::now();
        let mut written = Written::default();
        written.sent("u1", Some(&at("14", true)));
        written.deleted(&at("15", false));
        assert!(
            written.needs_write(&at("11", false), now),
            "a new judgement for the uid"
        );
    }
}
