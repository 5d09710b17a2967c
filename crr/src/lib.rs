//! ContainerRecreateRequest: OpenKruise's request to restart some containers of a pod in
//! place, carried out on the pod's node through CRI; and container launch priority.

pub mod admission;
pub mod agent;
pub mod api;
pub mod binary;
pub mod containers_meta;
pub mod controller;
pub mod conversion;
pub mod plan;
pub mod runtime_containers;
