//! `apps.kruise.io/v1alpha1` CloneSet: served, converted to `v1beta1` for storage.

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

super::cloneset_spec!("v1alpha1", storage = false);

/// Scale strategy (`v1alpha1`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetScaleStrategy {
    /// Names of pods to delete (specified delete).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods_to_delete: Vec<String>,
    /// Most new pods that may be not-yet-available during scale-up (default unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Do not reuse the PVCs of a vanished instance (default false: reuse).
    #[serde(rename = "disablePVCReuse", default, skip_serializing_if = "is_false")]
    pub disable_pvc_reuse: bool,
}

string_enum! {
    /// `updateStrategy.type` in `v1alpha1`.
    CloneSetUpdateStrategyType {
        /// Delete and recreate pods (default).
        ReCreate = "ReCreate",
        /// Update in place when only in-place-updatable fields changed, else recreate.
        InPlaceIfPossible = "InPlaceIfPossible",
        /// Update in place only; other template changes are rejected.
        InPlaceOnly = "InPlaceOnly",
        /// Update pods only when they are deleted.
        OnDelete = "OnDelete",
    }
}

/// Update strategy (`v1alpha1`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetUpdateStrategy {
    /// `ReCreate` (default), `InPlaceIfPossible`, `InPlaceOnly` or `OnDelete`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<CloneSetUpdateStrategyType>,
    /// Number or percent of pods kept at the old revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<IntOrString>,
    /// Most pods unavailable during update and specified delete (default `20%`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Most extra pods above replicas during update and specified delete (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
    /// Stop updating pods (scaling continues).
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
    /// Order in which pods are updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_strategy: Option<UpdatePriorityStrategy>,
    /// Label terms whose pods are spread across the update order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scatter_strategy: Vec<UpdateScatterTerm>,
    /// In-place update parameters (grace period).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_update_strategy: Option<InPlaceUpdateStrategy>,
}
