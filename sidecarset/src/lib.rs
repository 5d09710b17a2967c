//! SidecarSet: sidecar injection and in-place sidecar upgrades, as OpenKruise defines them.
//!
//! * [`api`]: the `v1alpha1` / `v1beta1` types, the CRD, defaulting, validation;
//! * [`conversion`]: `v1alpha1` <-> `v1beta1` for the `/convert` webhook;
//! * [`hash`]: the SidecarSet content hashes (OpenKruise's values);
//! * [`inject`]: the pure injector (pod, namespace labels, SidecarSets) -> injected pod;
//! * [`plan`]: the pure upgrade planner (which injected pods to upgrade in place now) and status counts;
//! * [`upgrade`]: the pure per-pod side of the controller (facts, in-place and hot upgrade writes);
//! * [`revision`]: ControllerRevision data, creation and restore (for `injectionStrategy.revision`);
//! * [`controller`]: the controller shell (in-place and hot sidecar upgrades, revisions, status);
//! * [`binary`]: the `kruise-sidecarset` composition (CRD, webhooks, controller);
//! * [`live`]: reflector-backed SidecarSet/namespace snapshot for the admission handlers;
//! * [`admission`]: the SidecarSet webhooks (default, validate) and the pod-chain step
//!   kruise-webhook borrows.

pub mod admission;
pub mod api;
pub mod binary;
pub mod controller;
pub mod conversion;
pub mod hash;
pub mod inject;
pub mod live;
pub mod plan;
pub mod revision;
pub mod upgrade;
