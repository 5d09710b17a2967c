use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::api::ResourceDistributionSpec;

fn ns(name: &str, labels: &[(&str, &str)]) -> NamespaceView {
    NamespaceView {
        name: name.into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        terminating: false,
    }
}

fn targets(value: Value) -> ResourceDistributionTargets {
    serde_json::from_value(value).unwrap()
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn cluster() -> Vec<NamespaceView> {
    vec![
        ns("default", &[]),
        ns("dev-1", &[("group", "one"), ("env", "dev")]),
        ns("dev-2", &[("group", "one"), ("env", "dev")]),
        ns("test-1", &[("group", "two"), ("env", "test")]),
        ns("kube-system", &[]),
    ]
}

#[test]
fn all_namespaces_is_every_namespace_less_the_excluded() {
    let t = targets(
        json!({"allNamespaces": true, "excludedNamespaces": {"list": [{"name": "kube-system"}]}}),
    );
    let (matched, others) = target_namespaces(&t, &cluster());
    assert_eq!(matched, names(&["default", "dev-1", "dev-2", "test-1"]));
    assert_eq!(others, names(&["kube-system"]));
}

#[test]
fn listed_namespaces_count_whether_they_exist_or_not_and_join_the_selectors() {
    let t = targets(json!({
        "includedNamespaces": {"list": [{"name": "default"}, {"name": "not-yet"}]},
        "namespaceLabelSelector": {"matchLabels": {"group": "one"}},
        "excludedNamespaces": {"list": [{"name": "dev-2"}]},
    }));
    let (matched, others) = target_namespaces(&t, &cluster());
    assert_eq!(matched, names(&["default", "dev-1", "not-yet"]));
    assert_eq!(others, names(&["dev-2", "kube-system", "test-1"]));
}

#[test]
fn an_empty_selector_targets_nothing() {
    let t = targets(json!({"namespaceLabelSelector": {}}));
    let (matched, others) = target_namespaces(&t, &cluster());
    assert!(matched.is_empty());
    assert_eq!(others.len(), 5);
    assert!(!targets_namespace(&t, &ns("default", &[])));
}

fn plan_for(
    t: &ResourceDistributionTargets,
    namespaces: &[NamespaceView],
    copies: &[(&str, CopyState)],
) -> Plan {
    let copies: BTreeMap<String, CopyState> = copies
        .iter()
        .map(|(n, c)| (n.to_string(), c.clone()))
        .collect();
    plan(&Input {
        targets: t,
        namespaces,
        copies: &copies,
    })
}

#[test]
fn each_target_gets_a_copy_a_stale_one_is_rewritten_and_a_current_one_left_alone() {
    let t = targets(
        json!({"namespaceLabelSelector": {"matchLabels": {"group": "one"}}, "includedNamespaces": {"list": [{"name": "default"}]}}),
    );
    let p = plan_for(
        &t,
        &cluster(),
        &[
            ("dev-1", CopyState::Owned { current: true }),
            ("dev-2", CopyState::Owned { current: false }),
        ],
    );
    assert_eq!(p.targets, names(&["default", "dev-1", "dev-2"]));
    assert_eq!(
        p.actions,
        [
            Action::Create("default".into()),
            Action::Update("dev-2".into())
        ]
    );
    assert!(p.failures.is_empty());
}

#[test]
fn a_foreign_object_is_a_conflict_and_never_written() {
    let t = targets(json!({"allNamespaces": true}));
    let p = plan_for(
        &t,
        &[ns("a", &[]), ns("b", &[])],
        &[("a", CopyState::Foreign)],
    );
    assert_eq!(p.actions, [Action::Create("b".into())]);
    assert_eq!(
        p.failures,
        [Failure {
            namespace: "a".into(),
            step: ConditionType::ConflictOccurred,
            message: CONFLICT.into(),
        }]
    );
}

#[test]
fn missing_terminating_and_unreadable_targets_fail_without_a_write() {
    let t = targets(
        json!({"includedNamespaces": {"list": [{"name": "gone"}, {"name": "ending"}, {"name": "odd"}]}}),
    );
    let mut ending = ns("ending", &[]);
    ending.terminating = true;
    let p = plan_for(
        &t,
        &[ending, ns("odd", &[])],
        &[("odd", CopyState::Unreadable("timeout".into()))],
    );
    assert!(p.actions.is_empty());
    let failures: Vec<_> = p
        .failures
        .iter()
        .map(|f| (f.namespace.as_str(), f.step, f.message.as_str()))
        .collect();
    assert_eq!(
        failures,
        [
            (
                "ending",
                ConditionType::NamespaceNotExists,
                NAMESPACE_MISSING
            ),
            ("gone", ConditionType::NamespaceNotExists, NAMESPACE_MISSING),
            ("odd", ConditionType::GetResourceFailed, "timeout"),
        ]
    );
}

#[test]
fn copies_are_deleted_where_they_no_longer_belong_and_foreign_objects_stay() {
    let t = targets(json!({"includedNamespaces": {"list": [{"name": "dev-1"}]}}));
    let mut ending = ns("ending", &[]);
    ending.terminating = true;
    let mut namespaces = cluster();
    namespaces.push(ending);
    let p = plan_for(
        &t,
        &namespaces,
        &[
            ("dev-1", CopyState::Owned { current: true }),
            ("dev-2", CopyState::Owned { current: true }),
            ("test-1", CopyState::Foreign),
            // Its namespace goes, and its copy with it.
            ("ending", CopyState::Owned { current: true }),
        ],
    );
    assert_eq!(p.actions, [Action::Delete("dev-2".into())]);
}

fn at(seconds: i64) -> Time {
    Time(jiff::Timestamp::from_second(seconds).unwrap())
}

#[test]
fn the_status_counts_targets_and_lists_six_conditions_in_order() {
    let failures = [
        Failure {
            namespace: "b".into(),
            step: ConditionType::ConflictOccurred,
            message: CONFLICT.into(),
        },
        Failure {
            namespace: "x".into(),
            step: ConditionType::DeleteResourceFailed,
            message: "forbidden".into(),
        },
    ];
    let s = status(3, None, &names(&["a", "b", "c"]), &failures, &at(100));
    assert_eq!(
        (s.desired, s.succeeded, s.failed, s.observed_generation),
        (3, 2, 1, 3)
    );
    let conditions: Vec<_> = s
        .conditions
        .iter()
        .map(|c| {
            (
                c.type_.as_str(),
                c.status.as_str(),
                c.reason.as_str(),
                c.failed_namespaces.clone(),
            )
        })
        .collect();
    assert_eq!(
        conditions,
        [
            ("GetResourceFailed", "False", SUCCEEDED, vec![]),
            ("CreateResourceFailed", "False", SUCCEEDED, vec![]),
            ("UpdateResourceFailed", "False", SUCCEEDED, vec![]),
            ("DeleteResourceFailed", "True", "forbidden", names(&["x"])),
            ("ConflictOccurred", "True", CONFLICT, names(&["b"])),
            ("NamespaceNotExists", "False", SUCCEEDED, vec![]),
        ]
    );
    assert!(
        s.conditions
            .iter()
            .all(|c| c.last_transition_time == Some(at(100)))
    );
}

#[test]
fn a_conditions_transition_time_moves_only_with_its_status() {
    let conflict = Failure {
        namespace: "b".into(),
        step: ConditionType::ConflictOccurred,
        message: CONFLICT.into(),
    };
    let first = status(1, None, &names(&["a", "b"]), &[conflict], &at(100));
    let second = status(1, Some(&first), &names(&["a", "b"]), &[], &at(200));
    let times: Vec<_> = second
        .conditions
        .iter()
        .map(|c| c.last_transition_time.clone())
        .collect();
    let mut expected = vec![Some(at(100)); 6];
    expected[4] = Some(at(200));
    assert_eq!(times, expected);
    // Nothing changed: the same status, so nothing to write.
    assert_eq!(
        status(1, Some(&second), &names(&["a", "b"]), &[], &at(300)),
        second
    );
}

#[test]
fn the_hash_is_sha256_of_the_resource_as_go_encodes_it() {
    let secret = json!({"kind": "Secret", "metadata": {"name": "s"}, "apiVersion": "v1", "data": {"k": "dg=="}});
    assert_eq!(
        resource_hash(&secret),
        "dbd518babf0140bbcdd25a6d0a84ea613749bc6db756e1c815adedbe80e7e64c"
    );
    let escaped = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"html": "<b>&"}});
    assert_eq!(
        resource_hash(&escaped),
        "a09638a664123c1c4e977330e7ba32056d2f9bb0881b65230143e2a8b7b913c8"
    );
}

fn resource(object: Value) -> Resource {
    let spec: ResourceDistributionSpec =
        serde_json::from_value(json!({"resource": object, "targets": {}})).unwrap();
    Resource::decode(&spec.resource).unwrap()
}

#[test]
fn a_secrets_string_data_and_default_type_compare_as_the_api_server_stores_them() {
    let r = resource(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"user": "admin"}}),
    );
    let stored = json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "s", "namespace": "a", "resourceVersion": "7", "annotations": {HASH_ANNOTATION: "h"}},
        "data": {"user": "YWRtaW4="},
    });
    assert!(content_matches(&stored, &r));
    let edited = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {"name": "s"}, "data": {"user": "cm9vdA=="}});
    assert!(!content_matches(&edited, &r));
    let configmap = resource(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}}),
    );
    assert!(content_matches(
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
        &configmap
    ));
}

#[test]
fn a_copy_keeps_what_others_added_and_carries_the_owner_and_the_version() {
    let r = resource(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "ignored", "labels": {"app": "x"}, "finalizers": ["b"]},
        "data": {"k": "v"},
    }));
    let source = Source {
        name: "rd",
        uid: "uid-1",
    };
    let old = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": "c", "namespace": "ns", "resourceVersion": "42",
            "labels": {"app": "old", "team": "t"},
            "annotations": {"note": "kept", HASH_ANNOTATION: "stale"},
            "finalizers": ["a"],
            "ownerReferences": [{"apiVersion": API_VERSION, "kind": KIND, "name": "rd", "uid": "uid-0", "controller": true}],
        },
        "data": {"k": "old"},
    });
    let copy = desired_copy(&r, source, "ns", "h1", Some(&old));
    assert_eq!(
        copy,
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": "c", "namespace": "ns", "resourceVersion": "42",
                "labels": {"app": "x", "team": "t"},
                "annotations": {"note": "kept", HASH_ANNOTATION: "h1", SOURCE_ANNOTATION: "rd"},
                "finalizers": ["a", "b"],
                "ownerReferences": [{
                    "apiVersion": API_VERSION, "kind": KIND, "name": "rd", "uid": "uid-1",
                    "controller": true, "blockOwnerDeletion": true,
                }],
            },
            "data": {"k": "v"},
        })
    );
    let fresh = desired_copy(&r, source, "other", "h1", None);
    assert_eq!(fresh["metadata"]["namespace"], "other");
    assert!(fresh["metadata"].get("resourceVersion").is_none());
    let owners: Vec<OwnerReference> =
        serde_json::from_value(fresh["metadata"]["ownerReferences"].clone()).unwrap();
    assert!(is_controlled_by(&owners, "rd"));
    assert!(!is_controlled_by(&owners, "other-rd"));
}

proptest! {
    /// The namespace-event check and the listing agree on every existing namespace.
    #[test]
    fn targets_namespace_agrees_with_the_listing(
        all in any::<bool>(),
        included in proptest::collection::vec(0usize..5, 0..3),
        excluded in proptest::collection::vec(0usize..5, 0..3),
        group in proptest::option::of(prop_oneof![Just("one"), Just("two")]),
    ) {
        let namespaces = cluster();
        let list = |indexes: &[usize]| json!({"list": indexes.iter().map(|&i| json!({"name": namespaces[i].name})).collect::<Vec<_>>()});
        let selector = match group {
            Some(g) => json!({"matchLabels": {"group": g}}),
            None => json!({}),
        };
        let t = targets(json!({
            "allNamespaces": all,
            "includedNamespaces": list(&included),
            "excludedNamespaces": list(&excluded),
            "namespaceLabelSelector": selector,
        }));
        let (matched, _) = target_namespaces(&t, &namespaces);
        for namespace in &namespaces {
            prop_assert_eq!(targets_namespace(&t, namespace), matched.contains(&namespace.name));
        }
    }
}
