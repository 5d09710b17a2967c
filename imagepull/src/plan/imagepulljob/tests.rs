use std::collections::BTreeMap;

use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::api::{ImageStatus, ImageTagStatus, NodeImageStatus};

const T0: &str = "2026-01-01T00:00:00Z";

fn at(seconds: i64) -> Timestamp {
    T0.parse::<Timestamp>().unwrap() + jiff::SignedDuration::from_secs(seconds)
}

fn job(spec: Value) -> ImagePullJob {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "ImagePullJob",
        "metadata": {"name": "job", "namespace": "default", "uid": "uid-1"},
        "spec": spec,
    }))
    .unwrap()
}

fn node_image(name: &str, labels: Value) -> NodeImage {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "NodeImage",
        "metadata": {"name": name, "labels": labels, "resourceVersion": "7"},
        "spec": {},
    }))
    .unwrap()
}

fn pod(name: &str, node: Option<&str>, labels: Value, phase: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"containers": [], "nodeName": node},
        "status": {"phase": phase},
    }))
    .unwrap()
}

fn input<'a>(job: &'a ImagePullJob, nodes: &'a [NodeImage], now: Timestamp) -> PlanInput<'a> {
    PlanInput {
        job,
        node_images: nodes.iter().collect(),
        secrets: &[],
        hold_writes: false,
        now,
        tag_settings: TagSettings::default(),
    }
}

/// The cluster after the writes land.
fn apply(nodes: &mut [NodeImage], writes: &[NodeImageWrite]) {
    for write in writes {
        let node = nodes
            .iter_mut()
            .find(|n| n.metadata.name.as_deref() == Some(write.node_image.as_str()))
            .unwrap();
        node.spec
            .images
            .insert(write.image.clone(), write.spec.clone());
    }
}

/// The agent answers `phase` for whatever version the node's tag has.
fn agent_answers(node: &mut NodeImage, image: &str, tag: &str, phase: ImagePullPhase) {
    let version = node.spec.images[image]
        .tags
        .iter()
        .find(|t| t.tag == tag)
        .unwrap()
        .version;
    let status = node.status.get_or_insert_with(NodeImageStatus::default);
    status.image_statuses.insert(
        image.to_string(),
        ImageStatus {
            tags: vec![ImageTagStatus {
                tag: tag.to_string(),
                phase: Some(phase),
                version,
                ..Default::default()
            }],
        },
    );
}

#[test]
fn nodes_are_chosen_by_names_labels_pods_or_all() {
    let nodes = vec![
        node_image("n3", json!({"pool": "a"})),
        node_image("n1", json!({"pool": "a"})),
        node_image("n2", json!({"pool": "b"})),
    ];
    let pods = vec![
        pod("p1", Some("n2"), json!({"app": "web"}), "Running"),
        pod("p2", Some("n9"), json!({"app": "web"}), "Running"),
        pod("p3", Some("n2"), json!({"app": "web"}), "Running"),
        pod("p4", Some("n3"), json!({"app": "web"}), "Succeeded"),
        pod("p5", None, json!({"app": "web"}), "Pending"),
        pod("p6", Some("n1"), json!({"app": "db"}), "Running"),
        pod("p7", Some("n3"), json!({"app": "web"}), "Pending"),
    ];
    for (spec, expected) in [
        (json!({"image": "nginx"}), vec!["n1", "n2", "n3"]),
        (
            json!({"image": "nginx", "selector": {"names": ["n3", "n9", "n1"]}}),
            vec!["n3", "n1"],
        ),
        (
            json!({"image": "nginx", "selector": {"matchLabels": {"pool": "a"}}}),
            vec!["n1", "n3"],
        ),
        (
            json!({"image": "nginx", "selector": {"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["a"]}]}}),
            vec!["n2"],
        ),
        (
            json!({"image": "nginx", "podSelector": {"matchLabels": {"app": "web"}}}),
            vec!["n2", "n3"],
        ),
    ] {
        assert_eq!(
            target_nodes(&job(spec.clone()), &nodes, &pods),
            expected,
            "{spec}"
        );
    }
}

#[test]
fn status_counts_each_node_by_this_jobs_tag_version() {
    let job = job(
        json!({"image": "nginx:1.25", "parallelism": 10, "completionPolicy": {"type": "Always"}}),
    );
    let mut nodes: Vec<NodeImage> = ["a", "b", "c", "d", "e", "f"]
        .iter()
        .map(|n| node_image(n, json!({})))
        .collect();
    let first = plan(&input(&job, &nodes, at(0))).unwrap();
    assert_eq!(first.actions.len(), 6);
    assert_eq!(first.status.active, 0);
    assert_eq!(first.status.message, "job is running, progress 0.0%");
    apply(&mut nodes, &first.actions);
    agent_answers(&mut nodes[0], "nginx", "1.25", ImagePullPhase::Succeeded);
    agent_answers(&mut nodes[1], "nginx", "1.25", ImagePullPhase::Failed);
    agent_answers(&mut nodes[2], "nginx", "1.25", ImagePullPhase::Pulling);
    agent_answers(&mut nodes[3], "nginx", "1.25", ImagePullPhase::Succeeded);
    // An answer for an older version of the tag is no answer yet.
    nodes[3].spec.images.get_mut("nginx").unwrap().tags[0].version += 1;
    // Another job's tag is not this job's: e is not synced.
    nodes[4].spec.images.get_mut("nginx").unwrap().tags[0].owner_references[0].uid =
        Some("other".into());
    let second = plan(&input(&job, &nodes, at(10))).unwrap();
    assert_eq!(
        (
            second.status.desired,
            second.status.active,
            second.status.succeeded,
            second.status.failed
        ),
        (6, 3, 1, 1)
    );
    assert_eq!(second.status.failed_nodes, ["b"]);
    assert_eq!(second.status.message, "job is running, progress 33.3%");
    // The job's status was never written here: it starts when first planned.
    assert_eq!(second.status.start_time, Some(Time(at(10))));
    // e gets this job added to the tag's owners, its version bumped for a new round.
    assert_eq!(second.actions.len(), 1);
    let tag = &second.actions[0].spec.tags[0];
    assert_eq!(second.actions[0].node_image, "e");
    assert_eq!(tag.owner_references.len(), 2);
    assert_eq!(tag.version, 1);
    assert_eq!(second.actions[0].resource_version.as_deref(), Some("7"));
}

#[test]
fn parallelism_bounds_new_nodes_and_zero_pauses() {
    let nodes: Vec<NodeImage> = (0..5)
        .map(|i| node_image(&format!("n{i}"), json!({})))
        .collect();
    for (parallelism, expected) in [
        (json!(0), 0),
        (json!(1), 1),
        (json!(3), 3),
        (json!(9), 5),
        (Value::Null, 1),
        (json!("2"), 2),
    ] {
        let job = job(json!({"image": "nginx", "parallelism": parallelism}));
        let p = plan(&input(&job, &nodes, at(0))).unwrap();
        assert_eq!(p.actions.len(), expected, "parallelism {parallelism}");
        assert!(p.status.completion_time.is_none());
    }
    // One node pulling and parallelism 2: one more.
    let job = job(json!({"image": "nginx", "parallelism": 2}));
    let mut nodes = nodes;
    let first = plan(&input(&job, &nodes, at(0))).unwrap();
    apply(&mut nodes, &first.actions[..1]);
    let next = plan(&input(&job, &nodes, at(1))).unwrap();
    assert_eq!(next.status.active, 1);
    assert_eq!(
        next.actions
            .iter()
            .map(|w| w.node_image.as_str())
            .collect::<Vec<_>>(),
        ["n1"]
    );
}

#[test]
fn always_completes_when_every_node_answered_never_does_not() {
    for (completion, completes) in [
        (json!({"type": "Always"}), true),
        (json!({"type": "Never"}), false),
    ] {
        let job = job(json!({"image": "nginx", "parallelism": 5, "completionPolicy": completion}));
        let mut nodes: Vec<NodeImage> = (0..2)
            .map(|i| node_image(&format!("n{i}"), json!({})))
            .collect();
        let first = plan(&input(&job, &nodes, at(0))).unwrap();
        apply(&mut nodes, &first.actions);
        agent_answers(&mut nodes[0], "nginx", "latest", ImagePullPhase::Succeeded);
        agent_answers(&mut nodes[1], "nginx", "latest", ImagePullPhase::Failed);
        let p = plan(&input(&job, &nodes, at(5))).unwrap();
        assert_eq!(p.status.completion_time.is_some(), completes);
        assert_eq!(
            p.status.message,
            if completes {
                "job has completed"
            } else {
                "job is running, progress 100.0%"
            }
        );
        assert!(p.actions.is_empty());
    }
    let empty = job(json!({"image": "nginx"}));
    let p = plan(&input(&empty, &[], at(0))).unwrap();
    assert_eq!(p.status.message, "job has completed");
}

#[test]
fn past_the_deadline_every_unanswered_node_fails() {
    let mut job = job(
        json!({"image": "nginx", "parallelism": 1, "completionPolicy": {"type": "Always", "activeDeadlineSeconds": 600}}),
    );
    job.status = Some(ImagePullJobStatus {
        start_time: Some(Time(at(0))),
        ..Default::default()
    });
    let mut nodes: Vec<NodeImage> = ["c", "a", "b"]
        .iter()
        .map(|n| node_image(n, json!({})))
        .collect();
    let first = plan(&input(&job, &nodes, at(0))).unwrap();
    assert_eq!(first.requeue_after, Some(Duration::from_secs(600)));
    apply(&mut nodes, &first.actions);
    let before = plan(&input(&job, &nodes, at(599))).unwrap();
    assert!(before.status.completion_time.is_none());
    assert_eq!(before.requeue_after, Some(MIN_REQUEUE));
    let after = plan(&input(&job, &nodes, at(600))).unwrap();
    assert_eq!(after.status.completion_time, Some(Time(at(600))));
    assert_eq!(after.status.failed_nodes, ["a", "b", "c"]);
    assert_eq!(after.status.failed, 3);
    assert_eq!(after.status.message, "job exceeds activeDeadlineSeconds");
    assert!(after.actions.is_empty());
    assert_eq!(after.requeue_after, None);
}

#[test]
fn a_new_tag_carries_the_jobs_policy_and_follows_the_last_answered_version() {
    let job = job(
        json!({"image": "reg:5000/app:v2", "imagePullPolicy": "Always",
        "pullPolicy": {"timeoutSeconds": 100, "backoffLimit": 2},
        "sandboxConfig": {"labels": {"k": "v"}}}),
    );
    let mut node = node_image("n", json!({}));
    node.status = Some(NodeImageStatus {
        image_statuses: BTreeMap::from([(
            "reg:5000/app".to_string(),
            ImageStatus {
                tags: vec![ImageTagStatus {
                    tag: "v2".into(),
                    version: 4,
                    ..Default::default()
                }],
            },
        )]),
        ..Default::default()
    });
    node.spec.images.insert(
        "reg:5000/app".into(),
        serde_json::from_value(json!({"tags": [{"tag": "v3", "version": 1}]})).unwrap(),
    );
    let nodes = [node];
    let p = plan(&input(&job, &nodes, at(0))).unwrap();
    assert_eq!(
        serde_json::to_value(&p.actions[0].spec).unwrap(),
        json!({
            "sandboxConfig": {"labels": {"k": "v"}},
            "tags": [
                {"tag": "v2", "createdAt": T0, "version": 5, "imagePullPolicy": "Always",
                 "pullPolicy": {"timeoutSeconds": 100, "backoffLimit": 2, "ttlSecondsAfterFinished": 500},
                 "ownerReferences": [{"apiVersion": "apps.kruise.io/v1beta1", "kind": "ImagePullJob", "name": "job", "namespace": "default", "uid": "uid-1"}]},
                {"tag": "v3", "version": 1},
            ],
        })
    );
}

#[test]
fn tag_pull_policy_follows_openkruise() {
    let settings = TagSettings {
        default_ttl_for_always: 300,
        always_jitter_seconds: 7,
        never_jitter_seconds: -600,
    };
    for (spec, ttl, deadline) in [
        (
            json!({"completionPolicy": {"type": "Always"}}),
            600 * 3 + 307,
            None,
        ),
        (
            json!({"completionPolicy": {"type": "Always", "ttlSecondsAfterFinished": 10}}),
            317,
            None,
        ),
        (
            json!({"completionPolicy": {"type": "Always", "activeDeadlineSeconds": 900}}),
            1207,
            Some(900),
        ),
        (
            json!({"completionPolicy": {"type": "Never"}}),
            86400 - 600,
            Some(1800),
        ),
        (
            json!({"completionPolicy": {"type": "Never"}, "pullPolicy": {"timeoutSeconds": 3600}}),
            85800,
            Some(3600),
        ),
    ] {
        let mut spec = spec;
        spec["image"] = json!("nginx");
        let policy = tag_pull_policy(&job(spec.clone()), &settings);
        assert_eq!(
            (
                policy.ttl_seconds_after_finished,
                policy.active_deadline_seconds
            ),
            (Some(ttl), deadline),
            "{spec}"
        );
    }
}

#[test]
fn a_finished_job_is_deleted_after_its_ttl() {
    let mut with_ttl = job(
        json!({"image": "nginx", "completionPolicy": {"type": "Always", "ttlSecondsAfterFinished": 30}}),
    );
    with_ttl.status = Some(ImagePullJobStatus {
        completion_time: Some(Time(at(100))),
        ..Default::default()
    });
    assert_eq!(
        finished(&with_ttl, at(110)),
        Finished::RequeueAfter(Duration::from_secs(20))
    );
    assert_eq!(finished(&with_ttl, at(130)), Finished::Delete);
    let mut no_ttl = job(json!({"image": "nginx"}));
    no_ttl.status = with_ttl.status.clone();
    assert_eq!(finished(&no_ttl, at(1_000_000)), Finished::Keep);
}

#[test]
fn secrets_must_reach_every_node_and_writes_wait_for_them() {
    let job = job(json!({"image": "nginx", "parallelism": 3}));
    let secret = ReferenceObject {
        namespace: "kruise-daemon-config".into(),
        name: "s-x1".into(),
        mode: "batch".into(),
    };
    let mut nodes: Vec<NodeImage> = (0..2)
        .map(|i| node_image(&format!("n{i}"), json!({})))
        .collect();
    let first = plan(&input(&job, &nodes, at(0))).unwrap();
    apply(&mut nodes, &first.actions);
    // The secret appears later: both nodes are not synced again and get it, nothing else.
    let secrets = [secret.clone()];
    let held = PlanInput {
        secrets: &secrets,
        hold_writes: true,
        ..input(&job, &nodes, at(1))
    };
    let p = plan(&held).unwrap();
    assert_eq!(p.status.active, 0);
    assert!(p.actions.is_empty());
    let p = plan(&PlanInput {
        hold_writes: false,
        ..held
    })
    .unwrap();
    assert_eq!(p.actions.len(), 2);
    for write in &p.actions {
        assert_eq!(write.spec.pull_secrets, std::slice::from_ref(&secret));
        assert_eq!(
            write.spec.tags[0].version, 0,
            "the tag is not renewed for a secret"
        );
    }
}

proptest! {
    /// Driving a job with an agent that answers at random: never more than `parallelism`
    /// nodes pulling; the job completes only once every desired node answered; once every
    /// node is synced, further reconciles write nothing (K#2381).
    #[test]
    fn parallelism_completion_and_quiet_reconciles(
        nodes in 1usize..12,
        parallelism in 0i32..5,
        answers in proptest::collection::vec((0usize..12, any::<bool>()), 0..60),
    ) {
        let job = job(json!({"image": "nginx", "parallelism": parallelism}));
        let mut cluster: Vec<NodeImage> = (0..nodes).map(|i| node_image(&format!("n{i:02}"), json!({}))).collect();
        let mut completed = false;
        for (step, (pick, ok)) in answers.iter().enumerate() {
            let p = plan(&input(&job, &cluster, at(step as i64))).unwrap();
            prop_assert!(p.status.active <= parallelism.max(0));
            let pulling_after = p.status.active as usize + p.actions.iter().filter(|w| {
                !cluster.iter().any(|n| n.metadata.name.as_deref() == Some(w.node_image.as_str()) && n.spec.images.contains_key("nginx"))
            }).count();
            prop_assert!(pulling_after <= parallelism.max(0) as usize);
            if p.status.completion_time.is_some() {
                completed = true;
                prop_assert_eq!(p.status.succeeded + p.status.failed, nodes as i32);
                break;
            }
            apply(&mut cluster, &p.actions);
            let node = &mut cluster[pick % nodes];
            let synced = node.spec.images.contains_key("nginx");
            let answered = node.status.as_ref().is_some_and(|s| s.image_statuses.contains_key("nginx"));
            if synced && !answered {
                agent_answers(node, "nginx", "latest", if *ok { ImagePullPhase::Succeeded } else { ImagePullPhase::Failed });
            }
        }
        if parallelism == 0 {
            prop_assert!(!completed);
            prop_assert!(cluster.iter().all(|n| n.spec.images.is_empty()));
        }
        if cluster.iter().all(|n| n.spec.images.contains_key("nginx")) {
            let frozen = cluster.clone();
            for n in 0..5 {
                let p = plan(&input(&job, &cluster, at(1000 + n))).unwrap();
                prop_assert!(p.actions.is_empty());
            }
            prop_assert_eq!(
                serde_json::to_vec(&cluster).unwrap(),
                serde_json::to_vec(&frozen).unwrap()
            );
        }
    }
}
