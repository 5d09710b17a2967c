use super::testutil::*;
use super::*;
use crate::revision::controller_owner_ref;
use k8s_openapi::api::core::v1::Pod;

#[test]
fn readiness_and_availability_against_now() {
    let p = pod("a").ready_at(100).0;
    assert!(is_pod_ready(&p));
    assert!(is_pod_available(&p, 0, ts(100)));
    assert!(
        !is_pod_available(&p, 10, ts(110)),
        "exactly minReadySeconds is not yet available"
    );
    assert!(is_pod_available(&p, 10, ts(111)));
    assert_eq!(
        available_in(&p, 10, ts(105)),
        Some(SignedDuration::from_secs(6))
    );
    assert_eq!(available_in(&p, 10, ts(200)), None);
    let nr = pod("b").cond("Ready", "False", Some(1)).0;
    assert!(!is_pod_ready(&nr) && !is_pod_available(&nr, 0, ts(0)));
    let no_time = pod("c").cond("Ready", "True", None).0;
    assert!(is_pod_available(&no_time, 0, ts(0)));
    assert!(!is_pod_available(&no_time, 5, ts(0)));
}

#[test]
fn pod_facts() {
    let p = pod("a")
        .node("n1")
        .restarts(4)
        .label("controller-revision-hash", "cs-abc")
        .label("lifecycle.apps.kruise.io/state", "PreparingUpdate")
        .cond("PodScheduled", "True", None)
        .0;
    assert!(is_scheduled(&p) && has_pod_scheduled_condition(&p) && is_pod_active(&p));
    assert_eq!(max_container_restarts(&p), 4);
    assert_eq!(pod_revision(&p), Some("cs-abc"));
    assert!(is_pod_updated(&p, "cs-abc", false));
    assert!(is_pod_updated(&p, "other-abc", false), "short hash match");
    assert!(!is_pod_updated(&p, "cs-def", false));
    assert!(
        is_pod_updated(&p, "cs-def", true),
        "PreparingUpdateAsUpdate"
    );
    assert!(!is_pod_active(&pod("f").phase("Failed").0));
    for (v, want) in [
        ("5", 5),
        ("-3", -3),
        ("0", 0),
        ("+1", 0),
        ("007", 0),
        ("x", 0),
        ("99999999999", 0),
    ] {
        assert_eq!(
            deletion_cost(
                &pod("d")
                    .annotation("controller.kubernetes.io/pod-deletion-cost", v)
                    .0
            ),
            want,
            "{v}"
        );
    }
    let set = BTreeSet::from(["a".to_string()]);
    assert!(is_specified_delete(&pod("a").0, &set));
    assert!(is_specified_delete(
        &pod("z").label("apps.kruise.io/specified-delete", "").0,
        &BTreeSet::new()
    ));
    assert!(!is_specified_delete(&pod("z").0, &set));
}

#[test]
fn owner_matching_and_claim() {
    let mut p = pod("a").0;
    p.metadata.owner_references = Some(vec![controller_owner_ref(
        "apps.kruise.io/v1alpha1",
        "CloneSet",
        "cs",
        "u1",
    )]);
    let o = controller_ref(&p.metadata).unwrap();
    assert!(
        owner_ref_matches(o, "apps.kruise.io", "CloneSet"),
        "group-only check accepts v1alpha1"
    );
    assert!(!owner_ref_matches(o, "apps", "CloneSet"));
    assert_eq!(api_group("v1"), "");
    assert_eq!(claim(&p.metadata, "u1", true, false), ClaimDecision::Owned);
    assert_eq!(
        claim(&p.metadata, "u1", false, false),
        ClaimDecision::Release
    );
    assert_eq!(claim(&p.metadata, "u1", false, true), ClaimDecision::Owned);
    assert_eq!(claim(&p.metadata, "u2", true, false), ClaimDecision::Ignore);
    assert_eq!(
        claim(&pod("orphan").0.metadata, "u1", true, false),
        ClaimDecision::Ignore
    );
}

#[test]
fn status_patch_carries_only_changed_conditions_and_metadata() {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p"},
        "status": {"conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "InPlaceUpdateReady", "status": "True"},
        ]},
    }))
    .unwrap();
    let mut status = pod.status.clone().unwrap();
    status.conditions.as_mut().unwrap()[1].status = "False".into();
    let meta = serde_json::json!({"metadata": {"labels": {"a": "b"}}});
    let patch = status_patch(&pod, &status, &meta).unwrap().unwrap();
    assert_eq!(patch["metadata"]["labels"]["a"], "b");
    let conds = patch["status"]["conditions"].as_array().unwrap();
    assert_eq!(conds.len(), 1);
    assert_eq!(conds[0]["type"], "InPlaceUpdateReady");
    assert_eq!(conds[0]["status"], "False");
    assert_eq!(conds[0]["reason"], serde_json::Value::Null, "{patch}");
    assert!(conds[0].as_object().unwrap().contains_key("reason"));
    // Unchanged status and no metadata: nothing to write.
    assert_eq!(
        status_patch(&pod, pod.status.as_ref().unwrap(), &serde_json::Value::Null).unwrap(),
        None
    );
}
