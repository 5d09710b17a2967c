//! Differential test against OpenKruise's own Go code (`kruise_testkit::oracle`): random
//! Advanced DaemonSets (`v1alpha1`, the version OpenKruise v1.8.3 serves) go through
//! kruise-daemonset's defaulting webhook and revision planner and through
//! `testkit/oracles/families/daemonset` (OpenKruise's
//! `SetDefaultsDaemonSet` and its controller's own `getPatch`), and every output must
//! match: the stored spec, the ControllerRevision's data, labels and annotations.
//!
//! Not compared, by design (`kruise_core::revision`'s module docs, docs/daemonset.md): the
//! template hash in the revision's name and `controller-revision-hash` label. OpenKruise
//! takes it from Kubernetes' `ComputeHash` (FNV-1a over `spew`'s dump of the Go structs);
//! kruise-rs hashes the template's JSON, and adopts a revision OpenKruise named with its
//! hash as it is, pods untouched.
//!
//! A second test validates random DaemonSets, valid and broken in one of many ways, with
//! kruise-daemonset's validation and OpenKruise's webhook validation
//! (`testkit/oracles/families/validation`: `validateDaemonSet`, Kubernetes' pod template
//! validation included): both must accept or refuse alike, naming the same fields.
//!
//! Run by `.ci/run`: `KRUISE_ORACLE_BIN_DIR=… cargo test -p kruise-daemonset --test
//! openkruise_oracle -- --ignored` (`KRUISE_ORACLE_SEED` draws other inputs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kruise_admission::crd_webhooks::Defaulting as _;
use kruise_core::api::keys::CONTROLLER_REVISION_HASH_KEY;
use kruise_core::revision::template_hash;
use kruise_daemonset::admission::MutateDaemonSet;
use kruise_daemonset::api::Served;
use kruise_daemonset::api::v1beta1::DaemonSet;
use kruise_daemonset::api::validation::validate;
use kruise_daemonset::plan::revisions::{RevisionWrite, plan_revisions};
use kruise_testkit::oracle;
use proptest::collection::btree_map;
use proptest::option;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// `updateStrategy` with some of its fields set, unset or empty.
fn update_strategy() -> impl Strategy<Value = Value> {
    (
        option::of(prop_oneof![
            Just(""),
            Just("RollingUpdate"),
            Just("OnDelete")
        ]),
        option::of((
            option::of(prop_oneof![
                Just(""),
                Just("Standard"),
                Just("Surging"),
                Just("InPlaceIfPossible")
            ]),
            option::of(prop_oneof![
                Just(json!(0)),
                Just(json!(2)),
                Just(json!("20%"))
            ]),
            option::of(prop_oneof![
                Just(json!(0)),
                Just(json!(1)),
                Just(json!("10%"))
            ]),
            option::of(0..4i32),
            option::of(any::<bool>()),
            any::<bool>(),
        )),
    )
        .prop_map(|(type_, rolling)| {
            let mut s = Map::new();
            if let Some(t) = type_ {
                s.insert("type".into(), json!(t));
            }
            if let Some((kind, max_unavailable, max_surge, partition, paused, selector)) = rolling {
                let mut r = Map::new();
                if let Some(k) = kind {
                    r.insert("rollingUpdateType".into(), json!(k));
                }
                if let Some(m) = max_unavailable {
                    r.insert("maxUnavailable".into(), m);
                }
                if let Some(m) = max_surge {
                    r.insert("maxSurge".into(), m);
                }
                if let Some(p) = partition {
                    r.insert("partition".into(), json!(p));
                }
                if let Some(p) = paused {
                    r.insert("paused".into(), json!(p));
                }
                if selector {
                    r.insert(
                        "selector".into(),
                        json!({"matchLabels": {"canary": "true"}}),
                    );
                }
                s.insert("rollingUpdate".into(), Value::Object(r));
            }
            Value::Object(s)
        })
}

/// A DaemonSet as users write it, with some annotations (copied onto its revisions).
fn daemon_set() -> impl Strategy<Value = Value> {
    (
        oracle::pod_template(),
        option::of(update_strategy()),
        option::of(0..30i32),
        option::of(prop_oneof![Just(json!(10)), Just(json!("50%"))]),
        option::of(0..12i32),
        any::<bool>(),
        btree_map("[a-z]{1,4}\\.io/[a-z]{1,5}", "[a-z0-9]{0,4}", 0..3),
    )
        .prop_map(
            |(mut template, strategy, min_ready, burst, history, lifecycle, annotations)| {
                template["metadata"]["labels"]["app"] = json!("agent");
                // Pod-level resources came with Kubernetes 1.32; OpenKruise v1.8.3 builds
                // with 1.30's types, so its controller never sees them.
                if let Some(spec) = template["spec"].as_object_mut() {
                    spec.remove("resources");
                }
                let mut spec = json!({"selector": {"matchLabels": {"app": "agent"}},
                                      "template": template});
                if let Some(s) = strategy {
                    spec["updateStrategy"] = s;
                }
                if let Some(m) = min_ready {
                    spec["minReadySeconds"] = json!(m);
                }
                if let Some(b) = burst {
                    spec["burstReplicas"] = b;
                }
                if let Some(h) = history {
                    spec["revisionHistoryLimit"] = json!(h);
                }
                if lifecycle {
                    spec["lifecycle"] =
                        json!({"preDelete": {"labelsHandler": {"example.com/hold": "true"}}});
                }
                let mut metadata = json!({"namespace": "default", "uid": "u1"});
                if !annotations.is_empty() {
                    metadata["annotations"] = json!(annotations);
                }
                json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "DaemonSet",
                       "metadata": metadata, "spec": spec})
            },
        )
}

#[test]
#[ignore = "needs the Go oracle built by .ci/run (KRUISE_ORACLE_BIN_DIR)"]
fn defaults_and_revisions_match_openkruise() {
    oracle::on_big_stack(compare_defaults_and_revisions);
}

fn compare_defaults_and_revisions() {
    let objects = oracle::samples(daemon_set(), 300);
    let mut inputs = Vec::new();
    let mut revisions = Vec::new();
    for (i, mut object) in objects.into_iter().enumerate() {
        object["metadata"]["name"] = json!(format!("ds{i}"));
        let patch = MutateDaemonSet.patch("v1alpha1", &object, None).unwrap();
        let mut stored = object.clone();
        json_patch::patch(&mut stored, &patch).unwrap();
        let mut beta = stored.clone();
        beta["apiVersion"] = json!("apps.kruise.io/v1beta1");
        let ds: DaemonSet = serde_json::from_value(beta).unwrap();
        let template = serde_json::to_value(&ds.spec.template).unwrap();
        let revision = match plan_revisions(&ds, &template_hash(&template, None), &[]).write {
            RevisionWrite::Create(revision) => *revision,
            other => panic!("expected a new revision, got {other:?}"),
        };
        inputs.push(json!({"daemonSet": object, "ours": stored}));
        revisions.push(revision);
    }
    let expected = oracle::run_json("daemonset-values", &inputs);
    let mut mismatches = oracle::Mismatches::default();
    for ((input, go), revision) in inputs.iter().zip(&expected).zip(&revisions) {
        let go_data: Value = serde_json::from_str(go["revisionData"].as_str().unwrap()).unwrap();
        let without_hash = |labels: &Value| {
            let mut labels = labels.clone();
            if let Some(map) = labels.as_object_mut() {
                map.remove(CONTROLLER_REVISION_HASH_KEY);
            }
            labels
        };
        let checks = [
            // Every spec field, both read by Go (what each holds, as Go encodes it).
            (
                "spec",
                go["ours"]["spec"].clone(),
                go["daemonSet"]["spec"].clone(),
            ),
            (
                "revision data",
                revision.data.clone().map(|d| d.0).unwrap_or_default(),
                go_data,
            ),
            (
                "revision labels but the hash",
                without_hash(&json!(revision.metadata.labels)),
                without_hash(&go["labels"]),
            ),
            (
                "revision annotations",
                json!(revision.metadata.annotations.clone().unwrap_or_default()),
                go["daemonSet"]["metadata"]
                    .get("annotations")
                    .cloned()
                    .unwrap_or_else(|| json!({})),
            ),
        ];
        for (what, ours, theirs) in checks {
            mismatches.check(what, input, &ours, &theirs);
        }
    }
    mismatches.assert_none();
}

/// One way to break a stored DaemonSet (or none).
fn breakage() -> impl Strategy<Value = Option<(&'static str, Value)>> {
    option::of(prop_oneof![
        Just(("/metadata/name", json!("Agent"))),
        Just(("/spec/minReadySeconds", json!(-1))),
        Just(("/spec/revisionHistoryLimit", json!(-3))),
        Just(("/spec/selector", json!({}))),
        Just(("/spec/selector", json!({"matchLabels": {"app": "other"}}))),
        Just(("/spec/updateStrategy/type", json!("Blue"))),
        Just(("/spec/updateStrategy/rollingUpdate", Value::Null)),
        Just((
            "/spec/updateStrategy/rollingUpdate/maxUnavailable",
            json!(0)
        )),
        Just((
            "/spec/updateStrategy/rollingUpdate/maxUnavailable",
            json!("120%")
        )),
        Just(("/spec/updateStrategy/rollingUpdate/maxSurge", json!(2))),
        Just((
            "/spec/updateStrategy/rollingUpdate/rollingUpdateType",
            json!("Sideways")
        )),
        Just(("/spec/updateStrategy/rollingUpdate/partition", json!(-1))),
        Just(("/spec/template/spec/restartPolicy", json!("OnFailure"))),
        Just(("/spec/template/spec/activeDeadlineSeconds", json!(30))),
        Just(("/spec/template/spec/containers/0/name", json!("Main_1"))),
        Just(("/spec/template/spec/containers/0/image", json!(""))),
        Just(("/spec/template/spec/dnsPolicy", json!("None"))),
        Just((
            "/spec/lifecycle",
            json!({"inPlaceUpdate": {"labelsHandler": {"a": "b"}}})
        )),
    ])
}

/// OpenKruise's paths, but the two kruise-daemonset deliberately writes as the fields' own
/// (its validation module's docs): Go doubles the `rollingUpdate` segment there.
fn own_path(field: &str) -> String {
    field
        .replace(
            "rollingUpdate.rollingUpdate.type",
            "rollingUpdate.rollingUpdateType",
        )
        .replace(
            "rollingUpdate.rollingUpdate.partition",
            "rollingUpdate.partition",
        )
}

#[test]
#[ignore = "needs the Go oracle built by .ci/run (KRUISE_ORACLE_BIN_DIR)"]
fn validation_matches_openkruise() {
    oracle::on_big_stack(compare_validation);
}

fn compare_validation() {
    let cases = oracle::samples((daemon_set(), breakage()), 400);
    let mut inputs = Vec::new();
    let mut ours = Vec::new();
    for (i, (mut object, broken)) in cases.into_iter().enumerate() {
        object["metadata"]["name"] = json!(format!("ds{i}"));
        // What the validating webhook sees: the DaemonSet as the mutating webhook stored it.
        let patch = MutateDaemonSet.patch("v1alpha1", &object, None).unwrap();
        let mut stored = object.clone();
        json_patch::patch(&mut stored, &patch).unwrap();
        if let Some((path, value)) = broken
            && let Some((parent, key)) = path.rsplit_once('/')
            && let Some(Value::Object(parent)) = stored.pointer_mut(parent)
        {
            parent.insert(key.into(), value);
        }
        let mut beta = stored.clone();
        beta["apiVersion"] = json!("apps.kruise.io/v1beta1");
        let ds: DaemonSet = serde_json::from_value(beta).unwrap();
        let errors: Vec<Value> = validate(&ds, None, Served::V1alpha1)
            .iter()
            .map(|e| json!({"type": e.type_.as_str(), "field": e.field.as_str()}))
            .collect();
        inputs.push(json!({"kind": "DaemonSet", "object": stored}));
        ours.push(errors);
    }
    oracle::compare_validation("workload-validation", &inputs, &ours, own_path);
}
