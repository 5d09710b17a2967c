use super::*;

#[test]
fn leaves_and_roundtrip() {
    let obj = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let leaves = leaf_paths(Some("Pod"), &obj, false, true);
    assert!(leaves.contains(&vec![
        "f:metadata".to_string(),
        "f:labels".into(),
        "f:a".into()
    ]));
    assert!(leaves.contains(&vec![
        "f:spec".to_string(),
        "f:containers".into(),
        "k:{\"name\":\"c\"}".into(),
        "f:image".into()
    ]));
    let v1 = to_fields_v1(&leaves);
    let mut back = FieldSet::new();
    from_fields_v1(&v1, &mut Vec::new(), &mut back);
    assert_eq!(back, leaves);
}

#[test]
fn reapplying_the_same_configuration_changes_nothing() {
    let apply_as_helm = |live: Option<&Value>, config: &Value| {
        apply(
            Some("ConfigMap"),
            live,
            config,
            "helm",
            true,
            "v1",
            "",
            "",
            "configmaps",
            "c",
        )
        .unwrap()
    };
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "a"}});
    let mut live = apply_as_helm(None, &config);
    live["metadata"]["managedFields"][0]["time"] = json!("2020-01-01T00:00:00Z");
    assert_eq!(
        apply_as_helm(Some(&live), &config),
        live,
        "a no-op apply keeps the object, timestamps included"
    );

    let changed = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "b"}});
    let after = apply_as_helm(Some(&live), &changed);
    assert_eq!(after["data"]["k"], json!("b"));
    assert_ne!(
        after["metadata"]["managedFields"][0]["time"],
        json!("2020-01-01T00:00:00Z")
    );
}

#[test]
fn apply_conflict_and_force() {
    let cfg_a = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "a"}});
    let live = apply(
        Some("ConfigMap"),
        None,
        &cfg_a,
        "a",
        false,
        "v1",
        "",
        "",
        "configmaps",
        "c",
    );
    let Ok(live) = live else {
        panic!("apply failed")
    };
    let cfg_b = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "b"}});
    let err = apply(
        Some("ConfigMap"),
        Some(&live),
        &cfg_b,
        "b",
        false,
        "v1",
        "",
        "",
        "configmaps",
        "c",
    );
    assert_eq!(err.as_ref().err().map(|e| e.code), Some(409));
    let forced = apply(
        Some("ConfigMap"),
        Some(&live),
        &cfg_b,
        "b",
        true,
        "v1",
        "",
        "",
        "configmaps",
        "c",
    );
    let Ok(forced) = forced else {
        panic!("forced apply failed")
    };
    assert_eq!(forced["data"]["k"], "b");
    // Manager a dropping its field: b still owns it, so it stays.
    let cfg_a2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"other": "x"}});
    let after = apply(
        Some("ConfigMap"),
        Some(&forced),
        &cfg_a2,
        "a",
        false,
        "v1",
        "",
        "",
        "configmaps",
        "c",
    );
    let Ok(after) = after else {
        panic!("apply failed")
    };
    assert_eq!(after["data"], json!({"k": "b", "other": "x"}));
}

/// The definition `changed_leaves` must agree with: every leaf of both objects,
/// compared one by one.
fn changed_leaves_by_full_walk(
    kind: Option<&str>,
    old: &Value,
    new: &Value,
    only_status: bool,
) -> (FieldSet, FieldSet) {
    let new_leaves = leaf_paths(kind, new, only_status, false);
    let old_leaves = leaf_paths(kind, old, only_status, false);
    let changed = new_leaves
        .iter()
        .filter(|p| value_at(old, p) != value_at(new, p))
        .cloned()
        .collect();
    let removed = old_leaves.difference(&new_leaves).cloned().collect();
    (changed, removed)
}

fn pod_like() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let word = prop::sample::select(vec!["a", "b", "c"]);
    let scalar = prop_oneof![
        word.clone().prop_map(|w| json!(w)),
        (0..3i64).prop_map(|i| json!(i)),
        Just(Value::Null),
        Just(json!({})),
    ];
    let container = (
        word.clone(),
        scalar.clone(),
        prop::option::of(scalar.clone()),
    )
        .prop_map(|(name, image, env)| {
            let mut c = json!({"name": name, "image": image});
            if let Some(e) = env {
                c["env"] = json!([{"name": "X", "value": e}]);
            }
            c
        });
    (
        prop::collection::btree_map(word.clone(), word.clone(), 0..3),
        prop::collection::vec(container, 0..3),
        prop::collection::vec(word.clone(), 0..3),
        prop::option::of(scalar.clone()),
        prop::collection::vec((word, scalar), 0..3),
    )
        .prop_map(|(labels, containers, finalizers, node, conditions)| {
            let conditions: Vec<Value> = conditions
                .into_iter()
                .map(|(t, s)| json!({"type": t, "status": s}))
                .collect();
            let mut pod = json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "resourceVersion": "1", "labels": labels,
                             "finalizers": finalizers},
                "spec": {"containers": containers},
                "status": {"conditions": conditions},
            });
            if let Some(n) = node {
                pod["spec"]["nodeName"] = n;
            }
            pod
        })
}

proptest::proptest! {
    #[test]
    fn changed_leaves_agree_with_the_full_walk(
        old in pod_like(),
        new in pod_like(),
        only_status in proptest::prelude::any::<bool>(),
    ) {
        proptest::prop_assert_eq!(
            changed_leaves(Some("Pod"), &old, &new, only_status),
            changed_leaves_by_full_walk(Some("Pod"), &old, &new, only_status)
        );
        proptest::prop_assert_eq!(
            changed_leaves(None, &old, &new, only_status),
            changed_leaves_by_full_walk(None, &old, &new, only_status)
        );
        // Writes mostly change one part and leave the rest equal.
        for part in ["/metadata/labels", "/spec/containers", "/status"] {
            let mut partly = old.clone();
            if let (Some(to), Some(from)) = (partly.pointer_mut(part), new.pointer(part)) {
                *to = from.clone();
            }
            proptest::prop_assert_eq!(
                changed_leaves(Some("Pod"), &old, &partly, only_status),
                changed_leaves_by_full_walk(Some("Pod"), &old, &partly, only_status)
            );
        }
    }
}

fn field_sets() -> impl proptest::strategy::Strategy<Value = Vec<FieldSet>> {
    use proptest::prelude::*;
    let seg = prop::sample::select(vec!["f:a", "f:b", "k:{\"name\":\"x\"}", "."]);
    let path = prop::collection::vec(seg.prop_map(str::to_string), 1..4);
    prop::collection::vec(prop::collection::btree_set(path, 0..6), 0..4)
}

proptest::proptest! {
    /// Editing entries in place gives what reading, editing and rendering them did.
    #[test]
    fn transfer_fields_matches_read_edit_write(
        sets in field_sets(),
        changed in field_sets(),
        removed in field_sets(),
        mine in 0..4usize,
    ) {
        let managers = ["a", "b", "c", "d"];
        let entries: Vec<ManagedEntry> = sets
            .into_iter()
            .enumerate()
            .map(|(i, fields)| ManagedEntry {
                manager: managers[i].to_string(),
                operation: "Update".into(),
                api_version: "v1".into(),
                time: "t0".into(),
                subresource: String::new(),
                fields,
            })
            .collect();
        let mut stored = json!({"metadata": {}});
        write_entries(&mut stored, &entries);
        // Round trip first, as every stored object went through write_entries.
        let entries = read_entries(&stored);
        let changed: FieldSet = changed.into_iter().flatten().collect();
        let removed: FieldSet = removed
            .into_iter()
            .flatten()
            .filter(|p| !changed.contains(p))
            .collect();

        let mut expected = entries.clone();
        for e in expected.iter_mut() {
            e.fields.retain(|p| !changed.contains(p) && !removed.contains(p));
        }
        let e = entry_mut(&mut expected, managers[mine], "Update", "", "v2");
        e.time = "t1".into();
        e.fields.extend(changed.iter().cloned());
        expected.retain(|e| !e.fields.is_empty());
        let mut want = json!({"metadata": {}});
        write_entries(&mut want, &expected);

        let list = stored["metadata"]["managedFields"].as_array().cloned().unwrap_or_default();
        let got = transfer_fields(list, &changed, &removed, managers[mine], "", "v2", "t1");
        let mut got_obj = json!({"metadata": {}});
        if !got.is_empty() {
            got_obj["metadata"]["managedFields"] = Value::Array(got);
        }
        proptest::prop_assert_eq!(read_entries(&got_obj), read_entries(&want));
        proptest::prop_assert_eq!(got_obj, want);
    }
}
