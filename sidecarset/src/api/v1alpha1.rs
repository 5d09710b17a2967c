//! `apps.kruise.io/v1alpha1` SidecarSet: served, converted to `v1beta1` for storage.

use k8s_openapi::api::core::v1::{LocalObjectReference, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::SidecarSetStatus;
use super::{
    SidecarContainer, SidecarSetInjectionStrategy, SidecarSetPatchPodMetadata,
    SidecarSetUpdateStrategy,
};

/// Desired state of a SidecarSet (`v1alpha1`).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "SidecarSet",
    storage = false,
    served = true,
    plural = "sidecarsets",
    singular = "sidecarset",
    derive = "PartialEq",
    derive = "Default",
    status = "SidecarSetStatus",
    doc = "SidecarSet is the Schema for the sidecarsets API"
)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetSpec {
    /// Pods to inject (required, non-empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// The one namespace whose pods are injected (wins over `namespaceSelector`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Namespaces (by their labels) whose pods are injected; `None` = all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Init containers injected at pod creation (sorted by name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<SidecarContainer>,
    /// Sidecar containers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<SidecarContainer>,
    /// Volumes the sidecars may mount (only the mounted ones are injected).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub volumes: Vec<Volume>,
    /// How injected pods are upgraded.
    #[serde(default, skip_serializing_if = "super::is_default")]
    pub update_strategy: SidecarSetUpdateStrategy,
    /// How new pods are injected.
    #[serde(default, skip_serializing_if = "super::is_default")]
    pub injection_strategy: SidecarSetInjectionStrategy,
    /// Pull secrets merged into the pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// Revisions kept (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    /// Pod annotations patched at injection.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patch_pod_metadata: Vec<SidecarSetPatchPodMetadata>,
}
