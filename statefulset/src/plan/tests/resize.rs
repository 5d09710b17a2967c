//! `volumeClaimUpdateStrategy: OnPodRollingUpdate` and `status.volumeClaims`.

use super::*;

/// A Parallel set of 3 with claim template `data` of `size` in class `class`, resized on
/// rolling update, updated in place.
fn resizing(size: &str, class: &str) -> StatefulSet {
    statefulset(
        "nginx:1",
        json!({
            "podManagementPolicy": "Parallel",
            "volumeClaimUpdateStrategy": {"type": "OnPodRollingUpdate"},
            "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                "accessModes": ["ReadWriteOnce"], "storageClassName": class,
                "resources": {"requests": {"storage": size}}}}],
        }),
    )
}

/// The toy binder: every claim bound, capacity up to its request (when `expand`).
fn bind(w: &mut World, expand: bool) {
    for claim in w.claims.values_mut() {
        let request = claim
            .spec
            .as_ref()
            .unwrap()
            .resources
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap()["storage"]
            .clone();
        let status = claim.status.get_or_insert_with(Default::default);
        let capacity = status.capacity.get_or_insert_with(Default::default);
        if expand || !capacity.contains_key("storage") {
            capacity.insert("storage".into(), request);
        }
    }
}

fn world(class: &str, expandable: bool) -> World {
    let mut w = World::new(resizing("1Gi", class));
    w.gates.auto_resize_pvc = true;
    if expandable {
        w.expandable_classes.insert(class.into());
    }
    for _ in 0..10 {
        w.step();
        bind(&mut w, true);
    }
    assert_eq!(w.names(), strings(&["demo-0", "demo-1", "demo-2"]));
    w
}

fn raise(w: &mut World, size: &str) {
    w.set.spec.volume_claim_templates[0]
        .spec
        .as_mut()
        .unwrap()
        .resources
        .as_mut()
        .unwrap()
        .requests
        .as_mut()
        .unwrap()
        .insert(
            "storage".into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity(size.into()),
        );
}

fn expands(p: &Plan) -> Vec<String> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::ExpandClaim { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn claims_are_expanded_before_their_pod_is_updated_in_place() {
    let mut w = world("elastic", true);
    assert_eq!(
        w.set.status.as_ref().unwrap().volume_claims,
        vec![crate::api::VolumeClaimStatus {
            volume_claim_name: "data".into(),
            compatible_replicas: 3,
            compatible_ready_replicas: 3
        }]
    );
    raise(&mut w, "2Gi");
    w.set_image("nginx:2");
    let p = w.step();
    // maxUnavailable 1: the highest ordinal's claim first, the pod not yet touched.
    assert_eq!(expands(&p), strings(&["data-demo-2"]));
    assert!(in_place(&p).is_empty() && deletes(&p).is_empty());
    let Some(Action::ExpandClaim { patch, .. }) = p
        .actions
        .iter()
        .find(|a| matches!(a, Action::ExpandClaim { .. }))
    else {
        panic!()
    };
    assert_eq!(patch["spec"]["resources"]["requests"]["storage"], "2Gi");
    assert_eq!(
        patch["metadata"]["annotations"]["apps.kruise.io/owned-by-asts"],
        "demo"
    );
    // Only data-demo-2 asks for 2Gi, and it has yet to get it.
    let counts = w.plan().status.volume_claims[0].clone();
    assert_eq!(
        (counts.compatible_replicas, counts.compatible_ready_replicas),
        (1, 0)
    );
    // Not expanded yet: the pod waits.
    assert!(in_place(&w.step()).is_empty());
    bind(&mut w, true);
    assert_eq!(in_place(&w.step()), strings(&["demo-2"]));
    for _ in 0..30 {
        w.step();
        bind(&mut w, true);
    }
    assert!(w.claims.values().all(|c| {
        c.spec
            .as_ref()
            .unwrap()
            .resources
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap()["storage"]
            .0
            == "2Gi"
    }));
    for name in ["demo-0", "demo-1", "demo-2"] {
        assert_eq!(w.revision_of(name), w.update_revision());
    }
    assert_eq!(
        *w.created.values().max().unwrap(),
        1,
        "no pod was recreated"
    );
}

#[test]
fn a_class_that_cannot_expand_is_a_failed_update_pvc_event_and_the_rollout_waits() {
    let mut w = world("fixed", false);
    raise(&mut w, "2Gi");
    w.set_image("nginx:2");
    let p = w.step();
    assert!(expands(&p).is_empty() && in_place(&p).is_empty() && deletes(&p).is_empty());
    assert_eq!(p.events.len(), 1);
    assert_eq!(
        (p.events[0].type_, p.events[0].reason.as_str()),
        (kruise_core::plan::EventType::Warning, "FailedUpdatePVC")
    );
    assert!(
        p.events[0].message.contains("data-demo-2"),
        "{}",
        p.events[0].message
    );
    // Deleting the claim lets the pod go on.
    w.claims.remove("data-demo-2");
    assert_eq!(in_place(&w.step()), strings(&["demo-2"]));
}

#[test]
fn without_the_gate_or_with_on_delete_claims_are_left_alone() {
    let mut w = world("elastic", true);
    w.gates.auto_resize_pvc = false;
    raise(&mut w, "2Gi");
    w.set_image("nginx:2");
    let p = w.step();
    assert!(expands(&p).is_empty());
    assert_eq!(in_place(&p), strings(&["demo-2"]));
    // The status counts claims whatever the strategy: none is compatible with 2Gi.
    assert_eq!(p.status.volume_claims[0].compatible_replicas, 0);

    let mut on_delete = world("elastic", true);
    on_delete.set.spec.volume_claim_update_strategy.type_ =
        Some(crate::api::VolumeClaimUpdateStrategyType::OnDelete);
    raise(&mut on_delete, "2Gi");
    assert!(expands(&on_delete.step()).is_empty());
}

#[test]
fn claim_comparisons_follow_openkruise() {
    let claim = |class: &str,
                 modes: &[&str],
                 request: &str,
                 capacity: Option<&str>|
     -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "spec": {"storageClassName": class, "accessModes": modes,
                     "resources": {"requests": {"storage": request}}},
            "status": capacity.map(|c| json!({"capacity": {"storage": c}})),
        }))
        .unwrap()
    };
    let template = claim("a", &["ReadWriteOnce"], "2Gi", None);
    // (claim, compatible, ready, needs expansion)
    let cases = [
        (
            claim("a", &["ReadWriteOnce"], "2Gi", Some("2Gi")),
            true,
            true,
            false,
        ),
        (
            claim("a", &["ReadWriteOnce"], "2048Mi", Some("1Gi")),
            true,
            false,
            false,
        ),
        (
            claim("a", &["ReadWriteOnce"], "1Gi", Some("1Gi")),
            false,
            true,
            true,
        ),
        (
            claim("a", &["ReadWriteOnce"], "3Gi", Some("3Gi")),
            true,
            true,
            false,
        ),
        (
            claim("b", &["ReadWriteOnce"], "2Gi", Some("2Gi")),
            false,
            false,
            false,
        ),
        (
            claim("a", &["ReadWriteMany"], "2Gi", Some("2Gi")),
            false,
            false,
            false,
        ),
    ];
    for (c, compatible, ready, expand) in cases {
        assert_eq!(
            compatible_and_ready(&c, &template),
            (compatible, ready),
            "{c:?}"
        );
        assert_eq!(
            compatible_without_size(&c, &template) && needs_expansion(&c, &template),
            expand,
            "{c:?}"
        );
    }
}
