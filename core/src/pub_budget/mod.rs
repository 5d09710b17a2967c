//! PodUnavailableBudget (`policy.kruise.io/v1beta1`) as every family that respects one
//! reads it: the kind (owned, served and converted by the protection family), pod
//! availability as a budget counts it, the admission decision on one pod operation
//! ([`decision`]) and the conditioned status write that makes a grant (`kruise_runtime::pub_client`).
//!
//! kruise-protection's pod webhook and CloneSet's pre-check before its own pod updates
//! (OpenKruise's `PodUnavailableBudgetValidatePod`, used by both there too) call the same
//! `kruise_runtime::pub_client::check_pod`, so a budget is spent the same way whoever disrupts the pod.

pub mod decision;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::pods::{is_pod_ready, pod_condition};

/// PUB annotation (v1alpha1's form of `spec.protectOperations`): a comma list such as
/// `DELETE,EVICT`.
pub const PROTECT_OPERATIONS_ANNOTATION: &str = "kruise.io/pub-protect-operations";
/// Pod annotation: `"true"` (any Go `ParseBool` truth) exempts the pod from every PUB.
pub const NO_PROTECT_ANNOTATION: &str = "pub.kruise.io/no-protect";
/// Pod annotation naming the PUB that covers the pod (read first).
pub const RELATED_PUB_ANNOTATION: &str = "pub.kruise.io/related-pub";
/// The legacy form of [`RELATED_PUB_ANNOTATION`], still written and read.
pub const LEGACY_RELATED_PUB_ANNOTATION: &str = "kruise.io/related-pub";
/// Pod label prefix: any label under it makes the pod count as unavailable.
pub const UNAVAILABLE_LABEL_PREFIX: &str = crate::api::keys::POD_UNAVAILABLE_LABEL_PREFIX;

crate::string_enum! {
    /// One operation a PUB may protect (`spec.protectOperations[]`).
    PubOperation {
        /// Deleting the pod.
        Delete = "DELETE",
        /// Changing the pod's spec (or adding an unavailable label).
        Update = "UPDATE",
        /// Evicting the pod (`pods/eviction`).
        Evict = "EVICT",
        /// Resizing the pod's cpu/memory in place.
        Resize = "RESIZE",
    }
}

impl PubOperation {
    /// Every operation a PUB knows, in OpenKruise's order.
    pub const KNOWN: [&'static str; 4] = ["DELETE", "UPDATE", "EVICT", "RESIZE"];

    /// The operation of a wire value, `None` for a value OpenKruise does not know.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "DELETE" => Some(Self::Delete),
            "UPDATE" => Some(Self::Update),
            "EVICT" => Some(Self::Evict),
            "RESIZE" => Some(Self::Resize),
            _ => None,
        }
    }
}

/// `spec.targetRef`: the workload whose pods the budget covers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetReference {
    /// API version of the referent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// Kind of the referent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Name of the referent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

impl TargetReference {
    /// The group of `apiVersion` (empty for the core group).
    pub fn group(&self) -> &str {
        crate::api::version::group_of(&self.api_version)
    }

    /// OpenKruise's `IsReferenceEqual`: same group, kind and name (the version may differ).
    pub fn same_target(&self, other: &TargetReference) -> bool {
        self.group() == other.group() && self.kind == other.kind && self.name == other.name
    }
}

/// Observed state of a PodUnavailableBudget; identical in both versions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodUnavailableBudgetStatus {
    /// The generation this status was computed for.
    #[serde(default)]
    pub observed_generation: i64,
    /// Pods whose deletion or eviction admission granted and the controller has not yet seen
    /// go, with the time it was granted.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub disrupted_pods: BTreeMap<String, Time>,
    /// Pods whose update admission granted, until they are available again, with the time
    /// it was granted.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unavailable_pods: BTreeMap<String, Time>,
    /// How many more pods may become unavailable now.
    #[serde(default)]
    pub unavailable_allowed: i32,
    /// Pods available now.
    #[serde(default)]
    pub current_available: i32,
    /// Pods that must stay available.
    #[serde(default)]
    pub desired_available: i32,
    /// Pods the budget counts (the workloads' replicas, or `protectTotalReplicas`).
    #[serde(default)]
    pub total_replicas: i32,
}

impl PodUnavailableBudgetStatus {
    /// Whether `pod` is already recorded as disrupted or unavailable.
    pub fn records(&self, pod: &str) -> bool {
        self.disrupted_pods.contains_key(pod) || self.unavailable_pods.contains_key(pod)
    }
}

/// Desired state of a PodUnavailableBudget (`v1beta1`).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "policy.kruise.io",
    version = "v1beta1",
    kind = "PodUnavailableBudget",
    plural = "podunavailablebudgets",
    singular = "podunavailablebudget",
    shortname = "pub",
    namespaced,
    derive = "PartialEq",
    status = "PodUnavailableBudgetStatus",
    storage = true,
    served = true,
    doc = "PodUnavailableBudget is the Schema for the podunavailablebudgets API."
)]
#[serde(rename_all = "camelCase")]
pub struct PodUnavailableBudgetSpec {
    /// The pods of the budget, in its namespace (exclusive with `targetRef`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// The workload whose pods the budget covers (exclusive with `selector`).
    #[serde(rename = "targetRef", default, skip_serializing_if = "Option::is_none")]
    pub target_reference: Option<TargetReference>,
    /// Most pods unavailable at once: a number, or a percent of the expected pods (rounded
    /// up). Exclusive with `minAvailable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Fewest pods available at any time: a number, or a percent of the expected pods
    /// (rounded up). Exclusive with `maxUnavailable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<IntOrString>,
    /// The operations that consume the budget; empty: DELETE, UPDATE and EVICT.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protect_operations: Vec<PubOperation>,
    /// The expected pods, for pods no workload with replicas manages (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub protect_total_replicas: Option<i32>,
    /// Pods matching it are never protected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignored_pod_selector: Option<LabelSelector>,
}

impl PodUnavailableBudget {
    /// OpenKruise's `getPubProtectOperations`: `spec.protectOperations`, else the v1alpha1
    /// annotation, else DELETE, UPDATE and EVICT. Values it does not know protect nothing.
    pub fn protected_operations(&self) -> Vec<PubOperation> {
        if !self.spec.protect_operations.is_empty() {
            return self.spec.protect_operations.clone();
        }
        let from_annotation: Vec<PubOperation> = self
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(PROTECT_OPERATIONS_ANNOTATION))
            .into_iter()
            .flat_map(|v| v.split(','))
            .filter(|op| !op.is_empty())
            .map(|op| PubOperation::parse(op).unwrap_or_else(|| PubOperation::Unknown(op.into())))
            .collect();
        if !from_annotation.is_empty() {
            return from_annotation;
        }
        vec![
            PubOperation::Delete,
            PubOperation::Update,
            PubOperation::Evict,
        ]
    }

    /// OpenKruise's `getPubProtectTotalReplicas`: `spec.protectTotalReplicas` only (in
    /// v1beta1 the annotation is validated but not read).
    pub fn protect_total_replicas(&self) -> Option<i32> {
        self.spec.protect_total_replicas
    }
}

/// OpenKruise's `IsPodReady` and `IsPodStateConsistent` together: Running, Ready and not
/// terminating (`IsRunningAndReady`), no `unavailable-pod.kruise.io/*` label, and no
/// in-place update under way (`InPlaceUpdateReady` not False). Image digests are not
/// compared: containerd reports the config digest as `imageID`, so a digest-pinned Ready
/// pod would never count (K#2570).
pub fn is_available(pod: &Pod) -> bool {
    let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    running
        && pod.metadata.deletion_timestamp.is_none()
        && is_pod_ready(pod)
        && !has_unavailable_label(pod)
        && pod_condition(pod, "InPlaceUpdateReady").is_none_or(|c| c.status != "False")
}

/// Whether the pod carries a label under `unavailable-pod.kruise.io/`.
pub fn has_unavailable_label(pod: &Pod) -> bool {
    pod.metadata
        .labels
        .iter()
        .flatten()
        .any(|(k, _)| k.starts_with(UNAVAILABLE_LABEL_PREFIX))
}
