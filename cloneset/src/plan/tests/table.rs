use super::*;
use kruise_core::api::keys::{CLONESET_INSTANCE_ID_KEY, LIFECYCLE_STATE_KEY, SPECIFIED_DELETE_KEY};
use kruise_core::plan::EventType;
use pretty_assertions::assert_eq;
use std::collections::BTreeSet;

#[test]
fn creates_pods_with_name_labels_gate_and_owner() {
    let mut w = World::new(cloneset("nginx:1", json!({})));
    let p = w.plan();
    let created = creates(&p);
    assert_eq!(created.len(), 3);
    let pod = created[0];
    assert_eq!(pod.metadata.name.as_deref(), Some("demo-i0000"));
    let labels = pod.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[CLONESET_INSTANCE_ID_KEY], "i0000");
    assert_eq!(labels["app"], "demo");
    assert_eq!(labels["controller-revision-hash"], w.current);
    assert_eq!(
        labels["pod-template-hash"],
        kruise_core::revision::short_hash(&w.current)
    );
    assert_eq!(labels[LIFECYCLE_STATE_KEY], "PreparingNormal");
    assert!(has_gate(pod));
    let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("CloneSet", "cs-uid", Some(true))
    );
    // short-hash gate
    w.gates.short_hash = true;
    let p = w.plan();
    let labels = creates(&p)[0].metadata.labels.clone().unwrap();
    assert_eq!(
        labels["controller-revision-hash"],
        kruise_core::revision::short_hash(&w.current)
    );
}

#[test]
fn settles_to_ready_normal_pods_and_status() {
    let mut w = World::with_ready(cloneset("nginx:1", json!({})));
    assert_eq!(w.pods.len(), 3);
    for p in &w.pods {
        assert_eq!(
            p.metadata.labels.as_ref().unwrap()[LIFECYCLE_STATE_KEY],
            "Normal"
        );
    }
    let st = &w.last_plan.status;
    assert_eq!(
        (
            st.replicas,
            st.ready_replicas,
            st.available_replicas,
            st.updated_replicas
        ),
        (3, 3, 3, 3)
    );
    assert_eq!(
        (
            st.updated_ready_replicas,
            st.updated_available_replicas,
            st.expected_updated_replicas
        ),
        (3, 3, 3)
    );
    assert_eq!(st.update_revision, w.current);
    assert_eq!(st.current_revision, w.current);
    assert_eq!(st.label_selector, "app=demo");
    assert_eq!(st.observed_generation, 1);
    // Stable: nothing more to do and status unchanged.
    let p = w.plan();
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert!(!p.extra.status_changed);
}

#[test]
fn scale_max_unavailable_creates_one_at_a_time_with_min_ready_seconds() {
    let mut w = World::with_ready(cloneset("nginx:1", json!({"replicas": 1})));
    w.cs.spec.replicas = Some(4);
    w.cs.spec.min_ready_seconds = 10;
    w.cs.spec.scale_strategy.max_unavailable =
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1));
    let mut created_at = Vec::new();
    for _ in 0..60 {
        let p = w.step();
        let n = creates(&p).len();
        assert!(n <= 1, "at most one new pod at a time");
        if n == 1 {
            created_at.push(w.now);
            assert!(p.events.iter().any(|e| e.reason == "ScaleUpLimited") || created_at.len() == 3);
        }
        // never more than one unavailable
        assert!(w.pods.len() - w.available() <= 1);
    }
    assert_eq!(w.pods.len(), 4);
    for pair in created_at.windows(2) {
        assert!(pair[1].duration_since(pair[0]) > SignedDuration::from_secs(10));
    }
}

#[test]
fn a_large_scale_up_is_created_in_passes_of_at_most_max_creations_per_plan() {
    let mut w = World::with_ready(cloneset("nginx:1", json!({"replicas": 0})));
    w.cs.spec.replicas = Some(1200);
    let mut passes = Vec::new();
    while w.pods.len() < 1200 && passes.len() < 10 {
        let p = w.step();
        passes.push(creates(&p).len());
    }
    assert_eq!(passes, vec![500, 500, 200]);
    let p = w.plan();
    assert!(creates(&p).is_empty());
    assert_eq!(w.pods.len(), 1200);
}

#[test]
fn one_plan_writes_at_most_max_pod_writes_per_plan_existing_pods() {
    let written = |p: &Plan| {
        p.actions
            .iter()
            .filter(|a| !matches!(a, Action::CreatePod { .. }))
            .filter_map(Action::pod_name)
            .collect::<BTreeSet<_>>()
            .len()
    };
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"replicas": 0, "updateStrategy": {"rollingUpdate": {
            "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": "100%"}}}),
    ));
    w.cs.spec.replicas = Some(1200);
    // 1,200 new pods turn Normal (and InPlaceUpdateReady) in passes.
    let mut most = 0;
    for _ in 0..20 {
        let p = w.step();
        most = most.max(written(&p));
    }
    assert_eq!(most, MAX_POD_WRITES_PER_PLAN);
    assert_eq!(w.available(), 1200);
    // An in-place update of all of them at maxUnavailable 100%: 1,000, then the other 200.
    w.set_image("nginx:2");
    let first = w.step();
    assert_eq!(in_place(&first).len(), MAX_POD_WRITES_PER_PLAN);
    w.settle(40);
    assert_eq!(w.count_at(&rev_name(w.update_revision())), 1200);
    assert_eq!(w.available(), 1200);
}

#[test]
fn pods_to_delete_deletes_named_pod_replaces_it_and_is_truncated() {
    let mut w = World::with_ready(cloneset("nginx:1", json!({})));
    let victim = w.names()[1].clone();
    w.cs.spec.scale_strategy.pods_to_delete = vec![victim.clone()];
    let p = w.step();
    assert_eq!(deletes(&p), vec![victim.clone()]);
    let p = w.step();
    assert_eq!(creates(&p).len(), 1, "replaced without a replicas change");
    assert!(p.actions.iter().any(|a| matches!(a, Action::TruncatePodsToDelete { pods_to_delete } if pods_to_delete.is_empty())));
    w.settle(20);
    assert_eq!(w.pods.len(), 3);
    assert!(!w.names().contains(&victim));
}

#[test]
fn specified_delete_label_goes_first_on_scale_down() {
    let mut w = World::with_ready(cloneset("nginx:1", json!({"replicas": 4})));
    let names = w.names();
    let victim = names[2].clone();
    w.pod_mut(&victim)
        .unwrap()
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert(SPECIFIED_DELETE_KEY.into(), "true".into());
    w.cs.spec.replicas = Some(3);
    let p = w.step();
    assert_eq!(deletes(&p), vec![victim.clone()]);
    w.settle(20);
    assert_eq!(w.pods.len(), 3);
    assert!(!w.names().contains(&victim));
}

#[test]
fn scale_down_order_unscheduled_then_not_ready_then_cost() {
    let mut w = World::with_ready(cloneset("nginx:1", json!({"replicas": 5})));
    let names = w.names();
    // names[4]: higher deletion cost; names[3]: cost -5 (deleted before the others).
    w.pod_mut(&names[4])
        .unwrap()
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(
            "controller.kubernetes.io/pod-deletion-cost".into(),
            "100".into(),
        );
    w.pod_mut(&names[3])
        .unwrap()
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(
            "controller.kubernetes.io/pod-deletion-cost".into(),
            "-5".into(),
        );
    // names[1] not ready
    w.broken.push(names[1].clone());
    w.kubelet();
    w.cs.spec.replicas = Some(3);
    let p = w.plan();
    assert_eq!(deletes(&p), vec![names[1].clone(), names[3].clone()]);
}

#[test]
fn scale_down_deletes_old_revision_first() {
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"replicas": 4, "updateStrategy": {"rollingUpdate": {"partition": 2, "maxUnavailable": 4}}}),
    ));
    let old = w.current.clone();
    w.set_image("nginx:2");
    w.settle(20);
    let new = rev_name(w.update_revision());
    assert_eq!((w.count_at(&old), w.count_at(&new)), (2, 2));
    // partition 0 and scale to 2: scaleDownNumOldRevision says delete old pods first.
    w.cs.spec
        .update_strategy
        .rolling_update
        .as_mut()
        .unwrap()
        .partition = Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(0));
    w.cs.spec.replicas = Some(2);
    let p = w.plan();
    let d = deletes(&p);
    assert_eq!(d.len(), 2);
    for name in d {
        assert!(
            diffs::at_revision(w.pod(&name), &old),
            "{name} should be old"
        );
    }
}

#[test]
fn recreate_update_marks_then_deletes_within_max_unavailable() {
    let mut w = World::with_ready(cloneset("nginx:1", json!({"replicas": 5})));
    w.set_image("nginx:2");
    let new = rev_name(w.update_revision());
    // 20% of 5 rounds up to 1.
    let p = w.step();
    assert_eq!(marked(&p).len(), 1);
    let p = w.step();
    assert_eq!(deletes(&p).len(), 1);
    let steps = w.settle(80);
    assert!(steps < 80);
    assert_eq!(w.count_at(&new), 5);
    assert_eq!(w.last_plan.status.current_revision, new);
}

#[test]
fn in_place_update_keeps_names_and_counts_restarts() {
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"replicas": 4, "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 2}}}),
    ));
    let before = w.names();
    w.set_image("nginx:2");
    let p = w.step();
    assert_eq!(in_place(&p).len(), 2, "maxUnavailable 2");
    assert!(
        p.actions
            .iter()
            .all(|a| !matches!(a, Action::DeletePod { .. } | Action::CreatePod { .. }))
    );
    w.settle(40);
    assert_eq!(w.names(), before);
    let new = rev_name(w.update_revision());
    assert_eq!(w.count_at(&new), 4);
    for p in &w.pods {
        let cs = &p
            .status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()[0];
        assert_eq!(cs.restart_count, 1);
        assert_eq!(cs.image, "nginx:2");
        assert_eq!(
            p.metadata.labels.as_ref().unwrap()[LIFECYCLE_STATE_KEY],
            "Normal"
        );
    }
    assert_eq!(w.last_plan.status.updated_available_replicas, 4);
}

#[test]
fn in_place_if_possible_recreates_non_image_changes_and_in_place_only_fails() {
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}}}),
    ));
    w.set_template(json!({"metadata": {"labels": {"app": "demo"}},
        "spec": {"containers": [{"name": "main", "image": "nginx:1", "command": ["sh"]}]}}));
    let p = w.plan();
    assert_eq!(marked(&p).len(), 1);

    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceOnly"}}}),
    ));
    w.set_template(json!({"metadata": {"labels": {"app": "demo"}},
        "spec": {"containers": [{"name": "main", "image": "nginx:1", "command": ["sh"]}]}}));
    let p = w.plan();
    assert!(marked(&p).is_empty() && in_place(&p).is_empty());
    let cond = p
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "FailedUpdate")
        .unwrap();
    assert_eq!(cond.status, "True");
    assert!(
        cond.message
            .contains("InPlaceOnly but can not update in-place")
    );
}

#[test]
fn partition_number_and_percent() {
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"replicas": 4, "updateStrategy": {"rollingUpdate": {"partition": 3}}}),
    ));
    let old = w.current.clone();
    w.set_image("nginx:2");
    w.settle(60);
    assert_eq!(w.count_at(&old), 3);
    assert_eq!(w.last_plan.status.expected_updated_replicas, 1);
    assert_eq!(w.last_plan.status.current_revision, old);

    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"replicas": 4, "updateStrategy": {"rollingUpdate": {"partition": "99%"}}}),
    ));
    let old = w.current.clone();
    w.set_image("nginx:2");
    w.settle(60);
    assert_eq!(w.count_at(&old), 3, "99% of 4 keeps 3 old and updates 1");
    assert_eq!(w.last_plan.status.expected_updated_replicas, 1);
}

#[test]
fn paused_stops_updates_but_not_scaling() {
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"updateStrategy": {"rollingUpdate": {"paused": true}}}),
    ));
    let old = w.current.clone();
    w.set_image("nginx:2");
    w.cs.spec.replicas = Some(4);
    w.settle(30);
    assert_eq!(w.pods.len(), 4);
    // the new pod is created at the update revision; old ones stay
    assert_eq!(w.count_at(&old), 3);
}

#[test]
fn max_surge_creates_before_deleting() {
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"replicas": 3, "updateStrategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}),
    ));
    w.set_image("nginx:2");
    let new = rev_name(w.update_revision());
    let mut max_total = 0;
    for _ in 0..80 {
        let p = w.step();
        max_total = max_total.max(w.pods.len());
        assert!(w.pods.len() <= 4);
        assert!(w.available() >= 3 || !deletes(&p).is_empty());
        if w.count_at(&new) == 3 && w.pods.len() == 3 {
            break;
        }
    }
    assert_eq!(max_total, 4);
    assert_eq!(w.count_at(&new), 3);
    assert_eq!(w.pods.len(), 3);
}

#[test]
fn pre_delete_hook_holds_pod_in_preparing_delete() {
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"lifecycle": {"preDelete": {"labelsHandler": {"hold": "true"}}}}),
    ));
    let names = w.names();
    for n in &names {
        w.pod_mut(n)
            .unwrap()
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("hold".into(), "true".into());
    }
    w.cs.spec.scale_strategy.pods_to_delete = vec![names[0].clone()];
    let p = w.step();
    assert!(deletes(&p).is_empty());
    assert_eq!(
        w.pod(&names[0]).metadata.labels.as_ref().unwrap()[LIFECYCLE_STATE_KEY],
        "PreparingDelete"
    );
    // no scale-up while hooked
    for _ in 0..3 {
        let p = w.step();
        assert!(creates(&p).is_empty());
    }
    // release the hook -> deleted, then replaced
    w.pod_mut(&names[0])
        .unwrap()
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .remove("hold");
    let p = w.step();
    assert_eq!(deletes(&p), vec![names[0].clone()]);
    w.settle(20);
    assert_eq!(w.pods.len(), 3);
}

#[test]
fn pvcs_created_reused_and_not_reused() {
    let vct = json!({"volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}],
                     "scaleStrategy": {"enablePVCReuse": true}, "replicas": 1});
    let mut w = World::new(cloneset("nginx:1", vct.clone()));
    let p = w.plan();
    match &p.actions[0] {
        Action::CreatePod { pod, pvcs } => {
            assert_eq!(pvcs.len(), 1);
            assert_eq!(pvcs[0].metadata.name.as_deref(), Some("data-demo-i0000"));
            assert_eq!(
                pvcs[0].metadata.labels.as_ref().unwrap()[CLONESET_INSTANCE_ID_KEY],
                "i0000"
            );
            let vol = pod
                .spec
                .as_ref()
                .unwrap()
                .volumes
                .as_ref()
                .unwrap()
                .iter()
                .find(|v| v.name == "data")
                .unwrap();
            assert_eq!(
                vol.persistent_volume_claim.as_ref().unwrap().claim_name,
                "data-demo-i0000"
            );
        }
        other => panic!("{other:?}"),
    }
    w.settle(20);
    // The pod vanishes outside the controller: its PVC stays and its id is reused.
    w.pods.clear();
    let p = w.plan();
    let c = creates(&p);
    assert_eq!(c[0].metadata.name.as_deref(), Some("demo-i0000"));
    assert!(matches!(&p.actions[0], Action::CreatePod { pvcs, .. } if pvcs.is_empty()));

    // Without reuse the orphan PVC is deleted and a new id is used.
    let mut no_reuse = vct;
    no_reuse["scaleStrategy"]["enablePVCReuse"] = json!(false);
    let mut w = World::new(cloneset("nginx:1", no_reuse));
    w.settle(20);
    w.pods.clear();
    let p = w.plan();
    assert!(
        p.actions
            .iter()
            .any(|a| matches!(a, Action::DeletePvc { name } if name == "data-demo-i0000"))
    );
    assert_ne!(creates(&p)[0].metadata.name.as_deref(), Some("demo-i0000"));
}

#[test]
fn controller_deletes_take_the_pvcs_with_them() {
    let vct = json!({"volumeClaimTemplates": [{"metadata": {"name": "data"}}], "replicas": 2});
    let mut w = World::with_ready(cloneset("nginx:1", vct));
    w.cs.spec.replicas = Some(1);
    let p = w.plan();
    match p
        .actions
        .iter()
        .find(|a| matches!(a, Action::DeletePod { .. }))
        .unwrap()
    {
        Action::DeletePod { name, pvcs } => assert_eq!(pvcs, &vec![format!("data-{name}")]),
        _ => unreachable!(),
    }
}

#[test]
fn partition_rollback_gate_moves_updated_pods_back() {
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"replicas": 4, "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 4}}}),
    ));
    let old = w.current.clone();
    w.set_image("nginx:2");
    // Half-way: partition 2.
    w.cs.spec
        .update_strategy
        .rolling_update
        .as_mut()
        .unwrap()
        .partition = Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(2));
    w.settle(40);
    assert_eq!(w.count_at(&old), 2);
    // Raise the partition to 4: without the gate nothing moves back.
    w.cs.spec
        .update_strategy
        .rolling_update
        .as_mut()
        .unwrap()
        .partition = Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(4));
    w.settle(40);
    assert_eq!(w.count_at(&old), 2);
    w.gates.partition_rollback = true;
    w.settle(40);
    assert_eq!(w.count_at(&old), 4);
}

#[test]
fn on_delete_only_updates_recreated_pods() {
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"replicas": 3, "updateStrategy": {"type": "OnDelete"}}),
    ));
    w.set_image("nginx:2");
    let new = rev_name(w.update_revision());
    w.settle(20);
    assert_eq!(w.count_at(&new), 0);
    let victim = w.names()[0].clone();
    w.pods
        .retain(|p| p.metadata.name.as_deref() != Some(victim.as_str()));
    w.settle(20);
    assert_eq!(w.count_at(&new), 1);
}

#[test]
fn released_pods_and_history() {
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"revisionHistoryLimit": 1, "replicas": 1}),
    ));
    let name = w.names()[0].clone();
    w.pod_mut(&name)
        .unwrap()
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("app".into(), "other".into());
    let p = w.plan();
    assert!(p.actions.contains(&Action::ReleasePod { name }));
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"revisionHistoryLimit": 0, "replicas": 1}),
    ));
    let first = w.current.clone();
    w.set_image("nginx:2");
    w.settle(20);
    w.set_image("nginx:3");
    w.settle(30);
    // The two old revisions are gone (limit 0), the live one stays.
    assert_eq!(w.revisions.len(), 1);
    assert_ne!(rev_name(&w.revisions[0]), first);
}

#[test]
fn progressing_condition() {
    let mut w = World::with_ready(cloneset("nginx:1", json!({"progressDeadlineSeconds": 30})));
    let cond = w
        .last_plan
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "Progressing")
        .unwrap();
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("True", "CloneSetAvailable")
    );
    w.broken_images = vec!["nginx:2".into()];
    w.set_image("nginx:2");
    for _ in 0..30 {
        w.step();
    }
    let cond = w
        .last_plan
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "Progressing")
        .unwrap();
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("False", "ProgressDeadlineExceeded")
    );
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"progressDeadlineSeconds": 2147483647}),
    ));
    w.settle(5);
    assert!(w.last_plan.status.conditions.is_empty());
}

#[test]
fn expectations_unsatisfied_does_nothing() {
    let w = World::new(cloneset("nginx:1", json!({})));
    let rev = w.update_revision().clone();
    let p = plan(&PlanInput {
        cloneset: &w.cs,
        pods: &[],
        pvcs: &[],
        current_revision: &rev,
        update_revision: &rev,
        revisions: std::slice::from_ref(&rev),
        now: w.now,
        gates: PlanGates::default(),
        instance_ids: &["a".into()],
        scale_expectations: &Satisfaction::Pending {
            waited: SignedDuration::from_secs(1),
            remaining: SignedDuration::from_secs(299),
        },
    });
    assert!(p.actions.is_empty());
    assert!(!p.extra.status_changed);
}

fn state(w: &World, name: &str) -> String {
    w.pod(name).metadata.labels.as_ref().unwrap()[LIFECYCLE_STATE_KEY].clone()
}

fn set_label(w: &mut World, name: &str, k: &str, v: Option<&str>) {
    let labels = w.pod_mut(name).unwrap().metadata.labels.as_mut().unwrap();
    match v {
        Some(v) => labels.insert(k.into(), v.into()),
        None => labels.remove(k),
    };
}

#[test]
fn in_place_update_hook_protocol() {
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"replicas": 1,
        "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}},
        "lifecycle": {"inPlaceUpdate": {"labelsHandler": {"hold": "true"}}}}),
    ));
    let name = w.names()[0].clone();
    set_label(&mut w, &name, "hold", Some("true"));
    w.set_image("nginx:2");
    let p = w.step();
    assert!(in_place(&p).is_empty());
    assert_eq!(state(&w, &name), "PreparingUpdate");
    for _ in 0..3 {
        let p = w.step();
        assert!(in_place(&p).is_empty(), "waits while hooked");
    }
    set_label(&mut w, &name, "hold", None);
    let p = w.step();
    assert_eq!(in_place(&p), vec![name.clone()]);
    w.step();
    w.step();
    assert_eq!(state(&w, &name), "Updated", "hook not re-added yet");
    set_label(&mut w, &name, "hold", Some("true"));
    w.settle(10);
    assert_eq!(state(&w, &name), "Normal");
}

#[test]
fn pre_normal_hook_holds_new_pods() {
    let mut w = World::new(cloneset(
        "nginx:1",
        json!({"replicas": 1,
        "lifecycle": {"preNormal": {"finalizersHandler": ["example.io/ready"]}}}),
    ));
    w.settle(10);
    let name = w.names()[0].clone();
    assert_eq!(state(&w, &name), "PreparingNormal");
    assert_eq!(w.last_plan.status.available_replicas, 0);
    w.pod_mut(&name).unwrap().metadata.finalizers = Some(vec!["example.io/ready".into()]);
    w.settle(10);
    assert_eq!(state(&w, &name), "Normal");
    assert_eq!(w.last_plan.status.available_replicas, 1);
}

#[test]
fn pre_deleting_pod_is_rescued_when_replicas_come_back() {
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"replicas": 3,
        "lifecycle": {"preDelete": {"labelsHandler": {"hold": "true"}}}}),
    ));
    for n in w.names() {
        set_label(&mut w, &n, "hold", Some("true"));
    }
    w.cs.spec.replicas = Some(2);
    w.step();
    let held: Vec<String> = w
        .names()
        .into_iter()
        .filter(|n| state(&w, n) == "PreparingDelete")
        .collect();
    assert_eq!(held.len(), 1);
    w.cs.spec.replicas = Some(3);
    let p = w.step();
    assert!(
        creates(&p).is_empty(),
        "the held pod is brought back instead of creating one"
    );
    assert_eq!(state(&w, &held[0]), "PreparingNormal");
    w.settle(10);
    assert_eq!(state(&w, &held[0]), "Normal");
    assert_eq!(w.pods.len(), 3);
}

#[test]
fn exclude_preparing_delete_creates_a_replacement_while_hooked() {
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"replicas": 3,
        "scaleStrategy": {"excludePreparingDelete": true},
        "lifecycle": {"preDelete": {"labelsHandler": {"hold": "true"}}}}),
    ));
    for n in w.names() {
        set_label(&mut w, &n, "hold", Some("true"));
    }
    let victim = w.names()[0].clone();
    w.cs.spec.scale_strategy.pods_to_delete = vec![victim.clone()];
    w.cs.spec.replicas = Some(2);
    w.step();
    assert_eq!(state(&w, &victim), "PreparingDelete");
    w.cs.spec.replicas = Some(3);
    w.settle(10);
    assert_eq!(
        w.last_plan.status.replicas, 4,
        "new pod created while the hooked one waits"
    );
    set_label(&mut w, &victim, "hold", None);
    w.settle(10);
    assert_eq!(w.pods.len(), 3);
    assert!(!w.names().contains(&victim));
}

#[test]
fn priority_strategy_orders_updates() {
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"replicas": 3,
        "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1,
            "priorityStrategy": {"weightPriority": [{"weight": 50, "matchSelector": {"matchLabels": {"tier": "canary"}}}]}}}}),
    ));
    let canary = w.names()[2].clone();
    set_label(&mut w, &canary, "tier", Some("canary"));
    w.set_image("nginx:2");
    let p = w.plan();
    assert_eq!(in_place(&p), vec![canary]);
}

#[test]
fn grace_period_delays_the_image_change() {
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"replicas": 1,
        "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible",
            "inPlaceUpdateStrategy": {"gracePeriodSeconds": 10}}}}),
    ));
    let name = w.names()[0].clone();
    w.set_image("nginx:2");
    let p = w.step();
    assert_eq!(in_place(&p), vec![name.clone()]);
    assert_eq!(p.requeue_after, Some(std::time::Duration::from_secs(10)));
    let image = |w: &World| {
        w.pod(&name).spec.as_ref().unwrap().containers[0]
            .image
            .clone()
            .unwrap()
    };
    assert_eq!(
        image(&w),
        "nginx:1",
        "spec unchanged during the grace period"
    );
    assert!(
        w.pod(&name)
            .metadata
            .annotations
            .as_ref()
            .unwrap()
            .contains_key("apps.kruise.io/inplace-update-grace")
    );
    w.now += SignedDuration::from_secs(10);
    w.settle(20);
    assert_eq!(image(&w), "nginx:2");
    assert_eq!(state(&w, &name), "Normal");
}

#[test]
fn unavailable_pod_without_replicas_change_is_replaced() {
    let mut w = World::with_ready(cloneset("nginx:1", json!({"replicas": 3})));
    let gone = w.names()[0].clone();
    w.pods
        .retain(|p| p.metadata.name.as_deref() != Some(gone.as_str()));
    let p = w.plan();
    assert_eq!(creates(&p).len(), 1);
}

#[test]
fn success_events_use_openkruise_reasons() {
    let mut w = World::new(cloneset("nginx:1", json!({"replicas": 1})));
    let p = w.plan();
    let event = p.actions[0].success_event().unwrap();
    assert_eq!(
        (event.type_, event.reason.as_str()),
        (EventType::Normal, "SuccessfulCreate")
    );
    assert_eq!(event.message, "succeed to create pod demo-i0000");
    let d = Action::DeletePod {
        name: "x".into(),
        pvcs: vec![],
    };
    assert_eq!(
        d.success_event().unwrap().message,
        "succeed to delete pod x"
    );
}

#[test]
fn deleted_old_pod_is_recreated_at_the_current_revision_under_partition() {
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"replicas": 4, "updateStrategy": {"rollingUpdate": {"partition": 3}}}),
    ));
    let old = w.current.clone();
    w.set_image("nginx:2");
    w.settle(60);
    assert_eq!(w.count_at(&old), 3);
    let victim = w
        .pods
        .iter()
        .find(|p| diffs::at_revision(p, &old))
        .unwrap()
        .metadata
        .name
        .clone()
        .unwrap();
    w.pods
        .retain(|p| p.metadata.name.as_deref() != Some(victim.as_str()));
    let p = w.plan();
    let c = creates(&p);
    assert_eq!(c.len(), 1);
    assert_eq!(
        c[0].metadata.labels.as_ref().unwrap()["controller-revision-hash"],
        old
    );
    assert_eq!(
        c[0].spec.as_ref().unwrap().containers[0].image.as_deref(),
        Some("nginx:1")
    );
}

#[test]
fn scatter_strategy_spreads_updates() {
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"replicas": 4,
        "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 2,
            "scatterStrategy": [{"key": "zone", "value": "a"}]}}}),
    ));
    let names = w.names();
    set_label(&mut w, &names[0], "zone", Some("a"));
    set_label(&mut w, &names[1], "zone", Some("a"));
    w.set_image("nginx:2");
    let p = w.plan();
    let chosen = in_place(&p);
    assert_eq!(chosen.len(), 2);
    let zone_a = chosen
        .iter()
        .filter(|n| *n == &names[0] || *n == &names[1])
        .count();
    assert_eq!(
        zone_a, 1,
        "one pod of zone a and one other first: {chosen:?}"
    );
}

#[test]
fn expired_expectations_are_reported_and_do_not_block() {
    let w = World::new(cloneset("nginx:1", json!({"replicas": 2})));
    let rev = w.update_revision().clone();
    let ids = ["a0000".to_string(), "b0000".to_string()];
    let p = plan(&PlanInput {
        cloneset: &w.cs,
        pods: &[],
        pvcs: &[],
        current_revision: &rev,
        update_revision: &rev,
        revisions: std::slice::from_ref(&rev),
        now: w.now,
        gates: PlanGates::default(),
        instance_ids: &ids,
        scale_expectations: &Satisfaction::Expired {
            waited: SignedDuration::from_secs(301),
        },
    });
    assert_eq!(creates(&p).len(), 2);
    assert_eq!(
        p.extra.expectations_expired,
        Some(SignedDuration::from_secs(301))
    );
    assert!(
        p.events
            .iter()
            .any(|e| e.reason == "ScaleExpectationsExpired" && e.type_ == EventType::Warning)
    );
    let cond = |status: &crate::api::CloneSetStatus| {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == "ScaleExpectationsExpired")
            .map(|c| (c.status.clone(), c.reason.clone()))
    };
    assert_eq!(
        cond(&p.status),
        Some(("True".into(), "ScaleExpectationsExpired".into())),
        "kubectl shows the expiry as a condition"
    );
    assert!(p.extra.status_changed);
    // Satisfied again: the condition turns False.
    let mut cs = w.cs.clone();
    cs.status = Some(p.status.clone());
    let again = plan(&PlanInput {
        cloneset: &cs,
        pods: &[],
        pvcs: &[],
        current_revision: &rev,
        update_revision: &rev,
        revisions: std::slice::from_ref(&rev),
        now: w.now,
        gates: PlanGates::default(),
        instance_ids: &ids,
        scale_expectations: &Satisfaction::Satisfied,
    });
    assert_eq!(
        cond(&again.status),
        Some(("False".into(), "ScaleExpectationsSatisfied".into()))
    );
}

#[test]
fn deleting_cloneset_touches_no_pods() {
    let mut w = World::with_ready(cloneset("nginx:1", json!({"replicas": 3})));
    w.cs.metadata.deletion_timestamp = Some(Time(w.now));
    w.cs.spec.replicas = Some(1);
    w.set_image("nginx:2");
    let p = w.plan();
    assert!(
        p.actions.iter().all(|a| a.pod_name().is_none()),
        "{:?}",
        p.actions
    );
    assert_eq!(p.status.replicas, 3);
}

#[test]
fn without_rolling_update_max_unavailable_is_20_percent_rounded_down() {
    for (replicas, want) in [(2, 0), (5, 1), (10, 2)] {
        let mut w = World::with_ready(cloneset("nginx:1", json!({"replicas": replicas})));
        w.cs.spec.update_strategy.rolling_update = None;
        w.set_image("nginx:2");
        let p = w.plan();
        assert_eq!(marked(&p).len(), want, "replicas {replicas}");
    }
}

#[test]
fn scale_to_zero_deletes_each_pod_once() {
    let mut w = World::with_ready(cloneset("nginx:1", json!({"replicas": 50})));
    w.cs.spec.replicas = Some(0);
    let p = w.plan();
    let mut names = deletes(&p);
    let n = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), n, "a pod deleted twice in one plan");
    assert_eq!(n, 50);
}

#[test]
fn terminating_pods_are_not_deleted_again() {
    let mut w = World::with_ready(cloneset("nginx:1", json!({"replicas": 5})));
    w.cs.spec.replicas = Some(0);
    for name in w.names() {
        w.pod_mut(&name).unwrap().metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-11-24T00:00:00Z".parse().unwrap(),
            ));
    }
    let p = w.plan();
    assert_eq!(deletes(&p), Vec::<String>::new());
}

#[test]
fn a_mark_pod_not_ready_hook_plans_the_kruise_pod_ready_change_at_the_plan_time() {
    let mut w = World::with_ready(cloneset(
        "nginx:1",
        json!({"lifecycle": {"preDelete": {
            "markPodNotReady": true, "labelsHandler": {"hold": "true"}}}}),
    ));
    let names = w.names();
    for n in &names {
        let pod = w.pod_mut(n).unwrap();
        pod.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("hold".into(), "true".into());
        // The gate kruise-webhook adds to every CloneSet pod.
        pod.spec
            .as_mut()
            .unwrap()
            .readiness_gates
            .get_or_insert_with(Vec::new)
            .push(k8s_openapi::api::core::v1::PodReadinessGate {
                condition_type: "KruisePodReady".into(),
            });
    }
    w.cs.spec.scale_strategy.pods_to_delete = vec![names[0].clone()];
    let p = w.plan();
    // One write: the lifecycle labels with the status, computed at the plan's time.
    let status = p
        .actions
        .iter()
        .find_map(|a| match a {
            Action::SetLifecycleState { name, status, .. } if *name == names[0] => status.clone(),
            _ => None,
        })
        .expect("the lifecycle write carries the status");
    let condition = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "KruisePodReady")
        .unwrap();
    assert_eq!(condition.status, "False");
    assert_eq!(condition.last_transition_time.map(|t| t.0), Some(w.now));
    assert!(
        !p.actions
            .iter()
            .any(|a| matches!(a, Action::UpdatePodStatus { name, .. } if *name == names[0])),
        "{:?}",
        p.actions
    );
}
