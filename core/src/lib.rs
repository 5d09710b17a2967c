//! kruise-core: the kruise domain, pure (no client, no HTTP stack, no clock, no
//! randomness), so every decision here is tested without a cluster.
//!
//! [`api`] (OpenKruise's shared types and well-known keys, the CRD builder), [`pods`],
//! [`revision`], [`inplace`] (the in-place update engine), [`expectations`],
//! [`featuregate`], [`pub_budget`] (the PodUnavailableBudget decision every family that
//! respects a budget shares) and [`admission`] (what an admission step is and how the pod
//! chain composes them). How Go and kube-apiserver encode, default and validate is
//! `kruise-compat`; the binaries' harness and controller kit is `kruise-runtime`; the
//! admission server is `kruise-admission`.

pub mod admission;
pub mod api;
pub mod expectations;
pub mod featuregate;
pub mod inplace;
pub mod plan;
pub mod pods;
pub mod pub_budget;
pub mod revision;
