//! ContainerRecreateRequest API: the `apps.kruise.io` `v1alpha1` and `v1beta1` types (field
//! for field as OpenKruise defines them) and the CRD.
//!
//! * [`v1beta1`]: the storage version; its status carries the typed
//!   `containerStatusSnapshot` and the `PreRecreateGrace` condition;
//! * [`v1alpha1`]: served, not stored; the same spec, and the two status fields above as the
//!   annotations [`SYNC_CONTAINER_STATUSES_KEY`] and [`UNREADY_ACQUIRED_KEY`];
//! * [`crd`]: the `CustomResourceDefinition` for the `crd` subcommand.
//!
//! The types both versions share (containers, strategy, per-container states) live here.

pub mod crd;
pub mod v1alpha1;
pub mod v1beta1;

use k8s_openapi::api::core::v1::{ContainerPort, ExecAction, HTTPGetAction, TCPSocketAction};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub(crate) use kruise_core::api::serde_helpers::{is_false, is_zero_i32};
pub(crate) use kruise_core::string_enum;

/// API group of the kind.
pub const GROUP: &str = kruise_core::api::version::APPS_GROUP;
/// The kind's name.
pub const KIND: &str = "ContainerRecreateRequest";
/// The kind's resource (plural).
pub const RESOURCE: &str = "containerrecreaterequests";
/// The CRD's name.
pub const CRD_NAME: &str = "containerrecreaterequests.apps.kruise.io";

/// Label: uid of the target pod (set by the webhook, immutable).
pub const POD_UID_KEY: &str = "crr.apps.kruise.io/pod-uid";
/// Label: node of the target pod (set by the webhook, immutable); each node agent watches
/// only its own node's requests.
pub const NODE_NAME_KEY: &str = "crr.apps.kruise.io/node-name";
/// Label `"true"` while the request is not finished (removed on completion).
pub const ACTIVE_KEY: &str = "crr.apps.kruise.io/active";
/// v1alpha1 annotation: the container status snapshot as JSON (v1beta1:
/// `status.containerStatusSnapshot`).
pub const SYNC_CONTAINER_STATUSES_KEY: &str = "crr.apps.kruise.io/sync-container-statuses";
/// v1alpha1 annotation (RFC 3339 time the pod was made not-ready; v1beta1: the
/// `PreRecreateGrace` condition), and v1beta1 finalizer held while the pod is not-ready.
pub const UNREADY_ACQUIRED_KEY: &str = "crr.apps.kruise.io/unready-acquired";
/// v1beta1 condition type: the pod was made not-ready for `unreadyGracePeriodSeconds`.
pub const PRE_RECREATE_GRACE: &str = "PreRecreateGrace";
/// Node label value (under [`VIRTUAL_KUBELET_KEY`]) of a virtual-kubelet node.
pub const VIRTUAL_KUBELET_VALUE: &str = "virtual-kubelet";
/// Node label a virtual-kubelet node carries; copied onto its requests.
pub const VIRTUAL_KUBELET_KEY: &str = "type";

string_enum! {
    /// `strategy.failurePolicy`.
    FailurePolicy {
        /// A container that fails to recreate completes the request (the default).
        Fail = "Fail",
        /// A container that fails to recreate is skipped.
        Ignore = "Ignore",
    }
}

string_enum! {
    /// `status.phase` and each container's phase.
    Phase {
        /// Not started.
        Pending = "Pending",
        /// Being recreated.
        Recreating = "Recreating",
        /// A container was recreated.
        Succeeded = "Succeeded",
        /// A container failed to recreate.
        Failed = "Failed",
        /// The request is finished.
        Completed = "Completed",
    }
}

/// One container to recreate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    /// The container's name in the pod.
    pub name: String,
    /// The container's preStop handler, copied from the pod by the webhook (read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_stop: Option<ProbeHandler>,
    /// The container's ports, copied by the webhook for an httpGet preStop (read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<ContainerPort>>,
    /// The container's id and restart count when the request was made (read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_context: Option<ContainerContext>,
}

/// A preStop handler: exactly one of the actions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProbeHandler {
    /// A command run in the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecAction>,
    /// An HTTP GET against the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_get: Option<HTTPGetAction>,
    /// A TCP connection to the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_socket: Option<TCPSocketAction>,
}

/// `containers[].statusContext`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerContext {
    /// `<runtime>://<id>` of the container when the request was made.
    #[serde(rename = "containerID", default)]
    pub container_id: String,
    /// Its restart count then.
    #[serde(default)]
    pub restart_count: i32,
}

/// `spec.strategy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Strategy {
    /// `Fail` (default) or `Ignore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<FailurePolicy>,
    /// Recreate the next container only once the previous one is recreated and ready.
    #[serde(default, skip_serializing_if = "is_false")]
    pub ordered_recreate: bool,
    /// Kill a container even if it is still starting or was never killed.
    #[serde(default, skip_serializing_if = "is_false")]
    pub force_recreate: bool,
    /// Grace period of the kill (default: the pod's, else 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    /// Seconds the pod is kept not-ready before the first kill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unready_grace_period_seconds: Option<i64>,
    /// Seconds a new container must run (and be ready) to count as recreated.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub min_started_seconds: i32,
}

impl Strategy {
    /// The failure policy, `Fail` when unset or empty.
    pub fn policy(&self) -> FailurePolicy {
        match &self.failure_policy {
            Some(FailurePolicy::Unknown(s)) if s.is_empty() => FailurePolicy::Fail,
            None => FailurePolicy::Fail,
            Some(p) => p.clone(),
        }
    }
}

/// One container's progress (`status.containerRecreateStates[]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateState {
    /// The container's name.
    pub name: String,
    /// `Pending`, `Recreating`, `Succeeded` or `Failed`.
    pub phase: String,
    /// Why it is in that phase.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Whether the agent has killed it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub is_killed: bool,
}

/// One container's status as the pod reports it (`status.containerStatusSnapshot[]` in
/// v1beta1, the `sync-container-statuses` annotation in v1alpha1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncContainerStatus {
    /// The container's name.
    pub name: String,
    /// Whether it is ready.
    #[serde(default)]
    pub ready: bool,
    /// Its restart count.
    #[serde(default)]
    pub restart_count: i32,
    /// `<runtime>://<id>`.
    #[serde(
        rename = "containerID",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub container_id: String,
}
