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

super::cloneset_spec!("v1beta1", storage = true);

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
