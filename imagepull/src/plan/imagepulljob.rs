//! The ImagePullJob planner (OpenKruise's `imagepulljob_controller.go`, reference §7.d):
//!
//! * [`target_nodes`]: the NodeImages a job pulls on — by `selector.names`, by labels, by
//!   the nodes of `podSelector`'s pods, or all;
//! * [`plan`]: the job's status (`desired`, `active`, `succeeded`, `failed`, `failedNodes`,
//!   `message` as OpenKruise writes them), completion (all answered, or the deadline), and
//!   the NodeImage writes that hand the tag to at most `parallelism − active` more nodes;
//! * [`finished`]: what a completed job waits for (its TTL) before it is deleted.
//!
//! A NodeImage is written only when this job's tag is missing there (or lacks one of the
//! job's secrets), so reconciling an unchanged job writes nothing (K#2381).

use std::collections::BTreeSet;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_core::pods::selector::selector_matches;

use super::left;
use crate::api::image::ImageRef;
use crate::api::v1beta1::{ImagePullJob, NodeImage};
use crate::api::{
    CompletionPolicyType, ImagePullJobStatus, ImagePullPhase, ImageSpec, ImageTagPullPolicy,
    ImageTagSpec, ReferenceObject,
};

/// `parallelism` when unset.
pub const DEFAULT_PARALLELISM: i32 = 1;
/// A `Never` job's tag lives this long after it finished (before jitter): 24 h.
pub const NEVER_TTL_SECONDS: i32 = 24 * 3600;
/// A `Never` job's tag has at least this deadline.
pub const NEVER_MIN_DEADLINE_SECONDS: i64 = 1800;
/// `--default-ttlseconds-for-always-nodeimage`'s default: added to an `Always` job's tag TTL.
pub const DEFAULT_TTL_FOR_ALWAYS_SECONDS: i32 = 300;
/// The soonest an `Always` job with a deadline is looked at again.
pub const MIN_REQUEUE: Duration = Duration::from_secs(1);

/// The tag lifetimes' settings and their jitter (drawn by the shell: the planner is pure).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TagSettings {
    /// `--default-ttlseconds-for-always-nodeimage`.
    pub default_ttl_for_always: i32,
    /// Added to an `Always` job's tag TTL: OpenKruise draws 0..300.
    pub always_jitter_seconds: i32,
    /// Added to a `Never` job's 24 h tag TTL: OpenKruise draws −600..600.
    pub never_jitter_seconds: i32,
}

impl Default for TagSettings {
    fn default() -> Self {
        Self {
            default_ttl_for_always: DEFAULT_TTL_FOR_ALWAYS_SECONDS,
            always_jitter_seconds: 0,
            never_jitter_seconds: 0,
        }
    }
}

/// Why a job cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// `spec.image` does not parse (the webhook refuses it; an object stored before is reported).
    #[error("invalid image {image}: {reason}")]
    InvalidImage {
        /// The image.
        image: String,
        /// Why.
        reason: String,
    },
}

/// The NodeImages (by name) a job targets, in the order they get the tag.
///
/// * `podSelector`: the nodes of the job namespace's pods that match, are scheduled, not
///   terminating and not finished — each node once, in the pods' order; a node without a
///   NodeImage is skipped;
/// * `selector.names`: those that have a NodeImage, in the given order;
/// * `selector` labels: every NodeImage whose labels (the node's, mirrored) match, by name;
/// * neither: every NodeImage, by name.
///
/// A selector that does not evaluate selects nothing (validation refuses it).
pub fn target_nodes(job: &ImagePullJob, node_images: &[NodeImage], pods: &[Pod]) -> Vec<String> {
    let known: BTreeSet<&str> = node_images
        .iter()
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    let mut sorted: Vec<&NodeImage> = node_images.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let template = &job.spec.template;
    if let Some(pod_selector) = &template.pod_selector {
        let namespace = job.metadata.namespace.as_deref().unwrap_or_default();
        let mut seen = BTreeSet::new();
        return pods
            .iter()
            .filter(|pod| pod.metadata.namespace.as_deref().unwrap_or_default() == namespace)
            .filter(|pod| pod.metadata.deletion_timestamp.is_none())
            .filter(|pod| {
                let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
                !matches!(phase, Some("Succeeded" | "Failed"))
            })
            .filter(|pod| {
                let labels = pod.metadata.labels.clone().unwrap_or_default();
                selector_matches(&pod_selector.label_selector, &labels).unwrap_or(false)
            })
            .filter_map(|pod| pod.spec.as_ref().and_then(|s| s.node_name.clone()))
            .filter(|node| known.contains(node.as_str()) && seen.insert(node.clone()))
            .collect();
    }
    match &template.selector {
        Some(selector) if selector.names.is_some() && !selector.has_labels() => selector
            .names
            .iter()
            .flatten()
            .filter(|name| known.contains(name.as_str()))
            .cloned()
            .collect(),
        Some(selector) if selector.has_labels() => sorted
            .into_iter()
            .filter(|n| {
                let labels = n.metadata.labels.clone().unwrap_or_default();
                selector_matches(&selector.label_selector, &labels).unwrap_or(false)
            })
            .filter_map(|n| n.metadata.name.clone())
            .collect(),
        _ => sorted
            .into_iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect(),
    }
}

/// What the planner reads.
#[derive(Clone, Debug)]
pub struct PlanInput<'a> {
    /// The job (not finished, not being deleted).
    pub job: &'a ImagePullJob,
    /// Its target NodeImages, in [`target_nodes`] order.
    pub node_images: Vec<&'a NodeImage>,
    /// The synced pull secrets every target NodeImage must list for the image.
    pub secrets: &'a [ReferenceObject],
    /// Hold NodeImage writes back (a synced secret is being created: pulling now would go
    /// without its credentials).
    pub hold_writes: bool,
    /// Now.
    pub now: Timestamp,
    /// Tag lifetimes and their jitter.
    pub tag_settings: TagSettings,
}

/// One NodeImage's new entry for the job's image.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeImageWrite {
    /// The NodeImage.
    pub node_image: String,
    /// Its `resourceVersion` as read (the write's precondition).
    pub resource_version: Option<String>,
    /// The image's key (`spec.images.<key>`).
    pub image: String,
    /// The image's whole new entry.
    pub spec: ImageSpec,
}

/// What the planner decided: the kit's plan whose actions are the NodeImages to hand the
/// tag (or the job's secrets) to, with the job's new status.
pub type Plan = kruise_core::plan::Plan<NodeImageWrite, ImagePullJobStatus>;

/// The job's status and its next NodeImage writes.
pub fn plan(input: &PlanInput<'_>) -> Result<Plan, PlanError> {
    let job = input.job;
    let image = ImageRef::parse(&job.spec.image).map_err(|e| PlanError::InvalidImage {
        image: job.spec.image.clone(),
        reason: e.to_string(),
    })?;
    let (name, tag) = (image.familiar_name(), image.api_tag());
    let uid = job.metadata.uid.as_deref().unwrap_or_default();
    let start = job
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map_or(input.now, |t| t.0);
    let mut status = ImagePullJobStatus {
        start_time: Some(Time(start)),
        desired: count(input.node_images.len()),
        ..Default::default()
    };
    let (mut pulling, mut succeeded, mut failed, mut not_synced) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for node_image in &input.node_images {
        let node = node_image.metadata.name.clone().unwrap_or_default();
        match answer(node_image, &name, &tag, uid, input.secrets) {
            Answer::NotSynced => not_synced.push(node),
            Answer::Pulling => pulling.push(node),
            Answer::Succeeded => succeeded.push(node),
            Answer::Failed => failed.push(node),
        }
    }
    let always = !job.spec.template.completion_policy.is_never();
    let deadline = job.spec.template.completion_policy.active_deadline_seconds;
    let answered = succeeded.len() + failed.len();
    if always
        && answered != input.node_images.len()
        && let Some(deadline) = deadline
        && left(input.now, start, deadline).is_none()
    {
        // Past the deadline: every node not answered counts failed.
        failed.extend(pulling);
        failed.extend(not_synced.iter().cloned().collect::<BTreeSet<_>>());
        failed.sort();
        status.completion_time = Some(Time(input.now));
        status.succeeded = count(succeeded.len());
        status.failed = count(failed.len());
        status.failed_nodes = failed;
        status.message = "job exceeds activeDeadlineSeconds".into();
        return Ok(Plan {
            status,
            ..Plan::default()
        });
    }
    status.active = count(pulling.len());
    status.succeeded = count(succeeded.len());
    status.failed = count(failed.len());
    failed.sort();
    status.failed_nodes = failed;
    if always && status.desired - status.succeeded - status.failed == 0 {
        status.completion_time = Some(Time(input.now));
    }
    status.message = message(&status);

    let writes = if input.hold_writes || status.completion_time.is_some() {
        Vec::new()
    } else {
        let room = usize::try_from(parallelism(job) - status.active).unwrap_or(0);
        not_synced
            .iter()
            .take(room)
            .filter_map(|node| {
                input
                    .node_images
                    .iter()
                    .find(|n| n.metadata.name.as_deref() == Some(node.as_str()))
            })
            .filter_map(|node_image| sync_tag(node_image, job, &name, &tag, input.secrets, input))
            .collect()
    };
    let requeue_after = match deadline {
        Some(deadline) if always && status.completion_time.is_none() => Some(
            left(input.now, start, deadline)
                .unwrap_or(MIN_REQUEUE)
                .max(MIN_REQUEUE),
        ),
        _ => None,
    };
    Ok(Plan {
        actions: writes,
        status,
        requeue_after,
        ..Plan::default()
    })
}

/// What a completed job does next: delete itself once its TTL after `completionTime`
/// passed, else wait that long (no TTL: nothing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finished {
    /// Delete the job now.
    Delete,
    /// Look again then.
    RequeueAfter(Duration),
    /// Keep it.
    Keep,
}

/// See [`Finished`].
pub fn finished(job: &ImagePullJob, now: Timestamp) -> Finished {
    let (Some(ttl), Some(done)) = (
        job.spec
            .template
            .completion_policy
            .ttl_seconds_after_finished,
        job.status.as_ref().and_then(|s| s.completion_time.as_ref()),
    ) else {
        return Finished::Keep;
    };
    match left(now, done.0, i64::from(ttl)) {
        Some(wait) => Finished::RequeueAfter(wait),
        None => Finished::Delete,
    }
}

/// The job's `parallelism` (unset: 1; a string is read as its integer, anything else 1).
pub fn parallelism(job: &ImagePullJob) -> i32 {
    match &job.spec.template.parallelism {
        None => DEFAULT_PARALLELISM,
        Some(IntOrString::Int(n)) => *n,
        Some(IntOrString::String(s)) => s.parse().unwrap_or(DEFAULT_PARALLELISM),
    }
}

/// OpenKruise's `formatStatusMessage`.
pub fn message(status: &ImagePullJobStatus) -> String {
    if status.completion_time.is_some() {
        return "job has completed".into();
    }
    if status.desired == 0 {
        return "job is running, no progress".into();
    }
    let progress = 100.0 * f64::from(status.succeeded + status.failed) / f64::from(status.desired);
    format!("job is running, progress {progress:.1}%")
}

/// The pull policy a job gives its tag (OpenKruise's `getImagePullPolicy`): timeout and
/// retries as the job's; `Never`: TTL 24 h (± jitter), deadline max(1800, timeout);
/// `Always`: TTL the job's TTL, else its deadline, else timeout × retries — plus the
/// default TTL and jitter — and the job's deadline.
pub fn tag_pull_policy(job: &ImagePullJob, settings: &TagSettings) -> ImageTagPullPolicy {
    let template = &job.spec.template;
    let (timeout_seconds, backoff_limit) = template
        .pull_policy
        .as_ref()
        .map_or((None, None), |p| (p.timeout_seconds, p.backoff_limit));
    let completion = &template.completion_policy;
    if completion.type_ == Some(CompletionPolicyType::Never) {
        let deadline = timeout_seconds
            .map(i64::from)
            .filter(|t| *t > NEVER_MIN_DEADLINE_SECONDS)
            .unwrap_or(NEVER_MIN_DEADLINE_SECONDS);
        return ImageTagPullPolicy {
            timeout_seconds,
            backoff_limit,
            ttl_seconds_after_finished: Some(
                NEVER_TTL_SECONDS.saturating_add(settings.never_jitter_seconds),
            ),
            active_deadline_seconds: Some(deadline),
        };
    }
    let base = completion
        .ttl_seconds_after_finished
        .or_else(|| {
            completion
                .active_deadline_seconds
                .map(|d| i32::try_from(d).unwrap_or(i32::MAX))
        })
        .unwrap_or_else(|| {
            template
                .timeout_seconds()
                .saturating_mul(template.backoff_limit())
        });
    ImageTagPullPolicy {
        timeout_seconds,
        backoff_limit,
        ttl_seconds_after_finished: Some(
            base.saturating_add(settings.default_ttl_for_always)
                .saturating_add(settings.always_jitter_seconds),
        ),
        active_deadline_seconds: completion.active_deadline_seconds,
    }
}

/// The owner reference a job puts on its tags.
pub fn owner_reference(job: &ImagePullJob) -> ObjectReference {
    ObjectReference {
        api_version: Some(kruise_core::api::version::APPS_V1BETA1.into()),
        kind: Some(crate::api::IMAGEPULLJOB_KIND.into()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        ..Default::default()
    }
}

enum Answer {
    NotSynced,
    Pulling,
    Succeeded,
    Failed,
}

/// Where one NodeImage stands for the job: the tag is there with the job among its owners
/// and every secret listed — then the agent's answer for that tag version — or not synced.
fn answer(
    node_image: &NodeImage,
    name: &str,
    tag: &str,
    uid: &str,
    secrets: &[ReferenceObject],
) -> Answer {
    let Some(spec) = node_image.spec.images.get(name) else {
        return Answer::NotSynced;
    };
    let secrets_listed = secrets.iter().all(|s| lists_secret(spec, s));
    let version = spec
        .tags
        .iter()
        .find(|t| t.tag == tag)
        .filter(|t| {
            t.owner_references
                .iter()
                .any(|o| o.uid.as_deref() == Some(uid))
        })
        .map(|t| t.version);
    let Some(version) = version.filter(|_| secrets_listed) else {
        return Answer::NotSynced;
    };
    let status = node_image
        .status
        .as_ref()
        .and_then(|s| s.image_statuses.get(name))
        .and_then(|s| s.tags.iter().find(|t| t.tag == tag))
        .filter(|t| t.version == version);
    match status.and_then(|t| t.phase.as_ref()) {
        Some(ImagePullPhase::Succeeded) => Answer::Succeeded,
        Some(ImagePullPhase::Failed) => Answer::Failed,
        _ => Answer::Pulling,
    }
}

fn lists_secret(spec: &ImageSpec, secret: &ReferenceObject) -> bool {
    spec.pull_secrets
        .iter()
        .any(|s| s.namespace == secret.namespace && s.name == secret.name)
}

/// The image's new entry on `node_image` with the job's tag: the job added to an existing
/// tag's owners (its version bumped for a new round, `createdAt` and `imagePullPolicy`
/// renewed), or a new tag (version one past the last answered); the job's secrets merged,
/// its sandbox config set, tags sorted. `None` when nothing would change.
fn sync_tag(
    node_image: &NodeImage,
    job: &ImagePullJob,
    name: &str,
    tag: &str,
    secrets: &[ReferenceObject],
    input: &PlanInput<'_>,
) -> Option<NodeImageWrite> {
    let mut spec = node_image
        .spec
        .images
        .get(name)
        .cloned()
        .unwrap_or_default();
    let before = spec.clone();
    spec.sandbox_config = job.spec.template.sandbox_config.clone();
    let owner = owner_reference(job);
    let now = Time(input.now);
    match spec.tags.iter_mut().find(|t| t.tag == tag) {
        Some(existing) if existing.owner_references.iter().any(|o| o.uid == owner.uid) => {}
        Some(existing) => {
            existing.version += 1;
            existing.owner_references.push(owner);
            existing.created_at = Some(now);
            existing.image_pull_policy = job.spec.template.image_pull_policy.clone();
        }
        None => {
            let answered = node_image
                .status
                .as_ref()
                .and_then(|s| s.image_statuses.get(name))
                .and_then(|s| s.tags.iter().find(|t| t.tag == tag))
                .map_or(-1, |t| t.version);
            spec.tags.push(ImageTagSpec {
                tag: tag.to_string(),
                created_at: Some(now),
                pull_policy: Some(tag_pull_policy(job, &input.tag_settings)),
                owner_references: vec![owner],
                version: answered + 1,
                image_pull_policy: job.spec.template.image_pull_policy.clone(),
            });
        }
    }
    for secret in secrets {
        if !lists_secret(&spec, secret) {
            spec.pull_secrets.push(secret.clone());
        }
    }
    spec.tags.sort_by(|a, b| a.tag.cmp(&b.tag));
    (spec != before).then(|| NodeImageWrite {
        node_image: node_image.metadata.name.clone().unwrap_or_default(),
        resource_version: node_image.metadata.resource_version.clone(),
        image: name.to_string(),
        spec,
    })
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests;
