use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;

const T0: i64 = 1_800_000_000;

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(T0 + second).unwrap()
}

fn crr(patch: impl FnOnce(&mut Value)) -> ContainerRecreateRequest {
    let mut v = json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "ContainerRecreateRequest",
        "metadata": {"name": "crr", "namespace": "ns", "creationTimestamp": at(0).to_string(),
                     "labels": {"crr.apps.kruise.io/pod-uid": "uid-1", "crr.apps.kruise.io/node-name": "n",
                                "crr.apps.kruise.io/active": "true"}},
        "spec": {"podName": "pod-0", "containers": [{"name": "app"}, {"name": "sidecar"}]},
        "status": {"phase": "Recreating"},
    });
    patch(&mut v);
    serde_json::from_value(v).unwrap()
}

fn pod(patch: impl FnOnce(&mut Value)) -> Pod {
    let mut v = json!({
        "metadata": {"name": "pod-0", "namespace": "ns", "uid": "uid-1"},
        "spec": {"containers": [{"name": "app"}, {"name": "sidecar"}],
                 "readinessGates": [{"conditionType": "KruisePodReady"}]},
        "status": {"containerStatuses": [
            {"name": "app", "ready": true, "restartCount": 1, "containerID": "containerd://app-1", "image": "", "imageID": "",
             "state": {"running": {"startedAt": at(5).to_string()}}},
            {"name": "sidecar", "ready": true, "restartCount": 0, "containerID": "containerd://sidecar-0", "image": "", "imageID": "",
             "state": {"running": {"startedAt": at(-100).to_string()}}},
        ]},
    });
    patch(&mut v);
    serde_json::from_value(v).unwrap()
}

#[test]
fn a_request_whose_pod_is_gone_or_replaced_completes() {
    let c = crr(|_| {});
    for p in [
        None,
        Some(pod(|p| {
            p["metadata"]["deletionTimestamp"] = json!(at(1).to_string())
        })),
        Some(pod(|p| p["metadata"]["uid"] = json!("uid-2"))),
    ] {
        assert_eq!(
            plan(&c, p.as_ref(), at(1)).actions,
            [Action::Complete(POD_GONE)]
        );
    }
}

#[test]
fn no_agent_answer_within_a_minute_completes_the_request() {
    let c = crr(|c| c["status"]["phase"] = json!(""));
    let p = pod(|_| {});
    let waiting = plan(&c, Some(&p), at(20));
    assert_eq!(waiting.actions, []);
    assert_eq!(waiting.requeue_after, Some(Duration::from_secs(40)));
    assert_eq!(
        plan(&c, Some(&p), at(60)).actions,
        [Action::Complete(NO_RESPONSE)]
    );
}

#[test]
fn the_active_deadline_completes_the_request() {
    let c = crr(|c| {
        c["spec"]["activeDeadlineSeconds"] = json!(3);
        c["status"]["phase"] = json!("Pending");
    });
    let p = pod(|_| {});
    assert_eq!(
        plan(&c, Some(&p), at(1)).requeue_after,
        Some(Duration::from_secs(2))
    );
    assert_eq!(
        plan(&c, Some(&p), at(3)).actions,
        [Action::Complete(DEADLINE_EXCEEDED)]
    );
}

#[test]
fn while_recreating_the_running_containers_started_since_the_request_are_synced() {
    let c = crr(|_| {});
    let p = pod(|_| {});
    let planned = plan(&c, Some(&p), at(6));
    assert_eq!(
        planned.actions,
        [Action::WriteSnapshot(vec![SyncContainerStatus {
            name: "app".into(),
            ready: true,
            restart_count: 1,
            container_id: "containerd://app-1".into(),
        }])]
    );
    assert_eq!(planned.requeue_after, Some(RECREATING_POLL));
    // Unchanged: no write.
    let synced = crr(|c| {
        c["status"]["containerStatusSnapshot"] = json!([{"name": "app", "ready": true, "restartCount": 1, "containerID": "containerd://app-1"}]);
    });
    assert_eq!(plan(&synced, Some(&p), at(6)).actions, []);
    // Between the old attempt's exit and the new one's start, the last snapshot is kept.
    let between = pod(|p| {
        p["status"]["containerStatuses"][0]["state"] = json!({"terminated": {"exitCode": 0}});
    });
    assert_eq!(plan(&synced, Some(&between), at(6)).actions, []);
    // K#1283: readiness is the container's own, whatever the pod's conditions say.
    let no_conditions = pod(|p| p["status"]["conditions"] = json!([]));
    assert_eq!(plan(&synced, Some(&no_conditions), at(6)).actions, []);
}

#[test]
fn unready_grace_takes_the_pod_not_ready_first() {
    let c = crr(|c| c["spec"]["strategy"] = json!({"unreadyGracePeriodSeconds": 10}));
    let synced = |c: &mut Value| {
        c["status"]["containerStatusSnapshot"] = json!([{"name": "app", "ready": true, "restartCount": 1, "containerID": "containerd://app-1"}]);
    };
    let c = {
        let mut v = serde_json::to_value(&c).unwrap();
        synced(&mut v);
        serde_json::from_value::<ContainerRecreateRequest>(v).unwrap()
    };
    let gated = pod(|_| {});
    assert_eq!(
        plan(&c, Some(&gated), at(1)).actions,
        [
            Action::AddFinalizer,
            Action::AcquirePodNotReady,
            Action::SetPreRecreateGrace
        ]
    );
    // Without the KruisePodReady gate only the condition is set (OpenKruise logs it).
    let ungated = pod(|p| p["spec"]["readinessGates"] = json!([]));
    assert_eq!(
        plan(&c, Some(&ungated), at(1)).actions,
        [Action::SetPreRecreateGrace]
    );
    // Once the condition is there, nothing more.
    let acquired = crr(|c| {
        c["spec"]["strategy"] = json!({"unreadyGracePeriodSeconds": 10});
        c["metadata"]["finalizers"] = json!(["crr.apps.kruise.io/unready-acquired"]);
        synced(c);
        c["status"]["conditions"] = json!([{"type": "PreRecreateGrace", "status": "True",
            "lastTransitionTime": at(1).to_string(), "reason": "PreRecreateGrace", "message": ""}]);
    });
    assert_eq!(plan(&acquired, Some(&gated), at(2)).actions, []);
}

#[test]
fn a_finished_request_releases_the_pod_loses_active_then_ttl_deletes_it() {
    let done = |c: &mut Value| {
        c["status"]["phase"] = json!("Completed");
        c["status"]["completionTime"] = json!(at(10).to_string());
        c["spec"]["ttlSecondsAfterFinished"] = json!(5);
    };
    let held = crr(|c| {
        done(c);
        c["metadata"]["finalizers"] = json!(["crr.apps.kruise.io/unready-acquired"]);
    });
    let p = pod(|_| {});
    assert_eq!(
        plan(&held, Some(&p), at(11)).actions,
        [
            Action::ReleasePodNotReady,
            Action::RemoveFinalizer,
            Action::RemoveActiveLabel
        ]
    );
    // The pod gone: only the finalizer.
    assert_eq!(
        plan(&held, None, at(11)).actions,
        [Action::RemoveFinalizer, Action::RemoveActiveLabel]
    );
    let inactive = crr(|c| {
        done(c);
        c["metadata"]["labels"]
            .as_object_mut()
            .unwrap()
            .remove("crr.apps.kruise.io/active");
    });
    let waiting = plan(&inactive, Some(&p), at(12));
    assert_eq!(waiting.actions, []);
    assert_eq!(waiting.requeue_after, Some(Duration::from_secs(3)));
    assert_eq!(plan(&inactive, Some(&p), at(15)).actions, [Action::Delete]);
    // Being deleted: release only.
    let deleting = crr(|c| {
        done(c);
        c["metadata"]["deletionTimestamp"] = json!(at(11).to_string());
        c["metadata"]["finalizers"] = json!(["crr.apps.kruise.io/unready-acquired"]);
    });
    assert_eq!(
        plan(&deleting, Some(&p), at(11)).actions,
        [Action::ReleasePodNotReady, Action::RemoveFinalizer]
    );
}

#[test]
fn the_readiness_message_names_the_request() {
    assert_eq!(
        readiness_message(&crr(|_| {})),
        NotReadyMessage {
            user_agent: "ContainerRecreateRequest".into(),
            key: "ns/crr".into()
        }
    );
}

mod invariants {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Whatever the request's state and the time: a finished request is never completed
        /// again; a completion is the only action; a deletion comes only past the TTL and
        /// without the active label; an unfinished request waiting on a deadline or an
        /// agent's answer is always looked at again.
        #[test]
        fn controller_plans_hold_their_invariants(
            phase in proptest::sample::select(vec!["", "Pending", "Recreating", "Completed"]),
            finished in any::<bool>(),
            active in any::<bool>(),
            deadline in proptest::option::of(3i64..120),
            ttl in proptest::option::of(0i32..120),
            unready in any::<bool>(),
            pod_alive in any::<bool>(),
            now in 0i64..200,
        ) {
            let c = crr(|c| {
                c["status"]["phase"] = json!(phase);
                if finished {
                    c["status"]["completionTime"] = json!(at(10).to_string());
                }
                if !active {
                    c["metadata"]["labels"].as_object_mut().unwrap().remove("crr.apps.kruise.io/active");
                }
                if let Some(d) = deadline {
                    c["spec"]["activeDeadlineSeconds"] = json!(d);
                }
                if let Some(t) = ttl {
                    c["spec"]["ttlSecondsAfterFinished"] = json!(t);
                }
                if unready {
                    c["spec"]["strategy"] = json!({"unreadyGracePeriodSeconds": 5});
                }
            });
            let p = pod(|_| {});
            let planned = plan(&c, pod_alive.then_some(&p), at(now));
            let completes = planned.actions.iter().any(|a| matches!(a, Action::Complete(_)));
            if finished {
                prop_assert!(!completes);
            }
            if completes {
                prop_assert_eq!(planned.actions.len(), 1);
            }
            if planned.actions.contains(&Action::Delete) {
                prop_assert!(finished && !active);
                prop_assert!(now - 10 >= i64::from(ttl.unwrap()));
            }
            if !finished && !completes && (phase.is_empty() || deadline.is_some()) {
                prop_assert!(planned.requeue_after.is_some());
            }
        }
    }
}
