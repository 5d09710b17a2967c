//! CloneSet: OpenKruise's CloneSet, field for field.
//!
//! * [`api`]: the `apps.kruise.io` `v1alpha1` and `v1beta1` types, the two-version CRD
//!   (`v1beta1` stored), defaulting and validation (Kubernetes-style field errors);
//! * [`conversion`]: `v1alpha1` <-> `v1beta1` exactly as OpenKruise maps the fields, on JSON
//!   for the `/convert` webhook ([`conversion::CloneSetConverter`]), unknown fields kept;
//! * [`controller`]: the shell — reflectors, planner, API writes, status and events;
//! * [`admission`]: the defaulting and validating webhooks and `/convert`, served by the
//!   `kruise-cloneset` binary itself;
//! * [`binary`]: the family's registration and the `kruise-cloneset` binary's composition,
//!   also run in-process by `kruise-playground up`;
//! * [`pub_check`]: PodUnavailableBudgets checked before the CloneSet's own pod updates
//!   (`PodUnavailableBudgetUpdateGate`);
//! * [`plan`]: the pure planner — (CloneSet, pods, PVCs, revisions, now, gates, expectations)
//!   -> actions + status — and revision selection ([`plan::plan_revisions`]);
//! * [`predownload`]: ImagePullJobs for the new images of an in-place rollout
//!   (`PreDownloadImageForInPlaceUpdate`), when the ImagePullJob kind is served.
//!
//! Deliberate differences from OpenKruise are documented where they are made: validation of
//! `v1beta1` requests is as strict as of `v1alpha1` ([`api::validation`]); the ready-pod
//! deletion budget also counts unavailable pods that are themselves to be deleted, and
//! expired scale expectations are reported instead of blocking forever ([`plan`]).

pub mod admission;
pub mod api;
pub mod binary;
pub mod controller;
pub mod conversion;
pub mod plan;
pub mod predownload;
pub mod pub_check;
