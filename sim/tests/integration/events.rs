//! Events expire after kube-apiserver's `--event-ttl` (`SimConfig::event_ttl`), counted
//! from their last write; nothing else expires.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::Api;
use kube::api::{PostParams, WatchEvent, WatchParams};
use serde_json::json;

use crate::common::{eventually, sim_with};

fn event(name: &str) -> Event {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
        "reason": "Testing", "message": "short-lived", "type": "Normal"
    }))
    .unwrap()
}

#[tokio::test]
async fn events_are_deleted_once_their_ttl_has_passed() {
    use futures::StreamExt as _;

    let sim = sim_with(kruise_sim::SimConfig {
        event_ttl: Duration::from_secs(1),
        ..Default::default()
    })
    .await;
    let client = sim.client().unwrap();
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let created = events
        .create(&PostParams::default(), &event("short-lived"))
        .await
        .unwrap();
    config_maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "kept"}})).unwrap(),
        )
        .await
        .unwrap();
    assert!(events.get_opt("short-lived").await.unwrap().is_some());
    let rv = created.metadata.resource_version.clone().unwrap();
    let mut watch = events
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();

    eventually(10, "the event to expire", || async {
        events
            .get_opt("short-lived")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    // Watchers are told, as an etcd lease expiry tells them.
    let deleted = tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        matches!(&deleted, WatchEvent::Deleted(e) if e.metadata.name.as_deref() == Some("short-lived")),
        "{deleted:?}"
    );
    // Only Events expire.
    assert!(config_maps.get_opt("kept").await.unwrap().is_some());
    sim.shutdown().await;
}
