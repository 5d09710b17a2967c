//! PodUnavailableBudget (`policy.kruise.io`) and deletion protection: OpenKruise's budget on
//! voluntary pod disruption, field for field.

pub mod admission;
pub mod api;
pub mod binary;
pub mod controller;
pub mod conversion;
pub mod deletion;
pub mod deletion_webhook;
pub mod plan;
pub mod pod_admission;
pub mod pod_mutation;
