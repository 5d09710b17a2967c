use super::*;
use crate::api::{SidecarSetStatus, v1alpha1};
use kruise_admission::Converter;
use proptest::prelude::*;

fn alpha(v: Value) -> v1alpha1::SidecarSet {
    serde_json::from_value(v).unwrap()
}

fn convert(object: Value, desired_api_version: &str) -> Value {
    SidecarSetConverter
        .convert(object, desired_api_version)
        .unwrap()
}

#[test]
fn namespace_becomes_selector_and_wins() {
    let a = json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
        "metadata": {"name": "s", "labels": {"apps.kruise.io/sidecarset-custom-version": "v2", "x": "y"}},
        "spec": {"selector": {"matchLabels": {"app": "nginx"}}, "namespace": "ns1",
                 "namespaceSelector": {"matchLabels": {"env": "prod"}},
                 "containers": [{"name": "c", "image": "i", "podInjectPolicy": "AfterAppContainer"}]},
        "status": {"matchedPods": 3, "updatedPods": 2, "readyPods": 1, "latestRevision": "r"}
    });
    let v = convert(a, "apps.kruise.io/v1beta1");
    assert_eq!(v["apiVersion"], "apps.kruise.io/v1beta1");
    assert_eq!(
        v["spec"]["namespaceSelector"],
        json!({"matchLabels": {"kubernetes.io/metadata.name": "ns1"}})
    );
    assert_eq!(v["spec"]["customVersion"], "v2");
    assert_eq!(v["metadata"]["labels"], json!({"x": "y"}));
    assert_eq!(
        v["spec"]["containers"][0]["podInjectPolicy"],
        "AfterAppContainer"
    );
    assert_eq!(v["status"]["matchedPods"], 3);
    let bv = convert(v, "apps.kruise.io/v1alpha1");
    assert_eq!(bv["spec"].get("namespace"), None);
    assert_eq!(bv["spec"].get("customVersion"), None);
    assert_eq!(
        bv["metadata"]["labels"],
        json!({"x": "y", "apps.kruise.io/sidecarset-custom-version": "v2"})
    );
}

#[test]
fn converter_dispatches_by_version() {
    let c = SidecarSetConverter;
    assert!(c.handles("apps.kruise.io", "SidecarSet"));
    assert!(!c.handles("apps.kruise.io", "CloneSet"));
    let obj = json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
        "metadata": {"name": "s"}, "spec": {"namespace": "a"}});
    let out = c.convert(obj.clone(), "apps.kruise.io/v1beta1").unwrap();
    assert_eq!(out["apiVersion"], "apps.kruise.io/v1beta1");
    assert_eq!(out["kind"], "SidecarSet");
    assert_eq!(out["metadata"]["name"], "s");
    let same = c.convert(obj.clone(), "apps.kruise.io/v1alpha1").unwrap();
    assert_eq!(same, obj);
    assert!(c.convert(obj, "apps.kruise.io/v2").is_err());
    assert!(
        c.convert(json!({"apiVersion": "x/v1"}), "apps.kruise.io/v1beta1")
            .is_err()
    );
}

#[test]
fn fields_the_types_do_not_know_survive_a_round_trip() {
    let a = json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
        "metadata": {"name": "s", "labels": {"apps.kruise.io/sidecarset-custom-version": "v2"}},
        "spec": {"selector": {"matchLabels": {"app": "x"}}, "futureSpecField": [1],
                 "containers": [{"name": "c", "image": "i", "futureContainerField": true}],
                 "updateStrategy": {"type": "RollingUpdate", "futureKnob": "k"}},
        "status": {"matchedPods": 1, "futureStatus": {}}, "futureTopLevel": 2});
    let b = convert(a.clone(), "apps.kruise.io/v1beta1");
    assert_eq!(b["spec"]["futureSpecField"], json!([1]));
    assert_eq!(b["spec"]["containers"][0]["futureContainerField"], true);
    assert_eq!(b["spec"]["updateStrategy"]["futureKnob"], "k");
    assert_eq!(b["spec"]["customVersion"], "v2");
    assert_eq!(b["metadata"].get("labels"), None);
    assert_eq!(b["status"]["futureStatus"], json!({}));
    assert_eq!(b["futureTopLevel"], 2);
    assert_eq!(convert(b, "apps.kruise.io/v1alpha1"), a);
}

fn arb_name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9]{0,6}"
}

fn arb_spec_json() -> impl Strategy<Value = Value> {
    (
        proptest::collection::vec((arb_name(), arb_name(), any::<bool>(), any::<bool>()), 0..3),
        proptest::option::of(arb_name()),
        proptest::option::of(0i32..20),
        any::<bool>(),
        proptest::option::of(prop_oneof![Just("Always"), Just("Partial")]),
        proptest::option::of(0i32..100),
    )
        .prop_map(|(containers, ns_label, history, paused, policy, partition)| {
            let containers: Vec<Value> = containers
                .into_iter()
                .map(|(name, image, hot, share)| {
                    let mut c = json!({"name": name, "image": image,
                        "transferEnv": [{"sourceContainerName": "app", "envName": "E"}]});
                    if hot {
                        c["upgradeStrategy"] = json!({"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty"});
                    }
                    if share {
                        c["shareVolumePolicy"] = json!({"type": "enabled"});
                        c["shareVolumeDevicePolicy"] = json!({"type": "disabled"});
                    }
                    c
                })
                .collect();
            let mut spec = json!({"selector": {"matchLabels": {"app": "x"}}, "containers": containers,
                "volumes": [{"name": "v", "emptyDir": {}}], "imagePullSecrets": [{"name": "sec"}],
                "patchPodMetadata": [{"annotations": {"k": "v"}, "patchPolicy": "Overwrite"}]});
            if let Some(l) = ns_label {
                spec["namespaceSelector"] = json!({"matchLabels": {"team": l}});
            }
            if let Some(h) = history {
                spec["revisionHistoryLimit"] = json!(h);
            }
            spec["injectionStrategy"] = json!({"paused": paused});
            if let Some(p) = policy {
                spec["injectionStrategy"]["revision"] = json!({"revisionName": "r1", "policy": p});
            }
            if let Some(p) = partition {
                spec["updateStrategy"] = json!({"type": "RollingUpdate", "partition": format!("{p}%"),
                    "maxUnavailable": 2, "scatterStrategy": [{"key": "k", "value": "v"}]});
            }
            spec
        })
}

proptest! {
    #[test]
    fn beta_alpha_beta_round_trips(spec in arb_spec_json(), custom in proptest::option::of(arb_name()), matched in 0i32..9) {
        let mut spec = spec;
        if let Some(c) = custom { spec["customVersion"] = json!(c); }
        let beta: v1beta1::SidecarSet = serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
            "metadata": {"name": "s", "labels": {"a": "b"}}, "spec": spec,
        })).unwrap();
        let mut beta = beta;
        beta.status = Some(SidecarSetStatus { matched_pods: matched, ..Default::default() });
        let v = serde_json::to_value(&beta).unwrap();
        let alpha_v = convert(v.clone(), "apps.kruise.io/v1alpha1");
        // What the converter wrote is a v1alpha1 SidecarSet, every field where its type has it.
        let typed_alpha = alpha(alpha_v.clone());
        prop_assert_eq!(&serde_json::to_value(&typed_alpha).unwrap(), &alpha_v);
        prop_assert_eq!(convert(alpha_v, "apps.kruise.io/v1beta1"), v);
    }

    #[test]
    fn alpha_beta_alpha_round_trips(spec in arb_spec_json(), custom in proptest::option::of(arb_name())) {
        let mut metadata = json!({"name": "s"});
        if let Some(c) = custom { metadata["labels"] = json!({"apps.kruise.io/sidecarset-custom-version": c}); }
        let a = alpha(json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
            "metadata": metadata, "spec": spec}));
        let v = serde_json::to_value(&a).unwrap();
        let beta_v = convert(v.clone(), "apps.kruise.io/v1beta1");
        let typed_beta: v1beta1::SidecarSet = serde_json::from_value(beta_v.clone()).unwrap();
        prop_assert_eq!(&serde_json::to_value(&typed_beta).unwrap(), &beta_v);
        prop_assert_eq!(convert(beta_v, "apps.kruise.io/v1alpha1"), v);
    }

    #[test]
    fn arbitrary_json_never_panics(v in arb_json()) {
        let _ = SidecarSetConverter.convert(v.clone(), "apps.kruise.io/v1beta1");
        let _ = SidecarSetConverter.convert(v, "apps.kruise.io/v1alpha1");
    }
}

pub(crate) fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-zA-Z/.:%-]{0,8}".prop_map(Value::from),
        prop_oneof![
            Just("apps.kruise.io/v1alpha1"),
            Just("apps.kruise.io/v1beta1")
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(
                prop_oneof![
                    Just("apiVersion".to_string()),
                    Just("spec".to_string()),
                    Just("containers".to_string()),
                    Just("name".to_string()),
                    Just("metadata".to_string()),
                    Just("namespace".to_string()),
                    "[a-z]{1,6}"
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
