//! The pure planners: no I/O, time an input.
//!
//! * [`agent`]: what a node agent does next for one pod's requests (OpenKruise's
//!   `pkg/daemon/containerrecreate`);
//! * [`containers_meta`]: the `apps.kruise.io/runtime-containers-meta` a node agent writes
//!   when only the runtime can tell an in-place update is done;
//! * [`controller`]: what the cluster-side controller does for one request (OpenKruise's
//!   `pkg/controller/containerrecreaterequest`);
//! * [`launch_priority`]: the barrier env the pod webhook adds and the keys the launch
//!   priority controller opens;

pub mod agent;
pub mod containers_meta;
pub mod controller;
pub mod launch_priority;
