use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::api::defaults::default_advancedcronjob;
use std::time::Duration;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

const CREATED: &str = "2026-11-25T12:00:00Z";

fn cron(spec: Value, status: Value) -> AdvancedCronJob {
    let mut spec = spec;
    if spec.get("template").is_none() {
        spec["template"] = json!({"jobTemplate": {
            "metadata": {"labels": {"team": "a"}, "annotations": {"note": "n"}},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}});
    }
    let mut acj: AdvancedCronJob = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "AdvancedCronJob",
        "metadata": {"name": "acj", "namespace": "default", "uid": "acj-uid", "creationTimestamp": CREATED},
        "spec": spec, "status": status,
    }))
    .unwrap();
    default_advancedcronjob(&mut acj.spec);
    acj
}

fn child(name: &str, outcome: Outcome, scheduled: Option<&str>, start: Option<&str>) -> Child {
    Child {
        reference: ObjectReference {
            api_version: Some("batch/v1".into()),
            kind: Some("Job".into()),
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        outcome,
        scheduled_at: scheduled.map(ts),
        start_time: start.map(ts),
    }
}

fn run_at(acj: &AdvancedCronJob, children: &[Child], now: &str) -> Plan {
    plan(&Input {
        cron: acj,
        children,
        now: ts(now),
        default_zone: &TimeZone::UTC,
    })
}

fn creates(plan: &Plan) -> Vec<(String, Timestamp)> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateChild { name, scheduled } => Some((name.clone(), *scheduled)),
            _ => None,
        })
        .collect()
}

fn deletes(plan: &Plan) -> Vec<(String, &'static str)> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::DeleteChild { name, why } => Some((name.clone(), *why)),
            _ => None,
        })
        .collect()
}

fn reasons(plan: &Plan) -> Vec<&str> {
    plan.events.iter().map(|e| e.reason.as_str()).collect()
}

fn unix(s: &str) -> i64 {
    ts(s).as_second()
}

#[test]
fn before_the_first_run_it_waits_for_it() {
    let acj = cron(json!({"schedule": "*/1 * * * *"}), json!({}));
    let p = run_at(&acj, &[], "2026-11-25T12:00:30Z");
    assert!(p.actions.is_empty());
    assert_eq!(p.requeue_after, Some(Duration::from_secs(30)));
    assert_eq!(p.status.type_, Some(TemplateKind::Job));
    assert_eq!(p.status.last_schedule_time, None);
}

#[test]
fn a_due_run_creates_its_child_named_by_its_time() {
    let acj = cron(json!({"schedule": "*/1 * * * *"}), json!({}));
    let p = run_at(&acj, &[], "2026-11-25T12:01:05Z");
    assert_eq!(
        creates(&p),
        [(
            format!("acj-{}", unix("2026-11-25T12:01:00Z")),
            ts("2026-11-25T12:01:00Z")
        )]
    );
    assert_eq!(p.requeue_after, Some(Duration::from_secs(55)));
}

#[test]
fn only_the_latest_missed_run_starts() {
    let acj = cron(json!({"schedule": "*/1 * * * *"}), json!({}));
    let p = run_at(&acj, &[], "2026-11-25T12:05:10Z");
    assert_eq!(
        creates(&p),
        [(
            format!("acj-{}", unix("2026-11-25T12:05:00Z")),
            ts("2026-11-25T12:05:00Z")
        )]
    );
}

#[test]
fn a_run_whose_child_exists_is_not_created_again() {
    // A restart between the create and the status write: the child is in the cache.
    let acj = cron(json!({"schedule": "*/1 * * * *"}), json!({}));
    let existing = child(
        &format!("acj-{}", unix("2026-11-25T12:05:00Z")),
        Outcome::Active,
        Some("2026-11-25T12:05:00Z"),
        None,
    );
    let p = run_at(&acj, &[existing], "2026-11-25T12:05:30Z");
    assert!(creates(&p).is_empty());
    assert_eq!(
        p.status.last_schedule_time,
        Some(Time(ts("2026-11-25T12:05:00Z")))
    );
    assert_eq!(p.status.active.len(), 1);
}

#[test]
fn a_child_deleted_by_its_ttl_does_not_run_again_before_the_next_slot() {
    // K#792, K#1039, K#2213: the last schedule time stays even with no child left.
    let acj = cron(
        json!({"schedule": "0 * * * *", "successfulJobsHistoryLimit": 0}),
        json!({"lastScheduleTime": "2026-11-25T13:00:00Z"}),
    );
    let p = run_at(&acj, &[], "2026-11-25T13:20:00Z");
    assert!(p.actions.is_empty());
    assert_eq!(
        p.status.last_schedule_time,
        Some(Time(ts("2026-11-25T13:00:00Z")))
    );
    assert_eq!(p.requeue_after, Some(Duration::from_secs(40 * 60)));
    let p = run_at(&acj, &[], "2026-11-25T14:00:01Z");
    assert_eq!(creates(&p).len(), 1);
}

#[test]
fn more_than_100_missed_runs_is_an_event_not_a_storm() {
    let acj = cron(json!({"schedule": "*/1 * * * *"}), json!({}));
    let p = run_at(&acj, &[], "2026-11-26T12:00:30Z");
    assert!(p.actions.is_empty());
    assert_eq!(reasons(&p), ["TooManyMissedTimes"]);
    assert_eq!(p.requeue_after, None);
    // A starting deadline bounds the look-back: the latest run starts.
    let acj = cron(
        json!({"schedule": "*/1 * * * *", "startingDeadlineSeconds": 300}),
        json!({}),
    );
    let p = run_at(&acj, &[], "2026-11-26T12:00:30Z");
    assert_eq!(
        creates(&p),
        [(
            format!("acj-{}", unix("2026-11-26T12:00:00Z")),
            ts("2026-11-26T12:00:00Z")
        )]
    );
}

#[test]
fn a_run_older_than_the_starting_deadline_is_skipped() {
    let acj = cron(
        json!({"schedule": "0 * * * *", "startingDeadlineSeconds": 60}),
        json!({"lastScheduleTime": "2026-11-25T12:00:00Z"}),
    );
    let p = run_at(&acj, &[], "2026-11-25T13:05:00Z");
    assert!(p.actions.is_empty());
    assert_eq!(p.requeue_after, Some(Duration::from_secs(55 * 60)));
    let p = run_at(&acj, &[], "2026-11-25T13:00:50Z");
    assert_eq!(creates(&p).len(), 1);
}

#[test]
fn concurrency_policies() {
    let running = child("acj-1", Outcome::Active, Some("2026-11-25T12:00:00Z"), None);
    let now = "2026-11-25T12:01:01Z";
    let allow = cron(json!({"schedule": "*/1 * * * *"}), json!({}));
    assert_eq!(
        creates(&run_at(&allow, std::slice::from_ref(&running), now)).len(),
        1
    );

    let forbid = cron(
        json!({"schedule": "*/1 * * * *", "concurrencyPolicy": "Forbid"}),
        json!({}),
    );
    let p = run_at(&forbid, std::slice::from_ref(&running), now);
    assert!(p.actions.is_empty());
    assert_eq!(reasons(&p), ["JobAlreadyActive"]);
    let done = child(
        "acj-1",
        Outcome::Succeeded,
        Some("2026-11-25T12:00:00Z"),
        None,
    );
    assert_eq!(creates(&run_at(&forbid, &[done], now)).len(), 1);

    let replace = cron(
        json!({"schedule": "*/1 * * * *", "concurrencyPolicy": "Replace"}),
        json!({}),
    );
    let p = run_at(&replace, &[running], now);
    assert_eq!(deletes(&p), [("acj-1".to_string(), "replace")]);
    assert_eq!(creates(&p).len(), 1);
    assert!(
        matches!(p.actions.last(), Some(Action::CreateChild { .. })),
        "deletes go first"
    );
}

#[test]
fn paused_creates_nothing_but_keeps_the_status() {
    let acj = cron(
        json!({"schedule": "*/1 * * * *", "paused": true}),
        json!({}),
    );
    let running = child("acj-1", Outcome::Active, Some("2026-11-25T12:00:00Z"), None);
    let p = run_at(&acj, &[running], "2026-11-25T12:05:05Z");
    assert!(p.actions.is_empty());
    assert_eq!(p.requeue_after, None);
    assert_eq!(p.status.active.len(), 1);
    assert_eq!(
        p.status.last_schedule_time,
        Some(Time(ts("2026-11-25T12:00:00Z")))
    );
}

#[test]
fn history_limits_delete_the_oldest_finished_children() {
    let acj = cron(json!({"schedule": "0 0 1 1 *"}), json!({}));
    let children = [
        child("s1", Outcome::Succeeded, None, Some("2026-11-25T01:00:00Z")),
        child("s2", Outcome::Succeeded, None, Some("2026-11-25T02:00:00Z")),
        child("s3", Outcome::Succeeded, None, None),
        child("s4", Outcome::Succeeded, None, Some("2026-11-25T04:00:00Z")),
        child("s5", Outcome::Succeeded, None, Some("2026-11-25T03:00:00Z")),
        child("f1", Outcome::Failed, None, Some("2026-11-25T01:00:00Z")),
        child("f2", Outcome::Failed, None, Some("2026-11-25T02:00:00Z")),
        child("a1", Outcome::Active, None, None),
    ];
    let p = run_at(&acj, &children, "2026-11-25T12:00:10Z");
    assert_eq!(
        deletes(&p),
        [
            ("f1".to_string(), "history"),
            ("s3".to_string(), "history"),
            ("s1".to_string(), "history"),
        ]
    );
    let none_kept = cron(
        json!({"schedule": "0 0 1 1 *", "successfulJobsHistoryLimit": 0, "failedJobsHistoryLimit": 0}),
        json!({}),
    );
    assert_eq!(
        deletes(&run_at(&none_kept, &children, "2026-11-25T12:00:10Z")).len(),
        7
    );
}

#[test]
fn status_lists_the_active_children_and_the_latest_schedule() {
    let acj = cron(
        json!({"schedule": "0 0 1 1 *", "template": {"broadcastJobTemplate": {"spec": {"template": {}}}}}),
        json!({"lastScheduleTime": "2026-11-25T10:00:00Z"}),
    );
    let children = [
        child("b", Outcome::Active, Some("2026-11-25T11:00:00Z"), None),
        child("a", Outcome::Active, Some("2026-11-25T09:00:00Z"), None),
        child("c", Outcome::Succeeded, Some("2026-11-25T08:00:00Z"), None),
    ];
    let p = run_at(&acj, &children, "2026-11-25T12:00:00Z");
    assert_eq!(p.status.type_, Some(TemplateKind::BroadcastJob));
    let names: Vec<_> = p
        .status
        .active
        .iter()
        .map(|r| r.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(
        p.status.last_schedule_time,
        Some(Time(ts("2026-11-25T11:00:00Z")))
    );
}

#[test]
fn children_are_built_from_the_template() {
    let acj = cron(json!({"schedule": "*/1 * * * *"}), json!({}));
    let at = ts("2026-11-25T12:01:00Z");
    let job = new_job(&acj, &child_name(&acj, at), at).unwrap();
    let v = serde_json::to_value(&job).unwrap();
    assert_eq!(v["metadata"]["name"], format!("acj-{}", at.as_second()));
    assert_eq!(v["metadata"]["labels"], json!({"team": "a"}));
    assert_eq!(
        v["metadata"]["annotations"],
        json!({"note": "n", "apps.kruise.io/scheduled-at": "2026-11-25T12:01:00Z"})
    );
    assert_eq!(
        v["metadata"]["ownerReferences"][0]["kind"],
        "AdvancedCronJob"
    );
    assert_eq!(v["metadata"]["ownerReferences"][0]["uid"], "acj-uid");
    assert_eq!(v["spec"]["template"]["spec"]["restartPolicy"], "Never");
    assert!(new_broadcastjob(&acj, "x", at).is_none());

    let bcj = cron(
        json!({"schedule": "*/1 * * * *", "template": {"broadcastJobTemplate": {
        "metadata": {"labels": {"k": "v"}}, "spec": {"parallelism": 1, "template": {}}}}}),
        json!({}),
    );
    let child = new_broadcastjob(&bcj, "acj-1", at).unwrap();
    assert_eq!(
        child.metadata.labels,
        Some([("k".to_string(), "v".to_string())].into())
    );
    assert_eq!(
        child.spec.parallelism,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1))
    );
    assert_eq!(template_kind(&bcj), TemplateKind::BroadcastJob);
}

/// Drives the planner as the controller would, minute by minute from `from` for `minutes`,
/// children finishing `runs_for` minutes after their run; returns the runs created.
fn simulate(acj: &AdvancedCronJob, from: &str, minutes: i64, runs_for: i64) -> Vec<Timestamp> {
    let mut children: Vec<Child> = Vec::new();
    let mut acj = acj.clone();
    let mut created = Vec::new();
    let start = ts(from);
    for minute in 0..minutes {
        let now = start
            .checked_add(SignedDuration::from_secs(minute * 60 + 5))
            .unwrap();
        for c in &mut children {
            if c.outcome == Outcome::Active
                && c.scheduled_at
                    .is_some_and(|s| now.duration_since(s) >= SignedDuration::from_mins(runs_for))
            {
                c.outcome = Outcome::Succeeded;
            }
        }
        let p = plan(&Input {
            cron: &acj,
            children: &children,
            now,
            default_zone: &TimeZone::UTC,
        });
        acj.status = Some(p.status.clone());
        for action in p.actions {
            match action {
                Action::CreateChild { name, scheduled } => {
                    created.push(scheduled);
                    children.push(child(
                        &name,
                        Outcome::Active,
                        Some(&scheduled.to_string()),
                        Some(&now.to_string()),
                    ));
                }
                Action::DeleteChild { name, .. } => children.retain(|c| c.name() != name),
            }
        }
    }
    created
}

#[test]
fn half_past_two_in_new_york_runs_exactly_once_on_dst_change_days() {
    let acj = cron(
        json!({"schedule": "30 2 * * *", "timeZone": "America/New_York"}),
        json!({}),
    );
    let ny = TimeZone::get("America/New_York").unwrap();
    for (from, day) in [
        ("2026-03-07T12:00:00Z", "2026-03-08"),
        ("2026-10-31T12:00:00Z", "2026-11-01"),
    ] {
        let mut acj = acj.clone();
        acj.metadata.creation_timestamp = Some(Time(ts(from)));
        let runs = simulate(&acj, from, 60 * 48, 5);
        let day: jiff::civil::Date = day.parse().unwrap();
        let on_day = runs
            .iter()
            .filter(|r| r.to_zoned(ny.clone()).date() == day)
            .count();
        assert_eq!(on_day, 1, "{day}: {runs:?}");
        assert_eq!(runs.len(), 2, "{runs:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Under Forbid, however long runs take, never two children are active, and every run
    /// is created at most once.
    #[test]
    fn forbid_never_has_two_active_children(runs_for in 0i64..7, every in 1u32..4, deadline in proptest::option::of(0i64..300)) {
        let mut spec = json!({"schedule": format!("*/{every} * * * *"), "concurrencyPolicy": "Forbid"});
        if let Some(d) = deadline {
            spec["startingDeadlineSeconds"] = json!(d);
        }
        let acj = cron(spec, json!({}));
        let mut children: Vec<Child> = Vec::new();
        let mut acj = acj.clone();
        let start = ts(CREATED);
        let mut seen = std::collections::BTreeSet::new();
        for minute in 0..90 {
            let now = start.checked_add(SignedDuration::from_secs(minute * 60 + 7)).unwrap();
            for c in &mut children {
                if c.outcome == Outcome::Active
                    && c.start_time.is_some_and(|s| now.duration_since(s) >= SignedDuration::from_mins(runs_for))
                {
                    c.outcome = Outcome::Succeeded;
                }
            }
            let p = plan(&Input { cron: &acj, children: &children, now, default_zone: &TimeZone::UTC });
            acj.status = Some(p.status.clone());
            for action in p.actions {
                match action {
                    Action::CreateChild { name, scheduled } => {
                        prop_assert!(seen.insert(name.clone()), "{name} created twice");
                        children.push(child(&name, Outcome::Active, Some(&scheduled.to_string()), Some(&now.to_string())));
                    }
                    Action::DeleteChild { name, .. } => children.retain(|c| c.name() != name),
                }
            }
            let active = children.iter().filter(|c| c.outcome == Outcome::Active).count();
            prop_assert!(active <= 1, "{active} active children at {now}");
        }
    }
}

#[test]
fn children_are_classified_by_their_conditions_and_annotation() {
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "acj-1", "namespace": "default", "uid": "u1", "resourceVersion": "7",
                     "annotations": {"apps.kruise.io/scheduled-at": "2026-11-25T12:01:00Z"}},
        "status": {"startTime": "2026-11-25T12:01:01Z",
                   "conditions": [{"type": "Complete", "status": "True"}]},
    }))
    .unwrap();
    let c = job_child(&job);
    assert_eq!(c.outcome, Outcome::Succeeded);
    assert_eq!(c.scheduled_at, Some(ts("2026-11-25T12:01:00Z")));
    assert_eq!(c.start_time, Some(ts("2026-11-25T12:01:01Z")));
    assert_eq!(c.reference.kind.as_deref(), Some("Job"));
    assert_eq!(
        c.reference.resource_version, None,
        "no status write per child update"
    );

    let failed: Job = serde_json::from_value(json!({"metadata": {"name": "acj-2"},
        "status": {"conditions": [{"type": "Failed", "status": "True"}, {"type": "Complete", "status": "False"}]}}))
    .unwrap();
    assert_eq!(job_child(&failed).outcome, Outcome::Failed);
    let running: Job = serde_json::from_value(json!({"metadata": {"name": "acj-3",
        "annotations": {"apps.kruise.io/scheduled-at": "not a time"}}}))
    .unwrap();
    assert_eq!(job_child(&running).outcome, Outcome::Active);
    assert_eq!(job_child(&running).scheduled_at, None);

    let bcj: BroadcastJob = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "BroadcastJob",
        "metadata": {"name": "acj-4"}, "spec": {"template": {}},
        "status": {"phase": "failed", "conditions": [{"type": "Failed", "status": "True"}]},
    }))
    .unwrap();
    let c = broadcastjob_child(&bcj);
    assert_eq!(c.outcome, Outcome::Failed);
    assert_eq!(
        c.reference.api_version.as_deref(),
        Some("apps.kruise.io/v1beta1")
    );
}

#[test]
fn image_list_pull_job_children() {
    let acj = cron(
        json!({"schedule": "0 0 * * *", "concurrencyPolicy": "Replace", "template": {"imageListPullJobTemplate": {
            "metadata": {"labels": {"k": "v"}},
            "spec": {"images": ["nginx:1.25"], "parallelism": 2}}}}),
        json!({}),
    );
    assert_eq!(template_kind(&acj), TemplateKind::ImageListPullJob);
    let at = ts("2026-11-26T00:00:00Z");
    let job = new_image_list_pull_job(&acj, "acj-1", at).unwrap();
    let v = serde_json::to_value(&job).unwrap();
    assert_eq!(v["apiVersion"], "apps.kruise.io/v1beta1");
    assert_eq!(v["kind"], "ImageListPullJob");
    // The template as defaulted (OpenKruise's webhook stores these defaults in it).
    assert_eq!(
        v["spec"],
        json!({"images": ["nginx:1.25"], "parallelism": 2,
               "completionPolicy": {"type": "Always"},
               "pullPolicy": {"timeoutSeconds": 600, "backoffLimit": 3},
               "imagePullPolicy": "IfNotPresent"})
    );
    assert_eq!(v["metadata"]["labels"], json!({"k": "v"}));
    assert_eq!(
        v["metadata"]["annotations"]["apps.kruise.io/scheduled-at"],
        "2026-11-26T00:00:00Z"
    );
    assert!(new_job(&acj, "x", at).is_none() && new_broadcastjob(&acj, "x", at).is_none());

    let with_status = |status: Value| -> ImageListPullJob {
        serde_json::from_value(
            json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "ImageListPullJob",
            "metadata": {"name": "acj-1"}, "spec": {}, "status": status}),
        )
        .unwrap()
    };
    let outcome = |status: Value| image_list_pull_job_child(&with_status(status)).outcome;
    assert_eq!(
        outcome(json!({"desired": 2, "succeeded": 1})),
        Outcome::Active
    );
    assert_eq!(
        outcome(json!({"desired": 2, "succeeded": 2, "completionTime": "2026-11-26T00:01:00Z"})),
        Outcome::Succeeded
    );
    assert_eq!(
        outcome(json!({"desired": 2, "succeeded": 1, "completionTime": "2026-11-26T00:01:00Z"})),
        Outcome::Failed
    );
}
