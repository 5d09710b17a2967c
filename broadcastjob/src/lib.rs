//! BroadcastJob and AdvancedCronJob: OpenKruise's job on every node and job on a schedule.

pub mod admission;
pub mod api;
pub mod binary;
pub mod controller;
pub mod conversion;
pub mod plan;
