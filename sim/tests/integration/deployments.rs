//! The Deployment and ReplicaSet controllers: a rollout within maxSurge/maxUnavailable,
//! Recreate, scaling through the scale subresource, a rollback's revisions, the history
//! limit, the conditions `kubectl rollout status` reads, and a ReplicaSet replacing and
//! trimming its pods.

use std::cell::Cell;
use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{eventually, sim_with};

fn deployment(name: &str, replicas: i32, image: &str, strategy: serde_json::Value) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {"team": "web"}},
        "spec": {
            "replicas": replicas,
            "revisionHistoryLimit": 2,
            "selector": {"matchLabels": {"app": name}},
            "strategy": strategy,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": image}]},
            },
        },
    }))
    .unwrap()
}

fn condition(d: &Deployment, ty: &str) -> Option<(String, String)> {
    d.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == ty)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

/// What `kubectl rollout status` waits for: every replica updated and available, no old.
fn rolled_out(d: &Deployment) -> bool {
    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let Some(s) = &d.status else { return false };
    s.observed_generation >= d.metadata.generation
        && s.updated_replicas == Some(want)
        && s.replicas == Some(want)
        && s.available_replicas == Some(want)
        && condition(d, "Progressing").map(|c| c.1) == Some("NewReplicaSetAvailable".into())
}

async fn wait_rolled_out(api: &Api<Deployment>, name: &str) -> Deployment {
    eventually(20, &format!("deployment {name} rolled out"), || async {
        api.get(name).await.ok().filter(rolled_out)
    })
    .await
}

async fn active_pods(pods: &Api<Pod>, app: &str) -> Vec<Pod> {
    pods.list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

fn image(p: &Pod) -> String {
    p.spec.as_ref().unwrap().containers[0]
        .image
        .clone()
        .unwrap()
}

fn revision(rs: &ReplicaSet) -> String {
    rs.annotations()
        .get("deployment.kubernetes.io/revision")
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_rolling_update_stays_within_surge_and_unavailability() {
    let sim = sim_with(kruise_sim::SimConfig {
        nodes: 2,
        ..Default::default()
    })
    .await;
    let client = sim.client().unwrap();
    let deploys: Api<Deployment> = Api::default_namespaced(client.clone());
    let sets: Api<ReplicaSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    // 4 replicas, maxSurge 1, maxUnavailable 0: never more than 5 pods, never fewer than
    // 4 ready while the image changes.
    let strategy =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}});
    deploys
        .create(
            &PostParams::default(),
            &deployment("web", 4, "nginx:1.25", strategy),
        )
        .await
        .unwrap();
    let d = wait_rolled_out(&deploys, "web").await;
    assert_eq!(
        condition(&d, "Available").unwrap(),
        ("True".into(), "MinimumReplicasAvailable".into())
    );
    assert_eq!(d.annotations()["deployment.kubernetes.io/revision"], "1");
    let first = sets.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(first.len(), 1);
    let rs1 = &first[0];
    let hash = rs1.labels()["pod-template-hash"].clone();
    assert_eq!(rs1.name_any(), format!("web-{hash}"));
    assert_eq!(revision(rs1), "1");
    assert_eq!(
        rs1.annotations()["team"],
        "web",
        "the Deployment's annotations are copied"
    );
    assert_eq!(
        rs1.annotations()["deployment.kubernetes.io/desired-replicas"],
        "4"
    );
    assert_eq!(
        rs1.annotations()["deployment.kubernetes.io/max-replicas"],
        "5"
    );
    let owned = active_pods(&pods, "web").await;
    assert_eq!(owned.len(), 4);
    for p in &owned {
        assert!(p.name_any().starts_with(&format!("web-{hash}-")));
        assert_eq!(p.labels()["pod-template-hash"], hash);
        let owner = &p.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("ReplicaSet", Some(true))
        );
    }

    // The image changes: watch the bounds until every pod runs the new one.
    deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:1.26"}]}}}})),
        )
        .await
        .unwrap();
    let most = Cell::new(0);
    let fewest_ready = Cell::new(usize::MAX);
    let (pods_ref, deploys_ref, most_ref, fewest_ref) = (&pods, &deploys, &most, &fewest_ready);
    eventually(30, "every pod on nginx:1.26", move || async move {
        let now = active_pods(pods_ref, "web").await;
        most_ref.set(most_ref.get().max(now.len()));
        let ready = now
            .iter()
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        fewest_ref.set(fewest_ref.get().min(ready));
        let done = now.len() == 4 && now.iter().all(|p| image(p) == "nginx:1.26");
        (done && rolled_out(&deploys_ref.get("web").await.ok()?)).then_some(())
    })
    .await;
    let (most, fewest_ready) = (most.get(), fewest_ready.get());
    assert!(most <= 5, "at most replicas + maxSurge pods: saw {most}");
    assert!(
        fewest_ready >= 4,
        "never below replicas - maxUnavailable ready: saw {fewest_ready}"
    );
    let sets_now = sets.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(sets_now.len(), 2, "the old ReplicaSet is kept for history");
    let rs2 = sets_now
        .iter()
        .find(|r| r.name_any() != rs1.name_any())
        .unwrap();
    assert_eq!(revision(rs2), "2");
    let old = sets.get(&rs1.name_any()).await.unwrap();
    assert_eq!(old.spec.unwrap().replicas, Some(0));
    let events: Api<Event> = Api::default_namespaced(client.clone());
    let scaling: BTreeSet<String> = events
        .list(&ListParams::default().fields("reason=ScalingReplicaSet"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| e.message)
        .collect();
    assert!(
        scaling.contains(&format!(
            "Scaled up replica set {} from 0 to 1",
            rs2.name_any()
        )),
        "{scaling:?}"
    );
    assert!(
        scaling.contains(&format!(
            "Scaled down replica set {} from 4 to 3",
            rs1.name_any()
        )),
        "{scaling:?}"
    );

    // Scaled through the scale subresource, as `kubectl scale` does.
    deploys
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 6}})),
        )
        .await
        .unwrap();
    wait_rolled_out(&deploys, "web").await;
    assert_eq!(active_pods(&pods, "web").await.len(), 6);

    // Rolled back, as `kubectl rollout undo` does: the old template again. Its
    // ReplicaSet comes back as revision 3, remembering revision 1.
    deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}}})),
        )
        .await
        .unwrap();
    let d = eventually(30, "rolled back", || async {
        let d = deploys.get("web").await.ok().filter(rolled_out)?;
        let now = active_pods(&pods, "web").await;
        (now.len() == 6 && now.iter().all(|p| image(p) == "nginx:1.25")).then_some(d)
    })
    .await;
    let back = sets.get(&rs1.name_any()).await.unwrap();
    assert_eq!(revision(&back), "3");
    assert_eq!(
        back.annotations()["deployment.kubernetes.io/revision-history"],
        "1"
    );
    assert_eq!(d.annotations()["deployment.kubernetes.io/revision"], "3");

    // Two more templates with a history limit of 2: the oldest idle ReplicaSet goes.
    for tag in ["1.27", "1.28"] {
        deploys
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": format!("nginx:{tag}")}]}}}})),
            )
            .await
            .unwrap();
        eventually(30, &format!("rolled out nginx:{tag}"), || async {
            deploys.get("web").await.ok().filter(rolled_out)?;
            let now = active_pods(&pods, "web").await;
            (now.len() == 6 && now.iter().all(|p| image(p) == format!("nginx:{tag}"))).then_some(())
        })
        .await;
    }
    eventually(10, "history trimmed to 2 old ReplicaSets", || async {
        let all = sets.list(&ListParams::default()).await.ok()?.items;
        (all.len() == 3 && all.iter().all(|r| r.name_any() != rs2.name_any())).then_some(())
    })
    .await;

    // Deleting the Deployment takes its ReplicaSets and pods with it.
    deploys
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually(20, "pods gone with the Deployment", || async {
        let left = sets.list(&ListParams::default()).await.ok()?.items.len()
            + active_pods(&pods, "web").await.len();
        (left == 0).then_some(())
    })
    .await;
}

#[tokio::test]
async fn recreate_stops_every_old_pod_before_a_new_one_starts() {
    let sim = sim_with(kruise_sim::SimConfig {
        nodes: 2,
        ..Default::default()
    })
    .await;
    let client = sim.client().unwrap();
    let deploys: Api<Deployment> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    deploys
        .create(
            &PostParams::default(),
            &deployment("db", 3, "redis:7.0", json!({"type": "Recreate"})),
        )
        .await
        .unwrap();
    wait_rolled_out(&deploys, "db").await;
    deploys
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "redis:7.2"}]}}}})),
        )
        .await
        .unwrap();
    let mixed = Cell::new(false);
    let (pods_ref, deploys_ref, mixed_ref) = (&pods, &deploys, &mixed);
    eventually(30, "every pod on redis:7.2", move || async move {
        // Terminating pods count too: Recreate waits for them to be gone.
        let all = pods_ref
            .list(&ListParams::default().labels("app=db"))
            .await
            .ok()?
            .items;
        let images: BTreeSet<String> = all.iter().map(image).collect();
        mixed_ref.set(mixed_ref.get() || images.len() > 1);
        let done = all.len() == 3 && images.len() == 1 && images.contains("redis:7.2");
        (done && rolled_out(&deploys_ref.get("db").await.ok()?)).then_some(())
    })
    .await;
    let mixed = mixed.get();
    assert!(!mixed, "old and new pods never ran together");
}

#[tokio::test]
async fn a_replica_set_replaces_lost_pods_and_trims_the_cheapest() {
    let sim = sim_with(kruise_sim::SimConfig {
        nodes: 2,
        ..Default::default()
    })
    .await;
    let client = sim.client().unwrap();
    let sets: Api<ReplicaSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "cache"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "cache"}},
            "template": {
                "metadata": {"labels": {"app": "cache"}},
                "spec": {"containers": [{"name": "c", "image": "memcached:1.6"}]},
            },
        },
    }))
    .unwrap();
    sets.create(&PostParams::default(), &rs).await.unwrap();
    let ready = |want: i32| {
        let sets = sets.clone();
        async move {
            eventually(20, &format!("{want} ready"), || async {
                let s = sets.get("cache").await.ok()?.status?;
                (s.replicas == want
                    && s.ready_replicas.unwrap_or(0) == want
                    && s.available_replicas.unwrap_or(0) == want)
                    .then_some(())
            })
            .await
        }
    };
    ready(3).await;
    let first = active_pods(&pods, "cache").await;
    let lost = first[0].name_any();
    pods.delete(&lost, &DeleteParams::default()).await.unwrap();
    eventually(20, "a replacement", || async {
        let now = active_pods(&pods, "cache").await;
        (now.len() == 3 && now.iter().all(|p| p.name_any() != lost)).then_some(())
    })
    .await;
    ready(3).await;
    // The pod with the lowest deletion cost goes first on scale down.
    let keep = active_pods(&pods, "cache").await;
    let cheap = keep[1].name_any();
    pods.patch(
        &cheap,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "-100"}}})),
    )
    .await
    .unwrap();
    sets.patch_scale(
        "cache",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 2}})),
    )
    .await
    .unwrap();
    eventually(20, "scaled down to 2", || async {
        let now = active_pods(&pods, "cache").await;
        (now.len() == 2 && now.iter().all(|p| p.name_any() != cheap)).then_some(())
    })
    .await;
    ready(2).await;
}
