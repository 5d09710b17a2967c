//! The one way a controller watches a kind: [`Watch`] builds the reflector (store plus
//! event stream) with what every watch needs — a label selector, paging, cache trimming,
//! a filter for objects the cache never keeps, backoff after errors, an optional wait for
//! the kind's CRD, and the deserialize guard.
//!
//! **The deserialize guard.** kube decodes a whole list page, or a watch event, into the
//! watched type at once, so one object that does not decode (a custom resource whose
//! schemaless template holds `image: 5`) fails the list for its whole kind, again on every
//! retry. Behind the guard each object decodes on its own: one that does not is skipped
//! with a warning in the log, a count in `kruise_watch_decode_errors_total{kind}` and a
//! Warning `FailedDecode` event on the object when it has a name; the rest reconcile.
//! The guard costs a second decoding pass per object, so it is for the kinds whose bodies
//! the API server does not check against a schema (custom resources); built-in kinds
//! (pods, claims, revisions, namespaces) are decoded straight.

use std::borrow::Cow;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::DynamicResourceScope;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, Resource};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use tokio_util::sync::CancellationToken;

use super::controller::{Leadership, RunOptions, trim_for_cache};
use super::events::{EventQueue, EventRecord, Recorder};
use super::metrics::{KindLabel, Metrics};

/// Objects per list page: a relist of 10,000 pods holds one page of decoded objects at a
/// time, not the whole list.
pub const PAGE_SIZE: u32 = 500;
/// How often a watch waiting for its CRD checks again.
pub const CRD_POLL: Duration = Duration::from_secs(10);
/// The Warning event's reason for an object that does not decode.
pub const REASON_FAILED_DECODE: &str = "FailedDecode";

/// A watch event stream, after backoff.
pub type EventStream<K> = BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>;
/// The objects a watch touched (applied or deleted), after backoff: what
/// `Controller::owns_stream` and `watches_stream` take.
pub type TouchedStream<K> = BoxStream<'static, Result<K, watcher::Error>>;

type KeepFn<K> = Arc<dyn Fn(&K) -> bool + Send + Sync>;
type ShrinkFn<K> = Arc<dyn Fn(&mut K) + Send + Sync>;

/// Builds a watch of `K`; see the module docs.
pub struct Watch<K> {
    client: Client,
    namespace: Option<String>,
    config: watcher::Config,
    trim: bool,
    keep: Option<KeepFn<K>>,
    shrink: Option<ShrinkFn<K>>,
    guard: Option<DecodeGuard>,
    crd: Option<(String, CancellationToken)>,
}

impl<K> Watch<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// A watch of `K` in `namespace` (all namespaces when `None`; `None` for cluster-scoped
    /// kinds), paged, trimmed, decoded straight.
    pub fn new(client: Client, namespace: Option<&str>) -> Self {
        Self {
            client,
            namespace: namespace.map(str::to_string),
            config: watcher::Config::default().page_size(PAGE_SIZE),
            trim: true,
            keep: None,
            shrink: None,
            guard: None,
            crd: None,
        }
    }

    /// The watch of a controller's own kind: untrimmed (revisions copy the owner's
    /// annotations) and behind [`DecodeGuard::for_controller`].
    pub fn primary(
        client: Client,
        namespace: Option<&str>,
        opts: &RunOptions,
        events: &EventQueue,
    ) -> Self {
        Self::new(client, namespace)
            .untrimmed()
            .guarded(DecodeGuard::for_controller(opts, events))
    }

    /// Only objects carrying labels matching `selector` (e.g. just a key: those that have it).
    pub fn labels(mut self, selector: &str) -> Self {
        self.config = self.config.labels(selector);
        self
    }

    /// Only objects whose fields match `selector` (e.g. a node's pods: `spec.nodeName=<node>`).
    pub fn fields(mut self, selector: &str) -> Self {
        self.config = self.config.fields(selector);
        self
    }

    /// Keeps every field in the cache: for types that hold no `managedFields` (a compact
    /// cached type) or that need them.
    pub fn untrimmed(mut self) -> Self {
        self.trim = false;
        self
    }

    /// Caches only objects `keep` accepts; the others arrive as deletions, which the store
    /// ignores for objects it never held (for kinds no selector can narrow).
    pub fn keep_only(mut self, keep: impl Fn(&K) -> bool + Send + Sync + 'static) -> Self {
        self.keep = Some(Arc::new(keep));
        self
    }

    /// Drops from every object, before it is cached, what the controller never reads (e.g.
    /// a node's image list and conditions for a controller that reads only its labels,
    /// taints and allocatable), after the usual trimming.
    pub fn shrink(mut self, shrink: impl Fn(&mut K) + Send + Sync + 'static) -> Self {
        self.shrink = Some(Arc::new(shrink));
        self
    }

    /// Decodes each object on its own behind `guard` (see the module docs).
    pub fn guarded(mut self, guard: DecodeGuard) -> Self {
        self.guard = Some(guard);
        self
    }

    /// Starts watching only once the CRD `name` is installed, checking every [`CRD_POLL`]
    /// until then (or until `shutdown`); the store is not ready meanwhile.
    pub fn after_crd(mut self, name: &str, shutdown: CancellationToken) -> Self {
        self.crd = Some((name.to_string(), shutdown));
        self
    }

    /// The store and the raw events that fed it (`Init`, `InitDone` included).
    pub fn reflect_events(self) -> (Store<K>, EventStream<K>) {
        let (store, writer) = reflector::store::<K>();
        let trim = self.trim;
        let keep = self.keep.clone();
        let shrink = self.shrink.clone();
        let raw = self.events();
        let shaped = raw.map(move |event| {
            event.map(|e| {
                let e = match &keep {
                    Some(keep) => only_kept(e, keep.as_ref()),
                    None => e,
                };
                let e = if trim { e.modify(trim_for_cache) } else { e };
                match &shrink {
                    Some(shrink) => e.modify(|o| shrink(o)),
                    None => e,
                }
            })
        });
        let stream = reflector::reflector(writer, shaped).default_backoff();
        (store, stream.boxed())
    }

    /// The store and the objects each event touched: what a controller owns or watches.
    pub fn reflect(self) -> (Store<K>, TouchedStream<K>) {
        let (store, events) = self.reflect_events();
        (store, events.touched_objects().boxed())
    }

    /// The decoded events, before the store, waiting for the CRD when asked to.
    fn events(self) -> EventStream<K> {
        let Watch {
            client,
            namespace,
            config,
            guard,
            crd,
            ..
        } = self;
        let watch = {
            let client = client.clone();
            move || -> EventStream<K> {
                match guard {
                    Some(guard) => {
                        let api = api_in::<Decoding<K>>(client, namespace.as_deref(), &());
                        watcher(api, config)
                            .filter_map(move |event| {
                                let unwrapped = event.map(|e| guard.unwrap_event(e)).transpose();
                                async move { unwrapped }
                            })
                            .boxed()
                    }
                    None => {
                        let api = api_in::<Straight<K>>(client, namespace.as_deref(), &());
                        watcher(api, config)
                            .map(|event| event.map(|e| map_event(e, |s: Straight<K>| s.0)))
                            .boxed()
                    }
                }
            }
        };
        match crd {
            None => watch(),
            Some((name, shutdown)) => futures::stream::once(async move {
                let installed = wait_for_crd(&client, &name, &shutdown).await;
                match installed {
                    true => watch(),
                    false => futures::stream::empty().boxed(),
                }
            })
            .flatten()
            .boxed(),
        }
    }
}

/// An `Api` for `W` (described by `dyntype`) in `namespace`, or in every namespace: for
/// types whose scope is known only at run time (`DynamicObject`, the watch's decoders).
pub fn api_in<W>(client: Client, namespace: Option<&str>, dyntype: &W::DynamicType) -> Api<W>
where
    W: Resource<Scope = DynamicResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced_with(client, ns, dyntype),
        None => Api::all_with(client, dyntype),
    }
}

/// Waits until the CRD `name` exists; false when `shutdown` fired first.
pub async fn wait_for_crd(client: &Client, name: &str, shutdown: &CancellationToken) -> bool {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    loop {
        match crds.get_opt(name).await {
            Ok(Some(_)) => return true,
            Ok(None) => tracing::info!(crd = name, "CRD not installed yet; its watch waits"),
            Err(e) => tracing::warn!(crd = name, error = %e, "checking for a CRD"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return false,
            _ = tokio::time::sleep(CRD_POLL) => {}
        }
    }
}

/// Whether a store has loaded the cluster's objects of its kind (see [`loaded_flag`]).
#[derive(Clone, Debug, Default)]
pub struct Loaded(Arc<std::sync::atomic::AtomicBool>);

impl Loaded {
    /// True once the store has loaded, or its CRD was found not installed.
    pub fn get(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Acquire)
    }

    fn set(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// A flag that turns true once `store` holds the cluster's objects of its kind, or once
/// the CRD `crd` is found not installed (then there are none to hold), notifying `changed`
/// when it does. A handler whose webhook entries follow those objects answers
/// [`webhooks_known`](kruise_core::admission::AdmissionHandler::webhooks_known) with it, so a
/// replica that just started publishes no entry set it has not loaded yet.
pub fn loaded_flag<K>(
    client: &Client,
    store: Store<K>,
    crd: &str,
    changed: Arc<tokio::sync::Notify>,
    shutdown: CancellationToken,
) -> Loaded
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let loaded = Loaded::default();
    let flag = loaded.clone();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crd.to_string();
    tokio::spawn(async move {
        let not_installed = async {
            loop {
                if let Ok(None) = crds.get_opt(&crd).await {
                    return;
                }
                tokio::time::sleep(CRD_POLL).await;
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = store.wait_until_ready() => {}
            () = not_installed => {}
        }
        flag.set();
        changed.notify_one();
    });
    loaded
}

fn only_kept<K>(
    event: watcher::Event<K>,
    keep: &(dyn Fn(&K) -> bool + Send + Sync),
) -> watcher::Event<K> {
    match event {
        watcher::Event::Apply(o) | watcher::Event::InitApply(o) if !keep(&o) => {
            watcher::Event::Delete(o)
        }
        other => other,
    }
}

fn map_event<A, B>(event: watcher::Event<A>, f: impl FnOnce(A) -> B) -> watcher::Event<B> {
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(f(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(f(o)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(f(o)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// An object that did not decode as its kind.
#[derive(Clone, Debug, Default)]
pub struct Undecodable {
    /// Its metadata, when that much decoded.
    pub metadata: ObjectMeta,
    /// Why it did not decode.
    pub error: String,
}

/// `K` as a watch decodes it behind the guard: each object on its own, through a JSON
/// value so a failure leaves the rest of the page intact.
#[derive(Clone, Debug)]
enum Decoding<K> {
    Decoded(K),
    Undecodable(Box<Undecodable>),
}

impl<'de, K: DeserializeOwned> Deserialize<'de> for Decoding<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct MetadataOnly {
            #[serde(default)]
            metadata: ObjectMeta,
        }
        let value = serde_json::Value::deserialize(deserializer)?;
        match K::deserialize(&value) {
            Ok(object) => Ok(Decoding::Decoded(object)),
            Err(e) => Ok(Decoding::Undecodable(Box::new(Undecodable {
                metadata: MetadataOnly::deserialize(&value)
                    .map(|m| m.metadata)
                    .unwrap_or_default(),
                error: e.to_string(),
            }))),
        }
    }
}

/// `K` decoded straight (no guard), under the same dynamic scope as [`Decoding`].
#[derive(Clone, Debug, Deserialize)]
#[serde(transparent, bound = "K: DeserializeOwned")]
struct Straight<K>(K);

/// Both wrappers are `K` on the wire; their scope is dynamic so one builder serves
/// namespaced and cluster-scoped kinds alike. `meta` is only read by the watcher for
/// bookmarks' resourceVersion, which every variant carries.
macro_rules! resource_as_k {
    ($wrapper:ident, $self_:ident => $meta:expr, $meta_mut:expr) => {
        impl<K: Resource<DynamicType = ()>> Resource for $wrapper<K> {
            type DynamicType = ();
            type Scope = DynamicResourceScope;
            fn kind(_: &()) -> Cow<'_, str> {
                K::kind(&())
            }
            fn group(_: &()) -> Cow<'_, str> {
                K::group(&())
            }
            fn version(_: &()) -> Cow<'_, str> {
                K::version(&())
            }
            fn plural(_: &()) -> Cow<'_, str> {
                K::plural(&())
            }
            fn meta(&$self_) -> &ObjectMeta {
                $meta
            }
            fn meta_mut(&mut $self_) -> &mut ObjectMeta {
                $meta_mut
            }
        }
    };
}

resource_as_k!(Decoding, self => match self {
    Decoding::Decoded(k) => k.meta(),
    Decoding::Undecodable(u) => &u.metadata,
}, match self {
    Decoding::Decoded(k) => k.meta_mut(),
    Decoding::Undecodable(u) => &mut u.metadata,
});
resource_as_k!(Straight, self => self.0.meta(), self.0.meta_mut());

/// Reports the objects a guarded watch skips (see the module docs); cheap to clone.
#[derive(Clone)]
pub struct DecodeGuard {
    errors: Family<KindLabel, Counter>,
    events: Option<(EventQueue, Leadership)>,
}

impl DecodeGuard {
    /// Counts skipped objects in `metrics` (and logs them).
    pub fn new(metrics: &Metrics) -> Self {
        Self {
            errors: metrics.watch_decode_errors.clone(),
            events: None,
        }
    }

    /// The guard of a controller's primary watch: counted in `opts.metrics`, a Warning event
    /// through `events` while `opts.leadership` says this replica leads.
    pub fn for_controller(opts: &RunOptions, events: &EventQueue) -> Self {
        Self::new(&opts.metrics).with_events(events, &opts.leadership)
    }

    /// Only logs skipped objects: for a second watch of a kind whose controller in the same
    /// process already counts and reports them.
    pub fn logging_only() -> Self {
        Self {
            errors: Family::default(),
            events: None,
        }
    }

    /// Also records a Warning event on each skipped object, while `leadership` says this
    /// replica leads (a standby warming its cache writes nothing).
    pub fn with_events(mut self, events: &EventQueue, leadership: &Leadership) -> Self {
        self.events = Some((events.clone(), leadership.clone()));
        self
    }

    /// The event with the decoded object, or `None` (after reporting) for one that did not
    /// decode. A deletion of an undecodable object is dropped too: the store cannot name it
    /// by type, and it never held it unless an earlier version decoded.
    fn unwrap_event<K>(&self, event: watcher::Event<Decoding<K>>) -> Option<watcher::Event<K>>
    where
        K: Resource<DynamicType = ()>,
    {
        let mut skipped = None;
        let mapped = map_event(event, |o| match o {
            Decoding::Decoded(k) => Some(k),
            Decoding::Undecodable(u) => {
                skipped = Some(u);
                None
            }
        });
        if let Some(u) = skipped {
            self.report::<K>(&u);
        }
        match mapped {
            watcher::Event::Apply(Some(k)) => Some(watcher::Event::Apply(k)),
            watcher::Event::InitApply(Some(k)) => Some(watcher::Event::InitApply(k)),
            watcher::Event::Delete(Some(k)) => Some(watcher::Event::Delete(k)),
            watcher::Event::Init => Some(watcher::Event::Init),
            watcher::Event::InitDone => Some(watcher::Event::InitDone),
            _ => None,
        }
    }

    fn report<K: Resource<DynamicType = ()>>(&self, skipped: &Undecodable) {
        let kind = K::kind(&()).to_string();
        let meta = &skipped.metadata;
        tracing::warn!(
            kind = %kind,
            namespace = meta.namespace.as_deref().unwrap_or(""),
            name = meta.name.as_deref().unwrap_or(""),
            error = %skipped.error,
            "skipping an object that does not decode"
        );
        self.errors
            .get_or_create(&KindLabel { kind: kind.clone() })
            .inc();
        let (Some((events, leadership)), Some(name)) = (&self.events, &meta.name) else {
            return;
        };
        if !leadership.is_leading() {
            return;
        }
        let regarding = ObjectReference {
            api_version: Some(K::api_version(&()).to_string()),
            kind: Some(kind.clone()),
            name: Some(name.clone()),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            ..Default::default()
        };
        Recorder::new(events, regarding).record(EventRecord::warning(
            REASON_FAILED_DECODE,
            format!(
                "{kind} {name} does not decode and is not reconciled: {}",
                skipped.error
            ),
        ));
    }
}
