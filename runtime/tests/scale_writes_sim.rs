//! `ScaleWrites::create_recorded`: a pod create under scale expectations with the events
//! Kubernetes' pod-owning controllers record, as `kubectl describe` of the owner shows them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kruise_core::expectations::{ScaleExpectations, SharedExpectations};
use kruise_runtime::events::{EventQueue, Recorder};
use kruise_runtime::scale_writes::ScaleWrites;
use kruise_runtime::{Metrics, errors::ShellError};
use kruise_testkit::{WAIT, events_about, eventually, wait_for_warning};
use serde_json::json;

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "demo"}},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]},
    }))
    .unwrap()
}

#[tokio::test]
async fn creates_are_recorded_as_events_on_the_owner() {
    let (_sim, client) = kruise_testkit::sim_with_crds(1, &[]).await;
    let queue = EventQueue::for_controller(client.clone(), "demo", &Metrics::new());
    let owner = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        name: Some("owner".into()),
        namespace: Some("default".into()),
        ..Default::default()
    };
    let recorder = Recorder::new(&queue, owner);
    let expectations = SharedExpectations::new(ScaleExpectations::new(
        kruise_core::expectations::DEFAULT_EXPECTATION_TIMEOUT,
    ));
    let writes = ScaleWrites::new(client.clone(), "default", &expectations, "default/owner");

    let created = writes
        .create_recorded(&pod("demo-a"), Some("demo-a"), &recorder, "pod demo-a")
        .await
        .unwrap();
    assert_eq!(created.name(), Some("demo-a"));
    let event = eventually("the SuccessfulCreate event", WAIT, || async {
        events_about(&client, "default", "owner")
            .await
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("SuccessfulCreate"))
    })
    .await;
    assert_eq!(event.message.as_deref(), Some("Created pod: demo-a"));
    assert_eq!(
        event.related.and_then(|r| r.name).as_deref(),
        Some("demo-a"),
        "the event names the pod it created"
    );

    // An invalid name: refused, a Warning on the owner, the shell's `create` error, and its
    // expectation forgotten (the next pass does not wait for a pod never made) while the
    // first create's stays until the cache shows it.
    let refused = writes
        .create_recorded(&pod("Demo_B"), Some("Demo_B"), &recorder, "pod Demo_B")
        .await
        .unwrap_err();
    assert!(matches!(refused, ShellError::Create(_)), "{refused:?}");
    assert_eq!(refused.category(), "create");
    assert!(
        refused.to_string().starts_with("creating pod Demo_B"),
        "{refused}"
    );
    let message = wait_for_warning(&client, "default", "owner", "FailedCreate").await;
    assert!(message.starts_with("Error creating: "), "{message}");
    let pending = expectations.with(|e| e.pending("default/owner")).unwrap();
    let creates: Vec<&String> = pending.values().flatten().collect();
    assert_eq!(creates, ["demo-a"], "{pending:?}");
}
