use kruise_admission::Converter;
use kruise_core::api::version::{APPS_V1ALPHA1, APPS_V1BETA1};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::api::v1beta1;

fn template() -> impl Strategy<Value = Value> {
    (
        proptest::collection::vec("[a-z]{1,6}", 0..3),
        prop_oneof![
            Just(Value::Null),
            proptest::collection::vec("node-[0-9]", 1..3).prop_map(|n| json!({"names": n})),
            "[a-z]{1,4}".prop_map(|v| json!({"matchLabels": {"pool": v}})),
        ],
        proptest::option::of(0i32..10),
        proptest::option::of((1i32..900, 0i32..5)),
        proptest::sample::select(vec!["Always", "Never"]),
        proptest::option::of(0i32..100),
        proptest::sample::select(vec!["Always", "IfNotPresent"]),
        any::<bool>(),
    )
        .prop_map(|(secrets, selector, parallelism, pull, completion, ttl, policy, sandbox)| {
            json!({
                "pullSecrets": secrets,
                "selector": selector,
                "parallelism": parallelism,
                "pullPolicy": pull.map(|(t, b)| json!({"timeoutSeconds": t, "backoffLimit": b})),
                "completionPolicy": {"type": completion, "ttlSecondsAfterFinished": ttl},
                "sandboxConfig": if sandbox { json!({"labels": {"a": "b"}}) } else { Value::Null },
                "imagePullPolicy": policy,
                "aFutureField": {"kept": true},
            })
        })
}

fn object(api_version: &str, kind: &str, spec: Value, status: Value) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": "demo", "namespace": "default", "labels": {"a": "b"}},
        "spec": spec,
        "status": status,
    })
}

fn job_status() -> impl Strategy<Value = Value> {
    (0i32..10, 0i32..10, 0i32..10, 0i32..10, proptest::collection::vec("node-[0-9]", 0..3))
        .prop_map(|(d, a, s, f, nodes)| json!({"desired": d, "active": a, "succeeded": s, "failed": f,
            "message": "job is running, progress 10.0%", "failedNodes": nodes, "startTime": "2026-01-01T00:00:00Z"}))
}

fn node_image_spec() -> impl Strategy<Value = Value> {
    proptest::collection::btree_map(
        "[a-z]{1,6}",
        (proptest::collection::vec("[0-9]{1,2}", 1..3), 0i64..9, any::<bool>()),
        0..3,
    )
    .prop_map(|images| {
        let images: serde_json::Map<String, Value> = images
            .into_iter()
            .map(|(name, (tags, version, batch))| {
                let tags: Vec<Value> = tags.iter().map(|t| json!({
                    "tag": t, "createdAt": "2026-01-01T00:00:00Z", "version": version,
                    "pullPolicy": {"timeoutSeconds": 600, "backoffLimit": 3, "ttlSecondsAfterFinished": 300},
                    "ownerReferences": [{"apiVersion": "apps.kruise.io/v1beta1", "kind": "ImagePullJob", "name": "j", "namespace": "default", "uid": "u1"}],
                })).collect();
                let secrets = if batch { json!([{"namespace": "kruise-daemon-config", "name": "s-abc", "mode": "batch"}]) } else { json!([]) };
                (name, json!({"tags": tags, "pullSecrets": secrets}))
            })
            .collect();
        json!({"images": images})
    })
}

fn round_trips(
    converter: SameFields,
    kind: &str,
    spec: Value,
    status: Value,
) -> Result<(), TestCaseError> {
    for (from, to) in [(APPS_V1ALPHA1, APPS_V1BETA1), (APPS_V1BETA1, APPS_V1ALPHA1)] {
        let original = object(from, kind, spec.clone(), status.clone());
        let there = converter.convert(original.clone(), to).unwrap();
        prop_assert_eq!(&there["apiVersion"], to);
        prop_assert_eq!(&there["spec"], &original["spec"]);
        prop_assert_eq!(&there["status"], &original["status"]);
        prop_assert_eq!(&there["metadata"], &original["metadata"]);
        let back = converter.convert(there, from).unwrap();
        prop_assert_eq!(back, original);
    }
    Ok(())
}

proptest! {
    #[test]
    fn imagepulljob_round_trips_both_ways(mut spec in template(), status in job_status(), image in "[a-z]{1,8}(:[0-9]{1,3})?") {
        spec["image"] = json!(image);
        round_trips(IMAGEPULLJOB_CONVERTER, IMAGEPULLJOB_KIND, spec.clone(), status)?;
        // What the controllers read of it is the same in both versions.
        let mut alpha = object(APPS_V1ALPHA1, IMAGEPULLJOB_KIND, spec, json!({}));
        alpha.as_object_mut().unwrap().remove("status");
        let beta = IMAGEPULLJOB_CONVERTER.convert(alpha, APPS_V1BETA1).unwrap();
        let typed: v1beta1::ImagePullJob = serde_json::from_value(beta.clone()).unwrap();
        prop_assert_eq!(&typed.spec.image, beta["spec"]["image"].as_str().unwrap());
    }

    #[test]
    fn imagelistpulljob_round_trips_both_ways(mut spec in template(), images in proptest::collection::vec("[a-z]{1,8}", 1..4)) {
        spec["images"] = json!(images);
        let status = json!({"desired": images.len(), "active": 1, "completed": 0, "succeeded": 0,
            "failedImageStatuses": [{"imagePullJob": "demo-x", "name": images[0], "message": "m"}]});
        round_trips(IMAGELISTPULLJOB_CONVERTER, IMAGELISTPULLJOB_KIND, spec, status)?;
    }

    #[test]
    fn nodeimage_round_trips_both_ways(spec in node_image_spec(), pulling in 0i32..3) {
        let status = json!({"desired": 2, "pulling": pulling, "succeeded": 1, "failed": 0, "waiting": 0,
            "imageStatuses": {"nginx": {"tags": [{"tag": "1", "phase": "Succeeded", "progress": 100, "version": 1, "imageID": "nginx@sha256:00"}]}}});
        round_trips(NODEIMAGE_CONVERTER, NODEIMAGE_KIND, spec, status)?;
    }
}

#[test]
fn other_kinds_and_versions_are_refused() {
    assert!(IMAGEPULLJOB_CONVERTER.handles("apps.kruise.io", "ImagePullJob"));
    assert!(NODEIMAGE_CONVERTER.handles("apps.kruise.io", "NodeImage"));
    assert!(!NODEIMAGE_CONVERTER.handles("apps.kruise.io", "CloneSet"));
    let obj = object("apps.kruise.io/v2", NODEIMAGE_KIND, json!({}), json!({}));
    assert!(NODEIMAGE_CONVERTER.convert(obj, APPS_V1BETA1).is_err());
}
