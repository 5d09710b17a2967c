//! Lifecycle hooks `preDelete` and `preNormal`, and `markPodNotReady`.

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
