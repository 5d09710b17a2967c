use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use proptest::prelude::*;
use serde_json::json;

fn template(image: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": "demo"}},
        "spec": {"containers": [{"name": "main", "image": image}]}
    })
}

fn rev(name: &str, revision: i64, data: Value) -> ControllerRevision {
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(RawExtension(data)),
        revision,
    }
}

#[test]
fn fnv_and_safe_encode_golden() {
    assert_eq!(fnv1_32(b""), 0x811c_9dc5);
    assert_eq!(fnv1_32(b"a"), 0x050c_5d7e);
    assert_eq!(fnv1a_32(b"a"), 0xe40c_292c);
    assert_eq!(safe_encode("0123456789"), "456789bcdf");
}

#[test]
fn revision_data_bytes_and_hash_match_go() {
    let data = template_revision_data(&template("nginx:1.25"));
    let raw = revision_data_raw(&data);
    assert_eq!(
        raw,
        r#"{"spec":{"template":{"$patch":"replace","metadata":{"creationTimestamp":null,"labels":{"app":"demo"}},"spec":{"containers":[{"image":"nginx:1.25","name":"main","resources":{}}]}}}}"#
    );
    // Golden values computed independently (FNV-1 32 + decimal collision count + SafeEncode).
    assert_eq!(hash_revision_data(raw.as_bytes(), None), "66cf6bc7d7");
    assert_eq!(hash_revision_data(raw.as_bytes(), Some(0)), "788944f45");
    assert_eq!(hash_revision_data(raw.as_bytes(), Some(1)), "788944f44");
}

#[test]
fn new_revision_named_labelled_owned() {
    let owner = controller_owner_ref("apps.kruise.io/v1beta1", "CloneSet", "demo", "uid-1");
    let cr = new_controller_revision(&NewRevision {
        parent_name: "demo".into(),
        namespace: Some("ns".into()),
        owner: Some(owner.clone()),
        labels: BTreeMap::from([("app".into(), "demo".into())]),
        data: template_revision_data(&template("nginx:1.25")),
        revision: 1,
        collision_count: Some(0),
        ..Default::default()
    });
    assert_eq!(cr.metadata.name.as_deref(), Some("demo-788944f45"));
    let labels = cr.metadata.labels.unwrap();
    assert_eq!(labels["controller.kubernetes.io/hash"], "788944f45");
    assert_eq!(labels["app"], "demo");
    assert_eq!(cr.metadata.owner_references, Some(vec![owner]));
    assert_eq!(cr.revision, 1);
}

#[test]
fn daemonset_scheme_revision() {
    let t = template("nginx");
    let h = template_hash(&t, Some(0));
    let cr = new_controller_revision(&NewRevision {
        parent_name: "ds".into(),
        data: template_revision_data(&t),
        revision: 1,
        collision_count: Some(0),
        hash_override: Some(h.clone()),
        hash_label: Some("controller-revision-hash".into()),
        ..Default::default()
    });
    assert_eq!(cr.metadata.name, Some(format!("ds-{h}")));
    assert_eq!(cr.metadata.labels.unwrap()["controller-revision-hash"], h);
}

#[test]
fn collision_count_bump() {
    let data = template_revision_data(&template("nginx:1.25"));
    let other = template_revision_data(&template("nginx:1.26"));
    let existing = rev("demo-788944f45", 1, other);
    // Same name, different data: a real collision -> bump collisionCount and rename.
    assert_eq!(
        on_name_collision(&existing, &data, 0),
        CollisionDecision::Retry { collision_count: 1 }
    );
    let h0 = hash_revision_data(revision_data_raw(&data).as_bytes(), Some(0));
    let h1 = hash_revision_data(revision_data_raw(&data).as_bytes(), Some(1));
    assert_ne!(h0, h1);
    // Same name, equal data: reuse.
    let same = rev("demo-788944f45", 1, data.clone());
    assert_eq!(on_name_collision(&same, &data, 0), CollisionDecision::Reuse);
}

#[test]
fn takeover_revision_reused_by_data_not_name() {
    // A revision OpenKruise created: Go bytes with artefacts, a name we would not compute.
    let go_data: Value = serde_json::from_str(
        r#"{"spec":{"template":{"$patch":"replace","metadata":{"creationTimestamp":null,"labels":{"app":"demo"}},"spec":{"containers":[{"image":"nginx:1.25","name":"main","resources":{}}],"securityContext":{}}}}}"#,
    )
    .unwrap();
    let history = vec![rev("demo-7d9f8c6b5", 3, go_data)];
    // Our candidate lacks the securityContext artefact; data are still semantically equal.
    let ours = template_revision_data(&template("nginx:1.25"));
    assert_eq!(
        decide_update_revision(&history, &ours),
        UpdateRevisionDecision::ReuseNewest {
            name: "demo-7d9f8c6b5".into()
        }
    );
}

#[test]
fn update_revision_decisions() {
    let a = template_revision_data(&template("a"));
    let b = template_revision_data(&template("b"));
    let c = template_revision_data(&template("c"));
    let mut history = vec![rev("x-2", 2, b.clone()), rev("x-1", 1, a.clone())];
    sort_revisions(&mut history);
    assert_eq!(history[0].metadata.name.as_deref(), Some("x-1"));
    assert_eq!(
        decide_update_revision(&history, &b),
        UpdateRevisionDecision::ReuseNewest { name: "x-2".into() }
    );
    assert_eq!(
        decide_update_revision(&history, &a),
        UpdateRevisionDecision::BumpRevision {
            name: "x-1".into(),
            revision: 3
        }
    );
    assert_eq!(
        decide_update_revision(&history, &c),
        UpdateRevisionDecision::Create { revision: 3 }
    );
    assert_eq!(
        decide_update_revision(&[], &c),
        UpdateRevisionDecision::Create { revision: 1 }
    );
}

#[test]
fn sort_ties_by_time_then_name() {
    let t = |s: i64| Some(Time(jiff::Timestamp::from_second(s).unwrap()));
    let mut a = rev("b", 1, json!({}));
    a.metadata.creation_timestamp = t(10);
    let mut b = rev("a", 1, json!({}));
    b.metadata.creation_timestamp = t(20);
    let c = rev("c", 0, json!({}));
    let mut v = vec![b, a, c];
    sort_revisions(&mut v);
    let names: Vec<_> = v.iter().map(|r| r.metadata.name.clone().unwrap()).collect();
    assert_eq!(names, ["c", "b", "a"]);
}

#[test]
fn truncate_keeps_live_revisions() {
    let h: Vec<_> = (1..=6)
        .map(|i| rev(&format!("cs-h{i}"), i, json!({})))
        .collect();
    // current = h2, update = h6, a pod still on h3 (full name) and one on h4 (short hash).
    let pods = BTreeSet::from(["cs-h3".to_string(), "h4".to_string()]);
    assert_eq!(
        revisions_to_truncate(&h, 1, "cs-h2", "cs-h6", &pods),
        vec!["cs-h1".to_string()]
    );
    assert_eq!(
        revisions_to_truncate(&h, 0, "cs-h2", "cs-h6", &pods),
        vec!["cs-h1", "cs-h5"]
    );
    assert!(revisions_to_truncate(&h, 10, "cs-h2", "cs-h6", &pods).is_empty());
    assert_eq!(
        revisions_to_truncate(&h, -1, "cs-h2", "cs-h6", &pods).len(),
        2
    );
}

#[test]
fn owned_or_orphan_filter() {
    let mut mine = rev("a", 1, json!({}));
    mine.metadata.owner_references = Some(vec![controller_owner_ref(
        "apps.kruise.io/v1beta1",
        "CloneSet",
        "cs",
        "u1",
    )]);
    let mut other = rev("b", 1, json!({}));
    other.metadata.owner_references = Some(vec![controller_owner_ref(
        "apps.kruise.io/v1beta1",
        "CloneSet",
        "x",
        "u2",
    )]);
    let orphan = rev("c", 1, json!({}));
    let all = vec![mine, other, orphan];
    let names: Vec<_> = owned_or_orphan(&all, "u1")
        .iter()
        .map(|r| r.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["a", "c"]);
}

#[test]
fn names_and_short_hash() {
    let long = "x".repeat(300);
    let n = controller_revision_name(&long, "abc");
    assert_eq!(n.len(), 223 + 4);
    assert_eq!(short_hash("demo-788944f45"), "788944f45");
    assert!(equal_to_revision_hash("788944f45", "demo-788944f45"));
    assert!(equal_to_revision_hash("demo-788944f45", "demo-788944f45"));
    assert!(!equal_to_revision_hash("demo-1", "demo-2"));
    let l = pod_revision_labels("demo-788944f45", false);
    assert_eq!(l["controller-revision-hash"], "demo-788944f45");
    assert_eq!(l["pod-template-hash"], "788944f45");
    assert_eq!(
        pod_revision_labels("demo-788944f45", true)["controller-revision-hash"],
        "788944f45"
    );
    assert_eq!(next_revision_number(&[rev("a", 7, json!({}))]), 8);
}

#[test]
fn template_hash_uses_collision_count() {
    let t = template("nginx");
    assert_ne!(template_hash(&t, None), template_hash(&t, Some(1)));
    assert_eq!(
        template_hash(&t, Some(1)),
        template_hash(&t.clone(), Some(1))
    );
    assert!(
        template_hash(&t, None)
            .chars()
            .all(|c| "456789bcdf".contains(c))
    );
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|i| json!(i)),
        "[a-z<&>]{0,6}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(("[a-z$]{1,5}", inner), 0..5)
                .prop_map(|kv| { Value::Object(kv.into_iter().collect()) }),
        ]
    })
}

fn reinsert_reversed(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut pairs: Vec<_> = m.iter().collect();
            pairs.reverse();
            let mut out = Map::new();
            for (k, val) in pairs {
                out.insert(k.clone(), reinsert_reversed(val));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(reinsert_reversed).collect()),
        o => o.clone(),
    }
}

proptest! {
    #[test]
    fn hashing_invariant_under_map_reordering(v in arb_json(), cc in proptest::option::of(0i32..5)) {
        let r = reinsert_reversed(&v);
        prop_assert_eq!(to_go_json(&v), to_go_json(&r));
        prop_assert_eq!(template_hash(&v, cc), template_hash(&r, cc));
        let d1 = revision_data_raw(&template_revision_data(&v));
        let d2 = revision_data_raw(&template_revision_data(&r));
        prop_assert_eq!(hash_revision_data(d1.as_bytes(), cc), hash_revision_data(d2.as_bytes(), cc));
        // Go JSON output is valid JSON that parses back to the same value.
        let back: Value = serde_json::from_str(&to_go_json(&v)).unwrap();
        prop_assert!(equal_revision_data(&back, &v));
    }

    #[test]
    fn truncate_never_deletes_live(n in 0usize..12, limit in -2i32..8, cur in 0usize..12, upd in 0usize..12) {
        let h: Vec<_> = (0..n).map(|i| rev(&format!("w-{i}"), i as i64, json!({}))).collect();
        let cur = format!("w-{cur}");
        let upd = format!("w-{upd}");
        let del = revisions_to_truncate(&h, limit, &cur, &upd, &BTreeSet::new());
        prop_assert!(!del.contains(&cur) && !del.contains(&upd));
        let non_live = h.iter().filter(|r| r.metadata.name.as_deref() != Some(&cur) && r.metadata.name.as_deref() != Some(&upd)).count();
        prop_assert_eq!(non_live - del.len(), non_live.min(limit.max(0) as usize));
    }
}

/// The data an earlier kruise-rs stored: the template as the user wrote it (Go artefacts and
/// `$patch` only), before revision data was written as Go encodes the template.
fn data_stored_before_go_encoding() -> Value {
    template_revision_data(&json!({
        "metadata": {"labels": {"app": "demo"}},
        "spec": {"hostNetwork": false, "containers": [{"name": "main", "image": "nginx", "tty": false,
            "resources": {"requests": {"cpu": "0.5", "memory": "1024Mi"}, "limits": {"cpu": "1000m"}},
            "livenessProbe": {"tcpSocket": {"port": 80}, "initialDelaySeconds": 0, "periodSeconds": 10}}],
            "volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
                "spec": {"accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "1Gi"}}}}}}]}
    }))
}

fn data_written_now() -> Value {
    template_revision_data(&kruise_compat::pod_defaults::go_encoded_pod_template(
        &data_stored_before_go_encoding()["spec"]["template"],
    ))
}

#[test]
fn data_stored_before_go_encoding_equals_todays_data_for_the_same_template() {
    let (old, new) = (data_stored_before_go_encoding(), data_written_now());
    // The bytes (and so the hash) differ: only a semantic comparison finds the old revision.
    assert_ne!(revision_data_raw(&old), revision_data_raw(&new));
    assert!(equal_revision_data(&old, &new));
    let history = vec![rev("demo-old", 3, old.clone())];
    assert_eq!(
        decide_update_revision(&history, &new),
        UpdateRevisionDecision::ReuseNewest {
            name: "demo-old".into()
        }
    );
    assert_eq!(
        on_name_collision(&history[0], &new, 0),
        CollisionDecision::Reuse
    );
}

#[test]
fn a_real_change_under_the_old_encoding_is_still_a_change() {
    let old = data_stored_before_go_encoding();
    let mut changed = data_written_now();
    changed["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] =
        json!("600m");
    assert!(!equal_revision_data(&old, &changed));
    let mut probe_changed = data_written_now();
    probe_changed["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["initialDelaySeconds"] =
        json!(5);
    assert!(!equal_revision_data(&old, &probe_changed));
}

#[test]
fn template_revisions_reuse_roll_back_or_create_and_name_the_current_one() {
    let data = |image: &str| template_revision_data(&template(image));
    let history = vec![
        rev("set-a", 1, data("nginx:1")),
        rev("set-b", 2, data("nginx:2")),
    ];
    let new = NewRevision {
        parent_name: "set".into(),
        namespace: Some("ns".into()),
        ..NewRevision::default()
    };
    let marks = BTreeMap::from([("mark".to_string(), "m".to_string())]);

    // The newest revision has the template's data: reused, nothing written.
    let plan =
        plan_template_revisions(&history, &template("nginx:2"), new.clone(), &marks, "set-a");
    assert_eq!(plan.write, RevisionWrite::None);
    assert_eq!(plan.update.metadata.name.as_deref(), Some("set-b"));
    assert_eq!(plan.current.metadata.name.as_deref(), Some("set-a"));

    // An older one has it: a rollback bumps its `.revision` and marks it.
    let plan = plan_template_revisions(&history, &template("nginx:1"), new.clone(), &marks, "");
    let RevisionWrite::Update(bumped) = &plan.write else {
        panic!("expected a bump, got {:?}", plan.write);
    };
    assert_eq!(bumped.metadata.name.as_deref(), Some("set-a"));
    assert_eq!(bumped.revision, 3);
    assert_eq!(bumped.metadata.annotations.as_ref().unwrap()["mark"], "m");
    // No current revision named: the update revision.
    assert_eq!(plan.current, plan.update);

    // None has it: a new revision from `new`, numbered after the newest, marked.
    let plan = plan_template_revisions(&history, &template("nginx:3"), new, &marks, "gone");
    let RevisionWrite::Create(created) = &plan.write else {
        panic!("expected a create, got {:?}", plan.write);
    };
    assert_eq!(created.revision, 3);
    assert_eq!(created.metadata.namespace.as_deref(), Some("ns"));
    assert!(
        created
            .metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with("set-")
    );
    assert_eq!(created.metadata.annotations.as_ref().unwrap()["mark"], "m");
    assert_eq!(plan.current, plan.update);
}
