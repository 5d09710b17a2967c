//! One kubelet loop for every simulated node. For each pod bound to a simulated node
//! it keeps a small container runtime state (container ids, image ids, restart counts
//! and when each container starts, becomes ready or exits) and renders the pod status
//! from it, writing through the status subresource only when the rendered status
//! differs (one write per batch of transitions). It implements the rule in-place
//! updates rely on: a container whose spec hash changes is killed and restarted alone
//! (restartCount+1, new containerID, new imageID for a new image), the pod keeping its
//! uid, IP and node. Deleted pods are removed after min(grace period, a short cap).
//! It reads and writes through `kubelet_api::KubeletApi`: kruise-sim's store in-process,
//! a kube client for `kruise-sim nodes` against another API server.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::cri::{CriContainer, CriRequest};
use super::images::{ImagePulls, ImageStore, image_id};
use super::kubelet_api::{
    KubeletApi, PodChange, PodChanges, PodKey, StoreApi, StoreChanges, Waiting,
};
use super::{ANN_EXIT_AFTER, ANN_EXIT_CODE, ANN_READY_DELAY, ANN_START_DELAY, KubeletTimings};
use super::{host_ports, nodes, stable_hash};
use crate::SimShared;
use crate::meta;
use kruise_cri::v1::ContainerState;
use tokio::sync::mpsc;

mod conditions;
mod runtime;

use conditions::{readiness_gates_message, set_cond};
use runtime::{
    Ctr, PodRt, ann_duration, container_id, containers, post_start_time, sleep_of_every_container,
    spec_hash, str_of, termination_time,
};

type Key = PodKey;

/// How long a container takes to exit after SIGTERM unless the pod says otherwise
/// (`sim.kruise.io/stop-delay`); the whole termination is capped by the grace period.
pub const DELETE_CAP: Duration = Duration::from_millis(100);
/// How long a failed pull is reported `ErrImagePull` before `ImagePullBackOff`.
const PULL_BACKOFF_AFTER: Duration = Duration::from_secs(1);

struct Kubelet<A> {
    api: A,
    timings: KubeletTimings,
    /// Per-image pull latencies over `timings.pull_delay`.
    pulls: ImagePulls,
    /// Simulated node name -> index.
    nodes: HashMap<String, usize>,
    pods: HashMap<Key, PodRt>,
    /// Pod IPs in use per node.
    ips: HashMap<String, HashSet<String>>,
    overflow_ip: u32,
    images: ImageStore,
}

impl<A: KubeletApi> Kubelet<A> {
    fn start_delay(&self, pod: &Value) -> Duration {
        ann_duration(pod, ANN_START_DELAY).unwrap_or(self.timings.start_delay)
    }

    fn ready_delay(&self, pod: &Value) -> Duration {
        ann_duration(pod, ANN_READY_DELAY).unwrap_or(self.timings.ready_delay)
    }

    /// The lowest free address in the node's 10.244.<i>.0/24, then a shared
    /// overflow range, so live pods never share an IP.
    fn alloc_ip(&mut self, node: &str) -> String {
        let idx = self.nodes.get(node).copied().unwrap_or(0);
        let used = self.ips.entry(node.to_string()).or_default();
        for host in 2..=254u32 {
            let ip = format!("10.244.{idx}.{host}");
            if !used.contains(&ip) {
                used.insert(ip.clone());
                return ip;
            }
        }
        self.overflow_ip += 1;
        let n = self.overflow_ip;
        let ip = format!("10.{}.{}.{}", 128 + (n >> 16) % 64, (n >> 8) & 255, n & 255);
        used.insert(ip.clone());
        ip
    }

    /// The pull a container start costs on `node`; the image is on the node after. An
    /// `Always` pull of an image the node already has costs `pull_delay` only: the runtime
    /// asks the registry for the manifest and finds every layer present (the image's own
    /// latency is its layers' download).
    fn pull_delay(&mut self, node: &str, container: &Value) -> Duration {
        let image = str_of(container, "image");
        let pull = self.images.needs_pull(node, container);
        let present = self.images.find(node, image).is_some();
        if self.pull_failure(node, container).is_none() {
            self.images.add(node, image);
        }
        match (pull, present) {
            (false, _) => Duration::ZERO,
            (true, true) => self.timings.pull_delay,
            (true, false) => self
                .pulls
                .of(image)
                .delay
                .unwrap_or(self.timings.pull_delay),
        }
    }

    /// The runtime's message when starting `container` on `node` needs a pull that fails
    /// (`ImagePulls::of`): the image is not on the node, or the policy is `Always`.
    fn pull_failure(&self, node: &str, container: &Value) -> Option<String> {
        let image = str_of(container, "image");
        let failure = self.pulls.of(image).failure?;
        self.images.needs_pull(node, container).then(|| {
            format!(
                "failed to pull and unpack image \"{}\": {failure}",
                super::images::NodeImage::of(image).repo_tag
            )
        })
    }

    fn forget(&mut self, key: &Key) {
        if let Some(rt) = self.pods.remove(key)
            && let Some(set) = self.ips.get_mut(&rt.node)
        {
            set.remove(&rt.ip);
        }
    }

    fn new_runtime(&mut self, pod: &Value, node: &str, now: Instant) -> PodRt {
        let start = self.start_delay(pod);
        let ready = self.ready_delay(pod);
        let has_init = !containers(pod, "initContainers").is_empty();
        // Images are pulled in parallel: one delay when any is missing.
        let pull = containers(pod, "initContainers")
            .iter()
            .chain(containers(pod, "containers").iter())
            .map(|c| self.pull_delay(node, c))
            .max()
            .unwrap_or(Duration::ZERO);
        // Init containers run to completion (one start delay) before the app
        // containers start.
        let init_done_at = now + pull + if has_init { start } else { Duration::ZERO };
        let start_at = init_done_at + start;
        let ctrs: Vec<Ctr> = containers(pod, "containers")
            .iter()
            .map(|c| {
                let image = str_of(c, "image").to_string();
                let hook = post_start_time(pod, c);
                let start_at = start_at + hook;
                let mut ctr = Ctr {
                    name: str_of(c, "name").to_string(),
                    hash: spec_hash(c),
                    image_id: image_id(&image),
                    image,
                    container_id: container_id(),
                    restart_count: 0,
                    created_at: now,
                    start_at,
                    hook,
                    ready_at: start_at + ready,
                    last_state: json!({}),
                    terminated: None,
                    config_error: None,
                    pull_error: None,
                };
                if let Some(message) = self.pull_failure(node, c) {
                    ctr.fail_pull(now + pull, message);
                }
                ctr
            })
            .collect();
        let policy = pod
            .pointer("/spec/restartPolicy")
            .and_then(Value::as_str)
            .unwrap_or("Always");
        let exit = match (policy, ann_duration(pod, ANN_EXIT_AFTER)) {
            ("Never" | "OnFailure", Some(after)) => {
                let code = meta::metadata(pod)
                    .and_then(|m| m.get("annotations"))
                    .and_then(|a| a.get(ANN_EXIT_CODE))
                    .and_then(Value::as_str)
                    .and_then(|s| s.trim().parse::<i64>().ok())
                    .unwrap_or(0);
                Some((start_at + after, code))
            }
            // A job's containers that only sleep (`sh -c "sleep 5"`, as OpenKruise's e2e
            // specs write them) exit 0 once the longest sleep is over.
            ("Never" | "OnFailure", None) => {
                sleep_of_every_container(pod).map(|after| (start_at + after, 0))
            }
            _ => None,
        };
        PodRt {
            uid: meta::meta_str(pod, "uid").to_string(),
            namespace: meta::meta_str(pod, "namespace").to_string(),
            name: meta::name_of(pod).to_string(),
            restart_policy: policy.to_string(),
            node: node.to_string(),
            ip: self.alloc_ip(node),
            t0: now,
            t0_wall: Timestamp::now(),
            init_done_at,
            has_init,
            containers: ctrs,
            dead: Vec::new(),
            exit,
            delete_at: None,
            host_ports: host_ports(pod),
        }
    }

    /// Restarts the containers whose spec changed; the others keep running.
    fn apply_spec_changes(&mut self, rt: &mut PodRt, pod: &Value, now: Instant) {
        if rt.exited_at(now).is_some() {
            return;
        }
        let start = self.start_delay(pod);
        let ready = self.ready_delay(pod);
        for c in &containers(pod, "containers") {
            let name = str_of(c, "name");
            let hash = spec_hash(c);
            let Some(i) = rt.containers.iter().position(|x| x.name == name) else {
                continue;
            };
            if rt.containers[i].hash == hash {
                continue;
            }
            let image = str_of(c, "image").to_string();
            let failure = self.pull_failure(&rt.node, c);
            let pull = self.pull_delay(&rt.node, c);
            // Killed for "Container definition changed"; the kubelet reports the
            // stopped container's exit as lastState.
            rt.restart(i, 0, now, pull + start, post_start_time(pod, c), ready);
            if let Some(ctr) = rt.containers.get_mut(i) {
                ctr.hash = hash;
                ctr.image_id = image_id(&image);
                ctr.image = image;
                ctr.pull_error = None;
                if let Some(message) = failure {
                    // The replacement was never created: the count stays the killed one's.
                    ctr.restart_count -= 1;
                    ctr.fail_pull(now + pull, message);
                }
            }
        }
    }

    /// Holds back each container not yet started whose env reads a ConfigMap key that
    /// does not exist (and is not `optional`), as the kubelet fails such a container with
    /// CreateContainerConfigError; it starts a start delay after the key appears. The
    /// kubelet does not watch ConfigMaps, it retries: the instant of the next look.
    fn hold_for_config(&self, rt: &mut PodRt, pod: &Value, now: Instant) -> Option<Instant> {
        const RETRY: Duration = Duration::from_millis(250);
        let start = self.start_delay(pod);
        let ready = self.ready_delay(pod);
        let specs = containers(pod, "containers");
        let mut retry = None;
        for ctr in &mut rt.containers {
            if (now >= ctr.start_at && ctr.config_error.is_none()) || ctr.pull_error.is_some() {
                continue;
            }
            let spec = specs.iter().find(|c| str_of(c, "name") == ctr.name);
            let missing = spec.and_then(|c| self.missing_config_key(&rt.namespace, c));
            match (missing, ctr.config_error.is_some()) {
                (Some(message), _) => {
                    ctr.config_error = Some(message);
                    retry = Some(now + RETRY);
                }
                (None, true) => {
                    ctr.config_error = None;
                    ctr.start_at = now + start + ctr.hook;
                    ctr.ready_at = ctr.start_at + ready;
                }
                (None, false) => {}
            }
            if ctr.config_error.is_some() {
                // Never started while held: the start is one start delay after the key.
                ctr.start_at = now + RETRY + start + ctr.hook;
                ctr.ready_at = ctr.start_at + ready;
            }
        }
        retry
    }

    /// The kubelet's message for the first env key of `container` that is missing.
    fn missing_config_key(&self, namespace: &str, container: &Value) -> Option<String> {
        let refs = container.get("env")?.as_array()?.iter().filter_map(|e| {
            let r = e.pointer("/valueFrom/configMapKeyRef")?;
            let optional = r.get("optional").and_then(Value::as_bool) == Some(true);
            (!optional).then(|| (str_of(r, "name"), str_of(r, "key")))
        });
        for (name, key) in refs {
            match self.api.config_map_data(namespace, name)? {
                None => return Some(format!("configmap \"{name}\" not found")),
                Some(data) if data.get(key).is_none() => {
                    return Some(format!(
                        "couldn't find key {key} in ConfigMap {namespace}/{name}"
                    ));
                }
                Some(_) => {}
            }
        }
        None
    }

    /// Renders the status this runtime state implies at `now` on top of `cur` (so
    /// conditions and fields other writers own are kept); also returns the next
    /// instant at which the rendering changes.
    fn render(&self, rt: &PodRt, cur: &Value, now: Instant) -> (Value, Option<Instant>) {
        let mut next_at: Option<Instant> = None;
        let mut later = |t: Instant| {
            if t > now && next_at.is_none_or(|n| t < n) {
                next_at = Some(t);
            }
        };
        let exited = match rt.exit {
            Some((at, code)) if now >= at => Some((at, code)),
            Some((at, _)) => {
                later(at);
                None
            }
            None => None,
        };
        let init_done = !rt.has_init || now >= rt.init_done_at;
        later(rt.init_done_at);
        let mut statuses = Vec::new();
        let (mut any_running, mut all_ready) = (false, !rt.containers.is_empty());
        for c in &rt.containers {
            later(c.start_at);
            later(c.ready_at);
            if let Some((at, _)) = &c.pull_error {
                later(*at);
            }
            let exit = exited.or(c.terminated);
            let started = exit.is_none() && now >= c.start_at;
            let ready = started && now >= c.ready_at;
            // The kubelet's phase counts a container waiting after it ran (a replacement
            // that cannot start) as stopped, which under `Always` keeps the pod Running.
            let restarting =
                rt.restart_policy == "Always" && c.last_state.get("terminated").is_some();
            any_running |= started || (exit.is_none() && restarting);
            all_ready &= ready;
            let state = match exit {
                Some((at, code)) => json!({"terminated": {
                    "exitCode": code,
                    "reason": if code == 0 { "Completed" } else { "Error" },
                    "startedAt": rt.wall(c.started_at()), "finishedAt": rt.wall(at),
                    "containerID": c.container_id,
                }}),
                None if started => json!({"running": {"startedAt": rt.wall(c.started_at())}}),
                None if c.pull_error.as_ref().is_some_and(|(at, _)| now >= *at) => {
                    let (at, message) =
                        c.pull_error.clone().unwrap_or_else(|| (now, String::new()));
                    // The kubelet reports the failure, then backs off between attempts.
                    let backoff = at + PULL_BACKOFF_AFTER;
                    later(backoff);
                    match now < backoff {
                        true => json!({"waiting": {"reason": "ErrImagePull", "message": message}}),
                        false => json!({"waiting": {"reason": "ImagePullBackOff", "message":
                            format!("Back-off pulling image \"{}\": ErrImagePull: {message}", c.image)}}),
                    }
                }
                None if c.config_error.is_some() => json!({"waiting": {
                    "reason": "CreateContainerConfigError", "message": c.config_error,
                }}),
                None => {
                    json!({"waiting": {"reason": if init_done { "ContainerCreating" } else { "PodInitializing" }}})
                }
            };
            let mut s = json!({
                "name": c.name, "image": c.image, "imageID": if started || exit.is_some() { c.image_id.as_str() } else { "" },
                "started": started, "ready": ready, "restartCount": c.restart_count,
                "state": state, "lastState": c.last_state,
            });
            if let Some(m) = s.as_object_mut() {
                if started || exit.is_some() || c.restart_count > 0 {
                    m.insert("containerID".into(), json!(c.container_id));
                }
                // Resources are applied without a restart (in-place resize, beta and
                // on by default since 1.33): a running container's status reports what
                // the spec asks, `{}` when it asks nothing (the kubelet's
                // `convertContainerStatusResources`; in-place updates wait on it).
                if started {
                    let res = spec_resources(cur, &c.name).unwrap_or_else(|| json!({}));
                    if let Some(req) = res.get("requests") {
                        m.insert("allocatedResources".into(), req.clone());
                    }
                    m.insert("resources".into(), res);
                }
            }
            statuses.push(s);
        }
        let init_statuses: Vec<Value> = containers(&self.pod_spec_holder(cur), "initContainers")
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let image = str_of(c, "image");
                let id = format!("containerd://{:064x}", u128::from(stable_hash(&rt.uid, i as u64)));
                let state = if init_done {
                    json!({"terminated": {"exitCode": 0, "reason": "Completed",
                        "startedAt": rt.wall(rt.t0), "finishedAt": rt.wall(rt.init_done_at), "containerID": id}})
                } else {
                    json!({"waiting": {"reason": "PodInitializing"}})
                };
                json!({"name": str_of(c, "name"), "image": image, "imageID": image_id(image),
                    "containerID": id, "started": false, "ready": init_done, "restartCount": 0,
                    "state": state, "lastState": {}})
            })
            .collect();
        // Every container stopped for good (through the CRI) ends the pod as if its
        // containers had exited on their own.
        let all_terminated = (!rt.containers.is_empty()
            && rt.containers.iter().all(|c| c.terminated.is_some()))
        .then(|| {
            let code = rt
                .containers
                .iter()
                .filter_map(|c| c.terminated.map(|(_, code)| code))
                .find(|code| *code != 0)
                .unwrap_or(0);
            (now, code)
        });
        let pod_exit = exited.or(all_terminated);
        let phase = match pod_exit {
            Some((_, 0)) => "Succeeded",
            Some(_) => "Failed",
            None if init_done && any_running => "Running",
            None => "Pending",
        };
        let mut status = cur.get("status").cloned().unwrap_or_else(|| json!({}));
        let Some(m) = status.as_object_mut() else {
            return (cur.get("status").cloned().unwrap_or(Value::Null), next_at);
        };
        let node_idx = self.nodes.get(&rt.node).copied().unwrap_or(0);
        let host_ip = nodes::node_ip(node_idx);
        m.insert("phase".into(), json!(phase));
        m.insert("hostIP".into(), json!(host_ip));
        m.insert("hostIPs".into(), json!([{"ip": host_ip}]));
        m.insert("podIP".into(), json!(rt.ip));
        m.insert("podIPs".into(), json!([{"ip": rt.ip}]));
        m.insert("startTime".into(), json!(rt.wall(rt.t0)));
        m.insert("containerStatuses".into(), Value::Array(statuses));
        if !init_statuses.is_empty() {
            m.insert("initContainerStatuses".into(), Value::Array(init_statuses));
        }
        let mut conds: Vec<Value> = m
            .get("conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let completed = pod_exit.is_some();
        let containers_ready = all_ready && !completed;
        let gates_msg = readiness_gates_message(cur, &conds);
        let ready = containers_ready && gates_msg.is_none();
        let not_ready_reason = if completed {
            "PodCompleted"
        } else {
            "ContainersNotReady"
        };
        let waiting: Vec<&str> = rt
            .containers
            .iter()
            .filter(|c| !(now >= c.ready_at && now >= c.start_at))
            .map(|c| c.name.as_str())
            .collect();
        let cnr_msg = format!("containers with unready status: [{}]", waiting.join(" "));
        let init_names: Vec<String> = containers(cur, "initContainers")
            .iter()
            .map(|c| str_of(c, "name").to_string())
            .collect();
        let init_msg = format!(
            "containers with incomplete status: [{}]",
            init_names.join(" ")
        );
        set_cond(&mut conds, "PodScheduled", true, None, None, false);
        set_cond(
            &mut conds,
            "Initialized",
            init_done || completed,
            (!init_done).then_some("ContainersNotInitialized"),
            (!init_done).then_some(init_msg.as_str()),
            true,
        );
        set_cond(
            &mut conds,
            "ContainersReady",
            containers_ready,
            (!containers_ready).then_some(not_ready_reason),
            (!containers_ready && !completed).then_some(cnr_msg.as_str()),
            true,
        );
        let (ready_reason, ready_msg) = if ready {
            (None, None)
        } else if !containers_ready {
            (
                Some(not_ready_reason),
                (!completed).then_some(cnr_msg.clone()),
            )
        } else {
            (Some("ReadinessGatesNotReady"), gates_msg)
        };
        set_cond(
            &mut conds,
            "Ready",
            ready,
            ready_reason,
            ready_msg.as_deref(),
            true,
        );
        m.insert("conditions".into(), Value::Array(conds));
        (status, next_at)
    }

    /// `render` reads the spec from the object it merges into.
    fn pod_spec_holder(&self, cur: &Value) -> Value {
        json!({"spec": cur.get("spec").cloned().unwrap_or(Value::Null)})
    }

    async fn reconcile(&mut self, key: &Key) -> Option<Instant> {
        let Some(pod) = self.api.pod(key) else {
            self.forget(key);
            return None;
        };
        let node = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if !self.nodes.contains_key(&node) {
            self.forget(key);
            return None;
        }
        let uid = meta::meta_str(&pod, "uid").to_string();
        if self.pods.get(key).is_some_and(|rt| rt.uid != uid) {
            self.forget(key);
        }
        let now = Instant::now();
        if !self.pods.contains_key(key) {
            let terminal = matches!(
                pod.pointer("/status/phase").and_then(Value::as_str),
                Some("Succeeded" | "Failed")
            );
            if terminal {
                return None;
            }
            let wanted = host_ports(&pod);
            let taken = self
                .pods
                .values()
                .filter(|rt| rt.node == node && rt.delete_at.is_none() && rt.exit.is_none())
                .filter(|rt| rt.host_ports.iter().any(|p| wanted.contains(p)))
                // Not one already deleted whose removal this kubelet has yet to see.
                .any(|rt| {
                    self.api
                        .pod(&(rt.namespace.clone(), rt.name.clone()))
                        .is_some_and(|p| meta::meta_str(&p, "uid") == rt.uid)
                });
            if taken {
                // The kubelet's admission refuses a pod whose host ports another pod on
                // the node holds (the scheduler would not have put it there; a pod
                // created with `nodeName` skips the scheduler).
                self.reject(key, &node, &uid, "NodePorts").await;
                return None;
            }
            let rt = self.new_runtime(&pod, &node, now);
            self.pods.insert(key.clone(), rt);
        }
        // A pod someone else marked finished (an eviction writing `Failed`) stays finished:
        // the kubelet stops its containers and never sets a running phase again.
        let finished_with = match pod.pointer("/status/phase").and_then(Value::as_str) {
            Some("Succeeded") => Some(0),
            Some("Failed") => Some(137),
            _ => None,
        };
        if let (Some(code), Some(rt)) = (finished_with, self.pods.get_mut(key))
            && rt.exited_at(now).is_none()
            && !rt.containers.iter().all(|c| c.terminated.is_some())
        {
            rt.exit = Some((now, code));
        }
        if meta::is_terminating(&pod) {
            let grace = meta::metadata(&pod)
                .and_then(|m| m.get("deletionGracePeriodSeconds"))
                .and_then(Value::as_i64)
                .unwrap_or(0)
                .max(0) as u64;
            let stop = termination_time(&pod).min(Duration::from_secs(grace));
            let rt = self.pods.get_mut(key)?;
            let first = rt.delete_at.is_none();
            let at = *rt.delete_at.get_or_insert(now + stop);
            if first {
                let names: Vec<String> = rt.containers.iter().map(|c| c.name.clone()).collect();
                let mut involved = (*pod).clone();
                if let Some(m) = involved.as_object_mut() {
                    m.insert("apiVersion".into(), json!("v1"));
                    m.insert("kind".into(), json!("Pod"));
                }
                for name in names {
                    let message = format!("Stopping container {name}");
                    self.api
                        .record_event(&node, &involved, "Normal", "Killing", &message)
                        .await;
                }
            }
            if now < at {
                return Some(at);
            }
            // The final delete (grace 0, uid precondition); 409: a new pod took the name.
            if let Err(e) = self.api.delete_pod(key, &uid, &node).await
                && e.code != 404
                && e.code != 409
            {
                tracing::debug!(error = %e, pod = %key.1, "kubelet delete failed");
            }
            return None;
        }
        let mut rt = self.pods.remove(key)?;
        self.apply_spec_changes(&mut rt, &pod, now);
        let retry = self.hold_for_config(&mut rt, &pod, now);
        let (status, next) = self.render(&rt, &pod, now);
        let next = match (next, retry) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if pod.get("status") != Some(&status) {
            let res = self
                .api
                .write_status(key, &node, |cur| {
                    if meta::meta_str(cur, "uid") != rt.uid {
                        return Err(crate::ApiError::conflict("", "pods", &key.1, "uid changed"));
                    }
                    // Re-render against the latest object so a condition another
                    // writer just added (readiness gates, InPlaceUpdateReady) is kept.
                    Ok(
                        if meta::meta_str(cur, "resourceVersion")
                            == meta::meta_str(&pod, "resourceVersion")
                        {
                            status.clone()
                        } else {
                            self.render(&rt, cur, now).0
                        },
                    )
                })
                .await;
            if let Err(e) = res
                && e.code != 404
            {
                tracing::debug!(error = %e, pod = %key.1, "kubelet status update failed");
            }
        }
        self.pods.insert(key.clone(), rt);
        next
    }
}

impl<A: KubeletApi> Kubelet<A> {
    /// Ends pod `key` as the kubelet's admission does when a predicate fails: phase
    /// Failed, with the predicate as reason; no container is created.
    async fn reject(&self, key: &Key, node: &str, uid: &str, predicate: &str) {
        let res = self
            .api
            .write_status(key, node, |cur| {
                if meta::meta_str(cur, "uid") != uid {
                    return Err(crate::ApiError::conflict("", "pods", &key.1, "uid changed"));
                }
                let mut status = cur.get("status").cloned().unwrap_or_else(|| json!({}));
                if let Some(m) = status.as_object_mut() {
                    m.insert("phase".into(), json!("Failed"));
                    m.insert("reason".into(), json!(predicate));
                    m.insert(
                        "message".into(),
                        json!(format!("Pod was rejected: Predicate {predicate} failed")),
                    );
                }
                Ok(status)
            })
            .await;
        if let Err(e) = res
            && e.code != 404
        {
            tracing::debug!(error = %e, pod = %key.1, "kubelet status update failed");
        }
    }

    /// The containers of `node`'s pods (live and the last dead one per name), as the
    /// CRI reports them.
    fn cri_containers(&self, node: &str, now: Instant) -> Vec<CriContainer> {
        let ns = |rt: &PodRt, at: Instant| rt.timestamp(at).as_nanosecond() as i64;
        let mut out = Vec::new();
        for rt in self.pods.values().filter(|rt| rt.node == node) {
            let sandbox_id: String = (10..14u64)
                .map(|i| format!("{:016x}", stable_hash(&rt.uid, i)))
                .collect();
            let labels = |name: &str| {
                HashMap::from([
                    (kruise_cri::LABEL_POD_NAME.to_string(), rt.name.clone()),
                    (
                        kruise_cri::LABEL_POD_NAMESPACE.to_string(),
                        rt.namespace.clone(),
                    ),
                    (kruise_cri::LABEL_POD_UID.to_string(), rt.uid.clone()),
                    (
                        kruise_cri::LABEL_CONTAINER_NAME.to_string(),
                        name.to_string(),
                    ),
                ])
            };
            for c in &rt.containers {
                let exit = rt.exited_at(now).or(c.terminated);
                let (state, finished_at, exit_code) = match exit {
                    Some((at, code)) => (ContainerState::ContainerExited, ns(rt, at), code),
                    None if now >= c.start_at => (ContainerState::ContainerRunning, 0, 0),
                    None => (ContainerState::ContainerCreated, 0, 0),
                };
                out.push(CriContainer {
                    id: cri_id(&c.container_id),
                    sandbox_id: sandbox_id.clone(),
                    name: c.name.clone(),
                    attempt: u32::try_from(c.restart_count).unwrap_or(0),
                    image: c.image.clone(),
                    image_ref: c.image_id.clone(),
                    state,
                    created_at: ns(rt, c.created_at),
                    started_at: if now >= c.start_at {
                        ns(rt, c.started_at())
                    } else {
                        0
                    },
                    finished_at,
                    exit_code: i32::try_from(exit_code).unwrap_or(i32::MAX),
                    labels: labels(&c.name),
                });
            }
            for d in &rt.dead {
                out.push(CriContainer {
                    id: cri_id(&d.container_id),
                    sandbox_id: sandbox_id.clone(),
                    name: d.name.clone(),
                    attempt: u32::try_from(d.attempt).unwrap_or(0),
                    image: d.image.clone(),
                    image_ref: d.image_id.clone(),
                    state: ContainerState::ContainerExited,
                    created_at: ns(rt, d.created_at),
                    started_at: ns(rt, d.started_at),
                    finished_at: ns(rt, d.finished_at),
                    exit_code: i32::try_from(d.exit_code).unwrap_or(i32::MAX),
                    labels: labels(&d.name),
                });
            }
        }
        out
    }

    /// Answers one CRI request; returns the pod whose status changed, if any.
    fn handle_cri(&mut self, req: CriRequest) -> Option<Key> {
        let now = Instant::now();
        match req {
            CriRequest::Containers { node, reply } => {
                let _ = reply.send(self.cri_containers(&node, now));
                None
            }
            CriRequest::Stop {
                node,
                id,
                timeout,
                reply,
            } => {
                let key = self.pods.iter().find_map(|(key, rt)| {
                    (rt.node == node && rt.containers.iter().any(|c| cri_id(&c.container_id) == id))
                        .then(|| key.clone())
                });
                let Some(key) = key else {
                    let _ = reply.send(false);
                    return None;
                };
                let pod = self.api.pod(&key).unwrap_or_else(|| Arc::new(Value::Null));
                let (start, ready) = (self.start_delay(&pod), self.ready_delay(&pod));
                // A graceful stop (SIGTERM, then a clean exit) ends with 0; a stop
                // without a timeout is a SIGKILL: 137.
                let code = if timeout > 0 { 0 } else { 137 };
                let stopped = self
                    .pods
                    .get_mut(&key)
                    .is_some_and(|rt| rt.stop_container(&id, code, now, start, ready));
                let _ = reply.send(stopped);
                stopped.then_some(key)
            }
            CriRequest::Images { node, reply } => {
                let _ = reply.send(self.images.list(&node));
                None
            }
            CriRequest::AddImage { node, image, reply } => {
                let _ = reply.send(self.images.add(&node, &image));
                None
            }
            CriRequest::RemoveImage { node, image, reply } => {
                self.images.remove(&node, &image);
                let _ = reply.send(());
                None
            }
        }
    }
}

/// A pod status containerID without its `containerd://` prefix, as the CRI names it.
fn cri_id(container_id: &str) -> String {
    container_id
        .split_once("://")
        .map_or(container_id, |(_, id)| id)
        .to_string()
}

/// The spec's requests/limits of one container, when it declares any.
fn spec_resources(pod: &Value, name: &str) -> Option<Value> {
    let c = containers(pod, "containers")
        .into_iter()
        .find(|c| str_of(c, "name") == name)?;
    let r = c.get("resources")?.as_object()?;
    let mut out = Map::new();
    for k in ["requests", "limits"] {
        if let Some(v) = r
            .get(k)
            .filter(|v| v.as_object().is_some_and(|o| !o.is_empty()))
        {
            out.insert(k.into(), v.clone());
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// Runs the kubelet for the in-process nodes `sim-node-0..node_count-1`, on the store.
pub(crate) async fn run(
    sh: Arc<SimShared>,
    node_count: usize,
    timings: KubeletTimings,
    pulls: ImagePulls,
    cri: mpsc::Receiver<CriRequest>,
) {
    let changes = StoreChanges {
        rx: sh.store.subscribe(),
    };
    let names = (0..node_count).map(nodes::node_name).collect();
    run_with(StoreApi { sh }, changes, names, timings, pulls, cri).await;
}

/// Runs the kubelet of `node_names` (node `i` gets `nodes::node_ip(i)` and the pod range
/// 10.244.i.0/24) against `api`, until `changes` ends.
pub(crate) async fn run_with<A: KubeletApi>(
    api: A,
    mut changes: impl PodChanges,
    node_names: Vec<String>,
    timings: KubeletTimings,
    pulls: ImagePulls,
    mut cri: mpsc::Receiver<CriRequest>,
) {
    let mut k = Kubelet {
        api,
        timings,
        pulls,
        nodes: node_names
            .into_iter()
            .enumerate()
            .map(|(i, name)| (name, i))
            .collect(),
        pods: HashMap::new(),
        ips: HashMap::new(),
        overflow_ip: 0,
        images: ImageStore::default(),
    };
    let mut deadlines: HashMap<Key, Instant> = HashMap::new();
    let mut dirty: HashSet<Key> = k.api.pod_keys().into_iter().collect();
    loop {
        if dirty.is_empty() {
            let wake = deadlines.values().min().copied();
            let sleep = async {
                match wake {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                change = changes.next() => match change {
                    Some(PodChange::Pod(key)) => { dirty.insert(key); }
                    Some(PodChange::All) => dirty.extend(k.api.pod_keys()),
                    None => return,
                },
                Some(req) = cri.recv() => dirty.extend(k.handle_cri(req)),
                _ = sleep => {}
            }
        }
        while let Ok(req) = cri.try_recv() {
            dirty.extend(k.handle_cri(req));
        }
        loop {
            match changes.try_next() {
                Waiting::Change(PodChange::Pod(key)) => {
                    dirty.insert(key);
                }
                Waiting::Change(PodChange::All) => dirty.extend(k.api.pod_keys()),
                Waiting::Nothing => break,
                Waiting::Closed => return,
            }
        }
        let now = Instant::now();
        let due: Vec<Key> = deadlines
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(key, _)| key.clone())
            .collect();
        dirty.extend(due);
        for key in std::mem::take(&mut dirty) {
            match k.reconcile(&key).await {
                Some(at) => {
                    deadlines.insert(key, at);
                }
                None => {
                    deadlines.remove(&key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_ids() {
        let a = image_id("nginx:1.25");
        assert!(a.starts_with("docker.io/library/nginx@sha256:"), "{a}");
        assert_eq!(a.len(), "docker.io/library/nginx@sha256:".len() + 64);
        assert_eq!(a, image_id("nginx:1.25"));
        assert_ne!(a, image_id("nginx:1.26"));
        assert!(image_id("quay.io/x/y:1").starts_with("quay.io/x/y@sha256:"));
        assert!(image_id("localhost:5000/y").starts_with("localhost:5000/y@sha256:"));
        assert!(image_id("bitnami/redis").starts_with("docker.io/bitnami/redis@sha256:"));
    }
}
