use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, ObjectMeta, PostParams, Preconditions, PropagationPolicy,
};
use serde_json::json;

use crate::common::{api_err, eventually, sim};

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("k".to_string(), "v".to_string())])),
        ..Default::default()
    }
}

fn pod(name: &str, node: Option<&str>) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx:1.25"}]}
    }))
    .expect("pod json")
}

#[tokio::test]
async fn create_get_list_delete() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    let created = api
        .create(&PostParams::default(), &cm("one", &[]))
        .await
        .unwrap();
    let m = &created.metadata;
    assert!(m.uid.as_ref().is_some_and(|u| u.len() == 36));
    assert!(m.resource_version.is_some());
    assert!(m.creation_timestamp.is_some());
    assert_eq!(m.namespace.as_deref(), Some("default"));
    let got = api.get("one").await.unwrap();
    assert_eq!(got.metadata.uid, m.uid);
    let list = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    // List resourceVersion is at least the object's.
    let list_rv: u64 = list.metadata.resource_version.unwrap().parse().unwrap();
    assert!(list_rv >= m.resource_version.as_ref().unwrap().parse::<u64>().unwrap());
    let deleted = api.delete("one", &DeleteParams::default()).await.unwrap();
    // Immediate deletion of a ConfigMap returns a Success Status.
    assert!(deleted.is_right());
    let err = api_err(api.get("one").await.unwrap_err());
    assert_eq!(err.code, 404);
    assert_eq!(err.reason, "NotFound");
    assert_eq!(err.message, "configmaps \"one\" not found");
    sim.shutdown().await;
}

#[tokio::test]
async fn default_namespaces_exist() {
    let sim = sim().await;
    let api: Api<Namespace> = Api::all(sim.client().unwrap());
    let names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    for want in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} missing from {names:?}"
        );
    }
    let d = api.get("default").await.unwrap();
    assert_eq!(d.status.and_then(|s| s.phase).as_deref(), Some("Active"));
}

#[tokio::test]
async fn generate_name_and_name_validation() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    let mut c = cm("", &[]);
    c.metadata.name = None;
    c.metadata.generate_name = Some("gen-".into());
    let created = api.create(&PostParams::default(), &c).await.unwrap();
    let name = created.metadata.name.unwrap();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");

    let err = api_err(
        api.create(&PostParams::default(), &cm("Bad_Name", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert!(err.message.starts_with("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"), "{}", err.message);
    let causes = err.details.unwrap().causes;
    assert_eq!(causes[0].field, "metadata.name");
    assert_eq!(causes[0].reason, "FieldValueInvalid");

    let mut nameless = cm("", &[]);
    nameless.metadata.name = None;
    let err = api_err(
        api.create(&PostParams::default(), &nameless)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert!(err.message.contains("name or generateName is required"));
}

#[tokio::test]
async fn namespace_must_exist_and_duplicates_conflict() {
    let sim = sim().await;
    let client = sim.client().unwrap();
    let missing: Api<ConfigMap> = Api::namespaced(client.clone(), "nope");
    let err = api_err(
        missing
            .create(&PostParams::default(), &cm("a", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (404, "NotFound"));
    assert_eq!(err.message, "namespaces \"nope\" not found");

    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    let err = api_err(
        api.create(&PostParams::default(), &cm("a", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(err.message, "configmaps \"a\" already exists");
}

#[tokio::test]
async fn update_with_stale_resource_version_conflicts() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    let v1 = api
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    let mut first = v1.clone();
    first.data = Some(BTreeMap::from([("k".into(), "first".into())]));
    let v2 = api
        .replace("a", &PostParams::default(), &first)
        .await
        .unwrap();
    assert_ne!(v2.metadata.resource_version, v1.metadata.resource_version);
    let mut stale = v1.clone();
    stale.data = Some(BTreeMap::from([("k".into(), "stale".into())]));
    let err = api_err(
        api.replace("a", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        err.message,
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );
    // The stored object is untouched.
    assert_eq!(api.get("a").await.unwrap().data.unwrap()["k"], "first");
}

#[tokio::test]
async fn noop_update_keeps_resource_version() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    let v1 = api
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    let v2 = api.replace("a", &PostParams::default(), &v1).await.unwrap();
    assert_eq!(v1.metadata.resource_version, v2.metadata.resource_version);
}

#[tokio::test]
async fn generation_tracks_spec_not_status() {
    let sim = sim().await;
    let api: Api<Deployment> = Api::namespaced(sim.client().unwrap(), "default");
    let d: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}
    })).unwrap();
    let created = api.create(&PostParams::default(), &d).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    // Server defaults were applied.
    let spec = created.spec.clone().unwrap();
    assert_eq!(spec.revision_history_limit, Some(10));
    assert_eq!(
        spec.template
            .spec
            .as_ref()
            .unwrap()
            .restart_policy
            .as_deref(),
        Some("Always")
    );

    let mut with_status = created.clone();
    with_status.status =
        Some(serde_json::from_value(json!({"replicas": 7, "observedGeneration": 1})).unwrap());
    let after_status = api
        .replace_status("d", &PostParams::default(), &with_status)
        .await
        .unwrap();
    assert_eq!(after_status.metadata.generation, Some(1));
    assert_eq!(after_status.status.as_ref().unwrap().replicas, Some(7));
    assert_ne!(
        after_status.metadata.resource_version,
        created.metadata.resource_version
    );

    // A main-resource update cannot change status, and a spec change bumps generation.
    let mut next = after_status.clone();
    next.spec.as_mut().unwrap().replicas = Some(3);
    next.status = None;
    let updated = api
        .replace("d", &PostParams::default(), &next)
        .await
        .unwrap();
    assert_eq!(updated.metadata.generation, Some(2));
    assert_eq!(updated.status.unwrap().replicas, Some(7));
    // Metadata-only changes do not bump generation.
    let mut labelled = api.get("d").await.unwrap();
    labelled.metadata.labels = Some(BTreeMap::from([("x".into(), "y".into())]));
    let labelled = api
        .replace("d", &PostParams::default(), &labelled)
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(2));
}

#[tokio::test]
async fn finalizers_delay_deletion() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    let mut c = cm("f", &[]);
    c.metadata.finalizers = Some(vec!["example.com/keep".into()]);
    api.create(&PostParams::default(), &c).await.unwrap();
    let resp = api.delete("f", &DeleteParams::default()).await.unwrap();
    let pending = resp.left().expect("pending deletion returns the object");
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert_eq!(pending.metadata.deletion_grace_period_seconds, Some(0));
    // No new finalizers while terminating.
    let mut more = api.get("f").await.unwrap();
    more.metadata
        .finalizers
        .as_mut()
        .unwrap()
        .push("example.com/other".into());
    let err = api_err(
        api.replace("f", &PostParams::default(), &more)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message
            .contains("no new finalizers can be added if the object is being deleted"),
        "{}",
        err.message
    );
    // Removing the last finalizer removes the object.
    let mut done = api.get("f").await.unwrap();
    done.metadata.finalizers = None;
    api.replace("f", &PostParams::default(), &done)
        .await
        .unwrap();
    assert_eq!(api_err(api.get("f").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn selectors_filter_lists() {
    let sim = sim().await;
    let client = sim.client().unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.create(
        &PostParams::default(),
        &cm("a", &[("app", "web"), ("tier", "fe")]),
    )
    .await
    .unwrap();
    api.create(&PostParams::default(), &cm("b", &[("app", "api")]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("c", &[("app", "db")]))
        .await
        .unwrap();
    let names = |l: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        l.items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect()
    };
    let l = api
        .list(&ListParams::default().labels("app in (web,api),!missing"))
        .await
        .unwrap();
    assert_eq!(names(l), vec!["a", "b"]);
    let l = api
        .list(&ListParams::default().labels("app notin (web),app"))
        .await
        .unwrap();
    assert_eq!(names(l), vec!["b", "c"]);
    let l = api
        .list(&ListParams::default().labels("tier=fe"))
        .await
        .unwrap();
    assert_eq!(names(l), vec!["a"]);
    let l = api
        .list(&ListParams::default().fields("metadata.name=c"))
        .await
        .unwrap();
    assert_eq!(names(l), vec!["c"]);
    let l = api
        .list(&ListParams::default().fields("metadata.name!=c,metadata.namespace=default"))
        .await
        .unwrap();
    assert_eq!(names(l), vec!["a", "b"]);
    let err = api_err(
        api.list(&ListParams::default().fields("data.k=v"))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (400, "BadRequest"));
    assert_eq!(err.message, "field label not supported: data.k");
    let err = api_err(
        api.list(&ListParams::default().labels("a in b"))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 400);

    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(&PostParams::default(), &pod("p1", Some("n1")))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("p2", None))
        .await
        .unwrap();
    let l = pods
        .list(&ListParams::default().fields("spec.nodeName=n1"))
        .await
        .unwrap();
    assert_eq!(l.items.len(), 1);
    let l = pods
        .list(&ListParams::default().fields("spec.nodeName="))
        .await
        .unwrap();
    assert_eq!(l.items[0].metadata.name.as_deref(), Some("p2"));
    let l = pods
        .list(&ListParams::default().fields("status.phase=Pending"))
        .await
        .unwrap();
    assert_eq!(l.items.len(), 2);
}

#[tokio::test]
async fn pagination_with_limit_and_continue() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    for i in 0..25 {
        api.create(&PostParams::default(), &cm(&format!("cm-{i:02}"), &[]))
            .await
            .unwrap();
    }
    let first = api.list(&ListParams::default().limit(10)).await.unwrap();
    assert_eq!(first.items.len(), 10);
    assert_eq!(first.metadata.remaining_item_count, Some(15));
    let token = first.metadata.continue_.clone().expect("continue token");
    let second = api
        .list(&ListParams::default().limit(10).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(second.items[0].metadata.name.as_deref(), Some("cm-10"));
    assert_eq!(
        second.metadata.resource_version,
        first.metadata.resource_version
    );
    let third = api
        .list(
            &ListParams::default()
                .limit(10)
                .continue_token(second.metadata.continue_.as_deref().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(third.items.len(), 5);
    assert!(third.metadata.continue_.is_none());
    assert_eq!(third.metadata.remaining_item_count, None);
    let err = api_err(
        api.list(&ListParams::default().continue_token("garbage"))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 400);
}

#[tokio::test]
async fn delete_collection_and_preconditions() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    for (n, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        api.create(&PostParams::default(), &cm(n, &[("app", app)]))
            .await
            .unwrap();
    }
    let deleted = api
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("app=x"),
        )
        .await
        .unwrap();
    let list = deleted.left().expect("deleted list");
    assert_eq!(list.items.len(), 2);
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );

    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("wrong".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let err = api_err(api.delete("c", &dp).await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert!(
        err.message
            .contains("Precondition failed: UID in precondition: wrong"),
        "{}",
        err.message
    );
    let c = api.get("c").await.unwrap();
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: c.metadata.uid.clone(),
            resource_version: c.metadata.resource_version.clone(),
        }),
        ..Default::default()
    };
    api.delete("c", &dp).await.unwrap();
}

#[tokio::test]
async fn dry_run_does_not_persist() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    let pp = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let out = api.create(&pp, &cm("dry", &[])).await.unwrap();
    assert_eq!(out.metadata.name.as_deref(), Some("dry"));
    assert_eq!(api_err(api.get("dry").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn pod_deletion_is_graceful_only_when_bound() {
    let sim = sim().await;
    let api: Api<Pod> = Api::namespaced(sim.client().unwrap(), "default");
    let created = api
        .create(&PostParams::default(), &pod("unbound", None))
        .await
        .unwrap();
    assert_eq!(
        created.status.as_ref().unwrap().phase.as_deref(),
        Some("Pending")
    );
    assert_eq!(
        created.status.as_ref().unwrap().qos_class.as_deref(),
        Some("BestEffort")
    );
    assert_eq!(
        created
            .spec
            .as_ref()
            .unwrap()
            .termination_grace_period_seconds,
        Some(30)
    );
    api.delete("unbound", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(api_err(api.get("unbound").await.unwrap_err()).code, 404);

    api.create(&PostParams::default(), &pod("bound", Some("node-1")))
        .await
        .unwrap();
    let pending = api
        .delete("bound", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(pending.metadata.deletion_grace_period_seconds, Some(30));
    assert!(pending.metadata.deletion_timestamp.is_some());
    // A zero grace period (what a kubelet sends) removes it.
    api.delete("bound", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    assert_eq!(api_err(api.get("bound").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn lease_round_trip() {
    let sim = sim().await;
    let api: Api<Lease> = Api::namespaced(sim.client().unwrap(), "kube-system");
    let lease: Lease = serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "leader"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": "2026-01-01T00:00:00.000000Z"}
    })).unwrap();
    let created = api.create(&PostParams::default(), &lease).await.unwrap();
    let mut next = created.clone();
    next.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let updated = api
        .replace("leader", &PostParams::default(), &next)
        .await
        .unwrap();
    assert_eq!(updated.spec.unwrap().holder_identity.as_deref(), Some("b"));
    // A contender holding the old version loses.
    let err = api_err(
        api.replace("leader", &PostParams::default(), &created)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 409);
}

#[tokio::test]
async fn namespace_deletion_removes_contents() {
    let sim = sim().await;
    let client = sim.client().unwrap();
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "tmp"}})).unwrap();
    nss.create(&PostParams::default(), &ns).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "tmp");
    cms.create(&PostParams::default(), &cm("x", &[]))
        .await
        .unwrap();
    let pending = nss.delete("tmp", &DeleteParams::default()).await.unwrap();
    if let Some(n) = pending.left() {
        assert_eq!(
            n.status.and_then(|s| s.phase).as_deref(),
            Some("Terminating")
        );
    }
    eventually(5, "namespace removal", || async {
        nss.get_opt("tmp").await.unwrap().is_none().then_some(())
    })
    .await;
    assert!(cms.get_opt("x").await.unwrap().is_none());
}

#[tokio::test]
async fn owner_references_cascade() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    let make_dependent = |name: &str, owner: &ConfigMap| {
        let mut d = cm(name, &[]);
        d.metadata.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: owner.metadata.name.clone().unwrap(),
                uid: owner.metadata.uid.clone().unwrap(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            },
        ]);
        d
    };
    // Background (default): owner goes at once, dependent follows.
    let owner = api
        .create(&PostParams::default(), &cm("owner", &[]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &make_dependent("dep", &owner))
        .await
        .unwrap();
    api.delete("owner", &DeleteParams::default()).await.unwrap();
    eventually(5, "background cascade", || async {
        api.get_opt("dep").await.unwrap().is_none().then_some(())
    })
    .await;

    // Foreground: owner waits (foregroundDeletion finalizer) until dependents are gone.
    let owner = api
        .create(&PostParams::default(), &cm("fg", &[]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &make_dependent("fg-dep", &owner))
        .await
        .unwrap();
    let pending = api.delete("fg", &DeleteParams::foreground()).await.unwrap();
    if let Some(o) = pending.left() {
        assert!(
            o.metadata
                .finalizers
                .unwrap()
                .contains(&"foregroundDeletion".to_string())
        );
    }
    eventually(5, "foreground cascade", || async {
        (api.get_opt("fg").await.unwrap().is_none()
            && api.get_opt("fg-dep").await.unwrap().is_none())
        .then_some(())
    })
    .await;

    // Orphan: dependent survives without the owner reference.
    let owner = api
        .create(&PostParams::default(), &cm("orph", &[]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &make_dependent("orph-dep", &owner))
        .await
        .unwrap();
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..Default::default()
    };
    api.delete("orph", &dp).await.unwrap();
    eventually(5, "orphan deletion", || async {
        api.get_opt("orph").await.unwrap().is_none().then_some(())
    })
    .await;
    let dep = api.get("orph-dep").await.unwrap();
    assert!(dep.metadata.owner_references.is_none_or(|r| r.is_empty()));
}

#[tokio::test]
async fn foreground_deletion_waits_only_for_block_owner_deletion_dependents() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    let held_dependent = |name: &str, owner: &ConfigMap, block: bool| {
        let mut d = cm(name, &[]);
        // A finalizer keeps the dependent around (terminating) after the GC deletes it.
        d.metadata.finalizers = Some(vec!["example.com/hold".into()]);
        d.metadata.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: owner.metadata.name.clone().unwrap(),
                uid: owner.metadata.uid.clone().unwrap(),
                controller: Some(true),
                block_owner_deletion: Some(block),
            },
        ]);
        d
    };
    let release = |name: &'static str| {
        let api = api.clone();
        async move {
            api.patch(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await
            .unwrap();
        }
    };
    let pp = PostParams::default();
    // A non-blocking dependent does not hold its owner.
    let loose_owner = api.create(&pp, &cm("loose-owner", &[])).await.unwrap();
    api.create(&pp, &held_dependent("loose", &loose_owner, false))
        .await
        .unwrap();
    api.delete("loose-owner", &DeleteParams::foreground())
        .await
        .unwrap();
    eventually(5, "non-blocked owner removed", || async {
        api.get_opt("loose-owner")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    let loose = api.get("loose").await.unwrap();
    assert!(
        loose.metadata.deletion_timestamp.is_some(),
        "the dependent was deleted too"
    );
    release("loose").await;

    // A blocking dependent holds it until the dependent is gone.
    let owner = api.create(&pp, &cm("strict-owner", &[])).await.unwrap();
    api.create(&pp, &held_dependent("strict", &owner, true))
        .await
        .unwrap();
    api.delete("strict-owner", &DeleteParams::foreground())
        .await
        .unwrap();
    eventually(5, "blocking dependent terminating", || async {
        api.get("strict")
            .await
            .ok()
            .and_then(|d| d.metadata.deletion_timestamp)
            .map(|_| ())
    })
    .await;
    let waiting = api.get("strict-owner").await.unwrap();
    assert_eq!(
        waiting.metadata.finalizers,
        Some(vec!["foregroundDeletion".to_string()]),
        "the owner waits for its blocking dependent"
    );
    release("strict").await;
    eventually(5, "owner removed after its blocking dependent", || async {
        api.get_opt("strict-owner")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn events_k8s_io_and_core_events_share_storage() {
    use k8s_openapi::api::core::v1::{Event as CoreEvent, ObjectReference};
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};

    let sim = sim().await;
    let client = sim.client().unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let owner = cms
        .create(&PostParams::default(), &cm("subject", &[]))
        .await
        .unwrap();
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        name: owner.metadata.name.clone(),
        namespace: Some("default".into()),
        uid: owner.metadata.uid.clone(),
        ..Default::default()
    };
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "kruise-test".into(),
            instance: None,
        },
    );
    let ev = Event {
        type_: EventType::Normal,
        reason: "Synced".into(),
        note: Some("all good".into()),
        action: "Sync".into(),
        secondary: None,
    };
    recorder.publish(&ev, &reference).await.unwrap();
    // A repeat becomes a series (merge patch on events.k8s.io).
    recorder.publish(&ev, &reference).await.unwrap();

    // What `kubectl describe` asks for: core/v1 events by involvedObject fields.
    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let selector = format!(
        "involvedObject.name=subject,involvedObject.namespace=default,involvedObject.kind=ConfigMap,involvedObject.uid={}",
        owner.metadata.uid.clone().unwrap()
    );
    let found = core
        .list(&ListParams::default().fields(&selector))
        .await
        .unwrap();
    assert_eq!(found.items.len(), 1);
    let e = &found.items[0];
    assert_eq!(e.reason.as_deref(), Some("Synced"));
    assert_eq!(e.message.as_deref(), Some("all good"));
    assert_eq!(e.reporting_component.as_deref(), Some("kruise-test"));
    assert_eq!(e.series.as_ref().and_then(|s| s.count), Some(2));

    // And the events.k8s.io view with its own field names.
    let v1: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client, "default");
    let found = v1
        .list(&ListParams::default().fields("regarding.name=subject"))
        .await
        .unwrap();
    assert_eq!(found.items.len(), 1);
    assert_eq!(found.items[0].note.as_deref(), Some("all good"));
}

#[tokio::test]
async fn concurrent_updates_with_one_version_have_one_winner() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    let base = api
        .create(&PostParams::default(), &cm("race", &[]))
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..10 {
        let api = api.clone();
        let mut next = base.clone();
        next.data = Some(BTreeMap::from([("writer".to_string(), i.to_string())]));
        tasks.push(tokio::spawn(async move {
            api.replace("race", &PostParams::default(), &next).await
        }));
    }
    let mut ok = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => ok += 1,
            Err(e) => assert_eq!(api_err(e).code, 409),
        }
    }
    assert_eq!(ok, 1);
}

#[tokio::test]
async fn admission_hooks_mutate_and_reject() {
    use futures::future::BoxFuture;
    use kruise_sim::{AdmissionAttributes, AdmissionHook, ApiError, ApiResult};

    struct Hook;
    impl AdmissionHook for Hook {
        fn admit<'a>(
            &'a self,
            attrs: &'a AdmissionAttributes,
            object: &'a mut serde_json::Value,
        ) -> BoxFuture<'a, ApiResult<()>> {
            Box::pin(async move {
                if attrs.resource != "configmaps" || attrs.operation == "DELETE" {
                    return Ok(());
                }
                if attrs.name == "forbidden" {
                    return Err(ApiError::forbidden(
                        "admission webhook \"test\" denied the request: no",
                    ));
                }
                object["metadata"]["labels"] = json!({"mutated": "yes"});
                Ok(())
            })
        }
    }

    let sim = sim().await;
    sim.add_admission_hook(std::sync::Arc::new(Hook));
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    let out = api
        .create(&PostParams::default(), &cm("ok", &[]))
        .await
        .unwrap();
    assert_eq!(out.metadata.labels.unwrap()["mutated"], "yes");
    let err = api_err(
        api.create(&PostParams::default(), &cm("forbidden", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (403, "Forbidden"));
    assert!(api.get_opt("forbidden").await.unwrap().is_none());
}

#[tokio::test]
async fn compaction_expires_old_versions_for_lists_and_watches() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client_without_retries().unwrap(), "default");
    for i in 0..3 {
        api.create(&PostParams::default(), &cm(&format!("c{i}"), &[]))
            .await
            .unwrap();
    }
    let page = api.list(&ListParams::default().limit(1)).await.unwrap();
    let token = page.metadata.continue_.unwrap();
    api.create(&PostParams::default(), &cm("later", &[]))
        .await
        .unwrap();
    sim.store().compact();
    let err = api_err(
        api.list(&ListParams::default().limit(1).continue_token(&token))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (410, "Expired"));
}

#[tokio::test]
async fn metadata_is_validated() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    let long = "x".repeat(64);
    let err = api_err(
        api.create(&PostParams::default(), &cm("a", &[("app", &long)]))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        err.message,
        format!(
            "ConfigMap \"a\" is invalid: metadata.labels: Invalid value: \"{long}\": must be no more than 63 characters"
        )
    );
    let err = api_err(
        api.create(&PostParams::default(), &cm("a", &[("bad key", "v")]))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert_eq!(err.details.unwrap().causes[0].field, "metadata.labels");
    // The same rules apply to updates; the stored object is unchanged.
    let ok = api
        .create(&PostParams::default(), &cm("a", &[("app", "web")]))
        .await
        .unwrap();
    let mut bad = ok.clone();
    bad.metadata.finalizers = Some(vec!["not a qualified name".into()]);
    assert_eq!(
        api_err(
            api.replace("a", &PostParams::default(), &bad)
                .await
                .unwrap_err()
        )
        .code,
        422
    );
    assert_eq!(
        api.get("a").await.unwrap().metadata.resource_version,
        ok.metadata.resource_version
    );
}

/// A Secret's `stringData` is written into `data` (base64) and never stored, on create and
/// on update, as kube-apiserver's v1 conversion does; `type` defaults to `Opaque`.
#[tokio::test]
async fn secret_string_data_is_merged_into_data() {
    use k8s_openapi::api::core::v1::Secret;
    let sim = sim().await;
    let api: Api<Secret> = Api::namespaced(sim.client().unwrap(), "default");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "creds"},
        "data": {"user": "YWRtaW4=", "token": "b2xk"},
        "stringData": {"token": "new"},
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &secret).await.unwrap();
    assert!(created.string_data.is_none());
    assert_eq!(created.type_.as_deref(), Some("Opaque"));
    let data = created.data.clone().unwrap();
    assert_eq!(data["user"].0, b"admin");
    assert_eq!(data["token"].0, b"new");
    let mut changed = created.clone();
    changed.string_data = Some(BTreeMap::from([("extra".to_string(), "x".to_string())]));
    let updated = api
        .replace("creds", &PostParams::default(), &changed)
        .await
        .unwrap();
    let got = api.get("creds").await.unwrap();
    assert_eq!(got.data, updated.data);
    assert_eq!(got.data.unwrap()["extra"].0, b"x");
    assert!(got.string_data.is_none());
}

/// ConfigMap and Secret keys, sizes and types are validated as kube-apiserver validates
/// them, and an immutable one keeps its data.
#[tokio::test]
async fn configmap_and_secret_contents_are_validated() {
    use k8s_openapi::api::core::v1::Secret;
    let sim = sim().await;
    let client = sim.client().unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let bad: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "bad"}, "data": {"not a key": "x", "..dots": "y", "both": "z"},
        "binaryData": {"both": "eg=="},
    }))
    .unwrap();
    let err = api_err(
        configmaps
            .create(&PostParams::default(), &bad)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert_eq!(
        err.message,
        "ConfigMap \"bad\" is invalid: [data[..dots]: Invalid value: \"..dots\": must not start with '..', data[both]: Invalid value: \"both\": duplicate of key present in binaryData, data[not a key]: Invalid value: \"not a key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')]"
    );
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let tls: Secret = serde_json::from_value(json!({
        "metadata": {"name": "tls"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="},
    }))
    .unwrap();
    let err = api_err(
        secrets
            .create(&PostParams::default(), &tls)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        err.message,
        "Secret \"tls\" is invalid: data[tls.key]: Required value"
    );
    let frozen: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "frozen"}, "immutable": true, "data": {"k": "v"},
    }))
    .unwrap();
    let mut frozen = configmaps
        .create(&PostParams::default(), &frozen)
        .await
        .unwrap();
    frozen.data = Some(BTreeMap::from([("k".to_string(), "w".to_string())]));
    let err = api_err(
        configmaps
            .replace("frozen", &PostParams::default(), &frozen)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        err.message,
        "ConfigMap \"frozen\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
    );
    let opaque: Secret =
        serde_json::from_value(json!({"metadata": {"name": "o"}, "data": {"k": "dg=="}})).unwrap();
    let mut opaque = secrets
        .create(&PostParams::default(), &opaque)
        .await
        .unwrap();
    opaque.type_ = Some("kubernetes.io/basic-auth".into());
    let err = api_err(
        secrets
            .replace("o", &PostParams::default(), &opaque)
            .await
            .unwrap_err(),
    );
    assert!(
        err.message.starts_with("Secret \"o\" is invalid: [type: Invalid value: \"kubernetes.io/basic-auth\": field is immutable"),
        "{}",
        err.message
    );
}
