//! The ResourceDistribution controller shell (see [`crate::plan`] for every decision).
//!
//! * **Cache what it decides from, not every Secret's data.** Distributions, namespaces
//!   (name, labels, deletion) and the metadata of every Secret and ConfigMap (name, owner,
//!   the copy's version annotation): enough to find each copy, its owner and whether it is of
//!   the current resource without reading it. A copy is read only when its metadata shows a
//!   change this controller did not make (someone edited it, or this process has not seen it
//!   since it started), and rewritten only when its content differs: an unchanged
//!   distribution costs no request at all.
//! * **Woken by what changes the answer.** A distribution's spec (not its status), a
//!   namespace it targets or holds a copy in (created, relabelled, deleted), a change to one
//!   of its copies, and a change to any object under its resource's name (a conflicting
//!   object deleted lets the copy be made).
//! * **Never a write on what is not its own.** A same-named object without the
//!   distribution's controller reference is reported (`ConflictOccurred`) and left alone; a
//!   delete carries the copy's uid as a precondition.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kruise_compat::field::aggregate;
use kruise_runtime::errors::{ShellError, is_already_exists, is_not_found};
use kruise_runtime::events::{EventQueue, EventRecord, Recorder};
use kruise_runtime::execute::WRITE_CONCURRENCY;
use kruise_runtime::status::write_status_if_changed;
use kruise_runtime::watch::{TouchedStream, Watch};
use kruise_runtime::{ReconcileError, RunOptions, run_controller, warm_until_leading};
use kube::api::{Api, ApiResource, DeleteParams, PostParams, Preconditions};
use kube::core::{DynamicObject, PartialObjectMeta};
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, predicates};
use kube::{Client, ResourceExt as _};
use serde_json::Value;

use crate::api::validation::{Resource, validate_resource};
use crate::api::{ConditionType, HASH_ANNOTATION, ResourceDistribution, SOURCE_ANNOTATION};
use crate::plan::{
    self, Action, CopyState, Failure, Input, NamespaceView, Source, content_matches, desired_copy,
    is_controlled_by, resource_hash, target_namespaces, targets_namespace,
};

/// The controller's name (`--controllers`, metrics) and its events' reporter.
pub const CONTROLLER_NAME: &str = "resourcedistribution-controller";
/// The Warning event of a distribution whose resource cannot be distributed.
pub const REASON_INVALID_RESOURCE: &str = "InvalidResource";

/// Why a reconcile did not finish; requeued with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A step every shell shares (the status write).
    #[error(transparent)]
    Shell(#[from] ShellError),
    /// Some copies could not be read, created, updated or deleted (the conditions name them).
    #[error("{failed} copies of {distribution} not synced, the last: {namespace}: {message}")]
    Sync {
        /// The distribution.
        distribution: String,
        /// How many namespaces failed.
        failed: usize,
        /// One of them.
        namespace: String,
        /// Its failure.
        message: String,
    },
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::Shell(e) => e.category(),
            Error::Sync { .. } => "sync",
        }
    }
    fn is_conflict(&self) -> bool {
        matches!(self, Error::Shell(e) if e.is_conflict())
    }
}

/// What a copy in the cache shows of itself.
type CopyMeta<K> = PartialObjectMeta<K>;

struct Shared {
    client: Client,
    namespaces: Store<Namespace>,
    secrets: Store<CopyMeta<Secret>>,
    configmaps: Store<CopyMeta<ConfigMap>>,
    events: EventQueue,
    /// Per distribution and namespace, the copy this process wrote or read and found
    /// current: its resourceVersion and the resource hash it holds. A copy whose cached
    /// version is still that one is current without a read.
    verified: Mutex<HashMap<(String, String), (String, String)>>,
    /// Per distribution and namespace, when this process created the copy the cache has
    /// not shown yet: until it does (or [`CREATE_EXPECTATION`] passes) the copy counts as
    /// made, so a reconcile in between does not create it again.
    created: Mutex<HashMap<(String, String), std::time::Instant>>,
}

/// How long a copy this process created counts as made without the cache showing it.
const CREATE_EXPECTATION: Duration = Duration::from_secs(30);

/// How long a reconcile waits for the caches to list the cluster once before it is
/// requeued.
const CACHE_SYNC_WAIT: Duration = Duration::from_secs(10);
/// When a reconcile that found the caches unsynced runs again.
const CACHE_SYNC_RETRY: Duration = Duration::from_secs(1);

impl Shared {
    /// Whether the namespace, Secret and ConfigMap caches have listed the cluster (waiting
    /// for them at most [`CACHE_SYNC_WAIT`]).
    async fn caches_synced(&self) -> bool {
        let all = async {
            self.namespaces.wait_until_ready().await.is_ok()
                && self.secrets.wait_until_ready().await.is_ok()
                && self.configmaps.wait_until_ready().await.is_ok()
        };
        tokio::time::timeout(CACHE_SYNC_WAIT, all)
            .await
            .unwrap_or(false)
    }

    fn verified(&self, distribution: &str, namespace: &str, version: &str, hash: &str) -> bool {
        self.verified
            .lock()
            .map(|v| {
                v.get(&(distribution.to_string(), namespace.to_string()))
                    .is_some_and(|(rv, h)| rv == version && h == hash)
            })
            .unwrap_or(false)
    }

    fn record_verified(
        &self,
        distribution: &str,
        namespace: &str,
        version: Option<String>,
        hash: &str,
    ) {
        if let Ok(mut verified) = self.verified.lock() {
            let key = (distribution.to_string(), namespace.to_string());
            match version {
                Some(version) => verified.insert(key, (version, hash.to_string())),
                None => verified.remove(&key),
            };
        }
    }

    /// Records the copy of `distribution` in `namespace` created, or (`false`) seen.
    fn expect_created(&self, distribution: &str, namespace: &str, created: bool) {
        if let Ok(mut pending) = self.created.lock() {
            let key = (distribution.to_string(), namespace.to_string());
            if created {
                pending.insert(key, std::time::Instant::now());
            } else {
                pending.remove(&key);
            }
        }
    }

    /// Whether this process created the copy of `distribution` in `namespace` recently
    /// enough that the cache may not show it yet.
    fn awaits_created(&self, distribution: &str, namespace: &str) -> bool {
        self.created
            .lock()
            .map(|pending| {
                pending
                    .get(&(distribution.to_string(), namespace.to_string()))
                    .is_some_and(|at| at.elapsed() < CREATE_EXPECTATION)
            })
            .unwrap_or(false)
    }

    /// The cached metadata of the object `name` of the resource's kind in `namespace`.
    fn copy_meta(&self, resource: &Resource, namespace: &str) -> Option<CachedCopy> {
        if resource.is_secret() {
            self.secrets
                .get(&ObjectRef::new(&resource.name).within(namespace))
                .map(|m| CachedCopy::of(&m.metadata))
        } else {
            self.configmaps
                .get(&ObjectRef::new(&resource.name).within(namespace))
                .map(|m| CachedCopy::of(&m.metadata))
        }
    }
}

/// What the cache holds of one object under the resource's name.
struct CachedCopy {
    owners: Vec<OwnerReference>,
    version: String,
    uid: Option<String>,
    hash: Option<String>,
}

impl CachedCopy {
    fn of(meta: &ObjectMeta) -> Self {
        CachedCopy {
            owners: meta.owner_references.clone().unwrap_or_default(),
            version: meta.resource_version.clone().unwrap_or_default(),
            uid: meta.uid.clone(),
            hash: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(HASH_ANNOTATION))
                .cloned(),
        }
    }
}

/// Runs the ResourceDistribution controller until `opts.shutdown` fires.
pub async fn run(client: Client, opts: RunOptions) {
    let events = EventQueue::for_controller(client.clone(), CONTROLLER_NAME, &opts.metrics);
    let (distributions, distribution_stream) =
        Watch::<ResourceDistribution>::primary(client.clone(), None, &opts, &events).reflect();
    // Status writes do not wake it: only a spec change, a new or a deleted distribution.
    let mut distribution_stream: TouchedStream<ResourceDistribution> = distribution_stream
        .predicate_filter(predicates::generation, Default::default())
        .boxed();
    let (namespaces, mut namespace_stream) = Watch::<Namespace>::new(client.clone(), None)
        .shrink(namespace_view_only)
        .reflect();
    let (secrets, mut secret_stream) = Watch::<CopyMeta<Secret>>::new(client.clone(), None)
        .shrink(|m| copy_metadata_only(&mut m.metadata))
        .reflect();
    let (configmaps, mut configmap_stream) =
        Watch::<CopyMeta<ConfigMap>>::new(client.clone(), None)
            .shrink(|m| copy_metadata_only(&mut m.metadata))
            .reflect();
    if !warm_until_leading(
        &opts,
        &mut [
            &mut distribution_stream,
            &mut namespace_stream,
            &mut secret_stream,
            &mut configmap_stream,
        ],
    )
    .await
    {
        return;
    }
    let shared = Arc::new(Shared {
        client,
        namespaces,
        secrets,
        configmaps,
        events,
        verified: Mutex::new(HashMap::new()),
        created: Mutex::new(HashMap::new()),
    });
    let by_namespace = {
        let (all, shared) = (distributions.clone(), shared.clone());
        move |namespace: Namespace| {
            let view = namespace_view(&namespace);
            all.state()
                .iter()
                .filter(|d| concerns_namespace(&shared, d, &view))
                .map(|d| ObjectRef::from(d.as_ref()))
                .collect::<Vec<_>>()
        }
    };
    let secret_owners = copy_owners(distributions.clone(), "Secret");
    let configmap_owners = copy_owners(distributions.clone(), "ConfigMap");
    let controller = Controller::for_stream(distribution_stream, distributions)
        .reconcile_all_on(futures::stream::once(async {}))
        .watches_stream(namespace_stream, by_namespace)
        .watches_stream(secret_stream, move |m: CopyMeta<Secret>| {
            secret_owners(&m.metadata)
        })
        .watches_stream(configmap_stream, move |m: CopyMeta<ConfigMap>| {
            configmap_owners(&m.metadata)
        });
    run_controller(controller, reconcile, shared, opts).await;
}

/// A namespace as the cache keeps it: name, labels and deletion, nothing else.
fn namespace_view_only(namespace: &mut Namespace) {
    namespace.metadata.annotations = None;
    namespace.metadata.owner_references = None;
    namespace.spec = None;
    namespace.status = None;
}

/// What the cache keeps of a Secret or ConfigMap: name, uid, version, owners and the
/// copy's annotations.
fn copy_metadata_only(meta: &mut ObjectMeta) {
    meta.labels = None;
    meta.finalizers = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|k, _| k == HASH_ANNOTATION || k == SOURCE_ANNOTATION);
    }
    if meta.annotations.as_ref().is_some_and(|a| a.is_empty()) {
        meta.annotations = None;
    }
}

fn namespace_view(namespace: &Namespace) -> NamespaceView {
    NamespaceView {
        name: namespace.name_any(),
        labels: namespace.labels().clone(),
        terminating: namespace.metadata.deletion_timestamp.is_some(),
    }
}

/// Whether a change to `namespace` may change what `distribution` does there: it targets
/// the namespace (as it is now) or holds a copy in it.
fn concerns_namespace(
    shared: &Shared,
    distribution: &ResourceDistribution,
    namespace: &NamespaceView,
) -> bool {
    if targets_namespace(&distribution.spec.targets, namespace) {
        return true;
    }
    let Ok(resource) = Resource::decode(&distribution.spec.resource) else {
        return false;
    };
    shared
        .copy_meta(&resource, &namespace.name)
        .is_some_and(|c| is_controlled_by(&c.owners, &distribution.name_any()))
}

/// The distributions a change to an object of `kind` concerns: its controlling
/// distribution, and every distribution of an object of that kind and name.
fn copy_owners(
    distributions: Store<ResourceDistribution>,
    kind: &'static str,
) -> impl Fn(&ObjectMeta) -> Vec<ObjectRef<ResourceDistribution>> {
    move |meta| {
        let name = meta.name.as_deref().unwrap_or_default();
        let owners = meta.owner_references.as_deref().unwrap_or_default();
        distributions
            .state()
            .iter()
            .filter(|d| {
                is_controlled_by(owners, &d.name_any())
                    || Resource::decode(&d.spec.resource)
                        .is_ok_and(|r| r.kind == kind && r.name == name)
            })
            .map(|d| ObjectRef::from(d.as_ref()))
            .collect()
    }
}

/// The API of the resource's kind in `namespace`.
fn copies_api(client: &Client, resource: &Resource, namespace: &str) -> Api<DynamicObject> {
    let kind = if resource.is_secret() {
        ApiResource::erase::<Secret>(&())
    } else {
        ApiResource::erase::<ConfigMap>(&())
    };
    Api::namespaced_with(client.clone(), namespace, &kind)
}

/// An API error as OpenKruise reports it in a condition (the API server's message).
pub(crate) fn message_of(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

async fn reconcile(
    distribution: Arc<ResourceDistribution>,
    shared: Arc<Shared>,
) -> Result<Requeue, Error> {
    let name = distribution.name_any();
    // The namespaces and the copies must be listed once before anything is decided from
    // them: an empty cache would count no target (a status of 0) and create every copy
    // again.
    if !shared.caches_synced().await {
        return Ok(Requeue::requeue(CACHE_SYNC_RETRY));
    }
    let resource = match validate_resource(&distribution.spec, None) {
        Ok(resource) => resource,
        Err(errors) => {
            // The webhook refuses such a resource; one stored without it waits for a fix.
            Recorder::about(&shared.events, &*distribution).record(EventRecord::warning(
                REASON_INVALID_RESOURCE,
                aggregate(&errors),
            ));
            return Ok(Requeue::await_change());
        }
    };
    let hash = resource_hash(&distribution.spec.resource);
    let namespaces: Vec<NamespaceView> = shared
        .namespaces
        .state()
        .iter()
        .map(|n| namespace_view(n))
        .collect();
    let (targets, _) = target_namespaces(&distribution.spec.targets, &namespaces);

    // Observe: each object under the resource's name, read only when its cached metadata
    // does not show it current.
    let mut copies: BTreeMap<String, CopyState> = BTreeMap::new();
    let mut cached: HashMap<String, CachedCopy> = HashMap::new();
    let mut to_read = Vec::new();
    for namespace in &namespaces {
        let Some(copy) = shared.copy_meta(&resource, &namespace.name) else {
            if shared.awaits_created(&name, &namespace.name) {
                copies.insert(namespace.name.clone(), CopyState::Owned { current: true });
            }
            continue;
        };
        shared.expect_created(&name, &namespace.name, false);
        let state = if !is_controlled_by(&copy.owners, &name) {
            CopyState::Foreign
        } else if !targets.contains(&namespace.name) || copy.hash.as_deref() != Some(&hash) {
            CopyState::Owned { current: false }
        } else if shared.verified(&name, &namespace.name, &copy.version, &hash) {
            CopyState::Owned { current: true }
        } else {
            to_read.push(namespace.name.clone());
            CopyState::Owned { current: false }
        };
        copies.insert(namespace.name.clone(), state);
        cached.insert(namespace.name.clone(), copy);
    }
    let mut read: HashMap<String, Value> = HashMap::new();
    let reads = futures::stream::iter(to_read)
        .map(|namespace| {
            let api = copies_api(&shared.client, &resource, &namespace);
            let object_name = resource.name.clone();
            async move { (namespace, api.get(&object_name).await) }
        })
        .buffer_unordered(WRITE_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    for (namespace, result) in reads {
        let state = match result {
            Ok(object) => {
                let object = serde_json::to_value(&object).unwrap_or_default();
                let current = content_matches(&object, &resource);
                if current {
                    let version = object
                        .pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str);
                    shared.record_verified(&name, &namespace, version.map(str::to_string), &hash);
                } else {
                    read.insert(namespace.clone(), object);
                }
                CopyState::Owned { current }
            }
            // Gone since the cache saw it: made again.
            Err(e) if is_not_found(&e) => {
                copies.remove(&namespace);
                continue;
            }
            Err(e) => CopyState::Unreadable(message_of(&e)),
        };
        copies.insert(namespace, state);
    }

    // Plan, then write: each namespace on its own, a failure recorded for its condition.
    let plan = plan::plan(&Input {
        targets: &distribution.spec.targets,
        namespaces: &namespaces,
        copies: &copies,
    });
    let source = Source {
        name: &name,
        uid: distribution.metadata.uid.as_deref().unwrap_or_default(),
    };
    let write = Write {
        shared: &shared,
        resource: &resource,
        source,
        hash: &hash,
    };
    let mut failures = plan.failures.clone();
    let write = &write;
    let outcomes = futures::stream::iter(plan.actions.clone())
        .map(|action| {
            let old = match &action {
                Action::Update(namespace) => read.get(namespace).cloned(),
                _ => None,
            };
            let uid = match &action {
                Action::Delete(namespace) => cached.get(namespace).and_then(|c| c.uid.clone()),
                _ => None,
            };
            async move { write.apply(&action, old, uid).await }
        })
        .buffer_unordered(WRITE_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    failures.extend(outcomes.into_iter().flatten());
    failures.sort_by(|a, b| a.namespace.cmp(&b.namespace));

    // Status.
    let now = Time(jiff::Timestamp::now());
    let status = plan::status(
        distribution.metadata.generation.unwrap_or_default(),
        distribution.status.as_ref(),
        &plan.targets,
        &failures,
        &now,
    );
    write_status_if_changed(&Api::all(shared.client.clone()), &*distribution, &status).await?;
    let retried: Vec<&Failure> = failures.iter().filter(|f| f.step.is_retried()).collect();
    match retried.last() {
        Some(last) => Err(Error::Sync {
            distribution: name,
            failed: retried.len(),
            namespace: last.namespace.clone(),
            message: last.message.clone(),
        }),
        None => Ok(Requeue::await_change()),
    }
}

/// What every write of one reconcile shares.
struct Write<'a> {
    shared: &'a Shared,
    resource: &'a Resource,
    source: Source<'a>,
    hash: &'a str,
}

impl Write<'_> {
    /// Runs `action` (`old`: the copy as read, for an update; `uid`: the cached copy's, for
    /// a delete); its failure, if any.
    async fn apply(
        &self,
        action: &Action,
        old: Option<Value>,
        uid: Option<String>,
    ) -> Option<Failure> {
        match action {
            Action::Create(namespace) => self.create(namespace).await,
            Action::Update(namespace) => self.update(namespace, old).await,
            Action::Delete(namespace) => self.delete(namespace, uid).await,
        }
        .err()
        .map(|(step, message)| Failure {
            namespace: action_namespace(action).to_string(),
            step,
            message,
        })
    }

    fn api(&self, namespace: &str) -> Api<DynamicObject> {
        copies_api(&self.shared.client, self.resource, namespace)
    }

    fn body(
        &self,
        namespace: &str,
        old: Option<&Value>,
    ) -> Result<DynamicObject, (ConditionType, String)> {
        let copy = desired_copy(self.resource, self.source, namespace, self.hash, old);
        serde_json::from_value(copy).map_err(|e| {
            (
                ConditionType::CreateResourceFailed,
                format!("encoding the copy: {e}"),
            )
        })
    }

    fn written(&self, namespace: &str, object: &DynamicObject) {
        self.shared.record_verified(
            self.source.name,
            namespace,
            object.metadata.resource_version.clone(),
            self.hash,
        );
    }

    async fn create(&self, namespace: &str) -> Result<(), (ConditionType, String)> {
        let api = self.api(namespace);
        match api
            .create(&PostParams::default(), &self.body(namespace, None)?)
            .await
        {
            Ok(created) => {
                self.written(namespace, &created);
                self.shared
                    .expect_created(self.source.name, namespace, true);
                Ok(())
            }
            // The cache had not shown it yet: look at what is there.
            Err(e) if is_already_exists(&e) => {
                let existing = api
                    .get(&self.resource.name)
                    .await
                    .map_err(|e| (ConditionType::GetResourceFailed, message_of(&e)))?;
                if !is_controlled_by(existing.owner_references(), self.source.name) {
                    return Err((ConditionType::ConflictOccurred, plan::CONFLICT.to_string()));
                }
                let existing = serde_json::to_value(&existing).unwrap_or_default();
                self.update(namespace, Some(existing)).await
            }
            Err(e) => Err((ConditionType::CreateResourceFailed, message_of(&e))),
        }
    }

    async fn update(
        &self,
        namespace: &str,
        old: Option<Value>,
    ) -> Result<(), (ConditionType, String)> {
        let api = self.api(namespace);
        let old = match old {
            Some(old) => old,
            None => {
                let read = api
                    .get(&self.resource.name)
                    .await
                    .map_err(|e| (ConditionType::GetResourceFailed, message_of(&e)))?;
                serde_json::to_value(&read).unwrap_or_default()
            }
        };
        let old_hash = old
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(HASH_ANNOTATION))
            .and_then(Value::as_str);
        if old_hash == Some(self.hash) && content_matches(&old, self.resource) {
            let version = old
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str);
            self.shared.record_verified(
                self.source.name,
                namespace,
                version.map(str::to_string),
                self.hash,
            );
            return Ok(());
        }
        let body = self
            .body(namespace, Some(&old))
            .map_err(|(_, message)| (ConditionType::UpdateResourceFailed, message))?;
        match api
            .replace(&self.resource.name, &PostParams::default(), &body)
            .await
        {
            Ok(updated) => {
                self.written(namespace, &updated);
                Ok(())
            }
            Err(e) => Err((ConditionType::UpdateResourceFailed, message_of(&e))),
        }
    }

    async fn delete(
        &self,
        namespace: &str,
        uid: Option<String>,
    ) -> Result<(), (ConditionType, String)> {
        let params = DeleteParams {
            preconditions: uid.map(|uid| Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match self
            .api(namespace)
            .delete(&self.resource.name, &params)
            .await
        {
            Ok(_) => {
                self.shared
                    .record_verified(self.source.name, namespace, None, self.hash);
                Ok(())
            }
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err((ConditionType::DeleteResourceFailed, message_of(&e))),
        }
    }
}

fn action_namespace(action: &Action) -> &str {
    match action {
        Action::Create(namespace) | Action::Update(namespace) | Action::Delete(namespace) => {
            namespace
        }
    }
}
