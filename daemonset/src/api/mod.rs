//! Advanced DaemonSet API: the `apps.kruise.io` `v1beta1` (stored) and `v1alpha1` (served)
//! types, the two-version CRD, defaulting and validation.
//!
//! The versions differ as OpenKruise's do: `v1alpha1` also accepts the deprecated
//! `rollingUpdateType: Surging`, has no `scaleStrategy` (the annotation
//! `daemonset.kruise.io/progressive-create-pod: "true"` carries `partitionedScaling`) and
//! reports `status.daemonSetHash` where `v1beta1` has `status.updateRevision`. The update
//! strategy types are shared.

pub mod crd;
pub mod defaults;
pub mod v1alpha1;
pub mod v1beta1;
pub mod validation;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub(crate) use kruise_core::api::serde_helpers::{
    is_default, is_false, is_zero_i32, is_zero_i64, preserve_unknown_fields,
};
pub(crate) use kruise_core::string_enum;

/// API group.
pub const GROUP: &str = kruise_core::api::version::APPS_GROUP;
/// Kind name.
pub const KIND: &str = "DaemonSet";
/// Plural resource name.
pub const PLURAL: &str = "daemonsets";
/// The CRD's name.
pub const CRD_NAME: &str = "daemonsets.apps.kruise.io";
/// Default `burstReplicas`.
pub const DEFAULT_BURST_REPLICAS: i32 = 250;
/// Default `revisionHistoryLimit`.
pub const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;
/// `v1alpha1` annotation: pods created on new nodes are also held back by the partition
/// (`v1beta1`'s `scaleStrategy.partitionedScaling`).
pub const PROGRESSIVE_CREATE_POD_ANNOTATION: &str = "daemonset.kruise.io/progressive-create-pod";

string_enum! {
    /// `updateStrategy.type`.
    UpdateStrategyType {
        /// Replace pods as the template changes (the default).
        RollingUpdate = "RollingUpdate",
        /// Replace a pod only when it is deleted.
        OnDelete = "OnDelete",
    }
}

string_enum! {
    /// `updateStrategy.rollingUpdate.rollingUpdateType`.
    RollingUpdateType {
        /// Delete the old pod and create a new one (the default).
        Standard = "Standard",
        /// Update in place when only in-place-updatable fields changed, else recreate.
        InPlaceIfPossible = "InPlaceIfPossible",
        /// `v1alpha1` only, deprecated: Standard with maxSurge 1 and maxUnavailable 0.
        Surging = "Surging",
    }
}

/// `updateStrategy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetUpdateStrategy {
    /// `RollingUpdate` (default) or `OnDelete`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<UpdateStrategyType>,
    /// Rolling update parameters (type `RollingUpdate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateDaemonSet>,
}

/// `updateStrategy.rollingUpdate`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateDaemonSet {
    /// `Standard` (default) or `InPlaceIfPossible` (`v1alpha1` also `Surging`).
    #[serde(
        rename = "rollingUpdateType",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub type_: Option<RollingUpdateType>,
    /// Most nodes whose pod may be unavailable during the update: a number or a percent of
    /// the desired nodes (rounded up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Most nodes that may run an extra, new pod during the update (rounded up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
    /// Only nodes matching it are updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Nodes kept at the old revision: a number or a percent of the desired nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<IntOrString>,
    /// Stop the rolling update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
}

/// `scaleStrategy` (`v1beta1`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetScaleStrategy {
    /// Creation on new nodes is limited by the partition too.
    #[serde(default, skip_serializing_if = "is_false")]
    pub partitioned_scaling: bool,
}

/// Declares `DaemonSetStatus` for one version: the counts are the same, the name of the
/// revision field differs.
macro_rules! daemonset_status {
    ($(#[$revision_doc:meta])* $revision:ident) => {
        /// Observed state of a DaemonSet.
        #[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "camelCase")]
        pub struct DaemonSetStatus {
            /// Nodes running at least one daemon pod and supposed to.
            #[serde(default)]
            pub current_number_scheduled: i32,
            /// Nodes running the daemon pod but not supposed to.
            #[serde(default)]
            pub number_misscheduled: i32,
            /// Nodes that should be running the daemon pod.
            #[serde(default)]
            pub desired_number_scheduled: i32,
            /// Nodes whose daemon pod is ready.
            #[serde(default)]
            pub number_ready: i32,
            /// The most recent generation fully synced.
            #[serde(default, skip_serializing_if = "super::is_zero_i64")]
            pub observed_generation: i64,
            /// Nodes running the updated daemon pod.
            #[serde(default)]
            pub updated_number_scheduled: i32,
            /// Nodes whose daemon pod is available (ready for minReadySeconds).
            #[serde(default, skip_serializing_if = "super::is_zero_i32")]
            pub number_available: i32,
            /// Nodes that should run the daemon pod but have none available.
            #[serde(default, skip_serializing_if = "super::is_zero_i32")]
            pub number_unavailable: i32,
            /// Hash collision counter for revision names.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub collision_count: Option<i32>,
            /// The DaemonSet's conditions.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub conditions: Vec<k8s_openapi::api::apps::v1::DaemonSetCondition>,
            $(#[$revision_doc])*
            #[serde(default, skip_serializing_if = "String::is_empty")]
            pub $revision: String,
        }
    };
}
pub(crate) use daemonset_status;

/// Declares `DaemonSetSpec` (and through kube's derive, `DaemonSet`) for one version;
/// `$($extra)*` are the version's own fields.
macro_rules! daemonset_kind {
    ($version:literal, $storage:literal, { $($extra:tt)* }) => {
        use k8s_openapi::api::core::v1::PodTemplateSpec;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
        use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
        use kruise_core::api::Lifecycle;
        use kube::CustomResource;
        use schemars::JsonSchema;
        use serde::{Deserialize, Serialize};

        pub use super::{
            DaemonSetScaleStrategy, DaemonSetUpdateStrategy, RollingUpdateDaemonSet,
            RollingUpdateType, UpdateStrategyType,
        };

        /// Desired state of an Advanced DaemonSet.
        #[derive(
            CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema,
        )]
        #[kube(
            group = "apps.kruise.io",
            version = $version,
            kind = "DaemonSet",
            plural = "daemonsets",
            singular = "daemonset",
            shortname = "daemon",
            shortname = "ads",
            namespaced,
            derive = "PartialEq",
            status = "DaemonSetStatus",
            storage = $storage,
            served = true,
            doc = "DaemonSet is the Schema for the daemonsets API"
        )]
        #[serde(rename_all = "camelCase")]
        pub struct DaemonSetSpec {
            /// Label query over pods; must match the template's labels.
            #[serde(default)]
            pub selector: Option<LabelSelector>,
            /// Template of the pod run on every eligible node.
            #[serde(default)]
            #[schemars(schema_with = "super::preserve_unknown_fields")]
            pub template: PodTemplateSpec,
            /// How pods are replaced when the template changes.
            #[serde(default, skip_serializing_if = "super::is_default")]
            pub update_strategy: DaemonSetUpdateStrategy,
            /// Seconds a new pod must be ready before it counts as available.
            #[serde(default, skip_serializing_if = "super::is_zero_i32")]
            pub min_ready_seconds: i32,
            /// Most pods created or deleted per sync (default 250; a percent of the desired
            /// nodes, rounded down).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub burst_replicas: Option<IntOrString>,
            /// Old revisions kept (default 10).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub revision_history_limit: Option<i32>,
            /// Lifecycle hooks (only preDelete is supported).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub lifecycle: Option<Lifecycle>,
            $($extra)*
        }
    };
}
pub(crate) use daemonset_kind;

/// The served version a request came in, where defaulting and validation differ:
/// `v1alpha1` accepts `Surging` (and defaults it away), `v1beta1` lets `scaleStrategy`
/// change on UPDATE.
pub use kruise_core::api::version::Served;
