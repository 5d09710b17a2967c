//! The CloneSet controller shell: reflectors -> [`plan::plan`] -> API writes -> status and
//! events. Every decision is the planner's; this module only observes, executes and records.
//!
//! * **Cache only what it owns.** CloneSets are watched in the watched namespace(s); pods and
//!   PVCs only through the `apps.kruise.io/cloneset-instance-id` label (every pod and claim a
//!   CloneSet creates carries it), ControllerRevisions all, but only CloneSet-owned ones wake a
//!   CloneSet. The reflector stores that trigger reconciles are the ones the reconcile reads.
//! * **Minimum writes.** One create per pod (plus its claims), one delete; an in-place update
//!   is the planner's [`kruise_common::inplace::InPlaceWrites`]: the `InPlaceUpdateReady=False`
//!   status write when the pod must go unready, then one strategic-merge patch. Status is
//!   written only when it changed.
//! * **No double creates or deletes.** Scale expectations (`common::expectations`) record
//!   every create/delete before it is sent and are satisfied from the reflector store; while
//!   any is pending the planner does nothing. An expectation that expires is a Warning event
//!   (from the planner) and the `kruise_cloneset_scale_expectations_expired` counter.
//! * **Slow start.** Creations go out in batches of 1, 2, 4, … and stop at the first failure,
//!   as OpenKruise's `SlowStartBatch` does, so a quota or webhook error costs one request.
//! * **Invalid objects** (the validating webhook was bypassed) are not acted on: the
//!   controller sets the `FailedScale` condition with reason `InvalidSpec` and records a
//!   Warning `InvalidSpec` event.

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasher as _, Hasher as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolumeClaim, Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_common::api::keys::{CLONESET_INSTANCE_ID_KEY, SPECIFIED_DELETE_KEY};
use kruise_common::expectations::{
    ResourceVersionExpectations, Satisfaction, ScaleAction, ScaleExpectations,
};
use kruise_common::featuregate::FeatureGates;
use kruise_common::pods::lifecycle::NotReadyChange;
use kruise_common::pods::{CachedPod, PodView as _};
use kruise_common::revision::{CollisionDecision, on_name_collision};
use kruise_common::runtime::events::{Event, EventQueue, EventType};
use kruise_common::runtime::writes::{Writer, Written};
use kruise_common::runtime::{
    Metrics, ReconcileError, RunOptions, is_conflict, run_controller, trim_for_cache,
};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, Resource as _, ResourceExt as _};
use prometheus_client::metrics::counter::Counter;
use serde_json::json;

use crate::api::v1beta1::CloneSet;
use crate::api::validation::{to_message, validate_v1beta1};
use crate::api::{CloneSetCondition, CloneSetStatus, KIND, condition, defaults};
use crate::plan::{self, Action, Plan, PlanGates, PlanInput, RevisionWrite};
use kruise_common::api::version::APPS_V1BETA1;

/// Controller name (metrics, spans, readiness check `controller/cloneset`, event reporter).
pub const CONTROLLER_NAME: &str = "cloneset";
/// The event reporter, as OpenKruise's recorder names it.
pub const EVENT_REPORTER: &str = "cloneset-controller";
/// Condition reason (on `FailedScale`) and Warning event reason for an invalid CloneSet.
pub const REASON_INVALID_SPEC: &str = "InvalidSpec";
/// How long after an in-place update the cache may lag before the pod is trusted again.
const RESOURCE_VERSION_REQUEUE: Duration = Duration::from_millis(200);
/// Kubernetes' `generateName` alphabet (no vowels, no confusable digits).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
/// Length of the random instance id (pod name suffix).
const INSTANCE_ID_LEN: usize = 5;
/// Pod writes in flight at once when a plan touches many (creations within a slow-start
/// batch, in-place updates, deletes, labels): each write waits on a round trip, so a rollout
/// of N pods would otherwise take N of them, and each in-flight write holds a connection.
const WRITE_CONCURRENCY: usize = 32;

/// Which step of a reconcile failed. Categories label `controller_runtime_reconcile_errors`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Creating or updating a ControllerRevision.
    #[error("writing controller revision {name}: {source}")]
    Revision {
        /// Revision name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Creating a pod or its claims.
    #[error("creating pod {name}: {source}")]
    CreatePod {
        /// Pod (or claim) name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Deleting a pod or its claims.
    #[error("deleting {name}: {source}")]
    DeletePod {
        /// Pod (or claim) name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Patching a pod (in-place update, lifecycle, release, specified-delete label) or its status.
    #[error("updating pod {name}: {source}")]
    UpdatePod {
        /// Pod name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// PVC clean-up or re-assignment.
    #[error("updating claim {name}: {source}")]
    Pvc {
        /// Claim name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Writing the CloneSet's spec (`podsToDelete`) or status.
    #[error("updating cloneset {name}: {source}")]
    CloneSet {
        /// CloneSet name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

impl Error {
    fn source_error(&self) -> &kube::Error {
        match self {
            Error::Revision { source, .. }
            | Error::CreatePod { source, .. }
            | Error::DeletePod { source, .. }
            | Error::UpdatePod { source, .. }
            | Error::Pvc { source, .. }
            | Error::CloneSet { source, .. } => source,
        }
    }
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::Revision { .. } => "revision",
            Error::CreatePod { .. } => "create_pods",
            Error::DeletePod { .. } => "delete_pods",
            Error::UpdatePod { .. } => "update_pods",
            Error::Pvc { .. } => "pvcs",
            Error::CloneSet { .. } => "update_cloneset",
        }
    }
    fn is_conflict(&self) -> bool {
        is_conflict(self.source_error())
    }
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

fn is_already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists")
}

/// The planner's feature gates from the process's `--feature-gates`.
pub fn plan_gates(gates: &FeatureGates) -> PlanGates {
    PlanGates {
        short_hash: gates.enabled("CloneSetShortHash"),
        partition_rollback: gates.enabled("CloneSetPartitionRollback"),
        preparing_update_as_update: gates.enabled("PreparingUpdateAsUpdate"),
        env_from_metadata: gates.enabled("InPlaceUpdateEnvFromMetadata"),
        vertical_scaling: gates.enabled("InPlaceWorkloadVerticalScaling"),
        recreate_on_vct_change: gates.enabled("RecreatePodWhenChangeVCTInCloneSetGate"),
        exclude_preparing_delete: false,
    }
}

/// Settings of one controller instance.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Watch only this namespace (all when `None`).
    pub namespace: Option<String>,
    /// The planner's gates.
    pub gates: PlanGates,
    /// How long a scale expectation may stay unsatisfied before it is reported and dropped.
    pub expectation_timeout: jiff::SignedDuration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            namespace: None,
            gates: PlanGates::default(),
            expectation_timeout: kruise_common::expectations::DEFAULT_EXPECTATION_TIMEOUT,
        }
    }
}

/// What every reconcile shares: the client, the owned-object caches, the expectations.
pub struct Shared {
    client: Client,
    pods: Store<CachedPod>,
    pvcs: Store<PersistentVolumeClaim>,
    revisions: Store<ControllerRevision>,
    scale_expectations: Mutex<ScaleExpectations>,
    pod_versions: Mutex<ResourceVersionExpectations>,
    gates: PlanGates,
    recorder: EventQueue,
    expectations_expired: Counter,
}

/// A `namespace/name` key.
fn key_of(cs: &CloneSet) -> String {
    format!("{}/{}", cs.namespace().unwrap_or_default(), cs.name_any())
}

fn api_for<K>(client: &Client, namespace: &str) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    Api::namespaced(client.clone(), namespace)
}

fn all_or_namespaced<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// True when a ControllerRevision is controlled by a CloneSet (of either version).
fn owned_by_cloneset(rev: &ControllerRevision) -> bool {
    rev.owner_references().iter().any(|o| {
        o.kind == KIND && kruise_common::pods::api_group(&o.api_version) == crate::api::GROUP
    })
}

/// Keeps other workloads' revisions out of the cache: they arrive as deletions, which the
/// store ignores for objects it never held (there is no label to select CloneSet revisions by).
fn only_cloneset_revisions(
    event: watcher::Event<ControllerRevision>,
) -> watcher::Event<ControllerRevision> {
    match event {
        watcher::Event::Apply(rev) | watcher::Event::InitApply(rev) if !owned_by_cloneset(&rev) => {
            watcher::Event::Delete(rev)
        }
        other => other,
    }
}

/// Runs the CloneSet controller until `opts.shutdown` fires. `metrics` gets the
/// `kruise_cloneset_scale_expectations_expired` counter.
pub async fn run(client: Client, settings: Settings, metrics: &Metrics, opts: RunOptions) {
    let ns = settings.namespace.as_deref();
    let clonesets: Api<CloneSet> = all_or_namespaced(&client, ns);
    let page = |c: watcher::Config| c.page_size(500);

    // Pods are decoded straight into the compact CachedPod (see kruise_common::pods::cached).
    let (pods, pod_writer) = reflector::store::<CachedPod>();
    let pod_stream = reflector::reflector(
        pod_writer,
        watcher(
            all_or_namespaced::<CachedPod>(&client, ns),
            page(watcher::Config::default().labels(CLONESET_INSTANCE_ID_KEY)),
        ),
    )
    .default_backoff()
    .touched_objects();
    let (pvcs, pvc_writer) = reflector::store::<PersistentVolumeClaim>();
    let pvc_stream = reflector::reflector(
        pvc_writer,
        watcher(
            all_or_namespaced::<PersistentVolumeClaim>(&client, ns),
            page(watcher::Config::default().labels(CLONESET_INSTANCE_ID_KEY)),
        )
        .map(|event| event.map(|e| e.modify(trim_for_cache))),
    )
    .default_backoff()
    .touched_objects();
    let (revisions, revision_writer) = reflector::store::<ControllerRevision>();
    let revision_stream = reflector::reflector(
        revision_writer,
        watcher(
            all_or_namespaced::<ControllerRevision>(&client, ns),
            page(watcher::Config::default()),
        )
        .map(|event| event.map(|e| only_cloneset_revisions(e).modify(trim_for_cache))),
    )
    .default_backoff()
    .touched_objects();

    let expectations_expired = Counter::default();
    metrics.register(
        "kruise_cloneset_scale_expectations_expired",
        "Scale expectations of a CloneSet that expired unsatisfied (the controller then acted on what it observed)",
        expectations_expired.clone(),
    );
    let shared = Arc::new(Shared {
        recorder: EventQueue::for_controller(client.clone(), EVENT_REPORTER, metrics),
        client,
        pods,
        pvcs,
        revisions,
        scale_expectations: Mutex::new(ScaleExpectations::new(settings.expectation_timeout)),
        pod_versions: Mutex::new(ResourceVersionExpectations::new(
            settings.expectation_timeout,
        )),
        gates: settings.gates,
        expectations_expired,
    });
    let controller = Controller::new(clonesets, page(watcher::Config::default()))
        .owns_stream(pod_stream)
        .owns_stream(pvc_stream)
        .owns_stream(revision_stream);
    run_controller(controller, reconcile, shared, opts).await;
}

/// 5 random characters from Kubernetes' `generateName` alphabet.
pub fn random_instance_id() -> String {
    let mut out = String::with_capacity(INSTANCE_ID_LEN);
    // RandomState is seeded from the OS once per process and advanced per instance.
    let mut bits = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    for _ in 0..INSTANCE_ID_LEN {
        let alphabet_len = NAME_ALPHABET.len() as u64;
        let i = usize::try_from(bits % alphabet_len).unwrap_or(0);
        bits /= alphabet_len;
        out.push(char::from(NAME_ALPHABET.get(i).copied().unwrap_or(b'x')));
    }
    out
}

/// The cached objects in `namespace`, shared with the cache (not copied).
fn objects_in<K>(store: &Store<K>, namespace: &str) -> Vec<Arc<K>>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
{
    store
        .state()
        .into_iter()
        .filter(|o| o.meta().namespace.as_deref() == Some(namespace))
        .collect()
}

/// Marks pending creates/deletes the cache already shows as observed.
fn observe_scale(shared: &Shared, key: &str, namespace: &str) {
    let Ok(mut exp) = shared.scale_expectations.lock() else {
        return;
    };
    for (action, names) in exp.pending(key) {
        for name in names {
            let cached = shared
                .pods
                .get(&reflector::ObjectRef::new(&name).within(namespace));
            let seen = match action {
                ScaleAction::Create => cached.is_some(),
                ScaleAction::Delete => cached.is_none_or(|p| p.meta().deletion_timestamp.is_some()),
            };
            if seen {
                exp.observe(key, action, &name);
            }
        }
    }
}

/// Whether every pod we patched in place shows (at least) the version our write returned.
fn pod_versions_satisfied(shared: &Shared, pods: &[Arc<CachedPod>], now: Timestamp) -> bool {
    shared
        .pod_versions
        .lock()
        .map_or(true, |mut v| v.all_observed(pods.iter().map(|p| &**p), now))
}

fn record_pod_version(shared: &Shared, pod: &Written) {
    if let (Some(uid), Some(rv), Ok(mut versions)) = (
        pod.uid(),
        pod.resource_version(),
        shared.pod_versions.lock(),
    ) {
        versions.expect(uid, rv);
    }
}

/// One reconcile of a CloneSet.
async fn reconcile(original: Arc<CloneSet>, shared: Arc<Shared>) -> Result<Requeue, Error> {
    let namespace = original.namespace().unwrap_or_default();
    let key = key_of(&original);
    if shared.pods.wait_until_ready().await.is_err()
        || shared.pvcs.wait_until_ready().await.is_err()
        || shared.revisions.wait_until_ready().await.is_err()
    {
        return Ok(Requeue::requeue(Duration::from_secs(1)));
    }
    let now = Timestamp::now();
    let mut cs = (*original).clone();
    // The defaulting webhook normally did this; applying it again is idempotent and keeps
    // the planner working on objects that bypassed it.
    defaults::default_v1beta1(&mut cs.spec);
    let recorder = EventSink::new(&shared, &original);

    let errors = validate_v1beta1(&cs, None, None);
    if !errors.is_empty() {
        let message = to_message(&errors);
        let mut status = original.status.clone().unwrap_or_default();
        set_condition(
            &mut status,
            condition::FAILED_SCALE,
            REASON_INVALID_SPEC,
            &message,
            now,
        );
        recorder.publish(vec![EventRecord::new(
            "Warning",
            REASON_INVALID_SPEC,
            message.clone(),
            None,
        )]);
        write_status(&shared, &original, status).await?;
        return Ok(Requeue::await_change());
    }

    let pods = objects_in(&shared.pods, &namespace);
    let pvcs: Vec<PersistentVolumeClaim> = objects_in(&shared.pvcs, &namespace)
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| (*p).clone())
        .collect();
    let uid = original.uid().unwrap_or_default();
    let history: Vec<ControllerRevision> = objects_in(&shared.revisions, &namespace)
        .into_iter()
        .filter(|r| kruise_common::pods::is_controlled_by(&r.metadata, &uid))
        .map(|r| (*r).clone())
        .collect();

    observe_scale(&shared, &key, &namespace);
    let satisfaction = match shared.scale_expectations.lock() {
        Ok(mut e) => e.satisfied(&key, now),
        Err(_) => Satisfaction::Satisfied,
    };
    if satisfaction.is_satisfied() && !pod_versions_satisfied(&shared, &pods, now) {
        // A pod we just updated in place is still older in the cache than our write.
        return Ok(Requeue::requeue(RESOURCE_VERSION_REQUEUE));
    }

    // Revisions first: the update revision must exist before pods carry its name.
    let Some(revisions) = write_revisions(&shared, &cs, &original, &namespace, history).await?
    else {
        // A hash collision bumped status.collisionCount: the next reconcile renames.
        return Ok(Requeue::requeue(Duration::from_millis(100)));
    };

    let replicas = usize::try_from(cs.spec.replicas.unwrap_or(1).max(0)).unwrap_or(0);
    let instance_ids: Vec<String> = (0..replicas
        .min(plan::MAX_CREATIONS_PER_PLAN)
        .saturating_mul(2)
        .saturating_add(8))
        .map(|_| random_instance_id())
        .collect();
    let plan = plan::plan(&PlanInput {
        cloneset: &cs,
        pods: &pods,
        pvcs: &pvcs,
        current_revision: &revisions.current,
        update_revision: &revisions.update,
        revisions: &revisions.all,
        now,
        gates: shared.gates,
        instance_ids: &instance_ids,
        scale_expectations: &satisfaction,
    });
    if plan.expectations_expired.is_some() {
        shared.expectations_expired.inc();
        if let Ok(mut e) = shared.scale_expectations.lock() {
            e.delete(&key);
        }
    }
    recorder.publish(
        plan.events
            .iter()
            .map(|e| EventRecord::new(e.type_, e.reason, e.message.clone(), None))
            .collect(),
    );

    let outcome = execute(&shared, &cs, &key, pods, &plan, &recorder).await;
    // Status after the writes (OpenKruise also writes it when scaling failed).
    if plan.status_changed {
        write_status(&shared, &original, plan.status.clone()).await?;
    }
    outcome?;
    match satisfaction {
        Satisfaction::Pending { remaining, .. } => Ok(Requeue::requeue(
            remaining.unsigned_abs().min(Duration::from_secs(1)),
        )),
        _ => Ok(match plan.requeue_after {
            Some(d) => Requeue::requeue(d.unsigned_abs()),
            None => Requeue::await_change(),
        }),
    }
}

/// The revisions a reconcile plans with, after their writes.
struct ActiveRevisions {
    /// The current revision (`status.currentRevision`, else the update revision).
    current: ControllerRevision,
    /// The update revision, as stored.
    update: ControllerRevision,
    /// Every revision of the CloneSet, oldest first.
    all: Vec<ControllerRevision>,
}

/// Creates or bumps the update revision as [`plan::plan_revisions`] decides. `None` when a
/// true hash collision was found: `status.collisionCount` was raised instead (Kubernetes'
/// `CreateControllerRevision` loop, one step per reconcile).
async fn write_revisions(
    shared: &Shared,
    cs: &CloneSet,
    original: &CloneSet,
    namespace: &str,
    history: Vec<ControllerRevision>,
) -> Result<Option<ActiveRevisions>, Error> {
    let planned = plan::plan_revisions(cs, &history);
    let api: Api<ControllerRevision> = api_for(&shared.client, namespace);
    let mut all = history;
    let update = match &planned.write {
        RevisionWrite::None => planned.update.clone(),
        RevisionWrite::Update(rev) => {
            let name = rev.name_any();
            let stored = api
                .replace(&name, &PostParams::default(), rev)
                .await
                .map_err(|source| Error::Revision {
                    name: name.clone(),
                    source,
                })?;
            all.retain(|r| r.name_any() != name);
            all.push(stored.clone());
            stored
        }
        RevisionWrite::Create(rev) => {
            let name = rev.name_any();
            let stored = match api.create(&PostParams::default(), rev).await {
                Ok(created) => created,
                Err(e) if is_already_exists(&e) => {
                    let existing = api.get(&name).await.map_err(|source| Error::Revision {
                        name: name.clone(),
                        source,
                    })?;
                    let collisions = cs
                        .status
                        .as_ref()
                        .and_then(|s| s.collision_count)
                        .unwrap_or(0);
                    let data = rev.data.as_ref().map(|d| d.0.clone()).unwrap_or_default();
                    match on_name_collision(&existing, &data, collisions) {
                        CollisionDecision::Reuse => existing,
                        CollisionDecision::Retry { collision_count } => {
                            let mut status = original.status.clone().unwrap_or_default();
                            status.collision_count = Some(collision_count);
                            write_status(shared, original, status).await?;
                            return Ok(None);
                        }
                    }
                }
                Err(source) => return Err(Error::Revision { name, source }),
            };
            if all.iter().all(|r| r.name_any() != name) {
                all.push(stored.clone());
            }
            stored
        }
    };
    let current = if planned.current.name_any() == planned.update.name_any() {
        update.clone()
    } else {
        planned.current
    };
    kruise_common::revision::sort_revisions(&mut all);
    Ok(Some(ActiveRevisions {
        current,
        update,
        all,
    }))
}

/// Sets (or refreshes) a True condition of `type_`.
fn set_condition(
    status: &mut CloneSetStatus,
    type_: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) {
    let fresh = CloneSetCondition {
        type_: type_.into(),
        status: "True".into(),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
        reason: reason.into(),
        message: message.into(),
    };
    match status.conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == "True" && c.reason == reason && c.message == message => {}
        Some(c) => *c = fresh,
        None => status.conditions.push(fresh),
    }
}

/// Writes the status subresource (PUT with the cached resourceVersion: a stale cache gets a
/// conflict, requeued quietly) when it differs from what is stored.
async fn write_status(shared: &Shared, cs: &CloneSet, status: CloneSetStatus) -> Result<(), Error> {
    if cs.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let api: Api<CloneSet> = api_for(&shared.client, &cs.namespace().unwrap_or_default());
    let mut next = cs.clone();
    next.status = Some(status);
    api.replace_status(&cs.name_any(), &PostParams::default(), &next)
        .await
        .map_err(|source| Error::CloneSet {
            name: cs.name_any(),
            source,
        })?;
    Ok(())
}

/// One event to record about a CloneSet.
struct EventRecord {
    /// `Normal` or `Warning`.
    type_: &'static str,
    /// OpenKruise's reason.
    reason: &'static str,
    /// OpenKruise's message.
    message: String,
    /// The pod it concerns, if any.
    pod: Option<String>,
}

impl EventRecord {
    fn new(type_: &'static str, reason: &'static str, message: String, pod: Option<&str>) -> Self {
        Self {
            type_,
            reason,
            message,
            pod: pod.map(str::to_string),
        }
    }

    /// The success event of an action (OpenKruise's reason and message).
    fn success_of(action: &Action) -> Option<Self> {
        action
            .success_event()
            .map(|(t, r, m)| Self::new(t, r, m, action.pod_name()))
    }
}

/// Events for one CloneSet, published in the background in the order given.
struct EventSink {
    recorder: EventQueue,
    reference: ObjectReference,
}

impl EventSink {
    fn new(shared: &Shared, cs: &CloneSet) -> Self {
        let mut reference = cs.object_ref(&());
        reference.api_version = Some(APPS_V1BETA1.into());
        reference.kind = Some(KIND.into());
        Self {
            recorder: shared.recorder.clone(),
            reference,
        }
    }

    fn publish(&self, events: Vec<EventRecord>) {
        for EventRecord {
            type_,
            reason,
            message,
            pod,
        } in events
        {
            // The pod as the related object keeps one event per pod: events.k8s.io
            // aggregates events that differ only in their note.
            let secondary = pod.map(|name| ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(name),
                namespace: self.reference.namespace.clone(),
                ..Default::default()
            });
            let event = Event {
                type_: if type_ == "Warning" {
                    EventType::Warning
                } else {
                    EventType::Normal
                },
                reason: reason.into(),
                note: Some(message),
                action: reason.into(),
                secondary,
            };
            self.recorder.send(event, self.reference.clone());
        }
    }
}

/// Executes the plan's actions: creations in slow-start batches, everything else in order.
/// Returns the first error after recording the events of what succeeded.
async fn execute(
    shared: &Shared,
    cs: &CloneSet,
    key: &str,
    pods: Vec<Arc<CachedPod>>,
    plan: &Plan,
    events: &EventSink,
) -> Result<(), Error> {
    let namespace = cs.namespace().unwrap_or_default();
    // Keep only the pods the plan acts on: the writes take a while, and a snapshot of all
    // pods would pin their old versions while the cache moves on (twice the cache at 10,000).
    let acted: BTreeSet<&str> = plan.actions.iter().filter_map(Action::pod_name).collect();
    let pods: Vec<Arc<CachedPod>> = pods
        .into_iter()
        .filter(|p| acted.contains(p.name()))
        .collect();
    let ctx = Exec {
        shared,
        cs,
        key,
        namespace: &namespace,
        pods: pods.iter().map(|p| (p.name(), &**p)).collect(),
    };
    let mut recorded = Vec::new();
    let mut first_error = None;

    let creations: Vec<&Action> = plan
        .actions
        .iter()
        .filter(|a| matches!(a, Action::CreatePod { .. }))
        .collect();
    let mut start = 0;
    let mut batch = 1;
    while start < creations.len() && first_error.is_none() {
        let end = (start + batch).min(creations.len());
        // In flight at once: at most WRITE_CONCURRENCY, whatever the batch size. Each
        // in-flight request holds an HTTP/1.1 connection, and a pooled connection with its
        // TLS session and buffers stays allocated (a batch of 4,096 held ~5,000 of them).
        let mut creates = Vec::with_capacity(end - start);
        for action in &creations[start..end] {
            creates.push(ctx.create(action));
        }
        let results: Vec<Result<(), Error>> = futures::stream::iter(creates)
            .buffered(WRITE_CONCURRENCY)
            .collect()
            .await;
        for (action, result) in creations[start..end].iter().zip(results) {
            match result {
                Ok(()) => recorded.extend(EventRecord::success_of(action)),
                Err(e) => {
                    recorded.push(EventRecord::new(
                        "Warning",
                        "FailedCreate",
                        format!("failed to create pod: {e}"),
                        action.pod_name(),
                    ));
                    first_error.get_or_insert(e);
                }
            }
        }
        start = end;
        batch = batch.saturating_mul(2);
    }

    // A status write and a lifecycle-state change planned for the same pod become one
    // request (the status subresource carries both).
    let lifecycle_pods: BTreeSet<&str> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::SetLifecycleState { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    // The other actions, grouped per pod (a pod's own actions keep their order); pods are
    // written concurrently, up to WRITE_CONCURRENCY at once. After a failure no further pod
    // is started; the ones in flight finish.
    let mut groups: Vec<Vec<&Action>> = Vec::new();
    let mut group_of: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for action in plan.actions.iter().filter(|a| match a {
        Action::CreatePod { .. } => false,
        Action::UpdatePodStatus { name, .. } => !lifecycle_pods.contains(name.as_str()),
        _ => true,
    }) {
        match action.pod_name() {
            Some(pod) => match group_of.get(pod) {
                Some(&i) => groups[i].push(action),
                None => {
                    group_of.insert(pod, groups.len());
                    groups.push(vec![action]);
                }
            },
            None => groups.push(vec![action]),
        }
    }
    let failed = AtomicBool::new(first_error.is_some());
    // Each write's future is made when it starts: made up front, 10,000 of them held
    // ~20 MB. (A stream `map` closure here trips rustc's higher-ranked Send check.)
    let mut outcomes: Vec<Vec<(&Action, Result<(), Error>)>> = Vec::with_capacity(groups.len());
    let mut waiting = groups.into_iter();
    let mut in_flight = futures::stream::FuturesOrdered::new();
    loop {
        while in_flight.len() < WRITE_CONCURRENCY {
            let Some(actions) = waiting.next() else { break };
            in_flight.push_back(run_group(&ctx, plan, &failed, actions));
        }
        match in_flight.next().await {
            Some(outcome) => outcomes.push(outcome),
            None => break,
        }
    }
    for (action, result) in outcomes.into_iter().flatten() {
        match result {
            Ok(()) => recorded.extend(EventRecord::success_of(action)),
            Err(e) => {
                let reason = match action {
                    Action::DeletePod { .. } => "FailedDelete",
                    _ => "FailedUpdate",
                };
                recorded.push(EventRecord::new(
                    "Warning",
                    reason,
                    e.to_string(),
                    action.pod_name(),
                ));
                first_error.get_or_insert(e);
            }
        }
    }
    events.publish(recorded);
    match first_error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The status write planned for `name`, merged into its lifecycle-state write.
fn merged_status<'p>(plan: &'p Plan, name: &str) -> Option<&'p PodStatus> {
    plan.actions.iter().find_map(|a| match a {
        Action::UpdatePodStatus { name: n, status } if n == name => Some(status.as_ref()),
        _ => None,
    })
}

/// Performs one pod's actions in order, stopping at its first failure; nothing when another
/// pod's write already failed.
async fn run_group<'p>(
    ctx: &Exec<'_>,
    plan: &'p Plan,
    failed: &AtomicBool,
    actions: Vec<&'p Action>,
) -> Vec<(&'p Action, Result<(), Error>)> {
    let mut out = Vec::new();
    if failed.load(Ordering::SeqCst) {
        return out;
    }
    for action in actions {
        tracing::debug!(cloneset = ctx.key, ?action, "performing");
        let merged = match action {
            Action::SetLifecycleState { name, .. } => merged_status(plan, name),
            _ => None,
        };
        let result = ctx.perform(action, merged).await;
        let stop = result.is_err();
        out.push((action, result));
        if stop {
            failed.store(true, Ordering::SeqCst);
            break;
        }
    }
    out
}

/// What executing one action needs.
struct Exec<'a> {
    shared: &'a Shared,
    cs: &'a CloneSet,
    key: &'a str,
    namespace: &'a str,
    /// The cached pods by name.
    pods: HashMap<&'a str, &'a CachedPod>,
}

impl Exec<'_> {
    fn pod_api(&self) -> Writer<Pod> {
        Writer::namespaced(self.shared.client.clone(), self.namespace)
    }

    fn pvc_api(&self) -> Writer<PersistentVolumeClaim> {
        Writer::namespaced(self.shared.client.clone(), self.namespace)
    }

    fn cached_pod(&self, name: &str) -> Option<&CachedPod> {
        self.pods.get(name).copied()
    }

    fn expect(&self, action: ScaleAction, name: &str) {
        if let Ok(mut e) = self.shared.scale_expectations.lock() {
            e.expect(self.key, action, name);
        }
    }

    fn unexpect(&self, action: ScaleAction, name: &str) {
        if let Ok(mut e) = self.shared.scale_expectations.lock() {
            e.observe(self.key, action, name);
        }
    }

    /// Creates the claims that do not exist yet, then the pod (one write each).
    async fn create(&self, action: &Action) -> Result<(), Error> {
        let Action::CreatePod { pod, pvcs } = action else {
            return Ok(());
        };
        for pvc in pvcs {
            match self.pvc_api().create(&PostParams::default(), pvc).await {
                Ok(_) => {}
                Err(e) if is_already_exists(&e) => {}
                Err(source) => {
                    return Err(Error::CreatePod {
                        name: pvc.name_any(),
                        source,
                    });
                }
            }
        }
        let name = pod.name_any();
        self.expect(ScaleAction::Create, &name);
        match self.pod_api().create(&PostParams::default(), pod).await {
            Ok(_) => Ok(()),
            Err(source) => {
                self.unexpect(ScaleAction::Create, &name);
                Err(Error::CreatePod { name, source })
            }
        }
    }

    fn update_error(name: &str) -> impl FnOnce(kube::Error) -> Error + '_ {
        move |source| Error::UpdatePod {
            name: name.to_string(),
            source,
        }
    }

    /// Writes `status`'s changed conditions, together with `meta_patch`'s labels and
    /// annotations, as one strategic-merge patch of the status subresource (see
    /// `kruise_common::pods::status_patch`). Returns `None` when nothing changes.
    async fn patch_pod_status(
        &self,
        name: &str,
        status: Option<&PodStatus>,
        meta_patch: &serde_json::Value,
    ) -> Result<Option<Written>, Error> {
        let Some(cached) = self.cached_pod(name) else {
            return Err(Error::UpdatePod {
                name: name.to_string(),
                source: not_in_cache(name),
            });
        };
        // Without a status of its own the write carries only `meta_patch`.
        let unchanged;
        let status = match status {
            Some(s) => s,
            None => {
                unchanged = cached.status_copy();
                &unchanged
            }
        };
        let Some(body) = kruise_common::pods::status_patch(cached, status, meta_patch) else {
            return Ok(None);
        };
        let written = self
            .pod_api()
            .patch_subresource(
                "status",
                name,
                &PatchParams::default(),
                &Patch::Strategic(body),
            )
            .await
            .map_err(Self::update_error(name))?;
        record_pod_version(self.shared, &written);
        Ok(Some(written))
    }

    async fn patch_pod(&self, name: &str, patch: &serde_json::Value) -> Result<Written, Error> {
        self.pod_api()
            .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .map_err(Self::update_error(name))
    }

    /// `merged_status`: a status the plan also writes for this action's pod, folded into
    /// this action's write (see `execute`).
    async fn perform(
        &self,
        action: &Action,
        merged_status: Option<&PodStatus>,
    ) -> Result<(), Error> {
        match action {
            Action::CreatePod { .. } => self.create(action).await,
            Action::DeletePod { name, pvcs } => {
                self.expect(ScaleAction::Delete, name);
                match self.pod_api().delete(name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(e) if is_not_found(&e) => {}
                    Err(source) => {
                        self.unexpect(ScaleAction::Delete, name);
                        return Err(Error::DeletePod {
                            name: name.clone(),
                            source,
                        });
                    }
                }
                for pvc in pvcs {
                    match self.pvc_api().delete(pvc, &DeleteParams::default()).await {
                        Ok(_) => {}
                        Err(e) if is_not_found(&e) => {}
                        Err(source) => {
                            return Err(Error::DeletePod {
                                name: pvc.clone(),
                                source,
                            });
                        }
                    }
                }
                Ok(())
            }
            Action::SetLifecycleState {
                name,
                patch,
                not_ready,
            } => {
                let now = Timestamp::now();
                // The plan's status write for this pod (InPlaceUpdateReady=True when an
                // update or a creation completes) travels with the lifecycle labels.
                let mut status = merged_status.cloned();
                if let Some(change) = not_ready
                    && let Some(cached) = self.cached_pod(name)
                {
                    // The not-ready key change applies on top of the planned conditions.
                    let mut base = cached.to_pod();
                    if let Some(s) = &status {
                        kruise_common::pods::merge_conditions(
                            base.status.get_or_insert_with(Default::default),
                            s,
                        );
                    }
                    let message = change.message();
                    let next = match change {
                        NotReadyChange::Add(_) => {
                            kruise_common::pods::readiness::add_not_ready_key(&base, &message, now)
                        }
                        NotReadyChange::Remove(_) => {
                            kruise_common::pods::readiness::remove_not_ready_key(
                                &base, &message, now,
                            )
                        }
                    };
                    if next.is_some() {
                        status = next;
                    }
                }
                if status.is_some() {
                    self.patch_pod_status(name, status.as_ref(), patch).await?;
                } else {
                    let patched = self.patch_pod(name, patch).await?;
                    record_pod_version(self.shared, &patched);
                }
                Ok(())
            }
            Action::UpdateInPlace { name, update, .. } => {
                if let Some(status) = &update.unready_conditions {
                    self.patch_pod_status(name, Some(status), &serde_json::Value::Null)
                        .await?;
                }
                if let Some(patch) = &update.patch {
                    // No resourceVersion: the kubelet answers the status write above with
                    // its own, and a precondition would turn that into a conflict every
                    // time. The cache is as new as this controller's last write
                    // (expectations), and the patch touches only what the plan computed.
                    let patched = self.patch_pod(name, patch).await?;
                    record_pod_version(self.shared, &patched);
                }
                if let Some(resize) = &update.resize_patch {
                    let resized = self
                        .pod_api()
                        .patch_subresource(
                            "resize",
                            name,
                            &PatchParams::default(),
                            &Patch::Strategic(resize),
                        )
                        .await
                        .map_err(Self::update_error(name))?;
                    record_pod_version(self.shared, &resized);
                }
                Ok(())
            }
            Action::MarkSpecifiedDelete { name, .. } => {
                let patch = json!({"metadata": {"labels": {SPECIFIED_DELETE_KEY: "true"}}});
                self.patch_pod(name, &patch).await.map(|_| ())
            }
            Action::PatchPod { name, patch } => {
                let patched = self.patch_pod(name, patch).await?;
                record_pod_version(self.shared, &patched);
                Ok(())
            }
            Action::UpdatePodStatus { name, status } => {
                self.patch_pod_status(name, Some(status), &serde_json::Value::Null)
                    .await?;
                Ok(())
            }
            Action::ReleasePod { name } => {
                let Some(pod) = self.cached_pod(name) else {
                    return Ok(());
                };
                let uid = self.cs.uid().unwrap_or_default();
                let remaining: Vec<_> = pod
                    .owner_references()
                    .iter()
                    .filter(|o| o.uid != uid)
                    .cloned()
                    .collect();
                let patch = json!({"metadata": {
                    "ownerReferences": remaining,
                    "resourceVersion": pod.resource_version(),
                }});
                self.pod_api()
                    .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(Self::update_error(name))?;
                Ok(())
            }
            Action::DeletePvc { name } => {
                match self.pvc_api().delete(name, &DeleteParams::default()).await {
                    Ok(_) => Ok(()),
                    Err(e) if is_not_found(&e) => Ok(()),
                    Err(source) => Err(Error::Pvc {
                        name: name.clone(),
                        source,
                    }),
                }
            }
            Action::ReassignPvcToPod { pvc, pod } => {
                let Some(owner) = self.cached_pod(pod) else {
                    return Ok(());
                };
                let reference = json!([{
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod,
                    "uid": owner.uid().unwrap_or_default(),
                    "controller": false,
                }]);
                let patch = json!({"metadata": {"ownerReferences": reference}});
                self.pvc_api()
                    .patch(pvc, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(|source| Error::Pvc {
                        name: pvc.clone(),
                        source,
                    })?;
                Ok(())
            }
            Action::TruncatePodsToDelete { pods_to_delete } => {
                let api: Api<CloneSet> = api_for(&self.shared.client, self.namespace);
                let patch = json!({
                    "metadata": {"resourceVersion": self.cs.resource_version()},
                    "spec": {"scaleStrategy": {"podsToDelete": pods_to_delete}},
                });
                api.patch(
                    &self.cs.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .map_err(|source| Error::CloneSet {
                    name: self.cs.name_any(),
                    source,
                })?;
                Ok(())
            }
            Action::DeleteRevision { name } => {
                let api: Api<ControllerRevision> = api_for(&self.shared.client, self.namespace);
                match api.delete(name, &DeleteParams::default()).await {
                    Ok(_) => Ok(()),
                    Err(e) if is_not_found(&e) => Ok(()),
                    Err(source) => Err(Error::Revision {
                        name: name.clone(),
                        source,
                    }),
                }
            }
        }
    }
}

/// The error for a pod the plan names but the cache no longer has (it was deleted meanwhile).
fn not_in_cache(name: &str) -> kube::Error {
    kube::Error::Api(Box::new(kube::core::Status {
        status: Some(kube::core::response::StatusSummary::Failure),
        message: format!("pod {name} is no longer in the cache"),
        reason: "NotFound".into(),
        code: 404,
        ..Default::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_ids_are_five_chars_of_the_generate_name_alphabet() {
        let ids: std::collections::BTreeSet<String> =
            (0..200).map(|_| random_instance_id()).collect();
        assert!(ids.len() > 190, "ids repeat too often: {}", ids.len());
        for id in &ids {
            assert_eq!(id.len(), INSTANCE_ID_LEN);
            assert!(id.bytes().all(|b| NAME_ALPHABET.contains(&b)), "{id}");
        }
    }

    #[test]
    fn conflicts_are_quiet() {
        let conflict = Error::CloneSet {
            name: "web".into(),
            source: kube::Error::Api(Box::new(kube::core::Status {
                code: 409,
                reason: "Conflict".into(),
                ..Default::default()
            })),
        };
        assert!(conflict.is_conflict());
        assert_eq!(conflict.category(), "update_cloneset");
        let other = Error::CreatePod {
            name: "web-abcde".into(),
            source: not_in_cache("web-abcde"),
        };
        assert!(!other.is_conflict());
        assert_eq!(other.category(), "create_pods");
    }

    #[test]
    fn gates_follow_the_feature_gates() {
        let gates = FeatureGates::parse("CloneSetShortHash=true").unwrap_or_else(|e| panic!("{e}"));
        let g = plan_gates(&gates);
        assert!(g.short_hash);
        assert!(!g.partition_rollback);
    }
}
