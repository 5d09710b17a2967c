use serde_json::{Value, json};

use super::*;

fn bcj(spec: Value) -> BroadcastJob {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "BroadcastJob",
        "metadata": {"name": "job", "namespace": "default"},
        "spec": spec,
    }))
    .unwrap()
}

fn template(restart: &str) -> Value {
    json!({"spec": {"restartPolicy": restart, "containers": [{"name": "c", "image": "busybox"}]}})
}

fn messages(errors: &[FieldError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

#[test]
fn a_valid_broadcastjob_passes() {
    for spec in [
        json!({"template": template("Never")}),
        json!({"template": template("OnFailure"), "parallelism": "50%",
               "completionPolicy": {"type": "Always", "activeDeadlineSeconds": 60, "ttlSecondsAfterFinished": 0},
               "failurePolicy": {"type": "Pause", "restartLimit": 3}}),
        json!({"template": template("Never"), "completionPolicy": {"type": "Never"}, "parallelism": 2}),
    ] {
        assert_eq!(
            messages(&validate_broadcastjob(&bcj(spec.clone()))),
            Vec::<String>::new(),
            "{spec}"
        );
    }
}

#[test]
fn broadcastjob_refusals_name_the_field() {
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"template": template("Always")}),
            "spec.template.spec.restartPolicy: Invalid value: \"Always\": pod restartPolicy can only be Never or OnFailure",
        ),
        (
            json!({"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}),
            "spec.template.spec.restartPolicy: Invalid value: \"\": pod restartPolicy can only be Never or OnFailure",
        ),
        (
            json!({"template": template("Never"), "completionPolicy": {"type": "Never", "ttlSecondsAfterFinished": 5}}),
            "spec.completionPolicy.ttlSecondsAfterFinished: Invalid value: 5: ttlSecondsAfterFinished can just work with Always CompletionPolicyType",
        ),
        (
            json!({"template": template("Never"), "completionPolicy": {"type": "Never", "activeDeadlineSeconds": 5}}),
            "spec.completionPolicy.activeDeadlineSeconds: Invalid value: 5: activeDeadlineSeconds can just work with Always CompletionPolicyType",
        ),
        (
            json!({"template": template("Never"), "completionPolicy": {"type": "Sometimes"}}),
            "spec.completionPolicy.type: Unsupported value: \"Sometimes\": supported values: \"Always\", \"Never\"",
        ),
        (
            json!({"template": template("Never"), "failurePolicy": {"type": "Retry"}}),
            "spec.failurePolicy.type: Unsupported value: \"Retry\": supported values: \"FailFast\", \"Continue\", \"Pause\"",
        ),
        (
            json!({"template": template("Never"), "failurePolicy": {"restartLimit": -1}}),
            "spec.failurePolicy.restartLimit: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            json!({"template": template("Never"), "parallelism": "half"}),
            "spec.parallelism: Invalid value: \"half\": must be a non-negative integer or a percent (e.g. 50%)",
        ),
        (
            json!({"template": template("Never"), "parallelism": -2}),
            "spec.parallelism: Invalid value: -2: must be a non-negative integer or a percent (e.g. 50%)",
        ),
        (
            json!({"template": {"metadata": {"labels": {"broadcastjob-name": "x"}}, "spec": template("Never")["spec"]}}),
            "spec.template.metadata.labels: Invalid value: {\"broadcastjob-name\":\"x\"}: \"broadcastjob-name\" and \"broadcastjob-controller-uid\" are not allowed to preset in pod labels",
        ),
        (
            json!({"template": {"spec": {"restartPolicy": "Never", "containers": []}}}),
            "spec.template.spec.containers: Required value",
        ),
    ];
    for (spec, expected) in cases {
        let got = messages(&validate_broadcastjob(&bcj(spec.clone())));
        assert_eq!(got, vec![expected.to_string()], "{spec}");
    }
}

#[test]
fn names_are_letters_digits_and_dashes_up_to_63() {
    let mut job = bcj(json!({"template": template("Never")}));
    job.metadata.name = Some("bad.name".into());
    assert_eq!(
        messages(&validate_broadcastjob(&job)),
        [
            "metadata.name: Invalid value: \"bad.name\": BroadcastJob name must consist of alphanumeric characters or '-' (e.g. 'example-com', regex used for validation is '^[a-zA-Z0-9\\-]+$')"
        ]
    );
    job.metadata.name = Some("a".repeat(64));
    assert_eq!(
        messages(&validate_broadcastjob(&job)),
        [format!(
            "metadata.name: Invalid value: \"{}\": must be no more than 63 characters",
            "a".repeat(64)
        )]
    );
}

fn acj(spec: Value) -> AdvancedCronJob {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "AdvancedCronJob",
        "metadata": {"name": "cron", "namespace": "default"},
        "spec": spec,
    }))
    .unwrap()
}

fn job_template() -> Value {
    json!({"jobTemplate": {"spec": {"template": template("Never")}}})
}

#[test]
fn valid_advancedcronjobs_pass() {
    for spec in [
        json!({"schedule": "*/1 * * * *", "template": job_template()}),
        json!({"schedule": "@hourly", "timeZone": "Asia/Shanghai", "template": job_template(),
               "concurrencyPolicy": "Forbid", "startingDeadlineSeconds": 0, "successfulJobsHistoryLimit": 0}),
        json!({"schedule": "TZ=Europe/Berlin 30 2 * * *", "template": {"broadcastJobTemplate": {"spec": {"template": template("Never")}}}}),
        json!({"schedule": "0 0 * * *", "concurrencyPolicy": "Replace",
               "template": {"imageListPullJobTemplate": {"spec": {"images": ["nginx:1.25"]}}}}),
    ] {
        assert_eq!(
            messages(&validate_advancedcronjob(&acj(spec.clone()))),
            Vec::<String>::new(),
            "{spec}"
        );
    }
}

#[test]
fn advancedcronjob_refusals_name_the_field() {
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"schedule": "", "template": job_template()}),
            "spec.schedule: Invalid value: \"\": schedule cannot be empty, please provide valid cron schedule.",
        ),
        (
            json!({"schedule": "0 0 * * 8", "template": job_template()}),
            "spec.schedule: Invalid value: \"0 0 * * 8\": day of week: 8 is out of range (0-6)",
        ),
        (
            json!({"schedule": "0 0 * * *", "timeZone": "Mars/Olympus", "template": job_template()}),
            "spec.timeZone: Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus",
        ),
        (
            json!({"schedule": "0 0 * * *", "timeZone": "Local", "template": job_template()}),
            "spec.timeZone: Invalid value: \"Local\": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ),
        (
            json!({"schedule": "0 0 * * *", "timeZone": "", "template": job_template()}),
            "spec.timeZone: Invalid value: \"\": timeZone must be nil or non-empty string",
        ),
        (
            json!({"schedule": "TZ=UTC 0 0 * * *", "timeZone": "UTC", "template": job_template()}),
            "spec.schedule: Invalid value: \"TZ=UTC 0 0 * * *\": cannot use both timeZone field and TZ or CRON_TZ in schedule",
        ),
        (
            json!({"schedule": "0 0 * * *", "startingDeadlineSeconds": -1, "template": job_template()}),
            "spec.startingDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            json!({"schedule": "0 0 * * *", "failedJobsHistoryLimit": -1, "template": job_template()}),
            "spec.failedJobsHistoryLimit: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            json!({"schedule": "0 0 * * *", "concurrencyPolicy": "Sometimes", "template": job_template()}),
            "spec.concurrencyPolicy: Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\"",
        ),
        (
            json!({"schedule": "0 0 * * *", "template": {}}),
            "spec.template: Forbidden: spec must have one template, either JobTemplate or BroadcastJobTemplate or ImageListPullJobTemplate should be provided",
        ),
        (
            json!({"schedule": "0 0 * * *", "template": {"jobTemplate": job_template()["jobTemplate"], "broadcastJobTemplate": {"spec": {"template": template("Never")}}}}),
            "spec.template: Forbidden: spec can have only one template, either JobTemplate or BroadcastJobTemplate or ImageListPullJobTemplate should be provided",
        ),
        (
            json!({"schedule": "0 0 * * *", "template": {"jobTemplate": {"spec": {"template": template("Always")}}}}),
            "spec.template.jobTemplate.spec.template.spec.restartPolicy: Invalid value: \"Always\": pod restartPolicy can only be Never or OnFailure",
        ),
        (
            json!({"schedule": "0 0 * * *", "template": {"broadcastJobTemplate": {"spec": {"template": template("Never"), "completionPolicy": {"type": "Never", "ttlSecondsAfterFinished": 1}}}}}),
            "spec.template.broadcastJobTemplate.spec.completionPolicy.ttlSecondsAfterFinished: Invalid value: 1: ttlSecondsAfterFinished can just work with Always CompletionPolicyType",
        ),
        (
            json!({"schedule": "0 0 * * *", "concurrencyPolicy": "Allow", "template": {"imageListPullJobTemplate": {"spec": {"images": ["nginx"]}}}}),
            "spec.concurrencyPolicy: Invalid value: \"Allow\": concurrencyPolicy should be Replace or Forbid, but current value is: Allow",
        ),
        (
            json!({"schedule": "0 0 * * *", "concurrencyPolicy": "Forbid", "template": {"imageListPullJobTemplate": {"spec": {"images": ["a", "a"]}}}}),
            "spec.template.imageListPullJobTemplate.spec.images: Invalid value: [\"a\",\"a\"]: images cannot have duplicate values",
        ),
    ];
    for (spec, expected) in cases {
        let got = messages(&validate_advancedcronjob(&acj(spec.clone())));
        assert_eq!(got, vec![expected.to_string()], "{spec}");
    }
}
