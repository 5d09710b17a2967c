use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;

const T0: &str = "2026-01-01T00:00:00Z";

fn at(seconds: i64) -> Timestamp {
    T0.parse::<Timestamp>().unwrap() + jiff::SignedDuration::from_secs(seconds)
}

fn node_image(labels: Value, spec: Value, status: Value) -> NodeImage {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "NodeImage",
        "metadata": {"name": "n1", "labels": labels, "resourceVersion": "3"},
        "spec": spec, "status": status,
    }))
    .unwrap()
}

fn ready(labels: &[(&str, &str)], since: i64) -> NodeFacts {
    NodeFacts {
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ready_since: Some(at(since)),
        deleting: false,
    }
}

fn owner(name: &str, uid: &str) -> Value {
    json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "ImagePullJob", "namespace": "default", "name": name, "uid": uid})
}

struct World {
    jobs: BTreeMap<(String, String), String>,
    secrets: BTreeSet<(String, String)>,
}

impl World {
    fn new(jobs: &[(&str, &str)]) -> Self {
        World {
            jobs: jobs
                .iter()
                .map(|(n, u)| (("default".to_string(), n.to_string()), u.to_string()))
                .collect(),
            secrets: BTreeSet::new(),
        }
    }

    fn plan(&self, node: Option<&NodeFacts>, node_image: Option<&NodeImage>, now: i64) -> Plan {
        plan(&NodeImageInput {
            name: "n1",
            node,
            node_image,
            jobs: &self.jobs,
            secrets: &self.secrets,
            now: at(now),
            creation_delay: DEFAULT_CREATION_DELAY,
        })
    }
}

#[test]
fn a_ready_node_gets_its_nodeimage_after_the_delay_and_loses_it_with_the_node() {
    let world = World::new(&[]);
    let node = ready(&[("pool", "a")], 0);
    assert_eq!(
        world.plan(Some(&node), None, 10).requeue_after,
        Some(Duration::from_secs(20))
    );
    assert_eq!(
        world.plan(Some(&node), None, 10).actions.into_iter().next(),
        None
    );
    let Some(Action::Create(created)) =
        world.plan(Some(&node), None, 30).actions.into_iter().next()
    else {
        panic!()
    };
    assert_eq!(created.metadata.name.as_deref(), Some("n1"));
    assert_eq!(created.metadata.labels, Some(node.labels.clone()));
    let not_ready = NodeFacts {
        ready_since: None,
        ..node.clone()
    };
    assert_eq!(world.plan(Some(&not_ready), None, 1000), Plan::default());
    let existing = node_image(json!({"pool": "a"}), json!({}), json!({}));
    assert_eq!(
        world
            .plan(None, Some(&existing), 0)
            .actions
            .into_iter()
            .next(),
        Some(Action::Delete)
    );
    let deleting = NodeFacts {
        deleting: true,
        ..node
    };
    assert_eq!(
        world
            .plan(Some(&deleting), Some(&existing), 0)
            .actions
            .into_iter()
            .next(),
        Some(Action::Delete)
    );
    let fake = node_image(json!({FAKE_NODEIMAGE_LABEL: "true"}), json!({}), json!({}));
    assert_eq!(
        world.plan(None, Some(&fake), 0).actions.into_iter().next(),
        None
    );
}

#[test]
fn labels_follow_the_node() {
    let world = World::new(&[]);
    let existing = node_image(json!({"pool": "a"}), json!({}), json!({}));
    let node = ready(&[("pool", "b"), ("zone", "z1")], 0);
    let Some(Action::Update(updated)) = world
        .plan(Some(&node), Some(&existing), 100)
        .actions
        .into_iter()
        .next()
    else {
        panic!()
    };
    assert_eq!(updated.metadata.labels, Some(node.labels.clone()));
    assert_eq!(updated.metadata.resource_version.as_deref(), Some("3"));
}

#[test]
fn tags_are_pruned_when_owners_are_gone_or_the_ttl_passed() {
    let world = World::new(&[("alive", "u1"), ("replaced", "new-uid")]);
    let policy = json!({"timeoutSeconds": 600, "backoffLimit": 3, "ttlSecondsAfterFinished": 100});
    let spec = json!({"images": {
        "nginx": {"tags": [
            {"tag": "1", "createdAt": T0, "version": 1, "pullPolicy": policy, "ownerReferences": [owner("alive", "u1"), owner("gone", "u2")]},
            {"tag": "2", "createdAt": T0, "version": 1, "pullPolicy": policy, "ownerReferences": [owner("replaced", "old-uid")]},
            {"tag": "3", "version": 1, "pullPolicy": policy, "ownerReferences": [owner("alive", "u1")]},
            {"tag": "4", "createdAt": T0, "version": 2, "pullPolicy": policy, "ownerReferences": [owner("alive", "u1")]},
            {"tag": "5", "createdAt": T0, "version": 1, "pullPolicy": policy, "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "x"}]},
        ]},
        "busybox": {"tags": [
            {"tag": "1", "createdAt": T0, "version": 1, "pullPolicy": policy, "ownerReferences": [owner("gone", "u2")]},
        ], "pullSecrets": [{"namespace": "kruise-daemon-config", "name": "s-1", "mode": "batch"}]},
    }});
    let status = json!({"imageStatuses": {"nginx": {"tags": [
        {"tag": "1", "phase": "Succeeded", "version": 1, "completionTime": "2026-01-01T00:01:00Z"},
        {"tag": "4", "phase": "Succeeded", "version": 2, "completionTime": "2026-01-01T00:00:10Z"},
    ]}}});
    let existing = node_image(json!({}), spec, status);
    let node = ready(&[], 0);
    let plan = world.plan(Some(&node), Some(&existing), 130);
    let Some(Action::Update(updated)) = plan.actions.first() else {
        panic!("{plan:?}")
    };
    let kept: Vec<(&str, Vec<&str>)> = updated
        .spec
        .images
        .iter()
        .flat_map(|(name, image)| image.tags.iter().map(move |t| (name.as_str(), t)))
        .map(|(name, t)| (name, vec![t.tag.as_str()]))
        .collect();
    // nginx:1 keeps its live owner only (TTL ends at 160); nginx:4's TTL passed at 110;
    // nginx:2's owner was replaced; nginx:3 has no createdAt; busybox lost its only owner.
    assert_eq!(kept, [("nginx", vec!["1"]), ("nginx", vec!["5"])]);
    assert_eq!(
        updated.spec.images["nginx"].tags[0].owner_references.len(),
        1
    );
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(30)));
}

#[test]
fn a_tag_never_answered_fails_after_ten_minutes_and_counters_follow() {
    let world = World::new(&[("job", "u1")]);
    let policy = json!({"timeoutSeconds": 600, "backoffLimit": 3, "ttlSecondsAfterFinished": 100000, "activeDeadlineSeconds": 60});
    let spec = json!({"images": {"nginx": {"tags": [
        {"tag": "a", "createdAt": T0, "version": 1, "pullPolicy": policy, "ownerReferences": [owner("job", "u1")]},
        {"tag": "b", "createdAt": T0, "version": 2, "pullPolicy": policy, "ownerReferences": [owner("job", "u1")]},
        {"tag": "c", "createdAt": T0, "version": 1, "pullPolicy": policy, "ownerReferences": [owner("job", "u1")]},
        {"tag": "d", "createdAt": T0, "version": 1, "pullPolicy": policy, "ownerReferences": [owner("job", "u1")]},
    ]}}});
    let status = json!({"imageStatuses": {"nginx": {"tags": [
        {"tag": "b", "phase": "Succeeded", "version": 1, "completionTime": T0},
        {"tag": "c", "phase": "Pulling", "version": 1, "progress": 40},
        {"tag": "d", "phase": "Succeeded", "version": 1, "completionTime": T0, "imageID": "nginx@sha256:1"},
        {"tag": "zz-gone", "phase": "Succeeded", "version": 1},
    ]}}});
    let existing = node_image(json!({}), spec, status);
    let node = ready(&[], 0);
    let early = world.plan(Some(&node), Some(&existing), 599);
    assert!(early.extra.is_empty());
    let Some(Action::Status(status)) = early.actions.first() else {
        panic!("{early:?}")
    };
    // Counters recomputed; the status of a tag no longer in the spec dropped.
    assert_eq!(
        (
            status.desired,
            status.succeeded,
            status.pulling,
            status.failed
        ),
        (4, 2, 1, 0)
    );
    assert_eq!(
        early.requeue_after,
        Some(Duration::from_secs(1)).map(|d| d.max(MIN_REQUEUE))
    );

    let late = world.plan(Some(&node), Some(&existing), 700);
    let Some(Action::Status(status)) = late.actions.first() else {
        panic!("{late:?}")
    };
    let tags = &status.image_statuses["nginx"].tags;
    let phases: Vec<(&str, Option<&ImagePullPhase>, &str, i64)> = tags
        .iter()
        .map(|t| {
            (
                t.tag.as_str(),
                t.phase.as_ref(),
                t.message.as_str(),
                t.version,
            )
        })
        .collect();
    assert_eq!(
        phases,
        [
            ("a", Some(&ImagePullPhase::Failed), NOT_RESPONDED, 1),
            ("b", Some(&ImagePullPhase::Failed), NOT_RESPONDED, 2),
            ("c", Some(&ImagePullPhase::Failed), DEADLINE_EXCEEDED, 1),
            ("d", Some(&ImagePullPhase::Succeeded), "", 1),
        ]
    );
    assert_eq!(tags[2].progress, 40);
    assert_eq!((status.succeeded, status.failed, status.pulling), (1, 3, 0));
    assert_eq!(late.extra.len(), 3);
    assert_eq!(
        late.extra[0].message,
        "Failed to pull image nginx:a on node n1 for node has not responded for a long time"
    );
    assert_eq!(late.extra[0].owners[0].name.as_deref(), Some("job"));
}

#[test]
fn an_unchanged_nodeimage_is_not_written() {
    let world = World::new(&[("job", "u1")]);
    let policy = json!({"timeoutSeconds": 600, "backoffLimit": 3, "ttlSecondsAfterFinished": 100});
    let spec = json!({"images": {"nginx": {"tags": [
        {"tag": "a", "createdAt": T0, "version": 1, "pullPolicy": policy, "ownerReferences": [owner("job", "u1")]},
    ]}}});
    let status = json!({"desired": 1, "succeeded": 1, "failed": 0, "pulling": 0, "waiting": 0,
        "imageStatuses": {"nginx": {"tags": [{"tag": "a", "phase": "Succeeded", "version": 1, "completionTime": T0}]}}});
    let existing = node_image(json!({"pool": "a"}), spec, status);
    let node = ready(&[("pool", "a")], 0);
    for now in [10, 50, 99] {
        let plan = world.plan(Some(&node), Some(&existing), now);
        assert_eq!(plan.actions.into_iter().next(), None, "at {now}");
        assert!(plan.requeue_after.is_some());
    }
}
