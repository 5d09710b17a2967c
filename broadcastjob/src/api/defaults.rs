//! OpenKruise's `SetDefaultsBroadcastJob` and `SetDefaultsAdvancedCronJob` (v1beta1; a
//! v1alpha1 object is converted first: the fields are the same). The pod template's
//! Kubernetes defaults are not set here (`common::api` is to gain them for every family).

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::v1beta1::{AdvancedCronJobSpec, BroadcastJobSpec};
use super::{
    CompletionPolicyType, ConcurrencyPolicy, DEFAULT_FAILED_HISTORY_LIMIT,
    DEFAULT_SUCCESSFUL_HISTORY_LIMIT, FailurePolicyType,
};

/// `parallelism` when unset: no limit (Go's MaxInt32).
pub const UNLIMITED_PARALLELISM: i32 = i32::MAX;

/// Defaults a BroadcastJob spec: completion `Always`, parallelism unlimited, failure `FailFast`.
pub fn default_broadcastjob(spec: &mut BroadcastJobSpec) {
    if is_empty(spec.completion_policy.type_.as_ref().map(|t| t.as_str())) {
        spec.completion_policy.type_ = Some(CompletionPolicyType::Always);
    }
    if spec.parallelism.is_none() {
        spec.parallelism = Some(IntOrString::Int(UNLIMITED_PARALLELISM));
    }
    if is_empty(spec.failure_policy.type_.as_ref().map(|t| t.as_str())) {
        spec.failure_policy.type_ = Some(FailurePolicyType::FailFast);
    }
}

/// Defaults an AdvancedCronJob spec: concurrency `Allow` (`Replace` for an
/// ImageListPullJob template), not paused, history limits 3 and 1; a BroadcastJob template's
/// spec is not defaulted (OpenKruise leaves it to the child's own webhook).
pub fn default_advancedcronjob(spec: &mut AdvancedCronJobSpec) {
    if is_empty(spec.concurrency_policy.as_ref().map(|p| p.as_str())) {
        spec.concurrency_policy = Some(if spec.template.image_list_pull_job_template.is_some() {
            ConcurrencyPolicy::Replace
        } else {
            ConcurrencyPolicy::Allow
        });
    }
    spec.paused.get_or_insert(false);
    spec.successful_jobs_history_limit
        .get_or_insert(DEFAULT_SUCCESSFUL_HISTORY_LIMIT);
    spec.failed_jobs_history_limit
        .get_or_insert(DEFAULT_FAILED_HISTORY_LIMIT);
}

fn is_empty(value: Option<&str>) -> bool {
    value.is_none_or(str::is_empty)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn broadcastjob_defaults_fill_only_what_is_unset() {
        let mut spec: BroadcastJobSpec = serde_json::from_value(json!({"template": {}})).unwrap();
        default_broadcastjob(&mut spec);
        let v = serde_json::to_value(&spec).unwrap();
        assert_eq!(v["completionPolicy"], json!({"type": "Always"}));
        assert_eq!(v["parallelism"], json!(2147483647));
        assert_eq!(v["failurePolicy"], json!({"type": "FailFast"}));

        let mut spec: BroadcastJobSpec = serde_json::from_value(json!({
            "parallelism": "50%",
            "completionPolicy": {"type": "Never"},
            "failurePolicy": {"type": "Continue", "restartLimit": 2},
        }))
        .unwrap();
        let before = spec.clone();
        default_broadcastjob(&mut spec);
        assert_eq!(spec, before);
    }

    #[test]
    fn advancedcronjob_defaults() {
        let mut spec: AdvancedCronJobSpec = serde_json::from_value(
            json!({"schedule": "* * * * *", "template": {"jobTemplate": {}}}),
        )
        .unwrap();
        default_advancedcronjob(&mut spec);
        let v = serde_json::to_value(&spec).unwrap();
        assert_eq!(v["concurrencyPolicy"], "Allow");
        assert_eq!(v["paused"], false);
        assert_eq!(v["successfulJobsHistoryLimit"], 3);
        assert_eq!(v["failedJobsHistoryLimit"], 1);

        let mut spec: AdvancedCronJobSpec = serde_json::from_value(json!({
            "schedule": "* * * * *",
            "successfulJobsHistoryLimit": 0,
            "template": {"imageListPullJobTemplate": {"spec": {"images": ["nginx"]}}},
        }))
        .unwrap();
        default_advancedcronjob(&mut spec);
        assert_eq!(spec.concurrency_policy, Some(ConcurrencyPolicy::Replace));
        assert_eq!(spec.successful_jobs_history_limit, Some(0));
    }
}
