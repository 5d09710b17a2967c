//! The Advanced DaemonSet controller shell (see [`crate::plan`] for every decision):
//! **observe** (the caches, the expectations) -> **validate** -> **revisions** -> **plan** ->
//! **execute** -> **status** -> **history**.
//!
//! * **Cache only what it reads.** Pods through the `controller-revision-hash` label every
//!   daemon pod carries, decoded straight into the compact `CachedPod`
//!   (`kruise_core::pods::cached`); nodes decoded straight into [`CachedNode`] (name,
//!   labels, taints), and a node change wakes the DaemonSets only when its labels or taints
//!   changed (or the node came or went), not on every status heartbeat.
//! * **No double creates.** A scale expectation per pod created is recorded by the name the
//!   API gave it and satisfied once that pod is in the cache (by name, not node: with surge
//!   the node already has its old pod); a deletion, once the pod is gone or terminating.
//!   While one is pending the planner does nothing.
//! * **No budget spent on a stale view.** An old pod the cache shows unavailable is replaced
//!   outside maxUnavailable and maxSurge (as upstream does); it is read from the API first,
//!   and one that is available after all keeps its replacement back until the cache agrees.
//! * **Slow start.** Creations go out in batches of 1, 2, 4, … and stop at the first failure.
//! * **Failed pods back off per node**, 1 s doubling to 15 min.
//! * **preDelete hook.** The plan marks a pod its hook holds `PreparingDelete` instead of
//!   deleting it; the shell sends what the plan says, also when an in-place update falls
//!   back to recreating the pod.
//! * **In place** (`InPlaceIfPossible`): the diff of the pod's revision and the update
//!   revision decides; an update sent is waited for in the cache before the next plan.
//!   What the kubelet has done is finished (`InPlaceUpdateReady=True`) as its pod event
//!   arrives, and by every pass; each pod is claimed while written and decided on only
//!   from a cached copy that shows our last write to it, so each write goes out once.
//! * **Revisions before pods.** The update revision is written before any pod carries its
//!   hash; history is pruned only after a pass whose writes all succeeded.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kruise_core::api::keys::CONTROLLER_REVISION_HASH_KEY;
use kruise_core::api::lifecycle::LifecycleState;
use kruise_core::expectations::{
    ResourceVersionExpectations, Satisfaction, ScaleExpectations, SharedExpectations,
};
use kruise_core::inplace::{
    CompletionCheck, InPlaceGates, RefreshAction, UpdateRequest, begin_update, refresh,
};
use kruise_core::pods::lifecycle::state_patch;
use kruise_core::pods::{CachedPod, LabelsAndFinalizers as _, PodView};
use kruise_core::revision::template_hash;
use kruise_runtime::errors::{ShellError, WriteError};
use kruise_runtime::events::{EventQueue, EventRecord, Recorder, pod_reference};
use kruise_runtime::execute::{Lane, Scheduled, WRITE_CONCURRENCY, execute};
use kruise_runtime::predownload::PreDownload;
use kruise_runtime::revisions::{RevisionStep, delete_revision, write_revisions};
use kruise_runtime::scale_writes::ScaleWrites;
use kruise_runtime::status::{write_collision_count, write_namespaced_status};
use kruise_runtime::watch::{TouchedStream, Watch};
use kruise_runtime::writes::{Writer, Written};
use kruise_runtime::{RunOptions, run_controller, warm_until_leading};
use kube::api::Api;
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt as _};

use crate::api::defaults::default_spec;
use crate::api::v1beta1::DaemonSet;
use crate::api::validation::validate;
use crate::api::{KIND, Served};
use crate::nodes::CachedNode;
use crate::plan::in_place::InPlaceTarget;
use crate::plan::pods::{Placement, new_pod, plan_node, plan_pod, plan_strategy};
use crate::plan::revisions::{plan_revisions, revision_hash, revisions_to_prune};
use crate::plan::{Action, PlanInput, PlanStrategy, Removal, plan};

mod error;
mod execute;
mod in_place;

pub use error::Error;

use execute::confirm_uncounted;

use in_place::{
    Decided, claim_and_decide, in_place_pending, in_place_update, refresh_in_place, send_refresh,
};

/// The controller's name (metrics, readiness `controller/daemonset`).
pub const CONTROLLER_NAME: &str = "daemonset";
/// The event reporter, as OpenKruise names it.
pub const EVENT_REPORTER: &str = "daemonset-controller";
/// Pod events queued for the event-driven in-place refresh at most.
const REFRESH_QUEUE: usize = 4096;
/// How soon a DaemonSet whose expectations are pending is looked at again.
const EXPECTATIONS_REQUEUE: Duration = Duration::from_millis(500);
/// The first and the longest wait before a node's failed pod is replaced again.
const BACKOFF_START: i64 = 1;
const BACKOFF_MAX: i64 = 15 * 60;

/// Event reasons (OpenKruise's).
pub mod reason {
    /// The selector is empty: the DaemonSet selects every pod and does nothing.
    pub const SELECTING_ALL: &str = "SelectingAll";
    /// A failed daemon pod is deleted.
    pub const FAILED_DAEMON_POD: &str = "FailedDaemonPod";
    /// A pod was deleted.
    pub const SUCCESSFUL_DELETE: &str = "SuccessfulDelete";
    /// A pod was updated in place.
    pub const SUCCESSFUL_UPDATE_POD_IN_PLACE: &str = "SuccessfulUpdatePodInPlace";
    /// An in-place update of a pod failed.
    pub const FAILED_UPDATE_POD_IN_PLACE: &str = "FailedUpdatePodInPlace";
    /// The object fails validation.
    pub const INVALID_SPEC: &str = "InvalidSpec";
}

/// The controller's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Watch only this namespace (all when `None`).
    pub namespace: Option<String>,
    /// How new pods reach their node.
    pub placement: Placement,
    /// How long a scale expectation may stay unsatisfied before the planner acts anyway.
    pub expectation_timeout: jiff::SignedDuration,
    /// Gate `DaemonSetPruneIneligibleNodes` (see [`crate::plan::PlanStrategy`]).
    pub prune_ineligible_nodes: bool,
    /// Gate `PreDownloadImageForDaemonSetUpdate`: ImagePullJobs for a rollout's new images.
    pub pre_download: bool,
    /// The in-place update gates (`InPlaceWorkloadVerticalScaling`: resources resized in
    /// place).
    pub in_place_gates: InPlaceGates,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            namespace: None,
            placement: Placement::Scheduler,
            expectation_timeout: kruise_core::expectations::DEFAULT_EXPECTATION_TIMEOUT,
            prune_ineligible_nodes: false,
            pre_download: false,
            in_place_gates: InPlaceGates::default(),
        }
    }
}

/// Per DaemonSet and node: (replace the failed pod not before, the next wait).
type Backoff = HashMap<(String, String), (i64, i64)>;

struct Shared {
    client: Client,
    pods: Store<CachedPod>,
    nodes: Store<CachedNode>,
    revisions: Store<ControllerRevision>,
    expectations: SharedExpectations<ScaleExpectations>,
    backoff: Mutex<Backoff>,
    /// In-place updates sent and not yet in the cache, per DaemonSet: pod name -> hash.
    in_flight: Mutex<HashMap<String, HashMap<String, String>>>,
    /// Per pod uid, the resourceVersion our last in-place write to it returned: the
    /// refresh leaves a pod alone until its cached copy shows that version.
    pod_versions: SharedExpectations<ResourceVersionExpectations>,
    /// Pod uids an in-place write is under way for (an update, or a refresh from a pass or
    /// from a pod event): no one else decides on them meanwhile.
    writing: Mutex<HashSet<String>>,
    recorder: EventQueue,
    pre_download: PreDownload,
    settings: Settings,
}

/// Runs the DaemonSet controller until `opts.shutdown` fires.
pub async fn run(client: Client, settings: Settings, opts: RunOptions) {
    let ns = settings.namespace.as_deref();
    let recorder = EventQueue::for_controller(client.clone(), EVENT_REPORTER, &opts.metrics);
    let (sets, mut set_stream) =
        Watch::<DaemonSet>::primary(client.clone(), ns, &opts, &recorder).reflect();
    let (pods, mut pod_stream) = Watch::<CachedPod>::new(client.clone(), ns)
        .labels(CONTROLLER_REVISION_HASH_KEY)
        .untrimmed()
        .reflect();
    let (nodes, mut node_stream) = Watch::<CachedNode>::new(client.clone(), None)
        .untrimmed()
        .reflect();
    let (revisions, mut revision_stream) = Watch::<ControllerRevision>::new(client.clone(), ns)
        .keep_only(owned_by_daemonset)
        .reflect();
    if !warm_until_leading(
        &opts,
        &mut [
            &mut set_stream,
            &mut pod_stream,
            &mut node_stream,
            &mut revision_stream,
        ],
    )
    .await
    {
        return;
    }
    let shared = Arc::new(Shared {
        client,
        pods,
        nodes,
        revisions,
        expectations: SharedExpectations::new(ScaleExpectations::new(settings.expectation_timeout)),
        backoff: Mutex::default(),
        in_flight: Mutex::default(),
        pod_versions: SharedExpectations::new(ResourceVersionExpectations::new(
            settings.expectation_timeout,
        )),
        writing: Mutex::default(),
        recorder,
        pre_download: PreDownload::new(settings.pre_download),
        settings,
    });
    let node_changes = only_eligibility_changes(node_stream, shared.nodes.clone());
    // Pod events also go straight to the in-place refresh (bounded: what does not fit is
    // left to the DaemonSet's next pass, which every pod event triggers anyway); a refresh
    // write that fails there wakes the DaemonSet, whose pass retries it.
    let (mut refresh_tx, refresh_rx) = futures::channel::mpsc::channel(REFRESH_QUEUE);
    let (retry_tx, retry_rx) = futures::channel::mpsc::unbounded();
    let pod_stream = pod_stream
        .inspect(move |event| {
            if let Ok(pod) = event
                && daemonset_of(pod).is_some()
            {
                let _ = refresh_tx.try_send(ObjectRef::from(pod));
            }
        })
        .boxed();
    let refresher = refresh_on_pod_events(shared.clone(), refresh_rx, retry_tx);
    let all_sets = sets.clone();
    let controller = Controller::for_stream(set_stream, sets)
        .reconcile_all_on(futures::stream::once(async {}))
        .reconcile_on(retry_rx)
        .owns_stream(pod_stream)
        .owns_stream(revision_stream)
        .watches_stream(node_changes, move |_: CachedNode| {
            all_sets
                .state()
                .iter()
                .map(|ds| ObjectRef::from(ds.as_ref()))
                .collect::<Vec<_>>()
        });
    let controller = std::pin::pin!(run_controller(controller, reconcile, shared, opts));
    // The refresher ends once the pod stream (its sender) is gone with the controller.
    if let futures::future::Either::Right(((), controller)) =
        futures::future::select(controller, std::pin::pin!(refresher)).await
    {
        controller.await;
    }
}

/// The Advanced DaemonSet controlling `pod`, if any.
fn daemonset_of(pod: &CachedPod) -> Option<ObjectRef<DaemonSet>> {
    let owner = kruise_core::pods::controller_ref(PodView::meta(pod))?;
    (owner.kind == KIND && kruise_core::pods::api_group(&owner.api_version) == crate::api::GROUP)
        .then(|| ObjectRef::new(&owner.name).within(PodView::namespace(pod)))
}

/// Refreshes the pod of each event as the event arrives, [`WRITE_CONCURRENCY`] at a time
/// (`InPlaceUpdateReady=True` as soon as the kubelet has restarted the containers, as
/// the benchmark's minimal writer does, instead of after the pass under way, which at
/// maxUnavailable 100% is sending every other pod's update). The DaemonSet's pass
/// refreshes too; [`claim`] keeps the two from writing the same pod twice.
async fn refresh_on_pod_events(
    shared: Arc<Shared>,
    events: futures::channel::mpsc::Receiver<ObjectRef<CachedPod>>,
    retry: futures::channel::mpsc::UnboundedSender<ObjectRef<DaemonSet>>,
) {
    events
        .for_each_concurrent(WRITE_CONCURRENCY, |pod_ref| {
            let (shared, retry) = (shared.clone(), retry.clone());
            async move {
                let Some(pod) = shared.pods.get(&pod_ref) else {
                    return;
                };
                let pods_writer =
                    Writer::<Pod>::namespaced(shared.client.clone(), PodView::namespace(&*pod));
                let failed = match claim_and_decide(&shared, &pod, Timestamp::now()) {
                    Ok(Decided::Write(write)) => {
                        send_refresh(&pods_writer, &shared, write).await.1.is_err()
                    }
                    Ok(Decided::Skip | Decided::Wait(_)) => false,
                    Err(_) => true,
                };
                if failed && let Some(set) = daemonset_of(&pod) {
                    let _ = retry.unbounded_send(set);
                }
            }
        })
        .await;
}

/// Revisions an Advanced DaemonSet controls (the only ones cached).
fn owned_by_daemonset(rev: &ControllerRevision) -> bool {
    rev.owner_references().iter().any(|o| {
        o.controller == Some(true)
            && o.kind == KIND
            && kruise_core::pods::api_group(&o.api_version) == crate::api::GROUP
    })
}

/// The node events whose labels or taints changed, every first sight of a node, and every
/// deletion (the reflector has dropped the node from `store` by the time its event passes).
fn only_eligibility_changes(
    nodes: TouchedStream<CachedNode>,
    store: Store<CachedNode>,
) -> TouchedStream<CachedNode> {
    let seen: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    nodes
        .filter(move |event| {
            let pass = match event {
                Ok(node) => {
                    let name = node.name();
                    let gone = store.get(&ObjectRef::new(name)).is_none();
                    match seen.lock() {
                        Ok(mut seen) if gone => seen.remove(name).is_some(),
                        Ok(mut seen) => {
                            let print = node.fingerprint();
                            seen.insert(name.to_string(), print) != Some(print)
                        }
                        Err(_) => true,
                    }
                }
                Err(_) => true,
            };
            std::future::ready(pass)
        })
        .boxed()
}

/// Marks pending creates (by node) and deletes (by pod name) the cache now shows as done.
fn observe_expectations(
    shared: &Shared,
    key: &str,
    pods: &[Arc<CachedPod>],
    now: Timestamp,
) -> Result<Satisfaction, Error> {
    Ok(shared
        .expectations
        .with(|exp| {
            exp.settle(key, now, |action, name| {
                action.seen_in(pods.iter().find(|p| p.name() == name).map(|p| p.meta()))
            })
        })
        .map_err(ShellError::from)?)
}

async fn reconcile(original: Arc<DaemonSet>, shared: Arc<Shared>) -> Result<Requeue, Error> {
    let now = Timestamp::now();
    let namespace = original.namespace().unwrap_or_default();
    let name = original.name_any();
    let key = format!("{namespace}/{name}");
    let recorder = Recorder::about(&shared.recorder, &*original);

    // Validate (the webhook normally did; defaulting again is idempotent).
    let mut ds = (*original).clone();
    default_spec(&mut ds.spec, Served::V1beta1);
    let errors = validate(&ds, None, Served::V1beta1);
    if !errors.is_empty() {
        let selecting_all = errors.iter().any(|e| e.field.as_str() == "spec.selector");
        recorder.record(if selecting_all {
            EventRecord::warning(
                reason::SELECTING_ALL,
                "This daemon set is selecting all pods. A non-empty selector is required.",
            )
        } else {
            EventRecord::warning(
                reason::INVALID_SPEC,
                kruise_compat::field::aggregate(&errors),
            )
        });
        return Ok(Requeue::await_change());
    }

    // Observe. Every cache first holds what the cluster held at start: a pass that saw no
    // revision yet would write its own and replace the pods carrying another's hash (a
    // DaemonSet taken over from OpenKruise).
    if shared.pods.wait_until_ready().await.is_err()
        || shared.nodes.wait_until_ready().await.is_err()
        || shared.revisions.wait_until_ready().await.is_err()
    {
        return Ok(Requeue::requeue(EXPECTATIONS_REQUEUE));
    }
    let uid = ds.uid().unwrap_or_default();
    let pods: Vec<Arc<CachedPod>> = shared
        .pods
        .state()
        .into_iter()
        .filter(|p| {
            p.namespace() == namespace.as_str()
                && kruise_core::pods::is_controlled_by(p.meta(), &uid)
        })
        .collect();
    match observe_expectations(&shared, &key, &pods, now)? {
        Satisfaction::Pending { .. } => return Ok(Requeue::requeue(EXPECTATIONS_REQUEUE)),
        Satisfaction::Expired { .. } => {
            shared
                .expectations
                .with(|e| e.delete(&key))
                .map_err(ShellError::from)?;
        }
        Satisfaction::Satisfied => {}
    }
    let template = serde_json::to_value(&ds.spec.template).unwrap_or_default();
    let collision_count = original.status.as_ref().and_then(|s| s.collision_count);
    let template_hash = template_hash(&template, collision_count);

    // Revisions: the update revision exists before any pod carries its hash.
    let history: Vec<ControllerRevision> = shared
        .revisions
        .state()
        .into_iter()
        .filter(|r| r.metadata.namespace.as_deref() == Some(namespace.as_str()))
        .filter(|r| kruise_core::pods::is_controlled_by(&r.metadata, &uid))
        .map(|r| (*r).clone())
        .collect();
    let planned = plan_revisions(&ds, &template_hash, &history);
    let update_data: Option<serde_json::Value>;
    let hash: String;
    let collisions = collision_count.unwrap_or(0);
    let (history, update_name) =
        match write_revisions(&shared.client, &namespace, planned, collisions, history).await? {
            RevisionStep::Ready(active) => {
                update_data = active.update.data.as_ref().map(|d| d.0.clone());
                // An existing revision with this template's data (one OpenKruise named after
                // its own hash, say) is the update revision, and its hash the one pods carry.
                hash = revision_hash(&active.update).unwrap_or(template_hash);
                (active.all, active.update.name_any())
            }
            RevisionStep::Collision(count) => {
                // The next pass hashes with the new count, which renames the revision.
                write_collision_count(&shared.client, &*original, count, |s| {
                    &mut s.collision_count
                })
                .await?;
                return Ok(Requeue::requeue(EXPECTATIONS_REQUEUE));
            }
        };

    // Pre-download: the new images' ImagePullJobs go out before pods update.
    if shared.pre_download.enabled()
        && let Some(update) = history.iter().find(|r| r.name_any() == update_name)
    {
        let olds: Vec<&ControllerRevision> = history
            .iter()
            .filter(|r| r.name_any() != update_name)
            .collect();
        let decision = crate::predownload::plan(&ds, &olds, update, &hash);
        let owner = crate::predownload::job_owner(&ds, &namespace, &uid);
        (shared.pre_download)
            .step(&shared.client, &owner, update, decision, &recorder)
            .await;
    }

    // In place: wait for the cache to show the updates already sent, then finish the ones
    // the kubelet has carried out (InPlaceUpdateReady=True).
    if in_place_pending(&shared, &key, &pods) {
        return Ok(Requeue::requeue(EXPECTATIONS_REQUEUE));
    }
    let pods_writer = Writer::<Pod>::namespaced(shared.client.clone(), &namespace);
    let refresh_after = refresh_in_place(&pods_writer, &shared, &pods, now).await?;
    let target = InPlaceTarget {
        enabled: plan_strategy(&ds.spec).in_place,
        hash: &hash,
        data: update_data.as_ref(),
        history: &history,
        gates: shared.settings.in_place_gates,
    };
    let in_place_request =
        |pod: &CachedPod| target.request(pod.label(CONTROLLER_REVISION_HASH_KEY));
    // Whether a pod can be updated in place depends on its revision only: one diff each.
    let mut possible_by_hash: HashMap<&str, bool> = HashMap::new();
    for pod in &pods {
        if let Some(pod_hash) = pod.label(CONTROLLER_REVISION_HASH_KEY) {
            possible_by_hash
                .entry(pod_hash)
                .or_insert_with(|| target.possible(Some(pod_hash)));
        }
    }
    let mut nodes: Vec<_> = shared
        .nodes
        .state()
        .iter()
        .map(|n| plan_node(&ds.spec, &n.view()))
        .collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let secs = now.as_second();
    let backoff_until = match shared.backoff.lock() {
        Ok(b) => b
            .iter()
            .filter(|((set, _), _)| *set == key)
            .map(|((_, node), (until, _))| (node.clone(), *until))
            .collect(),
        Err(_) => Default::default(),
    };
    let pre_delete = ds
        .spec
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_delete.as_ref());
    let input = PlanInput {
        nodes,
        pods: pods
            .iter()
            .filter_map(|p| {
                let possible = p
                    .label(CONTROLLER_REVISION_HASH_KEY)
                    .and_then(|h| possible_by_hash.get(h))
                    .copied()
                    .unwrap_or(false);
                plan_pod(&**p, &hash, possible, pre_delete)
            })
            .collect(),
        strategy: PlanStrategy {
            prune_ineligible_nodes: shared.settings.prune_ineligible_nodes,
            ..plan_strategy(&ds.spec)
        },
        backoff_until,
        now: secs,
    };

    // Plan, then confirm what rests on the cache alone: an old pod it shows unavailable is
    // replaced outside the budget, so it is read as it is first.
    let mut plan = plan(&input);
    let pod_api: Api<Pod> = Api::namespaced(shared.client.clone(), &namespace);
    let held = confirm_uncounted(&pod_api, &mut plan, input.strategy.min_ready_seconds).await?;
    if let Ok(mut backoff) = shared.backoff.lock() {
        for node in &plan.extra.failed_nodes {
            let entry = backoff
                .entry((key.clone(), node.clone()))
                .or_insert((0, BACKOFF_START));
            *entry = (secs + entry.1, (entry.1 * 2).min(BACKOFF_MAX));
            recorder.record(EventRecord::warning(
                reason::FAILED_DAEMON_POD,
                format!("Found failed daemon pod on node {node}, will try to kill it"),
            ));
        }
    }

    // Execute.
    let exec = execute::Exec {
        pods_writer: &pods_writer,
        scale_writes: ScaleWrites::new(
            shared.client.clone(),
            &namespace,
            &shared.expectations,
            &key,
        ),
        shared: &shared,
        recorder: &recorder,
        key: &key,
        ds: &ds,
        hash: &hash,
        pods: &pods,
        in_place_request: &in_place_request,
        namespace: &namespace,
        now,
    };
    let outcomes = execute(&plan.actions, WRITE_CONCURRENCY, |action| {
        exec.perform(action)
    })
    .await;
    let first_error = outcomes.into_iter().find_map(|(_, r)| r.err());

    // Status, after the writes; observedGeneration only after a full sync.
    let status = plan.status.status(
        &original.status.clone().unwrap_or_default(),
        ds.metadata.generation.unwrap_or_default(),
        first_error.is_none(),
        &hash,
    );
    write_namespaced_status(&shared.client, &*original, &status).await?;
    if let Some(e) = first_error {
        return Err(e);
    }

    // History: the oldest revisions beyond the limit that no pod uses.
    let pod_hashes = pods
        .iter()
        .filter_map(|p| p.label(CONTROLLER_REVISION_HASH_KEY).map(str::to_string))
        .collect();
    for revision in revisions_to_prune(&ds, &history, &update_name, &pod_hashes) {
        delete_revision(&shared.client, &namespace, &revision).await?;
    }
    let planned_after = plan.requeue_after;
    let held_after = held.then_some(EXPECTATIONS_REQUEUE);
    Ok(
        match planned_after
            .into_iter()
            .chain(refresh_after)
            .chain(held_after)
            .min()
        {
            Some(after) => Requeue::requeue(after),
            None => Requeue::await_change(),
        },
    )
}
