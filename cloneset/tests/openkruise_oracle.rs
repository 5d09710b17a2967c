//! Differential tests against OpenKruise's own Go code (`kruise_testkit::oracle`): random
//! pod templates, claim templates and resource quantities, generated here, go through both
//! kruise-cloneset and the Go program `testkit/oracles` (OpenKruise's
//! CloneSet template defaulting on Kubernetes' `SetDefaults_*`, `HashControllerRevision`,
//! OpenKruise's claim-template hasher, `resource.Quantity`), and every output must match:
//! the stored template and claims, the ControllerRevision's data and name, the claim
//! template hash annotation, and each quantity's canonical form.
//!
//! A third test validates random CloneSets, valid and broken in one of many ways, with
//! kruise-cloneset's validation and OpenKruise's webhook validation
//! (`testkit/oracles/families/validation`: `validateCloneSet`, Kubernetes' pod template
//! validation included): both must accept or refuse alike, naming the same fields.
//!
//! Run by `.ci/run`: `KRUISE_ORACLE_BIN_DIR=… cargo test -p kruise-cloneset --test
//! openkruise_oracle -- --ignored` (`KRUISE_ORACLE_SEED` draws other inputs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_admission::crd_webhooks::Defaulting as _;
use kruise_cloneset::admission::MutateCloneSet;
use kruise_cloneset::api::validation::validate_v1alpha1;
use kruise_cloneset::api::{v1alpha1, v1beta1};
use kruise_cloneset::plan::{RevisionWrite, plan_revisions};
use kruise_compat::quantity::canonical_milli_quantity;
use kruise_core::api::keys::CLONESET_VCT_HASH_KEY;
use kruise_testkit::oracle;
use proptest::option;
use proptest::prelude::*;
use serde_json::{Value, json};

/// A resource quantity as users write them: any mantissa, fraction and suffix Kubernetes
/// knows (and some it refuses).
fn quantity() -> impl Strategy<Value = String> {
    (
        prop_oneof![3 => Just(""), 1 => Just("+"), 1 => Just("-")],
        "[0-9]{1,7}",
        option::of("[0-9]{1,5}"),
        prop_oneof![
            Just(""),
            Just("n"),
            Just("u"),
            Just("m"),
            Just("k"),
            Just("M"),
            Just("G"),
            Just("T"),
            Just("P"),
            Just("E"),
            Just("Ki"),
            Just("Mi"),
            Just("Gi"),
            Just("Ti"),
            Just("Pi"),
            Just("Ei"),
            Just("e3"),
            Just("E6"),
            Just("e-2"),
            Just("E-4"),
            Just("e0"),
            Just("e18"),
            Just("K"),
            Just("mi")
        ],
    )
        .prop_map(|(sign, whole, fraction, suffix)| match fraction {
            Some(f) => format!("{sign}{whole}.{f}{suffix}"),
            None => format!("{sign}{whole}{suffix}"),
        })
}

/// What kruise-cloneset stores for a CloneSet `name` with `template` and `claims`, and the
/// ControllerRevision it then creates.
fn stored_and_revision(
    name: &str,
    template: &Value,
    claims: &[Value],
) -> (Value, ControllerRevision) {
    let object = json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "CloneSet",
        "metadata": {"name": name, "namespace": "default", "uid": "u1"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}},
                 "template": template, "volumeClaimTemplates": claims}
    });
    // A CREATE's defaults (template defaults on, OpenKruise's default).
    let patch = MutateCloneSet::default()
        .patch("v1alpha1", &object, None)
        .unwrap();
    let mut stored = object.clone();
    json_patch::patch(&mut stored, &patch).unwrap();
    let mut beta = stored.clone();
    beta["apiVersion"] = json!("apps.kruise.io/v1beta1");
    beta["spec"]["updateStrategy"] = json!({"type": "RollingUpdate"});
    let set: v1beta1::CloneSet = serde_json::from_value(beta).unwrap();
    let revision = match plan_revisions(&set, &[]).write {
        RevisionWrite::Create(revision) => *revision,
        other => panic!("expected a new revision, got {other:?}"),
    };
    (stored, revision)
}

#[test]
#[ignore = "needs the Go oracle built by .ci/run (KRUISE_ORACLE_BIN_DIR)"]
fn template_defaults_revision_and_claim_hashes_match_openkruise() {
    let cases = oracle::samples((oracle::pod_template(), oracle::claim_templates()), 400);
    let inputs: Vec<Value> = cases
        .iter()
        .enumerate()
        .map(|(i, (template, claims))| {
            json!({"name": format!("set{i}"), "template": template, "volumeClaimTemplates": claims})
        })
        .collect();
    let expected = oracle::run_json("cloneset-values", &inputs);
    let mut mismatches = oracle::Mismatches::default();
    for (input, go) in inputs.iter().zip(&expected) {
        let claims = input["volumeClaimTemplates"].as_array().unwrap();
        let (stored, revision) =
            stored_and_revision(input["name"].as_str().unwrap(), &input["template"], claims);
        let data: Value = serde_json::from_str(go["revisionData"].as_str().unwrap()).unwrap();
        let rust_claims = stored["spec"]["volumeClaimTemplates"].clone();
        let go_claims = if go["volumeClaimTemplates"].is_null() {
            json!([])
        } else {
            go["volumeClaimTemplates"].clone()
        };
        let checks = [
            (
                "template",
                stored["spec"]["template"].clone(),
                go["template"].clone(),
            ),
            ("volumeClaimTemplates", rust_claims, go_claims),
            (
                "revision data",
                revision.data.clone().map(|d| d.0).unwrap_or_default(),
                data,
            ),
            (
                "revision name",
                json!(revision.metadata.name),
                go["revisionName"].clone(),
            ),
            (
                "claim template hash",
                json!(
                    revision
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(CLONESET_VCT_HASH_KEY))
                ),
                go["vctHash"].clone(),
            ),
        ];
        for (what, ours, theirs) in checks {
            mismatches.check(what, input, &ours, &theirs);
        }
    }
    mismatches.assert_none();
}

#[test]
#[ignore = "needs the Go oracle built by .ci/run (KRUISE_ORACLE_BIN_DIR)"]
fn quantities_are_written_back_as_kubernetes_writes_them() {
    let inputs = oracle::samples(quantity(), 5000);
    let stdout = oracle::run("quantities", inputs.join("\n").as_bytes());
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), inputs.len());
    let mut mismatches = oracle::Mismatches::default();
    for (input, line) in inputs.iter().zip(lines) {
        // `"<input>" {"cpu":"<canonical>"}` or `"<input>" ERR`.
        let (_, answer) = line.split_once(' ').unwrap();
        let theirs = match answer {
            "ERR" => None,
            json_list => serde_json::from_str::<Value>(json_list).unwrap()["cpu"]
                .as_str()
                .map(String::from),
        };
        let ours = canonical_milli_quantity(input);
        mismatches.check(
            "canonical form",
            &json!(input),
            &json!(ours),
            &json!(theirs),
        );
    }
    mismatches.assert_none();
}

/// A CloneSet's `updateStrategy` and `scaleStrategy`, some fields set.
fn strategies() -> impl Strategy<Value = (Value, Value)> {
    (
        option::of(prop_oneof![
            Just("ReCreate"),
            Just("InPlaceIfPossible"),
            Just("InPlaceOnly")
        ]),
        option::of(prop_oneof![
            Just(json!(0)),
            Just(json!(2)),
            Just(json!("30%"))
        ]),
        option::of(prop_oneof![
            Just(json!(0)),
            Just(json!(1)),
            Just(json!("20%"))
        ]),
        option::of(prop_oneof![
            Just(json!(0)),
            Just(json!(1)),
            Just(json!("50%"))
        ]),
        any::<bool>(),
        option::of(prop_oneof![Just(json!(1)), Just(json!("10%"))]),
    )
        .prop_map(
            |(type_, partition, max_unavailable, max_surge, paused, scale)| {
                let mut update = json!({});
                if let Some(t) = type_ {
                    update["type"] = json!(t);
                }
                if let Some(p) = partition {
                    update["partition"] = p;
                }
                if let Some(m) = max_unavailable {
                    update["maxUnavailable"] = m;
                }
                if let Some(m) = max_surge {
                    update["maxSurge"] = m;
                }
                if paused {
                    update["paused"] = json!(true);
                }
                let scale = match scale {
                    Some(m) => json!({"maxUnavailable": m}),
                    None => json!({}),
                };
                (update, scale)
            },
        )
}

/// One way to break a stored CloneSet (or none).
fn breakage() -> impl Strategy<Value = Option<(&'static str, Value)>> {
    option::of(prop_oneof![
        Just(("/metadata/name", json!("Web_1"))),
        Just(("/spec/replicas", json!(-1))),
        Just(("/spec/selector", json!({}))),
        Just(("/spec/selector", json!({"matchLabels": {"app": "other"}}))),
        Just(("/spec/updateStrategy/type", json!("Blue"))),
        Just(("/spec/updateStrategy/partition", json!(-1))),
        Just(("/spec/updateStrategy/partition", json!("120%"))),
        Just(("/spec/updateStrategy/maxUnavailable", json!("abc"))),
        Just(("/spec/updateStrategy/maxSurge", json!(3))),
        Just((
            "/spec/updateStrategy/priorityStrategy",
            json!({"weightPriority": [{"weight": 10}]})
        )),
        Just((
            "/spec/updateStrategy/scatterStrategy",
            json!([{"key": "zone"}])
        )),
        Just(("/spec/template/spec/restartPolicy", json!("Never"))),
        Just(("/spec/template/spec/activeDeadlineSeconds", json!(30))),
        Just(("/spec/template/spec/containers/0/name", json!("Main_1"))),
        Just(("/spec/template/spec/containers/0/image", json!(""))),
        Just(("/spec/template/spec/dnsPolicy", json!("None"))),
        Just(("/spec/scaleStrategy/podsToDelete", json!(["a", "a"]))),
    ])
}

#[test]
#[ignore = "needs the Go oracle built by .ci/run (KRUISE_ORACLE_BIN_DIR)"]
fn validation_matches_openkruise() {
    oracle::on_big_stack(compare_validation);
}

fn compare_validation() {
    let cases = oracle::samples(
        (
            (oracle::pod_template(), oracle::claim_templates()),
            strategies(),
            breakage(),
        ),
        400,
    );
    let mut inputs = Vec::new();
    let mut ours = Vec::new();
    for (i, ((mut template, claims), (update, scale), broken)) in cases.into_iter().enumerate() {
        template["metadata"]["labels"]["app"] = json!("web");
        // Pod-level resources came with Kubernetes 1.32; OpenKruise v1.8.3 builds with 1.30's
        // types, so its webhook never sees them.
        if let Some(spec) = template["spec"].as_object_mut() {
            spec.remove("resources");
        }
        let object = json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
            "metadata": {"name": format!("set{i}"), "namespace": "default", "uid": "u1"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": template, "volumeClaimTemplates": claims,
                     "updateStrategy": update, "scaleStrategy": scale}
        });
        // What the validating webhook sees: the CloneSet as the mutating webhook stored it.
        let patch = MutateCloneSet::default()
            .patch("v1alpha1", &object, None)
            .unwrap();
        let mut stored = object.clone();
        json_patch::patch(&mut stored, &patch).unwrap();
        if let Some((path, value)) = broken
            && let Some((parent, key)) = path.rsplit_once('/')
            && let Some(Value::Object(parent)) = stored.pointer_mut(parent)
        {
            parent.insert(key.into(), value);
        }
        let Ok(set) = serde_json::from_value::<v1alpha1::CloneSet>(stored.clone()) else {
            // A value the typed API refuses (an int-or-string that is neither) is refused by
            // the API server's schema before any webhook; not a validation case.
            continue;
        };
        let errors: Vec<Value> = validate_v1alpha1(&set, None, None)
            .iter()
            .map(|e| json!({"type": e.type_.as_str(), "field": e.field.as_str()}))
            .collect();
        inputs.push(json!({"kind": "CloneSet", "object": stored}));
        ours.push(errors);
    }
    oracle::compare_validation("workload-validation", &inputs, &ours, str::to_string);
}
