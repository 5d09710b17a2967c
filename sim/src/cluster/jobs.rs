//! A Job controller (batch/v1) in the spirit of kube-controller-manager's, enough for
//! the Jobs AdvancedCronJob and BroadcastJob tests create: NonIndexed Jobs with
//! `parallelism`, `completions` (unset: a work-queue Job done when one pod succeeds),
//! `backoffLimit`, `activeDeadlineSeconds` and `suspend`; pods labelled and owned as
//! upstream makes them; status counts, `startTime`/`completionTime`, the terminal
//! conditions (SuccessCriteriaMet/FailureTarget first, then Complete/Failed, as 1.33
//! does) and the controller's events. Pods are counted from the store (no tracking
//! finalizer), so a pod deleted while running is replaced but not counted as failed.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::workloads::{
    Key, controller_manager, create_pods, delete_pods, pod_from_template, run_controller, typed,
    write_status,
};
use super::{EventSource, controller_of, record_event};
use crate::SimShared;
use crate::meta;
use crate::registry::GroupResource;
use crate::store::StoreEvent;

const SOURCE: EventSource<'static> = EventSource {
    component: "job-controller",
    host: None,
};

/// What the plan needs from a Job's spec and status.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    pub completions: Option<i64>,
    pub parallelism: i64,
    pub backoff_limit: i64,
    pub suspend: bool,
    pub active_deadline_seconds: Option<i64>,
    pub start_time: Option<Timestamp>,
}

/// The Job's pods as the controller counts them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobPods {
    /// Running or pending, not terminating (names, oldest first).
    pub active: Vec<String>,
    pub ready: i64,
    pub terminating: i64,
    pub succeeded: i64,
    pub failed: i64,
}

/// What to do next.
#[derive(Debug, Clone, PartialEq)]
pub enum JobStep {
    /// Keep `create` more pods running / delete the surplus (suspend, parallelism down).
    Run {
        create: i64,
        delete: Vec<String>,
    },
    Complete,
    /// Failed for `reason`; the active pods are deleted.
    Fail {
        reason: &'static str,
        message: &'static str,
        delete: Vec<String>,
    },
}

/// The Job controller's decision for one sync.
pub fn plan(job: &JobSpec, pods: &JobPods, now: Timestamp) -> JobStep {
    if pods.failed > job.backoff_limit {
        return JobStep::Fail {
            reason: "BackoffLimitExceeded",
            message: "Job has reached the specified backoff limit",
            delete: pods.active.clone(),
        };
    }
    if let (Some(limit), Some(start)) = (job.active_deadline_seconds, job.start_time)
        && !job.suspend
        && now.duration_since(start).as_secs() >= limit
    {
        return JobStep::Fail {
            reason: "DeadlineExceeded",
            message: "Job was active longer than specified deadline",
            delete: pods.active.clone(),
        };
    }
    let active = pods.active.len() as i64;
    let done = match job.completions {
        Some(n) => pods.succeeded >= n,
        // A work-queue Job is done once a pod succeeded and the others finished.
        None => pods.succeeded > 0 && active == 0,
    };
    if done {
        return JobStep::Complete;
    }
    let wanted = if job.suspend {
        0
    } else {
        match job.completions {
            Some(n) => job.parallelism.min(n - pods.succeeded),
            // Once one pod of a work-queue Job succeeded, no new pods start.
            None if pods.succeeded > 0 => active,
            None => job.parallelism,
        }
        .max(0)
    };
    if active > wanted {
        // Newest first, as the controller prefers deleting pods that did least work.
        let surplus = (active - wanted) as usize;
        let delete = pods.active.iter().rev().take(surplus).cloned().collect();
        return JobStep::Run { create: 0, delete };
    }
    JobStep::Run {
        create: wanted - active,
        delete: Vec::new(),
    }
}

fn int(v: &Value, ptr: &str) -> Option<i64> {
    v.pointer(ptr).and_then(Value::as_i64)
}

fn spec_of(job: &Value) -> JobSpec {
    JobSpec {
        completions: int(job, "/spec/completions"),
        parallelism: int(job, "/spec/parallelism").unwrap_or(1),
        backoff_limit: int(job, "/spec/backoffLimit").unwrap_or(6),
        suspend: job
            .pointer("/spec/suspend")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        active_deadline_seconds: int(job, "/spec/activeDeadlineSeconds"),
        start_time: job
            .pointer("/status/startTime")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok()),
    }
}

fn finished(job: &Value) -> bool {
    meta::condition_is(job, "Complete", "True") || meta::condition_is(job, "Failed", "True")
}

fn count_pods(sh: &SimShared, job: &Value) -> JobPods {
    let mut owned = super::owned_pods(
        sh,
        meta::meta_str(job, "namespace"),
        meta::meta_str(job, "uid"),
    );
    owned.sort_by(|a, b| {
        meta::meta_str(a, "creationTimestamp").cmp(meta::meta_str(b, "creationTimestamp"))
    });
    let mut out = JobPods::default();
    for p in owned {
        match p.pointer("/status/phase").and_then(Value::as_str) {
            Some("Succeeded") => out.succeeded += 1,
            Some("Failed") => out.failed += 1,
            _ if meta::is_terminating(&p) => out.terminating += 1,
            _ => {
                out.ready += i64::from(meta::condition_is(&p, "Ready", "True"));
                out.active.push(meta::name_of(&p).to_string());
            }
        }
    }
    // Counts only grow: a finished pod deleted later still counts.
    out.succeeded = out
        .succeeded
        .max(int(job, "/status/succeeded").unwrap_or(0));
    out.failed = out.failed.max(int(job, "/status/failed").unwrap_or(0));
    out
}

fn condition(ty: &str, reason: &str, message: &str, now: &str) -> Value {
    json!({
        "type": ty, "status": "True", "reason": reason, "message": message,
        "lastProbeTime": now, "lastTransitionTime": now,
    })
}

/// The Job's status after this sync.
fn next_status(job: &Value, pods: &JobPods, step: &JobStep, created: i64) -> Value {
    let now = meta::now_rfc3339();
    let mut status = job.get("status").cloned().unwrap_or_else(|| json!({}));
    let spec = spec_of(job);
    let Some(s) = status.as_object_mut() else {
        return status;
    };
    let active = match step {
        JobStep::Run { delete, .. } => pods.active.len() as i64 - delete.len() as i64 + created,
        JobStep::Complete => pods.active.len() as i64,
        JobStep::Fail { .. } => 0,
    };
    if !spec.suspend && !s.contains_key("startTime") {
        s.insert("startTime".into(), json!(now));
    }
    let mut conds: Vec<Value> = s
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut add = |c: Value| {
        if !conds.iter().any(|x| x.get("type") == c.get("type")) {
            conds.push(c);
        }
    };
    match step {
        JobStep::Complete => {
            let msg = "Reached expected number of succeeded pods";
            add(condition(
                "SuccessCriteriaMet",
                "CompletionsReached",
                msg,
                &now,
            ));
            add(condition("Complete", "CompletionsReached", msg, &now));
            s.entry("completionTime").or_insert_with(|| json!(now));
        }
        JobStep::Fail {
            reason, message, ..
        } => {
            add(condition("FailureTarget", reason, message, &now));
            add(condition("Failed", reason, message, &now));
        }
        JobStep::Run { .. } if spec.suspend => {
            add(
                json!({"type": "Suspended", "status": "True", "reason": "JobSuspended",
                "message": "Job suspended", "lastProbeTime": now, "lastTransitionTime": now}),
            );
        }
        JobStep::Run { .. } => {
            conds.retain(|c| c.get("type").and_then(Value::as_str) != Some("Suspended"))
        }
    }
    if !conds.is_empty() {
        s.insert("conditions".into(), Value::Array(conds));
    }
    // Zero counts are omitted, as upstream's omitempty does.
    for (k, v) in [
        ("active", active),
        ("succeeded", pods.succeeded),
        ("failed", pods.failed),
    ] {
        if v > 0 {
            s.insert(k.into(), json!(v));
        } else {
            s.remove(k);
        }
    }
    s.insert("ready".into(), json!(pods.ready));
    s.insert("terminating".into(), json!(pods.terminating));
    s.insert("uncountedTerminatedPods".into(), json!({}));
    status
}

async fn sync(sh: &Arc<SimShared>, ns: &str, name: &str) -> Option<Duration> {
    let gr = GroupResource::new("batch", "jobs");
    let job = sh.store.get(&gr, ns, name)?;
    if meta::is_terminating(&job) || finished(&job) {
        return None;
    }
    let pods = count_pods(sh, &job);
    let step = plan(&spec_of(&job), &pods, Timestamp::now());
    let involved = typed(&job, "batch/v1", "Job");
    let opts = controller_manager("job-controller");
    let mut created = 0;
    let delete = match &step {
        JobStep::Run { create, delete } => {
            let pod = || pod_from_template(&job, "batch/v1", "Job");
            let count = usize::try_from(*create).unwrap_or(0);
            created = create_pods(sh, SOURCE, &involved, count, pod, &opts)
                .await
                .0 as i64;
            delete.clone()
        }
        JobStep::Complete => Vec::new(),
        JobStep::Fail { delete, .. } => delete.clone(),
    };
    delete_pods(sh, SOURCE, &involved, &delete, &opts).await;
    let status = next_status(&job, &pods, &step, created);
    if write_status(sh, ("batch", "jobs"), &job, &status, &opts).await {
        match &step {
            JobStep::Complete => {
                record_event(
                    sh,
                    SOURCE,
                    &involved,
                    "Normal",
                    "Completed",
                    "Job completed",
                )
                .await
            }
            JobStep::Fail {
                reason, message, ..
            } => record_event(sh, SOURCE, &involved, "Warning", reason, message).await,
            JobStep::Run { .. } => {}
        }
    }
    // Come back for the deadline.
    let spec = spec_of(&job);
    spec.active_deadline_seconds.map(|_| Duration::from_secs(1))
}

/// Runs the Job controller until the store's change stream closes.
pub(crate) async fn run(sh: Arc<SimShared>) {
    let pods = GroupResource::new("", "pods");
    let owner_of = move |_: &SimShared, ev: &StoreEvent| {
        (ev.gr == pods)
            .then(|| controller_of(&ev.object).filter(|r| r.kind == "Job"))
            .flatten()
            .map(|job| (ev.namespace.clone(), job.name.to_string()))
    };
    let sync = |sh: Arc<SimShared>, (ns, name): Key| async move { sync(&sh, &ns, &name).await };
    run_controller(sh, GroupResource::new("batch", "jobs"), owner_of, sync).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(completions: Option<i64>, parallelism: i64) -> JobSpec {
        JobSpec {
            completions,
            parallelism,
            backoff_limit: 6,
            suspend: false,
            active_deadline_seconds: None,
            start_time: None,
        }
    }

    fn pods(active: usize, succeeded: i64, failed: i64) -> JobPods {
        JobPods {
            active: (0..active).map(|i| format!("p{i}")).collect(),
            succeeded,
            failed,
            ..Default::default()
        }
    }

    fn run(create: i64) -> JobStep {
        JobStep::Run {
            create,
            delete: Vec::new(),
        }
    }

    #[test]
    fn parallelism_and_completions() {
        let now = Timestamp::now();
        assert_eq!(plan(&spec(Some(3), 2), &pods(0, 0, 0), now), run(2));
        assert_eq!(plan(&spec(Some(3), 2), &pods(2, 0, 0), now), run(0));
        // Only one more completion needed: one pod, not two.
        assert_eq!(plan(&spec(Some(3), 2), &pods(1, 2, 0), now), run(0));
        assert_eq!(plan(&spec(Some(3), 2), &pods(0, 2, 0), now), run(1));
        assert_eq!(
            plan(&spec(Some(3), 2), &pods(0, 3, 0), now),
            JobStep::Complete
        );
        // A failed pod is replaced.
        assert_eq!(plan(&spec(Some(1), 1), &pods(0, 0, 1), now), run(1));
    }

    #[test]
    fn work_queue_jobs() {
        let now = Timestamp::now();
        assert_eq!(plan(&spec(None, 3), &pods(0, 0, 0), now), run(3));
        // One succeeded: no new pods, the others finish.
        assert_eq!(plan(&spec(None, 3), &pods(2, 1, 0), now), run(0));
        assert_eq!(plan(&spec(None, 3), &pods(0, 1, 0), now), JobStep::Complete);
    }

    #[test]
    fn backoff_deadline_and_suspend() {
        let now = Timestamp::now();
        let mut s = spec(Some(5), 2);
        s.backoff_limit = 1;
        assert_eq!(plan(&s, &pods(2, 0, 1), now), run(0));
        assert!(matches!(
            plan(&s, &pods(2, 0, 2), now),
            JobStep::Fail { reason: "BackoffLimitExceeded", ref delete, .. } if delete.len() == 2
        ));
        let mut d = spec(Some(1), 1);
        d.active_deadline_seconds = Some(10);
        d.start_time = now.checked_sub(jiff::SignedDuration::from_secs(11)).ok();
        assert!(matches!(
            plan(&d, &pods(1, 0, 0), now),
            JobStep::Fail {
                reason: "DeadlineExceeded",
                ..
            }
        ));
        let mut p = spec(Some(4), 2);
        p.suspend = true;
        assert_eq!(
            plan(&p, &pods(2, 0, 0), now),
            JobStep::Run {
                create: 0,
                delete: vec!["p1".into(), "p0".into()]
            }
        );
    }
}
