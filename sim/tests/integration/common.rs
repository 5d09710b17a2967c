use std::time::Duration;

use http_body_util::BodyExt;
use kruise_sim::{Sim, SimConfig};
use serde_json::Value;

pub async fn sim() -> Sim {
    Sim::start(SimConfig::default()).await.expect("sim starts")
}

pub async fn sim_with(config: SimConfig) -> Sim {
    Sim::start(config).await.expect("sim starts")
}

/// Polls `f` until it returns Some, failing after `secs` seconds.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {secs}s waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Raw request; returns (status, parsed JSON body or Null).
pub async fn raw(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: &[u8],
) -> (u16, Value) {
    let mut b = http::Request::builder().method(method).uri(path);
    if let Some(ct) = content_type {
        b = b.header("content-type", ct);
    }
    let req = b
        .body(kube::client::Body::from(body.to_vec()))
        .expect("request builds");
    let resp = client.send(req).await.expect("request sent");
    let status = resp.status().as_u16();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .expect("body read")
        .to_bytes();
    let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, v)
}

pub fn api_err(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}
