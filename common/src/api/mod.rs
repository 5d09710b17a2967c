//! Shared API types and well-known keys, named exactly as OpenKruise names them on the wire.
//!
//! * [`keys`]: label / annotation / finalizer / condition-type constants (reference §10.1).
//! * [`lifecycle`]: `Lifecycle` and `LifecycleHook` (`apps.kruise.io` `pub` package).
//! * [`strategy`]: `UpdatePriorityStrategy`, `UpdateScatterStrategy`, `InPlaceUpdateStrategy`.
//! * [`crd`]: merging per-version CRDs, schema-default stripping, the `string_enum!` macro.
//! * [`intstr`]: int-or-percent arithmetic with OpenKruise's rounding rules (reference §0.1).

pub mod crd;
pub mod intstr;
pub mod keys;
pub mod lifecycle;
pub mod strategy;

pub use intstr::{
    IntOrPercentError, RollingBudget, calculate_partition_replicas, rolling_budget,
    scaled_value_from_int_or_percent, value_from_int_or_percent,
};
pub use lifecycle::{Lifecycle, LifecycleHook, LifecycleState};
pub use strategy::{
    InPlaceUpdateStrategy, UpdatePriorityOrderTerm, UpdatePriorityStrategy,
    UpdatePriorityWeightTerm, UpdateScatterStrategy, UpdateScatterTerm,
};
