//! Runs a kube-runtime `Controller` the same way in every family: one span per reconcile
//! carrying the object's namespace/name, metrics, per-object exponential backoff on errors,
//! conflicts (409) requeued quietly, readiness once the cache has synced, and graceful
//! shutdown (no new reconciles after the token fires; in-flight ones finish).

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use kube::Resource;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::ObjectRef;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::Readiness;
use super::metrics::{ControllerLabel, ErrorLabel, Metrics, ResultLabel};

/// What the harness needs to know about a family's reconcile error.
pub trait ReconcileError: std::error::Error + Send + Sync + 'static {
    /// A low-cardinality name for the failing step (`validate`, `create_pods`, …), used as
    /// the metric label and in events.
    fn category(&self) -> &'static str;
    /// True when the error is an optimistic-concurrency conflict: the cache was stale, the
    /// next reconcile will see the newer object. Requeued quietly, not logged as an error.
    fn is_conflict(&self) -> bool {
        false
    }
}

/// What a controller's cache never needs, dropped from every object before it is stored:
/// `managedFields` (server-side apply bookkeeping, often the largest part of an object in
/// memory) and kubectl's `last-applied-configuration` copy of the object. Use as
/// `watcher(...).map(|e| e.map(|e| e.modify(trim_for_cache)))` in front of a reflector.
pub fn trim_for_cache<K: Resource>(obj: &mut K) {
    let meta = obj.meta_mut();
    meta.managed_fields = None;
    if let Some(a) = meta.annotations.as_mut() {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// Backoff after the n-th consecutive failure of one object: controller-runtime's default
/// item limiter (5 ms doubling, capped at 1000 s).
pub fn error_backoff(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(30);
    let ms = 5u64.saturating_mul(1u64 << exp);
    Duration::from_millis(ms).min(Duration::from_secs(1000))
}

/// True when the API server refused a write as invalid (422): retrying the same write can
/// only fail the same way until the object that produced it changes.
pub fn is_invalid(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 422)
}

/// Backoff after the n-th consecutive write of one object refused as invalid (422): 1 s
/// doubling, capped at 5 minutes. Longer than [`error_backoff`]: a 422 never heals by itself,
/// and each attempt may cost the object's pods a readiness flip.
pub fn invalid_write_backoff(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(30);
    Duration::from_secs(1u64 << exp).min(Duration::from_secs(300))
}

/// The delay before retrying after a conflict: short, the newer object is on its way.
pub const CONFLICT_REQUEUE: Duration = Duration::from_millis(100);

/// Whether this replica holds the leader lease yet. A controller started with
/// [`super::Binary::controller`] runs on every replica: it fills its caches at once and
/// keeps them warm (see [`warm_until_leading`]), and writes only once this says it leads.
/// Cheap to clone; every clone sees the same state.
#[derive(Clone, Debug)]
pub struct Leadership {
    acquired: CancellationToken,
}

impl Default for Leadership {
    /// Leading already: for controllers run without leader election (tests, one replica).
    fn default() -> Self {
        let acquired = CancellationToken::new();
        acquired.cancel();
        Self { acquired }
    }
}

impl Leadership {
    /// Not leading until [`Leadership::acquire`].
    pub fn pending() -> Self {
        Self {
            acquired: CancellationToken::new(),
        }
    }

    /// Marks the lease as held.
    pub fn acquire(&self) {
        self.acquired.cancel();
    }

    /// Whether this replica leads.
    pub fn is_leading(&self) -> bool {
        self.acquired.is_cancelled()
    }

    /// Resolves once this replica leads.
    pub async fn acquired(&self) {
        self.acquired.cancelled().await;
    }
}

/// A watch stream a standby replica keeps polling, so its store stays current.
pub trait WarmStream: Send {
    /// Polls the stream to its end, discarding what it yields.
    fn drain(&mut self) -> futures::future::BoxFuture<'_, ()>;
}

impl<S: futures::Stream + Unpin + Send> WarmStream for S {
    fn drain(&mut self) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(async move { while self.next().await.is_some() {} })
    }
}

/// Keeps `streams` polled (their reflectors' stores filling and current) until this replica
/// leads; then they are handed to the `Controller`, which goes on from where they are, so a
/// standby that takes over never lists again. False when `opts.shutdown` fired first.
pub async fn warm_until_leading(opts: &RunOptions, streams: &mut [&mut dyn WarmStream]) -> bool {
    if opts.leadership.is_leading() {
        return !opts.shutdown.is_cancelled();
    }
    let drains = futures::future::join_all(streams.iter_mut().map(|s| s.drain()));
    tokio::select! {
        _ = opts.leadership.acquired() => !opts.shutdown.is_cancelled(),
        _ = opts.shutdown.cancelled() => false,
        // A watch stream ends only when the store's writer is gone: nothing left to warm.
        _ = async { drains.await; std::future::pending::<()>().await } => false,
    }
}

/// Options of [`run_controller`].
#[derive(Clone, Default)]
pub struct RunOptions {
    /// Controller name, used in metrics, spans and the readiness check.
    pub name: String,
    /// Reconciles running at once (different objects; one object is never reconciled twice at once).
    pub concurrency: u16,
    /// Process metrics.
    pub metrics: Metrics,
    /// Process readiness; the check `controller/<name>` passes once the cache synced.
    pub readiness: Readiness,
    /// Stops the controller: no new reconciles, in-flight ones finish.
    pub shutdown: CancellationToken,
    /// Whether this replica leads (the default: it does).
    pub leadership: Leadership,
}

type FailureCounts<K> = Arc<Mutex<HashMap<ObjectRef<K>, u32>>>;
/// The resourceVersion each object had when its last reconcile started.
type SeenVersions<K> = Arc<Mutex<HashMap<ObjectRef<K>, String>>>;

/// Every second, counts the cached objects whose current resourceVersion no reconcile has
/// started on yet: the work waiting for a worker. kube-runtime keeps its queue private,
/// so the depth is derived from the cache instead.
async fn track_queue_depth<K>(
    store: kube::runtime::reflector::Store<K>,
    seen: SeenVersions<K>,
    gauge: prometheus_client::metrics::gauge::Gauge,
    shutdown: CancellationToken,
) where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        let objects = store.state();
        let Ok(mut seen) = seen.lock() else { return };
        let mut waiting = 0i64;
        let mut live = std::collections::HashSet::with_capacity(objects.len());
        for obj in &objects {
            let key = ObjectRef::from(obj.as_ref());
            if seen.get(&key) != obj.meta().resource_version.as_ref() {
                waiting += 1;
            }
            live.insert(key);
        }
        // Forget deleted objects so the map is bounded by the cache.
        seen.retain(|k, _| live.contains(k));
        gauge.set(waiting);
    }
}

/// Runs `controller` until `opts.shutdown` fires and every in-flight reconcile finished.
pub async fn run_controller<K, Ctx, E, F, Fut>(
    controller: Controller<K>,
    reconcile: F,
    data: Arc<Ctx>,
    opts: RunOptions,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Debug + Eq + Hash + Clone + Default + Unpin + Send + Sync,
    Ctx: Send + Sync + 'static,
    E: ReconcileError,
    F: Fn(Arc<K>, Arc<Ctx>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
{
    let name = opts.name.clone();
    let label = ControllerLabel {
        controller: name.clone(),
    };
    let check = format!("controller/{name}");
    opts.readiness.register(&check);
    let synced = Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let store = controller.store();
        let readiness = opts.readiness.clone();
        let check = check.clone();
        let synced = synced.clone();
        tokio::spawn(async move {
            // kube-runtime's readiness signal wakes only the last task that polled it (one
            // oneshot waker) and the controller's own runner polls it too, so poll ours
            // again periodically; once set, it answers at once.
            loop {
                match tokio::time::timeout(Duration::from_millis(200), store.wait_until_ready())
                    .await
                {
                    Ok(Ok(())) => {
                        synced.store(true, std::sync::atomic::Ordering::SeqCst);
                        readiness.set(&check, true);
                        return;
                    }
                    Ok(Err(_)) => return,
                    Err(_) => continue,
                }
            }
        });
    }
    let failures: FailureCounts<K> = Arc::new(Mutex::new(HashMap::new()));
    let seen: SeenVersions<K> = Arc::new(Mutex::new(HashMap::new()));
    let depth_task = tokio::spawn(track_queue_depth(
        controller.store(),
        seen.clone(),
        opts.metrics.queue_depth.get_or_create(&label).clone(),
        opts.shutdown.clone(),
    ));
    let reconcile = Arc::new(reconcile);
    let metrics = opts.metrics.clone();
    let wrapped = {
        let failures = failures.clone();
        let seen = seen.clone();
        let name = name.clone();
        move |obj: Arc<K>, ctx: Arc<Ctx>| {
            let metrics = metrics.clone();
            let failures = failures.clone();
            if let Ok(mut seen) = seen.lock() {
                seen.insert(
                    ObjectRef::from(obj.as_ref()),
                    obj.meta().resource_version.clone().unwrap_or_default(),
                );
            }
            let reconcile = reconcile.clone();
            let label = ControllerLabel {
                controller: name.clone(),
            };
            let span = tracing::info_span!(
                "reconcile",
                controller = %name,
                k8s.namespace = obj.meta().namespace.as_deref().unwrap_or(""),
                k8s.name = obj.meta().name.as_deref().unwrap_or(""),
            );
            async move {
                let active = metrics.active_workers.get_or_create(&label).clone();
                active.inc();
                let start = std::time::Instant::now();
                let result = reconcile(obj.clone(), ctx).await;
                active.dec();
                metrics
                    .reconcile_time
                    .get_or_create(&label)
                    .observe(start.elapsed().as_secs_f64());
                let outcome = if result.is_ok() { "success" } else { "error" };
                metrics
                    .reconcile_total
                    .get_or_create(&ResultLabel {
                        controller: label.controller.clone(),
                        result: outcome.to_string(),
                    })
                    .inc();
                if result.is_ok()
                    && let Ok(mut f) = failures.lock()
                {
                    f.remove(&ObjectRef::from(obj.as_ref()));
                }
                result
            }
            .instrument(span)
        }
    };
    let error_metrics = opts.metrics.clone();
    let error_name = name.clone();
    let error_policy = move |obj: Arc<K>, err: &E, _ctx: Arc<Ctx>| {
        error_metrics
            .reconcile_errors
            .get_or_create(&ErrorLabel {
                controller: error_name.clone(),
                category: err.category().to_string(),
            })
            .inc();
        let key = ObjectRef::from(obj.as_ref());
        if err.is_conflict() {
            tracing::debug!(object = %key, "conflict, requeueing");
            return Action::requeue(CONFLICT_REQUEUE);
        }
        let n = match failures.lock() {
            Ok(mut f) => {
                let n = f.entry(key.clone()).or_insert(0);
                *n = n.saturating_add(1);
                *n
            }
            Err(_) => 1,
        };
        let delay = error_backoff(n);
        tracing::warn!(object = %key, category = err.category(), error = %err, retry_in = ?delay, "reconcile failed");
        Action::requeue(delay)
    };
    let shutdown = opts.shutdown.clone();
    let running = controller
        .with_config(ControllerConfig::default().concurrency(opts.concurrency))
        .graceful_shutdown_on(async move { shutdown.cancelled().await })
        .run(wrapped, error_policy, data)
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!(error = %e, "controller stream");
            }
        });
    // Before the cache has synced (e.g. the CRD is not installed) the runner has not
    // started, so nothing is in flight: stop at once instead of waiting for a sync that
    // may never come.
    let never_synced = async {
        opts.shutdown.cancelled().await;
        if synced.load(std::sync::atomic::Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        _ = running => {}
        _ = never_synced => tracing::info!(controller = %name, "stopped before its cache synced"),
    }
    depth_task.abort();
    opts.readiness.set(&check, false);
    opts.metrics.active_workers.get_or_create(&label).set(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_5ms_and_caps() {
        assert_eq!(error_backoff(1), Duration::from_millis(5));
        assert_eq!(error_backoff(2), Duration::from_millis(10));
        assert_eq!(error_backoff(5), Duration::from_millis(80));
        assert_eq!(error_backoff(100), Duration::from_secs(1000));
    }

    #[test]
    fn invalid_write_backoff_doubles_from_1s_and_caps_at_5_minutes() {
        assert_eq!(invalid_write_backoff(1), Duration::from_secs(1));
        assert_eq!(invalid_write_backoff(2), Duration::from_secs(2));
        assert_eq!(invalid_write_backoff(9), Duration::from_secs(256));
        assert_eq!(invalid_write_backoff(10), Duration::from_secs(300));
        assert_eq!(invalid_write_backoff(u32::MAX), Duration::from_secs(300));
    }

    #[test]
    fn only_422_is_invalid() {
        let status = |code| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                ..Default::default()
            }))
        };
        assert!(is_invalid(&status(422)));
        assert!(!is_invalid(&status(409)));
        assert!(!is_invalid(&status(500)));
    }
}
