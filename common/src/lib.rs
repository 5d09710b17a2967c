//! kruise-common: what two or more kruise-rs families share.
//!
//! Pure core (no client, no clock, no randomness): [`api`], [`revision`], [`inplace`],
//! [`expectations`], [`pods`], [`featuregate`].
//! Shell pieces every binary embeds: [`runtime`] (flags, client, leader election,
//! metrics/health endpoints, telemetry, shutdown) and [`admission`] (the HTTPS
//! admission/conversion server with certificate management).

pub mod admission;
pub mod api;
pub mod expectations;
pub mod featuregate;
pub mod inplace;
pub mod pods;
pub mod revision;
pub mod runtime;

/// jemalloc returns a reflector's initial-list burst to the OS; glibc malloc keeps it
/// (figures in the README). Every binary linking kruise-common gets it.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL_ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
