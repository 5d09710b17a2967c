use std::collections::{BTreeMap, BTreeSet};

use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::plan::budget::{BudgetInput, PodState, plan};

fn now() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

fn pod(name: &str, ready: bool, labels: Value, annotations: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "labels": labels, "annotations": annotations},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
    }))
    .unwrap()
}

fn ready_pod(name: &str) -> Pod {
    pod(name, true, json!({"app": "web"}), json!({}))
}

fn budget(spec_extra: Value, annotations: Value, status: Value) -> PodUnavailableBudget {
    let mut spec = json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), spec_extra.as_object()) {
        spec.extend(extra.clone());
    }
    serde_json::from_value(json!({
        "apiVersion": "policy.kruise.io/v1beta1",
        "kind": "PodUnavailableBudget",
        "metadata": {"name": "web", "namespace": "default", "annotations": annotations},
        "spec": spec,
        "status": status,
    }))
    .unwrap()
}

fn healthy_status() -> Value {
    json!({"unavailableAllowed": 1, "currentAvailable": 4, "desiredAvailable": 3, "totalReplicas": 4})
}

const ALL_GATES: Gates = Gates {
    delete: true,
    update: true,
    in_place_vertical_scaling: false,
};

fn run(
    budget: Option<&PodUnavailableBudget>,
    pod: &Pod,
    op: PubOperation,
    dry_run: bool,
    gates: Gates,
) -> Decision {
    decide(
        budget,
        &Request {
            pod,
            operation: &op,
            dry_run,
            now: now(),
        },
        gates,
    )
}

fn consumed(budget: &PodUnavailableBudget, pod: &str, update: bool) -> Decision {
    let mut status = budget.status.clone().unwrap();
    status.unavailable_allowed -= 1;
    let records = if update {
        &mut status.unavailable_pods
    } else {
        &mut status.disrupted_pods
    };
    records.insert(pod.into(), Time(now()));
    Decision::Consume(status)
}

#[test]
fn each_protected_operation_consumes_one_disruption() {
    let b = budget(json!({}), json!({}), healthy_status());
    let p = ready_pod("web-0");
    assert_eq!(
        run(Some(&b), &p, PubOperation::Delete, false, ALL_GATES),
        consumed(&b, "web-0", false)
    );
    assert_eq!(
        run(Some(&b), &p, PubOperation::Evict, false, ALL_GATES),
        consumed(&b, "web-0", false)
    );
    assert_eq!(
        run(Some(&b), &p, PubOperation::Update, false, ALL_GATES),
        consumed(&b, "web-0", true)
    );
    // RESIZE rides on UPDATE while InPlacePodVerticalScaling is off, and is recorded as a
    // disruption (OpenKruise records every non-UPDATE operation there).
    assert_eq!(
        run(Some(&b), &p, PubOperation::Resize, false, ALL_GATES),
        consumed(&b, "web-0", false)
    );
}

/// What, the budget, the pod, the operation, the gates, and the decision wanted.
type Case = (
    &'static str,
    Option<PodUnavailableBudget>,
    Pod,
    PubOperation,
    Gates,
    Decision,
);

#[test]
fn exemptions_in_openkruise_order() {
    let b = budget(json!({}), json!({}), healthy_status());
    let p = ready_pod("web-0");
    let gates_off = Gates {
        delete: false,
        update: false,
        in_place_vertical_scaling: false,
    };
    let only_delete = Gates {
        delete: true,
        update: false,
        in_place_vertical_scaling: false,
    };
    let vps = Gates {
        in_place_vertical_scaling: true,
        ..ALL_GATES
    };
    let no_protect = |v: &str| {
        pod(
            "web-0",
            true,
            json!({"app": "web"}),
            json!({"pub.kruise.io/no-protect": v}),
        )
    };
    let cases: Vec<Case> = vec![
        (
            "delete gate off",
            Some(b.clone()),
            p.clone(),
            PubOperation::Delete,
            gates_off,
            Decision::Allow(Exempt::GateOff),
        ),
        (
            "evict gate off",
            Some(b.clone()),
            p.clone(),
            PubOperation::Evict,
            gates_off,
            Decision::Allow(Exempt::GateOff),
        ),
        (
            "update gate off (default)",
            Some(b.clone()),
            p.clone(),
            PubOperation::Update,
            only_delete,
            Decision::Allow(Exempt::GateOff),
        ),
        (
            "resize gate off",
            Some(b.clone()),
            p.clone(),
            PubOperation::Resize,
            only_delete,
            Decision::Allow(Exempt::GateOff),
        ),
        (
            "no-protect true",
            Some(b.clone()),
            no_protect("true"),
            PubOperation::Delete,
            ALL_GATES,
            Decision::Allow(Exempt::NoProtectAnnotation),
        ),
        (
            "no-protect 1",
            Some(b.clone()),
            no_protect("1"),
            PubOperation::Evict,
            ALL_GATES,
            Decision::Allow(Exempt::NoProtectAnnotation),
        ),
        (
            "no-protect false protects",
            Some(b.clone()),
            no_protect("false"),
            PubOperation::Delete,
            ALL_GATES,
            consumed(&b, "web-0", false),
        ),
        (
            "no-protect yes is not a bool",
            Some(b.clone()),
            no_protect("yes"),
            PubOperation::Delete,
            ALL_GATES,
            consumed(&b, "web-0", false),
        ),
        (
            "pod not ready",
            Some(b.clone()),
            pod("web-0", false, json!({"app": "web"}), json!({})),
            PubOperation::Delete,
            ALL_GATES,
            Decision::Allow(Exempt::PodUnavailable),
        ),
        (
            // OpenKruise's IsRunningAndReady: a terminating pod is not ready, so a second
            // eviction or deletion of it spends nothing (found by the pub_load benchmark).
            "pod terminating",
            Some(b.clone()),
            {
                let mut terminating = p.clone();
                terminating.metadata.deletion_timestamp = Some(Time(now()));
                terminating
            },
            PubOperation::Evict,
            ALL_GATES,
            Decision::Allow(Exempt::PodUnavailable),
        ),
        (
            "unavailable label",
            Some(b.clone()),
            pod(
                "web-0",
                true,
                json!({"app": "web", "unavailable-pod.kruise.io/x": "1"}),
                json!({}),
            ),
            PubOperation::Delete,
            ALL_GATES,
            Decision::Allow(Exempt::PodUnavailable),
        ),
        (
            "no budget",
            None,
            p.clone(),
            PubOperation::Delete,
            ALL_GATES,
            Decision::Allow(Exempt::NoBudget),
        ),
        (
            "ignored pod",
            Some(budget(
                json!({"ignoredPodSelector": {"matchLabels": {"drain": "ok"}}}),
                json!({}),
                healthy_status(),
            )),
            pod(
                "web-0",
                true,
                json!({"app": "web", "drain": "ok"}),
                json!({}),
            ),
            PubOperation::Evict,
            ALL_GATES,
            Decision::Allow(Exempt::IgnoredPod),
        ),
        (
            "nothing desired",
            Some(budget(
                json!({}),
                json!({}),
                json!({"unavailableAllowed": 0, "desiredAvailable": 0}),
            )),
            p.clone(),
            PubOperation::Delete,
            ALL_GATES,
            Decision::Allow(Exempt::NothingDesired),
        ),
        (
            "operation not protected (spec)",
            Some(budget(
                json!({"protectOperations": ["EVICT"]}),
                json!({}),
                healthy_status(),
            )),
            p.clone(),
            PubOperation::Delete,
            ALL_GATES,
            Decision::Allow(Exempt::OperationNotProtected),
        ),
        (
            "operation not protected (v1alpha1 annotation)",
            Some(budget(
                json!({}),
                json!({"kruise.io/pub-protect-operations": "EVICT"}),
                healthy_status(),
            )),
            p.clone(),
            PubOperation::Update,
            ALL_GATES,
            Decision::Allow(Exempt::OperationNotProtected),
        ),
        (
            "resize apart from update with vertical scaling",
            Some(b.clone()),
            p.clone(),
            PubOperation::Resize,
            vps,
            Decision::Allow(Exempt::OperationNotProtected),
        ),
        (
            "already disrupted",
            Some(budget(
                json!({}),
                json!({}),
                json!({"unavailableAllowed": 0, "desiredAvailable": 3, "disruptedPods": {"web-0": "2026-01-01T00:00:00Z"}}),
            )),
            p.clone(),
            PubOperation::Delete,
            ALL_GATES,
            Decision::Allow(Exempt::AlreadyRecorded),
        ),
        (
            "already unavailable",
            Some(budget(
                json!({}),
                json!({}),
                json!({"unavailableAllowed": 0, "desiredAvailable": 3, "unavailablePods": {"web-0": "2026-01-01T00:00:00Z"}}),
            )),
            p.clone(),
            PubOperation::Evict,
            ALL_GATES,
            Decision::Allow(Exempt::AlreadyRecorded),
        ),
    ];
    for (what, b, pod, op, gates, want) in cases {
        assert_eq!(run(b.as_ref(), &pod, op, false, gates), want, "{what}");
    }
}

#[test]
fn an_exhausted_budget_refuses_with_openkruise_message() {
    let b = budget(
        json!({}),
        json!({}),
        json!({"unavailableAllowed": 0, "currentAvailable": 3, "desiredAvailable": 3, "totalReplicas": 4}),
    );
    for op in [
        PubOperation::Delete,
        PubOperation::Evict,
        PubOperation::Update,
    ] {
        for dry_run in [false, true] {
            assert_eq!(
                run(Some(&b), &ready_pod("web-1"), op.clone(), dry_run, ALL_GATES),
                Decision::Deny(r#"podunavailablebudget.policy.kruise.io "web" is forbidden: pub unavailable allowed is negative"#.into())
            );
        }
    }
    let records: BTreeMap<String, Value> = (0..=MAX_RECORDS)
        .map(|i| (format!("p-{i}"), json!("2026-01-01T00:00:00Z")))
        .collect();
    let crowded = budget(
        json!({}),
        json!({}),
        json!({"unavailableAllowed": 5, "desiredAvailable": 3, "disruptedPods": records}),
    );
    assert_eq!(
        run(Some(&crowded), &ready_pod("web-1"), PubOperation::Delete, false, ALL_GATES),
        Decision::Deny(r#"podunavailablebudget.policy.kruise.io "web" is forbidden: DisruptedPods and UnavailablePods map too big - too many unavailable not confirmed by PUB controller"#.into())
    );
    assert_eq!(
        conflicts_message("web"),
        "Timeout: couldn't update PodUnavailableBudget web due to conflicts"
    );
}

#[test]
fn a_dry_run_is_answered_without_spending_the_budget() {
    let b = budget(json!({}), json!({}), healthy_status());
    assert_eq!(
        run(
            Some(&b),
            &ready_pod("web-0"),
            PubOperation::Evict,
            true,
            ALL_GATES
        ),
        Decision::Allow(Exempt::DryRun)
    );
}

/// One webhook replica's request in flight: it decided on the budget at `read_version` and
/// wants to write `status`.
#[derive(Clone, Debug)]
struct InFlight {
    pod: usize,
    operation: PubOperation,
    /// The versions before the one decided on that the replica's watch may show.
    older: Vec<u64>,
    read_version: u64,
    status: PodUnavailableBudgetStatus,
    attempts: usize,
}

#[derive(Clone, Debug)]
enum Step {
    /// A replica receives an operation on a pod and decides on the budget as its watch
    /// holds it (or as it last wrote it, while the watch has not caught up).
    Begin {
        replica: usize,
        pod: usize,
        operation: PubOperation,
    },
    /// A replica's conditioned status write reaches the API server.
    Commit { replica: usize },
    /// A replica's watches deliver what changed since they last did: the budget either all
    /// at once or only its next version (a watch delivers writes one by one).
    Sync { replica: usize, all: bool },
    /// A pod's readiness flips on its own (not for pods already disrupted).
    Churn { pod: usize },
    /// The PUB controller recomputes the status from the pods.
    Reconcile,
}

fn step() -> impl Strategy<Value = Step> {
    let op = proptest::sample::select(vec![
        PubOperation::Delete,
        PubOperation::Evict,
        PubOperation::Update,
    ]);
    prop_oneof![
        4 => (0usize..2, 0usize..8, op).prop_map(|(replica, pod, operation)| Step::Begin { replica, pod, operation }),
        4 => (0usize..2).prop_map(|replica| Step::Commit { replica }),
        2 => (0usize..2, any::<bool>()).prop_map(|(replica, all)| Step::Sync { replica, all }),
        1 => (0usize..8).prop_map(|pod| Step::Churn { pod }),
        1 => Just(Step::Reconcile),
    ]
}

/// The budget store: the status and a resourceVersion bumped on every write.
#[derive(Clone)]
struct Store {
    budget: PodUnavailableBudget,
    version: u64,
}

/// What one webhook replica's watches hold, and the grant it last wrote (the versions
/// before it its watch may still show, and the budget written), as
/// `kruise_runtime::pub_client::BudgetCache`.
#[derive(Clone)]
struct Replica {
    budget: Store,
    ready: [bool; 8],
    written: Option<(Vec<u64>, Store)>,
}

impl Replica {
    /// The budget a decision starts from, and the versions before it the watch may show:
    /// the replica's own last grant while the watch shows a version before it, else the
    /// watch's copy.
    fn budget(&self) -> (&Store, Vec<u64>) {
        match &self.written {
            Some((older, written)) if older.contains(&self.budget.version) => {
                (written, older.clone())
            }
            _ => (&self.budget, vec![self.budget.version]),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Any interleaving of deletes, evictions and updates across two webhook replicas, each
    /// deciding first from watches that lag the API (the budget, and for an eviction the
    /// pod), with pod readiness churn and controller recomputes, never disrupts more pods
    /// than the budget allows: each grant is a status write conditioned on the version its
    /// decision read, and an eviction the cached pod would exempt is decided again on the
    /// pod as it is. An operation let through on a pod that is in fact available counts as a
    /// disruption too.
    #[test]
    fn concurrent_replicas_never_exceed_the_budget(
        max_unavailable in 0i32..4,
        steps in proptest::collection::vec(step(), 1..80),
    ) {
        const PODS: usize = 8;
        let spec = json!({"maxUnavailable": max_unavailable});
        let mut ready = [true; PODS];
        let mut disrupted: BTreeSet<usize> = BTreeSet::new();
        let pods_now = |ready: &[bool; PODS]| -> Vec<PodState> {
            (0..PODS).map(|i| PodState { name: format!("web-{i}"), active: true, available: ready[i] }).collect()
        };
        let recompute = |b: &PodUnavailableBudget, ready: &[bool; PODS]| {
            let pods = pods_now(ready);
            let status = b.status.clone().unwrap_or_default();
            plan(&BudgetInput { spec: &b.spec, generation: 1, status: &status, pods: &pods, expected: 8, now: now() })
                .unwrap()
                .status
        };
        let mut store = Store { budget: budget(spec, json!({}), json!({})), version: 1 };
        store.budget.status = Some(recompute(&store.budget, &ready));
        // Every version of the budget, in order: version v is history[v - 1].
        let mut history = vec![store.clone()];
        let synced = Replica { budget: store.clone(), ready, written: None };
        let mut replicas = [synced.clone(), synced];
        let mut in_flight: [Option<InFlight>; 2] = [None, None];

        for step in steps {
            match step {
                Step::Begin { replica, pod, operation } => {
                    if in_flight[replica].is_some() {
                        continue;
                    }
                    let cache = &replicas[replica];
                    let (from, mut older) = cache.budget();
                    let from = from.clone();
                    if !older.contains(&cache.budget.version) {
                        older.push(cache.budget.version);
                    }
                    // A DELETE or UPDATE carries the pod; an eviction takes the watch's.
                    let seen_ready = if operation == PubOperation::Evict { cache.ready[pod] } else { ready[pod] };
                    let mut decision = run(Some(&from.budget), &pod_in(pod, seen_ready), operation.clone(), false, ALL_GATES);
                    if let Decision::Allow(exempt) = &decision && exempt.depends_on_pod() && seen_ready != ready[pod] {
                        decision = run(Some(&from.budget), &pod_in(pod, ready[pod]), operation.clone(), false, ALL_GATES);
                    }
                    match decision {
                        Decision::Consume(status) => {
                            in_flight[replica] = Some(InFlight { pod, operation, older, read_version: from.version, status, attempts: 1 });
                        }
                        Decision::Allow(_) if ready[pod] && !disrupted.contains(&pod) => {
                            // Let through unrecorded, yet it was available.
                            disrupted.insert(pod);
                            ready[pod] = false;
                        }
                        _ => {}
                    }
                }
                Step::Commit { replica } => {
                    let Some(mut flight) = in_flight[replica].take() else { continue };
                    if flight.read_version == store.version {
                        store.budget.status = Some(flight.status);
                        store.version += 1;
                        let mut older = flight.older;
                        if !older.contains(&flight.read_version) {
                            older.push(flight.read_version);
                        }
                        replicas[replica].written = Some((older, store.clone()));
                        history.push(store.clone());
                        disrupted.insert(flight.pod);
                        ready[flight.pod] = false;
                    } else if flight.attempts < MAX_ATTEMPTS {
                        // Conflict: read the budget and the pod from the API and decide again.
                        let p = pod_in(flight.pod, ready[flight.pod]);
                        if let Decision::Consume(status) = run(Some(&store.budget), &p, flight.operation.clone(), false, ALL_GATES) {
                            flight.read_version = store.version;
                            flight.status = status;
                            flight.attempts += 1;
                            in_flight[replica] = Some(flight);
                        }
                    }
                }
                Step::Sync { replica, all } => {
                    let next = usize::try_from(replicas[replica].budget.version).unwrap();
                    replicas[replica].budget = if all { store.clone() } else { history[next.min(history.len() - 1)].clone() };
                    replicas[replica].ready = ready;
                }
                Step::Churn { pod } => {
                    if !disrupted.contains(&pod) {
                        ready[pod] = !ready[pod];
                    }
                }
                Step::Reconcile => {
                    store.budget.status = Some(recompute(&store.budget, &ready));
                    store.version += 1;
                    history.push(store.clone());
                }
            }
            let granted = i32::try_from(disrupted.len()).unwrap();
            prop_assert!(granted <= max_unavailable, "{} pods disrupted, budget {}", granted, max_unavailable);
        }
    }
}

fn pod_in(index: usize, ready: bool) -> Pod {
    pod(
        &format!("web-{index}"),
        ready,
        json!({"app": "web"}),
        json!({}),
    )
}
