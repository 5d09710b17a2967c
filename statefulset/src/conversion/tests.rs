use super::*;
use crate::api::{
    PersistentVolumeClaimRetentionPolicy, PodManagementPolicy, PodUpdatePolicy,
    RetentionPolicyType, RollingUpdateStatefulSetStrategy, StatefulSetOrdinals,
    StatefulSetScaleStrategy, StatefulSetStatus, StatefulSetUpdateStrategy,
    UnorderedUpdateStrategy, UpdateStrategyType, VolumeClaimStatus, VolumeClaimUpdateStrategy,
    VolumeClaimUpdateStrategyType, v1alpha1, v1beta1,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_admission::Converter;
use kruise_core::api::version::{APPS_V1ALPHA1, APPS_V1BETA1};
use kruise_core::api::{
    InPlaceUpdateStrategy, Lifecycle, LifecycleHook, UpdatePriorityOrderTerm,
    UpdatePriorityStrategy,
};
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

fn reserve() -> impl Strategy<Value = Vec<IntOrString>> {
    proptest::collection::vec(
        prop_oneof![
            (0i32..20).prop_map(IntOrString::Int),
            (0i32..20, 0i32..5).prop_map(|(a, l)| IntOrString::String(format!("{a}-{}", a + l))),
        ],
        0..4,
    )
}

fn retention() -> impl Strategy<Value = Option<RetentionPolicyType>> {
    prop_oneof![
        Just(None),
        Just(Some(RetentionPolicyType::Retain)),
        Just(Some(RetentionPolicyType::Delete))
    ]
}

fn rolling() -> impl Strategy<Value = Option<RollingUpdateStatefulSetStrategy>> {
    proptest::option::of(
        (
            proptest::option::of(0i32..10),
            ios(),
            prop_oneof![
                Just(None),
                Just(Some(PodUpdatePolicy::ReCreate)),
                Just(Some(PodUpdatePolicy::InPlaceIfPossible)),
                Just(Some(PodUpdatePolicy::InPlaceOnly))
            ],
            any::<bool>(),
            proptest::option::of("[a-z]{1,5}"),
            0i32..30,
            proptest::option::of(0i32..300),
        )
            .prop_map(
                |(partition, max, policy, paused, order, grace, min_ready)| {
                    RollingUpdateStatefulSetStrategy {
                        partition,
                        max_unavailable: max,
                        pod_update_policy: policy,
                        paused,
                        unordered_update: order.map(|key| UnorderedUpdateStrategy {
                            priority_strategy: Some(UpdatePriorityStrategy {
                                order_priority: vec![UpdatePriorityOrderTerm { ordered_key: key }],
                                ..Default::default()
                            }),
                        }),
                        in_place_update_strategy: (grace > 0).then(|| InPlaceUpdateStrategy {
                            grace_period_seconds: grace,
                            ..Default::default()
                        }),
                        min_ready_seconds: min_ready,
                    }
                },
            ),
    )
}

prop_compose! {
    fn beta()(
        replicas in proptest::option::of(0i32..20),
        parallel in any::<bool>(),
        on_delete in any::<bool>(),
        rolling in rolling(),
        history in proptest::option::of(0i32..20),
        reserve_ordinals in reserve(),
        hook in proptest::option::of("[a-z]{1,5}"),
        scale_max in ios(),
        (when_deleted, when_scaled) in (retention(), retention()),
        start in proptest::option::of(0i32..5),
        resize in any::<bool>(),
        status in (0i32..10, 0i32..10, "[a-z]{0,4}", proptest::option::of(0i32..3), 0i32..4),
    ) -> v1beta1::StatefulSet {
        let mut set = v1beta1::StatefulSet::new("demo", v1beta1::StatefulSetSpec {
            replicas,
            selector: Some(LabelSelector {
                match_labels: Some([("app".to_string(), "demo".to_string())].into()),
                ..Default::default()
            }),
            service_name: "demo".into(),
            pod_management_policy: Some(if parallel { PodManagementPolicy::Parallel } else { PodManagementPolicy::OrderedReady }),
            update_strategy: StatefulSetUpdateStrategy {
                type_: Some(if on_delete { UpdateStrategyType::OnDelete } else { UpdateStrategyType::RollingUpdate }),
                rolling_update: rolling,
            },
            revision_history_limit: history,
            reserve_ordinals,
            lifecycle: hook.map(|label| Lifecycle {
                pre_delete: Some(LifecycleHook {
                    labels_handler: [(label, "true".to_string())].into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            scale_strategy: scale_max.map(|m| StatefulSetScaleStrategy { max_unavailable: Some(m) }),
            persistent_volume_claim_retention_policy: (when_deleted.is_some() || when_scaled.is_some())
                .then_some(PersistentVolumeClaimRetentionPolicy { when_deleted, when_scaled }),
            ordinals: start.map(|start| StatefulSetOrdinals { start }),
            volume_claim_update_strategy: VolumeClaimUpdateStrategy {
                type_: resize.then_some(VolumeClaimUpdateStrategyType::OnPodRollingUpdate),
            },
            ..Default::default()
        });
        set.metadata = ObjectMeta { name: Some("demo".into()), namespace: Some("default".into()), ..Default::default() };
        set.status = Some(StatefulSetStatus {
            replicas: status.0,
            updated_replicas: status.1,
            updated_ready_replicas: status.1,
            current_revision: status.2.clone(),
            update_revision: status.2,
            collision_count: status.3,
            volume_claims: (0..status.4).map(|i| VolumeClaimStatus {
                volume_claim_name: format!("data{i}"),
                compatible_replicas: i,
                compatible_ready_replicas: i,
            }).collect(),
            ..Default::default()
        });
        set
    }
}

fn convert(object: serde_json::Value, to: &str) -> serde_json::Value {
    StatefulSetConverter.convert(object, to).unwrap()
}

proptest! {
    /// Every field survives v1beta1 -> v1alpha1 -> v1beta1, and the alpha form decodes as
    /// the alpha type with the same fields (K#2102: reserveOrdinals survives).
    #[test]
    fn every_field_survives_a_round_trip(set in beta()) {
        let original = serde_json::to_value(&set).unwrap();
        let alpha = convert(original.clone(), APPS_V1ALPHA1);
        prop_assert_eq!(&alpha["apiVersion"], APPS_V1ALPHA1);
        let typed: v1alpha1::StatefulSet = serde_json::from_value(alpha.clone()).unwrap();
        prop_assert_eq!(&typed.spec.reserve_ordinals, &set.spec.reserve_ordinals);
        let back = convert(alpha, APPS_V1BETA1);
        prop_assert_eq!(&back, &original);
        let typed: v1beta1::StatefulSet = serde_json::from_value(back).unwrap();
        prop_assert_eq!(typed, set);
    }
}

#[test]
fn an_openkruise_v1alpha1_manifest_converts_unchanged() {
    let alpha = json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "StatefulSet",
        "metadata": {"name": "sample"},
        "spec": {"replicas": 3, "serviceName": "sample",
            "selector": {"matchLabels": {"app": "sample"}},
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 2, "unknownField": 1}},
            "template": {"metadata": {"labels": {"app": "sample"}}, "spec": {"containers": [{"name": "main", "image": "nginx"}]}}}
    });
    let beta = convert(alpha.clone(), APPS_V1BETA1);
    let mut expected = alpha;
    expected["apiVersion"] = json!(APPS_V1BETA1);
    assert_eq!(beta, expected);
}
