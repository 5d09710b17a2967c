//! ImagePullJob, ImageListPullJob and NodeImage: OpenKruise's image pre-pulling on chosen nodes.

pub mod admission;
pub mod agent;
pub mod api;
pub mod binary;
pub mod controller;
pub mod conversion;
pub mod plan;
