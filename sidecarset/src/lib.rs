//! SidecarSet: sidecar injection and in-place sidecar upgrades, as OpenKruise defines them.
//!
//! * [`api`]: the `v1alpha1` / `v1beta1` types, the CRD and defaulting;
//! * [`conversion`]: `v1alpha1` <-> `v1beta1`, typed and for the `/convert` webhook;
//! * [`hash`]: the SidecarSet content hashes (OpenKruise's values);
//! * [`inject`]: the pure injector (pod, namespace labels, SidecarSets) -> injected pod;
//! * [`plan`]: the pure upgrade planner (which injected pods to upgrade in place now) and status counts;
//! * [`revision`]: ControllerRevision data, creation and restore (for `injectionStrategy.revision`);
//! * [`admission`]: the `/mutate-pod` handler kruise-webhook borrows, and its webhook scope;
//! * [`validate`]: SidecarSet validation and the rollout rounding helpers.

pub mod admission;
pub mod api;
pub mod conversion;
pub mod hash;
pub mod inject;
pub mod plan;
pub mod revision;
pub mod validate;
