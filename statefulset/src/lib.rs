//! Advanced StatefulSet: OpenKruise's `statefulsets.apps.kruise.io`, field for field.
//!
//! * [`admission`]: the defaulting and validating webhooks and `/convert`;
//! * [`api`]: the `v1beta1` (stored) and `v1alpha1` (served) types, the CRD, defaulting,
//!   validation and ordinal arithmetic;
//! * [`conversion`]: `v1alpha1` <-> `v1beta1` for `/convert`, losing nothing;
//! * [`controller`]: the shell — caches, revisions, planner, writes, status and events;
//! * [`binary`]: the family's registration and the `kruise-statefulset` binary;
//! * [`plan`]: the pure planner — (set, pods, revisions, now, gates, expectations) -> writes
//!   and status — and revision selection;
//! * [`predownload`]: ImagePullJobs for the new images of an in-place rollout.

pub mod admission;
pub mod api;
pub mod binary;
pub mod controller;
pub mod conversion;
pub mod plan;
pub mod predownload;
