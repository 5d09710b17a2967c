//! The CloneSet controller shell. A reconcile reads top to bottom as named steps:
//! **observe** (the caches and expectations) -> **validate** -> **revisions** (the update
//! revision must exist before pods carry its name) -> **plan** ([`plan::plan`], time an
//! input) -> **execute** (the shared executor) -> **status**. Every decision is the
//! planner's; this module only observes, executes and records.
//!
//! * **Cache only what it owns.** CloneSets are watched in the watched namespace(s); pods and
//!   PVCs only through the `apps.kruise.io/cloneset-instance-id` label (every pod and claim a
//!   CloneSet creates carries it), ControllerRevisions all, but only CloneSet-owned ones wake a
//!   CloneSet. The reflector stores that trigger reconciles are the ones the reconcile reads.
//! * **Minimum writes.** One create per pod (plus its claims), one delete; an in-place update
//!   is the planner's [`kruise_core::inplace::InPlaceWrites`]: the `InPlaceUpdateReady=False`
//!   status write when the pod must go unready, then one strategic-merge patch. Status is
//!   written only when it changed.
//! * **No double creates or deletes.** Scale expectations (`common::expectations`) record
//!   every create/delete before it is sent and are satisfied from the reflector store; while
//!   any is pending the planner does nothing. An expectation that expires is a Warning event
//!   (from the planner) and the `kruise_cloneset_scale_expectations_expired` counter.
//! * **Slow start.** Creations go out in batches of 1, 2, 4, … and stop at the first failure,
//!   as OpenKruise's `SlowStartBatch` does, so a quota or webhook error costs one request
//!   (the shared executor, `kruise_runtime::execute`).
//! * **Warm caches on every replica.** The watches start on every replica and a standby
//!   keeps its stores current; only the leader reconciles and writes, and one that takes
//!   over goes on from its warm caches without listing again.
//! * **A CloneSet that does not decode** (a schemaless template with `image: 5`) is skipped
//!   by the watch's deserialize guard with a Warning `FailedDecode` event; the other
//!   CloneSets keep reconciling.
//! * **Invalid objects** (the validating webhook was bypassed) are not acted on: the
//!   controller sets the `FailedScale` condition with reason `InvalidSpec` and records a
//!   Warning `InvalidSpec` event.
//! * **A pod write refused as invalid (422)** — a template the webhook let through but the
//!   API server refuses — is never retried hot: the CloneSet's writes back off (1 s doubling
//!   to 5 minutes, reset when a write succeeds or the spec changes), the failure is a
//!   Warning event on the CloneSet (`FailedUpdatePodInPlace`, `FailedCreate`) and a
//!   `FailedUpdate`/`FailedScale` condition. An in-place patch that would leave the pod's
//!   metadata invalid is refused before the pod is made unready (`precheck`), and the
//!   readiness conditions written for a patch the API server still refused are restored.

use std::hash::{BuildHasher as _, Hasher as _};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_core::api::keys::CLONESET_INSTANCE_ID_KEY;
use kruise_core::expectations::{
    ResourceVersionExpectations, Satisfaction, ScaleExpectations, SharedExpectations,
};
use kruise_core::featuregate::FeatureGates;
use kruise_core::pods::CachedPod;
use kruise_runtime::errors::ShellError;
use kruise_runtime::events::{EventQueue, EventRecord, Recorder};
use kruise_runtime::revisions::{RevisionStep, write_revisions};
use kruise_runtime::status::{write_collision_count, write_namespaced_status};
use kruise_runtime::watch::Watch;
use kruise_runtime::writes::Written;
use kruise_runtime::{Metrics, RunOptions, run_controller, warm_until_leading};
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt as _};
use prometheus_client::metrics::counter::Counter;

use crate::api::v1beta1::CloneSet;
use crate::api::validation::{to_message, validate_v1beta1};
use crate::api::{CloneSetCondition, CloneSetStatus, KIND, condition, defaults};
use crate::plan::{self, PlanGates, PlanInput};
use crate::pub_check::{HELD_REQUEUE, PubCheck};

mod error;
mod execute;
mod observe;
mod precheck;
mod refused;

pub use error::Error;
use observe::observe;
use refused::RefusedPodWrites;

/// Controller name (metrics, spans, readiness check `controller/cloneset`, event reporter).
pub const CONTROLLER_NAME: &str = "cloneset";
/// The event reporter, as OpenKruise's recorder names it.
pub const EVENT_REPORTER: &str = "cloneset-controller";
/// Condition reason (on `FailedScale`) and Warning event reason for an invalid CloneSet.
pub const REASON_INVALID_SPEC: &str = "InvalidSpec";
/// Condition reason (on `FailedUpdate`) and Warning event reason for an in-place update the
/// API server refused, as OpenKruise names the event.
pub const REASON_FAILED_UPDATE_IN_PLACE: &str = "FailedUpdatePodInPlace";
/// Condition reason (on `FailedScale`) and Warning event reason for a pod create the API
/// server refused.
pub const REASON_FAILED_CREATE: &str = "FailedCreate";
/// How long after an in-place update the cache may lag before the pod is trusted again.
const RESOURCE_VERSION_REQUEUE: Duration = Duration::from_millis(200);
/// Kubernetes' `generateName` alphabet (no vowels, no confusable digits).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
/// Length of the random instance id (pod name suffix).
const INSTANCE_ID_LEN: usize = 5;

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
    /// `PodUnavailableBudgetUpdateGate`: pod updates are checked against their budgets
    /// first ([`crate::pub_check`]).
    pub pub_check: bool,
    /// `PreDownloadImageForInPlaceUpdate`: ImagePullJobs before in-place rollouts.
    pub pre_download: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            namespace: None,
            gates: PlanGates::default(),
            expectation_timeout: kruise_core::expectations::DEFAULT_EXPECTATION_TIMEOUT,
            pub_check: false,
            pre_download: false,
        }
    }
}

/// The owned-object caches a reconcile reads.
struct Caches {
    pods: Store<CachedPod>,
    pvcs: Store<PersistentVolumeClaim>,
    revisions: Store<ControllerRevision>,
}

/// What every reconcile shares: the client, the owned-object caches, the expectations.
struct Shared {
    client: Client,
    caches: Caches,
    scale_expectations: SharedExpectations<ScaleExpectations>,
    pod_versions: SharedExpectations<ResourceVersionExpectations>,
    gates: PlanGates,
    recorder: EventQueue,
    expectations_expired: Counter,
    /// Per CloneSet (`namespace/name`): its pod writes the API server refused as invalid.
    refused_writes: RefusedPodWrites,
    /// PodUnavailableBudgets checked before pod updates.
    pub_check: PubCheck,
    pre_download: kruise_runtime::predownload::PreDownload,
}

impl Shared {
    fn new(
        client: Client,
        settings: &Settings,
        metrics: &Metrics,
        recorder: EventQueue,
        caches: Caches,
    ) -> Self {
        let expectations_expired = Counter::default();
        metrics.register(
            "kruise_cloneset_scale_expectations_expired",
            "Scale expectations of a CloneSet that expired unsatisfied (the controller then acted on what it observed)",
            expectations_expired.clone(),
        );
        let pub_check = PubCheck::new(client.clone(), settings.pub_check);
        Self {
            client,
            caches,
            scale_expectations: SharedExpectations::new(ScaleExpectations::new(
                settings.expectation_timeout,
            )),
            pod_versions: SharedExpectations::new(ResourceVersionExpectations::new(
                settings.expectation_timeout,
            )),
            gates: settings.gates,
            recorder,
            expectations_expired,
            refused_writes: RefusedPodWrites::default(),
            pub_check,
            pre_download: kruise_runtime::predownload::PreDownload::new(settings.pre_download),
        }
    }
}

/// True when a ControllerRevision is controlled by a CloneSet (of either version).
fn owned_by_cloneset(rev: &ControllerRevision) -> bool {
    rev.owner_references().iter().any(|o| {
        o.kind == KIND && kruise_core::pods::api_group(&o.api_version) == crate::api::GROUP
    })
}

/// Runs the CloneSet controller until `opts.shutdown` fires: its watches at once, its
/// reconciles once `opts.leadership` says this replica leads. `metrics` gets the
/// `kruise_cloneset_scale_expectations_expired` counter.
pub async fn run(client: Client, settings: Settings, metrics: &Metrics, opts: RunOptions) {
    let ns = settings.namespace.as_deref();
    let recorder = EventQueue::for_controller(client.clone(), EVENT_REPORTER, metrics);
    let (clonesets, mut cloneset_stream) =
        Watch::<CloneSet>::primary(client.clone(), ns, &opts, &recorder).reflect();
    // Pods are decoded straight into the compact CachedPod (see kruise_core::pods::cached).
    let (pods, mut pod_stream) = Watch::<CachedPod>::new(client.clone(), ns)
        .labels(CLONESET_INSTANCE_ID_KEY)
        .untrimmed()
        .reflect();
    let (pvcs, mut pvc_stream) = Watch::<PersistentVolumeClaim>::new(client.clone(), ns)
        .labels(CLONESET_INSTANCE_ID_KEY)
        .reflect();
    // No label selects CloneSet revisions: other workloads' are kept out of the cache.
    let (revisions, mut revision_stream) = Watch::<ControllerRevision>::new(client.clone(), ns)
        .keep_only(owned_by_cloneset)
        .reflect();
    if !warm_until_leading(
        &opts,
        &mut [
            &mut cloneset_stream,
            &mut pod_stream,
            &mut pvc_stream,
            &mut revision_stream,
        ],
    )
    .await
    {
        return;
    }
    let caches = Caches {
        pods,
        pvcs,
        revisions,
    };
    let shared = Arc::new(Shared::new(client, &settings, metrics, recorder, caches));
    // A replica that warmed its caches as a standby has seen every CloneSet already:
    // reconcile them all once it leads.
    let controller = Controller::for_stream(cloneset_stream, clonesets)
        .reconcile_all_on(futures::stream::once(async {}))
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

fn record_pod_version(shared: &Shared, pod: &Written) {
    if let (Some(uid), Some(rv)) = (pod.uid(), pod.resource_version()) {
        // A poisoned lock only loses this record: the write already went out, and the next
        // reconcile stops on the lock before acting again.
        let _ = shared.pod_versions.with(|v| v.expect(uid, rv));
    }
}

/// One reconcile of a CloneSet.
async fn reconcile(original: Arc<CloneSet>, shared: Arc<Shared>) -> Result<Requeue, Error> {
    let namespace = original.namespace().unwrap_or_default();
    let key = format!("{namespace}/{}", original.name_any());
    // The one clock read: everything below takes time as an input.
    let now = Timestamp::now();
    let recorder = Recorder::about(&shared.recorder, &*original);

    let Some(observed) = observe(&shared, &original, &key, now).await? else {
        return Ok(Requeue::requeue(Duration::from_secs(1)));
    };

    // Validate. The defaulting webhook normally did this; applying it again is idempotent
    // and keeps the planner working on objects that bypassed it.
    let mut cs = (*original).clone();
    defaults::default_v1beta1(&mut cs.spec);
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
        recorder.record(EventRecord::warning(REASON_INVALID_SPEC, message));
        write_namespaced_status(&shared.client, &*original, &status).await?;
        return Ok(Requeue::await_change());
    }
    if observed.satisfaction.is_satisfied() && observed.pod_writes_pending {
        return Ok(Requeue::requeue(RESOURCE_VERSION_REQUEUE));
    }
    // Pod writes refused as invalid wait out their backoff: the condition and event went
    // out with the refusal, and pod events (the kubelet's status) must not retry them hot.
    let generation = original.metadata.generation;
    if let Some(wait) = shared.refused_writes.wait(&key, generation, now) {
        return Ok(Requeue::requeue(wait));
    }

    // Revisions.
    let planned = plan::plan_revisions(&cs, &observed.history);
    let collisions = cs
        .status
        .as_ref()
        .and_then(|s| s.collision_count)
        .unwrap_or(0);
    let revisions = match write_revisions(
        &shared.client,
        &namespace,
        planned,
        collisions,
        observed.history,
    )
    .await?
    {
        RevisionStep::Ready(revisions) => revisions,
        RevisionStep::Collision(collision_count) => {
            write_collision_count(&shared.client, &*original, collision_count, |s| {
                &mut s.collision_count
            })
            .await?;
            // The next reconcile renames.
            return Ok(Requeue::requeue(Duration::from_millis(100)));
        }
    };

    // Pre-download: the new images' ImagePullJobs go out before pods update.
    let (current, update) = (&revisions.current, &revisions.update);
    if shared.pre_download.enabled() {
        let decision = crate::predownload::plan(&cs, current, update, shared.gates);
        let uid = cs.uid().unwrap_or_default();
        let owner = crate::predownload::job_owner(&cs, &namespace, &uid);
        (shared.pre_download)
            .step(&shared.client, &owner, update, decision, &recorder)
            .await;
    }

    // Plan.
    let replicas = usize::try_from(cs.spec.replicas.unwrap_or(1).max(0)).unwrap_or(0);
    let instance_ids: Vec<String> = (0..replicas
        .min(plan::MAX_CREATIONS_PER_PLAN)
        .saturating_mul(2)
        .saturating_add(8))
        .map(|_| random_instance_id())
        .collect();
    let mut plan = plan::plan(&PlanInput {
        cloneset: &cs,
        pods: &observed.pods,
        pvcs: &observed.pvcs,
        current_revision: &revisions.current,
        update_revision: &revisions.update,
        revisions: &revisions.all,
        now,
        gates: shared.gates,
        instance_ids: &instance_ids,
        scale_expectations: &observed.satisfaction,
    });
    if plan.extra.expectations_expired.is_some() {
        shared.expectations_expired.inc();
        shared
            .scale_expectations
            .with(|e| e.delete(&key))
            .map_err(ShellError::from)?;
    }
    recorder.record_all(plan.events.iter().cloned());

    // PodUnavailableBudgets hold the pod updates they do not allow.
    let held = shared
        .pub_check
        .hold_updates(&namespace, &mut plan.actions, &observed.pods)
        .await;

    // Execute.
    let probe_patches = shared.refused_writes.any(&key);
    let (events, executed) =
        execute::execute_plan(&shared, &cs, &key, observed.pods, &plan, probe_patches).await;
    recorder.record_all(events);

    // Status, after the writes (OpenKruise also writes it when scaling failed).
    let mut status = plan.status.clone();
    match &executed {
        Err(e) if e.is_invalid_pod_write() => {
            let (condition, reason) = match e {
                Error::Shell(ShellError::CreatePod(_)) => {
                    (condition::FAILED_SCALE, REASON_FAILED_CREATE)
                }
                _ => (condition::FAILED_UPDATE, REASON_FAILED_UPDATE_IN_PLACE),
            };
            let wait = shared
                .refused_writes
                .record(&key, generation, condition, now);
            let message = format!(
                "{e}; pod writes of this CloneSet retry in {}s or when its spec changes",
                wait.as_secs()
            );
            set_condition(&mut status, condition, reason, &message, now);
            recorder.record(EventRecord::warning(reason, message));
            write_namespaced_status(&shared.client, &*original, &status).await?;
            return Ok(Requeue::requeue(wait));
        }
        Ok(()) => {
            if let Some(condition) = shared.refused_writes.clear(&key) {
                status.conditions.retain(|c| {
                    c.type_ != condition
                        || (c.reason != REASON_FAILED_CREATE
                            && c.reason != REASON_FAILED_UPDATE_IN_PLACE)
                });
            }
        }
        Err(_) => {}
    }
    write_namespaced_status(&shared.client, &*original, &status).await?;
    executed?;
    if held {
        let after = plan
            .requeue_after
            .map_or(HELD_REQUEUE, |d| d.min(HELD_REQUEUE));
        return Ok(Requeue::requeue(after));
    }
    match observed.satisfaction {
        Satisfaction::Pending { remaining, .. } => Ok(Requeue::requeue(
            remaining.unsigned_abs().min(Duration::from_secs(1)),
        )),
        _ => Ok(match plan.requeue_after {
            Some(d) => Requeue::requeue(d),
            None => Requeue::await_change(),
        }),
    }
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
    kruise_core::api::condition::upsert(
        &mut status.conditions,
        fresh,
        |c| c.type_ == type_,
        |c| c.status == "True" && c.reason == reason && c.message == message,
    );
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
    fn gates_follow_the_feature_gates() {
        let gates = FeatureGates::parse("CloneSetShortHash=true").unwrap_or_else(|e| panic!("{e}"));
        let g = plan_gates(&gates);
        assert!(g.short_hash);
        assert!(!g.partition_rollback);
    }
}
