//! Advanced StatefulSet: OpenKruise's `statefulsets.apps.kruise.io`, field for field.
//!
//! * [`api`]: the `v1beta1` (stored) and `v1alpha1` (served) types, the CRD, defaulting,
//!   validation and ordinal arithmetic;
//! * [`conversion`]: `v1alpha1` <-> `v1beta1` for `/convert`, losing nothing.

pub mod api;
pub mod conversion;
