//! kruise-common: what two or more kruise-rs families share.
//!
//! Pure core (no client, no clock, no randomness): [`api`], [`revision`], [`inplace`],
//! [`expectations`], [`pods`], [`featuregate`]; [`pub_budget`], the PodUnavailableBudget
//! decision and grant every family that respects a budget shares; [`predownload`], the
//! ImagePullJobs a workload family creates before an in-place rollout.
//! Shell pieces every binary embeds: [`runtime`] (flags, client, leader election,
//! metrics/health endpoints, telemetry, shutdown) and [`admission`] (the HTTPS
//! admission/conversion server with certificate management).

pub mod admission;
pub mod api;
pub mod expectations;
pub mod family;
pub mod featuregate;
pub mod inplace;
pub mod pods;
pub mod predownload;
pub mod pub_budget;
pub mod revision;
pub mod runtime;
