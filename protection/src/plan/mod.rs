//! Pure PodUnavailableBudget decisions: no I/O, no clock (time is an input).
//!
//! * [`budget`]: the status arithmetic of the PUB controller — desired and current
//!   available pods, the allowed disruptions, the expiry of the disrupted/unavailable
//!   records;
//! * [`decision`]: the admission decision on one pod operation (DELETE, EVICT, UPDATE,
//!   RESIZE) against the budget, and the status write it needs;
//! * [`pod_update`]: which operation a pod UPDATE is (none, RESIZE or UPDATE).

pub mod budget;
pub mod decision;
pub mod pod_update;
