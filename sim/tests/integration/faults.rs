use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kruise_sim::FaultRule;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{api_err, sim};

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

#[tokio::test]
async fn error_rules_and_latency() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client_without_retries().unwrap(), "default");
    let id = sim.faults().add(
        FaultRule::new()
            .verb("create")
            .resource("configmaps")
            .error(500, 1.0),
    );
    let err = api_err(
        api.create(&PostParams::default(), &cm("a"))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (500, "InternalError"));
    // Other verbs are unaffected.
    api.list(&ListParams::default()).await.unwrap();
    sim.faults().remove(id);
    api.create(&PostParams::default(), &cm("a")).await.unwrap();

    // Limited number of failures.
    sim.faults()
        .add(FaultRule::new().verb("get").error(503, 1.0).times(2));
    assert_eq!(api_err(api.get("a").await.unwrap_err()).code, 503);
    assert_eq!(api_err(api.get("a").await.unwrap_err()).code, 503);
    api.get("a").await.unwrap();

    sim.faults().add(
        FaultRule::new()
            .verb("get")
            .latency(Duration::from_millis(200))
            .times(1),
    );
    let t = Instant::now();
    api.get("a").await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(200));
}

#[tokio::test]
async fn forced_conflicts() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    sim.faults().force_conflicts("configmaps", 1);
    let err = api_err(
        api.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "v"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v"}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn pause_holds_requests_until_resume() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    sim.faults().pause();
    let pending = tokio::spawn({
        let api = api.clone();
        async move { api.create(&PostParams::default(), &cm("late")).await }
    });
    // While paused the request gets no answer.
    assert!(
        tokio::time::timeout(Duration::from_millis(300), async {
            while !pending.is_finished() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .is_err()
    );
    sim.faults().resume();
    pending.await.unwrap().unwrap();
}

#[tokio::test]
async fn counters_and_metrics() {
    let sim = sim().await;
    let mut config = sim.client_config().unwrap();
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static("kruise-test/1.0"),
    ));
    let client = kube::Client::try_from(config).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in 0..3 {
        api.create(&PostParams::default(), &cm(&format!("c{i}")))
            .await
            .unwrap();
    }
    api.patch(
        "c0",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"a": "b"}})),
    )
    .await
    .unwrap();
    api.list(&ListParams::default()).await.unwrap();
    let c = sim.counters();
    assert_eq!(c.by_user_agent("kruise-test"), 5);
    assert_eq!(c.count("create", "configmaps"), 3);
    assert_eq!(c.count("patch", "configmaps"), 1);
    assert_eq!(c.count("list", "configmaps"), 1);
    assert_eq!(c.writes("configmaps"), 4);
    let snapshot = c.snapshot();
    assert!(
        snapshot
            .iter()
            .any(|(k, _)| k.user_agent == "kruise-test/1.0" && k.code == 201)
    );
    let text = client
        .request_text(
            http::Request::builder()
                .uri("/metrics")
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert!(text.contains("apiserver_request_total{verb=\"create\",group=\"\",resource=\"configmaps\",subresource=\"\""), "{text}");
}
