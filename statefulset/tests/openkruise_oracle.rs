//! Differential test against OpenKruise's own Go code (`kruise_testkit::oracle`): random
//! Advanced StatefulSets go through kruise-statefulset's defaulting webhook and revision
//! planner and through `testkit/oracles/families/
//! statefulset` (OpenKruise v1.8.3's `SetDefaultsStatefulSet` with the template and
//! volumeClaimTemplates defaults, under random `StatefulSetAutoDeletePVC` /
//! `StatefulSetAutoResizePVCGate` gates, and its controller's own `newRevision`), and every
//! output must match: the stored spec, the stored template and claim templates byte for
//! byte, the ControllerRevision's data, name, labels and annotations.
//!
//! A second test converts random sets between `v1alpha1` and `v1beta1` with kruise-rs's
//! `/convert` mapping and with OpenKruise's own `ConvertTo` / `ConvertFrom`
//! (`testkit/oracles/families/conversion`); both results, read by OpenKruise's Go type of
//! the target version, must be equal. kruise-rs also keeps what OpenKruise's conversion
//! drops (the `v1beta1`-only fields on the way to `v1alpha1`, K#2102): a `v1beta1` set
//! converted there and back must come back unchanged.
//!
//! A third test validates random sets, valid and broken in one of many ways, with
//! kruise-statefulset's validation and OpenKruise's webhook validation
//! (`testkit/oracles/families/validation`: `validateStatefulSet`, Kubernetes' pod template
//! validation included): both must accept or refuse alike, naming the same fields.
//!
//! Run by `.ci/run`: `KRUISE_ORACLE_BIN_DIR=… cargo test -p kruise-statefulset --test
//! openkruise_oracle -- --ignored` (`KRUISE_ORACLE_SEED` draws other inputs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kruise_admission::conversion::convert_object;
use kruise_admission::crd_webhooks::Defaulting as _;
use kruise_compat::pod_defaults::TemplateDefaults;
use kruise_statefulset::admission::MutateStatefulSet;
use kruise_statefulset::api::defaults::DefaultingGates;
use kruise_statefulset::api::v1beta1::StatefulSet;
use kruise_statefulset::api::validation::validate;
use kruise_statefulset::conversion::StatefulSetConverter;
use kruise_statefulset::plan::{RevisionWrite, plan_revisions};
use kruise_testkit::oracle;
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// `rollingUpdate` with some of its fields set.
fn rolling_update() -> impl Strategy<Value = Value> {
    (
        option::of(0..5i32),
        option::of(prop_oneof![
            Just(json!(0)),
            Just(json!(2)),
            Just(json!("25%"))
        ]),
        option::of(prop_oneof![
            Just(""),
            Just("ReCreate"),
            Just("InPlaceIfPossible"),
            Just("InPlaceOnly")
        ]),
        any::<bool>(),
        option::of(0..30i32),
        option::of(0..10i64),
        any::<bool>(),
    )
        .prop_map(
            |(partition, max_unavailable, policy, paused, min_ready, grace, unordered)| {
                let mut r = Map::new();
                if let Some(p) = partition {
                    r.insert("partition".into(), json!(p));
                }
                if let Some(m) = max_unavailable {
                    r.insert("maxUnavailable".into(), m);
                }
                if let Some(p) = policy {
                    r.insert("podUpdatePolicy".into(), json!(p));
                }
                if paused {
                    r.insert("paused".into(), json!(true));
                }
                if let Some(m) = min_ready {
                    r.insert("minReadySeconds".into(), json!(m));
                }
                if let Some(g) = grace {
                    r.insert(
                        "inPlaceUpdateStrategy".into(),
                        json!({"gracePeriodSeconds": g}),
                    );
                }
                if unordered {
                    r.insert(
                        "unorderedUpdate".into(),
                        json!({"priorityStrategy": {"weightPriority": [
                            {"weight": 50, "matchSelector": {"matchLabels": {"tier": "a"}}}]}}),
                    );
                }
                Value::Object(r)
            },
        )
}

/// A spec as users write them: every defaulted field set, unset or empty.
fn spec() -> impl Strategy<Value = Value> {
    (
        (oracle::pod_template(), oracle::claim_templates()),
        option::of(0..5i32),
        option::of(prop_oneof![
            Just(""),
            Just("OrderedReady"),
            Just("Parallel")
        ]),
        option::of((
            option::of(prop_oneof![
                Just(""),
                Just("RollingUpdate"),
                Just("OnDelete")
            ]),
            option::of(rolling_update()),
        )),
        option::of(0..12i32),
        option::of((
            option::of(prop_oneof![Just(""), Just("Retain"), Just("Delete")]),
            option::of(prop_oneof![Just(""), Just("Retain"), Just("Delete")]),
        )),
        option::of(prop_oneof![
            Just(""),
            Just("OnDelete"),
            Just("OnPodRollingUpdate")
        ]),
        (
            vec(
                prop_oneof![(0..6i32).prop_map(|o| json!(o)), Just(json!("7-8"))],
                0..3,
            ),
            option::of(0..3i32),
            option::of(prop_oneof![Just(json!(1)), Just(json!("50%"))]),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (template, claims),
                replicas,
                management,
                strategy,
                history,
                retention,
                claim_update,
                (reserve, ordinals_start, scale_max_unavailable, lifecycle),
            )| {
                let mut template = template;
                template["metadata"]["labels"]["app"] = json!("web");
                // Pod-level resources came with Kubernetes 1.32; OpenKruise v1.8.3 builds
                // with 1.30's types, so its controller never sees them.
                if let Some(spec) = template["spec"].as_object_mut() {
                    spec.remove("resources");
                }
                let mut spec = json!({
                    "serviceName": "web",
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": template,
                });
                if !claims.is_empty() {
                    spec["volumeClaimTemplates"] = json!(claims);
                }
                if let Some(r) = replicas {
                    spec["replicas"] = json!(r);
                }
                if let Some(m) = management {
                    spec["podManagementPolicy"] = json!(m);
                }
                if let Some((type_, rolling)) = strategy {
                    let mut s = Map::new();
                    if let Some(t) = type_ {
                        s.insert("type".into(), json!(t));
                    }
                    if let Some(r) = rolling {
                        s.insert("rollingUpdate".into(), r);
                    }
                    spec["updateStrategy"] = Value::Object(s);
                }
                if let Some(h) = history {
                    spec["revisionHistoryLimit"] = json!(h);
                }
                if let Some((deleted, scaled)) = retention {
                    let mut p = Map::new();
                    if let Some(d) = deleted {
                        p.insert("whenDeleted".into(), json!(d));
                    }
                    if let Some(s) = scaled {
                        p.insert("whenScaled".into(), json!(s));
                    }
                    spec["persistentVolumeClaimRetentionPolicy"] = Value::Object(p);
                }
                if let Some(t) = claim_update {
                    spec["volumeClaimUpdateStrategy"] = json!({"type": t});
                }
                if !reserve.is_empty() {
                    spec["reserveOrdinals"] = json!(reserve);
                }
                if let Some(start) = ordinals_start {
                    spec["ordinals"] = json!({"start": start});
                }
                if let Some(m) = scale_max_unavailable {
                    spec["scaleStrategy"] = json!({"maxUnavailable": m});
                }
                if lifecycle {
                    spec["lifecycle"] =
                        json!({"preDelete": {"finalizersHandler": ["example.com/hook"]}});
                }
                spec
            },
        )
}

/// A set `name` with some annotations (OpenKruise copies them onto its revisions).
fn set_input() -> impl Strategy<Value = (Value, DefaultingGates)> {
    (
        spec(),
        btree_map("[a-z]{1,4}\\.io/[a-z]{1,5}", "[a-z0-9]{0,4}", 0..3),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(spec, annotations, auto_delete_pvc, auto_resize_pvc)| {
            let mut metadata = json!({"namespace": "default", "uid": "u1"});
            if !annotations.is_empty() {
                metadata["annotations"] = json!(annotations);
            }
            (
                json!({"metadata": metadata, "spec": spec}),
                DefaultingGates {
                    auto_delete_pvc,
                    auto_resize_pvc,
                },
            )
        })
}

/// kruise-rs's stored set (CREATE defaults, template defaults on) and the revision its
/// controller then creates.
fn stored_and_revision(
    object: &Value,
    gates: DefaultingGates,
) -> (Value, k8s_openapi::api::apps::v1::ControllerRevision) {
    let mutate = MutateStatefulSet {
        gates,
        template_defaults: TemplateDefaults {
            enabled: true,
            pod: Default::default(),
        },
    };
    let patch = mutate.patch("v1beta1", object, None).unwrap();
    let mut stored = object.clone();
    json_patch::patch(&mut stored, &patch).unwrap();
    let set: StatefulSet = serde_json::from_value(stored.clone()).unwrap();
    let revision = match plan_revisions(&set, &[]).write {
        RevisionWrite::Create(revision) => *revision,
        other => panic!("expected a new revision, got {other:?}"),
    };
    (stored, revision)
}

#[test]
#[ignore = "needs the Go oracle built by .ci/run (KRUISE_ORACLE_BIN_DIR)"]
fn defaults_and_revisions_match_openkruise() {
    oracle::on_big_stack(compare_defaults_and_revisions);
}

fn compare_defaults_and_revisions() {
    let cases = oracle::samples(set_input(), 300);
    let mut inputs = Vec::new();
    let mut ours = Vec::new();
    for (i, (mut object, gates)) in cases.into_iter().enumerate() {
        object["apiVersion"] = json!("apps.kruise.io/v1beta1");
        object["kind"] = json!("StatefulSet");
        object["metadata"]["name"] = json!(format!("set{i}"));
        let (stored, revision) = stored_and_revision(&object, gates);
        inputs.push(json!({
            "set": object,
            "gates": {"StatefulSetAutoDeletePVC": gates.auto_delete_pvc,
                      "StatefulSetAutoResizePVCGate": gates.auto_resize_pvc},
            "ours": stored,
        }));
        ours.push((stored, revision));
    }
    let expected = oracle::run_json("statefulset-values", &inputs);
    let mut mismatches = oracle::Mismatches::default();
    for ((input, go), (stored, revision)) in inputs.iter().zip(&expected).zip(&ours) {
        let go_data: Value = serde_json::from_str(go["revisionData"].as_str().unwrap()).unwrap();
        let go_claims = match &go["set"]["spec"]["volumeClaimTemplates"] {
            Value::Null => json!([]),
            claims => claims.clone(),
        };
        let our_claims = match &stored["spec"]["volumeClaimTemplates"] {
            Value::Null => json!([]),
            claims => claims.clone(),
        };
        let checks = [
            // Every spec field, both read by Go (what each holds, as Go encodes it).
            (
                "spec",
                go["ours"]["spec"].clone(),
                go["set"]["spec"].clone(),
            ),
            // The template and claims as written: the revision hash depends on their bytes.
            (
                "template",
                stored["spec"]["template"].clone(),
                go["set"]["spec"]["template"].clone(),
            ),
            ("volumeClaimTemplates", our_claims, go_claims),
            (
                "revision data",
                revision.data.clone().map(|d| d.0).unwrap_or_default(),
                go_data,
            ),
            (
                "revision name",
                json!(revision.metadata.name),
                go["revision"]["metadata"]["name"].clone(),
            ),
            (
                "revision labels",
                json!(revision.metadata.labels),
                go["revision"]["metadata"]["labels"].clone(),
            ),
            (
                "revision annotations",
                json!(revision.metadata.annotations.clone().unwrap_or_default()),
                go["revision"]["metadata"]
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

/// The `v1beta1` spec fields OpenKruise's `v1alpha1` type does not have.
const V1BETA1_ONLY_SPEC: &[&str] = &[
    "reserveOrdinals",
    "lifecycle",
    "scaleStrategy",
    "persistentVolumeClaimRetentionPolicy",
    "ordinals",
    "volumeClaimUpdateStrategy",
];

/// A status as the controller writes it, some fields set.
fn status() -> impl Strategy<Value = Value> {
    (
        (0..5i64, 0..5i32, 0..5i32, 0..5i32, option::of(0..3i32)),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(
                (generation, replicas, ready, updated, collisions),
                revisions,
                condition,
                beta_only,
            )| {
                let mut s = json!({"observedGeneration": generation, "replicas": replicas,
                               "readyReplicas": ready, "availableReplicas": ready,
                               "currentReplicas": replicas - updated.min(replicas),
                               "updatedReplicas": updated.min(replicas),
                               "labelSelector": "app=web"});
                if let Some(c) = collisions {
                    s["collisionCount"] = json!(c);
                }
                if revisions {
                    s["currentRevision"] = json!("web-6c4f9b7d8");
                    s["updateRevision"] = json!("web-7d5b8c9f6");
                }
                if condition {
                    s["conditions"] = json!([{"type": "FailedCreatePod", "status": "True",
                    "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "x", "message": "y"}]);
                }
                if beta_only {
                    s["updatedReadyReplicas"] = json!(updated.min(ready));
                    s["updatedAvailableReplicas"] = json!(updated.min(ready));
                    s["volumeClaims"] = json!([{"volumeClaimName": "data0",
                    "compatibleReplicas": 1, "compatibleReadyReplicas": 1}]);
                }
                s
            },
        )
}

#[test]
#[ignore = "needs the Go oracle built by .ci/run (KRUISE_ORACLE_BIN_DIR)"]
fn conversions_match_openkruise() {
    oracle::on_big_stack(compare_conversions);
}

fn compare_conversions() {
    let cases = oracle::samples((set_input(), status(), any::<bool>()), 300);
    let mut inputs = Vec::new();
    let mut mismatches = oracle::Mismatches::default();
    for (i, ((mut object, _), status, to_beta)) in cases.into_iter().enumerate() {
        object["metadata"]["name"] = json!(format!("set{i}"));
        object["kind"] = json!("StatefulSet");
        object["status"] = status;
        let (from, to) = if to_beta {
            // A v1alpha1 object as OpenKruise's clients write it: its own fields only.
            if let Some(spec) = object["spec"].as_object_mut() {
                spec.retain(|k, _| !V1BETA1_ONLY_SPEC.contains(&k.as_str()));
            }
            if let Some(status) = object["status"].as_object_mut() {
                status.retain(|k, _| {
                    ![
                        "updatedReadyReplicas",
                        "updatedAvailableReplicas",
                        "volumeClaims",
                    ]
                    .contains(&k.as_str())
                });
            }
            ("apps.kruise.io/v1alpha1", "apps.kruise.io/v1beta1")
        } else {
            ("apps.kruise.io/v1beta1", "apps.kruise.io/v1alpha1")
        };
        object["apiVersion"] = json!(from);
        let ours = convert_object(&StatefulSetConverter, object.clone(), to).unwrap();
        let back = convert_object(&StatefulSetConverter, ours.clone(), from).unwrap();
        mismatches.check("round trip", &object, &back, &object);
        inputs.push(json!({"object": object, "to": to.rsplit('/').next(), "ours": ours}));
    }
    let expected = oracle::run_json("statefulset-conversion", &inputs);
    for (input, go) in inputs.iter().zip(&expected) {
        for part in ["metadata", "spec", "status"] {
            mismatches.check(
                "converted object",
                input,
                &go["ours"][part],
                &go["converted"][part],
            );
        }
    }
    mismatches.assert_none();
}

/// One way to break a stored set (or none).
fn breakage() -> impl Strategy<Value = Option<(&'static str, Value)>> {
    option::of(prop_oneof![
        Just(("/metadata/name", json!("Web"))),
        Just(("/metadata/name", json!("web.v2"))),
        Just(("/spec/replicas", json!(-1))),
        Just(("/spec/podManagementPolicy", json!("Sometimes"))),
        Just(("/spec/updateStrategy/type", json!("Blue"))),
        Just(("/spec/updateStrategy/rollingUpdate/partition", json!(-2))),
        Just((
            "/spec/updateStrategy/rollingUpdate/minReadySeconds",
            json!(301)
        )),
        Just((
            "/spec/updateStrategy/rollingUpdate/podUpdatePolicy",
            json!("Replace")
        )),
        Just((
            "/spec/updateStrategy/rollingUpdate/maxUnavailable",
            json!("0%")
        )),
        Just((
            "/spec/updateStrategy/rollingUpdate/maxUnavailable",
            json!("150%")
        )),
        Just(("/spec/selector", json!({}))),
        Just(("/spec/selector", json!({"matchLabels": {"app": "other"}}))),
        Just(("/spec/template/spec/restartPolicy", json!("Never"))),
        Just(("/spec/template/spec/activeDeadlineSeconds", json!(30))),
        Just(("/spec/template/spec/containers/0/name", json!("Main_1"))),
        Just(("/spec/template/spec/containers/0/image", json!(""))),
        Just((
            "/spec/template/spec/containers/0/imagePullPolicy",
            json!("Sometimes")
        )),
        Just(("/spec/reserveOrdinals", json!([-1]))),
        Just((
            "/spec/persistentVolumeClaimRetentionPolicy/whenScaled",
            json!("Keep")
        )),
        Just(("/spec/scaleStrategy", json!({"maxUnavailable": "0%"}))),
        Just((
            "/spec/template/spec/terminationGracePeriodSeconds",
            json!(-5)
        )),
    ])
}

#[test]
#[ignore = "needs the Go oracle built by .ci/run (KRUISE_ORACLE_BIN_DIR)"]
fn validation_matches_openkruise() {
    oracle::on_big_stack(compare_validation);
}

fn compare_validation() {
    let cases = oracle::samples((set_input(), breakage()), 400);
    let mut inputs = Vec::new();
    let mut ours = Vec::new();
    for (i, ((mut object, gates), broken)) in cases.into_iter().enumerate() {
        object["apiVersion"] = json!("apps.kruise.io/v1beta1");
        object["kind"] = json!("StatefulSet");
        object["metadata"]["name"] = json!(format!("set{i}"));
        // What the validating webhook sees: the set as the mutating webhook stored it.
        let (mut stored, _) = stored_and_revision(&object, gates);
        if let Some((path, value)) = broken
            && let Some((parent, key)) = path.rsplit_once('/')
            && let Some(Value::Object(parent)) = stored.pointer_mut(parent)
        {
            parent.insert(key.into(), value);
        }
        let set: StatefulSet = serde_json::from_value(stored.clone()).unwrap();
        let errors: Vec<Value> = validate(&set, None)
            .iter()
            .map(|e| json!({"type": e.type_.as_str(), "field": e.field.as_str()}))
            .collect();
        inputs.push(json!({"kind": "StatefulSet", "object": stored}));
        ours.push(errors);
    }
    oracle::compare_validation("workload-validation", &inputs, &ours, str::to_string);
}
