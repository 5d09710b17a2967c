//! Counting a test client's requests the way kruise-sim counts the ones it serves, so a
//! test reads writes per object from the same counters against kruise-sim and against the
//! real kube-apiserver.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use kruise_sim::{Counters, RequestKey};
use kube::client::Body;

/// Counts each request of a client into [`Counters`] once answered, keyed as kruise-sim
/// keys its own.
pub(crate) struct CountingLayer(pub(crate) Arc<Counters>);

impl<S> tower::Layer<S> for CountingLayer {
    type Service = Counting<S>;
    fn layer(&self, inner: S) -> Counting<S> {
        Counting {
            inner,
            counters: self.0.clone(),
        }
    }
}

pub(crate) struct Counting<S> {
    inner: S,
    counters: Arc<Counters>,
}

type Answer<R, E> = Pin<Box<dyn std::future::Future<Output = Result<R, E>> + Send>>;

impl<S, B> tower::Service<http::Request<Body>> for Counting<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Answer<S::Response, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let key = request_key(&request);
        let answer = self.inner.call(request);
        let counters = self.counters.clone();
        Box::pin(async move {
            let mut pending = key.map(|key| Unanswered {
                key: Some(key),
                counters,
            });
            let response = answer.await;
            if let (Some(pending), Ok(response)) = (pending.as_mut(), &response) {
                pending.answered(response.status().as_u16());
            }
            response
        })
    }
}

/// A request sent and not answered yet. One whose answer never comes (the client stopped
/// waiting, as a controller stopped mid-request does, or the connection failed) is counted
/// with code 0: the API server may have carried it out, and kruise-sim, counting on its
/// side, would count it.
struct Unanswered {
    key: Option<RequestKey>,
    counters: Arc<Counters>,
}

impl Unanswered {
    fn answered(&mut self, code: u16) {
        if let Some(mut key) = self.key.take() {
            key.code = code;
            self.counters.record(key);
        }
    }
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        self.answered(0);
    }
}

/// The counter key of a resource request (code 0 until answered); None for discovery.
fn request_key<T>(request: &http::Request<T>) -> Option<RequestKey> {
    let segments: Vec<&str> = request
        .uri()
        .path()
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return None,
    };
    let rest = match rest {
        ["namespaces", _, resource, more @ ..] => {
            let mut r = vec![*resource];
            r.extend(more);
            r
        }
        other => other.to_vec(),
    };
    let (resource, name, subresource) = match rest.as_slice() {
        [resource] => (*resource, None, ""),
        [resource, name] => (*resource, Some(*name), ""),
        [resource, name, subresource, ..] => (*resource, Some(*name), *subresource),
        [] => return None,
    };
    let watch = request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    let verb = match *request.method() {
        http::Method::GET | http::Method::HEAD if watch => "watch",
        http::Method::GET | http::Method::HEAD if name.is_some() => "get",
        http::Method::GET | http::Method::HEAD => "list",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE if name.is_some() => "delete",
        http::Method::DELETE => "deletecollection",
        _ => "unknown",
    };
    let user_agent = request
        .headers()
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    Some(RequestKey {
        verb: verb.into(),
        group: group.into(),
        resource: resource.into(),
        subresource: subresource.into(),
        user_agent: user_agent.into(),
        code: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(method: http::Method, uri: &str) -> Option<(String, String, String, String)> {
        let request = http::Request::builder()
            .method(method)
            .uri(uri)
            .body(())
            .unwrap();
        request_key(&request).map(|k| (k.verb, k.group, k.resource, k.subresource))
    }

    fn k(
        verb: &str,
        group: &str,
        resource: &str,
        sub: &str,
    ) -> Option<(String, String, String, String)> {
        Some((verb.into(), group.into(), resource.into(), sub.into()))
    }

    #[test]
    fn requests_are_keyed_as_the_simulator_keys_them() {
        use http::Method;
        let cases = [
            (
                Method::POST,
                "/api/v1/namespaces/a/pods",
                k("create", "", "pods", ""),
            ),
            (
                Method::PATCH,
                "/api/v1/namespaces/a/pods/web-x/status?fieldManager=m",
                k("patch", "", "pods", "status"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/a/pods?watch=true&resourceVersion=1",
                k("watch", "", "pods", ""),
            ),
            (
                Method::GET,
                "/api/v1/pods?labelSelector=a%3Db",
                k("list", "", "pods", ""),
            ),
            (
                Method::GET,
                "/apis/apps.kruise.io/v1beta1/namespaces/a/clonesets/web",
                k("get", "apps.kruise.io", "clonesets", ""),
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/a/pods/web-x",
                k("delete", "", "pods", ""),
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/a/pods",
                k("deletecollection", "", "pods", ""),
            ),
            (
                Method::PUT,
                "/apis/apps.kruise.io/v1beta1/namespaces/a/clonesets/web/scale",
                k("update", "apps.kruise.io", "clonesets", "scale"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/a",
                k("get", "", "namespaces", ""),
            ),
            (
                Method::POST,
                "/api/v1/namespaces",
                k("create", "", "namespaces", ""),
            ),
            (Method::GET, "/apis", None),
            (Method::GET, "/version", None),
        ];
        for (method, uri, expected) in cases {
            assert_eq!(key(method, uri), expected, "{uri}");
        }
    }
}
