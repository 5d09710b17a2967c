use super::*;

#[test]
fn fit_error_message() {
    let mut r = BTreeMap::new();
    r.insert(
        "node(s) didn't match Pod's node affinity/selector".to_string(),
        2,
    );
    r.insert("Insufficient cpu".to_string(), 1);
    assert_eq!(
        fit_error(3, &r),
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
}

/// kube-scheduler's NodePorts: a node where another pod holds one of the pod's host
/// ports (same protocol) does not fit; the bound pods' ports are counted per node.
#[test]
fn host_ports_taken_on_a_node_keep_a_pod_off_it() {
    let pod = |port: i64, protocol: &str| {
        json!({"spec": {"containers": [{"name": "a",
            "ports": [{"containerPort": 80, "hostPort": port, "protocol": protocol}]}]}})
    };
    let node = json!({"metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}});
    let mut q = Queue::default();
    let holder = pod(21017, "TCP");
    q.bind(
        ("ns".into(), "holder".into()),
        "n1",
        pod_requests(&holder),
        super::super::host_ports(&holder),
    );
    let taken = q.taken_ports["n1"].clone();
    let (req, used) = (Res::default(), Res::default());
    assert_eq!(
        filter(&pod(21017, "TCP"), req, &node, used, &taken),
        Err(vec![
            "node(s) didn't have free ports for the requested pod ports".to_string()
        ])
    );
    assert_eq!(filter(&pod(21017, "UDP"), req, &node, used, &taken), Ok(()));
    assert_eq!(filter(&pod(21018, "TCP"), req, &node, used, &taken), Ok(()));
    q.unbind(&("ns".into(), "holder".into()));
    assert!(q.taken_ports["n1"].is_empty(), "freed with its pod");
}

/// kube-scheduler's NodeResourcesFit: a pod requesting an extended resource fits only a
/// node that advertises enough of it.
#[test]
fn extended_resources_fit_only_nodes_that_advertise_them() {
    let pod = json!({"spec": {"containers": [
        {"name": "a", "resources": {"requests": {"cpu": "100m", "example.com/gpu": "1"}}},
        {"name": "b", "resources": {"requests": {"example.com/gpu": "1"}}}]}});
    let node = |gpus: Option<&str>| {
        let mut allocatable = json!({"cpu": "8", "memory": "32Gi", "pods": "110"});
        if let Some(n) = gpus {
            allocatable["example.com/gpu"] = json!(n);
        }
        json!({"metadata": {"name": "n"}, "status": {"allocatable": allocatable}})
    };
    let (req, used) = (pod_requests(&pod), Res::default());
    assert_eq!(
        filter(&pod, req, &node(None), used, &[]),
        Err(vec!["Insufficient example.com/gpu".to_string()])
    );
    assert_eq!(
        filter(&pod, req, &node(Some("1")), used, &[]),
        Err(vec!["Insufficient example.com/gpu".to_string()])
    );
    assert_eq!(filter(&pod, req, &node(Some("2")), used, &[]), Ok(()));
}

#[test]
fn tolerations() {
    let taint = json!({"key": "a", "value": "b", "effect": "NoSchedule"});
    assert!(tolerates(
        &json!({"key": "a", "operator": "Exists"}),
        &taint
    ));
    assert!(tolerates(&json!({"key": "a", "value": "b"}), &taint));
    assert!(!tolerates(&json!({"key": "a", "value": "c"}), &taint));
    assert!(tolerates(&json!({"operator": "Exists"}), &taint));
    assert!(!tolerates(
        &json!({"operator": "Exists", "effect": "NoExecute"}),
        &taint
    ));
}

fn pod(name: &str, node: &str, generation: i64, phase: &str) -> Value {
    json!({
        "metadata": {"namespace": "ns", "name": name, "uid": format!("uid-{name}"), "generation": generation},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i",
                 "resources": {"requests": {"cpu": "100m", "memory": "1Mi"}}}]},
        "status": {"phase": phase},
    })
}

fn event(event_type: EventType, object: Value, previous: Option<Value>) -> StoreEvent {
    StoreEvent {
        rv: 1,
        gr: GroupResource::new("", "pods"),
        namespace: meta::meta_str(&object, "namespace").to_string(),
        name: meta::name_of(&object).to_string(),
        event_type,
        object: Arc::new(object),
        previous: previous.map(Arc::new),
    }
}

fn key(name: &str) -> Key {
    ("ns".to_string(), name.to_string())
}

#[test]
fn queue_follows_binding_and_counts_requests_per_node() {
    let mut q = Queue::rebuild(&[Arc::new(pod("a", "", 1, "Pending"))]);
    assert!(q.active.contains(&key("a")));
    q.on_event(&event(
        EventType::Modified,
        pod("a", "n1", 1, "Pending"),
        None,
    ));
    assert!(q.active.is_empty());
    let used = q.used["n1"];
    assert_eq!((used.cpu_m, used.pods), (100, 1));
    // The same pod seen again is not counted twice.
    q.on_event(&event(
        EventType::Modified,
        pod("a", "n1", 1, "Running"),
        None,
    ));
    assert_eq!(q.used["n1"].pods, 1);
    q.on_event(&event(
        EventType::Deleted,
        pod("a", "n1", 1, "Running"),
        None,
    ));
    assert_eq!((q.used["n1"].cpu_m, q.used["n1"].pods), (0, 0));
}

#[test]
fn parked_pods_wait_for_a_spec_change_or_room() {
    let mut q = Queue::rebuild(&[
        Arc::new(pod("waiting", "", 1, "Pending")),
        Arc::new(pod("running", "n1", 1, "Running")),
    ]);
    q.active.clear();
    q.park(key("waiting"), &pod("waiting", "", 1, "Pending"), true);
    // A status write (same generation) leaves it parked.
    q.on_event(&event(
        EventType::Modified,
        pod("waiting", "", 1, "Pending"),
        None,
    ));
    assert!(q.active.is_empty());
    // A spec change makes it active again.
    q.on_event(&event(
        EventType::Modified,
        pod("waiting", "", 2, "Pending"),
        None,
    ));
    assert!(q.active.contains(&key("waiting")));

    q.active.clear();
    q.park(key("waiting"), &pod("waiting", "", 2, "Pending"), true);
    // Another pod finishing frees room: a pod waiting for room is tried again.
    q.on_event(&event(
        EventType::Modified,
        pod("running", "n1", 1, "Succeeded"),
        Some(pod("running", "n1", 1, "Running")),
    ));
    assert!(q.active.contains(&key("waiting")));
    assert_eq!(q.used["n1"].pods, 0);

    q.active.clear();
    q.park(key("waiting"), &pod("waiting", "", 2, "Pending"), true);
    let node = StoreEvent {
        gr: GroupResource::new("", "nodes"),
        ..event(
            EventType::Modified,
            json!({"metadata": {"name": "n2"}}),
            None,
        )
    };
    q.on_event(&node);
    assert!(q.active.contains(&key("waiting")));
    assert!(q.parked.is_empty());
}

/// A pod no node admits for its affinity (or taints) is not tried again each time a
/// pod finishes or is deleted — with thousands of such pods every finished pod cost a
/// pass over all of them times every node — only when a node changes or the minute is
/// up; a pod that lacked room is.
#[test]
fn room_wakes_only_the_pods_that_lacked_room() {
    let mut q = Queue::rebuild(&[
        Arc::new(pod("elsewhere", "", 1, "Pending")),
        Arc::new(pod("crowded", "", 1, "Pending")),
        Arc::new(pod("running", "n1", 1, "Running")),
        Arc::new(pod("other", "n1", 1, "Running")),
    ]);
    q.active.clear();
    q.park(key("elsewhere"), &pod("elsewhere", "", 1, "Pending"), false);
    q.park(key("crowded"), &pod("crowded", "", 1, "Pending"), true);
    q.on_event(&event(
        EventType::Modified,
        pod("running", "n1", 1, "Succeeded"),
        Some(pod("running", "n1", 1, "Running")),
    ));
    assert_eq!(q.active, HashSet::from([key("crowded")]));
    assert!(q.parked.contains_key(&key("elsewhere")));

    q.active.clear();
    q.park(key("crowded"), &pod("crowded", "", 1, "Pending"), true);
    q.on_event(&event(
        EventType::Deleted,
        pod("other", "n1", 1, "Running"),
        None,
    ));
    assert_eq!(q.active, HashSet::from([key("crowded")]));
    assert_eq!(q.parked.len(), 1);

    // The minute is up: every parked pod is tried again.
    q.parked_since = Instant::now().checked_sub(UNSCHEDULABLE_FLUSH);
    q.flush_if_due();
    assert!(q.active.contains(&key("elsewhere")));
    assert!(q.parked.is_empty());
}

#[test]
fn room_reasons_are_node_resources_fit_s() {
    for reason in ["Too many pods", "Insufficient cpu", "Insufficient memory"] {
        assert!(is_room_reason(reason), "{reason}");
    }
    for reason in [
        "node(s) didn't match Pod's node affinity/selector",
        "node(s) were unschedulable",
        "node(s) had untolerated taint {a: b}",
    ] {
        assert!(!is_room_reason(reason), "{reason}");
    }
}

/// After a lag, a pod that fit nowhere stays parked when its spec and every node are
/// unchanged; one waiting for room, or any after a node changed, is tried again.
#[test]
fn a_resync_after_a_lag_keeps_pods_parked_that_nothing_can_have_helped() {
    let nodes = [Arc::new(
        json!({"metadata": {"name": "n1", "resourceVersion": "5"}}),
    )];
    let pods = [
        Arc::new(pod("elsewhere", "", 1, "Pending")),
        Arc::new(pod("crowded", "", 1, "Pending")),
        Arc::new(pod("respecced", "", 2, "Pending")),
        Arc::new(pod("new", "", 1, "Pending")),
    ];
    let parked_queue = || {
        let mut q = Queue::rebuild(&pods);
        q.node_versions = node_versions(&nodes);
        q.active.clear();
        q.park(key("elsewhere"), &pod("elsewhere", "", 1, "Pending"), false);
        q.park(key("crowded"), &pod("crowded", "", 1, "Pending"), true);
        q.park(key("respecced"), &pod("respecced", "", 1, "Pending"), false);
        q
    };
    let mut q = parked_queue();
    q.resync(&pods, &nodes);
    assert_eq!(
        q.active,
        HashSet::from([key("crowded"), key("respecced"), key("new")])
    );
    assert!(q.parked.contains_key(&key("elsewhere")) && q.parked_since.is_some());

    let mut q = parked_queue();
    let changed = [Arc::new(
        json!({"metadata": {"name": "n1", "resourceVersion": "6"}}),
    )];
    q.resync(&pods, &changed);
    assert_eq!(q.active.len(), 4);
    assert!(q.parked.is_empty());
}
