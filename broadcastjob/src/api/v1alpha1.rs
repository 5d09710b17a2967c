//! `apps.kruise.io/v1alpha1` BroadcastJob and AdvancedCronJob: served, not stored. The same
//! fields as `v1beta1`, except that an AdvancedCronJob has no `imageListPullJobTemplate`.
//! Only the CRD's schema is generated from these types: the webhooks and the controllers
//! work on `v1beta1`, which `/convert` turns a `v1alpha1` object into.

use k8s_openapi::api::batch::v1::JobTemplateSpec;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::v1beta1::BroadcastJobTemplateSpec;
use super::{
    AdvancedCronJobStatus, BroadcastJobStatus, CompletionPolicy, ConcurrencyPolicy, FailurePolicy,
    is_default, is_false,
};

/// Desired state of a BroadcastJob (`v1alpha1`).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "BroadcastJob",
    plural = "broadcastjobs",
    singular = "broadcastjob",
    shortname = "bcj",
    namespaced,
    derive = "PartialEq",
    status = "BroadcastJobStatus",
    storage = false,
    served = true,
    doc = "BroadcastJob is the Schema for the broadcastjobs API"
)]
#[serde(rename_all = "camelCase")]
pub struct BroadcastJobSpec {
    /// Most pods running at once: a number, or a percent of the desired nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<IntOrString>,
    /// The pod run on every node.
    #[serde(default)]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub template: PodTemplateSpec,
    /// When the job finishes.
    #[serde(default)]
    pub completion_policy: CompletionPolicy,
    /// Create no new pods.
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
    /// What a failed pod does to the job.
    #[serde(default, skip_serializing_if = "is_default")]
    pub failure_policy: FailurePolicy,
}

/// Desired state of an AdvancedCronJob (`v1alpha1`).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "AdvancedCronJob",
    plural = "advancedcronjobs",
    singular = "advancedcronjob",
    shortname = "acj",
    namespaced,
    derive = "PartialEq",
    status = "AdvancedCronJobStatus",
    storage = false,
    served = true,
    doc = "AdvancedCronJob is the Schema for the advancedcronjobs API"
)]
#[serde(rename_all = "camelCase")]
pub struct AdvancedCronJobSpec {
    /// The schedule in cron format.
    #[serde(default)]
    pub schedule: String,
    /// IANA time zone of the schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// A missed run is started only this many seconds after its time at the latest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_deadline_seconds: Option<i64>,
    /// `Allow` (default), `Forbid` or `Replace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_policy: Option<ConcurrencyPolicy>,
    /// Start no new runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// Finished successful children kept (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successful_jobs_history_limit: Option<i32>,
    /// Finished failed children kept (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_jobs_history_limit: Option<i32>,
    /// The child each run creates: exactly one of the templates.
    #[serde(default)]
    pub template: CronJobTemplate,
}

/// `spec.template` of an AdvancedCronJob (`v1alpha1`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CronJobTemplate {
    /// A batch/v1 Job per run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub job_template: Option<JobTemplateSpec>,
    /// A BroadcastJob per run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broadcast_job_template: Option<BroadcastJobTemplateSpec>,
}
