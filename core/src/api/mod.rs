//! Shared API types and well-known keys, named exactly as OpenKruise names them on the wire.
//!
//! * [`keys`]: label / annotation / finalizer / condition-type constants (reference §10.1).
//! * [`lifecycle`]: `Lifecycle` and `LifecycleHook` (`apps.kruise.io` `pub` package).
//! * [`strategy`]: `UpdatePriorityStrategy`, `UpdateScatterStrategy`, `InPlaceUpdateStrategy`.
//! * [`version`]: the API groups and versions, one meaning each.
//! * [`crd`]: the CRD builder (versions, subresources, printer columns, schema edits without
//!   schemars' defaults), the conversion webhook stanza, the `string_enum!` macro.
//! * [`crd_fields`]: a CRD schema as a flat field list, to compare with OpenKruise's.
//! * [`serde_helpers`]: the `skip_serializing_if` / schema helpers every kind's types use.
//! * [`job`]: `CompletionPolicy`, shared by BroadcastJob and ImagePullJob.
//! * [`intstr`]: int-or-percent arithmetic with OpenKruise's rounding rules (reference §0.1).
//! * Kubernetes' field errors, pod-template validation and defaults, and quantities are
//!   `kruise_compat`.

pub mod condition;
pub mod crd;
pub mod crd_fields;
pub mod image_pull;
pub mod intstr;
pub mod job;
pub mod keys;
pub mod lifecycle;
pub mod serde_helpers;
pub mod strategy;
pub mod version;

pub use intstr::{
    IntOrPercentError, calculate_partition_replicas, scaled_value_from_int_or_percent,
    value_from_int_or_percent,
};
pub use lifecycle::{Lifecycle, LifecycleHook, LifecycleState};
pub use strategy::{
    InPlaceUpdateStrategy, UpdatePriorityOrderTerm, UpdatePriorityStrategy,
    UpdatePriorityWeightTerm, UpdateScatterStrategy, UpdateScatterTerm,
};
