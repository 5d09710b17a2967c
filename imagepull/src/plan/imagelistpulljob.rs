//! The ImageListPullJob planner (OpenKruise's `imagelistpulljob_controller.go`, reference
//! §7.g): one child ImagePullJob per image, created from the list's template
//! (`generateName: <list>-`, controlled by the list, labelled `controller-revision-hash`
//! with the template's hash); a child of another hash, or of an image no longer listed, or
//! a second child of one image, is deleted; the status aggregates the children (a child is
//! completed once each of its nodes succeeded or failed); an `Always` list completes once
//! every child did, and is deleted its TTL after.

use std::collections::BTreeSet;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use super::left;
use crate::api::v1beta1::{ImageListPullJob, ImagePullJob, ImagePullJobSpec};
use crate::api::{
    FailedImageStatus, IMAGELISTPULLJOB_KIND, ImageListPullJobStatus, ImagePullJobTemplate,
    TEMPLATE_HASH_LABEL,
};

/// Kubernetes' `rand.SafeEncodeString` alphabet (no vowels, no look-alikes).
const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// What to do to the children.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Create this child.
    Create(Box<ImagePullJob>),
    /// Delete the child of this name.
    Delete(String),
    /// Delete the list itself (its TTL after completion passed).
    DeleteList,
}

/// What the planner decided: the kit's plan of child writes and the list's new status;
/// it requeues for the TTL.
pub type Plan = kruise_core::plan::Plan<Action, ImageListPullJobStatus>;

/// The template's hash: FNV-1a (32 bit) of its JSON, in the safe alphabet.
pub fn template_hash(template: &ImagePullJobTemplate) -> String {
    let bytes = serde_json::to_vec(template).unwrap_or_default();
    let mut hash: u32 = 0x811c_9dc5;
    for b in bytes {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash.to_string()
        .bytes()
        .map(|c| char::from(SAFE_ALPHABET[usize::from(c) % SAFE_ALPHABET.len()]))
        .collect()
}

/// See the module's documentation. `children` are the ImagePullJobs the list controls.
pub fn plan(list: &ImageListPullJob, children: &[ImagePullJob], now: Timestamp) -> Plan {
    let hash = template_hash(&list.spec.template);
    let previous = list.status.clone().unwrap_or_default();
    let start = previous.start_time.as_ref().map_or(now, |t| t.0);
    if let Some(done) = previous.completion_time.as_ref() {
        let ttl = list
            .spec
            .template
            .completion_policy
            .ttl_seconds_after_finished;
        let (actions, requeue_after) = match ttl.map(|t| left(now, done.0, i64::from(t))) {
            Some(None) => (vec![Action::DeleteList], None),
            Some(Some(wait)) => (Vec::new(), Some(wait)),
            None => (Vec::new(), None),
        };
        return Plan {
            actions,
            status: previous,
            requeue_after,
            ..Plan::default()
        };
    }
    let wanted: BTreeSet<&str> = list.spec.images.iter().map(String::as_str).collect();
    let mut actions = Vec::new();
    let mut current: Vec<&ImagePullJob> = Vec::new();
    let mut covered = BTreeSet::new();
    let mut sorted: Vec<&ImagePullJob> = children.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for child in sorted {
        let child_hash = child
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(TEMPLATE_HASH_LABEL));
        let image = child.spec.image.as_str();
        let keep = child_hash == Some(&hash) && wanted.contains(image) && covered.insert(image);
        if keep {
            current.push(child);
        } else if child.metadata.deletion_timestamp.is_none() {
            actions.push(Action::Delete(
                child.metadata.name.clone().unwrap_or_default(),
            ));
        }
    }
    for image in &list.spec.images {
        if covered.insert(image.as_str()) {
            actions.push(Action::Create(Box::new(child_of(list, image, &hash))));
        }
    }
    let mut status = ImageListPullJobStatus {
        start_time: Some(Time(start)),
        desired: i32::try_from(list.spec.images.len()).unwrap_or(i32::MAX),
        ..Default::default()
    };
    // Counted as OpenKruise counts them: a child not started yet is not counted at all; one
    // is completed once every node it wants has succeeded or failed, whether or not it gets
    // a completionTime (a `Never` child never does).
    for child in &current {
        let Some(child_status) = child.status.as_ref() else {
            continue;
        };
        if child_status.start_time.is_none() {
            continue;
        }
        if child_status.active > 0 {
            status.active += 1;
        }
        if child_status.failed > 0 {
            let name = child.metadata.name.clone().unwrap_or_default();
            status.failed_image_statuses.push(FailedImageStatus {
                message: format!(
                    "Please check for details which nodes failed by 'kubectl get ImagePullJob {name}'."
                ),
                image_pull_job: name,
                name: child.spec.image.clone(),
            });
        }
        if child_status.desired == child_status.failed + child_status.succeeded {
            status.completed += 1;
        }
        if child_status.desired == child_status.succeeded {
            status.succeeded += 1;
        }
    }
    if !list.spec.template.completion_policy.is_never() && status.completed == status.desired {
        status.completion_time = Some(Time(now));
    }
    Plan {
        actions,
        status,
        ..Plan::default()
    }
}

fn child_of(list: &ImageListPullJob, image: &str, hash: &str) -> ImagePullJob {
    let owner = OwnerReference {
        api_version: kruise_core::api::version::APPS_V1BETA1.into(),
        kind: IMAGELISTPULLJOB_KIND.into(),
        name: list.metadata.name.clone().unwrap_or_default(),
        uid: list.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    ImagePullJob {
        metadata: ObjectMeta {
            generate_name: Some(format!(
                "{}-",
                list.metadata.name.as_deref().unwrap_or_default()
            )),
            namespace: list.metadata.namespace.clone(),
            labels: Some([(TEMPLATE_HASH_LABEL.to_string(), hash.to_string())].into()),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: ImagePullJobSpec {
            image: image.into(),
            template: list.spec.template.clone(),
        },
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::{Value, json};

    use super::*;
    use crate::api::ImagePullJobStatus;

    fn at(seconds: i64) -> Timestamp {
        "2026-01-01T00:00:00Z".parse::<Timestamp>().unwrap()
            + jiff::SignedDuration::from_secs(seconds)
    }

    fn list(spec: Value) -> ImageListPullJob {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "ImageListPullJob",
            "metadata": {"name": "list", "namespace": "default", "uid": "u1"}, "spec": spec,
        }))
        .unwrap()
    }

    fn created(plan: &Plan) -> Vec<ImagePullJob> {
        plan.actions
            .iter()
            .filter_map(|a| match a {
                Action::Create(c) => Some((**c).clone()),
                _ => None,
            })
            .collect()
    }

    fn named(mut child: ImagePullJob, name: &str, status: Option<(i32, i32, i32)>) -> ImagePullJob {
        child.metadata.name = Some(name.into());
        child.status = status.map(|(desired, succeeded, failed)| ImagePullJobStatus {
            desired,
            succeeded,
            failed,
            active: desired - succeeded - failed,
            start_time: Some(Time(at(1))),
            message: "job has completed".into(),
            ..Default::default()
        });
        child
    }

    #[test]
    fn one_child_per_image_then_the_status_aggregates_them() {
        let l = list(
            json!({"images": ["nginx", "busybox"], "parallelism": 2, "completionPolicy": {"type": "Always"}}),
        );
        let first = plan(&l, &[], at(0));
        let children = created(&first);
        assert_eq!(
            children
                .iter()
                .map(|c| c.spec.image.as_str())
                .collect::<Vec<_>>(),
            ["nginx", "busybox"]
        );
        let child = &children[0];
        assert_eq!(child.metadata.generate_name.as_deref(), Some("list-"));
        assert_eq!(
            child.metadata.labels.as_ref().unwrap()[TEMPLATE_HASH_LABEL],
            template_hash(&l.spec.template)
        );
        assert_eq!(
            child.metadata.owner_references.as_ref().unwrap()[0].controller,
            Some(true)
        );
        assert_eq!(child.spec.template, l.spec.template);
        assert_eq!(
            (
                first.status.desired,
                first.status.active,
                first.status.completed
            ),
            (2, 0, 0)
        );
        let children = vec![
            named(children[0].clone(), "list-a", Some((3, 3, 0))),
            named(children[1].clone(), "list-b", Some((3, 2, 1))),
        ];
        let done = plan(&l, &children, at(10));
        assert!(done.actions.is_empty());
        assert_eq!(
            (
                done.status.desired,
                done.status.completed,
                done.status.succeeded
            ),
            (2, 2, 1)
        );
        assert_eq!(
            done.status.failed_image_statuses,
            [FailedImageStatus {
                image_pull_job: "list-b".into(),
                name: "busybox".into(),
                message: "Please check for details which nodes failed by 'kubectl get ImagePullJob list-b'."
                    .into(),
            }]
        );
        assert_eq!(done.status.completion_time, Some(Time(at(10))));
    }

    #[test]
    fn stale_removed_and_duplicate_children_are_replaced() {
        let l = list(json!({"images": ["nginx", "redis"]}));
        let fresh = created(&plan(&l, &[], at(0)));
        let mut stale = named(fresh[0].clone(), "list-old", None);
        stale.metadata.labels =
            Some([(TEMPLATE_HASH_LABEL.to_string(), "other".to_string())].into());
        let mut removed = named(fresh[0].clone(), "list-gone", None);
        removed.spec.image = "busybox".into();
        let kept = named(fresh[0].clone(), "list-a", None);
        let duplicate = named(fresh[0].clone(), "list-b", None);
        let p = plan(&l, &[stale, removed, kept, duplicate], at(1));
        let summary: Vec<String> = p
            .actions
            .iter()
            .map(|a| match a {
                Action::Create(c) => format!("create {}", c.spec.image),
                Action::Delete(n) => format!("delete {n}"),
                Action::DeleteList => "delete list".into(),
            })
            .collect();
        assert_eq!(
            summary,
            [
                "delete list-b",
                "delete list-gone",
                "delete list-old",
                "create redis"
            ]
        );
        // list-a is kept but has not started: not counted yet.
        assert_eq!((p.status.active, p.status.completed), (0, 0));
    }

    #[test]
    fn a_child_counts_as_completed_once_every_node_is_done_without_a_completion_time() {
        // OpenKruise v1.8.3's imagelistpulljob controller: desired == succeeded + failed,
        // so a `Never` child (which never gets a completionTime) moves `completed`.
        let l = list(
            json!({"images": ["nginx", "redis", "busybox"], "completionPolicy": {"type": "Never"}}),
        );
        let fresh = created(&plan(&l, &[], at(0)));
        let pulling = named(fresh[0].clone(), "list-a", Some((3, 1, 0)));
        let done = named(fresh[1].clone(), "list-b", Some((3, 3, 0)));
        let failed = named(fresh[2].clone(), "list-c", Some((3, 2, 1)));
        let p = plan(&l, &[pulling, done, failed], at(5));
        assert_eq!(
            (
                p.status.active,
                p.status.completed,
                p.status.succeeded,
                p.status.failed_image_statuses.len()
            ),
            (1, 2, 1, 1)
        );
        assert_eq!(p.status.completion_time, None);
    }

    #[test]
    fn a_completed_list_is_deleted_after_its_ttl_and_never_completes_under_never() {
        let mut l = list(
            json!({"images": ["nginx"], "completionPolicy": {"type": "Always", "ttlSecondsAfterFinished": 30}}),
        );
        l.status = Some(ImageListPullJobStatus {
            completion_time: Some(Time(at(100))),
            ..Default::default()
        });
        assert_eq!(
            plan(&l, &[], at(110)).requeue_after,
            Some(std::time::Duration::from_secs(20))
        );
        assert_eq!(plan(&l, &[], at(130)).actions, [Action::DeleteList]);
        let never = list(json!({"images": ["nginx"], "completionPolicy": {"type": "Never"}}));
        let child = named(
            created(&plan(&never, &[], at(0)))[0].clone(),
            "list-a",
            Some((1, 1, 0)),
        );
        let p = plan(&never, &[child], at(1));
        assert_eq!((p.status.completed, p.status.completion_time), (1, None));
    }

    #[test]
    fn the_hash_follows_the_template_only() {
        let a = list(json!({"images": ["nginx"], "parallelism": 1}));
        let b = list(json!({"images": ["nginx", "redis"], "parallelism": 1}));
        let c = list(json!({"images": ["nginx"], "parallelism": 2}));
        assert_eq!(
            template_hash(&a.spec.template),
            template_hash(&b.spec.template)
        );
        assert_ne!(
            template_hash(&a.spec.template),
            template_hash(&c.spec.template)
        );
        assert!(
            template_hash(&a.spec.template)
                .bytes()
                .all(|c| SAFE_ALPHABET.contains(&c))
        );
    }
}
