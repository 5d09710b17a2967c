use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

const T0: i64 = 1_800_000_000;

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(T0 + second).unwrap()
}

fn crr(strategy: Value, status: Value) -> ContainerRecreateRequest {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "ContainerRecreateRequest",
        "metadata": {"name": "crr", "namespace": "default", "creationTimestamp": at(0).to_string(),
                     "labels": {"crr.apps.kruise.io/pod-uid": "uid", "crr.apps.kruise.io/node-name": "node-1"}},
        "spec": {
            "podName": "pod-0",
            "containers": [
                {"name": "app", "preStop": {"exec": {"command": ["sleep", "1"]}},
                 "statusContext": {"containerID": "containerd://app-0", "restartCount": 0}},
                {"name": "sidecar", "statusContext": {"containerID": "containerd://sidecar-0", "restartCount": 0}},
            ],
            "strategy": strategy,
        },
        "status": status,
    }))
    .unwrap()
}

fn running(name: &str, attempt: i32, started: i64) -> RuntimeContainer {
    RuntimeContainer {
        name: name.into(),
        id: format!("containerd://{name}-{attempt}"),
        runtime_id: format!("{name}-{attempt}"),
        state: RunState::Running,
        started_at: Some(at(started)),
        restart_count: attempt,
        kubelet_hash: None,
    }
}

/// `c` with the states the agent records first (as the runtime shows them).
fn recorded(
    mut c: ContainerRecreateRequest,
    containers: &[RuntimeContainer],
    now: Timestamp,
) -> ContainerRecreateRequest {
    let states = current_states(&c, containers, now);
    c.status.get_or_insert_default().container_recreate_states = states;
    c
}

fn phases(states: &[ContainerRecreateState]) -> Vec<(String, String, bool)> {
    states
        .iter()
        .map(|s| (s.name.clone(), s.phase.clone(), s.is_killed))
        .collect()
}

fn p(name: &str, phase: &str, killed: bool) -> (String, String, bool) {
    (name.into(), phase.into(), killed)
}

#[test]
fn requests_are_ordered_as_openkruise_orders_them() {
    let view = |name: &str, phase: &str, created: i64, finished: bool| RequestView {
        name: name.into(),
        phase: phase.into(),
        created: Some(at(created)),
        finished,
    };
    let picked = pick(&[
        view("new", "", 5, false),
        view("older-new", "", 1, false),
        view("pending", "Pending", 9, false),
        view("recreating", "Recreating", 10, false),
        view("done", "Completed", 0, true),
    ]);
    assert_eq!(
        picked,
        Pick {
            picked: Some("recreating".into()),
            to_pending: vec!["older-new".into(), "new".into()],
        }
    );
    // Among requests in no phase yet, the oldest goes first.
    let picked = pick(&[view("b", "", 2, false), view("a", "", 1, false)]);
    assert_eq!(picked.picked.as_deref(), Some("a"));
    assert_eq!(picked.to_pending, ["b"]);
    // Once the first is deleted (or completed), the next is picked (K#1058).
    let picked = pick(&[
        view("first", "Recreating", 1, true),
        view("second", "Pending", 2, false),
    ]);
    assert_eq!(picked.picked.as_deref(), Some("second"));
    assert_eq!(pick(&[]), Pick::default());
}

#[test]
fn the_first_step_is_recreating_then_one_kill_per_sync_with_its_prestop_and_grace() {
    let containers = [running("app", 0, -100), running("sidecar", 0, -100)];
    let fresh = crr(
        json!({"terminationGracePeriodSeconds": 45}),
        json!({"phase": ""}),
    );
    let input = AgentInput {
        crr: &fresh,
        containers: &containers,
        now: at(1),
    };
    assert_eq!(plan(&input), Step::StartRecreating);

    let recreating = crr(
        json!({"terminationGracePeriodSeconds": 45}),
        json!({"phase": "Recreating"}),
    );
    // Then the states as the runtime shows them, all Pending, and nothing else yet.
    let Step::Sync {
        states,
        write_states: true,
        kill: None,
        complete: None,
        ..
    } = plan(&AgentInput {
        crr: &recreating,
        containers: &containers,
        now: at(1),
    })
    else {
        panic!("the states recorded first");
    };
    assert_eq!(
        phases(&states),
        [p("app", "Pending", false), p("sidecar", "Pending", false)]
    );
    let recreating = recorded(recreating, &containers, at(1));
    let Step::Sync {
        states,
        write_states,
        kill,
        complete,
        requeue_after,
    } = plan(&AgentInput {
        crr: &recreating,
        containers: &containers,
        now: at(1),
    })
    else {
        panic!("a sync");
    };
    assert!(write_states);
    assert_eq!(complete, None);
    assert_eq!(requeue_after, None);
    // The container to kill is written Recreating/isKilled before its stop (K#1182).
    assert_eq!(
        phases(&states),
        [p("app", "Recreating", true), p("sidecar", "Pending", false)]
    );
    let kill = kill.unwrap();
    assert_eq!(kill.container, "app");
    assert_eq!(kill.runtime_id, "app-0");
    assert_eq!(kill.grace_seconds, 45);
    assert_eq!(
        kill.pre_stop.unwrap().exec.unwrap().command,
        Some(vec!["sleep".to_string(), "1".to_string()])
    );
}

#[test]
fn grace_defaults_to_30_and_the_stop_gets_what_the_prestop_left_at_least_2s() {
    assert_eq!(grace_seconds(&crate::api::Strategy::default()), 30);
    assert_eq!(stop_timeout(30, Duration::from_secs(10)), 20);
    assert_eq!(stop_timeout(30, Duration::from_millis(900)), 30);
    assert_eq!(stop_timeout(5, Duration::from_secs(10)), 2);
    assert_eq!(stop_timeout(0, Duration::ZERO), 2);
}

#[test]
fn a_container_unchanged_is_killed_even_if_it_started_after_the_request() {
    // K#895: the node's clock is ahead; the container "started" after the request was made,
    // but its id and restart count are those of the request, so it is not recreated yet.
    let containers = [running("app", 0, 30), running("sidecar", 0, 30)];
    let c = recorded(
        crr(json!({}), json!({"phase": "Recreating"})),
        &containers,
        at(31),
    );
    let states = current_states(&c, &containers, at(31));
    assert_eq!(
        phases(&states),
        [p("app", "Pending", false), p("sidecar", "Pending", false)]
    );
    let Step::Sync { kill, .. } = plan(&AgentInput {
        crr: &c,
        containers: &containers,
        now: at(31),
    }) else {
        panic!("a sync");
    };
    assert_eq!(kill.unwrap().container, "app");
}

#[test]
fn container_states_follow_the_runtime_and_the_synced_pod_status() {
    let c = crr(
        json!({"minStartedSeconds": 10}),
        json!({"phase": "Recreating",
               "containerRecreateStates": [{"name": "app", "phase": "Recreating", "isKilled": true},
                                           {"name": "sidecar", "phase": "Pending"}],
               "containerStatusSnapshot": [{"name": "app", "ready": true, "restartCount": 1, "containerID": "containerd://app-1"}]}),
    );
    // Not on the node.
    let states = current_states(&c, &[], at(5));
    assert_eq!(states[0].message, NOT_FOUND_MESSAGE);
    assert_eq!(
        phases(&states),
        [p("app", "Pending", true), p("sidecar", "Pending", false)]
    );
    // Exited: the kubelet restarts it.
    let mut exited = running("app", 0, 0);
    exited.state = RunState::Exited;
    let states = current_states(&c, &[exited, running("sidecar", 0, 0)], at(5));
    assert_eq!(
        phases(&states),
        [p("app", "Recreating", true), p("sidecar", "Pending", false)]
    );
    // A new attempt, ready in the pod, but not yet minStartedSeconds old.
    let states = current_states(
        &c,
        &[running("app", 1, 0), running("sidecar", 0, 0)],
        at(10),
    );
    assert_eq!(states[0].phase, "Recreating");
    // Old enough: Succeeded.
    let states = current_states(
        &c,
        &[running("app", 1, 0), running("sidecar", 0, 0)],
        at(11),
    );
    assert_eq!(states[0].phase, "Succeeded");
    // A newer attempt than the synced status shows is not Succeeded yet.
    let states = current_states(
        &c,
        &[running("app", 2, 0), running("sidecar", 0, 0)],
        at(100),
    );
    assert_eq!(states[0].phase, "Recreating");
    // A finished state is kept whatever the runtime says.
    let done = crr(
        json!({}),
        json!({"phase": "Recreating", "containerRecreateStates": [
        {"name": "app", "phase": "Succeeded", "isKilled": true},
        {"name": "sidecar", "phase": "Failed", "message": "kill container error: boom", "isKilled": true}]}),
    );
    let states = current_states(&done, &[], at(0));
    assert_eq!(states, done.status.unwrap().container_recreate_states);
}

#[test]
fn force_recreate_kills_a_container_not_yet_killed_even_if_it_moved_on() {
    let containers = [running("app", 3, 0), running("sidecar", 0, 0)];
    let forced = crr(
        json!({"forceRecreate": true}),
        json!({"phase": "Recreating"}),
    );
    let states = current_states(&forced, &containers, at(1));
    assert_eq!(
        phases(&states),
        [p("app", "Pending", false), p("sidecar", "Pending", false)]
    );
    // Without force, a container restarted since the request counts as recreating.
    let plain = crr(json!({}), json!({"phase": "Recreating"}));
    let states = current_states(&plain, &containers, at(1));
    assert_eq!(
        phases(&states),
        [
            p("app", "Recreating", false),
            p("sidecar", "Pending", false)
        ]
    );
    // Once killed, force no longer applies: the new attempt is recreating.
    let killed = crr(
        json!({"forceRecreate": true}),
        json!({"phase": "Recreating",
        "containerRecreateStates": [{"name": "app", "phase": "Recreating", "isKilled": true}]}),
    );
    let states = current_states(&killed, &containers, at(1));
    assert_eq!(states[0].phase, "Recreating");
}

#[test]
fn unready_grace_waits_for_the_condition_then_for_the_period() {
    let containers = [running("app", 0, 0), running("sidecar", 0, 0)];
    let waiting = crr(
        json!({"unreadyGracePeriodSeconds": 10}),
        json!({"phase": "Recreating"}),
    );
    assert_eq!(
        plan(&AgentInput {
            crr: &waiting,
            containers: &containers,
            now: at(1)
        }),
        Step::Wait {
            requeue_after: None
        }
    );
    let acquired = crr(
        json!({"unreadyGracePeriodSeconds": 10}),
        json!({"phase": "Recreating", "conditions": [{"type": "PreRecreateGrace", "status": "True",
               "lastTransitionTime": at(2).to_string(), "reason": "PreRecreateGrace", "message": ""}]}),
    );
    assert_eq!(
        plan(&AgentInput {
            crr: &acquired,
            containers: &containers,
            now: at(5)
        }),
        Step::Wait {
            requeue_after: Some(Duration::from_millis(7_100))
        }
    );
    let acquired = recorded(acquired, &containers, at(12));
    let Step::Sync { kill, .. } = plan(&AgentInput {
        crr: &acquired,
        containers: &containers,
        now: at(12),
    }) else {
        panic!("past the grace period the kill goes ahead");
    };
    assert_eq!(kill.unwrap().container, "app");
}

#[test]
fn runtime_name_is_the_containerid_scheme_shared_by_all_containers() {
    assert_eq!(
        runtime_name(&crr(json!({}), json!({}))),
        Ok("containerd".into())
    );
    let mut mixed = crr(json!({}), json!({}));
    mixed.spec.containers[1]
        .status_context
        .as_mut()
        .unwrap()
        .container_id = "docker://x".into();
    assert_eq!(
        runtime_name(&mixed),
        Err("has different runtime types containerd, docker in Pod".into())
    );
    let mut missing = crr(json!({}), json!({}));
    missing.spec.containers[0].status_context = None;
    assert_eq!(
        runtime_name(&missing),
        Err("no statusContext or empty containerID in app container".into())
    );
}

#[test]
fn a_failed_kill_fails_the_container_and_completes_unless_ignored() {
    let c = crr(json!({}), json!({"phase": "Recreating"}));
    let states = vec![
        ContainerRecreateState {
            name: "app".into(),
            phase: "Recreating".into(),
            message: String::new(),
            is_killed: true,
        },
        ContainerRecreateState {
            name: "sidecar".into(),
            phase: "Pending".into(),
            message: String::new(),
            is_killed: false,
        },
    ];
    let (after, complete) = kill_failed(&c, states.clone(), "app", "rpc error: not found");
    assert!(complete);
    assert_eq!(after[0].phase, "Failed");
    assert_eq!(
        after[0].message,
        "kill container error: rpc error: not found"
    );
    let ignoring = crr(
        json!({"failurePolicy": "Ignore"}),
        json!({"phase": "Recreating"}),
    );
    assert!(!kill_failed(&ignoring, states, "app", "x").1);
}

#[test]
fn a_failed_container_completes_the_request_under_fail_and_is_passed_over_under_ignore() {
    let status = json!({"phase": "Recreating", "containerRecreateStates": [
        {"name": "app", "phase": "Failed", "message": "kill container error: x", "isKilled": true},
        {"name": "sidecar", "phase": "Pending"}]});
    let containers = [running("app", 0, 0), running("sidecar", 0, 0)];
    let fail = crr(json!({"failurePolicy": "Fail"}), status.clone());
    let Step::Sync { kill, complete, .. } = plan(&AgentInput {
        crr: &fail,
        containers: &containers,
        now: at(1),
    }) else {
        panic!("a sync");
    };
    assert_eq!((kill, complete), (None, Some(String::new())));
    let ignore = crr(json!({"failurePolicy": "Ignore"}), status);
    let Step::Sync { kill, complete, .. } = plan(&AgentInput {
        crr: &ignore,
        containers: &containers,
        now: at(1),
    }) else {
        panic!("a sync");
    };
    assert_eq!(kill.unwrap().container, "sidecar");
    assert_eq!(complete, None);
}

/// A scripted node: the runtime, the kubelet restarting what the agent stopped, the
/// controller syncing the pod's container statuses into the request, and the request's
/// status as the agent writes it.
struct ScriptedNode {
    crr: ContainerRecreateRequest,
    containers: Vec<RuntimeContainer>,
    /// Seconds after its start a container turns ready.
    ready_after: i64,
    kills: Vec<String>,
    now: i64,
}

impl ScriptedNode {
    fn new(strategy: Value) -> Self {
        ScriptedNode {
            crr: crr(strategy, json!({"phase": ""})),
            containers: vec![running("app", 0, -100), running("sidecar", 0, -100)],
            ready_after: 5,
            kills: Vec::new(),
            now: 0,
        }
    }

    /// The kubelet restarts a stopped container at once; the controller syncs readiness.
    fn kubelet_and_controller(&mut self) {
        for c in &mut self.containers {
            if c.state == RunState::Exited {
                *c = running(&c.name, c.restart_count + 1, self.now);
            }
        }
        let now = self.now;
        let ready_after = self.ready_after;
        let snapshot: Vec<SyncContainerStatus> = self
            .containers
            .iter()
            .map(|c| SyncContainerStatus {
                name: c.name.clone(),
                ready: c
                    .started_at
                    .is_some_and(|s| at(now).duration_since(s).as_secs() >= ready_after),
                restart_count: c.restart_count,
                container_id: c.id.clone(),
            })
            .collect();
        self.crr
            .status
            .get_or_insert_default()
            .container_status_snapshot = snapshot;
    }

    /// One agent sync; true once the request completed.
    fn sync(&mut self) -> bool {
        let step = plan(&AgentInput {
            crr: &self.crr,
            containers: &self.containers,
            now: at(self.now),
        });
        let status = self.crr.status.get_or_insert_default();
        match step {
            Step::StartRecreating => status.phase = "Recreating".into(),
            Step::Wait { .. } => {}
            Step::Sync {
                states,
                kill,
                complete,
                ..
            } => {
                status.container_recreate_states = states;
                if let Some(kill) = kill {
                    self.kills.push(kill.container.clone());
                    let c = self
                        .containers
                        .iter_mut()
                        .find(|c| c.runtime_id == kill.runtime_id)
                        .unwrap();
                    c.state = RunState::Exited;
                }
                if complete.is_some() {
                    status.phase = "Completed".into();
                    return true;
                }
            }
        }
        false
    }

    /// Runs a second at a time until the request completes; the kills and when each happened.
    fn run(&mut self) -> Vec<(String, i64)> {
        let mut log = Vec::new();
        for _ in 0..100 {
            let before = self.kills.len();
            let done = self.sync();
            if self.kills.len() > before {
                log.push((self.kills[before].clone(), self.now));
            }
            if done {
                return log;
            }
            self.now += 1;
            self.kubelet_and_controller();
        }
        panic!("the request never completed: {:?}", self.crr.status);
    }
}

#[test]
fn ordered_recreate_kills_the_sidecar_only_once_the_new_app_is_ready() {
    let mut node = ScriptedNode::new(json!({"orderedRecreate": true}));
    let kills = node.run();
    assert_eq!(kills.len(), 2);
    assert_eq!(kills[0].0, "app");
    assert_eq!(kills[1].0, "sidecar");
    assert!(kills[1].1 - kills[0].1 > node.ready_after, "{kills:?}");
    let states = node.crr.status.unwrap().container_recreate_states;
    assert_eq!(
        phases(&states),
        [p("app", "Succeeded", true), p("sidecar", "Succeeded", true)]
    );
}

#[test]
fn unordered_recreate_kills_the_sidecar_without_waiting_for_the_app() {
    let mut node = ScriptedNode::new(json!({}));
    let kills = node.run();
    assert_eq!(kills.len(), 2);
    assert!(kills[1].1 - kills[0].1 <= 1, "{kills:?}");
}

#[test]
fn min_started_seconds_holds_success_back() {
    let mut node = ScriptedNode::new(json!({"minStartedSeconds": 20}));
    node.run();
    let app = node.containers.iter().find(|c| c.name == "app").unwrap();
    assert!(
        at(node.now)
            .duration_since(app.started_at.unwrap())
            .as_secs()
            > 20
    );
}

#[test]
fn an_agent_restarted_mid_recreate_kills_exactly_once() {
    // K#1182: the agent wrote the mark, killed, and restarted before it saw its own write;
    // whatever it finds after (old attempt exited, new attempt running), no second kill.
    for force in [false, true] {
        let mut node = ScriptedNode::new(json!({"forceRecreate": force, "orderedRecreate": true}));
        node.sync(); // Recreating
        node.sync(); // the states, all Pending
        node.sync(); // mark + kill app
        assert_eq!(node.kills, ["app"]);
        for _ in 0..3 {
            // A restarted agent: it knows nothing but the request and the runtime.
            node.sync();
            node.now += 1;
            node.kubelet_and_controller();
        }
        assert_eq!(
            node.kills.iter().filter(|k| *k == "app").count(),
            1,
            "force={force}"
        );
        // Restarted after the mark but before the kill reached the runtime: one kill.
        let mut node = ScriptedNode::new(json!({"forceRecreate": force}));
        node.sync();
        let Step::Sync { states, .. } = plan(&AgentInput {
            crr: &node.crr,
            containers: &node.containers,
            now: at(0),
        }) else {
            panic!("a sync");
        };
        node.crr
            .status
            .get_or_insert_default()
            .container_recreate_states = states;
        node.run();
        assert_eq!(node.kills, ["app", "sidecar"], "force={force}");
    }
}

proptest! {
    /// Whatever the strategy and the kubelet's pace, each container is killed exactly once,
    /// in order when ordered, and the request completes with every container Succeeded.
    #[test]
    fn every_container_is_killed_exactly_once(
        ordered in any::<bool>(),
        force in any::<bool>(),
        min_started in 0i32..8,
        ready_after in 0i64..8,
    ) {
        let mut node = ScriptedNode::new(json!({
            "orderedRecreate": ordered, "forceRecreate": force, "minStartedSeconds": min_started}));
        node.ready_after = ready_after;
        let kills = node.run();
        let names: Vec<&str> = kills.iter().map(|(n, _)| n.as_str()).collect();
        prop_assert_eq!(names, vec!["app", "sidecar"]);
        let states = node.crr.status.unwrap().container_recreate_states;
        prop_assert!(states.iter().all(|s| s.phase == "Succeeded" && s.is_killed));
    }
}
