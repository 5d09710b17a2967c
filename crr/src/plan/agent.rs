//! The node agent's decisions for one pod, as OpenKruise's daemon makes them
//! (`pkg/daemon/containerrecreate`): which of the pod's requests is handled ([`pick`]),
//! each container's state against what the runtime reports ([`current_states`]), and the
//! next step ([`plan`]): at most one kill per sync, in container order.
//!
//! One change from OpenKruise, so that an agent restarted mid-recreate kills exactly once
//! (K#1182): the container's state is written `Recreating`, `isKilled: true` after its
//! preStop hook and **before** the stop (OpenKruise writes it after the stop), so a
//! restarted agent that finds the new container does not kill it again, and one that finds
//! the old container still running (the stop never happened) stops it. While the hook runs
//! the states read as OpenKruise's.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use crate::api::v1beta1::ContainerRecreateRequest;
use crate::api::{
    ContainerContext, ContainerRecreateState, FailurePolicy, Phase, ProbeHandler, Strategy,
    SyncContainerStatus,
};

/// Grace period of a kill when neither the request nor the pod gives one (the kubelet's).
pub const DEFAULT_GRACE_SECONDS: i64 = 30;
/// The shortest stop timeout after a preStop hook (the kubelet's
/// `minimumGracePeriodInSeconds`).
pub const MIN_STOP_TIMEOUT_SECONDS: i64 = 2;
/// Message of a container the runtime does not report.
pub const NOT_FOUND_MESSAGE: &str = "not found container on Node";
/// Slack added to a requeue computed from a duration, so the check after it passes.
const REQUEUE_SLACK: Duration = Duration::from_millis(100);

/// A container's state as the runtime reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    /// Created, not started.
    Created,
    /// Running.
    Running,
    /// Exited.
    Exited,
    /// Anything else.
    Unknown,
}

/// The newest attempt of one of the pod's containers, as the runtime reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeContainer {
    /// The container's name in the pod.
    pub name: String,
    /// `<runtime>://<id>`, as the pod status spells it.
    pub id: String,
    /// The runtime's own id (what CRI calls take).
    pub runtime_id: String,
    /// Its state.
    pub state: RunState,
    /// When it started (`None` when unknown).
    pub started_at: Option<Timestamp>,
    /// Its restart count (the CRI attempt).
    pub restart_count: i32,
    /// The kubelet's hash of the container spec it was created from
    /// (`io.kubernetes.container.hash`), when the runtime holds one.
    pub kubelet_hash: Option<u64>,
}

/// What the agent knows of one request.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestView {
    /// Its name.
    pub name: String,
    /// `status.phase`.
    pub phase: String,
    /// When it was created.
    pub created: Option<Timestamp>,
    /// Being deleted, or already completed.
    pub finished: bool,
}

impl RequestView {
    /// The view of `crr`.
    pub fn of(crr: &ContainerRecreateRequest) -> Self {
        let status = crr.status.as_ref();
        RequestView {
            name: crr.metadata.name.clone().unwrap_or_default(),
            phase: status.map(|s| s.phase.clone()).unwrap_or_default(),
            created: crr.metadata.creation_timestamp.as_ref().map(|t| t.0),
            finished: crr.metadata.deletion_timestamp.is_some()
                || status.is_some_and(|s| s.completion_time.is_some()),
        }
    }
}

/// Which of a pod's requests is handled now.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pick {
    /// The request handled now.
    pub picked: Option<String>,
    /// Requests that wait their turn and have no phase yet: they are set `Pending`.
    pub to_pending: Vec<String>,
}

fn phase_weight(phase: &str) -> u8 {
    match phase {
        "Completed" => 1,
        "Recreating" => 2,
        "Pending" => 3,
        _ => 4,
    }
}

/// OpenKruise's order: by phase (`Completed`, `Recreating`, `Pending`, none), then by
/// creation time (then name, so the order is total); finished requests are passed over.
pub fn pick(requests: &[RequestView]) -> Pick {
    let mut sorted: Vec<&RequestView> = requests.iter().filter(|r| !r.finished).collect();
    sorted.sort_by(|a, b| {
        phase_weight(&a.phase)
            .cmp(&phase_weight(&b.phase))
            .then(a.created.cmp(&b.created))
            .then(a.name.cmp(&b.name))
    });
    let mut out = Pick::default();
    for request in sorted {
        if out.picked.is_none() {
            out.picked = Some(request.name.clone());
        } else if request.phase.is_empty() {
            out.to_pending.push(request.name.clone());
        }
    }
    out
}

/// The runtime every container of the request runs in (the scheme of its statusContext
/// containerIDs), or why there is none.
pub fn runtime_name(crr: &ContainerRecreateRequest) -> Result<String, String> {
    let mut name: Option<&str> = None;
    for c in &crr.spec.containers {
        let id = c
            .status_context
            .as_ref()
            .map(|s| s.container_id.as_str())
            .unwrap_or_default();
        if id.is_empty() {
            return Err(format!(
                "no statusContext or empty containerID in {} container",
                c.name
            ));
        }
        let Some((scheme, rest)) = id.split_once("://") else {
            return Err(format!(
                "failed to parse containerID {id} in {} container: invalid container ID: {id:?}",
                c.name
            ));
        };
        if scheme.is_empty() || rest.is_empty() {
            return Err(format!(
                "failed to parse containerID {id} in {} container: invalid container ID: {id:?}",
                c.name
            ));
        }
        match name {
            None => name = Some(scheme),
            Some(n) if n != scheme => {
                return Err(format!("has different runtime types {n}, {scheme} in Pod"));
            }
            Some(_) => {}
        }
    }
    name.map(str::to_string)
        .ok_or_else(|| "no runtime type found in Pod".to_string())
}

/// Each container's state now (OpenKruise's `getCurrentCRRContainersRecreateStates`): a
/// finished state is kept; no container on the node is `Pending` ("not found container on
/// Node"); an exited one is `Recreating` (the kubelet restarts it); under `forceRecreate` one
/// not yet killed is `Pending`; one whose containerID or restart count moved on since the
/// request is `Recreating`, and `Succeeded` once the synced pod status shows that container
/// ready and it has run longer than `minStartedSeconds`; anything else is `Pending`.
///
/// Only containerID and restart count tell whether it was recreated, never its start time,
/// so a node clock ahead of the API server's does not pass over a container (K#895).
pub fn current_states(
    crr: &ContainerRecreateRequest,
    containers: &[RuntimeContainer],
    now: Timestamp,
) -> Vec<ContainerRecreateState> {
    let strategy = crr.spec.strategy.clone().unwrap_or_default();
    let min_started = SignedDuration::from_secs(i64::from(strategy.min_started_seconds));
    let status = crr.status.clone().unwrap_or_default();
    let previous = |name: &str| {
        status
            .container_recreate_states
            .iter()
            .find(|s| s.name == name)
    };
    let synced = |name: &str| -> Option<&SyncContainerStatus> {
        status
            .container_status_snapshot
            .iter()
            .find(|s| s.name == name)
    };
    let mut states = Vec::with_capacity(crr.spec.containers.len());
    for c in &crr.spec.containers {
        let previous = previous(&c.name);
        if let Some(p) = previous
            .filter(|p| p.phase == Phase::Succeeded.as_str() || p.phase == Phase::Failed.as_str())
        {
            states.push(p.clone());
            continue;
        }
        let killed = previous.is_some_and(|p| p.is_killed);
        let state = |phase: Phase, message: &str, is_killed: bool| ContainerRecreateState {
            name: c.name.clone(),
            phase: phase.as_str().to_string(),
            message: message.to_string(),
            is_killed,
        };
        let running = containers.iter().find(|r| r.name == c.name);
        let next = match running {
            None => state(Phase::Pending, NOT_FOUND_MESSAGE, killed),
            Some(r) if r.state == RunState::Exited => state(Phase::Recreating, "", killed),
            Some(_) if strategy.force_recreate && !killed => state(Phase::Pending, "", false),
            Some(r) if moved_on(c.status_context.as_ref(), r) => {
                let started_long_enough = r
                    .started_at
                    .is_none_or(|started| now.duration_since(started) > min_started);
                let ready_in_pod =
                    synced(&c.name).is_some_and(|s| s.container_id == r.id && s.ready);
                if ready_in_pod && started_long_enough {
                    state(Phase::Succeeded, "", killed)
                } else {
                    state(Phase::Recreating, "", killed)
                }
            }
            Some(_) => state(Phase::Pending, "", killed),
        };
        states.push(next);
    }
    states
}

fn moved_on(context: Option<&ContainerContext>, r: &RuntimeContainer) -> bool {
    context.is_some_and(|ctx| r.id != ctx.container_id || r.restart_count > ctx.restart_count)
}

/// A container to kill: its preStop first, then CRI StopContainer.
#[derive(Debug, Clone, PartialEq)]
pub struct Kill {
    /// The container's name.
    pub container: String,
    /// The runtime's id of the running attempt.
    pub runtime_id: String,
    /// The preStop hook the webhook recorded.
    pub pre_stop: Option<ProbeHandler>,
    /// Ports of the container (for a named httpGet/tcpSocket port).
    pub ports: Vec<k8s_openapi::api::core::v1::ContainerPort>,
    /// The grace period: the preStop hook and the stop share it.
    pub grace_seconds: i64,
}

/// The next step for the picked request.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Set `status.phase` to `Recreating` (the first thing the agent does).
    StartRecreating,
    /// Wait: for the controller's `PreRecreateGrace` condition (`None`: its write wakes the
    /// agent), or until the unready grace period has passed.
    Wait {
        /// When to look again.
        requeue_after: Option<Duration>,
    },
    /// Run the preStop hook of the container to kill (if any), write the container states
    /// (when they changed), then stop it; or complete (if set, in the same status write as
    /// the states).
    Sync {
        /// The container states to hold (with the container to kill already marked
        /// `Recreating`, `isKilled`).
        states: Vec<ContainerRecreateState>,
        /// Whether `states` differ from the request's.
        write_states: bool,
        /// The container to kill: its hook runs before the states are written, its stop
        /// after.
        kill: Option<Box<Kill>>,
        /// Complete the request with this message.
        complete: Option<String>,
        /// When to look again (`minStartedSeconds` pending).
        requeue_after: Option<Duration>,
    },
}

/// Everything [`plan`] decides from.
#[derive(Debug, Clone, Copy)]
pub struct AgentInput<'a> {
    /// The picked request.
    pub crr: &'a ContainerRecreateRequest,
    /// The newest attempt of each of the pod's containers on the node.
    pub containers: &'a [RuntimeContainer],
    /// Now.
    pub now: Timestamp,
}

/// The grace period of a kill: the request's (the webhook copies the pod's), else 30s.
pub fn grace_seconds(strategy: &Strategy) -> i64 {
    strategy
        .termination_grace_period_seconds
        .unwrap_or(DEFAULT_GRACE_SECONDS)
}

/// The StopContainer timeout after a preStop hook that ran for `pre_stop`: what is left of
/// the grace period, at least 2 seconds (as the kubelet computes it).
pub fn stop_timeout(grace_seconds: i64, pre_stop: Duration) -> i64 {
    let spent = i64::try_from(pre_stop.as_secs()).unwrap_or(i64::MAX);
    grace_seconds
        .saturating_sub(spent)
        .max(MIN_STOP_TIMEOUT_SECONDS)
}

/// The step that comes before looking at the runtime, if any: `Recreating` first, then the
/// unready grace period.
pub fn before_runtime(crr: &ContainerRecreateRequest, now: Timestamp) -> Option<Step> {
    let status = crr.status.clone().unwrap_or_default();
    if status.phase != Phase::Recreating.as_str() {
        return Some(Step::StartRecreating);
    }
    let unready = crr
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.unready_grace_period_seconds)?;
    let Some(acquired) = status.pre_recreate_grace() else {
        return Some(Step::Wait {
            requeue_after: None,
        });
    };
    let left =
        SignedDuration::from_secs(unready) - now.duration_since(acquired.last_transition_time.0);
    left.is_positive().then(|| Step::Wait {
        requeue_after: Some(left.unsigned_abs() + REQUEUE_SLACK),
    })
}

/// The next step for `input.crr` (OpenKruise's `sync` and `manage`).
pub fn plan(input: &AgentInput<'_>) -> Step {
    if let Some(step) = before_runtime(input.crr, input.now) {
        return step;
    }
    let crr = input.crr;
    let status = crr.status.clone().unwrap_or_default();
    let strategy = crr.spec.strategy.clone().unwrap_or_default();
    let mut states = current_states(crr, input.containers, input.now);
    if states != status.container_recreate_states {
        // As OpenKruise's daemon: the states as the runtime shows them are written first
        // (the request's first states all Pending), and acted on in the next pass.
        return Step::Sync {
            states,
            write_states: true,
            kill: None,
            complete: None,
            requeue_after: None,
        };
    }
    let ignore = strategy.policy() == FailurePolicy::Ignore;
    let mut completed = 0;
    let mut kill = None;
    let mut complete = None;
    for (i, state) in states.iter_mut().enumerate() {
        match state.phase.as_str() {
            "Succeeded" => completed += 1,
            "Failed" => {
                completed += 1;
                if !ignore {
                    complete = Some(String::new());
                    break;
                }
            }
            "Recreating" => {
                state.is_killed = true;
                if strategy.ordered_recreate {
                    break;
                }
            }
            _ => {
                let Some(running) = input.containers.iter().find(|r| r.name == state.name) else {
                    break;
                };
                let spec = &crr.spec.containers[i];
                state.phase = Phase::Recreating.as_str().to_string();
                state.is_killed = true;
                state.message.clear();
                kill = Some(Box::new(Kill {
                    container: state.name.clone(),
                    runtime_id: running.runtime_id.clone(),
                    pre_stop: spec.pre_stop.clone(),
                    ports: spec.ports.clone().unwrap_or_default(),
                    grace_seconds: grace_seconds(&strategy),
                }));
                break;
            }
        }
    }
    if complete.is_none() && kill.is_none() && completed == states.len() {
        complete = Some(String::new());
    }
    let requeue_after = (complete.is_none() && strategy.min_started_seconds > 0)
        .then(|| min_started_requeue(&strategy, input.containers, input.now));
    Step::Sync {
        write_states: states != status.container_recreate_states,
        states,
        kill,
        complete,
        requeue_after,
    }
}

/// When the newest container to start reaches `minStartedSeconds` (OpenKruise requeues after
/// the whole `minStartedSeconds`).
fn min_started_requeue(
    strategy: &Strategy,
    containers: &[RuntimeContainer],
    now: Timestamp,
) -> Duration {
    let min_started = SignedDuration::from_secs(i64::from(strategy.min_started_seconds));
    containers
        .iter()
        .filter_map(|c| c.started_at)
        .map(|started| min_started - now.duration_since(started))
        .filter(|left| left.is_positive())
        .max()
        .map_or(min_started.unsigned_abs(), |left| left.unsigned_abs())
        + REQUEUE_SLACK
}

/// The states after a kill failed: the container `Failed` with OpenKruise's message, and
/// whether the request completes (unless `failurePolicy: Ignore`).
pub fn kill_failed(
    crr: &ContainerRecreateRequest,
    mut states: Vec<ContainerRecreateState>,
    container: &str,
    error: &str,
) -> (Vec<ContainerRecreateState>, bool) {
    for state in states.iter_mut().filter(|s| s.name == container) {
        state.phase = Phase::Failed.as_str().to_string();
        state.message = format!("kill container error: {error}");
    }
    let ignore = crr
        .spec
        .strategy
        .as_ref()
        .is_some_and(|s| s.policy() == FailurePolicy::Ignore);
    (states, !ignore)
}

#[cfg(test)]
mod tests;
