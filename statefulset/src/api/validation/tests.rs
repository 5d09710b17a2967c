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

/// As OpenKruise (Kubernetes' `ValidatePodTemplateSpecForStatefulSet`): the template's
/// labels are checked, its pod spec is not (a mount of nothing, an init container's probe,
/// a container without image are the API server's to refuse when the pod is created).
/// Found by the differential test against OpenKruise (`tests/openkruise_oracle.rs`).
#[test]
fn the_template_pod_spec_is_left_to_the_api_server_and_its_labels_are_checked() {
    let errors = errors_of(json!({"spec": {"template": {"spec": {
        "containers": [{"name": "main", "volumeMounts": [{"name": "missing", "mountPath": "/d"}]}],
        "initContainers": [{"name": "init", "image": "busybox",
                            "readinessProbe": {"exec": {"command": ["true"]}}}]}}}}));
    assert_eq!(errors, Vec::<(String, String)>::new());
    let errors =
        errors_of(json!({"spec": {"template": {"metadata": {"labels": {"bad key!": "x"}}}}}));
    assert_eq!(
        errors
            .iter()
            .map(|(path, _)| path.as_str())
            .collect::<Vec<_>>(),
        ["spec.template.labels"]
    );
}

/// `ValidateStatefulSetName` is a DNS-1123 label: a dotted name is refused.
#[test]
fn the_name_is_a_dns_label() {
    let mut value = sample();
    value["metadata"]["name"] = json!("web.v2");
    let errors = validate(&set(&value), None);
    assert_eq!(
        errors.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(),
        ["metadata.name"]
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

fn class(name: &str, expandable: Option<bool>, default_since: Option<i64>) -> StorageClass {
    let mut value = json!({"metadata": {"name": name}, "provisioner": "example.com/disk"});
    if let Some(expandable) = expandable {
        value["allowVolumeExpansion"] = json!(expandable);
    }
    if let Some(second) = default_since {
        value["metadata"]["annotations"] = json!({DEFAULT_STORAGE_CLASS_KEY: "true"});
        value["metadata"]["creationTimestamp"] =
            json!(jiff::Timestamp::from_second(second).unwrap().to_string());
    }
    serde_json::from_value(value).unwrap()
}

#[test]
fn only_a_size_change_of_an_on_pod_rolling_update_template_needs_its_class_checked() {
    let template = |name: &str, class: Option<&str>, request: &str, limit: Option<&str>| {
        let mut value = json!({"metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": request}}}});
        if let Some(class) = class {
            value["spec"]["storageClassName"] = json!(class);
        }
        if let Some(limit) = limit {
            value["spec"]["resources"]["limits"] = json!({"storage": limit});
        }
        serde_json::from_value::<k8s_openapi::api::core::v1::PersistentVolumeClaim>(value).unwrap()
    };
    let mut old = set(&sample());
    old.spec.volume_claim_update_strategy.type_ =
        Some(crate::api::VolumeClaimUpdateStrategyType::OnPodRollingUpdate);
    old.spec.volume_claim_templates = vec![
        template("data", Some("fast"), "1Gi", None),
        template("logs", None, "1Gi", None),
    ];
    let resized = |templates: Vec<k8s_openapi::api::core::v1::PersistentVolumeClaim>| {
        let mut new = old.clone();
        new.spec.volume_claim_templates = templates;
        resized_claim_templates(&new.spec, &old.spec)
    };
    let data = ResizedClaimTemplate {
        name: "data".into(),
        storage_class: Some("fast".into()),
    };
    let logs = ResizedClaimTemplate {
        name: "logs".into(),
        storage_class: None,
    };
    // The same size written otherwise is no resize.
    assert_eq!(
        resized(vec![
            template("data", Some("fast"), "1024Mi", None),
            template("logs", None, "1Gi", None),
        ]),
        []
    );
    assert_eq!(
        resized(vec![
            template("data", Some("fast"), "2Gi", None),
            template("logs", None, "1Gi", Some("3Gi")),
        ]),
        [data.clone(), logs]
    );
    // A shrink is a resize too (OpenKruise's isPVCResize compares for inequality).
    assert_eq!(
        resized(vec![
            template("data", Some("fast"), "512Mi", None),
            template("logs", None, "1Gi", None),
        ]),
        [data]
    );
    // A class change is no resize (validate_claim_template_update refuses it).
    assert_eq!(
        resized(vec![
            template("data", Some("slow"), "2Gi", None),
            template("logs", None, "1Gi", None),
        ]),
        []
    );
    // OnDelete: nothing is checked.
    let mut on_delete = old.clone();
    on_delete.spec.volume_claim_update_strategy.type_ =
        Some(crate::api::VolumeClaimUpdateStrategyType::OnDelete);
    let mut new = on_delete.clone();
    new.spec.volume_claim_templates[0] = template("data", Some("fast"), "2Gi", None);
    assert_eq!(resized_claim_templates(&new.spec, &on_delete.spec), []);
}

/// Resized templates, the classes (or why they could not be read), the errors expected.
type Case<'a> = (
    Vec<ResizedClaimTemplate>,
    Result<&'a [StorageClass], &'a str>,
    Vec<String>,
);

#[test]
fn a_resized_template_needs_a_class_that_does_not_forbid_expansion() {
    let named = |class: &str| ResizedClaimTemplate {
        name: "data".into(),
        storage_class: Some(class.into()),
    };
    let unnamed = ResizedClaimTemplate {
        name: "data".into(),
        storage_class: None,
    };
    let classes = [
        class("fixed", Some(false), None),
        class("growing", Some(true), None),
        class("unsaid", None, None),
    ];
    let errors = |resized: &[ResizedClaimTemplate], classes: Result<&[StorageClass], &str>| {
        validate_claim_template_expansion(resized, classes)
            .into_iter()
            .map(|e| to_message(&[e]))
            .collect::<Vec<_>>()
    };
    let storage = "spec.volumeClaimTemplates[data].spec.resources.requests.storage";
    let class_name = "spec.volumeClaimTemplates[data].spec.storageClassName";
    let cases: Vec<Case> = vec![
        (vec![named("growing")], Ok(&classes), vec![]),
        // OpenKruise refuses only an explicit `allowVolumeExpansion: false`.
        (vec![named("unsaid")], Ok(&classes), vec![]),
        (
            vec![named("fixed")],
            Ok(&classes),
            vec![format!(
                "[{storage}: Forbidden: storage class fixed does not support volume expansion]"
            )],
        ),
        (
            vec![named("growing"), named("missing"), named("fixed")],
            Ok(&classes),
            vec![format!(
                "[{class_name}: Invalid value: \"missing\": can not get sc]"
            )],
        ),
        (
            vec![named("growing")],
            Err("forbidden"),
            vec![format!(
                "[{class_name}: Invalid value: \"growing\": can not get sc]"
            )],
        ),
        // No class named and no default class: nothing to check.
        (vec![unnamed.clone()], Ok(&classes), vec![]),
        (
            vec![unnamed],
            Err("forbidden"),
            vec![format!(
                "[{class_name}: Invalid value: \"nil\": can not list storage class]"
            )],
        ),
    ];
    for (resized, classes, expected) in cases {
        assert_eq!(errors(&resized, classes), expected, "{resized:?}");
    }
}

#[test]
fn an_unnamed_class_is_the_newest_default_one() {
    let unnamed = [ResizedClaimTemplate {
        name: "data".into(),
        storage_class: None,
    }];
    let refused = |classes: &[StorageClass]| {
        !validate_claim_template_expansion(&unnamed, Ok(classes)).is_empty()
    };
    assert!(refused(&[
        class("old", Some(true), Some(1_000)),
        class("new", Some(false), Some(2_000))
    ]));
    assert!(!refused(&[
        class("old", Some(false), Some(1_000)),
        class("new", Some(true), Some(2_000))
    ]));
    // A class not annotated default is not the default.
    assert!(!refused(&[class("fixed", Some(false), None)]));
}
