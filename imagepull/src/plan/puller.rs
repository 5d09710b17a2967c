//! What the node agent pulls (OpenKruise's `pkg/daemon/imagepuller`, reference §7.f): one
//! task per NodeImage tag version the agent has not finished — a version with no answer, or
//! one answered `Waiting`/`Pulling` (an agent restarted mid-pull takes it up again) — and
//! the retry delays of a task: 1 s doubling to 30 s.

use std::time::Duration;

use jiff::Timestamp;

use crate::api::v1beta1::NodeImage;
use crate::api::{
    DEFAULT_BACKOFF_LIMIT, DEFAULT_TIMEOUT_SECONDS, ImagePullPhase, ImagePullPolicy,
    ImageTagStatus, NodeImageStatus, ReferenceObject,
};

/// The first retry's delay.
pub const FIRST_RETRY: Duration = Duration::from_secs(1);
/// The longest retry delay.
pub const MAX_RETRY: Duration = Duration::from_secs(30);

/// One tag version to pull.
#[derive(Clone, Debug, PartialEq)]
pub struct PullTask {
    /// The image's key (its familiar name).
    pub image: String,
    /// The tag (or digest).
    pub tag: String,
    /// The tag version the answer is for.
    pub version: i64,
    /// One attempt's limit.
    pub timeout: Duration,
    /// Retries after the first attempt.
    pub backoff_limit: u32,
    /// No attempt starts after this (`createdAt + activeDeadlineSeconds`).
    pub deadline: Option<Timestamp>,
    /// Pull even when the image is present (`imagePullPolicy: Always`).
    pub always: bool,
    /// The secrets to authenticate with.
    pub secrets: Vec<ReferenceObject>,
}

/// The tasks `node_image` asks of its agent now.
pub fn tasks(node_image: &NodeImage) -> Vec<PullTask> {
    let statuses = node_image.status.as_ref().map(|s| &s.image_statuses);
    let mut tasks = Vec::new();
    for (image, spec) in &node_image.spec.images {
        for tag in &spec.tags {
            let answered = statuses.and_then(|s| s.get(image)).and_then(|s| {
                s.tags
                    .iter()
                    .find(|t| t.tag == tag.tag && t.version == tag.version)
            });
            let finished = answered.is_some_and(|t| {
                matches!(
                    t.phase,
                    Some(ImagePullPhase::Succeeded | ImagePullPhase::Failed)
                )
            });
            if finished {
                continue;
            }
            let policy = tag.pull_policy.clone().unwrap_or_default();
            let deadline = match (tag.created_at.as_ref(), policy.active_deadline_seconds) {
                (Some(created), Some(seconds)) => {
                    Some(created.0 + jiff::SignedDuration::from_secs(seconds))
                }
                _ => None,
            };
            tasks.push(PullTask {
                image: image.clone(),
                tag: tag.tag.clone(),
                version: tag.version,
                timeout: Duration::from_secs(
                    u64::try_from(policy.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS))
                        .unwrap_or(0),
                ),
                backoff_limit: u32::try_from(policy.backoff_limit.unwrap_or(DEFAULT_BACKOFF_LIMIT))
                    .unwrap_or(0),
                deadline,
                always: tag.image_pull_policy == Some(ImagePullPolicy::Always),
                secrets: spec.pull_secrets.clone(),
            });
        }
    }
    tasks
}

/// The delay before retry `attempt` (1-based): 1 s, 2 s, 4 s … at most 30 s.
pub fn retry_delay(attempt: u32) -> Duration {
    let factor = 1u32
        .checked_shl(attempt.saturating_sub(1))
        .unwrap_or(u32::MAX);
    FIRST_RETRY.saturating_mul(factor).min(MAX_RETRY)
}

/// `current` with the agent's answers in place: each answer replaces its tag's status when
/// the spec still asks for that version (an answer for a stale version is dropped); tags
/// sorted.
pub fn merge_answers(
    node_image: &NodeImage,
    answers: &[(String, ImageTagStatus)],
) -> NodeImageStatus {
    let mut status = node_image.status.clone().unwrap_or_default();
    for (image, answer) in answers {
        let wanted = node_image.spec.images.get(image).is_some_and(|spec| {
            spec.tags
                .iter()
                .any(|t| t.tag == answer.tag && t.version == answer.version)
        });
        if !wanted {
            continue;
        }
        let tags = &mut status.image_statuses.entry(image.clone()).or_default().tags;
        match tags.iter_mut().find(|t| t.tag == answer.tag) {
            Some(existing) => *existing = answer.clone(),
            None => tags.push(answer.clone()),
        }
        tags.sort_by(|a, b| a.tag.cmp(&b.tag));
    }
    status
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn node_image(spec: serde_json::Value, status: serde_json::Value) -> NodeImage {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "NodeImage",
            "metadata": {"name": "n"}, "spec": spec, "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn unfinished_versions_are_tasks_with_their_limits() {
        let ni = node_image(
            json!({"images": {"nginx": {
            "pullSecrets": [{"namespace": "kruise-daemon-config", "name": "s", "mode": "batch"}],
            "tags": [
                {"tag": "a", "version": 1, "createdAt": "2026-01-01T00:00:00Z", "imagePullPolicy": "Always",
                 "pullPolicy": {"timeoutSeconds": 50, "backoffLimit": 2, "ttlSecondsAfterFinished": 1, "activeDeadlineSeconds": 100}},
                {"tag": "b", "version": 2},
                {"tag": "c", "version": 1},
                {"tag": "d", "version": 1},
            ]}}}),
            json!({"imageStatuses": {"nginx": {"tags": [
                {"tag": "b", "phase": "Succeeded", "version": 1},
                {"tag": "c", "phase": "Pulling", "version": 1},
                {"tag": "d", "phase": "Failed", "version": 1},
            ]}}}),
        );
        let tasks = tasks(&ni);
        let summary: Vec<(&str, i64)> = tasks.iter().map(|t| (t.tag.as_str(), t.version)).collect();
        assert_eq!(summary, [("a", 1), ("b", 2), ("c", 1)]);
        let a = &tasks[0];
        assert_eq!(
            (a.timeout, a.backoff_limit, a.always),
            (Duration::from_secs(50), 2, true)
        );
        assert_eq!(a.deadline, Some("2026-01-01T00:01:40Z".parse().unwrap()));
        assert_eq!(a.secrets[0].name, "s");
        let b = &tasks[1];
        assert_eq!(
            (b.timeout, b.backoff_limit, b.always, b.deadline),
            (Duration::from_secs(600), 3, false, None)
        );
    }

    #[test]
    fn retries_back_off_from_one_second_to_thirty() {
        let delays: Vec<u64> = (1..=7).map(|a| retry_delay(a).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(retry_delay(100), MAX_RETRY);
    }

    #[test]
    fn answers_replace_their_tag_and_stale_ones_are_dropped() {
        let ni = node_image(
            json!({"images": {"nginx": {"tags": [{"tag": "a", "version": 2}, {"tag": "b", "version": 1}]}}}),
            json!({"imageStatuses": {"nginx": {"tags": [{"tag": "a", "phase": "Failed", "version": 1}]}}}),
        );
        let answer = |tag: &str, version, phase| {
            (
                "nginx".to_string(),
                ImageTagStatus {
                    tag: tag.into(),
                    version,
                    phase: Some(phase),
                    ..Default::default()
                },
            )
        };
        let merged = merge_answers(
            &ni,
            &[
                answer("b", 1, ImagePullPhase::Pulling),
                answer("a", 2, ImagePullPhase::Succeeded),
                answer("a", 1, ImagePullPhase::Waiting),
            ],
        );
        let tags: Vec<(&str, i64, Option<&ImagePullPhase>)> = merged.image_statuses["nginx"]
            .tags
            .iter()
            .map(|t| (t.tag.as_str(), t.version, t.phase.as_ref()))
            .collect();
        assert_eq!(
            tags,
            [
                ("a", 2, Some(&ImagePullPhase::Succeeded)),
                ("b", 1, Some(&ImagePullPhase::Pulling))
            ]
        );
    }
}
