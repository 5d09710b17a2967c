//! SidecarSet: sidecar injection and in-place sidecar upgrades, as OpenKruise defines them.
//!
//! * [`api`]: the `v1alpha1` / `v1beta1` types, the CRD, defaulting, validation, and the
//!   SidecarSet content hashes (`api::hash`, OpenKruise's values);
//! * [`conversion`]: `v1alpha1` <-> `v1beta1` for the `/convert` webhook;
//! * [`inject`]: the pure injector (pod, namespace labels, SidecarSets) -> injected pod;
//! * [`plan`]: the pure upgrade planner (which injected pods to upgrade in place now) and
//!   status counts, with the per-pod side of the controller (`plan::upgrade`: facts, in-place
//!   and hot upgrade writes) and ControllerRevision data, creation and restore
//!   (`plan::revision`, for `injectionStrategy.revision`);
//! * [`controller`]: the controller shell (in-place and hot sidecar upgrades, revisions, status);
//! * [`admission`]: the SidecarSet webhooks (default, validate), the pod-chain step
//!   kruise-webhook borrows, and the reflector-backed SidecarSet/namespace snapshot they
//!   read (`admission::live`);
//! * [`binary`]: the `kruise-sidecarset` composition (CRD, webhooks, controller).

pub mod admission;
pub mod api;
pub mod binary;
pub mod controller;
pub mod conversion;
pub mod inject;
pub mod plan;
