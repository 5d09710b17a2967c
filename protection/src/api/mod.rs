//! PodUnavailableBudget API: the `policy.kruise.io` `v1alpha1` and `v1beta1` types (field
//! for field as OpenKruise defines them), the CRD and validation.
//!
//! * [`v1beta1`]: the storage version, the one the budget arithmetic and the admission
//!   decision read;
//! * [`v1alpha1`]: served, not stored; it carries `protectOperations` and
//!   `protectTotalReplicas` as annotations ([`PROTECT_OPERATIONS_ANNOTATION`],
//!   [`PROTECT_TOTAL_REPLICAS_ANNOTATION`]);
//! * [`crd`]: the `CustomResourceDefinition` for the `crd` subcommand;
//! * [`validation`]: the validating webhook's checks, as a list of field errors.
//!
//! The types both versions share (target reference, status) live here.

pub mod crd;
pub mod v1alpha1;
pub mod v1beta1;
pub mod validation;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub(crate) use kruise_common::string_enum;

/// API group of PodUnavailableBudget.
pub const GROUP: &str = "policy.kruise.io";
/// PodUnavailableBudget's kind name.
pub const KIND: &str = "PodUnavailableBudget";
/// PodUnavailableBudget's CRD name.
pub const CRD: &str = "podunavailablebudgets.policy.kruise.io";
/// `policy.kruise.io/v1alpha1`.
pub const POLICY_V1ALPHA1: &str = "policy.kruise.io/v1alpha1";
/// `policy.kruise.io/v1beta1`.
pub const POLICY_V1BETA1: &str = "policy.kruise.io/v1beta1";

/// PUB annotation (v1alpha1's form of `spec.protectOperations`): a comma list such as
/// `DELETE,EVICT`.
pub const PROTECT_OPERATIONS_ANNOTATION: &str = "kruise.io/pub-protect-operations";
/// PUB annotation (v1alpha1's form of `spec.protectTotalReplicas`).
pub const PROTECT_TOTAL_REPLICAS_ANNOTATION: &str = "pub.kruise.io/protect-total-replicas";
/// PUB annotation (kruise-rs's v1alpha1 form of `spec.ignoredPodSelector`, as JSON): OpenKruise
/// drops the field when it serves a v1beta1 object as v1alpha1, so a v1alpha1 client that
/// writes the object back would lose it; kruise-rs carries it over instead.
pub const IGNORED_POD_SELECTOR_ANNOTATION: &str = "pub.kruise.io/ignored-pod-selector";
/// Pod annotation: `"true"` (any Go `ParseBool` truth) exempts the pod from every PUB.
pub const NO_PROTECT_ANNOTATION: &str = "pub.kruise.io/no-protect";
/// Pod annotation naming the PUB that covers the pod (read first).
pub const RELATED_PUB_ANNOTATION: &str = "pub.kruise.io/related-pub";
/// The legacy form of [`RELATED_PUB_ANNOTATION`], still written and read.
pub const LEGACY_RELATED_PUB_ANNOTATION: &str = "kruise.io/related-pub";
/// Pod label prefix: any label under it makes the pod count as unavailable.
pub const UNAVAILABLE_LABEL_PREFIX: &str = "unavailable-pod.kruise.io/";

string_enum! {
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
        kruise_common::api::version::group_of(&self.api_version)
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
