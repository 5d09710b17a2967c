//! `apps.kruise.io/v1alpha1` ContainerRecreateRequest: served, not stored. The same spec as
//! `v1beta1`; its status has no `containerStatusSnapshot` and no conditions (they travel as
//! the annotations `crr.apps.kruise.io/sync-container-statuses` and
//! `crr.apps.kruise.io/unready-acquired`). Only the CRD's schema is generated from these
//! types: everything else works on `v1beta1`, which `/convert` turns a `v1alpha1` object into.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Container, ContainerRecreateState, Strategy};

/// Desired state of a ContainerRecreateRequest (`v1alpha1`).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "ContainerRecreateRequest",
    plural = "containerrecreaterequests",
    singular = "containerrecreaterequest",
    shortname = "crr",
    namespaced,
    derive = "PartialEq",
    status = "ContainerRecreateRequestStatus",
    storage = false,
    served = true,
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
    /// How to recreate them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<Strategy>,
    /// Seconds after creation the request completes, recreated or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// Seconds after completion the request is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
}

/// Observed state of a ContainerRecreateRequest (`v1alpha1`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestStatus {
    /// `Pending`, `Recreating` or `Completed`.
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
}
