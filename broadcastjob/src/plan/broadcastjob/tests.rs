use k8s_openapi::api::core::v1::{ContainerStatus, NodeSpec, NodeStatus, PodStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::api::defaults::default_broadcastjob;
use std::time::Duration;

const NOW: &str = "2026-11-25T12:00:00Z";

fn now() -> Timestamp {
    NOW.parse().unwrap()
}

fn job(spec: Value, status: Value) -> BroadcastJob {
    let mut spec = spec;
    if spec.get("template").is_none() {
        spec["template"] = json!({"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}});
    }
    let mut job: BroadcastJob = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "BroadcastJob",
        "metadata": {"name": "bcj", "namespace": "default", "uid": "job-uid"},
        "spec": spec, "status": status,
    }))
    .unwrap();
    default_broadcastjob(&mut job.spec);
    job
}

fn node(name: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("kubernetes.io/hostname".to_string(), name.to_string())].into()),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            allocatable: Some(
                [("cpu", "8"), ("memory", "32Gi"), ("pods", "110")]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.into())))
                    .collect(),
            ),
            ..Default::default()
        }),
    }
}

fn nodes(n: usize) -> Vec<Node> {
    (0..n).map(|i| node(&format!("node-{i}"))).collect()
}

fn tainted(mut node: Node, key: &str, effect: &str) -> Node {
    node.spec.get_or_insert_with(Default::default).taints = Some(vec![Taint {
        key: key.into(),
        value: Some("x".into()),
        effect: effect.into(),
        ..Default::default()
    }]);
    node
}

/// A pod of the job on `node` (bound by nodeName) in `phase`.
fn pod(j: &BroadcastJob, node: &str, phase: &str) -> Pod {
    let mut p = new_pod(j, node, PodBinding::Scheduler);
    p.metadata.name = Some(format!("bcj-{node}"));
    if let Some(spec) = p.spec.as_mut() {
        spec.node_name = Some(node.into());
    }
    p.status = Some(PodStatus {
        phase: Some(phase.into()),
        ..Default::default()
    });
    p
}

fn run(job: &BroadcastJob, pods: &[Pod], nodes: &[Node]) -> Plan {
    plan(&Input {
        job,
        pods,
        nodes,
        now: now(),
        binding: PodBinding::Scheduler,
    })
}

fn created_on(plan: &Plan) -> Vec<String> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreatePod { node, .. } => Some(node.clone()),
            _ => None,
        })
        .collect()
}

fn deleted(plan: &Plan) -> Vec<String> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::DeletePod { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

fn reasons(plan: &Plan) -> Vec<&str> {
    plan.events.iter().map(|e| e.reason.as_str()).collect()
}

fn counts(plan: &Plan) -> (i32, i32, i32, i32, &str) {
    let s = &plan.status;
    (s.desired, s.active, s.succeeded, s.failed, s.phase.as_str())
}

#[test]
fn a_new_job_creates_one_pod_per_node_and_starts() {
    let j = job(json!({}), json!({}));
    let p = run(&j, &[], &nodes(4));
    assert_eq!(created_on(&p), ["node-0", "node-1", "node-2", "node-3"]);
    assert_eq!(counts(&p), (4, 0, 0, 0, "running"));
    assert_eq!(p.status.start_time, Some(Time(now())));
    assert_eq!(p.requeue_after, None);
}

#[test]
fn new_pods_carry_the_labels_owner_and_node_affinity() {
    let j = job(
        json!({"template": {
        "metadata": {"labels": {"app": "x"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}],
                 "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                     "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "Exists"}]}]}}}}}}),
        json!({}),
    );
    let pod = new_pod(&j, "node-2", PodBinding::Scheduler);
    let v = serde_json::to_value(&pod).unwrap();
    assert_eq!(
        v["metadata"]["labels"],
        json!({"app": "x", "broadcastjob-name": "bcj", "broadcastjob-controller-uid": "job-uid"})
    );
    assert_eq!(v["metadata"]["generateName"], "bcj-");
    assert_eq!(v["metadata"]["ownerReferences"][0]["kind"], "BroadcastJob");
    assert_eq!(v["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(
        v["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"],
        json!([{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "Exists"}],
                "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-2"]}]}])
    );
    assert_eq!(v["spec"].get("nodeName"), None);
    assert_eq!(assigned_node(&pod).as_deref(), Some("node-2"));
}

#[test]
fn without_the_scheduler_new_pods_carry_the_node_name() {
    let j = job(json!({}), json!({}));
    let pod = new_pod(&j, "node-3", PodBinding::NodeName);
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some("node-3"));
    assert!(spec.affinity.is_none());
    assert_eq!(assigned_node(&pod).as_deref(), Some("node-3"));
    let p = plan(&Input {
        job: &j,
        pods: &[],
        nodes: &nodes(2),
        now: now(),
        binding: PodBinding::NodeName,
    });
    let named: Vec<_> = p
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::CreatePod { node, pod } => Some((
                node.clone(),
                pod.spec.as_ref().unwrap().node_name.clone().unwrap(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        named,
        [
            ("node-0".to_string(), "node-0".to_string()),
            ("node-1".to_string(), "node-1".to_string())
        ]
    );
}

#[test]
fn parallelism_limits_the_pods_running_at_once() {
    let j = job(json!({"parallelism": 1}), json!({"phase": "running"}));
    let ns = nodes(4);
    assert_eq!(created_on(&run(&j, &[], &ns)), ["node-0"]);
    let running = pod(&j, "node-0", "Running");
    assert_eq!(created_on(&run(&j, &[running], &ns)), Vec::<String>::new());
    let done = pod(&j, "node-0", "Succeeded");
    let p = run(&j, &[done], &ns);
    assert_eq!(created_on(&p), ["node-1"]);
    assert_eq!(counts(&p), (4, 0, 1, 0, "running"));

    let half = job(json!({"parallelism": "50%"}), json!({}));
    assert_eq!(
        created_on(&run(&half, &[], &nodes(3))).len(),
        2,
        "50% of 3 rounds up"
    );
    let zero = job(json!({"parallelism": 0}), json!({}));
    assert!(created_on(&run(&zero, &[], &ns)).is_empty());
}

#[test]
fn too_many_active_pods_is_a_warning_not_a_deletion() {
    let j = job(json!({"parallelism": 1}), json!({"phase": "running"}));
    let pods = [pod(&j, "node-0", "Running"), pod(&j, "node-1", "Running")];
    let p = run(&j, &pods, &nodes(3));
    assert_eq!(reasons(&p), ["TooManyActivePods"]);
    assert!(p.actions.is_empty());
}

#[test]
fn every_desired_node_finished_completes_the_job() {
    let j = job(
        json!({"completionPolicy": {"ttlSecondsAfterFinished": 30}}),
        json!({"phase": "running"}),
    );
    let pods = [
        pod(&j, "node-0", "Succeeded"),
        pod(&j, "node-1", "Succeeded"),
        pod(&j, "node-2", "Failed"),
    ];
    let j = job(
        json!({"completionPolicy": {"ttlSecondsAfterFinished": 30}, "failurePolicy": {"type": "Continue"}}),
        json!({"phase": "running"}),
    );
    let p = run(&j, &pods, &nodes(3));
    assert_eq!(counts(&p), (3, 0, 2, 1, "completed"));
    assert_eq!(p.status.conditions.len(), 1);
    assert_eq!(p.status.conditions[0].type_, "Complete");
    assert_eq!(
        p.status.conditions[0].message,
        "Job completed, 2 pods succeeded, 1 pods failed"
    );
    assert_eq!(p.status.completion_time, Some(Time(now())));
    assert_eq!(reasons(&p), ["JobComplete"]);
    assert_eq!(
        p.events[0].message,
        "Job default/bcj is completed, 2 pods succeeded, 1 pods failed"
    );
    assert_eq!(p.requeue_after, Some(Duration::from_secs(30)));
    assert!(p.actions.is_empty());
}

#[test]
fn no_desired_node_never_completes() {
    let j = job(json!({}), json!({}));
    let p = run(&j, &[], &[]);
    assert_eq!(counts(&p), (0, 0, 0, 0, "running"));
    assert!(p.status.conditions.is_empty());
}

#[test]
fn a_job_whose_pods_all_finished_completes_even_past_its_deadline() {
    // K#580, K#1704: completion is decided before the deadline.
    let started = "2026-11-25T11:00:00Z";
    let j = job(
        json!({"completionPolicy": {"activeDeadlineSeconds": 60}}),
        json!({"phase": "running", "startTime": started}),
    );
    let pods = [
        pod(&j, "node-0", "Succeeded"),
        pod(&j, "node-1", "Succeeded"),
    ];
    let p = run(&j, &pods, &nodes(2));
    assert_eq!(p.status.phase, "completed");
    assert_eq!(p.status.conditions[0].type_, "Complete");
}

#[test]
fn the_deadline_fails_a_running_job_and_deletes_its_active_pods() {
    let j = job(
        json!({"completionPolicy": {"activeDeadlineSeconds": 60}}),
        json!({"phase": "running", "startTime": "2026-11-25T11:58:00Z"}),
    );
    let pods = [pod(&j, "node-0", "Succeeded"), pod(&j, "node-1", "Running")];
    let p = run(&j, &pods, &nodes(3));
    assert_eq!(deleted(&p), ["bcj-node-1"]);
    assert!(created_on(&p).is_empty());
    assert_eq!(counts(&p), (3, 0, 1, 0, "failed"));
    assert_eq!(p.status.conditions[0].type_, "Failed");
    assert_eq!(p.status.conditions[0].reason, "DeadlineExceeded");
    assert_eq!(reasons(&p), ["DeadlineExceeded"]);
    assert_eq!(
        p.events[0].message,
        "Job default/bcj was active longer than specified deadline: 1 pods succeeded, 0 pods failed"
    );

    // Before the deadline: requeued for it.
    let j = job(
        json!({"completionPolicy": {"activeDeadlineSeconds": 600}}),
        json!({"phase": "running", "startTime": "2026-11-25T11:58:00Z"}),
    );
    let p = run(&j, &pods, &nodes(3));
    assert_eq!(p.status.phase, "running");
    assert_eq!(p.requeue_after, Some(Duration::from_secs(480)));
}

#[test]
fn a_first_reconcile_with_a_deadline_requeues_for_it() {
    let j = job(
        json!({"completionPolicy": {"activeDeadlineSeconds": 90}}),
        json!({}),
    );
    let p = run(&j, &[], &nodes(1));
    assert_eq!(p.requeue_after, Some(Duration::from_secs(90)));
}

#[test]
fn fail_fast_fails_the_job_on_a_failed_pod() {
    let j = job(json!({}), json!({"phase": "running"}));
    let pods = [pod(&j, "node-0", "Failed"), pod(&j, "node-1", "Running")];
    let p = run(&j, &pods, &nodes(4));
    assert_eq!(deleted(&p), ["bcj-node-1"]);
    assert!(created_on(&p).is_empty());
    assert_eq!(p.status.phase, "failed");
    assert_eq!(p.status.conditions[0].reason, "failed pod is found");
    assert_eq!(
        p.status.conditions[0].message,
        "failure policy is FailurePolicyTypeFailFast and failed pod is found"
    );
    assert_eq!(reasons(&p), ["failed pod is found"]);
}

#[test]
fn fail_fast_fails_a_job_whose_pods_all_finished_with_a_failure() {
    // Every node finished, one failed: FailFast decides before completion.
    let j = job(json!({}), json!({"phase": "running"}));
    let pods = [pod(&j, "node-0", "Failed"), pod(&j, "node-1", "Succeeded")];
    let p = run(&j, &pods, &nodes(2));
    assert_eq!(p.status.phase, "failed");
    assert_eq!(p.status.conditions.len(), 1);
    assert_eq!(p.status.conditions[0].type_, "Failed");
    assert!(p.actions.is_empty());
}

#[test]
fn continue_ignores_failed_pods() {
    let j = job(
        json!({"failurePolicy": {"type": "Continue"}}),
        json!({"phase": "running"}),
    );
    let p = run(&j, &[pod(&j, "node-0", "Failed")], &nodes(2));
    assert_eq!(created_on(&p), ["node-1"]);
    assert_eq!(counts(&p), (2, 0, 0, 1, "running"));
}

#[test]
fn pause_policy_pauses_once_on_a_failed_pod() {
    let j = job(
        json!({"failurePolicy": {"type": "Pause"}}),
        json!({"phase": "running"}),
    );
    let pods = [pod(&j, "node-0", "Failed")];
    let p = run(&j, &pods, &nodes(2));
    assert!(p.actions.is_empty());
    assert_eq!(p.status.phase, "paused");
    assert_eq!(reasons(&p), ["Paused"]);
    let j = job(
        json!({"failurePolicy": {"type": "Pause"}}),
        json!({"phase": "paused"}),
    );
    let p = run(&j, &pods, &nodes(2));
    assert!(p.actions.is_empty());
    assert_eq!(p.status.phase, "paused");
    assert!(p.events.is_empty());
}

#[test]
fn paused_creates_nothing_and_resuming_continues() {
    let j = job(json!({"paused": true}), json!({"phase": "running"}));
    let p = run(&j, &[], &nodes(2));
    assert!(p.actions.is_empty());
    assert_eq!(p.status.phase, "paused");
    let j = job(json!({}), json!({"phase": "paused"}));
    let p = run(&j, &[], &nodes(2));
    assert_eq!(created_on(&p).len(), 2);
    assert_eq!(p.status.phase, "running");
    assert_eq!(reasons(&p), ["Continue"]);
}

#[test]
fn a_pod_bound_by_affinity_without_node_name_counts_for_its_node() {
    // K#584: the scheduler has not bound it yet; no second pod for node-1.
    let j = job(json!({}), json!({"phase": "running"}));
    let mut pending = new_pod(&j, "node-1", PodBinding::Scheduler);
    pending.metadata.name = Some("bcj-pending".into());
    let p = run(&j, &[pending], &nodes(3));
    assert_eq!(created_on(&p), ["node-0", "node-2"]);
    assert_eq!(counts(&p), (3, 1, 0, 0, "running"));
}

#[test]
fn nodes_the_pod_does_not_fit_are_not_desired() {
    let j = job(json!({}), json!({}));
    let mut cordoned = node("cordoned");
    cordoned.spec.as_mut().unwrap().unschedulable = Some(true);
    let mut small = node("small");
    small
        .status
        .as_mut()
        .unwrap()
        .allocatable
        .as_mut()
        .unwrap()
        .insert("cpu".into(), Quantity("100m".into()));
    let big = job(
        json!({"template": {"spec": {"restartPolicy": "Never",
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "500m"}}}]}}}),
        json!({}),
    );
    let ns = vec![
        node("plain"),
        tainted(node("no-schedule"), "dedicated", "NoSchedule"),
        tainted(node("no-execute"), "dedicated", "NoExecute"),
        tainted(node("prefer"), "dedicated", "PreferNoSchedule"),
        cordoned,
        small,
    ];
    assert_eq!(created_on(&run(&j, &[], &ns)), ["plain", "prefer", "small"]);
    assert_eq!(created_on(&run(&big, &[], &ns)), ["plain", "prefer"]);

    let tolerant = job(
        json!({"template": {"spec": {"restartPolicy": "Never",
        "containers": [{"name": "c", "image": "busybox"}],
        "tolerations": [{"key": "dedicated", "operator": "Exists"},
                        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]}}}),
        json!({}),
    );
    assert_eq!(run(&tolerant, &[], &ns).status.desired, 6);

    let selective = job(
        json!({"template": {"spec": {"restartPolicy": "Never",
        "containers": [{"name": "c", "image": "busybox"}],
        "nodeSelector": {"kubernetes.io/hostname": "plain"}}}}),
        json!({}),
    );
    assert_eq!(created_on(&run(&selective, &[], &ns)), ["plain"]);
    let named = job(
        json!({"template": {"spec": {"restartPolicy": "Never", "nodeName": "small",
        "containers": [{"name": "c", "image": "busybox"}]}}}),
        json!({}),
    );
    assert_eq!(
        created_on(&run(&named, &[], &ns)),
        ["plain", "prefer", "small"],
        "the template's nodeName is replaced by the job's binding"
    );
}

#[test]
fn e2e_a_tainted_node_with_a_tolerating_job_and_parallelism_below_the_nodes() {
    // OpenKruise's e2e: a fake tainted node, a job tolerating it with parallelism nodes-1.
    let template = json!({"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}],
        "tolerations": [{"key": "fake", "operator": "Equal", "value": "x", "effect": "NoSchedule"}]}});
    let j = job(json!({"template": template, "parallelism": 3}), json!({}));
    let mut ns = nodes(3);
    ns.push(tainted(node("fake-node"), "fake", "NoSchedule"));
    let p = run(&j, &[], &ns);
    assert_eq!(p.status.desired, 4);
    assert_eq!(created_on(&p), ["node-0", "node-1", "node-2"]);
    let j = job(
        json!({"template": j.spec.template.clone(), "parallelism": 3}),
        json!({"phase": "running"}),
    );
    let pods: Vec<Pod> = ["fake-node", "node-0", "node-1", "node-2"]
        .iter()
        .map(|n| pod(&j, n, "Succeeded"))
        .collect();
    let p = run(&j, &pods, &ns);
    assert_eq!(counts(&p), (4, 0, 4, 0, "completed"));
}

#[test]
fn removing_a_taint_creates_the_pod_on_that_node() {
    // K#1199.
    let j = job(json!({}), json!({"phase": "running"}));
    let pods = [pod(&j, "node-0", "Running")];
    let before = vec![
        node("node-0"),
        tainted(node("node-1"), "maintenance", "NoSchedule"),
    ];
    assert!(created_on(&run(&j, &pods, &before)).is_empty());
    let after = vec![node("node-0"), node("node-1")];
    assert_eq!(created_on(&run(&j, &pods, &after)), ["node-1"]);
}

#[test]
fn a_running_pod_that_no_longer_fits_is_deleted_a_finished_one_kept() {
    let j = job(json!({}), json!({"phase": "running"}));
    let pods = [pod(&j, "node-0", "Running"), pod(&j, "node-1", "Succeeded")];
    let ns = vec![
        tainted(node("node-0"), "evict", "NoExecute"),
        tainted(node("node-1"), "evict", "NoExecute"),
    ];
    let p = run(&j, &pods, &ns);
    assert_eq!(deleted(&p), ["bcj-node-0"]);
    assert_eq!(counts(&p), (1, 0, 1, 0, "completed"));
}

#[test]
fn a_finished_job_waits_for_its_ttl_then_is_deleted() {
    let status = json!({"phase": "completed", "completionTime": "2026-11-25T11:59:50Z",
        "conditions": [{"type": "Complete", "status": "True"}]});
    let j = job(
        json!({"completionPolicy": {"ttlSecondsAfterFinished": 30}}),
        status.clone(),
    );
    let p = run(&j, &[], &nodes(2));
    assert!(p.actions.is_empty(), "a finished job creates nothing");
    assert_eq!(p.requeue_after, Some(Duration::from_secs(20)));
    let j = job(
        json!({"completionPolicy": {"ttlSecondsAfterFinished": 10}}),
        status.clone(),
    );
    assert_eq!(run(&j, &[], &nodes(2)).actions, [Action::DeleteJob]);
    let j = job(json!({}), status);
    let p = run(&j, &[], &nodes(2));
    assert!(p.actions.is_empty());
    assert_eq!(p.requeue_after, None);
}

#[test]
fn a_never_job_runs_on_nodes_that_join_later_and_never_completes() {
    let j = job(
        json!({"completionPolicy": {"type": "Never"}}),
        json!({"phase": "running"}),
    );
    let pods = [
        pod(&j, "node-0", "Succeeded"),
        pod(&j, "node-1", "Succeeded"),
    ];
    let p = run(&j, &pods, &nodes(2));
    assert!(p.actions.is_empty());
    assert_eq!(p.status.phase, "running");
    assert!(p.status.conditions.is_empty());
    let p = run(&j, &pods, &nodes(3));
    assert_eq!(created_on(&p), ["node-2"]);
}

#[test]
fn on_failure_pods_over_the_restart_limit_count_as_failed() {
    let template = json!({"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}});
    let j = job(
        json!({"template": template, "failurePolicy": {"type": "Continue", "restartLimit": 2}}),
        json!({"phase": "running"}),
    );
    let restarted = |n: i32| {
        let mut p = pod(&j, "node-0", "Running");
        p.status.as_mut().unwrap().container_statuses = Some(vec![ContainerStatus {
            name: "c".into(),
            restart_count: n,
            ..Default::default()
        }]);
        p
    };
    assert_eq!(run(&j, &[restarted(2)], &nodes(1)).status.active, 1);
    assert_eq!(run(&j, &[restarted(3)], &nodes(1)).status.failed, 1);
}

#[test]
fn two_pods_on_one_node_are_reported() {
    let j = job(json!({}), json!({"phase": "running"}));
    let mut second = pod(&j, "node-0", "Running");
    second.metadata.name = Some("bcj-dup".into());
    let p = run(&j, &[pod(&j, "node-0", "Running"), second], &nodes(1));
    assert_eq!(reasons(&p), ["DuplicatePodCreatedOnSameNode"]);
    assert_eq!(
        p.events[0].message,
        "Duplicated pod bcj-dup found on same node node-0"
    );
}

#[test]
fn a_failed_job_only_reports() {
    let j = job(
        json!({"failurePolicy": {"type": "Continue"}}),
        json!({"phase": "failed"}),
    );
    let p = run(&j, &[pod(&j, "node-0", "Running")], &nodes(3));
    assert!(p.actions.is_empty());
    assert_eq!(counts(&p), (3, 1, 0, 0, "failed"));
}

#[test]
fn a_terminating_pod_is_not_active_and_no_new_pod_is_made_for_its_node() {
    let j = job(json!({}), json!({"phase": "running"}));
    let mut going = pod(&j, "node-0", "Running");
    going.metadata.deletion_timestamp = Some(Time(now()));
    let p = run(&j, &[going], &nodes(2));
    assert_eq!(created_on(&p), ["node-1"]);
    assert_eq!(p.status.active, 0);
}

// Property tests.

fn arbitrary_node(i: usize) -> impl Strategy<Value = Node> {
    (any::<bool>(), any::<bool>()).prop_map(move |(taint, cordon)| {
        let mut n = node(&format!("node-{i}"));
        if taint {
            n = tainted(n, "dedicated", "NoSchedule");
        }
        n.spec.as_mut().unwrap().unschedulable = Some(cordon);
        n
    })
}

#[derive(Debug, Clone)]
struct Scenario {
    nodes: Vec<Node>,
    /// Per node: no pod, or a pod in a phase.
    pods: Vec<Option<&'static str>>,
    parallelism: Value,
    tolerate: bool,
    never: bool,
    finished: bool,
    policy: &'static str,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (1usize..12).prop_flat_map(|n| {
        (
            (0..n).map(arbitrary_node).collect::<Vec<_>>(),
            proptest::collection::vec(
                proptest::option::of(proptest::sample::select(vec![
                    "Pending",
                    "Running",
                    "Succeeded",
                    "Failed",
                ])),
                n,
            ),
            prop_oneof![
                (0i64..6).prop_map(Value::from),
                (0u32..=100).prop_map(|p| Value::from(format!("{p}%")))
            ],
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            proptest::sample::select(vec!["FailFast", "Continue", "Pause"]),
        )
            .prop_map(
                |(nodes, pods, parallelism, tolerate, never, finished, policy)| Scenario {
                    nodes,
                    pods,
                    parallelism,
                    tolerate,
                    never,
                    finished,
                    policy,
                },
            )
    })
}

proptest! {
    #[test]
    fn planner_invariants(s in scenario()) {
        let mut template = json!({"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}});
        if s.tolerate {
            template["spec"]["tolerations"] = json!([{"operator": "Exists"}]);
        }
        let status = if s.finished {
            json!({"phase": "completed", "conditions": [{"type": "Complete", "status": "True"}]})
        } else {
            json!({"phase": "running"})
        };
        let completion = if s.never { "Never" } else { "Always" };
        let j = job(json!({"template": template, "parallelism": s.parallelism.clone(),
            "completionPolicy": {"type": completion}, "failurePolicy": {"type": s.policy}}), status);
        let pods: Vec<Pod> = s.pods.iter().enumerate()
            .filter_map(|(i, phase)| phase.map(|ph| pod(&j, &format!("node-{i}"), ph)))
            .collect();
        let p = run(&j, &pods, &s.nodes);
        let created = created_on(&p);

        // Never two pods on one node.
        let mut seen = std::collections::BTreeSet::new();
        for n in &created {
            prop_assert!(seen.insert(n.clone()), "two creates on {n}");
            prop_assert!(!pods.iter().any(|pod| assigned_node(pod).as_deref() == Some(n)), "a create on {n}, which has a pod");
        }
        // Never more active pods than parallelism.
        let active_before = pods.iter().filter(|pod| pod_state(pod, 0) == PodState::Active).count();
        let desired = usize::try_from(p.status.desired).unwrap();
        let parallelism = match &s.parallelism {
            Value::Number(n) => usize::try_from(n.as_i64().unwrap()).unwrap(),
            Value::String(pct) => {
                let pct: usize = pct.trim_end_matches('%').parse().unwrap();
                (pct * desired).div_ceil(100)
            }
            _ => unreachable!(),
        };
        if !created.is_empty() {
            prop_assert!(active_before + created.len() <= parallelism,
                "{active_before} active + {} created > parallelism {parallelism}", created.len());
        }
        // A completed (or failed) job never creates pods.
        if (s.finished && !s.never) || p.status.phase == "completed" || p.status.phase == "failed" {
            prop_assert!(created.is_empty());
        }
        // Desired never exceeds the nodes.
        prop_assert!(desired <= s.nodes.len());
    }
}
