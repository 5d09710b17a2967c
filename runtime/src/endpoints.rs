//! The endpoints every binary serves: `/metrics`, and `/healthz` `/livez` `/readyz` from
//! named readiness checks.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use crate::flags::Flags;
use crate::metrics::Metrics;

/// Named readiness checks; `/readyz` passes when all registered checks pass.
#[derive(Clone, Default)]
pub struct Readiness {
    checks: Arc<Mutex<BTreeMap<String, bool>>>,
}

impl Readiness {
    /// Adds a check that fails until [`Readiness::set`] passes it.
    pub fn register(&self, name: &str) {
        if let Ok(mut c) = self.checks.lock() {
            c.entry(name.to_string()).or_insert(false);
        }
    }
    /// Sets a check's state (registering it if new).
    pub fn set(&self, name: &str, ok: bool) {
        if let Ok(mut c) = self.checks.lock() {
            c.insert(name.to_string(), ok);
        }
    }
    /// The failing checks; empty when ready.
    pub fn failing(&self) -> Vec<String> {
        match self.checks.lock() {
            Ok(c) => c
                .iter()
                .filter(|(_, ok)| !**ok)
                .map(|(n, _)| n.clone())
                .collect(),
            Err(_) => vec!["readiness lock poisoned".into()],
        }
    }
}

/// The bound addresses of the endpoint servers.
pub struct Endpoints {
    /// Where `/metrics` listens.
    pub metrics: SocketAddr,
    /// Where `/healthz` and `/readyz` listen.
    pub health: SocketAddr,
    tasks: tokio::task::JoinSet<()>,
    stop: CancellationToken,
}

impl Endpoints {
    pub(crate) async fn stop(mut self) {
        self.stop.cancel();
        while self.tasks.join_next().await.is_some() {}
    }
}

/// Binds and serves `/metrics` and `/healthz` `/readyz` (on one listener if both flags name
/// the same address).
pub async fn serve_endpoints(
    flags: &Flags,
    metrics: Metrics,
    readiness: Readiness,
    shutdown: CancellationToken,
) -> anyhow::Result<Endpoints> {
    let stop = shutdown.child_token();
    let metrics_router = Router::new()
        .route("/metrics", get(metrics_handler))
        .with_state(metrics);
    let health_router = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(readyz_handler))
        .with_state(readiness);
    let mut tasks = tokio::task::JoinSet::new();
    let bind = |addr: SocketAddr, what: &'static str| async move {
        tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding {what} address {addr}"))
    };
    let (metrics_addr, health_addr) = if flags.metrics_addr == flags.health_addr {
        let l = bind(flags.metrics_addr, "metrics").await?;
        let addr = l.local_addr()?;
        tasks.spawn(serve(l, metrics_router.merge(health_router), stop.clone()));
        (addr, addr)
    } else {
        let lm = bind(flags.metrics_addr, "metrics").await?;
        let lh = bind(flags.health_addr, "health").await?;
        let (am, ah) = (lm.local_addr()?, lh.local_addr()?);
        tasks.spawn(serve(lm, metrics_router, stop.clone()));
        tasks.spawn(serve(lh, health_router, stop.clone()));
        (am, ah)
    };
    Ok(Endpoints {
        metrics: metrics_addr,
        health: health_addr,
        tasks,
        stop,
    })
}

async fn serve(listener: tokio::net::TcpListener, router: Router, stop: CancellationToken) {
    let result = axum::serve(listener, router)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await;
    if let Err(e) = result {
        tracing::error!(error = %e, "endpoint server failed");
    }
}

async fn metrics_handler(
    State(metrics): State<Metrics>,
) -> (StatusCode, [(http::HeaderName, &'static str); 1], String) {
    match metrics.encode() {
        Ok(body) => (
            StatusCode::OK,
            [(
                http::header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        ),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(http::header::CONTENT_TYPE, "text/plain")],
            "encoding metrics failed".into(),
        ),
    }
}

async fn readyz_handler(State(readiness): State<Readiness>) -> (StatusCode, String) {
    let failing = readiness.failing();
    if failing.is_empty() {
        (StatusCode::OK, "ok".into())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}", failing.join(", ")),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_checks() {
        let r = Readiness::default();
        assert!(r.failing().is_empty());
        r.register("a");
        assert_eq!(r.failing(), vec!["a".to_string()]);
        r.set("a", true);
        assert!(r.failing().is_empty());
    }
}
