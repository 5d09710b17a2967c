//! The AdvancedCronJob planner: (cron job, its children, now) -> children to create and
//! delete, status, events, when to look again (reference §4.g). Pure: the controller's
//! clock is an input.
//!
//! * Status first: `type` from the template, `active` = unfinished children,
//!   `lastScheduleTime` = the latest `apps.kruise.io/scheduled-at` of the children **or the
//!   one already in the status**, so a child deleted by its TTL or a history limit of 0
//!   never makes its run start again before the next slot (K#792, K#1039, K#2213; OpenKruise
//!   recomputes it from the children alone).
//! * History: the oldest finished children beyond `successfulJobsHistoryLimit` /
//!   `failedJobsHistoryLimit` are deleted.
//! * Paused: nothing more. Otherwise the missed runs since `lastScheduleTime` (or the
//!   creation), no further back than `startingDeadlineSeconds`: more than 100 is a Warning
//!   event and no run (set or lower `startingDeadlineSeconds`); else only the latest one
//!   starts, unless it is later than `startingDeadlineSeconds` after its time, or
//!   `Forbid` and a child is active; `Replace` deletes the active children first.
//! * A child is named `<cron job>-<unix seconds of its run>`, so a run is created once even
//!   across a controller restart: the name exists already.

use std::collections::BTreeMap;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kruise_core::api::version::APPS_V1BETA1;

use super::EventRecord;
use super::schedule;
use crate::api::imagelistpulljob::{ImageListPullJob, ImageListPullJobSpec};
use crate::api::v1beta1::{AdvancedCronJob, BroadcastJob};
use crate::api::{
    ADVANCEDCRONJOB_KIND, AdvancedCronJobStatus, ConcurrencyPolicy, DEFAULT_FAILED_HISTORY_LIMIT,
    DEFAULT_SUCCESSFUL_HISTORY_LIMIT, SCHEDULED_AT_ANNOTATION, TemplateKind,
};

/// Most missed runs looked at before giving up with an event.
pub const MAX_MISSED_RUNS: usize = 100;

/// Event reasons.
pub mod reason {
    /// More than 100 runs were missed.
    pub const TOO_MANY_MISSED_TIMES: &str = "TooManyMissedTimes";
    /// The schedule does not parse (the webhook was bypassed).
    pub const UNPARSEABLE_SCHEDULE: &str = "UnparseableSchedule";
    /// A child was created.
    pub const SUCCESSFUL_CREATE: &str = "SuccessfulCreate";
    /// A child was deleted (history limit or `Replace`).
    pub const SUCCESSFUL_DELETE: &str = "SuccessfulDelete";
    /// A child create failed.
    pub const FAILED_CREATE: &str = "FailedCreate";
    /// The run is skipped: `Forbid` and a child still runs.
    pub const JOB_ALREADY_ACTIVE: &str = "JobAlreadyActive";
    /// The run is skipped: later than `startingDeadlineSeconds`.
    pub const MISSED_SCHEDULE: &str = "MissedSchedule";
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Still running.
    Active,
    /// Complete.
    Succeeded,
    /// Failed.
    Failed,
}

/// One child (a Job or a BroadcastJob) as the planner sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Child {
    /// Its reference (kind, name, namespace, uid, apiVersion) for `status.active`.
    pub reference: ObjectReference,
    /// Running or how it ended.
    pub outcome: Outcome,
    /// Its `apps.kruise.io/scheduled-at` annotation.
    pub scheduled_at: Option<Timestamp>,
    /// Its `status.startTime` (history is pruned oldest first, unset first).
    pub start_time: Option<Timestamp>,
}

impl Child {
    fn name(&self) -> &str {
        self.reference.name.as_deref().unwrap_or("")
    }
}

/// What the planner reads.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// The cron job, defaulted.
    pub cron: &'a AdvancedCronJob,
    /// Its children of the template's kind.
    pub children: &'a [Child],
    /// The time.
    pub now: Timestamp,
    /// The zone of a schedule that names none.
    pub default_zone: &'a TimeZone,
}

/// A write the shell carries out.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Delete this child (background propagation).
    DeleteChild {
        /// Its name.
        name: String,
        /// Why: `history` or `replace`.
        why: &'static str,
    },
    /// Create the child of the run at `scheduled` (see [`child_name`], [`new_job`],
    /// [`new_broadcastjob`]).
    CreateChild {
        /// `<cron job>-<unix seconds>`.
        name: String,
        /// The run's time.
        scheduled: Timestamp,
    },
}

/// The planner's answer: the kit's plan of AdvancedCronJob actions (deletions, then at
/// most one creation) and status; it requeues for the next run.
pub type Plan = kruise_core::plan::Plan<Action, AdvancedCronJobStatus>;

/// The kind of child the template makes: `jobTemplate`, else `imageListPullJobTemplate`,
/// else `broadcastJobTemplate` (OpenKruise's order).
pub fn template_kind(cron: &AdvancedCronJob) -> TemplateKind {
    let template = &cron.spec.template;
    if template.job_template.is_some() {
        TemplateKind::Job
    } else if template.image_list_pull_job_template.is_some() {
        TemplateKind::ImageListPullJob
    } else {
        TemplateKind::BroadcastJob
    }
}

/// The name of the child of the run at `scheduled`.
pub fn child_name(cron: &AdvancedCronJob, scheduled: Timestamp) -> String {
    format!(
        "{}-{}",
        cron.metadata.name.as_deref().unwrap_or(""),
        scheduled.as_second()
    )
}

/// Plans one reconcile of an AdvancedCronJob.
pub fn plan(input: &Input) -> Plan {
    let cron = input.cron;
    let now = input.now;
    let mut plan = Plan::default();
    let previous = cron.status.clone().unwrap_or_default();

    let mut latest = previous.last_schedule_time.as_ref().map(|t| t.0);
    let mut active: Vec<&Child> = Vec::new();
    let mut succeeded: Vec<&Child> = Vec::new();
    let mut failed: Vec<&Child> = Vec::new();
    for child in input.children {
        match child.outcome {
            Outcome::Active => active.push(child),
            Outcome::Succeeded => succeeded.push(child),
            Outcome::Failed => failed.push(child),
        }
        if child.scheduled_at > latest {
            latest = child.scheduled_at;
        }
    }
    active.sort_by(|a, b| a.name().cmp(b.name()));
    plan.status = AdvancedCronJobStatus {
        type_: Some(template_kind(cron)),
        active: active.iter().map(|c| c.reference.clone()).collect(),
        last_schedule_time: latest.map(Time),
    };

    let limits = [
        (
            failed,
            cron.spec
                .failed_jobs_history_limit
                .unwrap_or(DEFAULT_FAILED_HISTORY_LIMIT),
        ),
        (
            succeeded,
            cron.spec
                .successful_jobs_history_limit
                .unwrap_or(DEFAULT_SUCCESSFUL_HISTORY_LIMIT),
        ),
    ];
    for (mut finished, limit) in limits {
        let keep = usize::try_from(limit.max(0)).unwrap_or(0);
        finished.sort_by(|a, b| a.start_time.cmp(&b.start_time).then(a.name().cmp(b.name())));
        let excess = finished.len().saturating_sub(keep);
        for child in finished.into_iter().take(excess) {
            plan.actions.push(Action::DeleteChild {
                name: child.name().to_string(),
                why: "history",
            });
        }
    }

    if cron.is_paused() {
        return plan;
    }
    let parsed = match schedule::parse(
        &cron.spec.schedule,
        cron.spec.time_zone.as_deref(),
        input.default_zone,
    ) {
        Ok(parsed) => parsed,
        Err(e) => {
            plan.events.push(EventRecord::warning(
                reason::UNPARSEABLE_SCHEDULE,
                format!("unparseable schedule {:?}: {e}", cron.spec.schedule),
            ));
            return plan;
        }
    };

    let created = cron
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| t.0);
    let mut earliest = latest.unwrap_or(created);
    let deadline = cron
        .spec
        .starting_deadline_seconds
        .map(|s| SignedDuration::from_secs(s.max(0)));
    if let Some(window) = deadline
        && let Ok(start) = now.checked_sub(window)
        && start > earliest
    {
        earliest = start;
    }
    let next = parsed.next_after(now);
    plan.requeue_after = next.map(|n| n.duration_since(now).unsigned_abs());
    if earliest > now {
        return plan;
    }
    let mut missed = None;
    let mut count = 0usize;
    let mut cursor = earliest;
    while let Some(t) = parsed.next_after(cursor).filter(|t| *t <= now) {
        count += 1;
        if count > MAX_MISSED_RUNS {
            plan.events.push(EventRecord::warning(
                reason::TOO_MANY_MISSED_TIMES,
                "too many missed start times (> 100). Set or decrease .spec.startingDeadlineSeconds or check clock skew",
            ));
            plan.requeue_after = None;
            return plan;
        }
        missed = Some(t);
        cursor = t;
    }
    let Some(run) = missed else {
        return plan;
    };
    if let Some(window) = deadline
        && run
            .checked_add(window)
            .is_ok_and(|latest_start| latest_start < now)
    {
        plan.events.push(EventRecord::warning(
            reason::MISSED_SCHEDULE,
            format!("Missed scheduled time to start a job: {run}"),
        ));
        return plan;
    }
    let name = child_name(cron, run);
    if input.children.iter().any(|c| c.name() == name) {
        // Created already (the status may lag behind the cache).
        return plan;
    }
    let policy = cron
        .spec
        .concurrency_policy
        .clone()
        .unwrap_or(ConcurrencyPolicy::Allow);
    if policy == ConcurrencyPolicy::Forbid && !active.is_empty() {
        plan.events.push(EventRecord::normal(
            reason::JOB_ALREADY_ACTIVE,
            "Not starting job because prior execution is running and concurrency policy is Forbid",
        ));
        return plan;
    }
    if policy == ConcurrencyPolicy::Replace {
        for child in &active {
            plan.actions.push(Action::DeleteChild {
                name: child.name().to_string(),
                why: "replace",
            });
        }
    }
    plan.actions.push(Action::CreateChild {
        name,
        scheduled: run,
    });
    plan
}

/// The child's metadata: the template's labels and annotations, the run's
/// `apps.kruise.io/scheduled-at`, the cron job as controller.
fn child_metadata(
    cron: &AdvancedCronJob,
    template: Option<&ObjectMeta>,
    name: &str,
    scheduled: Timestamp,
) -> ObjectMeta {
    let mut annotations: BTreeMap<String, String> = template
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    annotations.insert(
        SCHEDULED_AT_ANNOTATION.into(),
        scheduled.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    );
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: cron.metadata.namespace.clone(),
        labels: template
            .and_then(|m| m.labels.clone())
            .or_else(|| Some(BTreeMap::new())),
        annotations: Some(annotations),
        owner_references: Some(vec![OwnerReference {
            api_version: APPS_V1BETA1.into(),
            kind: ADVANCEDCRONJOB_KIND.into(),
            name: cron.metadata.name.clone().unwrap_or_default(),
            uid: cron.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]),
        ..ObjectMeta::default()
    }
}

/// The batch/v1 Job of the run at `scheduled` (`jobTemplate`); `None` without one.
pub fn new_job(cron: &AdvancedCronJob, name: &str, scheduled: Timestamp) -> Option<Job> {
    let template = cron.spec.template.job_template.as_ref()?;
    Some(Job {
        metadata: child_metadata(cron, template.metadata.as_ref(), name, scheduled),
        spec: template.spec.clone(),
        status: None,
    })
}

/// The BroadcastJob of the run at `scheduled` (`broadcastJobTemplate`); `None` without one.
pub fn new_broadcastjob(
    cron: &AdvancedCronJob,
    name: &str,
    scheduled: Timestamp,
) -> Option<BroadcastJob> {
    let template = cron.spec.template.broadcast_job_template.as_ref()?;
    Some(BroadcastJob {
        metadata: child_metadata(cron, template.metadata.as_ref(), name, scheduled),
        spec: template.spec.clone(),
        status: None,
    })
}

/// The ImageListPullJob of the run at `scheduled` (`imageListPullJobTemplate`); `None`
/// without one.
pub fn new_image_list_pull_job(
    cron: &AdvancedCronJob,
    name: &str,
    scheduled: Timestamp,
) -> Option<ImageListPullJob> {
    let template = cron.spec.template.image_list_pull_job_template.as_ref()?;
    let metadata: Option<ObjectMeta> = template
        .get("metadata")
        .and_then(|m| serde_json::from_value(m.clone()).ok());
    let fields = template
        .get("spec")
        .and_then(serde_json::Value::as_object)
        .cloned()
        .unwrap_or_default();
    Some(ImageListPullJob {
        metadata: child_metadata(cron, metadata.as_ref(), name, scheduled),
        spec: ImageListPullJobSpec { fields },
        status: None,
    })
}

/// An ImageListPullJob as a child: finished once it has a completion time, succeeded when
/// every pull did (OpenKruise's rule).
pub fn image_list_pull_job_child(job: &ImageListPullJob) -> Child {
    let status = job.status.as_ref();
    let outcome = match status {
        Some(s) if s.completion_time.is_some() && s.succeeded == s.desired => Outcome::Succeeded,
        Some(s) if s.completion_time.is_some() => Outcome::Failed,
        _ => Outcome::Active,
    };
    Child {
        reference: reference(APPS_V1BETA1, "ImageListPullJob", &job.metadata),
        outcome,
        scheduled_at: scheduled_at(&job.metadata),
        start_time: status.and_then(|s| s.start_time.as_ref()).map(|t| t.0),
    }
}

/// A batch/v1 Job as a child: finished by its True `Complete` or `Failed` condition.
pub fn job_child(job: &Job) -> Child {
    let status = job.status.as_ref();
    let finished = |type_: &str| {
        status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
    };
    let outcome = if finished("Complete") {
        Outcome::Succeeded
    } else if finished("Failed") {
        Outcome::Failed
    } else {
        Outcome::Active
    };
    Child {
        reference: reference("batch/v1", "Job", &job.metadata),
        outcome,
        scheduled_at: scheduled_at(&job.metadata),
        start_time: status.and_then(|s| s.start_time.as_ref()).map(|t| t.0),
    }
}

/// A BroadcastJob as a child: finished by its True `Complete` or `Failed` condition.
pub fn broadcastjob_child(job: &BroadcastJob) -> Child {
    let status = job.status.as_ref();
    let outcome = match status {
        Some(s) if s.condition(crate::api::condition::COMPLETE).is_some() => Outcome::Succeeded,
        Some(s) if s.condition(crate::api::condition::FAILED).is_some() => Outcome::Failed,
        _ => Outcome::Active,
    };
    Child {
        reference: reference(APPS_V1BETA1, crate::api::BROADCASTJOB_KIND, &job.metadata),
        outcome,
        scheduled_at: scheduled_at(&job.metadata),
        start_time: status.and_then(|s| s.start_time.as_ref()).map(|t| t.0),
    }
}

fn reference(api_version: &str, kind: &str, meta: &ObjectMeta) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.into()),
        kind: Some(kind.into()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        // No resourceVersion: the status would change, and be written, on every child update.
        ..ObjectReference::default()
    }
}

/// The `apps.kruise.io/scheduled-at` annotation (RFC 3339); `None` when absent or unreadable.
fn scheduled_at(meta: &ObjectMeta) -> Option<Timestamp> {
    meta.annotations
        .as_ref()?
        .get(SCHEDULED_AT_ANNOTATION)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests;
