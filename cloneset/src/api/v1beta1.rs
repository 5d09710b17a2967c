//! `apps.kruise.io/v1beta1` CloneSet: the storage version.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_core::api::{
    InPlaceUpdateStrategy, Lifecycle, UpdatePriorityStrategy, UpdateScatterTerm,
};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::{CloneSetCondition, CloneSetStatus};
use super::{is_false, is_zero_i32, string_enum};

/// Desired state of a CloneSet (`v1beta1`).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "CloneSet",
    plural = "clonesets",
    singular = "cloneset",
    shortname = "clone",
    namespaced,
    derive = "PartialEq",
    status = "CloneSetStatus",
    storage = true,
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

/// Scale strategy (`v1beta1`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetScaleStrategy {
    /// Names of pods to delete (specified delete).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods_to_delete: Vec<String>,
    /// Most new pods that may be not-yet-available during scale-up (default unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Reuse the PVCs of a vanished instance for the next pod (default false in v1beta1).
    #[serde(rename = "enablePVCReuse", default, skip_serializing_if = "is_false")]
    pub enable_pvc_reuse: bool,
    /// Do not count `PreparingDelete` pods towards replicas when scaling.
    #[serde(default, skip_serializing_if = "is_false")]
    pub exclude_preparing_delete: bool,
}

string_enum! {
    /// `updateStrategy.type` in `v1beta1`.
    CloneSetUpdateStrategyType {
        /// Update pods following `rollingUpdate`.
        RollingUpdate = "RollingUpdate",
        /// Update pods only when they are deleted.
        OnDelete = "OnDelete",
    }
}

string_enum! {
    /// `updateStrategy.rollingUpdate.podUpdatePolicy`.
    CloneSetPodUpdatePolicy {
        /// Delete and recreate pods.
        ReCreate = "ReCreate",
        /// Update in place when only in-place-updatable fields changed, else recreate.
        InPlaceIfPossible = "InPlaceIfPossible",
        /// Update in place only; other changes are rejected.
        InPlaceOnly = "InPlaceOnly",
    }
}

/// Update strategy (`v1beta1`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetUpdateStrategy {
    /// `RollingUpdate` (default) or `OnDelete`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<CloneSetUpdateStrategyType>,
    /// Rolling update parameters (type `RollingUpdate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateCloneSetStrategy>,
}

/// Rolling update parameters (`v1beta1`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateCloneSetStrategy {
    /// Number or percent of pods kept at the old revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<IntOrString>,
    /// Most pods unavailable during update and specified delete (default `20%`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Most extra pods above replicas during update and specified delete (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
    /// How pods are updated (default `ReCreate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_update_policy: Option<CloneSetPodUpdatePolicy>,
    /// Stop updating pods (scaling continues).
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
    /// Order in which pods are updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_strategy: Option<UpdatePriorityStrategy>,
    /// Label terms whose pods are spread across the update order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scatter_strategy: Vec<UpdateScatterTerm>,
    /// In-place update parameters (grace period, image pre-download).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_update_strategy: Option<InPlaceUpdateStrategy>,
}

impl CloneSetUpdateStrategy {
    /// Whether pods are updated only when deleted.
    pub fn is_on_delete(&self) -> bool {
        self.type_ == Some(CloneSetUpdateStrategyType::OnDelete)
    }
}

impl RollingUpdateCloneSetStrategy {
    /// The pod update policy, `ReCreate` when unset or empty.
    pub fn policy(&self) -> CloneSetPodUpdatePolicy {
        match &self.pod_update_policy {
            None => CloneSetPodUpdatePolicy::ReCreate,
            Some(CloneSetPodUpdatePolicy::Unknown(s)) if s.is_empty() => {
                CloneSetPodUpdatePolicy::ReCreate
            }
            Some(p) => p.clone(),
        }
    }
}
