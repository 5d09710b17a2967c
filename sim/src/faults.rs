//! Fault injection for chaos tests: error rates and latency per verb/resource, forced
//! conflicts, dropped watches, forced 410 Gone on watches, and a paused server.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;

use crate::error::ApiError;

/// A rule matching requests by verb/resource/subresource (None = any).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultRule {
    pub verb: Option<String>,
    pub resource: Option<String>,
    pub subresource: Option<String>,
    /// Probability in [0, 1] that a matching request fails with `error_code`.
    pub error_rate: f64,
    pub error_code: u16,
    /// Added before the request is served.
    pub latency: Duration,
    /// How many more matching requests the rule affects (None = unlimited).
    pub remaining: Option<u64>,
}

impl FaultRule {
    pub fn new() -> Self {
        FaultRule {
            error_code: 500,
            ..Default::default()
        }
    }
    pub fn verb(mut self, verb: &str) -> Self {
        self.verb = Some(verb.to_string());
        self
    }
    pub fn resource(mut self, resource: &str) -> Self {
        self.resource = Some(resource.to_string());
        self
    }
    pub fn subresource(mut self, sub: &str) -> Self {
        self.subresource = Some(sub.to_string());
        self
    }
    pub fn error(mut self, code: u16, rate: f64) -> Self {
        self.error_code = code;
        self.error_rate = rate.clamp(0.0, 1.0);
        self
    }
    pub fn latency(mut self, d: Duration) -> Self {
        self.latency = d;
        self
    }
    pub fn times(mut self, n: u64) -> Self {
        self.remaining = Some(n);
        self
    }
    fn matches(&self, verb: &str, resource: &str, sub: &str) -> bool {
        self.verb.as_deref().is_none_or(|v| v == verb)
            && self.resource.as_deref().is_none_or(|r| r == resource)
            && self.subresource.as_deref().is_none_or(|s| s == sub)
    }
}

pub type FaultId = u64;

/// What to do to one request.
#[derive(Debug, Default)]
pub struct FaultDecision {
    pub latency: Duration,
    pub error: Option<ApiError>,
}

pub struct Faults {
    rules: Mutex<Vec<(FaultId, FaultRule)>>,
    next_id: AtomicU64,
    forced_conflicts: Mutex<HashMap<String, u64>>,
    forced_watch_gone: AtomicU64,
    paused: watch::Sender<bool>,
    watch_generation: watch::Sender<u64>,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            rules: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            forced_conflicts: Mutex::new(HashMap::new()),
            forced_watch_gone: AtomicU64::new(0),
            paused: watch::channel(false).0,
            watch_generation: watch::channel(0).0,
        }
    }
}

fn error_for(code: u16) -> ApiError {
    match code {
        409 => ApiError::new(409, "Conflict", "injected fault: conflict"),
        429 => ApiError::too_many_requests(
            "injected fault: too many requests, please try again later",
            1,
        ),
        500 => ApiError::internal("injected fault"),
        503 => ApiError::service_unavailable(
            "injected fault: the server is currently unable to handle the request",
        ),
        504 => ApiError::timeout(
            "injected fault: the server was unable to return a response in the time allotted",
        ),
        410 => ApiError::gone("injected fault: too old resource version"),
        other => ApiError::new(
            other,
            "InternalError",
            format!("injected fault (HTTP {other})"),
        ),
    }
}

impl Faults {
    pub fn add(&self, rule: FaultRule) -> FaultId {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.rules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((id, rule));
        id
    }

    pub fn remove(&self, id: FaultId) {
        self.rules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(i, _)| *i != id);
    }

    /// Removes every rule and forced fault, and resumes a paused server.
    pub fn clear(&self) {
        self.rules.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.forced_conflicts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.forced_watch_gone.store(0, Ordering::Relaxed);
        self.resume();
    }

    /// Requests wait (without an answer) until [`Faults::resume`].
    pub fn pause(&self) {
        self.paused.send_replace(true);
    }

    pub fn resume(&self) {
        self.paused.send_replace(false);
    }

    pub fn is_paused(&self) -> bool {
        *self.paused.borrow()
    }

    pub(crate) async fn wait_unpaused(&self) {
        let mut rx = self.paused.subscribe();
        while *rx.borrow_and_update() {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// The next `n` update/patch requests on `resource` fail with 409 Conflict.
    pub fn force_conflicts(&self, resource: &str, n: u64) {
        let mut m = self
            .forced_conflicts
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *m.entry(resource.to_string()).or_insert(0) += n;
    }

    /// The next `n` watch requests get a 410 Gone (`Expired`) ERROR event.
    pub fn force_watch_gone(&self, n: u64) {
        self.forced_watch_gone.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn take_watch_gone(&self) -> bool {
        self.forced_watch_gone
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1))
            .is_ok()
    }

    /// Ends every open watch stream now (clients see the connection close).
    pub fn drop_watches(&self) {
        self.watch_generation.send_modify(|g| *g += 1);
    }

    pub(crate) fn watch_generation(&self) -> watch::Receiver<u64> {
        self.watch_generation.subscribe()
    }

    pub(crate) fn decide(
        &self,
        verb: &str,
        resource: &str,
        sub: &str,
        name: &str,
        group: &str,
    ) -> FaultDecision {
        let mut decision = FaultDecision::default();
        if matches!(verb, "update" | "patch") {
            let mut m = self
                .forced_conflicts
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if let Some(n) = m.get_mut(resource)
                && *n > 0
            {
                *n -= 1;
                decision.error = Some(ApiError::stale_conflict(group, resource, name));
                return decision;
            }
        }
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        for (_, rule) in rules.iter_mut() {
            if !rule.matches(verb, resource, sub) || rule.remaining == Some(0) {
                continue;
            }
            if let Some(r) = rule.remaining.as_mut() {
                *r -= 1;
            }
            decision.latency += rule.latency;
            if decision.error.is_none() && rule.error_rate > 0.0 {
                let roll = (crate::meta::random_u64() >> 11) as f64 / (1u64 << 53) as f64;
                if roll < rule.error_rate {
                    decision.error = Some(error_for(rule.error_code));
                }
            }
        }
        decision
    }
}
