//! BroadcastJob and AdvancedCronJob API: the `apps.kruise.io` `v1alpha1` and `v1beta1` types
//! (field for field as OpenKruise defines them), the two CRDs, defaulting and validation.
//!
//! * [`v1beta1`]: the storage version, the one the controllers reconcile;
//! * [`v1alpha1`]: the version most published manifests use (served, not stored); the same
//!   fields, except that an AdvancedCronJob has no `imageListPullJobTemplate`;
//! * [`crd`]: both `CustomResourceDefinition`s for the `crd` subcommand;
//! * [`defaults`]: OpenKruise's `SetDefaultsBroadcastJob` / `SetDefaultsAdvancedCronJob`;
//! * [`validation`]: the validating webhooks' checks, as a list of field errors;
//! * [`imagelistpulljob`]: what the cron controller reads and writes of the ImageListPullJobs
//!   it creates (another family's kind).
//!
//! The types both versions share (policies, status, conditions) live here.

pub mod crd;
pub mod defaults;
pub mod imagelistpulljob;
pub mod v1alpha1;
pub mod v1beta1;
pub mod validation;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use kruise_core::api::job::{CompletionPolicy, CompletionPolicyType};

pub(crate) use kruise_core::api::serde_helpers::{
    is_default, is_false, is_zero_i32, preserve_unknown_fields,
};
pub(crate) use kruise_core::string_enum;

/// API group of both kinds.
pub const GROUP: &str = kruise_core::api::version::APPS_GROUP;
/// BroadcastJob's kind name.
pub const BROADCASTJOB_KIND: &str = "BroadcastJob";
/// AdvancedCronJob's kind name.
pub const ADVANCEDCRONJOB_KIND: &str = "AdvancedCronJob";
/// BroadcastJob's CRD name.
pub const BROADCASTJOB_CRD: &str = "broadcastjobs.apps.kruise.io";
/// AdvancedCronJob's CRD name.
pub const ADVANCEDCRONJOB_CRD: &str = "advancedcronjobs.apps.kruise.io";

/// Pod label naming the BroadcastJob that created the pod.
pub const BROADCASTJOB_NAME_LABEL: &str = "broadcastjob-name";
/// Pod label holding the uid of the BroadcastJob that created the pod (what the controller
/// watches pods by).
pub const BROADCASTJOB_UID_LABEL: &str = "broadcastjob-controller-uid";
/// Child annotation: the scheduled time (RFC 3339) an AdvancedCronJob created it for.
pub const SCHEDULED_AT_ANNOTATION: &str = "apps.kruise.io/scheduled-at";

/// Default `successfulJobsHistoryLimit`.
pub const DEFAULT_SUCCESSFUL_HISTORY_LIMIT: i32 = 3;
/// Default `failedJobsHistoryLimit`.
pub const DEFAULT_FAILED_HISTORY_LIMIT: i32 = 1;

string_enum! {
    /// `failurePolicy.type`.
    FailurePolicyType {
        /// A failed pod fails the job (the default).
        FailFast = "FailFast",
        /// A failed pod is counted and the job goes on.
        Continue = "Continue",
        /// A failed pod pauses the job.
        Pause = "Pause",
    }
}

string_enum! {
    /// `spec.concurrencyPolicy` of an AdvancedCronJob.
    ConcurrencyPolicy {
        /// Runs may overlap (the default).
        Allow = "Allow",
        /// A run is skipped while an earlier one is active.
        Forbid = "Forbid",
        /// Active runs are deleted before a new one starts.
        Replace = "Replace",
    }
}

string_enum! {
    /// `status.type` of an AdvancedCronJob: the kind of its children.
    TemplateKind {
        /// batch/v1 Jobs.
        Job = "Job",
        /// BroadcastJobs.
        BroadcastJob = "BroadcastJob",
        /// ImageListPullJobs (v1beta1 only).
        ImageListPullJob = "ImageListPullJob",
    }
}

/// `spec.failurePolicy` of a BroadcastJob.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailurePolicy {
    /// `FailFast` (default), `Continue` or `Pause`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<FailurePolicyType>,
    /// Container restarts (init and regular, summed) after which an `OnFailure` pod counts as failed.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub restart_limit: i32,
}

impl FailurePolicy {
    /// The policy, `FailFast` when unset or empty.
    pub fn policy(&self) -> FailurePolicyType {
        match &self.type_ {
            None => FailurePolicyType::FailFast,
            Some(FailurePolicyType::Unknown(s)) if s.is_empty() => FailurePolicyType::FailFast,
            Some(t) => t.clone(),
        }
    }
}

string_enum! {
    /// `status.phase` of a BroadcastJob.
    BroadcastJobPhase {
        /// Every desired node has a finished pod.
        Completed = "completed",
        /// Pods are being created or run.
        Running = "running",
        /// `spec.paused` (or the Pause failure policy) holds new pods back.
        Paused = "paused",
        /// A pod failed under FailFast, or the deadline passed.
        Failed = "failed",
    }
}

/// Observed state of a BroadcastJob; identical in both versions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BroadcastJobStatus {
    /// `Complete` or `Failed`, once the job finished.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<JobCondition>,
    /// When the controller first saw the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the job finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Pods running (not terminating, not finished, not over the restart limit).
    #[serde(default)]
    pub active: i32,
    /// Pods that succeeded.
    #[serde(default)]
    pub succeeded: i32,
    /// Pods that failed.
    #[serde(default)]
    pub failed: i32,
    /// Nodes the pod fits on.
    #[serde(default)]
    pub desired: i32,
    /// `running`, `paused`, `completed` or `failed` (empty before the first reconcile).
    #[serde(default)]
    pub phase: String,
}

impl BroadcastJobStatus {
    /// The True condition of `type_`, if any.
    pub fn condition(&self, type_: &str) -> Option<&JobCondition> {
        self.conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == "True")
    }
}

/// One BroadcastJob condition.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobCondition {
    /// `Complete` or `Failed`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Last time the condition was checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,
    /// Last time the condition changed status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Machine-readable reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// BroadcastJob condition types.
pub mod condition {
    /// Every desired node has a finished pod.
    pub const COMPLETE: &str = "Complete";
    /// The job failed.
    pub const FAILED: &str = "Failed";
}

/// Observed state of an AdvancedCronJob; identical in both versions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdvancedCronJobStatus {
    /// The kind of its children: `Job`, `BroadcastJob` or `ImageListPullJob`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<TemplateKind>,
    /// The children still running.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active: Vec<ObjectReference>,
    /// The latest scheduled time a child was created for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,
}

/// Declares `BroadcastJobSpec` and `AdvancedCronJobSpec` (and through kube's derive,
/// `BroadcastJob` and `AdvancedCronJob`) for one served version: both versions carry the
/// same fields, except for the cron job's `template`, whose type (`CronJobTemplate`) each
/// version module declares itself.
macro_rules! job_specs {
    ($version:literal, $storage:literal) => {
        use k8s_openapi::api::core::v1::PodTemplateSpec;
        use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
        use kube::CustomResource;
        use schemars::JsonSchema;
        use serde::{Deserialize, Serialize};

        pub use super::{
            AdvancedCronJobStatus, BroadcastJobStatus, CompletionPolicy, ConcurrencyPolicy,
            FailurePolicy, JobCondition,
        };

        /// Desired state of a BroadcastJob.
        #[derive(
            CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema,
        )]
        #[kube(
                            group = "apps.kruise.io",
                            version = $version,
                            kind = "BroadcastJob",
                            plural = "broadcastjobs",
                            singular = "broadcastjob",
                            shortname = "bcj",
                            namespaced,
                            derive = "PartialEq",
                            status = "BroadcastJobStatus",
                            storage = $storage,
                            served = true,
                            doc = "BroadcastJob is the Schema for the broadcastjobs API"
                        )]
        #[serde(rename_all = "camelCase")]
        pub struct BroadcastJobSpec {
            /// Most pods running at once: a number, or a percent of the desired nodes
            /// (rounded up). Unset: no limit.
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
            #[serde(default, skip_serializing_if = "super::is_false")]
            pub paused: bool,
            /// What a failed pod does to the job.
            #[serde(default, skip_serializing_if = "super::is_default")]
            pub failure_policy: FailurePolicy,
        }

        /// Desired state of an AdvancedCronJob.
        #[derive(
            CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema,
        )]
        #[kube(
                            group = "apps.kruise.io",
                            version = $version,
                            kind = "AdvancedCronJob",
                            plural = "advancedcronjobs",
                            singular = "advancedcronjob",
                            shortname = "acj",
                            namespaced,
                            derive = "PartialEq",
                            status = "AdvancedCronJobStatus",
                            storage = $storage,
                            served = true,
                            doc = "AdvancedCronJob is the Schema for the advancedcronjobs API"
                        )]
        #[serde(rename_all = "camelCase")]
        pub struct AdvancedCronJobSpec {
            /// The schedule in cron format (5 fields, a descriptor such as `@hourly`,
            /// optionally prefixed `TZ=<zone> ` or `CRON_TZ=<zone> `).
            #[serde(default)]
            pub schedule: String,
            /// IANA time zone of the schedule; unset: the controller's (UTC for kruise-rs).
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
    };
}
use job_specs;
