use super::*;
use crate::api::defaults::{DefaultingGates, default_spec};
use serde_json::{Value, json};

fn sample() -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
        "metadata": {"name": "sample", "namespace": "default"},
        "spec": {
            "replicas": 3,
            "serviceName": "sample",
            "selector": {"matchLabels": {"app": "sample"}},
            "template": {
                "metadata": {"labels": {"app": "sample"}},
                "spec": {
                    "readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
                    "containers": [{"name": "main", "image": "nginx:alpine"}]
                }
            },
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate",
                "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 2}}
        }
    })
}

fn set(value: &Value) -> StatefulSet {
    let mut set: StatefulSet = serde_json::from_value(value.clone()).unwrap();
    default_spec(&mut set.spec, DefaultingGates::default());
    set
}

/// The (path, detail) of each error `patch` applied to the sample causes.
fn errors_of(patch: Value) -> Vec<(String, String)> {
    let mut value = sample();
    json_patch::merge(&mut value, &patch);
    validate(&set(&value), None)
        .into_iter()
        .map(|e| (e.field.as_str().to_string(), e.detail))
        .collect()
}

#[test]
fn the_sample_is_valid() {
    assert_eq!(errors_of(json!({})), Vec::<(String, String)>::new());
}

#[test]
fn a_mount_of_a_claim_template_is_valid_and_of_nothing_is_not() {
    let mounting = |volume: &str| {
        json!({"spec": {
            "template": {"spec": {"containers": [{"name": "main", "image": "nginx:alpine",
                "volumeMounts": [{"name": volume, "mountPath": "/data"}]}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
        }})
    };
    assert_eq!(errors_of(mounting("data")), Vec::<(String, String)>::new());
    let errors = errors_of(mounting("missing"));
    assert_eq!(
        errors
            .iter()
            .map(|(path, _)| path.as_str())
            .collect::<Vec<_>>(),
        ["spec.template.spec.containers[0].volumeMounts[0].name"]
    );
}

#[test]
fn table_of_invalid_specs() {
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            json!({"metadata": {"name": "Bad_Name"}}),
            "metadata.name",
            "RFC 1123",
        ),
        (
            json!({"spec": {"podManagementPolicy": "Burst"}}),
            "spec.podManagementPolicy",
            "must be 'OrderedReady' or 'Parallel'",
        ),
        (
            json!({"spec": {"reserveOrdinals": [1, "5-2"]}}),
            "spec",
            "1 th reserve ordinal is invalid",
        ),
        (
            json!({"spec": {"reserveOrdinals": ["x"]}}),
            "spec",
            "0 th reserve ordinal is invalid",
        ),
        (
            json!({"spec": {"reserveOrdinals": [-1]}}),
            "spec",
            "0 th reserve ordinal is invalid",
        ),
        (
            json!({"spec": {"scaleStrategy": {"maxUnavailable": 0}}}),
            "spec.scaleStrategy.maxUnavailable",
            "should not be less than 1",
        ),
        (
            json!({"spec": {"scaleStrategy": {"maxUnavailable": "abc"}}}),
            "spec.scaleStrategy.maxUnavailable",
            "must be an integer or percentage",
        ),
        (
            json!({"spec": {"podManagementPolicy": "OrderedReady", "updateStrategy": {"rollingUpdate": {"maxUnavailable": 2}}}}),
            "spec.updateStrategy.rollingUpdate.maxUnavailable",
            "can only work with Parallel",
        ),
        (
            json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": -1}}}}),
            "spec.updateStrategy.rollingUpdate.partition",
            "greater than or equal to 0",
        ),
        (
            json!({"spec": {"updateStrategy": {"rollingUpdate": {"minReadySeconds": 301}}}}),
            "spec.updateStrategy.rollingUpdate.minReadySeconds",
            "no more than 300",
        ),
        (
            json!({"spec": {"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "Sometimes"}}}}),
            "spec.updateStrategy.rollingUpdate.podUpdatePolicy",
            "must be 'ReCreate'",
        ),
        (
            json!({"spec": {"template": {"spec": {"readinessGates": null}}}}),
            "spec.template.spec.readinessGates",
            "must contains InPlaceUpdateReady",
        ),
        (
            json!({"spec": {"updateStrategy": {"type": "OnDelete"}}}),
            "spec.updateStrategy.rollingUpdate",
            "only allowed for updateStrategy 'RollingUpdate'",
        ),
        (
            json!({"spec": {"updateStrategy": {"type": "Sometimes"}}}),
            "spec.updateStrategy",
            "must be 'RollingUpdate' or 'OnDelete'",
        ),
        (
            json!({"spec": {"podManagementPolicy": "OrderedReady", "updateStrategy": {"rollingUpdate": {"maxUnavailable": 1, "unorderedUpdate": {}}}}}),
            "spec.updateStrategy.rollingUpdate.unorderedUpdate",
            "only work with Parallel",
        ),
        (
            json!({"spec": {"persistentVolumeClaimRetentionPolicy": {"whenScaled": "Keep"}}}),
            "spec.persistentVolumeClaimRetentionPolicy.whenScaled",
            "",
        ),
        (
            json!({"spec": {"replicas": -1}}),
            "spec.replicas",
            "greater than or equal to 0",
        ),
        (
            json!({"spec": {"selector": {"matchLabels": {"app": "other"}}}}),
            "spec.template.metadata.labels",
            "does not match",
        ),
        (
            json!({"spec": {"selector": {"matchLabels": null}}}),
            "spec.selector",
            "empty selector is invalid for statefulset",
        ),
        (
            json!({"spec": {"template": {"spec": {"restartPolicy": "Never"}}}}),
            "spec.template.spec.restartPolicy",
            "",
        ),
        (
            json!({"spec": {"template": {"spec": {"activeDeadlineSeconds": 5}}}}),
            "spec.template.spec.activeDeadlineSeconds",
            "not Supported",
        ),
        (
            json!({"spec": {"template": {"spec": {"containers": [{"name": "main"}]}}}}),
            "spec.template.spec.containers[0].image",
            "",
        ),
    ];
    for (patch, path, detail) in cases {
        let errs = errors_of(patch.clone());
        assert!(
            errs.iter().any(|(p, d)| p == path && d.contains(detail)),
            "{patch}: expected {path}: {detail}, got {errs:?}"
        );
    }
}

#[test]
fn updates_may_change_only_the_mutable_fields() {
    let old = set(&sample());
    let mut new = old.clone();
    new.spec.replicas = Some(5);
    new.spec.reserve_ordinals = vec![IntOrString::Int(1)];
    new.spec.ordinals = Some(crate::api::StatefulSetOrdinals { start: 2 });
    assert!(validate(&new, Some(&old)).is_empty());
    new.spec.service_name = "other".into();
    let errs = validate(&new, Some(&old));
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].field.as_str(), "spec");
    assert_eq!(errs[0].detail, IMMUTABLE_FIELDS_MESSAGE);
}

#[test]
fn in_place_only_allows_only_image_changes() {
    let mut value = sample();
    value["spec"]["updateStrategy"]["rollingUpdate"]["podUpdatePolicy"] = json!("InPlaceOnly");
    let old = set(&value);
    let mut new = old.clone();
    let pod = new.spec.template.spec.as_mut().unwrap();
    pod.containers[0].image = Some("nginx:1.27".into());
    assert!(validate(&new, Some(&old)).is_empty());
    new.spec.template.spec.as_mut().unwrap().containers[0].args = Some(vec!["x".into()]);
    let errs = validate(&new, Some(&old));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].detail.contains("can only update image"));
}

#[test]
fn on_pod_rolling_update_claim_templates_may_change_only_in_size() {
    let template = |name: &str, class: &str, size: &str| {
        serde_json::from_value::<k8s_openapi::api::core::v1::PersistentVolumeClaim>(json!({
            "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                     "resources": {"requests": {"storage": size}}}}))
        .unwrap()
    };
    let mut old = set(&sample());
    old.spec.volume_claim_update_strategy.type_ =
        Some(crate::api::VolumeClaimUpdateStrategyType::OnPodRollingUpdate);
    old.spec.volume_claim_templates = vec![template("data", "a", "1Gi")];
    let with = |templates: Vec<k8s_openapi::api::core::v1::PersistentVolumeClaim>| {
        let mut new = old.clone();
        new.spec.volume_claim_templates = templates;
        validate_claim_template_update(&new.spec, &old.spec)
            .into_iter()
            .map(|e| (e.field.as_str().to_string(), e.detail))
            .collect::<Vec<_>>()
    };
    assert!(with(vec![template("data", "a", "2Gi")]).is_empty());
    assert_eq!(
        with(vec![]),
        [(
            "spec.volumeClaimTemplates".to_string(),
            "volumeClaimTemplate can not be added or deleted when OnRollingUpdate".to_string()
        )]
    );
    assert_eq!(
        with(vec![template("logs", "a", "1Gi")]),
        [(
            "spec.volumeClaimTemplates[logs].name".to_string(),
            "volumeClaimTemplate name can not be modified".to_string()
        )]
    );
    assert_eq!(
        with(vec![template("data", "b", "1Gi")]),
        [(
            "spec.volumeClaimTemplates[data]".to_string(),
            "volumeClaimTemplate can not be modified when OnRollingUpdate".to_string()
        )]
    );
    // OnDelete: anything goes here (the immutable-field rule allows claim templates).
    let mut on_delete = old.clone();
    on_delete.spec.volume_claim_update_strategy.type_ =
        Some(crate::api::VolumeClaimUpdateStrategyType::OnDelete);
    let mut new = on_delete.clone();
    new.spec.volume_claim_templates = vec![];
    assert!(validate_claim_template_update(&new.spec, &on_delete.spec).is_empty());
}
