//! The admission decision on one pod operation against its PodUnavailableBudget
//! (OpenKruise's `PodUnavailableBudgetValidatePod` and `checkAndDecrement`), pure: defined
//! once in `kruise_core::pub_budget::decision`, where CloneSet's pre-check of its own
//! updates takes it too; tested here.

pub use kruise_core::pub_budget::decision::*;

#[cfg(test)]
use {
    crate::api::v1beta1::{PodUnavailableBudget, PodUnavailableBudgetStatus, PubOperation},
    jiff::Timestamp,
    k8s_openapi::api::core::v1::Pod,
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
};

#[cfg(test)]
mod tests;
