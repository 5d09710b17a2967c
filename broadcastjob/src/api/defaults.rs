//! OpenKruise's `SetDefaultsBroadcastJob` and `SetDefaultsAdvancedCronJob` (v1beta1; a
//! v1alpha1 object is converted first: the fields are the same), the spec's part. The pod
//! templates' Kubernetes defaults, which only the webhooks write (`TemplateNoDefaults`),
//! are in [`crate::admission`].

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_core::api::image_pull::{DEFAULT_BACKOFF_LIMIT, DEFAULT_TIMEOUT_SECONDS};
use serde_json::{Map, Value, json};

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

/// Defaults an AdvancedCronJob spec: an ImageListPullJob template's policies (see
/// [`default_image_list_pull_job_template`]), concurrency `Allow` (`Replace` for an
/// ImageListPullJob template), not paused, history limits 3 and 1; a BroadcastJob template's
/// spec is not defaulted (OpenKruise leaves it to the child's own webhook).
pub fn default_advancedcronjob(spec: &mut AdvancedCronJobSpec) {
    if let Some(template) = spec.template.image_list_pull_job_template.as_mut() {
        default_image_list_pull_job_template(template);
    }
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

/// What OpenKruise's AdvancedCronJob webhook writes into an `imageListPullJobTemplate`
/// whose `spec.completionPolicy.type` is unset: that type `Always`, and then, each only if
/// unset, `pullPolicy.timeoutSeconds` 600, `pullPolicy.backoffLimit` 3 and
/// `imagePullPolicy: IfNotPresent`. A template with a completion type gets none of them,
/// as in OpenKruise (the ImageListPullJob's own webhook fills them in the child). A
/// template that is not an object is left for validation.
pub fn default_image_list_pull_job_template(template: &mut Value) {
    let Value::Object(template) = template else {
        return;
    };
    let Some(Value::Object(spec)) = object_entry(template, "spec") else {
        return;
    };
    let Some(Value::Object(completion)) = object_entry(spec, "completionPolicy") else {
        return;
    };
    if !is_empty(completion.get("type").and_then(Value::as_str)) {
        return;
    }
    completion.insert("type".into(), json!(CompletionPolicyType::Always.as_str()));
    if let Some(Value::Object(pull)) = object_entry(spec, "pullPolicy") {
        if pull.get("timeoutSeconds").is_none_or(Value::is_null) {
            pull.insert("timeoutSeconds".into(), json!(DEFAULT_TIMEOUT_SECONDS));
        }
        if pull.get("backoffLimit").is_none_or(Value::is_null) {
            pull.insert("backoffLimit".into(), json!(DEFAULT_BACKOFF_LIMIT));
        }
    }
    if is_empty(spec.get("imagePullPolicy").and_then(Value::as_str)) {
        spec.insert("imagePullPolicy".into(), json!("IfNotPresent"));
    }
}

/// The object at `key`, made an empty object when absent or `null` (a Go struct or nil
/// pointer the defaults fill); `None` when it holds something else.
fn object_entry<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Value> {
    let entry = map.entry(key).or_insert(Value::Null);
    if entry.is_null() {
        *entry = Value::Object(Map::new());
    }
    entry.is_object().then_some(entry)
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

    /// OpenKruise's `SetDefaultsAdvancedCronJob` on `imageListPullJobTemplate`: the four
    /// defaults only when the completion type is unset, each only where nothing is set.
    #[test]
    fn image_list_pull_job_template_defaults() {
        let defaulted = |template: Value| {
            let mut template = template;
            default_image_list_pull_job_template(&mut template);
            template
        };
        let all_defaults = json!({"completionPolicy": {"type": "Always"},
                                  "pullPolicy": {"timeoutSeconds": 600, "backoffLimit": 3},
                                  "imagePullPolicy": "IfNotPresent"});
        for (case, template, want) in [
            ("no spec", json!({}), json!({"spec": all_defaults.clone()})),
            (
                "images only",
                json!({"spec": {"images": ["nginx"]}}),
                json!({"spec": {"images": ["nginx"], "completionPolicy": {"type": "Always"},
                                "pullPolicy": {"timeoutSeconds": 600, "backoffLimit": 3},
                                "imagePullPolicy": "IfNotPresent"}}),
            ),
            (
                "nulls count as unset",
                json!({"spec": {"completionPolicy": {"type": null}, "pullPolicy": null,
                                "imagePullPolicy": null}}),
                json!({"spec": all_defaults.clone()}),
            ),
            (
                "set values stay",
                json!({"metadata": {"labels": {"a": "b"}},
                       "spec": {"completionPolicy": {"ttlSecondsAfterFinished": 60},
                                "pullPolicy": {"timeoutSeconds": 30},
                                "imagePullPolicy": "Always"}}),
                json!({"metadata": {"labels": {"a": "b"}},
                       "spec": {"completionPolicy": {"type": "Always", "ttlSecondsAfterFinished": 60},
                                "pullPolicy": {"timeoutSeconds": 30, "backoffLimit": 3},
                                "imagePullPolicy": "Always"}}),
            ),
            (
                "a completion type set: nothing else defaulted",
                json!({"spec": {"completionPolicy": {"type": "Never"}}}),
                json!({"spec": {"completionPolicy": {"type": "Never"}}}),
            ),
            (
                "not an object: left for validation",
                json!({"spec": {"completionPolicy": "Always"}}),
                json!({"spec": {"completionPolicy": "Always"}}),
            ),
        ] {
            assert_eq!(defaulted(template), want, "{case}");
        }
    }

    #[test]
    fn advancedcronjob_defaults_its_image_list_pull_job_template() {
        let mut spec: AdvancedCronJobSpec = serde_json::from_value(json!({
            "schedule": "* * * * *",
            "template": {"imageListPullJobTemplate": {"spec": {"images": ["nginx"]}}},
        }))
        .unwrap();
        default_advancedcronjob(&mut spec);
        assert_eq!(
            spec.template.image_list_pull_job_template,
            Some(
                json!({"spec": {"images": ["nginx"], "completionPolicy": {"type": "Always"},
                                 "pullPolicy": {"timeoutSeconds": 600, "backoffLimit": 3},
                                 "imagePullPolicy": "IfNotPresent"}})
            )
        );
    }
}
