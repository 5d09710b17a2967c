//! One test per documented behaviour.

use super::*;
use kruise_core::api::keys::{
    CONTROLLER_REVISION_HASH_KEY, POD_INDEX_KEY, SPECIFIED_DELETE_KEY, STATEFULSET_POD_NAME_KEY,
};

#[test]
fn ordered_ready_creates_one_ordinal_at_a_time_with_its_identity_and_claims() {
    let set = statefulset(
        "nginx:1",
        json!({"volumeClaimTemplates": [{"metadata": {"name": "data", "labels": {"tier": "db"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}),
    );
    let mut w = World::new(set);
    let first = w.step();
    assert_eq!(creates(&first), strings(&["demo-0"]));
    let Action::CreatePod { pod, claims } = &first.actions[0] else {
        panic!("{:?}", first.actions)
    };
    let labels = pod.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[STATEFULSET_POD_NAME_KEY], "demo-0");
    assert_eq!(labels[POD_INDEX_KEY], "0");
    assert_eq!(labels[CONTROLLER_REVISION_HASH_KEY], w.update_revision());
    assert_eq!(labels["lifecycle.apps.kruise.io/state"], "Normal");
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.hostname.as_deref(), Some("demo-0"));
    assert_eq!(spec.subdomain.as_deref(), Some("demo-svc"));
    let volume = &spec.volumes.as_ref().unwrap()[0];
    assert_eq!(
        volume.persistent_volume_claim.as_ref().unwrap().claim_name,
        "data-demo-0"
    );
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].metadata.name.as_deref(), Some("data-demo-0"));
    let claim_labels = claims[0].metadata.labels.as_ref().unwrap();
    assert_eq!(
        (claim_labels["app"].as_str(), claim_labels["tier"].as_str()),
        ("demo", "db")
    );
    let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("StatefulSet", "sts-uid", Some(true))
    );
    // demo-0 is Running and Ready after the kubelet pass: demo-1 next, never two at once.
    let mut order = vec![];
    for _ in 0..10 {
        let p = w.step();
        assert!(creates(&p).len() <= 1);
        order.extend(creates(&p));
    }
    assert_eq!(order, strings(&["demo-1", "demo-2"]));
    assert_eq!(w.names(), strings(&["demo-0", "demo-1", "demo-2"]));
    let status = w.set.status.clone().unwrap();
    assert_eq!(
        (
            status.replicas,
            status.ready_replicas,
            status.updated_replicas
        ),
        (3, 3, 3)
    );
    assert_eq!(status.label_selector, "app=demo");
}

#[test]
fn ordered_ready_waits_for_an_unready_pod_and_for_min_ready_seconds() {
    let mut w = World::new(statefulset(
        "nginx:1",
        json!({"updateStrategy": {"rollingUpdate": {"minReadySeconds": 10}}}),
    ));
    w.broken.insert("demo-0".into());
    for _ in 0..5 {
        w.step();
    }
    assert_eq!(w.names(), strings(&["demo-0"]), "halts on the unready pod");
    w.broken.clear();
    w.step(); // demo-0 becomes ready now
    let p = w.plan();
    assert!(creates(&p).is_empty(), "not yet available for 10s");
    let wait = p.requeue_after.unwrap();
    assert!(
        !wait.is_zero() && wait <= std::time::Duration::from_secs(10),
        "{wait:?}"
    );
    w.now += SignedDuration::from_secs(10);
    assert_eq!(creates(&w.plan()), strings(&["demo-1"]));
}

#[test]
fn parallel_creates_every_ordinal_at_once_bounded_by_scale_max_unavailable() {
    let mut w = World::new(statefulset(
        "nginx:1",
        json!({"podManagementPolicy": "Parallel"}),
    ));
    assert_eq!(creates(&w.step()), strings(&["demo-0", "demo-1", "demo-2"]));

    let set = statefulset(
        "nginx:1",
        json!({"podManagementPolicy": "Parallel", "replicas": 4, "scaleStrategy": {"maxUnavailable": 2}}),
    );
    let mut w = World::new(set);
    assert_eq!(creates(&w.step()), strings(&["demo-0", "demo-1"]));
    w.broken.insert("demo-0".into());
    // Both are not yet available (InPlaceUpdateReady is set by this reconcile).
    assert!(creates(&w.step()).is_empty());
    // demo-0 unready, demo-1 ready: one more may be not-yet-available.
    assert_eq!(creates(&w.step()), strings(&["demo-2"]));
    assert!(
        creates(&w.step()).is_empty(),
        "demo-0 and the new demo-2 use the budget"
    );
}

#[test]
fn reserved_ordinals_are_skipped_and_replicas_extend_past_them() {
    let mut w = World::ready(statefulset(
        "nginx:1",
        json!({"reserveOrdinals": [1], "podManagementPolicy": "Parallel"}),
    ));
    assert_eq!(w.names(), strings(&["demo-0", "demo-2", "demo-3"]));
    // Reserving an existing ordinal moves it: demo-2 goes, demo-4 comes.
    w.set.spec.reserve_ordinals = vec![IntOrString::Int(1), IntOrString::String("2-2".into())];
    let p = w.step();
    assert_eq!(creates(&p), strings(&["demo-4"]));
    assert_eq!(
        deletes(&p),
        vec![("demo-2".to_string(), DeleteReason::Condemned)]
    );
}

#[test]
fn start_ordinal_needs_its_gate() {
    let set = statefulset(
        "nginx:1",
        json!({"ordinals": {"start": 5}, "podManagementPolicy": "Parallel"}),
    );
    let mut w = World::new(set.clone());
    assert_eq!(creates(&w.step()), strings(&["demo-0", "demo-1", "demo-2"]));
    let mut w = World::new(set);
    w.gates.start_ordinal = true;
    assert_eq!(creates(&w.step()), strings(&["demo-5", "demo-6", "demo-7"]));
}

#[test]
fn ordered_scale_down_is_descending_one_at_a_time_and_halts_on_an_unhealthy_pod() {
    let mut w = World::ready(statefulset("nginx:1", json!({"replicas": 4})));
    w.set.spec.replicas = Some(2);
    assert_eq!(
        deletes(&w.step()),
        vec![("demo-3".to_string(), DeleteReason::Condemned)]
    );
    w.broken.insert("demo-0".into());
    w.kubelet();
    for _ in 0..3 {
        assert!(
            deletes(&w.step()).is_empty(),
            "demo-0 is unhealthy: scale-down halts"
        );
    }
    w.broken.clear();
    w.step();
    w.settle(10);
    assert_eq!(w.names(), strings(&["demo-0", "demo-1"]));

    let mut w = World::ready(statefulset(
        "nginx:1",
        json!({"replicas": 4, "podManagementPolicy": "Parallel"}),
    ));
    w.set.spec.replicas = Some(1);
    let mut gone: Vec<String> = deletes(&w.step()).into_iter().map(|d| d.0).collect();
    gone.sort();
    assert_eq!(gone, strings(&["demo-1", "demo-2", "demo-3"]));
}

#[test]
fn ordered_scale_down_deletes_healthy_condemned_pods_and_of_the_unhealthy_only_the_lowest() {
    // OpenKruise's e2e "Scaling should happen in predictable order and halt if any stateful
    // pod is unhealthy": every pod unready, scaled to 0; the first unhealthy pod is the
    // lowest ordinal (demo-0), so demo-2 is not deleted until the pods are ready again.
    let mut w = World::ready(statefulset("nginx:1", json!({"replicas": 3})));
    w.broken.extend(strings(&["demo-0", "demo-1", "demo-2"]));
    w.kubelet();
    w.set.spec.replicas = Some(0);
    for _ in 0..3 {
        assert!(deletes(&w.step()).is_empty(), "every pod is unhealthy");
    }
    w.broken.clear();
    w.kubelet();
    assert_eq!(
        deletes(&w.step()),
        vec![("demo-2".to_string(), DeleteReason::Condemned)]
    );

    // A healthy condemned pod goes even though a lower one is unhealthy; then that one,
    // the lowest unhealthy pod, goes too.
    let mut w = World::ready(statefulset("nginx:1", json!({"replicas": 4})));
    w.broken.insert("demo-2".into());
    w.kubelet();
    w.set.spec.replicas = Some(2);
    assert_eq!(
        deletes(&w.step()),
        vec![("demo-3".to_string(), DeleteReason::Condemned)]
    );
    w.settle(10);
    assert_eq!(w.names(), strings(&["demo-0", "demo-1"]));

    // Two unhealthy condemned pods: the higher one is not the first unhealthy, so nothing goes.
    let mut w = World::ready(statefulset("nginx:1", json!({"replicas": 4})));
    w.broken.extend(strings(&["demo-2", "demo-3"]));
    w.kubelet();
    w.set.spec.replicas = Some(2);
    for _ in 0..3 {
        assert!(
            deletes(&w.step()).is_empty(),
            "demo-2 is the first unhealthy pod"
        );
    }
}

#[test]
fn a_terminating_pod_never_freezes_higher_ordinals_in_parallel_k2109() {
    let mut w = World::ready(statefulset(
        "nginx:1",
        json!({"podManagementPolicy": "Parallel"}),
    ));
    w.stuck.insert("demo-1".into());
    let mut finished = w.pods["demo-1"].clone();
    finished.status.as_mut().unwrap().phase = Some("Failed".into());
    w.pods.insert("demo-1".into(), finished);
    w.pods.remove("demo-2");
    let p = w.step();
    assert_eq!(
        deletes(&p),
        vec![("demo-1".to_string(), DeleteReason::Finished)]
    );
    assert_eq!(
        creates(&p),
        strings(&["demo-2"]),
        "the deleted higher ordinal is recreated"
    );
    // demo-1 hangs in Terminating; nothing is created over it, and nothing else waits.
    let p = w.step();
    assert!(
        creates(&p).is_empty() && deletes(&p).is_empty(),
        "{:?}",
        p.actions
    );
    w.stuck.clear();
    w.pods.remove("demo-1");
    assert_eq!(creates(&w.step()), strings(&["demo-1"]));
}

#[test]
fn rolling_update_recreates_descending_one_at_a_time() {
    let mut w = World::ready(statefulset("nginx:1", json!({})));
    w.set_image("nginx:2");
    let update = w.update_revision();
    let mut order = vec![];
    for _ in 0..30 {
        let p = w.step();
        let d = deletes(&p);
        assert!(d.len() <= 1, "{d:?}");
        order.extend(d.into_iter().map(|(n, r)| {
            assert_eq!(r, DeleteReason::Update);
            n
        }));
    }
    assert_eq!(order, strings(&["demo-2", "demo-1", "demo-0"]));
    for name in w.names() {
        assert_eq!(w.revision_of(&name), update);
    }
    let status = w.set.status.clone().unwrap();
    assert_eq!(
        status.current_revision, update,
        "current advances once all are updated"
    );
    assert_eq!(status.current_replicas, 3);
}

#[test]
fn partition_keeps_lower_ordinals_at_the_current_revision() {
    let mut w = World::ready(statefulset("nginx:1", json!({})));
    let old = w.update_revision();
    w.set
        .spec
        .update_strategy
        .rolling_update
        .as_mut()
        .unwrap()
        .partition = Some(2);
    w.set_image("nginx:2");
    let update = w.update_revision();
    w.settle(30);
    assert_eq!(w.revision_of("demo-2"), update);
    assert_eq!(w.revision_of("demo-1"), old);
    assert_eq!(w.revision_of("demo-0"), old);
    // A deleted pod below the partition comes back at the current revision.
    w.pods.remove("demo-0");
    w.settle(10);
    assert_eq!(w.revision_of("demo-0"), old);
    // A partition above replicas updates nothing.
    w.set
        .spec
        .update_strategy
        .rolling_update
        .as_mut()
        .unwrap()
        .partition = Some(5);
    w.set_image("nginx:3");
    w.settle(10);
    assert!(
        w.names()
            .iter()
            .all(|n| w.revision_of(n) != w.update_revision())
    );
}

#[test]
fn in_place_update_keeps_the_pod_and_goes_descending() {
    let set = statefulset(
        "nginx:1",
        json!({"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}}}),
    );
    let mut w = World::ready(set);
    let uids: BTreeMap<String, Option<String>> = w
        .pods
        .iter()
        .map(|(n, p)| (n.clone(), p.metadata.uid.clone()))
        .collect();
    w.set_image("nginx:2");
    let mut order = vec![];
    for _ in 0..30 {
        let p = w.step();
        assert!(deletes(&p).is_empty());
        assert!(in_place(&p).len() <= 1);
        order.extend(in_place(&p));
    }
    assert_eq!(order, strings(&["demo-2", "demo-1", "demo-0"]));
    for (name, pod) in &w.pods {
        assert_eq!(pod.metadata.uid, uids[name], "{name} kept its uid");
        let statuses = pod
            .status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap();
        assert_eq!(statuses[0].restart_count, 1);
        assert_eq!(statuses[0].image, "nginx:2");
        assert_eq!(
            pod.metadata.labels.as_ref().unwrap()["lifecycle.apps.kruise.io/state"],
            "Normal"
        );
    }
}

#[test]
fn pods_already_unavailable_count_against_max_unavailable_k1480() {
    let set = statefulset(
        "nginx:1",
        json!({"podManagementPolicy": "Parallel", "updateStrategy": {"rollingUpdate": {"maxUnavailable": 2}}}),
    );
    let mut w = World::ready(set);
    w.broken.insert("demo-0".into());
    w.kubelet();
    w.set_image("nginx:2");
    let p = w.step();
    assert_eq!(
        deletes(&p),
        vec![("demo-2".to_string(), DeleteReason::Update)],
        "demo-0 already uses one of the two"
    );
    // The crashing pod itself may be updated: it is unavailable already.
    let mut updated = vec![];
    for _ in 0..5 {
        updated.extend(deletes(&w.step()).into_iter().map(|d| d.0));
    }
    assert!(updated.contains(&"demo-0".to_string()), "{updated:?}");
}

#[test]
fn an_unobserved_in_place_update_holds_the_rollout_k844() {
    let set = statefulset(
        "nginx:1",
        json!({"podManagementPolicy": "Parallel", "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 3}}}),
    );
    let mut w = World::ready(set);
    w.set_image("nginx:2");
    let update = w.update_revision();
    // The cache lags: demo-2 was updated but the cache still shows the old pod.
    w.update_expectations
        .insert("demo-2".into(), update.clone());
    let p = w.plan();
    assert!(
        in_place(&p).is_empty() && deletes(&p).is_empty(),
        "{:?}",
        p.actions
    );
    // An expectation for an older revision does not hold a new rollout.
    w.update_expectations
        .insert("demo-2".into(), "demo-old".into());
    assert_eq!(in_place(&w.plan()).len(), 3);
}

#[test]
fn paused_and_on_delete_never_update() {
    let mut w = World::ready(statefulset(
        "nginx:1",
        json!({"updateStrategy": {"rollingUpdate": {"paused": true}}}),
    ));
    w.set_image("nginx:2");
    w.settle(10);
    assert!(w.plans.iter().rev().take(5).all(|p| deletes(p).is_empty()));

    let mut set = statefulset("nginx:1", json!({}));
    set.spec.update_strategy = serde_json::from_value(json!({"type": "OnDelete"})).unwrap();
    let mut w = World::ready(set);
    let old = w.update_revision();
    w.set_image("nginx:2");
    w.settle(10);
    assert!(w.names().iter().all(|n| w.revision_of(n) == old));
    // A deleted pod is recreated at the update revision.
    w.pods.remove("demo-1");
    w.settle(10);
    assert_eq!(w.revision_of("demo-1"), w.update_revision());
}

#[test]
fn specified_delete_recreates_the_pod_within_the_budget() {
    let mut w = World::ready(statefulset("nginx:1", json!({})));
    w.pods
        .get_mut("demo-1")
        .unwrap()
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert(SPECIFIED_DELETE_KEY.into(), "true".into());
    let p = w.step();
    assert_eq!(
        deletes(&p),
        vec![("demo-1".to_string(), DeleteReason::SpecifiedDelete)]
    );
}

#[test]
fn in_place_only_that_cannot_update_in_place_is_an_event_not_a_delete() {
    let set = statefulset(
        "nginx:1",
        json!({"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceOnly"}}}),
    );
    let mut w = World::ready(set);
    let mut tpl = template("nginx:1");
    tpl["spec"]["containers"][0]["args"] = json!(["--verbose"]);
    w.set.spec.template = serde_json::from_value(tpl).unwrap();
    let p = w.step();
    assert!(deletes(&p).is_empty() && in_place(&p).is_empty());
    assert_eq!(p.events[0].reason, "FailedUpdatePodInPlace");
}

#[test]
fn scale_expectations_pending_write_nothing_and_history_is_truncated() {
    let mut w = World::ready(statefulset("nginx:1", json!({"revisionHistoryLimit": 1})));
    let revisions = w.sync_revisions();
    let pods = w.cached();
    w.set.spec.replicas = Some(5);
    let pending = Satisfaction::Pending {
        remaining: SignedDuration::from_secs(3),
        waited: SignedDuration::ZERO,
    };
    let p = plan(&PlanInput {
        set: &w.set,
        pods: &pods,
        claims: &[],
        expandable_classes: &BTreeSet::new(),
        current_revision: &revisions.current,
        update_revision: &revisions.update,
        revisions: &w.revisions,
        now: w.now,
        gates: w.gates,
        scale_expectations: &pending,
        update_expectations: &BTreeMap::new(),
    });
    assert!(p.actions.is_empty());
    assert_eq!(p.requeue_after, Some(std::time::Duration::from_secs(3)));
    w.set.spec.replicas = Some(3);
    for image in ["nginx:2", "nginx:3"] {
        w.set_image(image);
        w.settle(30);
    }
    assert_eq!(w.revisions.len(), 2, "the update revision and one more");
}

#[test]
fn a_rollback_reuses_the_old_revision_and_restores_every_pod() {
    let mut w = World::ready(statefulset("nginx:1", json!({})));
    let v1 = w.update_revision();
    w.set_image("nginx:2");
    for _ in 0..2 {
        w.step();
    }
    assert!(
        w.names().iter().any(|n| w.revision_of(n) != v1),
        "the rollout started"
    );
    w.set_image("nginx:1");
    assert_eq!(
        w.update_revision(),
        v1,
        "the equal old revision is reused (bumped)"
    );
    w.settle(40);
    assert!(w.names().iter().all(|n| w.revision_of(n) == v1));
    assert_eq!(
        w.revisions
            .iter()
            .filter(|r| r.metadata.name.as_deref() == Some(v1.as_str()))
            .count(),
        1
    );
}

#[test]
fn changing_ordinals_start_moves_the_window() {
    let mut w = World::ready(statefulset(
        "nginx:1",
        json!({"podManagementPolicy": "Parallel"}),
    ));
    w.gates.start_ordinal = true;
    w.set.spec.ordinals = Some(crate::api::StatefulSetOrdinals { start: 2 });
    let p = w.step();
    assert_eq!(creates(&p), strings(&["demo-3", "demo-4"]));
    let mut gone: Vec<String> = deletes(&p).into_iter().map(|d| d.0).collect();
    gone.sort();
    assert_eq!(gone, strings(&["demo-0", "demo-1"]));
    w.settle(10);
    assert_eq!(w.names(), strings(&["demo-2", "demo-3", "demo-4"]));
    w.set.spec.ordinals = None;
    w.settle(10);
    assert_eq!(w.names(), strings(&["demo-0", "demo-1", "demo-2"]));
}

#[test]
fn orphans_are_adopted_and_pods_that_stop_matching_are_released() {
    let mut w = World::ready(statefulset("nginx:1", json!({})));
    // demo-1 orphaned (its owner reference removed), demo-2 relabelled away.
    w.pods.get_mut("demo-1").unwrap().metadata.owner_references = None;
    w.pods
        .get_mut("demo-2")
        .unwrap()
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("app".into(), "other".into());
    let p = w.plan();
    let owners: BTreeMap<String, Vec<String>> = p
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::SetPodOwners {
                name,
                owner_references,
                ..
            } => Some((
                name.clone(),
                owner_references.iter().map(|o| o.uid.clone()).collect(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        owners,
        BTreeMap::from([
            ("demo-1".to_string(), vec!["sts-uid".to_string()]),
            ("demo-2".to_string(), vec![]),
        ])
    );
    assert!(
        creates(&p).is_empty(),
        "the adopted demo-1 is a member at once"
    );
    // An orphan of another set's name, or one that does not match, is left alone.
    let mut w = World::ready(statefulset("nginx:1", json!({"replicas": 1})));
    let mut stranger = w.pods["demo-0"].clone();
    stranger.metadata.name = Some("other-1".into());
    stranger.metadata.owner_references = None;
    w.pods.insert("other-1".into(), stranger);
    assert!(w.plan().actions.is_empty());
}

/// The pods deleted for update, in order, over a whole rollout.
fn update_order_of(mut w: World) -> Vec<String> {
    w.set_image("nginx:2");
    let mut order = vec![];
    for _ in 0..40 {
        let p = w.step();
        order.extend(
            deletes(&p)
                .into_iter()
                .filter(|(_, r)| *r == DeleteReason::Update)
                .map(|(n, _)| n),
        );
    }
    order
}

#[test]
fn unordered_update_follows_the_priority_strategy() {
    let unordered = |strategy: Value| {
        statefulset(
            "nginx:1",
            json!({"podManagementPolicy": "Parallel", "updateStrategy": {"rollingUpdate":
                {"unorderedUpdate": {"priorityStrategy": strategy}}}}),
        )
    };
    let label = |w: &mut World, pod: &str, k: &str, v: &str| {
        w.pods
            .get_mut(pod)
            .unwrap()
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(k.into(), v.into());
    };
    // Weights: the heavier first, equal weights descending.
    let mut w = World::ready(unordered(json!({"weightPriority": [
        {"weight": 100, "matchSelector": {"matchLabels": {"tier": "canary"}}}]})));
    label(&mut w, "demo-0", "tier", "canary");
    assert_eq!(update_order_of(w), strings(&["demo-0", "demo-2", "demo-1"]));
    // Order keys: the larger trailing number first.
    let mut w = World::ready(unordered(
        json!({"orderPriority": [{"orderedKey": "rank"}]}),
    ));
    for (pod, rank) in [("demo-0", "r-1"), ("demo-1", "r-5"), ("demo-2", "r-3")] {
        label(&mut w, pod, "rank", rank);
    }
    assert_eq!(update_order_of(w), strings(&["demo-1", "demo-2", "demo-0"]));
    // No strategy: descending.
    let w = World::ready(statefulset(
        "nginx:1",
        json!({"podManagementPolicy": "Parallel",
               "updateStrategy": {"rollingUpdate": {"unorderedUpdate": {}}}}),
    ));
    assert_eq!(update_order_of(w), strings(&["demo-2", "demo-1", "demo-0"]));
}

#[test]
fn orphan_revisions_the_selector_matches_are_adopted() {
    let rev = |name: &str, app: &str, controller: Option<&str>| ControllerRevision {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("app".to_string(), app.to_string())])),
            owner_references: controller.map(|uid| {
                vec![
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                        uid: uid.into(),
                        controller: Some(true),
                        ..Default::default()
                    },
                ]
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let revisions = vec![
        rev("orphan", "demo", None),
        rev("foreign-labels", "other", None),
        rev("someone-elses", "demo", Some("other-uid")),
    ];
    let mut set = statefulset("nginx:1", json!({}));
    let names = |set: &StatefulSet| -> Vec<String> {
        orphans_to_adopt(set, &revisions)
            .into_iter()
            .filter_map(|r| r.metadata.name.clone())
            .collect()
    };
    assert_eq!(names(&set), strings(&["orphan"]));
    set.metadata.deletion_timestamp = Some(Time(t0()));
    assert!(names(&set).is_empty());
}
