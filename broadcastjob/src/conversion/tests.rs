use kruise_admission::Converter;
use kruise_core::api::version::{APPS_V1ALPHA1, APPS_V1BETA1};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn int_or_percent() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        (0i64..100).prop_map(Value::from),
        (0u32..=100).prop_map(|p| Value::from(format!("{p}%"))),
    ]
}

fn broadcastjob_spec() -> impl Strategy<Value = Value> {
    (
        int_or_percent(),
        proptest::sample::select(vec!["", "Always", "Never"]),
        proptest::option::of(0i64..1000),
        proptest::option::of(0i32..1000),
        any::<bool>(),
        proptest::sample::select(vec!["", "FailFast", "Continue", "Pause"]),
        0i32..5,
        "[a-z]{1,8}",
    )
        .prop_map(|(parallelism, completion, deadline, ttl, paused, failure, limit, image)| {
            json!({
                "parallelism": parallelism,
                "template": {
                    "metadata": {"labels": {"app": image}},
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": image}]},
                },
                "completionPolicy": {"type": completion, "activeDeadlineSeconds": deadline, "ttlSecondsAfterFinished": ttl},
                "paused": paused,
                "failurePolicy": {"type": failure, "restartLimit": limit},
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

fn bcj_status() -> impl Strategy<Value = Value> {
    (0i32..10, 0i32..10, 0i32..10, 0i32..10, proptest::sample::select(vec!["running", "completed"]))
        .prop_map(|(a, s, f, d, p)| json!({"active": a, "succeeded": s, "failed": f, "desired": d, "phase": p}))
}

fn acj_spec() -> impl Strategy<Value = Value> {
    (
        proptest::sample::select(vec!["*/1 * * * *", "@hourly", "TZ=UTC 0 0 * * *"]),
        proptest::option::of(proptest::sample::select(vec!["Asia/Shanghai", "UTC"])),
        proptest::option::of(0i64..600),
        proptest::sample::select(vec!["Allow", "Forbid", "Replace"]),
        proptest::option::of(any::<bool>()),
        proptest::option::of(0i32..5),
        any::<bool>(),
        broadcastjob_spec(),
    )
        .prop_map(|(schedule, zone, deadline, policy, paused, limit, job, bcj)| {
            let template = if job {
                json!({"jobTemplate": {"metadata": {"labels": {"x": "y"}}, "spec": {"template": bcj["template"].clone()}}})
            } else {
                json!({"broadcastJobTemplate": {"metadata": {"annotations": {"x": "y"}}, "spec": bcj}})
            };
            json!({
                "schedule": schedule, "timeZone": zone, "startingDeadlineSeconds": deadline,
                "concurrencyPolicy": policy, "paused": paused,
                "successfulJobsHistoryLimit": limit, "failedJobsHistoryLimit": limit,
                "template": template,
            })
        })
}

proptest! {
    #[test]
    fn broadcastjob_round_trips_both_ways(spec in broadcastjob_spec(), status in bcj_status()) {
        let c = BROADCASTJOB_CONVERTER;
        for (from, to) in [(APPS_V1ALPHA1, APPS_V1BETA1), (APPS_V1BETA1, APPS_V1ALPHA1)] {
            let original = object(from, BROADCASTJOB_KIND, spec.clone(), status.clone());
            let there = c.convert(original.clone(), to).unwrap();
            prop_assert_eq!(&there["apiVersion"], to);
            prop_assert_eq!(&there["spec"], &original["spec"]);
            prop_assert_eq!(&there["status"], &original["status"]);
            prop_assert_eq!(&there["metadata"], &original["metadata"]);
            let back = c.convert(there, from).unwrap();
            prop_assert_eq!(back, original);
        }
    }

    #[test]
    fn advancedcronjob_round_trips_both_ways(spec in acj_spec(), ty in proptest::sample::select(vec!["Job", "BroadcastJob"])) {
        let c = AdvancedCronJobConverter;
        let status = json!({"type": ty, "lastScheduleTime": "2026-01-01T00:00:00Z",
                            "active": [{"kind": ty, "name": "demo-1767225600", "namespace": "default"}]});
        for (from, to) in [(APPS_V1ALPHA1, APPS_V1BETA1), (APPS_V1BETA1, APPS_V1ALPHA1)] {
            let original = object(from, ADVANCEDCRONJOB_KIND, spec.clone(), status.clone());
            let there = c.convert(original.clone(), to).unwrap();
            prop_assert_eq!(&there["apiVersion"], to);
            prop_assert_eq!(&there["spec"], &original["spec"]);
            let back = c.convert(there, from).unwrap();
            prop_assert_eq!(back, original);
        }
    }
}

#[test]
fn an_image_list_pull_job_template_has_no_v1alpha1_form() {
    let beta = object(
        APPS_V1BETA1,
        ADVANCEDCRONJOB_KIND,
        json!({"schedule": "0 0 * * *", "template": {"imageListPullJobTemplate": {"spec": {"images": ["nginx"]}}}}),
        json!({}),
    );
    assert_eq!(
        AdvancedCronJobConverter.convert(beta, APPS_V1ALPHA1),
        Err("imageListPullJobTemplate is not supported in v1alpha1".to_string())
    );
}

#[test]
fn other_kinds_and_versions_are_refused() {
    assert!(!AdvancedCronJobConverter.handles("apps.kruise.io", "CloneSet"));
    assert!(BROADCASTJOB_CONVERTER.handles("apps.kruise.io", "BroadcastJob"));
    let obj = object("apps.kruise.io/v2", BROADCASTJOB_KIND, json!({}), json!({}));
    assert!(BROADCASTJOB_CONVERTER.convert(obj, APPS_V1BETA1).is_err());
}
