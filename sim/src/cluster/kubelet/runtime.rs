//! The simulated container runtime of one pod: its containers (ids, image ids, restart
//! counts, when each starts, is ready or exits), the last dead container per name, and
//! the hook and termination timings the pod's spec and annotations set.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::super::{
    ANN_POSTSTART_DURATION, ANN_PRESTOP_DURATION, ANN_STOP_DELAY, parse_duration, sleeps_for,
    stable_hash,
};
use super::DELETE_CAP;
use crate::meta;

/// How long a terminating pod's containers take to stop, before the grace-period
/// cap: the longest preStop hook (a `sleep` action's seconds; an exec or httpGet
/// hook takes `sim.kruise.io/prestop-duration`, default 0), then the exit after
/// SIGTERM (`sim.kruise.io/stop-delay`, default 100ms). Containers stop in parallel.
pub(super) fn termination_time(pod: &Value) -> Duration {
    let hook_default = ann_duration(pod, ANN_PRESTOP_DURATION).unwrap_or(Duration::ZERO);
    let pre_stop = containers(pod, "containers")
        .iter()
        .filter_map(|c| c.pointer("/lifecycle/preStop"))
        .map(|h| hook_time(h).unwrap_or(hook_default))
        .max()
        .unwrap_or(Duration::ZERO);
    pre_stop + ann_duration(pod, ANN_STOP_DELAY).unwrap_or(DELETE_CAP)
}

/// How long a hook runs when the hook itself says: a `sleep` action's seconds, or an exec
/// action that only sleeps (`sleep N`, `sh -c "sleep N"`), as OpenKruise's e2e specs write
/// their hooks. None for any other exec or httpGet hook.
pub(super) fn hook_time(hook: &Value) -> Option<Duration> {
    if let Some(secs) = hook.pointer("/sleep/seconds").and_then(Value::as_u64) {
        return Some(Duration::from_secs(secs));
    }
    let command: Vec<&str> = hook
        .pointer("/exec/command")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    sleeps_for(&command)
}

/// How long a container's postStart hook runs: what the hook says (`hook_time`), else for
/// an exec or httpGet hook `sim.kruise.io/poststart-duration` (default 0). As the kubelet runs the
/// hook before reporting the container running, the container is reported waiting
/// (ContainerCreating) until the hook is done, then running since the runtime started it
/// (`startedAt` the hook's time before it shows running).
pub(super) fn post_start_time(pod: &Value, container: &Value) -> Duration {
    match container.pointer("/lifecycle/postStart") {
        None => Duration::ZERO,
        Some(h) => hook_time(h)
            .or_else(|| ann_duration(pod, ANN_POSTSTART_DURATION))
            .unwrap_or(Duration::ZERO),
    }
}

pub(super) fn container_id() -> String {
    format!(
        "containerd://{:016x}{:016x}{:016x}{:016x}",
        meta::random_u64(),
        meta::random_u64(),
        meta::random_u64(),
        meta::random_u64()
    )
}

/// The container's spec hash (as the kubelet's `HashContainer`, resources excluded
/// since they are resized without a restart).
pub(super) fn spec_hash(c: &Value) -> u64 {
    let mut c = c.clone();
    if let Some(m) = c.as_object_mut() {
        m.remove("resources");
        m.remove("resizePolicy");
    }
    stable_hash(&c.to_string(), 0)
}

pub(crate) struct Ctr {
    pub(crate) name: String,
    pub(super) hash: u64,
    pub(crate) image: String,
    pub(crate) image_id: String,
    /// `containerd://<64 hex>`, as the pod status reports it.
    pub(crate) container_id: String,
    pub(crate) restart_count: i64,
    pub(crate) created_at: Instant,
    /// When the container is reported running: after its postStart hook, which the
    /// kubelet runs before it next reports the pod's status.
    pub(crate) start_at: Instant,
    /// How long the postStart hook runs. The container itself started that long before
    /// `start_at`: its reported `startedAt` is the runtime's start, not the hook's end.
    pub(super) hook: Duration,
    pub(super) ready_at: Instant,
    pub(super) last_state: Value,
    /// Stopped through the CRI and not restarted (restartPolicy Never, or OnFailure
    /// with exit code 0): when, and with which code.
    pub(crate) terminated: Option<(Instant, i64)>,
    /// Why the container cannot be created yet (an env key missing from its ConfigMap):
    /// reported as `waiting` `CreateContainerConfigError` until the key appears.
    pub(super) config_error: Option<String>,
    /// Its image's pull failed (when, and the runtime's message): never started, reported
    /// `waiting` `ErrImagePull`, then `ImagePullBackOff`, until the spec names another.
    pub(super) pull_error: Option<(Instant, String)>,
}

/// As good as never, for a container that cannot start: a year on.
const NEVER: Duration = Duration::from_secs(365 * 24 * 3600);

impl Ctr {
    /// Its image's pull fails at `at` with `message`: it never starts (nor gets ready)
    /// until the spec names another image.
    pub(super) fn fail_pull(&mut self, at: Instant, message: String) {
        self.pull_error = Some((at, message));
        self.start_at = at + NEVER;
        self.ready_at = self.start_at;
    }

    /// When the runtime started the container (`startedAt`): before its postStart hook.
    pub(crate) fn started_at(&self) -> Instant {
        self.start_at
            .checked_sub(self.hook)
            .unwrap_or(self.start_at)
    }
}

/// A container that was killed and replaced; the runtime keeps the last one per
/// container name, as the kubelet's container GC does by default.
pub(crate) struct DeadCtr {
    pub(crate) name: String,
    pub(crate) container_id: String,
    pub(crate) image: String,
    pub(crate) image_id: String,
    pub(crate) attempt: i64,
    pub(crate) created_at: Instant,
    pub(crate) started_at: Instant,
    pub(crate) finished_at: Instant,
    pub(crate) exit_code: i64,
}

pub(crate) struct PodRt {
    pub(crate) uid: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(super) restart_policy: String,
    pub(crate) node: String,
    pub(super) ip: String,
    pub(super) t0: Instant,
    pub(super) t0_wall: Timestamp,
    pub(super) init_done_at: Instant,
    /// Without init containers the pod counts as Initialized from the start.
    pub(super) has_init: bool,
    pub(crate) containers: Vec<Ctr>,
    pub(crate) dead: Vec<DeadCtr>,
    /// When and with which code the containers exit (restartPolicy Never/OnFailure).
    pub(super) exit: Option<(Instant, i64)>,
    pub(super) delete_at: Option<Instant>,
    /// The node ports its containers hold (protocol, hostPort).
    pub(super) host_ports: Vec<(String, i64)>,
}

impl PodRt {
    /// The wall-clock time of a runtime instant.
    pub(crate) fn timestamp(&self, at: Instant) -> Timestamp {
        let d = SignedDuration::try_from(at.saturating_duration_since(self.t0))
            .unwrap_or(SignedDuration::ZERO);
        self.t0_wall.checked_add(d).unwrap_or(self.t0_wall)
    }

    pub(super) fn wall(&self, at: Instant) -> String {
        meta::format_time(self.timestamp(at))
    }

    /// When the pod's containers exited on their own (`sim.kruise.io/exit-after`).
    pub(crate) fn exited_at(&self, now: Instant) -> Option<(Instant, i64)> {
        self.exit.filter(|(at, _)| now >= *at)
    }

    /// Kills container `i` and starts its replacement `delay` from `now`, reported running
    /// once its postStart `hook` has run (the kubelet's restart for a changed spec or a
    /// container that exited under restartPolicy Always): restartCount+1, a new container
    /// id, the old one kept as the dead container and reported as lastState.
    pub(super) fn restart(
        &mut self,
        i: usize,
        code: i64,
        now: Instant,
        delay: Duration,
        hook: Duration,
        ready: Duration,
    ) {
        let Some(ctr) = self.containers.get(i) else {
            return;
        };
        let last_state = json!({"terminated": {
            "exitCode": code, "reason": if code == 0 { "Completed" } else { "Error" },
            "startedAt": self.wall(ctr.started_at()), "finishedAt": self.wall(now),
            "containerID": ctr.container_id,
        }});
        let dead = DeadCtr {
            name: ctr.name.clone(),
            container_id: ctr.container_id.clone(),
            image: ctr.image.clone(),
            image_id: ctr.image_id.clone(),
            attempt: ctr.restart_count,
            created_at: ctr.created_at,
            started_at: ctr.started_at(),
            finished_at: now,
            exit_code: code,
        };
        self.dead.retain(|d| d.name != dead.name);
        self.dead.push(dead);
        if let Some(ctr) = self.containers.get_mut(i) {
            ctr.last_state = last_state;
            ctr.container_id = container_id();
            ctr.restart_count += 1;
            ctr.created_at = now;
            ctr.start_at = now + delay + hook;
            ctr.hook = hook;
            ctr.ready_at = ctr.start_at + ready;
            ctr.terminated = None;
        }
    }

    /// Stops the container with CRI id `id` (no `containerd://` prefix) as
    /// `StopContainer` does, then lets the restart policy decide: restarted after the
    /// start delay, or left exited. False when no live container has that id.
    pub(crate) fn stop_container(
        &mut self,
        id: &str,
        code: i64,
        now: Instant,
        start: Duration,
        ready: Duration,
    ) -> bool {
        let Some(i) = self
            .containers
            .iter()
            .position(|c| c.container_id.strip_prefix("containerd://") == Some(id))
        else {
            return false;
        };
        if self.exited_at(now).is_some() || self.containers[i].terminated.is_some() {
            // Already exited: stopping is a no-op, as for the runtime.
            return true;
        }
        let restarts = match self.restart_policy.as_str() {
            "Never" => false,
            "OnFailure" => code != 0,
            _ => true,
        };
        if restarts {
            let hook = self.containers[i].hook;
            self.restart(i, code, now, start, hook, ready);
        } else if let Some(c) = self.containers.get_mut(i) {
            c.terminated = Some((now, code));
        }
        true
    }
}

pub(super) fn ann_duration(pod: &Value, key: &str) -> Option<Duration> {
    meta::metadata(pod)
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
        .and_then(parse_duration)
}

/// How long the pod's containers run when each one's command and args only sleep
/// (`sleep N`, `sh -c "sleep N"`): the longest sleep. `None` when any does more, or names
/// no command (the image's entrypoint, which the simulated runtime cannot know).
pub(super) fn sleep_of_every_container(pod: &Value) -> Option<Duration> {
    let all = containers(pod, "containers");
    let words = |c: &Value, field: &str| -> Vec<String> {
        c.get(field)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    };
    let mut longest: Option<Duration> = None;
    for c in &all {
        let mut line = words(c, "command");
        line.extend(words(c, "args"));
        let runs = sleeps_for(&line)?;
        longest = Some(longest.map_or(runs, |l| l.max(runs)));
    }
    longest
}

pub(super) fn containers(pod: &Value, kind: &str) -> Vec<Value> {
    pod.pointer(&format!("/spec/{kind}"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

pub(super) fn str_of<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_that_only_sleep_take_their_seconds() {
        let hook = |v: Value| hook_time(&v);
        assert_eq!(
            hook(json!({"sleep": {"seconds": 3}})),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            hook(json!({"exec": {"command": ["sleep", "10"]}})),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            hook(json!({"exec": {"command": ["/bin/sh", "-c", "sleep 2"]}})),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            hook(json!({"exec": {"command": ["nginx", "-s", "quit"]}})),
            None
        );
        assert_eq!(
            hook(json!({"httpGet": {"path": "/stop", "port": 80}})),
            None
        );
        let pod = json!({"metadata": {"annotations": {ANN_POSTSTART_DURATION: "1s"}}});
        let exec = json!({"lifecycle": {"postStart": {"exec": {"command": ["nginx", "-t"]}}}});
        assert_eq!(post_start_time(&pod, &exec), Duration::from_secs(1));
        let sleeps = json!({"lifecycle": {"postStart": {"exec": {"command": ["sleep", "10"]}}}});
        assert_eq!(post_start_time(&pod, &sleeps), Duration::from_secs(10));
    }
}
