//! `policy.kruise.io/v1beta1` PodUnavailableBudget: the storage version.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::PROTECT_OPERATIONS_ANNOTATION;
pub use super::{PodUnavailableBudgetStatus, PubOperation, TargetReference};

/// Desired state of a PodUnavailableBudget (`v1beta1`).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
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
