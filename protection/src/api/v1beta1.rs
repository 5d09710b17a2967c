//! `policy.kruise.io/v1beta1` PodUnavailableBudget: the storage version, defined in
//! `kruise_core::pub_budget` (CloneSet's pre-check reads it too).

pub use super::{PodUnavailableBudgetStatus, PubOperation, TargetReference};
pub use kruise_core::pub_budget::{PodUnavailableBudget, PodUnavailableBudgetSpec};
