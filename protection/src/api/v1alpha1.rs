//! `policy.kruise.io/v1alpha1` PodUnavailableBudget: served, not stored. It has no
//! `protectOperations`, `protectTotalReplicas` or `ignoredPodSelector`; their values ride in
//! annotations ([`crate::conversion`]). Only the CRD's schema is generated from these types:
//! the webhooks work on `v1beta1`, which `/convert` turns a `v1alpha1` object into.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{PodUnavailableBudgetStatus, TargetReference};

/// Desired state of a PodUnavailableBudget (`v1alpha1`).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "policy.kruise.io",
    version = "v1alpha1",
    kind = "PodUnavailableBudget",
    plural = "podunavailablebudgets",
    singular = "podunavailablebudget",
    shortname = "pub",
    namespaced,
    derive = "PartialEq",
    status = "PodUnavailableBudgetStatus",
    storage = false,
    served = true,
    doc = "PodUnavailableBudget is the Schema for the podunavailablebudgets API"
)]
#[serde(rename_all = "camelCase")]
pub struct PodUnavailableBudgetSpec {
    /// The pods of the budget, in its namespace (exclusive with `targetRef`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// The workload whose pods the budget covers (exclusive with `selector`).
    #[serde(rename = "targetRef", default, skip_serializing_if = "Option::is_none")]
    pub target_reference: Option<TargetReference>,
    /// Most pods unavailable at once (exclusive with `minAvailable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Fewest pods available at any time (exclusive with `maxUnavailable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<IntOrString>,
}
