//! kruise-admission: the HTTPS admission server any binary embeds. Each family serves its
//! own CRD webhooks (validate, default, `/convert`) and kruise-webhook serves the pod chain;
//! the steps themselves ([`AdmissionHandler`], the pod chain, converters) are
//! `kruise_core::admission`, re-exported here so a family's webhook code names one crate.
//!
//! The server routes AdmissionReviews to the handler at their path. A malformed review gets
//! HTTP 400 with the reason; a handler error or panic becomes a response that denies with a
//! message, never a crashed server; a review as large as the API server may send is read
//! ([`MAX_ADMISSION_REVIEW_BYTES`]). Certificates come from files (cert-manager style,
//! reloaded when they change) or are self-managed in a Secret ([`certs`]), and the caBundle
//! is written into the configurations this binary owns ([`publish`]); [`runner`] runs all of
//! it for a binary, [`crd_webhooks`] holds the validations every family's CRDs share.

pub mod certs;
pub mod crd_webhooks;
pub mod protection_log;
pub mod publish;
pub mod repair;
pub mod runner;

pub use kruise_core::admission::*;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::FutureExt as _;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionReview};
use tokio_util::sync::CancellationToken;

use kruise_runtime::metrics::{AdmissionMetrics, WebhookCodeLabel, WebhookLabel};

/// kube-apiserver's limit on a request body (the generic API server's `MaxRequestBodyBytes`,
/// 3 MiB): no object it admits is larger.
pub const API_SERVER_MAX_REQUEST_BYTES: usize = 3 * 1024 * 1024;

/// The largest AdmissionReview the server reads. An UPDATE review carries `object` and
/// `oldObject`, each up to [`API_SERVER_MAX_REQUEST_BYTES`], and the rest of the request
/// (kinds, user info, options) stays well under 1 MiB: 7 MiB, as controller-runtime sizes
/// OpenKruise's webhooks. Below that, updates of large objects fail with 413.
pub const MAX_ADMISSION_REVIEW_BYTES: usize = 2 * API_SERVER_MAX_REQUEST_BYTES + 1024 * 1024;

/// The largest ConversionReview the server reads. The API server converts a LIST in one
/// review carrying every object of the page, so this is sized for thousands of objects, not
/// one; it still bounds what a caller can make the server hold.
pub const MAX_CONVERSION_REVIEW_BYTES: usize = 64 * 1024 * 1024;

/// The routes of an admission server: handlers by path plus the CRD converters behind
/// `/convert`. Build once, then [`AdmissionRoutes::router`] or [`serve`].
#[derive(Clone, Default)]
pub struct AdmissionRoutes {
    handlers: HashMap<String, Arc<dyn AdmissionHandler>>,
    converters: Vec<Arc<dyn Converter>>,
    refresh: Arc<tokio::sync::Notify>,
    metrics: Option<AdmissionMetrics>,
}

impl AdmissionRoutes {
    /// No handlers yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a handler at its path (a later handler at the same path replaces the earlier).
    pub fn handler(mut self, h: impl AdmissionHandler) -> Self {
        self.handlers.insert(h.path().to_string(), Arc::new(h));
        self
    }

    /// Adds a handler built elsewhere (one a family lends kruise-webhook) at its path.
    pub fn shared_handler(mut self, h: Arc<dyn AdmissionHandler>) -> Self {
        self.handlers.insert(h.path().to_string(), h);
        self
    }

    /// Adds a CRD converter served at `/convert`.
    pub fn converter(mut self, c: impl Converter) -> Self {
        self.converters.push(Arc::new(c));
        self
    }

    /// Uses `refresh` (shared with whatever watches the handlers' inputs) as the notifier.
    pub fn with_refresh(mut self, refresh: Arc<tokio::sync::Notify>) -> Self {
        self.refresh = refresh;
        self
    }

    /// Records requests, denials and latency per path in `metrics` (see [`AdmissionMetrics`]).
    pub fn with_metrics(mut self, metrics: &kruise_runtime::Metrics) -> Self {
        self.metrics = Some(AdmissionMetrics::register(metrics));
        self
    }

    /// Notified when a handler's webhook entries may have changed (e.g. a SidecarSet was
    /// added): the runner then republishes the configurations.
    pub fn refresh(&self) -> Arc<tokio::sync::Notify> {
        self.refresh.clone()
    }

    /// The webhook specs of every handler with its path, for the configurations.
    pub fn webhooks(&self) -> Vec<(String, WebhookSpec)> {
        let mut v: Vec<_> = self
            .handlers
            .iter()
            .flat_map(|(p, h)| h.webhooks().into_iter().map(move |w| (p.clone(), w)))
            .collect();
        v.sort_by(|a, b| a.1.name.cmp(&b.1.name));
        v
    }

    /// Whether every handler's entries are known (see [`AdmissionHandler::webhooks_known`]).
    pub fn webhooks_known(&self) -> bool {
        self.handlers.values().all(|h| h.webhooks_known())
    }

    /// Decides one AdmissionReview body, as the HTTP route does: `Err((400, reason))` for a
    /// body that is not a v1 AdmissionReview with a request. Counted in the metrics.
    pub async fn review(
        &self,
        path: &str,
        body: &[u8],
    ) -> Result<serde_json::Value, (u16, String)> {
        let Some(metrics) = &self.metrics else {
            return self.review_unmetered(path, body).await;
        };
        let label = WebhookLabel {
            webhook: path.to_string(),
        };
        let in_flight = metrics.in_flight.get_or_create(&label).clone();
        in_flight.inc();
        let start = std::time::Instant::now();
        let outcome = self.review_unmetered(path, body).await;
        in_flight.dec();
        metrics
            .latency
            .get_or_create(&label)
            .observe(start.elapsed().as_secs_f64());
        let code = match &outcome {
            Ok(v) => {
                if v.pointer("/response/allowed") == Some(&serde_json::Value::Bool(false)) {
                    metrics.denials.get_or_create(&label).inc();
                }
                200
            }
            Err((code, _)) => *code,
        };
        metrics
            .requests
            .get_or_create(&WebhookCodeLabel {
                webhook: label.webhook,
                code: code.to_string(),
            })
            .inc();
        outcome
    }

    async fn review_unmetered(
        &self,
        path: &str,
        body: &[u8],
    ) -> Result<serde_json::Value, (u16, String)> {
        let Some(handler) = self.handlers.get(path) else {
            return Err((404, format!("no admission handler at {path}")));
        };
        let raw: serde_json::Value = serde_json::from_slice(body)
            .map_err(|e| (400, format!("malformed AdmissionReview: {e}")))?;
        let api_version = raw.get("apiVersion").and_then(|v| v.as_str()).unwrap_or("");
        let kind = raw.get("kind").and_then(|v| v.as_str()).unwrap_or("");
        if api_version != "admission.k8s.io/v1" || kind != "AdmissionReview" {
            return Err((
                400,
                format!(
                    "unsupported review {api_version:?}/{kind:?}: want admission.k8s.io/v1 AdmissionReview"
                ),
            ));
        }
        let review: AdmissionReview<DynamicObject> = serde_json::from_value(raw)
            .map_err(|e| (400, format!("malformed AdmissionReview: {e}")))?;
        let request: AdmissionRequest<DynamicObject> = review
            .try_into()
            .map_err(|_| (400, "AdmissionReview has no request".to_string()))?;
        let span = tracing::info_span!(
            "admission",
            webhook = path,
            uid = %request.uid,
            operation = ?request.operation,
            kind = %request.kind.kind,
            k8s.namespace = request.namespace.as_deref().unwrap_or(""),
            k8s.name = %request.name,
        );
        let outcome = tracing::Instrument::instrument(
            std::panic::AssertUnwindSafe(handler.handle(&request)).catch_unwind(),
            span,
        )
        .await;
        let mut response = match outcome {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => {
                tracing::warn!(path, uid = %request.uid, error = %e, "admission handler error");
                denied(&request, e.code(), e)
            }
            Err(_) => {
                tracing::error!(path, uid = %request.uid, "admission handler panicked");
                denied(&request, 500, "internal error in admission handler")
            }
        };
        complete_denial(&mut response);
        let mut out = serde_json::to_value(response.into_review())
            .map_err(|e| (500, format!("encoding AdmissionReview: {e}")))?;
        base64_patch(&mut out);
        Ok(out)
    }

    /// The axum router: every handler path, `/convert`, and `/healthz`. Bodies beyond
    /// [`MAX_ADMISSION_REVIEW_BYTES`] (reviews) or [`MAX_CONVERSION_REVIEW_BYTES`]
    /// (`/convert`) get 413.
    pub fn router(self) -> Router {
        let shared = Arc::new(self);
        let mut router = Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route(
                "/convert",
                post(convert_route).layer(DefaultBodyLimit::max(MAX_CONVERSION_REVIEW_BYTES)),
            );
        for path in shared.handlers.keys() {
            router = router.route(
                path,
                post(review_route).layer(DefaultBodyLimit::max(MAX_ADMISSION_REVIEW_BYTES)),
            );
        }
        router.with_state(shared)
    }
}

async fn review_route(
    State(routes): State<Arc<AdmissionRoutes>>,
    uri: axum::http::Uri,
    body: Bytes,
) -> Response {
    match routes.review(uri.path(), &body).await {
        Ok(v) => axum::Json(v).into_response(),
        Err((code, reason)) => (
            StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST),
            reason,
        )
            .into_response(),
    }
}

async fn convert_route(State(routes): State<Arc<AdmissionRoutes>>, body: Bytes) -> Response {
    let start = std::time::Instant::now();
    let outcome = conversion::review(&routes.converters, &body);
    if let Some(m) = &routes.metrics {
        let label = WebhookLabel {
            webhook: "/convert".into(),
        };
        m.latency
            .get_or_create(&label)
            .observe(start.elapsed().as_secs_f64());
        let code = if outcome.is_ok() { "200" } else { "400" };
        m.requests
            .get_or_create(&WebhookCodeLabel {
                webhook: label.webhook,
                code: code.into(),
            })
            .inc();
    }
    match outcome {
        Ok(v) => axum::Json(v).into_response(),
        Err(reason) => (StatusCode::BAD_REQUEST, reason).into_response(),
    }
}

/// kube serialises `response.patch` as an array of numbers; Go API servers and webhooks
/// use the base64 string form of `[]byte`, so send that.
fn base64_patch(review: &mut serde_json::Value) {
    use base64::Engine as _;
    let Some(patch) = review.pointer_mut("/response/patch") else {
        return;
    };
    if let Some(items) = patch.as_array() {
        let bytes: Vec<u8> = items
            .iter()
            .filter_map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
            .collect();
        *patch = serde_json::Value::String(base64::engine::general_purpose::STANDARD.encode(bytes));
    }
}

/// A running admission server.
pub struct AdmissionServer {
    /// The bound address.
    pub addr: SocketAddr,
    handle: axum_server::Handle<SocketAddr>,
    task: tokio::task::JoinHandle<()>,
}

impl AdmissionServer {
    /// Stops accepting, lets open requests finish (at most `grace`), and waits.
    pub async fn stop(self, grace: Duration) {
        self.handle.graceful_shutdown(Some(grace));
        let _ = self.task.await;
    }
}

/// Serves `routes` over TLS on `addr` with the certificate `tls` holds (kept current by
/// [`certs`]), until `shutdown` fires.
pub async fn serve(
    addr: SocketAddr,
    routes: AdmissionRoutes,
    tls: axum_server::tls_rustls::RustlsConfig,
    shutdown: CancellationToken,
) -> std::io::Result<AdmissionServer> {
    kruise_runtime::install_crypto_provider();
    let handle = axum_server::Handle::new();
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    let server = axum_server::from_tcp_rustls(listener, tls)?.handle(handle.clone());
    let app = routes.router();
    let stopper = handle.clone();
    tokio::spawn(async move {
        shutdown.cancelled().await;
        stopper.graceful_shutdown(Some(Duration::from_secs(10)));
    });
    let task = tokio::spawn(async move {
        if let Err(e) = server.serve(app.into_make_service()).await {
            tracing::error!(error = %e, "admission server failed");
        }
    });
    Ok(AdmissionServer {
        addr: bound,
        handle,
        task,
    })
}
