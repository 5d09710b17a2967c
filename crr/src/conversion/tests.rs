use kruise_admission::Converter;
use kruise_core::api::version::{APPS_V1ALPHA1, APPS_V1BETA1};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn spec() -> Value {
    json!({
        "podName": "pod-0",
        "containers": [{"name": "app", "statusContext": {"containerID": "containerd://a", "restartCount": 1}}],
        "strategy": {"failurePolicy": "Fail", "orderedRecreate": true, "minStartedSeconds": 5},
        "activeDeadlineSeconds": 60,
        "aFutureField": {"kept": true},
    })
}

#[test]
fn v1alpha1_annotations_become_typed_status_and_back() {
    let alpha = json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "ContainerRecreateRequest",
        "metadata": {"name": "crr", "namespace": "default", "annotations": {
            "crr.apps.kruise.io/sync-container-statuses": r#"[{"name":"app","ready":true,"restartCount":2,"containerID":"containerd://b"}]"#,
            "crr.apps.kruise.io/unready-acquired": "2026-01-02T03:04:05Z",
            "other": "x",
        }},
        "spec": spec(),
        "status": {"phase": "Recreating", "containerRecreateStates": [{"name": "app", "phase": "Recreating", "isKilled": true}]},
    });
    let beta = CrrConverter.convert(alpha.clone(), APPS_V1BETA1).unwrap();
    assert_eq!(
        beta,
        json!({
            "apiVersion": "apps.kruise.io/v1beta1",
            "kind": "ContainerRecreateRequest",
            "metadata": {"name": "crr", "namespace": "default", "annotations": {"other": "x"}},
            "spec": spec(),
            "status": {
                "phase": "Recreating",
                "containerRecreateStates": [{"name": "app", "phase": "Recreating", "isKilled": true}],
                "containerStatusSnapshot": [{"name": "app", "ready": true, "restartCount": 2, "containerID": "containerd://b"}],
                "conditions": [{
                    "type": "PreRecreateGrace",
                    "status": "True",
                    "lastTransitionTime": "2026-01-02T03:04:05Z",
                    "reason": "PreRecreateGrace",
                    "message": "Pod has been forced to not-ready for unreadyGracePeriodSeconds drain",
                }],
            },
        })
    );
    assert_eq!(CrrConverter.convert(beta, APPS_V1ALPHA1).unwrap(), alpha);
}

#[test]
fn a_false_or_other_condition_is_not_an_acquired_annotation() {
    let beta = json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "ContainerRecreateRequest",
        "metadata": {"name": "crr"},
        "spec": spec(),
        "status": {"phase": "Pending", "conditions": [
            {"type": "PreRecreateGrace", "status": "False", "lastTransitionTime": "2026-01-02T03:04:05Z", "reason": "", "message": ""},
        ]},
    });
    let alpha = CrrConverter.convert(beta, APPS_V1ALPHA1).unwrap();
    assert_eq!(alpha["metadata"], json!({"name": "crr"}));
    assert_eq!(alpha["status"], json!({"phase": "Pending"}));
}

#[test]
fn an_unparsable_annotation_is_kept_not_lost() {
    let alpha = json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "ContainerRecreateRequest",
        "metadata": {"name": "crr", "annotations": {
            "crr.apps.kruise.io/sync-container-statuses": "not json",
            "crr.apps.kruise.io/unready-acquired": "yesterday",
        }},
        "spec": spec(),
    });
    let beta = CrrConverter.convert(alpha.clone(), APPS_V1BETA1).unwrap();
    assert_eq!(beta["metadata"], alpha["metadata"]);
    assert!(beta.get("status").is_none());
}

#[test]
fn a_time_with_an_offset_reads_as_utc() {
    let alpha = json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "ContainerRecreateRequest",
        "metadata": {"annotations": {"crr.apps.kruise.io/unready-acquired": "2026-01-02T05:04:05+02:00"}},
        "spec": spec(),
    });
    let beta = CrrConverter.convert(alpha, APPS_V1BETA1).unwrap();
    assert_eq!(
        beta["status"]["conditions"][0]["lastTransitionTime"],
        "2026-01-02T03:04:05Z"
    );
}

fn snapshot() -> impl Strategy<Value = Vec<SyncContainerStatus>> {
    proptest::collection::vec(
        (
            "[a-z]{1,6}",
            any::<bool>(),
            0i32..20,
            proptest::option::of("[a-f0-9]{1,8}"),
        )
            .prop_map(|(name, ready, restart_count, id)| SyncContainerStatus {
                name,
                ready,
                restart_count,
                container_id: id
                    .map(|id| format!("containerd://{id}"))
                    .unwrap_or_default(),
            }),
        0..4,
    )
}

/// Seconds in [2001, 2100): RFC 3339 in UTC, whole seconds.
fn acquired() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(
        (978_307_200i64..4_102_444_800)
            .prop_map(|s| rfc3339_seconds(Timestamp::from_second(s).unwrap())),
    )
}

proptest! {
    #[test]
    fn v1alpha1_round_trips_through_v1beta1(
        snapshot in proptest::option::of(snapshot()),
        acquired in acquired(),
        phase in proptest::sample::select(vec!["", "Pending", "Recreating", "Completed"]),
        other in proptest::option::of("[a-z]{1,5}"),
    ) {
        let mut annotations = serde_json::Map::new();
        if let Some(s) = &snapshot {
            annotations.insert(SYNC_CONTAINER_STATUSES_KEY.into(), serde_json::to_string(s).unwrap().into());
        }
        if let Some(t) = &acquired {
            annotations.insert(UNREADY_ACQUIRED_KEY.into(), t.clone().into());
        }
        if let Some(o) = &other {
            annotations.insert("other".into(), o.clone().into());
        }
        let mut alpha = json!({
            "apiVersion": "apps.kruise.io/v1alpha1",
            "kind": "ContainerRecreateRequest",
            "metadata": {"name": "crr", "namespace": "default"},
            "spec": spec(),
            "status": {"phase": phase},
        });
        if !annotations.is_empty() {
            alpha["metadata"]["annotations"] = Value::Object(annotations);
        }
        let beta = CrrConverter.convert(alpha.clone(), APPS_V1BETA1).unwrap();
        // The hub form holds the typed fields and none of the legacy annotations.
        let hub_annotations = &beta["metadata"]["annotations"];
        prop_assert!(hub_annotations.get(SYNC_CONTAINER_STATUSES_KEY).is_none());
        prop_assert!(hub_annotations.get(UNREADY_ACQUIRED_KEY).is_none());
        prop_assert_eq!(
            beta["status"].get("containerStatusSnapshot").cloned(),
            snapshot.as_ref().map(|s| serde_json::to_value(s).unwrap())
        );
        prop_assert_eq!(
            beta["status"]["conditions"][0]["lastTransitionTime"].as_str(),
            acquired.as_deref()
        );
        prop_assert_eq!(CrrConverter.convert(beta, APPS_V1ALPHA1).unwrap(), alpha);
    }

    #[test]
    fn v1beta1_round_trips_through_v1alpha1(
        snapshot in proptest::option::of(snapshot()),
        acquired in acquired(),
    ) {
        let mut status = json!({"phase": "Recreating"});
        if let Some(s) = &snapshot {
            status["containerStatusSnapshot"] = serde_json::to_value(s).unwrap();
        }
        if let Some(t) = &acquired {
            status["conditions"] = json!([pre_recreate_grace_condition(t)]);
        }
        let beta = json!({
            "apiVersion": "apps.kruise.io/v1beta1",
            "kind": "ContainerRecreateRequest",
            "metadata": {"name": "crr", "namespace": "default"},
            "spec": spec(),
            "status": status,
        });
        let alpha = CrrConverter.convert(beta.clone(), APPS_V1ALPHA1).unwrap();
        prop_assert!(alpha["status"].get("containerStatusSnapshot").is_none());
        prop_assert!(alpha["status"].get("conditions").is_none());
        prop_assert_eq!(CrrConverter.convert(alpha, APPS_V1BETA1).unwrap(), beta);
    }
}
