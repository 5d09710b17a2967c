use super::*;
use crate::api::{
    DaemonSetScaleStrategy, DaemonSetUpdateStrategy, RollingUpdateDaemonSet, RollingUpdateType,
    UpdateStrategyType, v1alpha1, v1beta1,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_admission::Converter;
use kruise_core::api::version::{APPS_V1ALPHA1, APPS_V1BETA1};
use kruise_core::api::{Lifecycle, LifecycleHook};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::json;

fn ios() -> impl Strategy<Value = Option<IntOrString>> {
    prop_oneof![
        Just(None),
        (0i32..10).prop_map(|i| Some(IntOrString::Int(i))),
        (0i32..=100).prop_map(|p| Some(IntOrString::String(format!("{p}%")))),
    ]
}

fn strategy(types: &'static [&'static str]) -> impl Strategy<Value = DaemonSetUpdateStrategy> {
    (
        any::<bool>(),
        proptest::option::of((
            proptest::option::of(proptest::sample::select(types)),
            ios(),
            ios(),
            proptest::option::of("[a-z]{1,5}"),
            ios(),
            proptest::option::of(any::<bool>()),
        )),
    )
        .prop_map(|(on_delete, rolling)| DaemonSetUpdateStrategy {
            type_: Some(if on_delete {
                UpdateStrategyType::OnDelete
            } else {
                UpdateStrategyType::RollingUpdate
            }),
            rolling_update: rolling.map(|(type_, unavailable, surge, zone, partition, paused)| {
                RollingUpdateDaemonSet {
                    type_: type_.map(|t| serde_json::from_value(json!(t)).unwrap()),
                    max_unavailable: unavailable,
                    max_surge: surge,
                    selector: zone.map(|z| LabelSelector {
                        match_labels: Some([("zone".to_string(), z)].into()),
                        ..Default::default()
                    }),
                    partition,
                    paused,
                }
            }),
        })
}

fn metadata(annotations: Option<Vec<(String, String)>>) -> ObjectMeta {
    ObjectMeta {
        name: Some("demo".into()),
        namespace: Some("default".into()),
        // An empty map is written as absent (see the lossy cases).
        annotations: annotations
            .filter(|a| !a.is_empty())
            .map(|a| a.into_iter().collect()),
        ..Default::default()
    }
}

fn other_annotations() -> impl Strategy<Value = Option<Vec<(String, String)>>> {
    proptest::option::of(proptest::collection::vec(
        ("[a-z]{1,4}", "[a-z]{0,4}"),
        0..3,
    ))
}

fn hook() -> impl Strategy<Value = Option<Lifecycle>> {
    proptest::option::of("[a-z]{1,5}").prop_map(|label| {
        label.map(|label| Lifecycle {
            pre_delete: Some(LifecycleHook {
                labels_handler: [(label, "true".to_string())].into(),
                ..Default::default()
            }),
            ..Default::default()
        })
    })
}

type Counts = (i32, i32, i32, i32, Option<i32>, String);

fn counts() -> impl Strategy<Value = Counts> {
    (
        0i32..10,
        0i32..10,
        0i32..10,
        0i32..10,
        proptest::option::of(0i32..3),
        "[a-f0-9]{0,8}",
    )
}

prop_compose! {
    /// A stored object: any v1beta1 field, including scaleStrategy and a Surging marker that
    /// came from v1alpha1.
    fn beta()(
        strategy in strategy(&["Standard", "InPlaceIfPossible"]),
        partitioned in any::<bool>(),
        marker in any::<bool>(),
        annotations in other_annotations(),
        min_ready in 0i32..30,
        burst in ios(),
        history in proptest::option::of(0i32..20),
        lifecycle in hook(),
        (desired, ready, updated, available, collisions, hash) in counts(),
    ) -> v1beta1::DaemonSet {
        let mut annotations = annotations;
        let standard = strategy.rolling_update.as_ref()
            .and_then(|r| r.type_.as_ref()) == Some(&RollingUpdateType::Standard);
        if marker && standard {
            annotations.get_or_insert_with(Vec::new)
                .push((SURGING_ANNOTATION.to_string(), "true".to_string()));
        }
        let mut ds = v1beta1::DaemonSet::new("demo", v1beta1::DaemonSetSpec {
            selector: Some(LabelSelector {
                match_labels: Some([("app".to_string(), "demo".to_string())].into()),
                ..Default::default()
            }),
            update_strategy: strategy,
            min_ready_seconds: min_ready,
            burst_replicas: burst,
            revision_history_limit: history,
            lifecycle,
            scale_strategy: partitioned.then_some(DaemonSetScaleStrategy { partitioned_scaling: true }),
            ..Default::default()
        });
        ds.metadata = metadata(annotations);
        ds.status = Some(v1beta1::DaemonSetStatus {
            desired_number_scheduled: desired,
            current_number_scheduled: desired,
            number_ready: ready,
            updated_number_scheduled: updated,
            number_available: available,
            number_unavailable: desired - available,
            collision_count: collisions,
            update_revision: hash,
            ..Default::default()
        });
        ds
    }
}

prop_compose! {
    /// An object as a v1alpha1 client writes it: Surging allowed, the progressive-create-pod
    /// annotation set, unset or set to something else.
    fn alpha()(
        strategy in strategy(&["Standard", "InPlaceIfPossible", "Surging"]),
        progressive in proptest::option::of(prop_oneof![Just("true"), Just("false"), Just("")]),
        annotations in other_annotations(),
        min_ready in 0i32..30,
        burst in ios(),
        (desired, ready, updated, available, collisions, hash) in counts(),
    ) -> v1alpha1::DaemonSet {
        let mut annotations = annotations;
        if let Some(p) = progressive {
            annotations.get_or_insert_with(Vec::new)
                .push((PROGRESSIVE_CREATE_POD_ANNOTATION.to_string(), p.to_string()));
        }
        let mut ds = v1alpha1::DaemonSet::new("demo", v1alpha1::DaemonSetSpec {
            selector: Some(LabelSelector {
                match_labels: Some([("app".to_string(), "demo".to_string())].into()),
                ..Default::default()
            }),
            update_strategy: strategy,
            min_ready_seconds: min_ready,
            burst_replicas: burst,
            ..Default::default()
        });
        ds.metadata = metadata(annotations);
        ds.status = Some(v1alpha1::DaemonSetStatus {
            desired_number_scheduled: desired,
            number_ready: ready,
            updated_number_scheduled: updated,
            number_available: available,
            collision_count: collisions,
            daemon_set_hash: hash,
            ..Default::default()
        });
        ds
    }
}

fn convert(object: serde_json::Value, to: &str) -> serde_json::Value {
    DaemonSetConverter.convert(object, to).unwrap()
}

proptest! {
    /// A stored object read through v1alpha1 and written back is unchanged, and its alpha
    /// form decodes as the alpha type.
    #[test]
    fn stored_objects_survive_a_v1alpha1_round_trip(ds in beta()) {
        let original = serde_json::to_value(&ds).unwrap();
        let alpha = convert(original.clone(), APPS_V1ALPHA1);
        prop_assert_eq!(&alpha["apiVersion"], APPS_V1ALPHA1);
        let typed: v1alpha1::DaemonSet = serde_json::from_value(alpha.clone()).unwrap();
        prop_assert_eq!(
            typed.status.map(|s| s.daemon_set_hash),
            ds.status.as_ref().map(|s| s.update_revision.clone())
        );
        prop_assert!(alpha["spec"].get("scaleStrategy").is_none());
        let back = convert(alpha, APPS_V1BETA1);
        prop_assert_eq!(&back, &original);
        let typed: v1beta1::DaemonSet = serde_json::from_value(back).unwrap();
        prop_assert_eq!(typed, ds);
    }

    /// A v1alpha1 object stored and read back through v1alpha1 is unchanged, Surging and the
    /// annotation included; the stored form carries partitionedScaling and updateRevision.
    #[test]
    fn v1alpha1_objects_survive_storage(ds in alpha()) {
        let original = serde_json::to_value(&ds).unwrap();
        let beta = convert(original.clone(), APPS_V1BETA1);
        let typed: v1beta1::DaemonSet = serde_json::from_value(beta.clone()).unwrap();
        let progressive = ds.metadata.annotations.as_ref()
            .and_then(|a| a.get(PROGRESSIVE_CREATE_POD_ANNOTATION))
            .map(String::as_str) == Some("true");
        prop_assert_eq!(typed.spec.partitioned_scaling(), progressive);
        let rolling_type = typed.spec.update_strategy.rolling_update.as_ref().and_then(|r| r.type_.clone());
        prop_assert!(rolling_type != Some(RollingUpdateType::Surging));
        prop_assert_eq!(
            typed.status.map(|s| s.update_revision),
            ds.status.as_ref().map(|s| s.daemon_set_hash.clone())
        );
        let back = convert(beta, APPS_V1ALPHA1);
        prop_assert_eq!(&back, &original);
    }
}

#[test]
fn an_openkruise_v1alpha1_manifest_converts_as_openkruise_maps_it() {
    let alpha = json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "DaemonSet",
        "metadata": {"name": "sample", "annotations": {
            "daemonset.kruise.io/progressive-create-pod": "true", "team": "a"}},
        "spec": {
            "selector": {"matchLabels": {"app": "sample"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                "rollingUpdateType": "Surging", "maxSurge": 1, "partition": 2, "unknownField": 1}},
            "template": {"metadata": {"labels": {"app": "sample"}},
                "spec": {"containers": [{"name": "main", "image": "nginx"}]}}},
        "status": {"desiredNumberScheduled": 3, "daemonSetHash": "abc"}
    });
    let beta = convert(alpha.clone(), APPS_V1BETA1);
    assert_eq!(
        beta,
        json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet",
            "metadata": {"name": "sample", "annotations": {
                "team": "a", "daemonset.kruise.io/v1alpha1-surging": "true"}},
            "spec": {
                "selector": {"matchLabels": {"app": "sample"}},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                    "rollingUpdateType": "Standard", "maxSurge": 1, "partition": 2, "unknownField": 1}},
                "template": {"metadata": {"labels": {"app": "sample"}},
                    "spec": {"containers": [{"name": "main", "image": "nginx"}]}},
                "scaleStrategy": {"partitionedScaling": true}},
            "status": {"desiredNumberScheduled": 3, "updateRevision": "abc"}
        })
    );
    assert_eq!(convert(beta, APPS_V1ALPHA1), alpha);
}

#[test]
fn documented_lossy_cases() {
    // An empty scaleStrategy has no v1alpha1 form.
    let beta = json!({"apiVersion": APPS_V1BETA1, "kind": "DaemonSet", "metadata": {"name": "a"},
        "spec": {"scaleStrategy": {}}});
    let back = convert(convert(beta, APPS_V1ALPHA1), APPS_V1BETA1);
    assert_eq!(back["spec"], json!({}));
    // A v1beta1 object carrying the v1alpha1 annotation comes back partitioned.
    let beta = json!({"apiVersion": APPS_V1BETA1, "kind": "DaemonSet",
        "metadata": {"name": "a", "annotations": {PROGRESSIVE_CREATE_POD_ANNOTATION: "true"}},
        "spec": {}});
    let back = convert(convert(beta, APPS_V1ALPHA1), APPS_V1BETA1);
    assert_eq!(
        back["spec"],
        json!({"scaleStrategy": {"partitionedScaling": true}})
    );
    assert!(back["metadata"].get("annotations").is_none());
}
