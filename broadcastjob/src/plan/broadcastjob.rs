//! The BroadcastJob planner: (job, its pods, the nodes, now) -> pods to create and delete,
//! status, events, when to look again (reference §4.d). Pure: time is an input.
//!
//! Differences from OpenKruise, each deliberate:
//! * the job completes when every desired node has a finished pod **before** the deadline
//!   is looked at, so a job whose pods all finished is never failed by its deadline
//!   afterwards (K#580, K#1704); a failed pod under `FailFast` still fails it first;
//! * only running pods that no longer fit their node are deleted (OpenKruise deletes
//!   finished ones too, losing their result), and deleted pods are not counted as failed;
//! * the `Pause` failure policy keeps the job `paused` while a failed pod exists, with one
//!   `Paused` event when it pauses (OpenKruise flips between running and paused, an event
//!   each time).

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kruise_core::api::value_from_int_or_percent;
use kruise_core::api::version::APPS_V1BETA1;
use kruise_core::pods::view::pinned_node;

use super::EventRecord;
use super::fit::fits;
use crate::api::defaults::UNLIMITED_PARALLELISM;
use crate::api::v1beta1::BroadcastJob;
use crate::api::{
    BROADCASTJOB_KIND, BROADCASTJOB_NAME_LABEL, BROADCASTJOB_UID_LABEL, BroadcastJobPhase,
    BroadcastJobStatus, FailurePolicyType, JobCondition, condition,
};

/// Event reasons, as OpenKruise records them.
pub mod reason {
    /// The job resumed after a pause.
    pub const CONTINUE: &str = "Continue";
    /// A failed pod paused the job (`Pause` failure policy).
    pub const PAUSED: &str = "Paused";
    /// Every desired node has a finished pod.
    pub const JOB_COMPLETE: &str = "JobComplete";
    /// More pods run than `parallelism` allows.
    pub const TOO_MANY_ACTIVE_PODS: &str = "TooManyActivePods";
    /// Two pods of the job are on one node.
    pub const DUPLICATE_POD: &str = "DuplicatePodCreatedOnSameNode";
    /// A failed pod failed the job (`FailFast`).
    pub const FAILED_POD: &str = "failed pod is found";
    /// `activeDeadlineSeconds` passed.
    pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
    /// A pod was deleted.
    pub const SUCCESSFUL_DELETE: &str = "SuccessfulDelete";
}

/// How a new pod is bound to its node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PodBinding {
    /// Required node affinity `metadata.name In [node]`, placed by the scheduler (OpenKruise's
    /// default, `--assign-bcj-pods-by-scheduler=true`).
    #[default]
    Scheduler,
    /// `spec.nodeName` set by the controller (`--assign-bcj-pods-by-scheduler=false`).
    NodeName,
}

/// What the planner reads.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// The job, defaulted.
    pub job: &'a BroadcastJob,
    /// Its pods (labelled with its uid and controlled by it).
    pub pods: &'a [Pod],
    /// Every node.
    pub nodes: &'a [Node],
    /// The time.
    pub now: Timestamp,
    /// How new pods are bound to their nodes.
    pub binding: PodBinding,
}

/// A write the shell carries out.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create this pod (bound to `node`).
    CreatePod {
        /// The node the pod is for (the scale expectation's key).
        node: String,
        /// The pod.
        pod: Box<Pod>,
    },
    /// Delete this pod.
    DeletePod {
        /// Its name.
        name: String,
        /// The node it is on (the scale expectation's key).
        node: String,
    },
    /// Delete the job itself (its TTL after finishing passed).
    DeleteJob,
}

/// The planner's answer: the kit's plan of BroadcastJob actions and status.
pub type Plan = kruise_core::plan::Plan<Action, BroadcastJobStatus>;

/// The node a pod is bound to: its `nodeName`, else the one node its required affinity names
/// (`metadata.name In [node]`), so a pod the scheduler has not bound yet counts for its
/// node and no second pod is made for it (K#584).
pub fn assigned_node(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(name) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        return Some(name.to_string());
    }
    pinned_node(spec.affinity.as_ref()?).map(str::to_string)
}

/// How a pod counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodState {
    /// Running or about to.
    Active,
    /// Phase Succeeded.
    Succeeded,
    /// Phase Failed, or an `OnFailure` pod restarted more than `restartLimit` times.
    Failed,
    /// Being deleted, not finished.
    Terminating,
}

/// OpenKruise's `filterPods` for one pod.
pub fn pod_state(pod: &Pod, restart_limit: i32) -> PodState {
    let status = pod.status.as_ref();
    match status.and_then(|s| s.phase.as_deref()) {
        Some("Succeeded") => return PodState::Succeeded,
        Some("Failed") => return PodState::Failed,
        _ => {}
    }
    if pod.metadata.deletion_timestamp.is_some() {
        return PodState::Terminating;
    }
    let on_failure =
        pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) == Some("OnFailure");
    if on_failure {
        let restarts: i32 = status
            .into_iter()
            .flat_map(|s| {
                s.init_container_statuses
                    .iter()
                    .flatten()
                    .chain(s.container_statuses.iter().flatten())
            })
            .map(|c| c.restart_count)
            .sum();
        if restarts > restart_limit {
            return PodState::Failed;
        }
    }
    PodState::Active
}

/// Whether a job is finished: a True `Complete` or `Failed` condition (a `Never` job never is).
pub fn is_finished(job: &BroadcastJob) -> bool {
    !job.spec.completion_policy.is_never()
        && job.status.as_ref().is_some_and(|s| {
            s.condition(condition::COMPLETE).is_some() || s.condition(condition::FAILED).is_some()
        })
}

/// The pod the job runs on `node`: the template with the job's two labels, controlled by
/// the job, bound to the node through required node affinity (`metadata.name In [node]`,
/// added to every term of the template's own) for the scheduler to place, or by
/// `spec.nodeName`.
pub fn new_pod(job: &BroadcastJob, node: &str, binding: PodBinding) -> Pod {
    let template = &job.spec.template;
    let name = job.metadata.name.clone().unwrap_or_default();
    let mut metadata: ObjectMeta = template.metadata.clone().unwrap_or_default();
    let labels = metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(BROADCASTJOB_NAME_LABEL.into(), name.clone());
    labels.insert(
        BROADCASTJOB_UID_LABEL.into(),
        job.metadata.uid.clone().unwrap_or_default(),
    );
    metadata.name = None;
    metadata.generate_name = Some(format!("{name}-"));
    metadata.namespace = job.metadata.namespace.clone();
    metadata.owner_references = Some(vec![OwnerReference {
        api_version: APPS_V1BETA1.into(),
        kind: BROADCASTJOB_KIND.into(),
        name,
        uid: job.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    let mut spec = template.spec.clone().unwrap_or_default();
    if binding == PodBinding::NodeName {
        spec.node_name = Some(node.to_string());
        return Pod {
            metadata,
            spec: Some(spec),
            status: None,
        };
    }
    spec.node_name = None;
    let field = NodeSelectorRequirement {
        key: "metadata.name".into(),
        operator: "In".into(),
        values: Some(vec![node.to_string()]),
    };
    let affinity = spec.affinity.get_or_insert_with(Affinity::default);
    let node_affinity = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    let required = node_affinity
        .required_during_scheduling_ignored_during_execution
        .get_or_insert_with(NodeSelector::default);
    if required.node_selector_terms.is_empty() {
        required
            .node_selector_terms
            .push(NodeSelectorTerm::default());
    }
    for term in &mut required.node_selector_terms {
        term.match_fields
            .get_or_insert_with(Vec::new)
            .push(field.clone());
    }
    Pod {
        metadata,
        spec: Some(spec),
        status: None,
    }
}

/// Plans one reconcile of a BroadcastJob.
pub fn plan(input: &Input) -> Plan {
    let job = input.job;
    let now = input.now;
    let mut plan = Plan {
        status: job.status.clone().unwrap_or_default(),
        ..Plan::default()
    };
    let never = job.spec.completion_policy.is_never();

    // A finished job only waits for its TTL.
    if is_finished(job) {
        if let Some(ttl) = job.spec.completion_policy.ttl_seconds_after_finished {
            let finished = plan.status.completion_time.as_ref().map_or(now, |t| t.0);
            let remaining = finished
                .checked_add(SignedDuration::from_secs(i64::from(ttl)))
                .map_or(SignedDuration::ZERO, |at| at.duration_since(now));
            if remaining <= SignedDuration::ZERO {
                plan.actions.push(Action::DeleteJob);
            } else {
                plan.requeue_after = Some(remaining.unsigned_abs());
            }
        }
        return plan;
    }

    let status = &mut plan.status;
    let start = status.start_time.get_or_insert(Time(now)).0;
    // A job not finished is not `completed` (a Never job that once was Always).
    if status.phase.is_empty() || status.phase == BroadcastJobPhase::Completed.as_str() {
        status.phase = BroadcastJobPhase::Running.as_str().into();
    }
    let deadline = (!never)
        .then_some(job.spec.completion_policy.active_deadline_seconds)
        .flatten()
        .and_then(|secs| start.checked_add(SignedDuration::from_secs(secs)).ok());
    if let Some(deadline) = deadline {
        let left = deadline.duration_since(now);
        plan.requeue_after = Some(left.max(SignedDuration::ZERO).unsigned_abs());
    }

    // Pods by node, counted.
    let restart_limit = job.spec.failure_policy.restart_limit;
    let mut by_node: BTreeMap<String, &Pod> = BTreeMap::new();
    let (mut active, mut succeeded, mut failed) = (0i32, 0i32, 0i32);
    let mut active_pods: Vec<(&Pod, String)> = Vec::new();
    for pod in input.pods {
        let node = assigned_node(pod).unwrap_or_default();
        match pod_state(pod, restart_limit) {
            PodState::Active => {
                active += 1;
                active_pods.push((pod, node.clone()));
            }
            PodState::Succeeded => succeeded += 1,
            PodState::Failed => failed += 1,
            PodState::Terminating => {}
        }
        match by_node.entry(node) {
            std::collections::btree_map::Entry::Occupied(taken) => {
                plan.events.push(EventRecord::warning(
                    reason::DUPLICATE_POD,
                    format!(
                        "Duplicated pod {} found on same node {}",
                        pod.metadata.name.as_deref().unwrap_or(""),
                        taken.key()
                    ),
                ));
            }
            std::collections::btree_map::Entry::Vacant(free) => {
                free.insert(pod);
            }
        }
    }

    // Nodes: desired (the pod fits), without a pod yet, with a pod that no longer fits.
    let template_spec = job.spec.template.spec.clone().unwrap_or_default();
    let mut desired = 0i32;
    let mut complete = true;
    let mut rest: Vec<&str> = Vec::new();
    let mut misfits: Vec<(&Pod, String)> = Vec::new();
    for node in input.nodes {
        let name = node.metadata.name.as_deref().unwrap_or("");
        match by_node.get(name) {
            Some(pod) => {
                let state = pod_state(pod, restart_limit);
                let spec = pod.spec.clone().unwrap_or_default();
                if state == PodState::Active && fits(&spec, node).is_err() {
                    misfits.push((pod, name.to_string()));
                    continue;
                }
                desired += 1;
                complete &= state != PodState::Active;
            }
            None => {
                let mut mock = template_spec.clone();
                mock.node_name = None;
                if fits(&mock, node).is_ok() {
                    desired += 1;
                    complete = false;
                    rest.push(name);
                }
            }
        }
    }
    status.active = active;
    status.succeeded = succeeded;
    status.failed = failed;
    status.desired = desired;

    let phase = status.phase.clone();
    if phase == BroadcastJobPhase::Failed.as_str() {
        return plan;
    }
    let policy = job.spec.failure_policy.policy();
    let pausing = failed > 0 && policy == FailurePolicyType::Pause;
    if job.spec.paused || pausing {
        if phase != BroadcastJobPhase::Paused.as_str() && pausing && !job.spec.paused {
            plan.events.push(EventRecord::warning(
                reason::PAUSED,
                "job is paused, due to failed pod",
            ));
        }
        plan.status.phase = BroadcastJobPhase::Paused.as_str().into();
        return plan;
    }
    if phase == BroadcastJobPhase::Paused.as_str() {
        plan.status.phase = BroadcastJobPhase::Running.as_str().into();
        plan.events.push(EventRecord::normal(
            reason::CONTINUE,
            "continue to process job",
        ));
    }

    // Pods that no longer fit their node go, whatever happens next.
    for (pod, node) in &misfits {
        plan.actions.push(Action::DeletePod {
            name: pod.metadata.name.clone().unwrap_or_default(),
            node: node.clone(),
        });
    }
    plan.status.active = active - i32::try_from(misfits.len()).unwrap_or(i32::MAX);

    // Finished? A failed pod under FailFast first (as OpenKruise), then completion, and
    // the deadline only for a job not complete (K#580, K#1704).
    let namespace = job.metadata.namespace.as_deref().unwrap_or("");
    let job_name = job.metadata.name.as_deref().unwrap_or("");
    let fail_fast = (failed > 0 && policy == FailurePolicyType::FailFast).then(|| {
        (
            reason::FAILED_POD,
            "failure policy is FailurePolicyTypeFailFast and failed pod is found".to_string(),
        )
    });
    if fail_fast.is_none() && !never && complete && desired > 0 {
        let message = format!("Job completed, {succeeded} pods succeeded, {failed} pods failed");
        finish(&mut plan, job, condition::COMPLETE, "", &message, now);
        plan.status.phase = BroadcastJobPhase::Completed.as_str().into();
        plan.events.push(EventRecord::normal(
            reason::JOB_COMPLETE,
            format!("Job {namespace}/{job_name} is completed, {succeeded} pods succeeded, {failed} pods failed"),
        ));
        return plan;
    }
    let failure = fail_fast.or_else(|| {
        deadline.filter(|d| *d <= now).map(|_| {
            (
                reason::DEADLINE_EXCEEDED,
                format!("Job {namespace}/{job_name} was active longer than specified deadline"),
            )
        })
    });
    if let Some((why, message)) = failure {
        let misfit = |pod: &Pod| misfits.iter().any(|(m, _)| std::ptr::eq(*m, pod));
        for (pod, node) in active_pods.iter().filter(|(pod, _)| !misfit(pod)) {
            plan.actions.push(Action::DeletePod {
                name: pod.metadata.name.clone().unwrap_or_default(),
                node: node.clone(),
            });
        }
        plan.status.active = 0;
        finish(&mut plan, job, condition::FAILED, why, &message, now);
        plan.status.phase = BroadcastJobPhase::Failed.as_str().into();
        plan.events.push(EventRecord::warning(
            why,
            format!("{message}: {succeeded} pods succeeded, {failed} pods failed"),
        ));
        return plan;
    }

    // Running: new pods in up to parallelism.
    // Pods being deleted still run until they are gone: they hold their place.
    let still_active = active;
    let parallelism = job
        .spec
        .parallelism
        .as_ref()
        .map_or(Ok(UNLIMITED_PARALLELISM), |p| {
            value_from_int_or_percent(p, desired, true)
        })
        .unwrap_or(UNLIMITED_PARALLELISM)
        .max(0);
    if still_active > parallelism {
        plan.events.push(EventRecord::warning(
            reason::TOO_MANY_ACTIVE_PODS,
            "Number of active pods exceed parallelism limit",
        ));
    }
    let room = usize::try_from(parallelism.saturating_sub(still_active)).unwrap_or(0);
    if job.metadata.deletion_timestamp.is_none() {
        for node in rest.into_iter().take(room) {
            plan.actions.push(Action::CreatePod {
                node: node.to_string(),
                pod: Box::new(new_pod(job, node, input.binding)),
            });
        }
    }
    plan
}

/// Appends the final condition and sets the completion time; with a TTL, looks again when
/// it passes.
fn finish(
    plan: &mut Plan,
    job: &BroadcastJob,
    type_: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) {
    plan.status.conditions.push(JobCondition {
        type_: type_.into(),
        status: "True".into(),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
        reason: reason.into(),
        message: message.into(),
    });
    plan.status.completion_time = Some(Time(now));
    plan.requeue_after = job
        .spec
        .completion_policy
        .ttl_seconds_after_finished
        .map(|ttl| std::time::Duration::from_secs(ttl.max(0).unsigned_abs().into()));
}

#[cfg(test)]
mod tests;
