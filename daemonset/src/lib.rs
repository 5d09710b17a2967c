//! Advanced DaemonSet: OpenKruise's `daemonsets.apps.kruise.io`, field for field.
//!
//! * [`admission`]: the defaulting and validating webhooks and `/convert`;
//! * [`api`]: the `v1beta1` (stored) and `v1alpha1` (served) types, the CRD, defaulting and
//!   validation;
//! * [`conversion`]: `v1alpha1` <-> `v1beta1` for `/convert`;
//! * [`plan`]: the pure planner — nodes, pods, strategy, time -> creates, deletes, in-place
//!   updates, status counts and when to look again;
//! * [`predownload`]: ImagePullJobs for the new images of a rollout;
//! * [`nodes`]: the compact node the controller caches;
//! * [`binary`]: the family's registration and the `kruise-daemonset` binary.

pub mod admission;
pub mod api;
pub mod binary;
pub mod controller;
pub mod conversion;
pub mod nodes;
pub mod plan;
pub mod predownload;
