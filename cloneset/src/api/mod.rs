//! CloneSet API: the `apps.kruise.io` `v1alpha1` and `v1beta1` types (field for field as
//! OpenKruise defines them), the two-version CRD, defaulting and validation.
//!
//! * [`v1alpha1`]: the version most published manifests use (served, not stored);
//! * [`v1beta1`]: the storage version, the one the controller reconciles;
//! * [`crd`]: the merged `CustomResourceDefinition` for the `crd` subcommand;
//! * [`defaults`]: OpenKruise's `SetDefaultsCloneSet` / `SetDefaultsCloneSetV1beta1`;
//! * [`validation`]: the validating webhook's checks, as a list of field errors.

pub mod crd;
pub mod defaults;

/// The CloneSet spec and its kube `CustomResource` root, field for field the same in both
/// versions: each version's module expands it, and `CloneSetScaleStrategy` and
/// `CloneSetUpdateStrategy` (which differ) resolve to that module's own. (Not formatted:
/// rustfmt re-indents attributes inside a macro on every run.)
#[rustfmt::skip]
macro_rules! cloneset_spec {
    ($version:tt, storage = $storage:tt) => {
        #[doc = concat!("Desired state of a CloneSet (`", $version, "`).")]
        #[derive(
            CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema,
        )]
        #[kube(
            group = "apps.kruise.io",
            version = $version,
            kind = "CloneSet",
            plural = "clonesets",
            singular = "cloneset",
            shortname = "clone",
            namespaced,
            derive = "PartialEq",
            status = "CloneSetStatus",
            storage = $storage,
            served = true,
            doc = "CloneSet is the Schema for the clonesets API"
        )]
        #[serde(rename_all = "camelCase")]
        pub struct CloneSetSpec {
            /// Desired number of pods (default 1).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub replicas: Option<i32>,
            /// Label query over pods; must match the template's labels.
            #[serde(default)]
            pub selector: Option<LabelSelector>,
            /// Template of the pods the CloneSet creates.
            #[serde(default)]
            #[schemars(schema_with = "super::preserve_unknown_fields")]
            pub template: PodTemplateSpec,
            /// Claims each pod gets its own copy of, named `<vct>-<cloneset>-<instance-id>`.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            #[schemars(schema_with = "super::preserve_unknown_fields")]
            pub volume_claim_templates: Vec<PersistentVolumeClaim>,
            /// How the CloneSet scales.
            #[serde(default)]
            pub scale_strategy: CloneSetScaleStrategy,
            /// How the CloneSet updates pods when the template changes.
            #[serde(default)]
            pub update_strategy: CloneSetUpdateStrategy,
            /// Old revisions kept (default 10).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub revision_history_limit: Option<i32>,
            /// Seconds a pod must be ready before it counts as available.
            #[serde(default, skip_serializing_if = "is_zero_i32")]
            pub min_ready_seconds: i32,
            /// Lifecycle hooks: preDelete, inPlaceUpdate, preNormal.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub lifecycle: Option<Lifecycle>,
            /// Seconds before a stalled rollout is reported as `ProgressDeadlineExceeded`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub progress_deadline_seconds: Option<i32>,
        }
    };
}
pub(crate) use cloneset_spec;

pub mod v1alpha1;
pub mod v1beta1;
pub mod validation;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of CloneSet.
pub const GROUP: &str = kruise_core::api::version::APPS_GROUP;
/// Kind name.
pub const KIND: &str = "CloneSet";
/// Default `updateStrategy.maxUnavailable`.
pub const DEFAULT_MAX_UNAVAILABLE: &str = "20%";
/// Default `revisionHistoryLimit`.
pub const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;

/// Observed state of a CloneSet; identical in both versions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetStatus {
    /// The most recent generation observed by the controller.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
    /// Number of active pods owned by the CloneSet.
    #[serde(default)]
    pub replicas: i32,
    /// Number of ready pods.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Number of available pods (ready for `minReadySeconds`, lifecycle `Normal`).
    #[serde(default)]
    pub available_replicas: i32,
    /// Number of pods at the update revision.
    #[serde(default)]
    pub updated_replicas: i32,
    /// Number of ready pods at the update revision.
    #[serde(default)]
    pub updated_ready_replicas: i32,
    /// Number of available pods at the update revision.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub updated_available_replicas: i32,
    /// Number of pods that should be at the update revision (`replicas - partition`).
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub expected_updated_replicas: i32,
    /// Revision name that pods are being updated to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub update_revision: String,
    /// Revision name of the pods before the update started.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current_revision: String,
    /// Hash collision counter for revision names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    /// Conditions: `FailedScale`, `FailedUpdate`, `Progressing`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<CloneSetCondition>,
    /// Selector string for the scale subresource (HPA, `kubectl scale`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label_selector: String,
}

/// One CloneSet condition.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetCondition {
    /// `FailedScale`, `FailedUpdate`, `Progressing` or `ScaleExpectationsExpired`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Last time the condition was updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// Last time the condition changed status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Machine-readable reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// Condition types.
pub mod condition {
    /// Scaling failed.
    pub const FAILED_SCALE: &str = "FailedScale";
    /// Updating failed.
    pub const FAILED_UPDATE: &str = "FailedUpdate";
    /// Rollout progress (only with `progressDeadlineSeconds`).
    pub const PROGRESSING: &str = "Progressing";
    /// kruise-rs only: True while the controller acts without its scale expectations
    /// having been satisfied (they expired), False once they are satisfied again.
    pub const SCALE_EXPECTATIONS_EXPIRED: &str = "ScaleExpectationsExpired";
    /// Reason: deadline exceeded.
    pub const REASON_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";
    /// Reason: paused.
    pub const REASON_PAUSED: &str = "CloneSetPaused";
    /// Reason: updating.
    pub const REASON_UPDATED: &str = "CloneSetUpdated";
    /// Reason: partition reached and available.
    pub const REASON_PARTITION_AVAILABLE: &str = "ProgressPartitionAvailable";
    /// Reason: all updated and available.
    pub const REASON_AVAILABLE: &str = "CloneSetAvailable";
}

pub(crate) use kruise_core::api::serde_helpers::{
    is_false, is_zero_i32, is_zero_i64, preserve_unknown_fields,
};
pub(crate) use kruise_core::string_enum;
