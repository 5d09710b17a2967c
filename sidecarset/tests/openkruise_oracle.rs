//! Differential test against OpenKruise's own Go code (`kruise_testkit::oracle`): random
//! SidecarSets go through kruise-sidecarset's defaulting webhook and revision code and
//! through `testkit/oracles/sidecarset` (OpenKruise
//! v1.8.3's `SetDefaultsSidecarSet`, `SidecarSetHash`, `SidecarSetHashWithoutImage` and its
//! history control's `NewRevision`), and every output must match: the stored spec, both
//! hash annotations, the ControllerRevision's name and data.
//!
//! Run by `.ci/run`: `KRUISE_ORACLE_BIN_DIR=… cargo test -p kruise-sidecarset --test
//! openkruise_oracle -- --ignored` (`KRUISE_ORACLE_SEED` draws other inputs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kruise_admission::crd_webhooks::Defaulting as _;
use kruise_sidecarset::admission::SidecarSetMutatingHandler;
use kruise_sidecarset::api::hash::{go_sidecar_containers_json, hash_input};
use kruise_sidecarset::api::v1beta1::SidecarSet;
use kruise_sidecarset::api::{
    SIDECARSET_HASH_ANNOTATION, SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION,
};
use kruise_sidecarset::plan::revision::new_revision;
use kruise_testkit::oracle;
use proptest::option;
use proptest::prelude::*;
use serde_json::{Value, json};

/// A sidecar: a container with the SidecarSet-only fields, some set, some not.
fn sidecar(name: String, init: bool) -> impl Strategy<Value = Value> {
    (
        oracle::container(name),
        option::of(prop_oneof![
            Just("BeforeAppContainer"),
            Just("AfterAppContainer")
        ]),
        option::of(prop_oneof![Just("enabled"), Just("disabled")]),
        any::<bool>(),
    )
        .prop_map(move |(mut c, inject, share, mount)| {
            if let Some(p) = inject {
                c["podInjectPolicy"] = json!(p);
            }
            if let Some(t) = share {
                c["shareVolumePolicy"] = json!({"type": t});
            }
            if mount {
                c["volumeMounts"] = json!([{"name": "v0", "mountPath": "/var/x"}]);
            }
            if !init {
                c["upgradeStrategy"] = json!({"upgradeType": "ColdUpgrade"});
            }
            c
        })
}

fn sidecar_set() -> impl Strategy<Value = Value> {
    (
        (1..3usize).prop_flat_map(|n| {
            (0..n)
                .map(|i| sidecar(format!("s{i}"), false))
                .collect::<Vec<_>>()
        }),
        option::of(sidecar("init".into(), true)),
        option::of(oracle::volume("v0".into())),
        option::of((
            option::of(0..3i32),
            option::of(prop_oneof![Just(json!(2)), Just(json!("50%"))]),
        )),
        any::<bool>(),
        option::of(prop_oneof![
            Just("Retain"),
            Just("Overwrite"),
            Just("MergePatchJson")
        ]),
    )
        .prop_map(
            |(containers, init, volume, strategy, pull_secret, patch_policy)| {
                let mut spec =
                    json!({"selector": {"matchLabels": {"app": "web"}}, "containers": containers});
                if let Some(c) = init {
                    spec["initContainers"] = json!([c]);
                }
                if let Some(v) = volume {
                    spec["volumes"] = json!([v]);
                }
                if let Some((partition, max_unavailable)) = strategy {
                    let mut s = json!({"type": "RollingUpdate"});
                    if let Some(p) = partition {
                        s["partition"] = json!(p);
                    }
                    if let Some(m) = max_unavailable {
                        s["maxUnavailable"] = m;
                    }
                    spec["updateStrategy"] = s;
                }
                if pull_secret {
                    spec["imagePullSecrets"] = json!([{"name": "registry"}]);
                }
                if let Some(p) = patch_policy {
                    spec["patchPodMetadata"] =
                        json!([{"annotations": {"a": "b"}, "patchPolicy": p}]);
                }
                spec
            },
        )
}

#[test]
#[ignore = "needs the Go oracle built by .ci/run (KRUISE_ORACLE_BIN_DIR)"]
fn defaults_hashes_and_revisions_match_openkruise() {
    let specs = oracle::samples(sidecar_set(), 300);
    let inputs: Vec<Value> = specs
        .into_iter()
        .enumerate()
        .map(
            |(i, spec)| json!({"metadata": {"name": format!("set{i}"), "uid": "u1"}, "spec": spec}),
        )
        .collect();
    let expected = oracle::run_json("sidecarset-values", &inputs);
    let mut mismatches = oracle::Mismatches::default();
    for (input, go) in inputs.iter().zip(&expected) {
        let mut object = input.clone();
        object["apiVersion"] = json!("apps.kruise.io/v1alpha1");
        object["kind"] = json!("SidecarSet");
        let patch = SidecarSetMutatingHandler
            .patch("v1alpha1", &object, None)
            .unwrap();
        let mut stored = object.clone();
        json_patch::patch(&mut stored, &patch).unwrap();
        let mut beta = stored.clone();
        beta["apiVersion"] = json!("apps.kruise.io/v1beta1");
        let set: SidecarSet = serde_json::from_value(beta).unwrap();
        let revision = new_revision(&set, "kruise-system", 1, Some(0)).unwrap();
        let go_data: Value = serde_json::from_str(go["revisionData"].as_str().unwrap()).unwrap();
        let annotation = |v: &Value, key: &str| v["metadata"]["annotations"][key].clone();
        let checks = [
            (
                "hash input",
                json!(hash_input(&set.spec.containers, &[], false).unwrap()),
                go["hashInput"].clone(),
            ),
            (
                "sidecarset-hash",
                annotation(&stored, SIDECARSET_HASH_ANNOTATION),
                annotation(&go["sidecarSet"], SIDECARSET_HASH_ANNOTATION),
            ),
            (
                "sidecarset-hash-without-image",
                annotation(&stored, SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION),
                annotation(&go["sidecarSet"], SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION),
            ),
            // The containers as stored, compared as Go re-encodes them: OpenKruise's webhook
            // writes the Go encoding back (no empty `args: []`, `resources: {}` added), ours
            // keeps what the user wrote there; what each holds must be the same.
            (
                "containers",
                serde_json::from_str(
                    &go_sidecar_containers_json(&set.spec.containers, false).unwrap(),
                )
                .unwrap(),
                go["sidecarSet"]["spec"]["containers"].clone(),
            ),
            (
                "updateStrategy",
                stored["spec"]["updateStrategy"].clone(),
                go["sidecarSet"]["spec"]["updateStrategy"].clone(),
            ),
            (
                "revision name",
                json!(revision.metadata.name),
                go["revision"]["metadata"]["name"].clone(),
            ),
            (
                "revision data",
                revision.data.clone().map(|d| d.0).unwrap_or_default(),
                go_data,
            ),
        ];
        for (what, ours, theirs) in checks {
            mismatches.check(what, input, &ours, &theirs);
        }
    }
    mismatches.assert_none();
}
