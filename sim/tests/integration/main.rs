//! Integration tests: kube-rs clients against a simulator started in-process. Each
//! test asserts what the real kube-apiserver documents for the case.

// Test code: failing loudly on an unexpected result is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod authorize;
mod client_nodes;
mod cluster;
mod common;
mod conversion;
mod crd;
mod cri;
mod crud;
mod deployments;
mod errors;
mod events;
mod faults;
mod fieldvalidation;
mod jobs;
mod patch;
mod pvc;
mod subresources;
mod watch;
mod webhooks;
