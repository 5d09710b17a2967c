//! A deadline on every API request except watches.
//!
//! kube's client waits for a response as long as it takes (`read_timeout` is off by
//! default, and setting it would also cut idle watches). A request the server never answers
//! would then hold its reconcile, and with it the object's key, forever: kube-runtime runs
//! one reconcile per object at a time, so later events for it only mark it dirty. With
//! this layer such a request fails after the deadline with [`DeadlineExceeded`]; the
//! reconcile returns that error and is requeued with backoff like any other failure. The
//! deadline runs until the response headers arrive (the body follows at once for every
//! request but a watch, whose stream is guarded by the watcher's own timeout).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tower::{BoxError, Layer, Service};

/// How long a request may wait for its response: above the 60 s after which the
/// Kubernetes API server gives up on a request itself (`--request-timeout`), so a slow
/// but answering server is never cut short.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(70);

/// A kube client for `config` whose every request but a watch fails after `deadline`
/// without a response (what [`super::client_from`] builds, with [`REQUEST_DEADLINE`]).
pub fn client_with_deadline(
    config: kube::Config,
    deadline: Duration,
) -> Result<kube::Client, kube::Error> {
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&RequestDeadlineLayer::new(deadline))
        .build())
}

/// A request that got no response within its deadline.
#[derive(Debug, thiserror::Error)]
#[error("no response to {method} {path} within {deadline:?}")]
pub struct DeadlineExceeded {
    pub method: http::Method,
    pub path: String,
    pub deadline: Duration,
}

/// Wraps a client's service so every request but a watch has `deadline`.
#[derive(Debug, Clone, Copy)]
pub struct RequestDeadlineLayer {
    deadline: Duration,
}

impl RequestDeadlineLayer {
    pub fn new(deadline: Duration) -> Self {
        RequestDeadlineLayer { deadline }
    }
}

impl<S> Layer<S> for RequestDeadlineLayer {
    type Service = RequestDeadline<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestDeadline {
            inner,
            deadline: self.deadline,
        }
    }
}

/// The service [`RequestDeadlineLayer`] builds.
#[derive(Debug, Clone)]
pub struct RequestDeadline<S> {
    inner: S,
    deadline: Duration,
}

/// Whether `uri` asks for a watch (`?watch=true` or `=1`, or the legacy `/watch/` path).
fn is_watch(uri: &http::Uri) -> bool {
    let by_query = uri.query().is_some_and(|q| {
        q.split('&')
            .any(|pair| matches!(pair, "watch=true" | "watch=1"))
    });
    by_query || uri.path().split('/').any(|segment| segment == "watch")
}

impl<S, B> Service<http::Request<B>> for RequestDeadline<S>
where
    S: Service<http::Request<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let watch = is_watch(request.uri());
        let exceeded = DeadlineExceeded {
            method: request.method().clone(),
            path: request.uri().path().to_string(),
            deadline: self.deadline,
        };
        let response = self.inner.call(request);
        let deadline = self.deadline;
        Box::pin(async move {
            if watch {
                return response.await.map_err(Into::into);
            }
            match tokio::time::timeout(deadline, response).await {
                Ok(result) => result.map_err(Into::into),
                Err(_) => {
                    tracing::warn!(method = %exceeded.method, path = %exceeded.path, ?deadline,
                        "no response from the API server within the request deadline");
                    Err(exceeded.into())
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watches_are_told_apart_from_other_requests() {
        let uri = |s: &str| s.parse::<http::Uri>().unwrap();
        assert!(is_watch(&uri(
            "/api/v1/namespaces/default/pods?watch=true&resourceVersion=5"
        )));
        assert!(is_watch(&uri("/api/v1/pods?labelSelector=a%3Db&watch=1")));
        assert!(is_watch(&uri("/api/v1/watch/namespaces/default/pods")));
        assert!(!is_watch(&uri("/api/v1/namespaces/default/pods?limit=500")));
        assert!(!is_watch(&uri("/api/v1/namespaces/default/pods/watcher")));
        assert!(!is_watch(&uri("/api/v1/pods?watch=false")));
    }

    /// A server that accepts connections and reads requests but never answers one: the
    /// client's request fails after the deadline instead of waiting forever; a watch is
    /// left waiting.
    #[tokio::test]
    async fn a_request_the_server_never_answers_fails_after_the_deadline() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
        let client = client_with_deadline(config, Duration::from_millis(300)).unwrap();
        let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::namespaced(client, "default");

        let started = std::time::Instant::now();
        let outcome = tokio::time::timeout(Duration::from_secs(10), pods.get("web-0"))
            .await
            .expect("the request returned");
        let err = outcome.expect_err("no response, so an error");
        assert!(
            err.to_string().contains("within 300ms")
                || format!("{err:?}").contains("DeadlineExceeded"),
            "{err:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(5));

        let params = kube::api::WatchParams::default();
        let watch = pods.watch(&params, "0");
        assert!(
            tokio::time::timeout(Duration::from_millis(800), watch)
                .await
                .is_err(),
            "a watch has no request deadline"
        );
        server.abort();
    }
}
