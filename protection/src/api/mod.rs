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
//! The types both versions share (target reference, status) are re-exported here.

pub mod crd;
pub mod v1alpha1;
pub mod v1beta1;
pub mod validation;

// The kind, its shared types and the pod keys live in `kruise_core::pub_budget`, where
// the families that respect a budget (CloneSet's pre-check) read them too.
pub use kruise_core::pub_budget::{
    LEGACY_RELATED_PUB_ANNOTATION, NO_PROTECT_ANNOTATION, PROTECT_OPERATIONS_ANNOTATION,
    PodUnavailableBudgetStatus, PubOperation, RELATED_PUB_ANNOTATION, TargetReference,
    UNAVAILABLE_LABEL_PREFIX,
};

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

/// PUB annotation (v1alpha1's form of `spec.protectTotalReplicas`).
pub const PROTECT_TOTAL_REPLICAS_ANNOTATION: &str = "pub.kruise.io/protect-total-replicas";
/// PUB annotation (kruise-rs's v1alpha1 form of `spec.ignoredPodSelector`, as JSON): OpenKruise
/// drops the field when it serves a v1beta1 object as v1alpha1, so a v1alpha1 client that
/// writes the object back would lose it; kruise-rs carries it over instead.
pub const IGNORED_POD_SELECTOR_ANNOTATION: &str = "pub.kruise.io/ignored-pod-selector";
