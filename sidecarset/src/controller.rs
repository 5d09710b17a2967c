//! The SidecarSet controller shell. A reconcile reads top to bottom as named steps:
//! **observe** (the caches) -> **validate** -> **revision** (register the ControllerRevision
//! of the current spec) -> **plan** ([`crate::plan::plan`], time an input) -> **execute**
//! (the shared executor) -> **status**. Decisions are the pure modules'; this module
//! observes, executes and records.
//!
//! * **Cache only what it manages.** Every pod event is read, but only pods carrying
//!   `kruise.io/sidecarset-injected-list` are stored, and a pod wakes exactly the
//!   SidecarSets that list names. Namespaces (for `namespaceSelector`) and the SidecarSet
//!   revisions (label `kruise.io/sidecarset-name`, in the kruise namespace: `POD_NAMESPACE`,
//!   else `kruise-system`) are cached too.
//! * **Warm caches on every replica.** The watches start on every replica; only the leader
//!   reconciles and writes, and one that takes over does not list again.
//! * **One write per upgraded pod**, a strategic-merge patch of the changed images and
//!   annotations carrying the resourceVersion it was planned from, so two SidecarSets
//!   upgrading one pod never overwrite each other's hash entry; the `SidecarSetUpgradable`
//!   condition is patched only when it changes. Pods are written one at a time.
//! * **Never act on a stale pod.** After a write the pod is not planned again until the cache
//!   shows that write (resourceVersion expectations, expiring after a timeout).
//! * **Invalid objects** (the validating webhook was bypassed) are not acted on: a Warning
//!   `InvalidSpec` event says why. One that does not decode at all is skipped by the watch's
//!   deserialize guard with a Warning `FailedDecode` event; the others keep reconciling.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kruise_core::expectations::{ResourceVersionExpectations, SharedExpectations};
use kruise_core::inplace::pod_patch;
use kruise_runtime::errors::{ShellError, WriteError};
use kruise_runtime::events::{EventQueue, EventRecord, Recorder};
use kruise_runtime::execute::{Outcomes, execute};
use kruise_runtime::status::write_status_if_changed;
use kruise_runtime::watch::Watch;
use kruise_runtime::{ReconcileError, RunOptions, run_controller, warm_until_leading};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource as _, ResourceExt as _};
use serde_json::{Value, json};

use crate::api::v1beta1::{SidecarSet, SidecarSetStatus};
use crate::api::{SIDECARSET_INJECTED_LIST_ANNOTATION, SIDECARSET_NAME_LABEL, defaults};
use crate::inject::pod_matches_sidecar_set;
use crate::plan::upgrade::{SetHashes, is_managed};
use crate::plan::{Action, PlanInput, plan};

mod revision;

use revision::{Latest, register_latest};

/// Controller name (metrics, spans, readiness check `controller/sidecarset`).
pub const CONTROLLER_NAME: &str = "sidecarset";
/// The event reporter, as OpenKruise's recorder names it.
pub const EVENT_REPORTER: &str = "sidecarset-controller";
/// Warning event reason for an invalid SidecarSet.
pub const REASON_INVALID_SPEC: &str = "InvalidSpec";
/// Pod writes in flight at once: one, in plan order.
const WRITE_CONCURRENCY: usize = 1;
/// When the upgrade looks again after an admission webhook refused a pod write: a
/// PodUnavailableBudget (the PUB step's UPDATE check) refuses until the budget frees up,
/// which no object this controller watches signals, so the error backoff, growing to
/// minutes, would leave the upgrade stalled long after. OpenKruise's CloneSet looks again
/// in a second after a budget refusal.
const REFUSED_REQUEUE: Duration = Duration::from_secs(1);

/// Which step of a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A step every workload controller shares: expectations, revisions, pod patches, status.
    #[error(transparent)]
    Shell(#[from] ShellError),
    /// Plan: building hashes, revisions, the plan or a pod write.
    #[error("sidecarset {name}: {reason}")]
    Compute {
        /// SidecarSet (or pod) name.
        name: String,
        /// What failed.
        reason: String,
    },
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::Shell(e) => e.category(),
            Error::Compute { .. } => "compute",
        }
    }
    fn is_conflict(&self) -> bool {
        matches!(self, Error::Shell(e) if e.is_conflict())
    }
}

/// Settings of one controller instance.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Where SidecarSet ControllerRevisions live (OpenKruise: the kruise namespace,
    /// [`Settings::in_namespace`]).
    pub revision_namespace: String,
    /// How long a pod write may stay unseen in the cache before the pod is trusted again.
    pub expectation_timeout: jiff::SignedDuration,
}

/// The variable naming the namespace the binary runs in (the downward API's
/// `metadata.namespace` in OpenKruise's and our charts).
pub const POD_NAMESPACE_ENV: &str = "POD_NAMESPACE";
/// The kruise namespace when `POD_NAMESPACE` is unset or empty (OpenKruise's default).
pub const DEFAULT_KRUISE_NAMESPACE: &str = "kruise-system";

impl Default for Settings {
    fn default() -> Self {
        Self::in_namespace(None)
    }
}

impl Settings {
    /// Settings of a binary running in `pod_namespace` (the value of `POD_NAMESPACE`):
    /// revisions live there, in `kruise-system` when it is unset or empty, as OpenKruise's
    /// `GetKruiseNamespace` decides — whatever namespace the webhook flags name.
    pub fn in_namespace(pod_namespace: Option<&str>) -> Self {
        let namespace = pod_namespace
            .filter(|ns| !ns.is_empty())
            .unwrap_or(DEFAULT_KRUISE_NAMESPACE);
        Self {
            revision_namespace: namespace.to_string(),
            expectation_timeout: kruise_core::expectations::DEFAULT_EXPECTATION_TIMEOUT,
        }
    }
}

struct Shared {
    client: Client,
    pods: Store<Pod>,
    namespaces: Store<Namespace>,
    revisions: Store<ControllerRevision>,
    pod_versions: SharedExpectations<ResourceVersionExpectations>,
    recorder: EventQueue,
    settings: Settings,
}

/// Whether a SidecarSet injected the pod: the cache keeps no other pods.
fn injected(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(SIDECARSET_INJECTED_LIST_ANNOTATION))
}

/// Runs the SidecarSet controller until `opts.shutdown` fires: its watches at once, its
/// reconciles once `opts.leadership` says this replica leads.
pub async fn run(client: Client, settings: Settings, opts: RunOptions) {
    let recorder = EventQueue::for_controller(client.clone(), EVENT_REPORTER, &opts.metrics);
    let (sets, mut set_stream) =
        Watch::<SidecarSet>::primary(client.clone(), None, &opts, &recorder).reflect();
    let (pods, mut pod_stream) = Watch::<Pod>::new(client.clone(), None)
        .keep_only(injected)
        .reflect();
    let (namespaces, mut ns_stream) = Watch::<Namespace>::new(client.clone(), None).reflect();
    let (revisions, mut rev_stream) =
        Watch::<ControllerRevision>::new(client.clone(), Some(&settings.revision_namespace))
            .labels(SIDECARSET_NAME_LABEL)
            .reflect();
    if !warm_until_leading(
        &opts,
        &mut [
            &mut set_stream,
            &mut pod_stream,
            &mut ns_stream,
            &mut rev_stream,
        ],
    )
    .await
    {
        return;
    }
    let shared = Arc::new(Shared {
        recorder,
        pod_versions: SharedExpectations::new(ResourceVersionExpectations::new(
            settings.expectation_timeout,
        )),
        client,
        pods,
        namespaces,
        revisions,
        settings,
    });
    let controller = Controller::for_stream(set_stream, sets)
        .reconcile_all_on(futures::stream::once(async {}))
        .watches_stream(pod_stream, |pod: Pod| {
            crate::plan::upgrade::injected_sets(&pod)
                .into_iter()
                .map(|name| ObjectRef::new(&name))
                .collect::<Vec<_>>()
        })
        .watches_stream(rev_stream, |rev: ControllerRevision| {
            rev.labels()
                .get(SIDECARSET_NAME_LABEL)
                .map(|name| ObjectRef::new(name))
        })
        // Namespaces only feed their store; a label change reaches pods through their own events.
        .watches_stream(ns_stream, |_: Namespace| None::<ObjectRef<SidecarSet>>);
    run_controller(controller, reconcile, shared, opts).await;
}

fn compute_error(set: &SidecarSet, reason: impl std::fmt::Display) -> Error {
    Error::Compute {
        name: set.name_any(),
        reason: reason.to_string(),
    }
}

/// Observe: the pods the SidecarSet manages (in its namespaces, selected, injected by it),
/// sorted by namespace and name.
fn managed_pods(shared: &Shared, set: &SidecarSet) -> Vec<Pod> {
    let mut pods: Vec<Pod> = shared
        .pods
        .state()
        .iter()
        .filter(|pod| is_managed(pod, set))
        .filter(|pod| {
            let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
            let ns_labels = shared
                .namespaces
                .get(&ObjectRef::new(namespace))
                .map(|ns| ns.metadata.labels.clone().unwrap_or_default());
            let labels = pod.metadata.labels.clone().unwrap_or_default();
            pod_matches_sidecar_set(&labels, namespace, ns_labels.as_ref(), set).unwrap_or(false)
        })
        .map(|p| (**p).clone())
        .collect();
    pods.sort_by(|a, b| {
        (a.metadata.namespace.as_deref(), a.metadata.name.as_deref())
            .cmp(&(b.metadata.namespace.as_deref(), b.metadata.name.as_deref()))
    });
    pods
}

/// One reconcile of a SidecarSet.
async fn reconcile(original: Arc<SidecarSet>, shared: Arc<Shared>) -> Result<Requeue, Error> {
    // Observe.
    if shared.pods.wait_until_ready().await.is_err()
        || shared.namespaces.wait_until_ready().await.is_err()
        || shared.revisions.wait_until_ready().await.is_err()
    {
        return Ok(Requeue::requeue(Duration::from_secs(1)));
    }
    if original.metadata.deletion_timestamp.is_some() {
        return Ok(Requeue::await_change());
    }
    // The one clock read: everything below takes time as an input.
    let now = Timestamp::now();
    let recorder = Recorder::new(&shared.recorder, original.object_ref(&()));
    let mut set = (*original).clone();
    // The defaulting webhook normally did this; it is idempotent.
    defaults::default_v1beta1(&mut set).map_err(|e| compute_error(&set, e))?;

    // Validate, as the webhook would; other SidecarSets' conflicts are the webhook's to
    // judge at admission.
    let errors = crate::api::validation::validate_sidecar_set(&set, None, &[]);
    if !errors.is_empty() {
        let message = crate::api::validation::aggregate(&errors);
        recorder.record(EventRecord::warning(REASON_INVALID_SPEC, message));
        return Ok(Requeue::await_change());
    }
    let hashes = SetHashes::of(&set).map_err(|e| compute_error(&set, e))?;
    let pods = managed_pods(&shared, &set);
    let writes_observed = shared
        .pod_versions
        .with(|v| v.all_observed(&pods, now))
        .map_err(ShellError::from)?;

    // Revision.
    let (latest_revision, collision_count) = match register_latest(&shared, &set).await? {
        Latest::Registered { name, collisions } => (name, collisions),
        Latest::Collision(collision_count) => {
            let mut status = original.status.clone().unwrap_or_default();
            status.collision_count = Some(collision_count);
            write_status(&shared, &original, &status).await?;
            return Ok(Requeue::requeue(Duration::from_millis(100)));
        }
    };

    // Plan.
    let plan = plan(&PlanInput {
        set: &set,
        hashes: &hashes,
        pods: &pods,
        latest_revision: &latest_revision,
        collision_count,
        writes_observed,
        now,
    })
    .map_err(|e| compute_error(&set, e))?;
    recorder.record_all(plan.events.iter().cloned());

    // Execute.
    let outcomes = execute(&plan.actions, WRITE_CONCURRENCY, |action| {
        perform(&shared, &pods, action)
    })
    .await;
    let executed = record_outcomes(&shared, &set, &pods, outcomes);

    // Status (also when a write failed).
    write_status(&shared, &original, &plan.status).await?;
    if let Err(e) = &executed
        && refused_by_admission(e)
    {
        tracing::info!(sidecarset = %set.name_any(), error = %e, "a pod upgrade was refused; looking again in a second");
        return Ok(Requeue::requeue(REFUSED_REQUEUE));
    }
    executed?;
    Ok(match plan.requeue_after {
        Some(d) => Requeue::requeue(d),
        None => Requeue::await_change(),
    })
}

/// The reset events (about each pod) and the first error; logs the upgraded pods.
fn record_outcomes(
    shared: &Shared,
    set: &SidecarSet,
    pods: &[Pod],
    outcomes: Outcomes<'_, Action, Error>,
) -> Result<(), Error> {
    let mut first_error = None;
    let mut upgraded = Vec::new();
    for (action, result) in outcomes {
        match (action, &result) {
            (Action::ResetHotUpgrade { pod, .. }, Ok(())) => {
                Recorder::new(&shared.recorder, pods[*pod].object_ref(&())).record(
                    EventRecord::normal(
                        "ResetContainerSucceed",
                        "reset sidecar container image empty successfully",
                    ),
                );
            }
            (Action::ResetHotUpgrade { pod, .. }, Err(e)) => {
                Recorder::new(&shared.recorder, pods[*pod].object_ref(&())).record(
                    EventRecord::warning(
                        "ResetContainerFailed",
                        format!("reset sidecar container image empty failed: {e}"),
                    ),
                );
            }
            (Action::Upgrade { key, .. }, Ok(())) => upgraded.push(key.as_str()),
            _ => {}
        }
        if let Err(e) = result {
            first_error.get_or_insert(e);
        }
    }
    if !upgraded.is_empty() {
        tracing::info!(sidecarset = %set.name_any(), pods = %upgraded.join(","), "upgraded sidecars in place");
    }
    first_error.map_or(Ok(()), Err)
}

/// Execute one action.
async fn perform(shared: &Shared, pods: &[Pod], action: &Action) -> Result<(), Error> {
    match action {
        Action::ResetHotUpgrade { pod, to, .. } | Action::Upgrade { pod, to, .. } => {
            write_pod(shared, &pods[*pod], to).await
        }
        Action::SetUpgradable { pod, condition, .. } => {
            let pod = &pods[*pod];
            let encoded = serde_json::to_value(condition).map_err(|e| Error::Compute {
                name: pod_key(pod),
                reason: format!("encoding the SidecarSetUpgradable condition: {e}"),
            })?;
            let namespace = pod.metadata.namespace.clone().unwrap_or_default();
            let api: Api<Pod> = Api::namespaced(shared.client.clone(), &namespace);
            let body = json!({"status": {"conditions": [encoded]}});
            api.patch_status(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(body),
            )
            .await
            .map_err(|source| {
                ShellError::UpdatePod(WriteError {
                    name: pod_key(pod),
                    source,
                })
            })?;
            Ok(())
        }
    }
}

/// Whether a pod write was refused by an admission webhook (kube-apiserver's 403 `admission
/// webhook "…" denied the request: …`), as the PUB step refuses an update the budget has no
/// room for.
fn refused_by_admission(e: &Error) -> bool {
    match e {
        Error::Shell(ShellError::UpdatePod(WriteError {
            source: kube::Error::Api(status),
            ..
        })) => status.code == 403 && status.message.contains("denied the request"),
        _ => false,
    }
}

fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.name_any()
    )
}

/// Patches the pod from `old` to `new`, preconditioned on the resourceVersion planned from.
async fn write_pod(shared: &Shared, old: &Pod, new: &Pod) -> Result<(), Error> {
    let Some(mut patch) = pod_patch(old, new) else {
        return Ok(());
    };
    if let Some(rv) = old.resource_version() {
        patch["metadata"]["resourceVersion"] = Value::String(rv);
    }
    let namespace = old.metadata.namespace.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(shared.client.clone(), &namespace);
    let written = api
        .patch(
            &old.name_any(),
            &PatchParams::default(),
            &Patch::Strategic(patch),
        )
        .await
        .map_err(|source| {
            ShellError::UpdatePod(WriteError {
                name: pod_key(old),
                source,
            })
        })?;
    if let (Some(uid), Some(rv)) = (written.uid(), written.resource_version()) {
        // A poisoned lock only loses this record: the next reconcile stops on the lock.
        let _ = shared.pod_versions.with(|v| v.expect(&uid, &rv));
    }
    Ok(())
}

/// Writes the status when it differs from the cached one (OpenKruise's `inconsistentStatus`).
async fn write_status(
    shared: &Shared,
    set: &SidecarSet,
    status: &SidecarSetStatus,
) -> Result<(), Error> {
    let api: Api<SidecarSet> = Api::all(shared.client.clone());
    write_status_if_changed(&api, set, status).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Settings;

    #[test]
    fn revisions_live_in_the_pod_namespace_else_kruise_system() {
        for (pod_namespace, expected) in [
            (None, "kruise-system"),
            (Some(""), "kruise-system"),
            (Some("kruise"), "kruise"),
        ] {
            assert_eq!(
                Settings::in_namespace(pod_namespace).revision_namespace,
                expected,
                "{pod_namespace:?}"
            );
        }
    }
}
