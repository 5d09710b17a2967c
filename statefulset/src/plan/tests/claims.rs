//! `persistentVolumeClaimRetentionPolicy` and the claims of pending pods.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::*;

const DATA: &str = r#"{"volumeClaimTemplates": [{"metadata": {"name": "data"},
    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}"#;

/// A set with one claim template, `spec` merged in.
fn with_claims(spec: Value) -> StatefulSet {
    let mut base: Value = serde_json::from_str(DATA).unwrap();
    json_patch::merge(&mut base, &spec);
    statefulset("nginx:1", base)
}

fn policy(when_deleted: &str, when_scaled: &str) -> Value {
    json!({"persistentVolumeClaimRetentionPolicy":
        {"whenDeleted": when_deleted, "whenScaled": when_scaled}})
}

fn reference(kind: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: kind.into(),
        name: uid.into(),
        uid: uid.into(),
        ..Default::default()
    }
}

fn uids(owners: &[OwnerReference]) -> Vec<&str> {
    owners.iter().map(|o| o.uid.as_str()).collect()
}

#[test]
fn owners_follow_the_policy_for_ordinals_in_and_out_of_the_window() {
    let set = reference("StatefulSet", "set");
    let pod = reference("Pod", "pod");
    let other = reference("ConfigMap", "other");
    let retain = Retention::default();
    let with_set = Retention {
        delete_with_set: true,
        delete_when_scaled: false,
    };
    let when_scaled = Retention {
        delete_with_set: false,
        delete_when_scaled: true,
    };
    let both = Retention {
        delete_with_set: true,
        delete_when_scaled: true,
    };
    // (policy, in window, current owners, wanted owners)
    let cases: Vec<(Retention, bool, Vec<&OwnerReference>, Vec<&str>)> = vec![
        (retain, true, vec![&other, &set, &pod], vec!["other"]),
        (retain, false, vec![&set], vec![]),
        (with_set, true, vec![], vec!["set"]),
        (with_set, false, vec![&pod], vec!["set"]),
        (when_scaled, true, vec![&set, &pod], vec![]),
        (when_scaled, false, vec![&set], vec!["pod"]),
        (both, true, vec![&pod], vec!["set"]),
        (both, false, vec![&other, &set], vec!["other", "pod"]),
        (both, false, vec![&pod], vec!["pod"]),
    ];
    for (retention, in_window, current, wanted) in cases {
        let current: Vec<OwnerReference> = current.into_iter().cloned().collect();
        let got = retained_owners(&current, retention, in_window, &set, &pod);
        assert_eq!(
            uids(&got),
            wanted,
            "{retention:?} in window {in_window} from {:?}",
            uids(&current)
        );
    }
}

#[test]
fn when_scaled_delete_removes_the_claims_of_scaled_away_ordinals_past_reserved_ones() {
    // K#1530 / K#746: with reserveOrdinals [1], replicas 4 run 0, 2, 3, 4; scaling to 2
    // condemns 3 and 4 (not 1 and 2).
    let mut w = World::ready(with_claims(json!({
        "replicas": 4, "reserveOrdinals": [1], "podManagementPolicy": "Parallel",
        "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Delete"},
    })));
    assert_eq!(
        w.names(),
        strings(&["demo-0", "demo-2", "demo-3", "demo-4"])
    );
    assert!(
        w.claims
            .values()
            .all(|c| c.metadata.owner_references.is_none())
    );
    w.set.spec.replicas = Some(2);
    let p = w.step();
    // The condemned pods' claims get their pod's reference before the pods go.
    let order: Vec<String> = p
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::SetClaimOwners { name, .. } => Some(format!("own {name}")),
            Action::DeletePod { name, .. } => Some(format!("delete {name}")),
            _ => None,
        })
        .collect();
    assert_eq!(
        order,
        strings(&[
            "own data-demo-4",
            "own data-demo-3",
            "delete demo-4",
            "delete demo-3"
        ])
    );
    w.settle(10);
    assert_eq!(w.names(), strings(&["demo-0", "demo-2"]));
    assert_eq!(
        w.claims.keys().cloned().collect::<Vec<_>>(),
        strings(&["data-demo-0", "data-demo-2"])
    );
}

#[test]
fn when_deleted_delete_claims_carry_the_set_from_creation_and_go_with_it() {
    let mut w = World::new(with_claims(policy("Delete", "Retain")));
    let first = w.step();
    let Action::CreatePod { claims, .. } = &first.actions[0] else {
        panic!("{:?}", first.actions)
    };
    let owner = &claims[0].metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str(),
            owner.controller,
        ),
        (
            "apps.kruise.io/v1beta1",
            "StatefulSet",
            "demo",
            "sts-uid",
            None
        )
    );
    w.settle(20);
    assert_eq!(w.claims.len(), 3);
    // Scaled away, a claim is retained (with the set's reference).
    w.set.spec.replicas = Some(1);
    w.settle(20);
    assert_eq!(w.claim_owners("data-demo-2"), strings(&["sts-uid"]));
    assert!(w.plans.iter().all(|p| {
        p.actions
            .iter()
            .all(|a| !matches!(a, Action::SetClaimOwners { .. }))
    }));
    w.set.metadata.deletion_timestamp = Some(Time(w.now));
    w.collect_garbage();
    assert!(w.claims.is_empty());
}

#[test]
fn both_delete_moves_a_condemned_claim_from_the_set_to_its_pod() {
    let mut w = World::ready(with_claims(policy("Delete", "Delete")));
    let pod_uid = w.pods["demo-2"].metadata.uid.clone().unwrap();
    w.set.spec.replicas = Some(2);
    let p = w.plan();
    let owners = p.actions.iter().find_map(|a| match a {
        Action::SetClaimOwners {
            name,
            owner_references,
            ..
        } if name == "data-demo-2" => Some(owner_references.clone()),
        _ => None,
    });
    let owners = owners.unwrap();
    assert_eq!(uids(&owners), vec![pod_uid.as_str()]);
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].name.as_str()),
        ("Pod", "demo-2")
    );
    w.apply(&p);
    w.settle(10);
    assert!(!w.claims.contains_key("data-demo-2"));
    assert_eq!(w.claim_owners("data-demo-1"), strings(&["sts-uid"]));
}

#[test]
fn retain_takes_references_off_and_the_gate_off_leaves_claims_alone() {
    let mut w = World::ready(with_claims(policy("Delete", "Retain")));
    assert_eq!(w.claim_owners("data-demo-0"), strings(&["sts-uid"]));
    w.set.spec.persistent_volume_claim_retention_policy =
        serde_json::from_value(json!({"whenDeleted": "Retain", "whenScaled": "Retain"})).unwrap();
    w.settle(10);
    assert!(w.claims.values().all(|c| {
        c.metadata
            .owner_references
            .as_ref()
            .is_none_or(Vec::is_empty)
    }));

    let mut off = World::new(with_claims(policy("Delete", "Delete")));
    off.gates.auto_delete_pvc = false;
    off.settle(20);
    off.set.spec.replicas = Some(1);
    off.settle(20);
    assert_eq!(off.claims.len(), 3);
    assert!(
        off.claims
            .values()
            .all(|c| c.metadata.owner_references.is_none())
    );
}

#[test]
fn a_pending_pod_gets_its_missing_claim_again() {
    let mut w = World::ready(with_claims(json!({})));
    w.claims.remove("data-demo-1");
    // Running: nothing (OpenKruise re-creates claims only for pending pods).
    assert!(w.plan().actions.is_empty());
    w.pods
        .get_mut("demo-1")
        .unwrap()
        .status
        .as_mut()
        .unwrap()
        .phase = Some("Pending".into());
    let p = w.plan();
    let created: Vec<(&str, Vec<String>)> = p
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateClaims { pod, claims } => Some((
                pod.as_str(),
                claims
                    .iter()
                    .filter_map(|c| c.metadata.name.clone())
                    .collect(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(created, vec![("demo-1", strings(&["data-demo-1"]))]);
}

#[test]
fn a_new_pod_waits_for_a_stale_claim_of_its_scaled_away_predecessor() {
    let mut w = World::ready(with_claims(
        json!({"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Delete"},
               "podManagementPolicy": "Parallel"}),
    ));
    // demo-2 was scaled away; its claim still names the old pod.
    w.stuck.insert("demo-2".into());
    w.set.spec.replicas = Some(2);
    w.step();
    w.pods.remove("demo-2");
    assert_eq!(
        w.claims["data-demo-2"]
            .metadata
            .owner_references
            .as_ref()
            .unwrap()[0]
            .name,
        "demo-2"
    );
    w.set.spec.replicas = Some(3);
    let p = w.plan();
    assert!(creates(&p).is_empty(), "{:?}", p.actions);
    assert_eq!(p.requeue_after, Some(std::time::Duration::from_secs(1)));
    // Once the garbage collector deleted it, the pod comes back with a fresh claim.
    w.collect_garbage();
    assert!(!w.claims.contains_key("data-demo-2"));
    w.settle(10);
    assert_eq!(w.names(), strings(&["demo-0", "demo-1", "demo-2"]));
    assert!(w.claims["data-demo-2"].metadata.owner_references.is_none());
}
