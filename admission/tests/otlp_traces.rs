//! With `OTEL_EXPORTER_OTLP_ENDPOINT` set, a binary exports one span per reconcile carrying
//! the object's namespace and name over OTLP/gRPC; a stand-in collector records the export
//! requests (protobuf strings are plain UTF-8 in the body, so a byte search suffices).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use kruise_sim::{Sim, SimConfig};
use kube::api::{DynamicObject, PostParams};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_kruise-runtime-example");

#[tokio::test]
async fn reconcile_spans_reach_the_otlp_collector() {
    let received: Arc<Mutex<Vec<u8>>> = Arc::default();
    let sink = received.clone();
    let collector = Router::new().route(
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        post(move |body: Bytes| {
            let sink = sink.clone();
            async move {
                sink.lock().unwrap().extend_from_slice(&body);
                (
                    [("content-type", "application/grpc"), ("grpc-status", "0")],
                    // An empty ExportTraceServiceResponse in one gRPC frame.
                    vec![0u8, 0, 0, 0, 0],
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let otlp = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, collector).await });

    let sim = Sim::start(SimConfig::default()).await.unwrap();
    let client = sim.client().unwrap();
    let greetings = support::install_greetings(BIN, &client).await;
    let g: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.kruise.io/v1alpha1", "kind": "Greeting",
        "metadata": {"name": "traced-greeting", "namespace": "default"}, "spec": {"message": "hi"}
    }))
    .unwrap();
    greetings.create(&PostParams::default(), &g).await.unwrap();

    let kubeconfig = sim.kubeconfig_path().unwrap();
    let _binary = support::spawn_replica(
        BIN,
        &kubeconfig,
        support::free_port(),
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{otlp}")),
            ("OTEL_BSP_SCHEDULE_DELAY", "100".to_string()),
        ],
    );
    support::eventually(
        "a reconcile span with the object's name",
        Duration::from_secs(30),
        || {
            let body = received.lock().unwrap().clone();
            async move {
                let has = |s: &str| body.windows(s.len()).any(|w| w == s.as_bytes());
                (has("reconcile")
                    && has("traced-greeting")
                    && has("k8s.namespace")
                    && has("kruise-runtime-example"))
                .then_some(())
            }
        },
    )
    .await;
    sim.shutdown().await;
}
