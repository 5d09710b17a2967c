//! The ImagePullJob template: everything of an ImagePullJob but its image, as OpenKruise
//! declares it. The image family's ImagePullJob and ImageListPullJob are built on it, and so
//! is the schema of an AdvancedCronJob's `imageListPullJobTemplate`, so the two families'
//! CRDs validate the same fields without one linking the other.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::job::CompletionPolicy;

/// Default `pullPolicy.timeoutSeconds`.
pub const DEFAULT_TIMEOUT_SECONDS: i32 = 600;
/// Default `pullPolicy.backoffLimit`.
pub const DEFAULT_BACKOFF_LIMIT: i32 = 3;
crate::string_enum! {
    /// `imagePullPolicy` of a job or a NodeImage tag.
    ImagePullPolicy {
        /// Pull even when the image is on the node.
        Always = "Always",
        /// Skip the pull when the image is on the node (the default).
        IfNotPresent = "IfNotPresent",
    }
}

/// `spec.pullPolicy`: the per-node pull task's limits.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PullPolicy {
    /// Seconds one pull may take (default 600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    /// Retries before the node's task fails (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,
}

/// `spec.sandboxConfig`: metadata passed to CRI `PullImage`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxConfig {
    /// Sandbox labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Sandbox annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// `spec.selector`: the nodes to pull on, by name or by label (nil: every NodeImage).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImagePullJobNodeSelector {
    /// The nodes' names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub names: Option<Vec<String>>,
    /// A label query over the nodes (inline, as `matchLabels` / `matchExpressions`).
    #[serde(flatten)]
    pub label_selector: LabelSelector,
}

impl ImagePullJobNodeSelector {
    /// Whether labels are set (`matchLabels` or `matchExpressions`, even empty).
    pub fn has_labels(&self) -> bool {
        self.label_selector.match_labels.is_some()
            || self.label_selector.match_expressions.is_some()
    }
}

/// `spec.podSelector`: pull on the nodes of matching pods in the job's namespace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImagePullJobPodSelector {
    /// A label query over pods (inline).
    #[serde(flatten)]
    pub label_selector: LabelSelector,
}

/// Everything of an ImagePullJob but its image: what an ImageListPullJob gives each child.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImagePullJobTemplate {
    /// Secrets in the job's namespace to pull with; immutable after create.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pull_secrets: Vec<String>,
    /// The nodes, by name or label; nil: all. Exclusive with `podSelector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<ImagePullJobNodeSelector>,
    /// The nodes of matching pods. Exclusive with `selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<ImagePullJobPodSelector>,
    /// Most nodes pulling at once (an integer; default 1; 0 pauses the job).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<IntOrString>,
    /// The per-node task's timeout and retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_policy: Option<PullPolicy>,
    /// When the job finishes.
    #[serde(default)]
    pub completion_policy: CompletionPolicy,
    /// Metadata passed to CRI `PullImage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_config: Option<SandboxConfig>,
    /// `Always` or `IfNotPresent` (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<ImagePullPolicy>,
}

impl ImagePullJobTemplate {
    /// `pullPolicy.timeoutSeconds`, 600 when unset.
    pub fn timeout_seconds(&self) -> i32 {
        self.pull_policy
            .as_ref()
            .and_then(|p| p.timeout_seconds)
            .unwrap_or(DEFAULT_TIMEOUT_SECONDS)
    }

    /// `pullPolicy.backoffLimit`, 3 when unset.
    pub fn backoff_limit(&self) -> i32 {
        self.pull_policy
            .as_ref()
            .and_then(|p| p.backoff_limit)
            .unwrap_or(DEFAULT_BACKOFF_LIMIT)
    }
}
