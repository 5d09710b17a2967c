//! A counting proxy in front of a real API server, for the processes a test starts (a
//! family binary, an in-process `Binary::run_argv`): they get a kubeconfig naming
//! `http://127.0.0.1:PORT`, and every request they send goes through a client of the
//! testkit's (admin, counted), so their requests are counted by user agent as kruise-sim's
//! server counts them. Loopback only, no authentication of its own: test infrastructure.

use std::path::{Path, PathBuf};

use axum::body::Body as AxumBody;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use kube::Client;
use kube::client::Body;

/// The proxy of one test; stopped (and its kubeconfig removed) when dropped.
pub struct CountingProxy {
    kubeconfig: PathBuf,
    server: tokio::task::JoinHandle<()>,
}

impl CountingProxy {
    /// Serves on a free loopback port, forwarding through `upstream`, and writes a
    /// kubeconfig for it whose default namespace is `namespace`.
    pub async fn start(upstream: Client, namespace: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let router = axum::Router::new().fallback(forward).with_state(upstream);
        let server = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router).await {
                eprintln!("counting proxy: {e}");
            }
        });
        let kubeconfig = std::env::temp_dir().join(format!(
            "kruise-testkit-{}-{port}.kubeconfig",
            std::process::id()
        ));
        std::fs::write(&kubeconfig, kubeconfig_text(port, namespace))
            .unwrap_or_else(|e| panic!("writing {}: {e}", kubeconfig.display()));
        Self { kubeconfig, server }
    }

    /// The kubeconfig naming the proxy.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.server.abort();
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

fn kubeconfig_text(port: u16, namespace: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\n\
         clusters:\n- name: proxy\n  cluster:\n    server: http://127.0.0.1:{port}\n\
         users:\n- name: proxy\n  user: {{}}\n\
         contexts:\n- name: proxy\n  context:\n    cluster: proxy\n    user: proxy\n    namespace: {namespace}\n\
         current-context: proxy\n"
    )
}

/// Headers of one hop only, or that the forwarding client sets itself (it negotiates its
/// own compression and length).
fn forwarded(name: &http::HeaderName) -> bool {
    !matches!(
        name.as_str(),
        "host"
            | "connection"
            | "transfer-encoding"
            | "content-length"
            | "accept-encoding"
            | "authorization"
    )
}

async fn forward(State(upstream): State<Client>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(e) => return (http::StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let mut builder = http::Request::builder().method(parts.method).uri(path);
    for (name, value) in parts.headers.iter().filter(|(n, _)| forwarded(n)) {
        builder = builder.header(name, value);
    }
    let request = match builder.body(Body::from(bytes.to_vec())) {
        Ok(request) => request,
        Err(e) => return (http::StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    match upstream.send(request).await {
        Ok(response) => {
            let (mut parts, body) = response.into_parts();
            parts.headers.remove(http::header::TRANSFER_ENCODING);
            parts.headers.remove(http::header::CONTENT_LENGTH);
            Response::from_parts(parts, AxumBody::new(body))
        }
        Err(e) => (http::StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
}
