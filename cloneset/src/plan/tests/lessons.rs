//! Lessons from OpenKruise's bug tracker, each a test (issue 6).

use super::*;
use pretty_assertions::assert_eq;

fn in_place_cs(replicas: i32, max_unavailable: i32) -> CloneSet {
    cloneset(
        "nginx:1",
        json!({"replicas": replicas, "updateStrategy": {"rollingUpdate": {
            "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": max_unavailable}}}),
    )
}

/// Names of pods a plan disrupts (deletes, marks, updates in place).
fn disrupted(p: &Plan) -> Vec<String> {
    let mut v = deletes(p);
    v.extend(marked(p));
    v.extend(in_place(p));
    v
}

#[test]
fn max_unavailable_counts_pods_unavailable_for_any_reason() {
    let mut w = World::with_ready(in_place_cs(5, 1));
    let sick = w.names()[3].clone();
    w.broken.push(sick.clone());
    w.kubelet();
    w.set_image("nginx:2");
    let p = w.plan();
    // The budget is used up by the crash-looping pod: only that pod may be touched.
    assert_eq!(in_place(&p), vec![sick.clone()]);
    for _ in 0..10 {
        let before = w.available();
        let p = w.plan();
        w.apply(&p);
        assert!(
            w.available() >= before.min(4),
            "planner made pods unavailable beyond the budget"
        );
        w.kubelet();
        w.now += SignedDuration::from_secs(2);
    }
    // Healthy pods were not touched while the sick one stays unavailable.
    let new = rev_name(w.update_revision());
    assert_eq!(w.count_at(&new), 1);
}

#[test]
fn max_unavailable_holds_across_repeated_template_changes_mid_rollout() {
    for policy in ["ReCreate", "InPlaceIfPossible"] {
        let mut w = World::with_ready(cloneset(
            "nginx:1",
            json!({"replicas": 5, "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": policy, "maxUnavailable": 1}}}),
        ));
        w.broken_images = vec!["nginx:2".into(), "nginx:3".into(), "nginx:4".into()];
        for image in ["nginx:2", "nginx:3", "nginx:4"] {
            w.set_image(image);
            for _ in 0..8 {
                let before = w.available();
                let p = w.plan();
                w.apply(&p);
                assert!(
                    w.available() >= before.min(4),
                    "{policy} {image}: available {} < 4",
                    w.available()
                );
                w.kubelet();
                w.now += SignedDuration::from_secs(2);
            }
            // At most one pod is off the healthy revision: the broken intermediate ones are
            // replaced, never joined by more.
            assert!(w.available() >= 4, "{policy} {image}: {}", w.available());
        }
        // A good image finally completes the rollout.
        w.broken_images.clear();
        w.set_image("nginx:5");
        w.settle(200);
        assert_eq!(w.count_at(&rev_name(w.update_revision())), 5, "{policy}");
    }
}

#[test]
fn ready_transition_time_rewrite_never_gets_healthy_pods_replaced() {
    let mut cs = in_place_cs(4, 1);
    cs.spec.min_ready_seconds = 30;
    let mut w = World::with_ready(cs);
    w.now += SignedDuration::from_secs(120);
    w.settle(5);
    assert_eq!(w.available(), 4);
    // A kubelet restart rewrites every pod's Ready lastTransitionTime to now.
    let now = w.now;
    for p in &mut w.pods {
        for c in p.status.as_mut().unwrap().conditions.as_mut().unwrap() {
            if c.type_ == "Ready" {
                c.last_transition_time = Some(Time(now));
            }
        }
    }
    let p = w.plan();
    assert!(
        disrupted(&p).is_empty() && creates(&p).is_empty(),
        "{:?}",
        p.actions
    );
    assert_eq!(p.status.available_replicas, 0);
    assert!(
        p.requeue_after.is_some(),
        "requeue when the pods become available again"
    );
    // Mid-rollout, pods that only *look* unavailable are never replaced (no creates or
    // deletes), and the real disruption (pods not ready) stays within maxUnavailable.
    w.set_image("nginx:2");
    for _ in 0..5 {
        let p = w.plan();
        assert!(
            deletes(&p).is_empty() && creates(&p).is_empty(),
            "{:?}",
            p.actions
        );
        assert!(in_place(&p).len() <= 1);
        w.apply(&p);
        let not_ready = w.pods.iter().filter(|p| !diffs::is_ready(p, w.now)).count();
        assert!(not_ready <= 1, "{not_ready} pods not ready");
        w.kubelet();
        w.now += SignedDuration::from_secs(2);
    }
    // The rollout still completes.
    w.now += SignedDuration::from_secs(31);
    w.settle(200);
    assert_eq!(w.count_at(&rev_name(w.update_revision())), 4);
}

#[test]
fn rollback_touches_the_newest_unready_pod_never_the_last_ready_one() {
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"replicas": 3, "updateStrategy": {"rollingUpdate": {"maxUnavailable": 1}}}),
    ));
    let v1 = w.current.clone();
    w.broken_images = vec!["nginx:2".into()];
    w.set_image("nginx:2");
    for _ in 0..6 {
        w.step();
    }
    let v2 = rev_name(w.update_revision());
    assert_eq!(w.count_at(&v2), 1, "rollout stuck on one broken pod");
    let bad: Vec<String> = w
        .pods
        .iter()
        .filter(|p| diffs::at_revision(p, &v2))
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    // Roll back to v1 (the equal revision is reused).
    w.set_image("nginx:1");
    assert_eq!(rev_name(w.update_revision()), v1);
    for _ in 0..20 {
        let p = w.plan();
        for name in disrupted(&p) {
            assert!(
                bad.contains(&name),
                "rollback disrupted {name}, a ready pod, instead of the unready one"
            );
        }
        w.apply(&p);
        w.kubelet();
        w.now += SignedDuration::from_secs(2);
    }
    assert_eq!(w.count_at(&v1), 3);
    assert_eq!(w.available(), 3);

    // With surge: the broken new pod was created next to the last ready one; the rollback
    // deletes the new unready pod and keeps the ready one.
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"replicas": 1, "updateStrategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}),
    ));
    let ready = w.names()[0].clone();
    w.broken_images = vec!["nginx:2".into()];
    w.set_image("nginx:2");
    for _ in 0..6 {
        w.step();
    }
    assert_eq!(w.pods.len(), 2);
    w.set_image("nginx:1");
    let p = w.plan();
    let d = deletes(&p);
    assert_eq!(d.len(), 1);
    assert_ne!(d[0], ready);
    w.apply(&p);
    w.settle(20);
    assert_eq!(w.names(), vec![ready]);
}

#[test]
fn image_tag_change_with_unchanged_digest_completes() {
    let mut w = World::with_ready(in_place_cs(3, 3));
    // `nginx:stable` resolves to the same digest as `nginx:1`.
    w.same_digest
        .insert("nginx:stable".into(), "nginx:1".into());
    w.set_image("nginx:stable");
    let steps = w.settle(40);
    assert!(steps < 40, "rollout did not settle");
    let new = rev_name(w.update_revision());
    assert_eq!(w.count_at(&new), 3);
    for p in &w.pods {
        assert_eq!(
            p.metadata.labels.as_ref().unwrap()[kruise_core::api::keys::LIFECYCLE_STATE_KEY],
            "Normal"
        );
    }
    assert_eq!(w.last_plan.status.updated_available_replicas, 3);
    assert_eq!(w.last_plan.status.current_revision, new);
}
