//! The validating webhooks' checks (OpenKruise's `validateBroadcastJob` and
//! `validateAdvancedCronJob`, reference §4.e and §4.h), on the `v1beta1` form, as a list of
//! Kubernetes-style field errors. The controllers run the same checks before acting.
//!
//! Stricter than OpenKruise, each refusing at admission what would otherwise fail later:
//! unknown `completionPolicy.type`, `failurePolicy.type` and `concurrencyPolicy` values,
//! a `parallelism` that is neither a non-negative number nor a percent, negative deadlines,
//! TTLs and restart limits, and a `jobTemplate` whose pods restart `Always` (the API server
//! refuses such a Job at every run). Template errors carry the template's real path
//! (`spec.template.jobTemplate.spec.template…`; OpenKruise reports `spec.template`).

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_compat::field::{FieldError, Path};
use kruise_compat::podtemplate::validate_pod_template;
use serde_json::Value;

pub use kruise_compat::field::{ErrorList, bracketed as to_message};

use super::v1beta1::{AdvancedCronJob, BroadcastJob, BroadcastJobSpec};
use super::{BROADCASTJOB_NAME_LABEL, BROADCASTJOB_UID_LABEL, CompletionPolicyType};
use crate::plan::schedule;

/// The longest name either kind may have.
pub const MAX_NAME_LEN: usize = 63;
const NAME_REGEX: &str = r"^[a-zA-Z0-9\-]+$";
const NONNEGATIVE: &str = "must be greater than or equal to 0";

/// `metadata.name` (or `generateName`): letters, digits and `-`, at most 63 characters.
fn validate_name(meta: &ObjectMeta, kind: &str) -> ErrorList {
    let (path, name) = match (&meta.name, &meta.generate_name) {
        (Some(name), _) if !name.is_empty() => ("metadata.name", name.as_str()),
        (_, Some(prefix)) if !prefix.is_empty() => ("metadata.generateName", prefix.as_str()),
        _ => {
            return vec![FieldError::required(
                "metadata.name",
                "name or generateName is required",
            )];
        }
    };
    let mut errors = Vec::new();
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        errors.push(FieldError::invalid(
            path,
            name,
            format!(
                "{kind} name must consist of alphanumeric characters or '-' (e.g. 'example-com', regex used for validation is '{NAME_REGEX}')"
            ),
        ));
    }
    if name.len() > MAX_NAME_LEN {
        errors.push(FieldError::invalid(
            path,
            name,
            format!("must be no more than {MAX_NAME_LEN} characters"),
        ));
    }
    errors
}

/// A BroadcastJob (§4.e).
pub fn validate_broadcastjob(job: &BroadcastJob) -> ErrorList {
    let mut errors = validate_name(&job.metadata, super::BROADCASTJOB_KIND);
    errors.extend(validate_broadcastjob_spec(&job.spec, &Path::new("spec")));
    errors
}

/// A BroadcastJob spec found at `path` (a BroadcastJob's `spec`, or an AdvancedCronJob's
/// `broadcastJobTemplate.spec`).
pub fn validate_broadcastjob_spec(spec: &BroadcastJobSpec, path: &Path) -> ErrorList {
    let mut errors = Vec::new();
    let completion = path.child("completionPolicy");
    match spec.completion_policy.type_.as_ref() {
        Some(CompletionPolicyType::Never) => {
            if let Some(ttl) = spec.completion_policy.ttl_seconds_after_finished {
                errors.push(FieldError::invalid(
                    completion.child("ttlSecondsAfterFinished"),
                    ttl,
                    "ttlSecondsAfterFinished can just work with Always CompletionPolicyType",
                ));
            }
            if let Some(deadline) = spec.completion_policy.active_deadline_seconds {
                errors.push(FieldError::invalid(
                    completion.child("activeDeadlineSeconds"),
                    deadline,
                    "activeDeadlineSeconds can just work with Always CompletionPolicyType",
                ));
            }
        }
        Some(CompletionPolicyType::Unknown(other)) if !other.is_empty() => {
            errors.push(FieldError::not_supported(
                completion.child("type"),
                other,
                &["Always", "Never"],
            ));
        }
        _ => {}
    }
    if let Some(deadline) = spec
        .completion_policy
        .active_deadline_seconds
        .filter(|d| *d < 0)
    {
        errors.push(FieldError::invalid(
            completion.child("activeDeadlineSeconds"),
            deadline,
            NONNEGATIVE,
        ));
    }
    if let Some(ttl) = spec
        .completion_policy
        .ttl_seconds_after_finished
        .filter(|t| *t < 0)
    {
        errors.push(FieldError::invalid(
            completion.child("ttlSecondsAfterFinished"),
            ttl,
            NONNEGATIVE,
        ));
    }
    let failure = path.child("failurePolicy");
    if let Some(super::FailurePolicyType::Unknown(other)) = &spec.failure_policy.type_
        && !other.is_empty()
    {
        errors.push(FieldError::not_supported(
            failure.child("type"),
            other,
            &["FailFast", "Continue", "Pause"],
        ));
    }
    if spec.failure_policy.restart_limit < 0 {
        errors.push(FieldError::invalid(
            failure.child("restartLimit"),
            spec.failure_policy.restart_limit,
            NONNEGATIVE,
        ));
    }
    if let Some(parallelism) = &spec.parallelism {
        errors.extend(validate_parallelism(
            parallelism,
            &path.child("parallelism"),
        ));
    }
    let template = path.child("template");
    errors.extend(validate_restart_policy(&spec.template, &template));
    let labels = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.as_ref());
    if let Some(labels) = labels
        && [BROADCASTJOB_NAME_LABEL, BROADCASTJOB_UID_LABEL]
            .iter()
            .any(|k| labels.get(*k).is_some_and(|v| !v.is_empty()))
    {
        errors.push(FieldError::invalid(
            template.child("metadata").child("labels"),
            kruise_compat::field::BadValue::json(labels),
            format!(
                "\"{BROADCASTJOB_NAME_LABEL}\" and \"{BROADCASTJOB_UID_LABEL}\" are not allowed to preset in pod labels"
            ),
        ));
    }
    errors.extend(validate_pod_template(&spec.template, &template));
    errors
}

/// `parallelism`: a non-negative number or a percent.
fn validate_parallelism(parallelism: &IntOrString, path: &Path) -> ErrorList {
    let valid = match parallelism {
        IntOrString::Int(n) => *n >= 0,
        IntOrString::String(s) => s
            .strip_suffix('%')
            .and_then(|p| p.parse::<u32>().ok())
            .is_some(),
    };
    if valid {
        return Vec::new();
    }
    vec![FieldError::invalid(
        path,
        kruise_compat::field::BadValue::json(parallelism),
        "must be a non-negative integer or a percent (e.g. 50%)",
    )]
}

/// A job's pods run to completion: `restartPolicy` `Never` or `OnFailure` (an unset one is
/// `Always` once the API server defaults it, and refused as such).
fn validate_restart_policy(template: &PodTemplateSpec, path: &Path) -> ErrorList {
    let policy = template
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("");
    if policy == "Never" || policy == "OnFailure" {
        return Vec::new();
    }
    vec![FieldError::invalid(
        path.child("spec").child("restartPolicy"),
        policy,
        "pod restartPolicy can only be Never or OnFailure",
    )]
}

/// An AdvancedCronJob (§4.h).
pub fn validate_advancedcronjob(acj: &AdvancedCronJob) -> ErrorList {
    let spec = &acj.spec;
    let path = Path::new("spec");
    let mut errors = validate_name(&acj.metadata, super::ADVANCEDCRONJOB_KIND);

    // timeZone first: the schedule is parsed with it only when it is valid.
    let zone_path = path.child("timeZone");
    let zone_ok = match spec.time_zone.as_deref() {
        None => true,
        Some("") => {
            errors.push(FieldError::invalid(
                zone_path,
                "",
                "timeZone must be nil or non-empty string",
            ));
            false
        }
        Some(zone) => match schedule::time_zone(zone) {
            Ok(_) => true,
            Err(e) => {
                errors.push(FieldError::invalid(zone_path, zone, e.to_string()));
                false
            }
        },
    };
    let schedule_path = path.child("schedule");
    let zone_field = spec.time_zone.as_deref().filter(|_| zone_ok);
    if let Err(e) = schedule::parse(&spec.schedule, zone_field, &jiff::tz::TimeZone::UTC) {
        errors.push(FieldError::invalid(
            schedule_path.clone(),
            &spec.schedule,
            e.to_string(),
        ));
    }
    if spec.schedule.contains("TZ") && spec.time_zone.is_some() {
        errors.push(FieldError::invalid(
            schedule_path,
            &spec.schedule,
            "cannot use both timeZone field and TZ or CRON_TZ in schedule",
        ));
    }
    for (name, value) in [
        ("startingDeadlineSeconds", spec.starting_deadline_seconds),
        (
            "successfulJobsHistoryLimit",
            spec.successful_jobs_history_limit.map(i64::from),
        ),
        (
            "failedJobsHistoryLimit",
            spec.failed_jobs_history_limit.map(i64::from),
        ),
    ] {
        if let Some(v) = value.filter(|v| *v < 0) {
            errors.push(FieldError::invalid(path.child(name), v, NONNEGATIVE));
        }
    }
    if let Some(super::ConcurrencyPolicy::Unknown(other)) = &spec.concurrency_policy
        && !other.is_empty()
    {
        errors.push(FieldError::not_supported(
            path.child("concurrencyPolicy"),
            other,
            &["Allow", "Forbid", "Replace"],
        ));
    }
    errors.extend(validate_templates(acj, &path));
    errors
}

fn validate_templates(acj: &AdvancedCronJob, path: &Path) -> ErrorList {
    let spec = &acj.spec;
    let template_path = path.child("template");
    let mut errors = Vec::new();
    let mut count = 0;
    if let Some(job) = &spec.template.job_template {
        count += 1;
        let at = template_path
            .child("jobTemplate")
            .child("spec")
            .child("template");
        let template = job
            .spec
            .as_ref()
            .map(|s| s.template.clone())
            .unwrap_or_default();
        errors.extend(validate_restart_policy(&template, &at));
        errors.extend(validate_pod_template(&template, &at));
    }
    if let Some(bcj) = &spec.template.broadcast_job_template {
        count += 1;
        errors.extend(validate_broadcastjob_spec(
            &bcj.spec,
            &template_path.child("broadcastJobTemplate").child("spec"),
        ));
    }
    if let Some(pull) = &spec.template.image_list_pull_job_template {
        count += 1;
        let policy = spec
            .concurrency_policy
            .as_ref()
            .map(|p| p.as_str())
            .unwrap_or("");
        if policy != "Replace" && policy != "Forbid" {
            errors.push(FieldError::invalid(
                path.child("concurrencyPolicy"),
                policy,
                format!(
                    "concurrencyPolicy should be Replace or Forbid, but current value is: {policy}"
                ),
            ));
        }
        errors.extend(validate_image_list(
            pull,
            &template_path
                .child("imageListPullJobTemplate")
                .child("spec")
                .child("images"),
        ));
    }
    match count {
        0 => errors.push(FieldError::forbidden(
            template_path,
            "spec must have one template, either JobTemplate or BroadcastJobTemplate or ImageListPullJobTemplate should be provided",
        )),
        1 => {}
        _ => errors.push(FieldError::forbidden(
            template_path,
            "spec can have only one template, either JobTemplate or BroadcastJobTemplate or ImageListPullJobTemplate should be provided",
        )),
    }
    errors
}

/// The images of an ImageListPullJob template: 1 to 255, no duplicates.
fn validate_image_list(template: &Value, path: &Path) -> ErrorList {
    let images: Vec<&str> = template
        .pointer("/spec/images")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let shown = kruise_compat::field::BadValue::json(&images);
    let detail = if images.is_empty() {
        "image can not be empty"
    } else if images.len() > 255 {
        "the maximum number of images cannot > 255"
    } else if images
        .iter()
        .enumerate()
        .any(|(i, a)| images.iter().skip(i + 1).any(|b| a == b))
    {
        "images cannot have duplicate values"
    } else {
        return Vec::new();
    };
    vec![FieldError::invalid(path, shown, detail)]
}

#[cfg(test)]
mod tests;
