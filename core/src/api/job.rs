//! `CompletionPolicy`: when a job-like kind finishes. OpenKruise declares it once, for
//! BroadcastJob, and ImagePullJob reuses it; so do kruise-rs's BroadcastJob and
//! ImagePullJob families.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

crate::string_enum! {
    /// `completionPolicy.type`.
    CompletionPolicyType {
        /// The job finishes once every desired node is done (or on its deadline).
        Always = "Always",
        /// The job never finishes: nodes that join later are served too.
        Never = "Never",
    }
}

/// `spec.completionPolicy` of a BroadcastJob or an ImagePullJob.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompletionPolicy {
    /// `Always` (default) or `Never`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<CompletionPolicyType>,
    /// Seconds after `status.startTime` the job may run before it fails (`Always` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// Seconds after it finished the job is deleted (`Always` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
}

impl CompletionPolicy {
    /// Whether the job never finishes.
    pub fn is_never(&self) -> bool {
        self.type_ == Some(CompletionPolicyType::Never)
    }
}
