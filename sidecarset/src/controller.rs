//! The SidecarSet controller shell: reflectors -> [`crate::upgrade`] facts ->
//! [`crate::plan::next_upgrades`] -> pod writes, ControllerRevisions, status and events.
//! Decisions are the pure modules'; this module observes, executes and records.
//!
//! * **Cache only what it manages.** Every pod event is read, but only pods carrying
//!   `kruise.io/sidecarset-injected-list` are stored, and a pod wakes exactly the
//!   SidecarSets that list names. Namespaces (for `namespaceSelector`) and the SidecarSet
//!   revisions (label `kruise.io/sidecarset-name`, in the kruise namespace) are cached too.
//! * **One write per upgraded pod**, a strategic-merge patch of the changed images and
//!   annotations carrying the resourceVersion it was planned from, so two SidecarSets
//!   upgrading one pod never overwrite each other's hash entry; the `SidecarSetUpgradable`
//!   condition is patched only when it changes.
//! * **Never act on a stale pod.** After a write the pod is not planned again until the cache
//!   shows that write (resourceVersion expectations, expiring after a timeout).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Namespace, ObjectReference, Pod, PodCondition};
use kruise_common::expectations::ResourceVersionExpectations;
use kruise_common::inplace::pod_patch;
use kruise_common::revision::{
    CollisionDecision, UpdateRevisionDecision, decide_update_revision, on_name_collision,
    owned_or_orphan, sort_revisions,
};
use kruise_common::runtime::events::{Event, EventQueue, EventType};
use kruise_common::runtime::{
    ReconcileError, RunOptions, is_conflict, run_controller, trim_for_cache,
};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, Resource as _, ResourceExt as _};
use serde_json::{Value, json};

use crate::api::v1beta1::{SidecarSet, SidecarSetStatus};
use crate::api::{
    SIDECARSET_CUSTOM_VERSION_LABEL, SIDECARSET_INJECTED_LIST_ANNOTATION, SIDECARSET_NAME_LABEL,
    SidecarSetUpdateStrategyType, defaults,
};
use crate::inject::pod_matches_sidecar_set;
use crate::plan::{count, next_upgrades};
use crate::revision::{new_revision, revision_data};
use crate::upgrade::{
    SetHashes, hot_upgrade_reset_due, is_managed, pod_facts, reset_hot_upgrade,
    upgradable_condition, upgrade_pod,
};

/// Controller name (metrics, spans, readiness check `controller/sidecarset`).
pub const CONTROLLER_NAME: &str = "sidecarset";
/// The event reporter, as OpenKruise's recorder names it.
pub const EVENT_REPORTER: &str = "sidecarset-controller";
/// Requeue while a pod write is not yet in the cache (OpenKruise: 1s).
const IN_FLIGHT_REQUEUE: Duration = Duration::from_secs(1);
/// Default revisionHistoryLimit.
const DEFAULT_HISTORY_LIMIT: i32 = 10;

/// Which step of a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Building hashes, revisions or pod writes.
    #[error("sidecarset {name}: {reason}")]
    Compute {
        /// SidecarSet name.
        name: String,
        /// What failed.
        reason: String,
    },
    /// Writing a ControllerRevision.
    #[error("writing controller revision {name}: {source}")]
    Revision {
        /// Revision name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Patching a pod or its status.
    #[error("updating pod {name}: {source}")]
    UpdatePod {
        /// `namespace/name`.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Writing the SidecarSet's status.
    #[error("updating sidecarset {name} status: {source}")]
    Status {
        /// SidecarSet name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::Compute { .. } => "compute",
            Error::Revision { .. } => "revision",
            Error::UpdatePod { .. } => "update_pods",
            Error::Status { .. } => "update_status",
        }
    }
    fn is_conflict(&self) -> bool {
        match self {
            Error::Compute { .. } => false,
            Error::Revision { source, .. }
            | Error::UpdatePod { source, .. }
            | Error::Status { source, .. } => is_conflict(source),
        }
    }
}

/// Settings of one controller instance.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Where SidecarSet ControllerRevisions live (OpenKruise: the kruise namespace).
    pub revision_namespace: String,
    /// How long a pod write may stay unseen in the cache before the pod is trusted again.
    pub expectation_timeout: jiff::SignedDuration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            revision_namespace: "kruise-system".into(),
            expectation_timeout: kruise_common::expectations::DEFAULT_EXPECTATION_TIMEOUT,
        }
    }
}

struct Shared {
    client: Client,
    pods: Store<Pod>,
    namespaces: Store<Namespace>,
    revisions: Store<ControllerRevision>,
    pod_versions: Mutex<ResourceVersionExpectations>,
    recorder: EventQueue,
    settings: Settings,
}

/// Pods no SidecarSet injected are dropped before the store (as deletions, which the store
/// ignores for objects it never held), so the cache holds only pods a SidecarSet manages.
fn only_injected(event: watcher::Event<Pod>) -> watcher::Event<Pod> {
    let injected = |p: &Pod| {
        p.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(SIDECARSET_INJECTED_LIST_ANNOTATION))
    };
    match event {
        watcher::Event::Apply(p) | watcher::Event::InitApply(p) if !injected(&p) => {
            watcher::Event::Delete(p)
        }
        other => other,
    }
}

/// Runs the SidecarSet controller until `opts.shutdown` fires.
pub async fn run(client: Client, settings: Settings, opts: RunOptions) {
    let page = |c: watcher::Config| c.page_size(500);
    let (pods, pod_writer) = reflector::store::<Pod>();
    let pod_stream = reflector::reflector(
        pod_writer,
        watcher(
            Api::<Pod>::all(client.clone()),
            page(watcher::Config::default()),
        )
        .map(|e| e.map(|e| only_injected(e).modify(trim_for_cache))),
    )
    .default_backoff()
    .touched_objects();
    let (namespaces, ns_writer) = reflector::store::<Namespace>();
    let ns_stream = reflector::reflector(
        ns_writer,
        watcher(
            Api::<Namespace>::all(client.clone()),
            watcher::Config::default(),
        ),
    )
    .default_backoff()
    .touched_objects();
    let (revisions, rev_writer) = reflector::store::<ControllerRevision>();
    let rev_stream = reflector::reflector(
        rev_writer,
        watcher(
            Api::<ControllerRevision>::namespaced(client.clone(), &settings.revision_namespace),
            watcher::Config::default().labels(SIDECARSET_NAME_LABEL),
        ),
    )
    .default_backoff()
    .touched_objects();
    let shared = Arc::new(Shared {
        recorder: EventQueue::for_controller(client.clone(), EVENT_REPORTER, &opts.metrics),
        pod_versions: Mutex::new(ResourceVersionExpectations::new(
            settings.expectation_timeout,
        )),
        client: client.clone(),
        pods,
        namespaces,
        revisions,
        settings,
    });
    let controller = Controller::new(
        Api::<SidecarSet>::all(client),
        page(watcher::Config::default()),
    )
    .watches_stream(pod_stream, |pod: Pod| {
        crate::upgrade::injected_sets(&pod)
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

/// The pods the SidecarSet manages: in its namespaces, selected, injected by it.
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

/// Whether every pod we wrote shows (at least) the version the write returned.
fn writes_observed(shared: &Shared, pods: &[Pod], now: Timestamp) -> bool {
    shared
        .pod_versions
        .lock()
        .map_or(true, |mut v| v.all_observed(pods, now))
}

fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.name_any()
    )
}

/// One reconcile of a SidecarSet.
async fn reconcile(original: Arc<SidecarSet>, shared: Arc<Shared>) -> Result<Action, Error> {
    if shared.pods.wait_until_ready().await.is_err()
        || shared.namespaces.wait_until_ready().await.is_err()
        || shared.revisions.wait_until_ready().await.is_err()
    {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    if original.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let now = Timestamp::now();
    let mut set = (*original).clone();
    // The defaulting webhook normally did this; it is idempotent.
    defaults::default_v1beta1(&mut set).map_err(|e| compute_error(&set, e))?;
    let hashes = SetHashes::of(&set).map_err(|e| compute_error(&set, e))?;
    let pods = managed_pods(&shared, &set);

    let Some((latest, collision_count)) = register_revision(&shared, &set).await? else {
        return Ok(Action::requeue(Duration::from_millis(100)));
    };
    let facts: Vec<_> = pods.iter().map(|p| pod_facts(p, &set, &hashes)).collect();
    let counts = count(&facts.iter().map(|f| f.status).collect::<Vec<_>>());
    let status = SidecarSetStatus {
        observed_generation: set.metadata.generation.unwrap_or(0),
        matched_pods: counts.matched,
        updated_pods: counts.updated,
        ready_pods: counts.ready,
        updated_ready_pods: counts.updated_ready,
        latest_revision: latest.clone(),
        collision_count: Some(collision_count),
    };
    write_status(&shared, &original, &status).await?;
    set.status = Some(status);

    if !writes_observed(&shared, &pods, now) {
        return Ok(Action::requeue(IN_FLIGHT_REQUEUE));
    }

    // Hot upgrades whose new container took over: reset the old one to the empty image.
    if set.spec.containers.iter().any(|c| c.is_hot_upgrade()) {
        for pod in pods.iter().filter(|p| hot_upgrade_reset_due(p, &set)) {
            let Some(reset) =
                reset_hot_upgrade(pod, &set, &hashes, now).map_err(|e| compute_error(&set, e))?
            else {
                continue;
            };
            match write_pod(&shared, pod, &reset).await {
                Ok(()) => publish_pod_event(
                    &shared,
                    pod,
                    EventType::Normal,
                    "ResetContainerSucceed",
                    "reset sidecar container image empty successfully",
                ),
                Err(e) => {
                    publish_pod_event(
                        &shared,
                        pod,
                        EventType::Warning,
                        "ResetContainerFailed",
                        &format!("reset sidecar container image empty failed: {e}"),
                    );
                    return Err(e);
                }
            }
        }
    }

    let strategy = &set.spec.update_strategy;
    if strategy.type_ == Some(SidecarSetUpdateStrategyType::NotUpdate)
        || counts.updated >= counts.matched
        || strategy.paused
    {
        return Ok(Action::await_change());
    }
    let plan_states: Vec<_> = facts.iter().map(|f| f.plan).collect();
    let plan = next_upgrades(strategy, &pods, &plan_states).map_err(|e| compute_error(&set, e))?;
    for &i in &plan.not_upgradable {
        write_condition(&shared, &pods[i], &set.name_any(), false, now).await?;
    }
    if !plan.not_upgradable.is_empty() {
        publish_set_event(
            &shared,
            &original,
            EventType::Normal,
            "NotUpgradablePods",
            &format!(
                "SidecarSet in-place update detected {} not upgradable pod(s) in this round, will skip them.",
                plan.not_upgradable.len()
            ),
        );
    }
    for &i in &plan.upgrade {
        let pod = &pods[i];
        let upgraded = upgrade_pod(pod, &set, &hashes, now).map_err(|e| compute_error(&set, e))?;
        write_pod(&shared, pod, &upgraded).await?;
        write_condition(&shared, pod, &set.name_any(), true, now).await?;
    }
    if !plan.upgrade.is_empty() {
        let names: Vec<String> = plan.upgrade.iter().map(|&i| pod_key(&pods[i])).collect();
        tracing::info!(sidecarset = %set.name_any(), pods = %names.join(","), "upgraded sidecars in place");
    }
    Ok(Action::await_change())
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
        .map_err(|source| Error::UpdatePod {
            name: pod_key(old),
            source,
        })?;
    if let (Some(uid), Some(rv), Ok(mut versions)) = (
        written.uid(),
        written.resource_version(),
        shared.pod_versions.lock(),
    ) {
        versions.expect(&uid, &rv);
    }
    Ok(())
}

/// Records the set's verdict in the pod's `SidecarSetUpgradable` condition when it changes.
async fn write_condition(
    shared: &Shared,
    pod: &Pod,
    set: &str,
    upgradable: bool,
    now: Timestamp,
) -> Result<(), Error> {
    let Some(condition) = upgradable_condition(pod, set, upgradable, now) else {
        return Ok(());
    };
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(shared.client.clone(), &namespace);
    let body = json!({"status": {"conditions": [condition_json(&condition)]}});
    api.patch_status(
        &pod.name_any(),
        &PatchParams::default(),
        &Patch::Strategic(body),
    )
    .await
    .map_err(|source| Error::UpdatePod {
        name: pod_key(pod),
        source,
    })?;
    Ok(())
}

fn condition_json(c: &PodCondition) -> Value {
    serde_json::to_value(c).unwrap_or(Value::Null)
}

/// Writes the status when it differs from the stored one (OpenKruise's `inconsistentStatus`).
async fn write_status(
    shared: &Shared,
    set: &SidecarSet,
    status: &SidecarSetStatus,
) -> Result<(), Error> {
    let old = set.status.clone().unwrap_or_default();
    let changed = status.observed_generation > old.observed_generation
        || status.matched_pods != old.matched_pods
        || status.updated_pods != old.updated_pods
        || status.ready_pods != old.ready_pods
        || status.updated_ready_pods != old.updated_ready_pods
        || status.latest_revision != old.latest_revision
        || status.collision_count != old.collision_count;
    if !changed {
        return Ok(());
    }
    // Every field spelled out: a merge patch must also clear counts that dropped to zero.
    let body = json!({"status": {
        "observedGeneration": status.observed_generation,
        "matchedPods": status.matched_pods,
        "updatedPods": status.updated_pods,
        "readyPods": status.ready_pods,
        "updatedReadyPods": status.updated_ready_pods,
        "latestRevision": status.latest_revision,
        "collisionCount": status.collision_count,
    }});
    let api: Api<SidecarSet> = Api::all(shared.client.clone());
    api.patch_status(
        &set.name_any(),
        &PatchParams::default(),
        &Patch::Merge(body),
    )
    .await
    .map_err(|source| Error::Status {
        name: set.name_any(),
        source,
    })?;
    Ok(())
}

/// Registers the ControllerRevision of the current spec (`registerLatestRevision`): reuse the
/// newest when equal, renumber an older equal one, or create one; label the custom version;
/// truncate history. `None` when a name collision bumped the collision count.
async fn register_revision(
    shared: &Shared,
    set: &SidecarSet,
) -> Result<Option<(String, i32)>, Error> {
    let name = set.name_any();
    let uid = set.uid().unwrap_or_default();
    let namespace = &shared.settings.revision_namespace;
    let cached: Vec<ControllerRevision> = shared
        .revisions
        .state()
        .iter()
        .filter(|r| r.labels().get(SIDECARSET_NAME_LABEL) == Some(&name))
        .map(|r| (**r).clone())
        .collect();
    let mut history: Vec<ControllerRevision> = owned_or_orphan(&cached, &uid)
        .into_iter()
        .cloned()
        .collect();
    sort_revisions(&mut history);
    let mut collision_count = set
        .status
        .as_ref()
        .and_then(|s| s.collision_count)
        .unwrap_or(0);
    let data = revision_data(set).map_err(|e| compute_error(set, e))?;
    let api: Api<ControllerRevision> = Api::namespaced(shared.client.clone(), namespace);
    let latest = match decide_update_revision(&history, &data) {
        UpdateRevisionDecision::ReuseNewest { name } => history
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name.as_str()))
            .cloned()
            .ok_or_else(|| compute_error(set, format!("revision {name} vanished")))?,
        UpdateRevisionDecision::BumpRevision { name, revision } => {
            let body = json!({"revision": revision});
            let stored = api
                .patch(&name, &PatchParams::default(), &Patch::Merge(body))
                .await
                .map_err(|source| Error::Revision {
                    name: name.clone(),
                    source,
                })?;
            history.retain(|r| r.metadata.name.as_deref() != Some(name.as_str()));
            history.push(stored.clone());
            stored
        }
        UpdateRevisionDecision::Create { revision } => {
            let candidate = new_revision(set, namespace, revision, Some(collision_count))
                .map_err(|e| compute_error(set, e))?;
            let rev_name = candidate.name_any();
            let stored = match api.create(&PostParams::default(), &candidate).await {
                Ok(created) => created,
                Err(kube::Error::Api(s)) if s.code == 409 && s.reason == "AlreadyExists" => {
                    let existing = api.get(&rev_name).await.map_err(|source| Error::Revision {
                        name: rev_name.clone(),
                        source,
                    })?;
                    match on_name_collision(&existing, &data, collision_count) {
                        CollisionDecision::Reuse => existing,
                        CollisionDecision::Retry {
                            collision_count: next,
                        } => {
                            collision_count = next;
                            let mut status = set.status.clone().unwrap_or_default();
                            status.collision_count = Some(collision_count);
                            write_status(shared, set, &status).await?;
                            return Ok(None);
                        }
                    }
                }
                Err(source) => {
                    return Err(Error::Revision {
                        name: rev_name,
                        source,
                    });
                }
            };
            history.push(stored.clone());
            stored
        }
    };
    let latest_name = latest.name_any();
    let custom = &set.spec.custom_version;
    if !custom.is_empty() && latest.labels().get(SIDECARSET_CUSTOM_VERSION_LABEL) != Some(custom) {
        let body = json!({"metadata": {"labels": {SIDECARSET_CUSTOM_VERSION_LABEL: custom}}});
        api.patch(&latest_name, &PatchParams::default(), &Patch::Merge(body))
            .await
            .map_err(|source| Error::Revision {
                name: latest_name.clone(),
                source,
            })?;
    }
    sort_revisions(&mut history);
    for stale in revisions_to_delete(set, &history, &shared.pods_revisions(set)) {
        match api.delete(&stale, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(source) => {
                return Err(Error::Revision {
                    name: stale,
                    source,
                });
            }
        }
    }
    Ok(Some((latest_name, collision_count)))
}

impl Shared {
    /// The revisions the set's pods were injected or upgraded from.
    fn pods_revisions(&self, set: &SidecarSet) -> BTreeSet<String> {
        let name = set.name_any();
        self.pods
            .state()
            .iter()
            .filter_map(|p| {
                let v = p
                    .metadata
                    .annotations
                    .as_ref()?
                    .get(crate::api::SIDECARSET_HASH_ANNOTATION)?;
                let mut m =
                    crate::inject::parse_hash_annotation(crate::api::SIDECARSET_HASH_ANNOTATION, v)
                        .ok()?;
                m.remove(&name)
                    .map(|s| s.controller_revision)
                    .filter(|r| !r.is_empty())
            })
            .collect()
    }
}

/// OpenKruise's `truncateHistory`: beyond `revisionHistoryLimit` (default 10, at least 1),
/// delete the oldest revisions no pod uses and injection does not name; never the newest.
pub fn revisions_to_delete(
    set: &SidecarSet,
    sorted: &[ControllerRevision],
    used_by_pods: &BTreeSet<String>,
) -> Vec<String> {
    let limit = usize::try_from(
        set.spec
            .revision_history_limit
            .unwrap_or(DEFAULT_HISTORY_LIMIT)
            .max(1),
    )
    .unwrap_or(1);
    if sorted.len() <= limit {
        return Vec::new();
    }
    let mut active = used_by_pods.clone();
    if let Some(info) = &set.spec.injection_strategy.revision {
        if let Some(name) = &info.revision_name {
            active.insert(name.clone());
        }
        if let Some(custom) = &info.custom_version
            && let Some(newest) = sorted
                .iter()
                .filter(|r| r.labels().get(SIDECARSET_CUSTOM_VERSION_LABEL) == Some(custom))
                .max_by_key(|r| r.revision)
        {
            active.insert(newest.name_any());
        }
    }
    let mut to_delete = sorted.len() - limit;
    let mut out = Vec::new();
    for r in &sorted[..sorted.len() - 1] {
        if to_delete == 0 {
            break;
        }
        let name = r.name_any();
        if !active.contains(&name) {
            out.push(name);
            to_delete -= 1;
        }
    }
    out
}

fn object_ref_of_pod(pod: &Pod) -> ObjectReference {
    pod.object_ref(&())
}

fn publish_pod_event(shared: &Shared, pod: &Pod, type_: EventType, reason: &str, note: &str) {
    publish(shared, object_ref_of_pod(pod), type_, reason, note);
}

fn publish_set_event(
    shared: &Shared,
    set: &SidecarSet,
    type_: EventType,
    reason: &str,
    note: &str,
) {
    publish(shared, set.object_ref(&()), type_, reason, note);
}

/// Events go out in the background: a slow events API never holds up a rollout.
fn publish(
    shared: &Shared,
    reference: ObjectReference,
    type_: EventType,
    reason: &str,
    note: &str,
) {
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(note.into()),
        action: reason.into(),
        secondary: None,
    };
    shared.recorder.send(event, reference);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(name: &str, revision: i64, custom: Option<&str>) -> ControllerRevision {
        let mut labels = std::collections::BTreeMap::new();
        if let Some(c) = custom {
            labels.insert(SIDECARSET_CUSTOM_VERSION_LABEL.to_string(), c.to_string());
        }
        ControllerRevision {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                labels: Some(labels),
                ..Default::default()
            },
            revision,
            data: None,
        }
    }

    #[test]
    fn history_keeps_the_limit_the_newest_and_what_pods_use() {
        let mut set: SidecarSet = serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
            "metadata": {"name": "s"}, "spec": {"revisionHistoryLimit": 2}
        }))
        .unwrap();
        let sorted: Vec<_> = (1..=5)
            .map(|i| rev(&format!("r{i}"), i, (i == 2).then_some("v2")))
            .collect();
        assert_eq!(
            revisions_to_delete(&set, &sorted, &BTreeSet::new()),
            vec!["r1", "r2", "r3"]
        );
        let used = BTreeSet::from(["r1".to_string()]);
        assert_eq!(
            revisions_to_delete(&set, &sorted, &used),
            vec!["r2", "r3", "r4"]
        );
        set.spec.injection_strategy.revision = Some(crate::api::SidecarSetInjectRevision {
            custom_version: Some("v2".into()),
            ..Default::default()
        });
        assert_eq!(revisions_to_delete(&set, &sorted, &used), vec!["r3", "r4"]);
        // A limit below 1 keeps 1: the newest.
        set.spec.revision_history_limit = Some(0);
        set.spec.injection_strategy.revision = None;
        assert_eq!(
            revisions_to_delete(&set, &sorted, &BTreeSet::new()),
            vec!["r1", "r2", "r3", "r4"]
        );
    }
}
