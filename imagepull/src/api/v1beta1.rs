//! `apps.kruise.io/v1beta1` ImagePullJob, ImageListPullJob and NodeImage: the storage version,
//! the one the controllers and the agent work on.

super::kinds!("v1beta1", true);
