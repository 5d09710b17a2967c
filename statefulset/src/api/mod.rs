//! Advanced StatefulSet API: the `apps.kruise.io` `v1beta1` (stored) and `v1alpha1` (served)
//! types, the two-version CRD, defaulting and validation.
//!
//! Both versions carry every field of OpenKruise's `v1beta1` (the spec is declared once,
//! by the `statefulset_spec!` macro, for each version). OpenKruise's `v1alpha1` lacks the
//! `v1beta1`-only fields (`reserveOrdinals`, `lifecycle`, `scaleStrategy`, `ordinals`,
//! `persistentVolumeClaimRetentionPolicy`, `volumeClaimUpdateStrategy`, status
//! `updatedReady/AvailableReplicas` and `volumeClaims`), so an edit through `v1alpha1` there
//! silently drops them (K#2102); here they survive every served version.

pub mod crd;
pub mod defaults;
pub mod ordinals;
pub mod v1alpha1;
pub mod v1beta1;
pub mod validation;

use k8s_openapi::api::apps::v1::StatefulSetCondition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_core::api::{InPlaceUpdateStrategy, UpdatePriorityStrategy};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub(crate) use kruise_core::api::serde_helpers::{
    is_false, is_zero_i32, is_zero_i64, preserve_unknown_fields,
};
pub(crate) use kruise_core::string_enum;

/// API group.
pub const GROUP: &str = kruise_core::api::version::APPS_GROUP;
/// Kind name.
pub const KIND: &str = "StatefulSet";
/// Plural resource name.
pub const PLURAL: &str = "statefulsets";
/// Default `revisionHistoryLimit`.
pub const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;
/// Largest `rollingUpdate.minReadySeconds` (OpenKruise's `MaxMinReadySeconds`).
pub const MAX_MIN_READY_SECONDS: i32 = 300;

string_enum! {
    /// `podManagementPolicy`.
    PodManagementPolicy {
        /// One ordinal at a time, each Running and available before the next.
        OrderedReady = "OrderedReady",
        /// All ordinals at once.
        Parallel = "Parallel",
    }
}

string_enum! {
    /// `updateStrategy.type`.
    UpdateStrategyType {
        /// Update pods in descending ordinal order down to `partition`.
        RollingUpdate = "RollingUpdate",
        /// Update a pod only when it is deleted.
        OnDelete = "OnDelete",
    }
}

string_enum! {
    /// `updateStrategy.rollingUpdate.podUpdatePolicy`.
    PodUpdatePolicy {
        /// Delete and recreate pods.
        ReCreate = "ReCreate",
        /// Update in place when only in-place-updatable fields changed, else recreate.
        InPlaceIfPossible = "InPlaceIfPossible",
        /// Update in place only.
        InPlaceOnly = "InPlaceOnly",
    }
}

string_enum! {
    /// `persistentVolumeClaimRetentionPolicy.whenDeleted` / `whenScaled`.
    RetentionPolicyType {
        /// Keep the claims.
        Retain = "Retain",
        /// Delete the claims.
        Delete = "Delete",
    }
}

string_enum! {
    /// `volumeClaimUpdateStrategy.type`.
    VolumeClaimUpdateStrategyType {
        /// Expand claims before their pod is rolled.
        OnPodRollingUpdate = "OnPodRollingUpdate",
        /// Template changes reach a claim only when it is deleted.
        OnDelete = "OnDelete",
    }
}

/// `updateStrategy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetUpdateStrategy {
    /// `RollingUpdate` (default) or `OnDelete`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<UpdateStrategyType>,
    /// Rolling update parameters (type `RollingUpdate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateStatefulSetStrategy>,
}

/// `updateStrategy.rollingUpdate`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateStatefulSetStrategy {
    /// Ordinals below it keep the current revision (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<i32>,
    /// Most pods unavailable during the update (default 1; above 1 only with Parallel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// `ReCreate` (default), `InPlaceIfPossible` or `InPlaceOnly`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_update_policy: Option<PodUpdatePolicy>,
    /// Stop the rolling update.
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
    /// Update in a priority order instead of by ordinal (Parallel only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unordered_update: Option<UnorderedUpdateStrategy>,
    /// In-place update parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_update_strategy: Option<InPlaceUpdateStrategy>,
    /// Seconds a new or updated pod must be ready before it counts as available (0..300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_ready_seconds: Option<i32>,
}

/// `updateStrategy.rollingUpdate.unorderedUpdate`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnorderedUpdateStrategy {
    /// The update order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_strategy: Option<UpdatePriorityStrategy>,
}

/// `volumeClaimUpdateStrategy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeClaimUpdateStrategy {
    /// `OnPodRollingUpdate` or `OnDelete`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<VolumeClaimUpdateStrategyType>,
}

/// `scaleStrategy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetScaleStrategy {
    /// Most pods not available while scaling (Parallel only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
}

/// `persistentVolumeClaimRetentionPolicy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PersistentVolumeClaimRetentionPolicy {
    /// What happens to the claims when the set is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_deleted: Option<RetentionPolicyType>,
    /// What happens to the claims of ordinals scaled away.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_scaled: Option<RetentionPolicyType>,
}

/// `ordinals`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetOrdinals {
    /// The first ordinal (gate `StatefulSetStartOrdinal`).
    #[serde(default)]
    pub start: i32,
}

/// Observed state; the same in both versions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetStatus {
    /// The most recent generation observed by the controller.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
    /// Number of pods created.
    #[serde(default)]
    pub replicas: i32,
    /// Number of Running and Ready pods.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Number of pods ready for `minReadySeconds` with lifecycle `Normal`.
    #[serde(default)]
    pub available_replicas: i32,
    /// Number of pods at the current revision.
    #[serde(default)]
    pub current_replicas: i32,
    /// Number of pods at the update revision.
    #[serde(default)]
    pub updated_replicas: i32,
    /// Number of ready pods at the update revision.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub updated_ready_replicas: i32,
    /// Number of available pods at the update revision.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub updated_available_replicas: i32,
    /// Revision of the pods before the update.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current_revision: String,
    /// Revision pods are being updated to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub update_revision: String,
    /// Hash collision counter for revision names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    /// Conditions: `FailedCreatePod`, `FailedUpdatePod`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<StatefulSetCondition>,
    /// Selector string for the scale subresource.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label_selector: String,
    /// Per volumeClaimTemplate compatibility counts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_claims: Vec<VolumeClaimStatus>,
}

/// `status.volumeClaims[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeClaimStatus {
    /// The volumeClaimTemplate's name.
    pub volume_claim_name: String,
    /// Claims whose request matches the template.
    pub compatible_replicas: i32,
    /// Of those, claims whose capacity has caught up.
    pub compatible_ready_replicas: i32,
}

/// Condition types (apps `StatefulSetCondition`).
pub mod condition {
    /// A pod could not be created.
    pub const FAILED_CREATE_POD: &str = "FailedCreatePod";
    /// A pod could not be updated or deleted.
    pub const FAILED_UPDATE_POD: &str = "FailedUpdatePod";
}

/// Declares `StatefulSetSpec` (and through kube's derive, `StatefulSet`) for one served
/// version: both versions carry the same fields.
macro_rules! statefulset_spec {
    ($version:literal, $storage:literal) => {
        use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodTemplateSpec};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
        use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
        use kruise_core::api::Lifecycle;
        use kube::CustomResource;
        use schemars::JsonSchema;
        use serde::{Deserialize, Serialize};

        pub use super::{
            PersistentVolumeClaimRetentionPolicy, PodManagementPolicy, PodUpdatePolicy,
            RetentionPolicyType, RollingUpdateStatefulSetStrategy, StatefulSetOrdinals,
            StatefulSetScaleStrategy, StatefulSetStatus, StatefulSetUpdateStrategy,
            UnorderedUpdateStrategy, UpdateStrategyType, VolumeClaimUpdateStrategy,
            VolumeClaimUpdateStrategyType,
        };

        /// Desired state of an Advanced StatefulSet.
        #[derive(
            CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema,
        )]
        #[kube(
                                    group = "apps.kruise.io",
                                    version = $version,
                                    kind = "StatefulSet",
                                    plural = "statefulsets",
                                    singular = "statefulset",
                                    shortname = "sts",
                                    shortname = "asts",
                                    namespaced,
                                    derive = "PartialEq",
                                    status = "StatefulSetStatus",
                                    storage = $storage,
                                    served = true,
                                    doc = "StatefulSet is the Schema for the statefulsets API"
                                )]
        #[serde(rename_all = "camelCase")]
        pub struct StatefulSetSpec {
            /// Number of ordinals to run (default 1); reserved ordinals are skipped.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub replicas: Option<i32>,
            /// Label query over pods; must match the template's labels.
            #[serde(default)]
            pub selector: Option<LabelSelector>,
            /// Template of the pods.
            #[serde(default)]
            #[schemars(schema_with = "super::preserve_unknown_fields")]
            pub template: PodTemplateSpec,
            /// Claims each pod gets its own copy of, named `<template>-<set>-<ordinal>`.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            #[schemars(schema_with = "super::preserve_unknown_fields")]
            pub volume_claim_templates: Vec<PersistentVolumeClaim>,
            /// How volumeClaimTemplates changes reach existing claims.
            #[serde(default, skip_serializing_if = "super::is_default")]
            pub volume_claim_update_strategy: VolumeClaimUpdateStrategy,
            /// The governing Service: the pods' `subdomain`.
            #[serde(default, skip_serializing_if = "String::is_empty")]
            pub service_name: String,
            /// `OrderedReady` (default) or `Parallel`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub pod_management_policy: Option<PodManagementPolicy>,
            /// How pods are updated when the template changes.
            #[serde(default, skip_serializing_if = "super::is_default")]
            pub update_strategy: StatefulSetUpdateStrategy,
            /// Old revisions kept (default 10).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub revision_history_limit: Option<i32>,
            /// Ordinals never used: ints or `"a-b"` inclusive ranges.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub reserve_ordinals: Vec<IntOrString>,
            /// Lifecycle hooks: preDelete, inPlaceUpdate, preNormal.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub lifecycle: Option<Lifecycle>,
            /// How the set scales.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub scale_strategy: Option<StatefulSetScaleStrategy>,
            /// What happens to the claims on deletion and scale-in.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub persistent_volume_claim_retention_policy:
                Option<PersistentVolumeClaimRetentionPolicy>,
            /// The ordinal window's start.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub ordinals: Option<StatefulSetOrdinals>,
        }
    };
}
pub(crate) use kruise_core::api::serde_helpers::is_default;
pub(crate) use statefulset_spec;
