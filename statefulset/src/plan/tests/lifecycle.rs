//! Lifecycle hooks `preDelete`, `preNormal` and `inPlaceUpdate`, and `markPodNotReady`.

use k8s_openapi::api::core::v1::PodReadinessGate;

use super::*;

fn state(w: &World, pod: &str) -> String {
    w.pods[pod].metadata.labels.as_ref().unwrap()["lifecycle.apps.kruise.io/state"].clone()
}

fn label(w: &mut World, pod: &str, key: &str, value: Option<&str>) {
    let labels = w
        .pods
        .get_mut(pod)
        .unwrap()
        .metadata
        .labels
        .get_or_insert_with(Default::default);
    match value {
        Some(v) => labels.insert(key.into(), v.into()),
        None => labels.remove(key),
    };
}

#[test]
fn pre_delete_holds_a_condemned_pod_in_preparing_delete_until_its_hook_is_gone() {
    let mut set = statefulset(
        "nginx:1",
        json!({"lifecycle": {"preDelete": {"labelsHandler": {"hold": "true"}}}}),
    );
    set.spec
        .template
        .metadata
        .get_or_insert_with(Default::default)
        .labels
        .get_or_insert_with(Default::default)
        .insert("hold".into(), "true".into());
    let mut w = World::ready(set);
    w.set.spec.replicas = Some(2);
    for _ in 0..3 {
        let p = w.step();
        assert!(deletes(&p).is_empty(), "{:?}", p.actions);
    }
    assert_eq!(state(&w, "demo-2"), "PreparingDelete");
    assert_eq!(w.names(), strings(&["demo-0", "demo-1", "demo-2"]));
    label(&mut w, "demo-2", "hold", None);
    assert_eq!(
        deletes(&w.step()),
        vec![("demo-2".to_string(), DeleteReason::Condemned)]
    );
}

#[test]
fn pre_delete_with_mark_pod_not_ready_writes_kruise_pod_ready_false_with_the_state() {
    let mut w = World::ready(statefulset(
        "nginx:1",
        json!({"lifecycle": {"preDelete": {"labelsHandler": {"hold": "true"}, "markPodNotReady": true}}}),
    ));
    // The pod carries the KruisePodReady gate the pod webhook adds, and the condition.
    let pod = w.pods.get_mut("demo-2").unwrap();
    pod.spec
        .as_mut()
        .unwrap()
        .readiness_gates
        .get_or_insert_with(Default::default)
        .push(PodReadinessGate {
            condition_type: "KruisePodReady".into(),
        });
    pod.status
        .as_mut()
        .unwrap()
        .conditions
        .get_or_insert_with(Default::default)
        .push(PodCondition {
            type_: "KruisePodReady".into(),
            status: "True".into(),
            ..Default::default()
        });
    label(&mut w, "demo-2", "hold", Some("true"));
    w.set.spec.replicas = Some(2);
    let p = w.plan();
    let write = p.actions.iter().find_map(|a| match a {
        Action::UpdatePodStatus {
            name,
            status,
            metadata,
        } if name == "demo-2" => Some((status.clone(), metadata.clone())),
        _ => None,
    });
    let (status, metadata) = write.expect("one status write with the state");
    let condition = &status.conditions.unwrap()[0];
    assert_eq!(
        (condition.type_.as_str(), condition.status.as_str()),
        ("KruisePodReady", "False")
    );
    assert_eq!(
        condition.message.as_deref(),
        Some(r#"[{"userAgent":"Lifecycle","key":"preDeleteHook"}]"#)
    );
    assert_eq!(
        metadata.unwrap()["metadata"]["labels"]["lifecycle.apps.kruise.io/state"],
        "PreparingDelete"
    );
}

#[test]
fn pre_normal_keeps_a_new_pod_preparing_normal_and_ordered_ready_waits_for_it() {
    let mut w = World::new(statefulset(
        "nginx:1",
        json!({"lifecycle": {"preNormal": {"labelsHandler": {"warm": "true"}}}}),
    ));
    for _ in 0..4 {
        w.step();
    }
    assert_eq!(w.names(), strings(&["demo-0"]));
    assert_eq!(state(&w, "demo-0"), "PreparingNormal");
    // The hook's label arrives: Normal, then the next ordinal.
    label(&mut w, "demo-0", "warm", Some("true"));
    w.step();
    assert_eq!(state(&w, "demo-0"), "Normal");
    w.step();
    assert_eq!(w.names(), strings(&["demo-0", "demo-1"]));
    // A template that carries the hook starts pods Normal.
    let mut carried = statefulset(
        "nginx:1",
        json!({"lifecycle": {"preNormal": {"labelsHandler": {"warm": "true"}}}}),
    );
    carried
        .spec
        .template
        .metadata
        .get_or_insert_with(Default::default)
        .labels
        .get_or_insert_with(Default::default)
        .insert("warm".into(), "true".into());
    let w = World::ready(carried);
    assert_eq!(state(&w, "demo-2"), "Normal");
}

/// Sets the template (a new generation) and syncs the revisions, as an edit does.
fn set_template(w: &mut World, template: k8s_openapi::api::core::v1::PodTemplateSpec) {
    w.set.spec.template = template;
    w.set.metadata.generation = Some(w.set.metadata.generation.unwrap_or(1) + 1);
    w.sync_revisions();
}

/// K#1156, K#1183: a pod held in `PreparingUpdate` by the `inPlaceUpdate` hook goes back to
/// `Normal` when the template is rolled back to its revision, without being updated.
#[test]
fn a_rollback_releases_a_pod_held_in_preparing_update_back_to_normal() {
    let mut set = statefulset(
        "nginx:1",
        json!({"lifecycle": {"inPlaceUpdate": {"labelsHandler": {"hold": "true"}}},
               "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}}}),
    );
    set.spec
        .template
        .metadata
        .get_or_insert_with(Default::default)
        .labels
        .get_or_insert_with(Default::default)
        .insert("hold".into(), "true".into());
    let mut w = World::ready(set);
    let uids: Vec<Option<String>> = w.pods.values().map(|p| p.metadata.uid.clone()).collect();
    let original = w.revision_of("demo-2");
    // The image changes and the template keeps its hook label.
    let before = w.set.spec.template.clone();
    let mut changed = before.clone();
    changed.spec.as_mut().unwrap().containers[0].image = Some("nginx:2".into());
    set_template(&mut w, changed);
    for _ in 0..3 {
        let p = w.step();
        assert!(in_place(&p).is_empty(), "held by the hook: {:?}", p.actions);
    }
    assert_eq!(state(&w, "demo-2"), "PreparingUpdate");
    set_template(&mut w, before);
    w.settle(10);
    for name in ["demo-0", "demo-1", "demo-2"] {
        assert_eq!(state(&w, name), "Normal", "{name}");
        assert_eq!(w.revision_of(name), original, "{name}");
        assert!(w.is_ready(name), "{name}");
        let restarts = w.pods[name]
            .status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()[0]
            .restart_count;
        assert_eq!(restarts, 0, "{name} restarted");
    }
    let after: Vec<Option<String>> = w.pods.values().map(|p| p.metadata.uid.clone()).collect();
    assert_eq!(after, uids);
    assert!(
        w.plans
            .iter()
            .all(|p| in_place(p).is_empty() && deletes(p).is_empty())
    );
}
