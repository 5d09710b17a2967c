//! `apps.kruise.io/v1beta1` ContainerRecreateRequest: the storage version, the one the
//! webhook, the controller and the node agent work on.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Container, ContainerRecreateState, PRE_RECREATE_GRACE, Strategy, SyncContainerStatus};

/// Desired state of a ContainerRecreateRequest (`v1beta1`).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "ContainerRecreateRequest",
    plural = "containerrecreaterequests",
    singular = "containerrecreaterequest",
    shortname = "crr",
    namespaced,
    derive = "PartialEq",
    derive = "Default",
    status = "ContainerRecreateRequestStatus",
    doc = "ContainerRecreateRequest is the Schema for the containerrecreaterequests API"
)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestSpec {
    /// The pod (in the request's namespace) whose containers are recreated.
    #[serde(default)]
    pub pod_name: String,
    /// The containers to recreate, in order.
    #[serde(default)]
    pub containers: Vec<Container>,
    /// How to recreate them (defaulted to `{}` by the webhook).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<Strategy>,
    /// Seconds after creation the request completes, recreated or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// Seconds after completion the request is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
}

/// Observed state of a ContainerRecreateRequest (`v1beta1`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestStatus {
    /// `Pending`, `Recreating` or `Completed` (empty until the node agent takes it).
    #[serde(default)]
    pub phase: String,
    /// When it completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Why it completed as it did.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Each container's progress.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_recreate_states: Vec<ContainerRecreateState>,
    /// The pod's statuses of the containers, synced while recreating.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_status_snapshot: Vec<SyncContainerStatus>,
    /// `PreRecreateGrace` once the pod was made not-ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

impl ContainerRecreateRequestStatus {
    /// The True `PreRecreateGrace` condition, if any.
    pub fn pre_recreate_grace(&self) -> Option<&Condition> {
        self.conditions
            .iter()
            .find(|c| c.type_ == PRE_RECREATE_GRACE && c.status == "True")
    }
}
