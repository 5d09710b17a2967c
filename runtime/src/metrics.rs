//! Prometheus metrics every binary exports at `/metrics`, with names a Kruise dashboard
//! already knows where controller-runtime defines them.

use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Label set naming one controller.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabel {
    /// Controller name, e.g. `cloneset`.
    pub controller: String,
}

/// Label set of a reconcile outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// Controller name.
    pub controller: String,
    /// `success` or `error`.
    pub result: String,
}

/// Label set of a reconcile error.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabel {
    /// Controller name.
    pub controller: String,
    /// Low-cardinality error category from the family's error type.
    pub category: String,
}

/// Label set of the leader-election gauge (client-go's `leader_election_master_status`).
/// The kind of object a watch decodes.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeaseLabel {
    /// Lease name.
    pub name: String,
}

/// The process-wide registry plus the standard families. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Mutex<Registry>>,
    /// `controller_runtime_reconcile_total{controller,result}`.
    pub reconcile_total: Family<ResultLabel, Counter>,
    /// `controller_runtime_reconcile_errors_total{controller,category}`.
    pub reconcile_errors: Family<ErrorLabel, Counter>,
    /// `controller_runtime_reconcile_time_seconds{controller}`.
    pub reconcile_time: Family<ControllerLabel, Histogram>,
    /// `controller_runtime_active_workers{controller}`: reconciles running now.
    pub active_workers: Family<ControllerLabel, Gauge>,
    /// `workqueue_depth{controller}`: primary objects whose latest version has not been
    /// reconciled yet (changes to owned objects are not counted).
    pub queue_depth: Family<ControllerLabel, Gauge>,
    /// `leader_election_master_status{name}`: 1 while this process holds the lease.
    pub leader: Family<LeaseLabel, Gauge>,
    /// Objects a guarded watch skipped because they did not decode, per kind.
    pub watch_decode_errors: Family<KindLabel, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with the standard families registered.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let reconcile_total = Family::<ResultLabel, Counter>::default();
        let reconcile_errors = Family::<ErrorLabel, Counter>::default();
        let reconcile_time =
            Family::<ControllerLabel, Histogram>::new_with_constructor(reconcile_histogram);
        let active_workers = Family::<ControllerLabel, Gauge>::default();
        let queue_depth = Family::<ControllerLabel, Gauge>::default();
        let leader = Family::<LeaseLabel, Gauge>::default();
        let watch_decode_errors = Family::<KindLabel, Counter>::default();
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            reconcile_total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller and category",
            reconcile_errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            reconcile_time.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            active_workers.clone(),
        );
        registry.register(
            "workqueue_depth",
            "Primary objects whose latest version has not been reconciled yet",
            queue_depth.clone(),
        );
        registry.register(
            "leader_election_master_status",
            "1 while this process is the leader of the named lease, 0 otherwise",
            leader.clone(),
        );
        registry.register(
            "kruise_watch_decode_errors",
            "Objects a watch skipped because they did not decode, per kind",
            watch_decode_errors.clone(),
        );
        Metrics {
            registry: Arc::new(Mutex::new(registry)),
            reconcile_total,
            reconcile_errors,
            reconcile_time,
            active_workers,
            queue_depth,
            leader,
            watch_decode_errors,
        }
    }

    /// Registers a family-specific metric (e.g. `kruise_cloneset_expectations_expired`).
    pub fn register(
        &self,
        name: &str,
        help: &str,
        metric: impl prometheus_client::registry::Metric,
    ) {
        if let Ok(mut r) = self.registry.lock() {
            r.register(name, help, metric);
        }
    }

    /// The OpenMetrics text exposition of everything registered.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        let registry = self.registry.lock().map_err(|_| std::fmt::Error)?;
        prometheus_client::encoding::text::encode(&mut out, &registry)?;
        Ok(out)
    }
}

/// Label set naming one admission webhook (its path).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookLabel {
    /// The path, e.g. `/mutate-pod`.
    pub webhook: String,
}

/// Label set of an admission request's HTTP outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookCodeLabel {
    /// The path.
    pub webhook: String,
    /// HTTP status code answered (200 also for a denial).
    pub code: String,
}

/// Admission server metrics, with controller-runtime's webhook names plus denials.
#[derive(Clone)]
pub struct AdmissionMetrics {
    /// `controller_runtime_webhook_requests_total{webhook,code}`.
    pub requests: Family<WebhookCodeLabel, Counter>,
    /// `kruise_webhook_denials_total{webhook}`: reviews answered `allowed: false`.
    pub denials: Family<WebhookLabel, Counter>,
    /// `controller_runtime_webhook_latency_seconds{webhook}`.
    pub latency: Family<WebhookLabel, Histogram>,
    /// `controller_runtime_webhook_requests_in_flight{webhook}`.
    pub in_flight: Family<WebhookLabel, Gauge>,
}

impl AdmissionMetrics {
    /// The families, registered in `metrics`.
    pub fn register(metrics: &Metrics) -> Self {
        let m = AdmissionMetrics {
            requests: Family::default(),
            denials: Family::default(),
            latency: Family::new_with_constructor(webhook_histogram),
            in_flight: Family::default(),
        };
        metrics.register(
            "controller_runtime_webhook_requests",
            "Total number of admission requests by HTTP status code",
            m.requests.clone(),
        );
        metrics.register(
            "kruise_webhook_denials",
            "Admission reviews answered with allowed: false",
            m.denials.clone(),
        );
        metrics.register(
            "controller_runtime_webhook_latency_seconds",
            "Histogram of the latency of processing admission requests",
            m.latency.clone(),
        );
        metrics.register(
            "controller_runtime_webhook_requests_in_flight",
            "Current number of admission requests being served",
            m.in_flight.clone(),
        );
        m
    }
}

fn webhook_histogram() -> Histogram {
    // 50 µs .. ~1.6 s: a webhook answers in well under the API server's 10 s timeout.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

fn reconcile_histogram() -> Histogram {
    // 1 ms .. ~33 s, the range of a reconcile from a cache hit to a slow API server.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}
