//! The NodeImage planner (OpenKruise's `nodeimage_controller.go`, reference §7.e): one
//! NodeImage per Ready node (once it has been Ready for the creation delay), labels
//! mirrored from the node, deleted with the node unless labelled
//! `apps.kruise.io/fake-nodeimage`; tags pruned when they lack `createdAt`, when their
//! ImagePullJob owners are all gone (or were replaced: another uid; other owner kinds are
//! kept), or when their TTL after completion passed; non-batch pull secrets pruned when the secret is gone; images without
//! tags dropped. Status: a tag the agent has not answered ten minutes after its
//! `createdAt` is Failed ("node has not responded for a long time"), one without
//! completion ten minutes past its deadline is Failed ("pulling exceeds the
//! activeDeadlineSeconds") — each a `PullImageFailed` event — and the counters recomputed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::left;
use crate::api::v1beta1::{NodeImage, NodeImageSpec};
use crate::api::{
    FAKE_NODEIMAGE_LABEL, GROUP, IMAGEPULLJOB_KIND, ImagePullPhase, ImageTagStatus,
    NodeImageStatus, REFERENCE_MODE_BATCH,
};

/// `--nodeimage-creation-delay`'s default: a node is Ready this long before it gets a NodeImage.
pub const DEFAULT_CREATION_DELAY: Duration = Duration::from_secs(30);
/// How long the agent may take to answer a tag version.
pub const RESPONSE_TIMEOUT_SECONDS: i64 = 600;
/// The soonest a NodeImage is looked at again.
pub const MIN_REQUEUE: Duration = Duration::from_secs(3);
/// Event reason of a tag failed here.
pub const PULL_IMAGE_FAILED: &str = "PullImageFailed";
/// Message of a tag the agent never answered.
pub const NOT_RESPONDED: &str = "node has not responded for a long time";
/// Message of a tag past its deadline.
pub const DEADLINE_EXCEEDED: &str = "pulling exceeds the activeDeadlineSeconds";

/// What the planner reads of the Node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeFacts {
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Since when it is Ready (`None`: not Ready).
    pub ready_since: Option<Timestamp>,
    /// It is being deleted.
    pub deleting: bool,
}

/// What the planner reads.
#[derive(Clone, Debug)]
pub struct NodeImageInput<'a> {
    /// The node's (and its NodeImage's) name.
    pub name: &'a str,
    /// The node, if it exists.
    pub node: Option<&'a NodeFacts>,
    /// The NodeImage, if it exists.
    pub node_image: Option<&'a NodeImage>,
    /// The ImagePullJobs that exist: `(namespace, name)` -> uid.
    pub jobs: &'a BTreeMap<(String, String), String>,
    /// The secrets that exist, `(namespace, name)` (for pull secrets not in batch mode).
    pub secrets: &'a BTreeSet<(String, String)>,
    /// Now.
    pub now: Timestamp,
    /// `--nodeimage-creation-delay`.
    pub creation_delay: Duration,
}

/// The write a reconcile makes (at most one).
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Create the NodeImage (labelled as the node).
    Create(Box<NodeImage>),
    /// Delete it (its node is gone).
    Delete,
    /// Replace labels and spec (carries the `resourceVersion` read).
    Update(Box<NodeImage>),
    /// Write the status.
    Status(Box<NodeImageStatus>),
}

/// A `PullImageFailed` Warning, on the tag's owners and on the NodeImage.
#[derive(Clone, Debug, PartialEq)]
pub struct FailedPull {
    /// The tag's owners.
    pub owners: Vec<ObjectReference>,
    /// `Failed to pull image <name>:<tag> on node <node> for <why>`.
    pub message: String,
}

/// What the planner decided: the kit's plan with at most one action (its status write
/// among them) and, besides, the tags that failed here (recorded on the NodeImage and on
/// each job that asked for them).
pub type Plan = kruise_core::plan::Plan<Action, (), Vec<FailedPull>>;

/// See the module's documentation.
pub fn plan(input: &NodeImageInput<'_>) -> Plan {
    let node = input.node.filter(|n| !n.deleting);
    let Some(node_image) = input.node_image else {
        let Some(ready_since) = node.and_then(|n| n.ready_since) else {
            return Plan::default();
        };
        let delay = i64::try_from(input.creation_delay.as_secs()).unwrap_or(i64::MAX);
        if let Some(wait) = left(input.now, ready_since, delay) {
            return Plan {
                requeue_after: Some(wait),
                ..Plan::default()
            };
        }
        let labels = node.map(|n| n.labels.clone()).filter(|l| !l.is_empty());
        return Plan {
            actions: vec![Action::Create(Box::new(NodeImage {
                metadata: ObjectMeta {
                    name: Some(input.name.into()),
                    labels,
                    ..Default::default()
                },
                spec: NodeImageSpec::default(),
                status: None,
            }))],
            ..Plan::default()
        };
    };
    if node_image.metadata.deletion_timestamp.is_some() {
        return Plan::default();
    }
    let fake = node_image
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(FAKE_NODEIMAGE_LABEL));
    if node.is_none() && !fake {
        return Plan {
            actions: vec![Action::Delete],
            ..Plan::default()
        };
    }
    let mut requeue = Requeue::default();
    let (spec, labels) = prune_spec(input, node_image, node, &mut requeue);
    let current_labels = node_image.metadata.labels.clone().unwrap_or_default();
    if spec != node_image.spec || labels != current_labels {
        let mut updated = node_image.clone();
        updated.metadata.labels = (!labels.is_empty()).then_some(labels);
        updated.spec = spec;
        return Plan {
            actions: vec![Action::Update(Box::new(updated))],
            requeue_after: requeue.get(),
            ..Plan::default()
        };
    }
    let (status, events) = next_status(input, node_image, &mut requeue);
    let current = node_image.status.clone().unwrap_or_default();
    Plan {
        actions: (status != current)
            .then(|| Action::Status(Box::new(status)))
            .into_iter()
            .collect(),
        requeue_after: requeue.get(),
        extra: events,
        ..Plan::default()
    }
}

/// The soonest of the waits seen, floored at [`MIN_REQUEUE`].
#[derive(Default)]
struct Requeue(Option<Duration>);

impl Requeue {
    fn wait(&mut self, d: Duration) {
        self.0 = Some(self.0.map_or(d, |c| c.min(d)));
    }

    fn get(&self) -> Option<Duration> {
        self.0.map(|d| d.max(MIN_REQUEUE))
    }
}

fn prune_spec(
    input: &NodeImageInput<'_>,
    node_image: &NodeImage,
    node: Option<&NodeFacts>,
    requeue: &mut Requeue,
) -> (NodeImageSpec, BTreeMap<String, String>) {
    let labels = match node {
        Some(n) => n.labels.clone(),
        None => node_image.metadata.labels.clone().unwrap_or_default(),
    };
    let statuses = node_image.status.as_ref().map(|s| &s.image_statuses);
    let mut spec = NodeImageSpec::default();
    for (name, image) in &node_image.spec.images {
        let mut image = image.clone();
        image.tags.retain_mut(|tag| {
            if tag.created_at.is_none() {
                return false;
            }
            // A tag whose owners are all gone goes; one written without owners stays (as
            // in OpenKruise).
            let had_owners = !tag.owner_references.is_empty();
            tag.owner_references
                .retain(|owner| owner_alive(owner, input.jobs));
            if had_owners && tag.owner_references.is_empty() {
                return false;
            }
            let ttl = tag
                .pull_policy
                .as_ref()
                .and_then(|p| p.ttl_seconds_after_finished);
            let completed = statuses
                .and_then(|s| s.get(name))
                .and_then(|s| {
                    s.tags
                        .iter()
                        .find(|t| t.tag == tag.tag && t.version == tag.version)
                })
                .and_then(|t| t.completion_time.as_ref());
            if let (Some(ttl), Some(completed)) = (ttl, completed) {
                match left(input.now, completed.0, i64::from(ttl)) {
                    None => return false,
                    Some(wait) => requeue.wait(wait),
                }
            }
            true
        });
        image.pull_secrets.retain(|secret| {
            secret.mode == REFERENCE_MODE_BATCH
                || input
                    .secrets
                    .contains(&(secret.namespace.clone(), secret.name.clone()))
        });
        if !image.tags.is_empty() {
            image.tags.sort_by(|a, b| a.tag.cmp(&b.tag));
            spec.images.insert(name.clone(), image);
        }
    }
    (spec, labels)
}

/// An owner other than an ImagePullJob is kept; an ImagePullJob owner only while a job of
/// its name and uid exists.
fn owner_alive(owner: &ObjectReference, jobs: &BTreeMap<(String, String), String>) -> bool {
    let group = owner
        .api_version
        .as_deref()
        .and_then(|v| v.split_once('/'))
        .map_or("", |(g, _)| g);
    if group != GROUP || owner.kind.as_deref() != Some(IMAGEPULLJOB_KIND) {
        return true;
    }
    let key = (
        owner.namespace.clone().unwrap_or_default(),
        owner.name.clone().unwrap_or_default(),
    );
    jobs.get(&key).map(String::as_str) == owner.uid.as_deref()
}

fn next_status(
    input: &NodeImageInput<'_>,
    node_image: &NodeImage,
    requeue: &mut Requeue,
) -> (NodeImageStatus, Vec<FailedPull>) {
    let mut status = node_image.status.clone().unwrap_or_default();
    let mut events = Vec::new();
    let now = Time(input.now);
    let mut statuses = BTreeMap::new();
    let (mut succeeded, mut failed, mut pulling, mut waiting, mut desired) = (0, 0, 0, 0, 0);
    for (name, image) in &node_image.spec.images {
        let mut tags: Vec<ImageTagStatus> = status
            .image_statuses
            .get(name)
            .map(|s| s.tags.clone())
            .unwrap_or_default();
        tags.retain(|t| image.tags.iter().any(|spec| spec.tag == t.tag));
        for spec in &image.tags {
            desired += 1;
            let Some(created_at) = spec.created_at.as_ref().map(|t| t.0) else {
                continue;
            };
            let position = tags.iter().position(|t| t.tag == spec.tag);
            let answered = position.is_some_and(|i| tags[i].version == spec.version);
            let mut why = None;
            if !answered {
                match left(input.now, created_at, RESPONSE_TIMEOUT_SECONDS) {
                    Some(wait) => {
                        requeue.wait(wait);
                        continue;
                    }
                    None => why = Some(NOT_RESPONDED),
                }
            } else if let Some(i) = position
                && tags[i].completion_time.is_none()
                && let Some(deadline) = spec
                    .pull_policy
                    .as_ref()
                    .and_then(|p| p.active_deadline_seconds)
            {
                match left(
                    input.now,
                    created_at,
                    deadline.saturating_add(RESPONSE_TIMEOUT_SECONDS),
                ) {
                    Some(wait) => requeue.wait(wait),
                    None => why = Some(DEADLINE_EXCEEDED),
                }
            }
            if let Some(why) = why {
                let failed_tag = ImageTagStatus {
                    tag: spec.tag.clone(),
                    phase: Some(ImagePullPhase::Failed),
                    completion_time: Some(now.clone()),
                    version: spec.version,
                    message: why.into(),
                    ..position.map(|i| tags[i].clone()).unwrap_or_default()
                };
                match position {
                    Some(i) => tags[i] = failed_tag,
                    None => tags.push(failed_tag),
                }
                events.push(FailedPull {
                    owners: spec.owner_references.clone(),
                    message: format!(
                        "Failed to pull image {name}:{} on node {} for {why}",
                        spec.tag, input.name
                    ),
                });
            }
        }
        for tag in &tags {
            match tag.phase {
                Some(ImagePullPhase::Succeeded) => succeeded += 1,
                Some(ImagePullPhase::Failed) => failed += 1,
                Some(ImagePullPhase::Pulling) => pulling += 1,
                Some(ImagePullPhase::Waiting) => waiting += 1,
                _ => {}
            }
        }
        if !tags.is_empty() {
            tags.sort_by(|a, b| a.tag.cmp(&b.tag));
            statuses.insert(name.clone(), crate::api::ImageStatus { tags });
        }
    }
    status.image_statuses = statuses;
    status.desired = desired;
    status.succeeded = succeeded;
    status.failed = failed;
    status.pulling = pulling;
    status.waiting = waiting;
    (status, events)
}

#[cfg(test)]
mod tests;
