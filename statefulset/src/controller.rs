//! The Advanced StatefulSet controller shell. A reconcile reads top to bottom as named
//! steps: **observe** (the caches and expectations) -> **validate** -> **revisions** ->
//! **plan** ([`plan::plan`], time an input) -> **execute** (the shared executor) ->
//! **status**. Every decision is the planner's.
//!
//! * **Cache only what it owns.** StatefulSets in the watched namespace(s); pods only
//!   through the `statefulset.kubernetes.io/pod-name` label every pod of a StatefulSet
//!   carries (no other pod is cached) — a pod wakes its controlling set, an orphan the set
//!   its name names (to be adopted); ControllerRevisions only those an `apps.kruise.io`
//!   StatefulSet controls; PersistentVolumeClaims only those named like a set's
//!   (`<template>-<set>-<ordinal>`); a claim wakes the sets its name or owners name.
//! * **Minimum writes.** One create per pod (its claims first), one delete; an in-place
//!   update is the `InPlaceUpdateReady=False` status write and one patch. Status is written
//!   only when it changed.
//! * **No double creates or deletes.** Creates and deletes are recorded as scale
//!   expectations before they are sent and satisfied from the pod cache; while any is
//!   pending the planner writes nothing. Pod writes are recorded by resourceVersion and an
//!   in-place update by the revision it moves the pod to (K#844): the next plan waits until
//!   the cache shows them. Pod names are deterministic, so even a restarted controller with
//!   no expectations cannot create a pod twice.
//! * **Invalid objects** (the validating webhook was bypassed) are not acted on: an
//!   `InvalidSpec` Warning event, and no pod is touched.
//! * **Failed writes** set the `FailedCreatePod` / `FailedUpdatePod` condition (reason
//!   empty, the error as message, as OpenKruise does) with a Warning event; the condition
//!   is removed once such writes succeed again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt as _, TryStreamExt as _};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSetCondition};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_core::api::keys::STATEFULSET_POD_NAME_KEY;
use kruise_core::expectations::{
    ResourceVersionExpectations, Satisfaction, ScaleExpectations, SharedExpectations,
};
use kruise_core::featuregate::FeatureGates;
use kruise_core::pods::{CachedPod, PodView};
use kruise_runtime::errors::ShellError;
use kruise_runtime::events::{EventQueue, EventRecord, Recorder};
use kruise_runtime::predownload::PreDownload;
use kruise_runtime::revisions::{RevisionStep, write_revisions};
use kruise_runtime::status::{write_collision_count, write_namespaced_status};
use kruise_runtime::watch::Watch;
use kruise_runtime::writes::Written;
use kruise_runtime::{Metrics, RunOptions, WarmStream, run_controller, warm_until_leading};
use kube::api::Api;
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, ResourceExt as _};

use crate::api::defaults::{DefaultingGates, default_spec};
use crate::api::v1beta1::StatefulSet;
use crate::api::validation::{to_message, validate};
use crate::api::{KIND, StatefulSetStatus};
use crate::plan::{self, Action, PlanGates, PlanInput};

mod error;
mod execute;
mod observe;

use observe::observe;

pub use error::Error;

/// Controller name (metrics, spans, readiness check `controller/statefulset`).
pub const CONTROLLER_NAME: &str = "statefulset";
/// The event reporter, as OpenKruise's recorder names it.
pub const EVENT_REPORTER: &str = "statefulset-controller";
/// Warning event reason for an invalid StatefulSet.
pub const REASON_INVALID_SPEC: &str = "InvalidSpec";
/// How long after a pod write the cache may lag before the pod is trusted again.
const POD_WRITE_REQUEUE: Duration = Duration::from_millis(200);

/// The planner's feature gates from `--feature-gates`.
pub fn plan_gates(gates: &FeatureGates) -> PlanGates {
    PlanGates {
        start_ordinal: gates.enabled("StatefulSetStartOrdinal"),
        pod_index_label: gates.enabled("PodIndexLabel"),
        env_from_metadata: gates.enabled("InPlaceUpdateEnvFromMetadata"),
        vertical_scaling: gates.enabled("InPlaceWorkloadVerticalScaling"),
        auto_delete_pvc: gates.enabled("StatefulSetAutoDeletePVC"),
        auto_resize_pvc: gates.enabled("StatefulSetAutoResizePVCGate"),
    }
}

/// The defaulting gates from `--feature-gates`.
pub fn defaulting_gates(gates: &FeatureGates) -> DefaultingGates {
    DefaultingGates {
        auto_delete_pvc: gates.enabled("StatefulSetAutoDeletePVC"),
        auto_resize_pvc: gates.enabled("StatefulSetAutoResizePVCGate"),
    }
}

/// Settings of one controller instance.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Watch only this namespace (all when `None`).
    pub namespace: Option<String>,
    /// The planner's gates.
    pub gates: PlanGates,
    /// The defaults the controller applies before planning (as the webhook does).
    pub defaulting: DefaultingGates,
    /// How long an expectation may stay unsatisfied.
    pub expectation_timeout: jiff::SignedDuration,
    /// Gate `PreDownloadImageForInPlaceUpdate`: ImagePullJobs for a rollout's new images.
    pub pre_download: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            namespace: None,
            gates: PlanGates::default(),
            defaulting: DefaultingGates::default(),
            expectation_timeout: kruise_core::expectations::DEFAULT_EXPECTATION_TIMEOUT,
            pre_download: false,
        }
    }
}

/// In-place updates sent, per set (`namespace/name`): pod name -> revision.
type UpdateExpectations = BTreeMap<String, BTreeMap<String, String>>;

/// What every reconcile shares.
struct Shared {
    client: Client,
    pods: Store<CachedPod>,
    claims: Store<PersistentVolumeClaim>,
    /// StorageClasses, only while `StatefulSetAutoResizePVCGate` is on.
    classes: Option<Store<StorageClass>>,
    revisions: Store<ControllerRevision>,
    scale_expectations: SharedExpectations<ScaleExpectations>,
    pod_versions: SharedExpectations<ResourceVersionExpectations>,
    update_expectations: SharedExpectations<UpdateExpectations>,
    settings: Settings,
    recorder: EventQueue,
    pre_download: PreDownload,
    /// Pods a set controls that may have left the pod watch (which selects the pod-name
    /// label) by losing that label, by `namespace/name`: the set releases them
    /// (ClaimPods), which it could not do from the cache.
    departed: Arc<SharedExpectations<DepartedPods>>,
}

/// A pod that may have left the pod watch while a set controls it.
#[derive(Debug, Clone)]
struct Departed {
    /// As last seen: the watch's DELETED content (the pod before it left), or, once
    /// `confirmed`, as read from the API server.
    pod: Arc<CachedPod>,
    /// Read back and found existing without the pod-name label.
    confirmed: bool,
}

/// Pods that may have left the pod watch while a set controls them, by `namespace/name`.
type DepartedPods = BTreeMap<String, Departed>;

/// The key of [`DepartedPods`]: `namespace/name`.
fn departed_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

fn pod_key(pod: &CachedPod) -> String {
    departed_key(PodView::namespace(pod), PodView::name(pod))
}

/// Notes a pod event of the pod watch. The API server tells a pod that stopped matching
/// the watch's label selector by a DELETED event with the pod's previous content, as for a
/// deleted pod; a pod deleted gracefully carries a deletionTimestamp, so a DELETED pod a
/// set controls without one may have left instead: the set's next reconcile reads it back.
fn note_pod_event(departed: &SharedExpectations<DepartedPods>, event: &watcher::Event<CachedPod>) {
    // A poisoned lock only loses this note: the next reconcile stops on it anyway.
    let _ = departed.with(|d| match event {
        watcher::Event::Delete(pod)
            if PodView::meta(pod).deletion_timestamp.is_none()
                && kruise_core::pods::controller_ref(PodView::meta(pod)).is_some_and(|o| {
                    kruise_core::pods::owner_ref_matches(o, crate::api::GROUP, KIND)
                }) =>
        {
            d.insert(
                pod_key(pod),
                Departed {
                    pod: Arc::new(pod.clone()),
                    confirmed: false,
                },
            );
        }
        watcher::Event::Delete(pod)
        | watcher::Event::Apply(pod)
        | watcher::Event::InitApply(pod) => {
            d.remove(&pod_key(pod));
        }
        watcher::Event::Init | watcher::Event::InitDone => {}
    });
}

/// True when a ControllerRevision is controlled by an `apps.kruise.io` StatefulSet (not by
/// a built-in `apps/v1` one), or by nothing (an orphan a set may adopt).
fn owned_by_statefulset(rev: &ControllerRevision) -> bool {
    let mut controllers = rev
        .owner_references()
        .iter()
        .filter(|o| o.controller == Some(true))
        .peekable();
    controllers.peek().is_none()
        || controllers.any(|o| {
            o.kind == KIND && kruise_core::pods::api_group(&o.api_version) == crate::api::GROUP
        })
}

/// Runs the controller until `opts.shutdown` fires: its watches at once, its reconciles
/// once this replica leads.
pub async fn run(client: Client, settings: Settings, metrics: &Metrics, opts: RunOptions) {
    let ns = settings.namespace.clone();
    let ns = ns.as_deref();
    let recorder = EventQueue::for_controller(client.clone(), EVENT_REPORTER, metrics);
    let (sets, mut set_stream) =
        Watch::<StatefulSet>::primary(client.clone(), ns, &opts, &recorder).reflect();
    let (pods, pod_events) = Watch::<CachedPod>::new(client.clone(), ns)
        .labels(STATEFULSET_POD_NAME_KEY)
        .untrimmed()
        .reflect_events();
    let departed = Arc::new(SharedExpectations::new(DepartedPods::new()));
    let noted = departed.clone();
    let mut pod_stream = pod_events
        .inspect_ok(move |event| note_pod_event(&noted, event))
        .touched_objects()
        .boxed();
    let (revisions, mut revision_stream) = Watch::<ControllerRevision>::new(client.clone(), ns)
        .keep_only(owned_by_statefulset)
        .reflect();
    let (claims, mut claim_stream) = Watch::<PersistentVolumeClaim>::new(client.clone(), ns)
        .keep_only(|c: &PersistentVolumeClaim| ordinal_named(&c.name_any()).is_some())
        .reflect();
    // StorageClasses (cluster-scoped, few) only when claims may be resized.
    let (classes, mut class_stream) = if settings.gates.auto_resize_pvc {
        let (store, stream) = Watch::<StorageClass>::new(client.clone(), None).reflect();
        (Some(store), Some(stream))
    } else {
        (None, None)
    };
    let mut streams: Vec<&mut dyn WarmStream> = vec![
        &mut set_stream,
        &mut pod_stream,
        &mut revision_stream,
        &mut claim_stream,
    ];
    if let Some(stream) = class_stream.as_mut() {
        streams.push(stream);
    }
    if !warm_until_leading(&opts, &mut streams).await {
        return;
    }
    let timeout = settings.expectation_timeout;
    let shared = Arc::new(Shared {
        client,
        pods,
        claims,
        classes,
        revisions,
        scale_expectations: SharedExpectations::new(ScaleExpectations::new(timeout)),
        pod_versions: SharedExpectations::new(ResourceVersionExpectations::new(timeout)),
        update_expectations: SharedExpectations::new(BTreeMap::new()),
        pre_download: PreDownload::new(settings.pre_download),
        settings,
        recorder,
        departed,
    });
    let mut controller = Controller::for_stream(set_stream, sets)
        .reconcile_all_on(futures::stream::once(async {}))
        .watches_stream(pod_stream, |pod: CachedPod| set_of_pod(&pod))
        .owns_stream(revision_stream)
        .watches_stream(claim_stream, |claim: PersistentVolumeClaim| {
            sets_of_claim(&claim)
        });
    if let Some(stream) = class_stream {
        // Polled to keep the cache current; a class change wakes no set (a claim waiting
        // for a class to allow expansion waits, as in OpenKruise, for its deletion).
        controller = controller.watches_stream(stream, |_: StorageClass| {
            None::<reflector::ObjectRef<StatefulSet>>
        });
    }
    run_controller(controller, reconcile, shared, opts).await;
}

/// `(<parent>, <ordinal>)` of a name `<parent>-<ordinal>`.
fn ordinal_named(name: &str) -> Option<(&str, &str)> {
    let (parent, ordinal) = name.rsplit_once('-')?;
    (!ordinal.is_empty() && ordinal.bytes().all(|b| b.is_ascii_digit()))
        .then_some((parent, ordinal))
}

/// The sets a claim event may concern. A claim is `<template>-<set>-<ordinal>`, and both
/// names may hold dashes, so every set name the claim's name could end in is woken (a name
/// that is no set costs a cache lookup); an `apps.kruise.io` StatefulSet among its owners
/// too. A claim's deletion wakes the set that re-creates it for a pending pod.
fn sets_of_claim(claim: &PersistentVolumeClaim) -> Vec<reflector::ObjectRef<StatefulSet>> {
    let namespace = claim.namespace().unwrap_or_default();
    let name = claim.name_any();
    let mut sets: Vec<String> = claim
        .owner_references()
        .iter()
        .filter(|o| kruise_core::pods::owner_ref_matches(o, crate::api::GROUP, KIND))
        .map(|o| o.name.clone())
        .collect();
    sets.extend(
        claim
            .annotations()
            .get(crate::plan::OWNED_BY_ASTS_KEY)
            .cloned(),
    );
    if let Some((parent, _)) = ordinal_named(&name) {
        sets.extend(
            parent
                .match_indices('-')
                .map(|(i, _)| parent[i + 1..].to_string())
                .filter(|s| !s.is_empty()),
        );
    }
    sets.sort();
    sets.dedup();
    sets.into_iter()
        .map(|s| reflector::ObjectRef::new(&s).within(&namespace))
        .collect()
}

/// The set a pod event wakes: its controller when that is an `apps.kruise.io`
/// StatefulSet; for an orphan, the set its name `<set>-<ordinal>` names (to adopt it).
fn set_of_pod(pod: &CachedPod) -> Option<reflector::ObjectRef<StatefulSet>> {
    let namespace = PodView::namespace(pod);
    let name = match kruise_core::pods::controller_ref(PodView::meta(pod)) {
        Some(owner) if kruise_core::pods::owner_ref_matches(owner, crate::api::GROUP, KIND) => {
            owner.name.clone()
        }
        Some(_) => return None,
        None => ordinal_named(PodView::name(pod))?.0.to_string(),
    };
    Some(reflector::ObjectRef::new(&name).within(namespace))
}

fn record_pod_version(shared: &Shared, pod: &Written) {
    if let (Some(uid), Some(rv)) = (pod.uid(), pod.resource_version()) {
        // A poisoned lock only loses this record: the next reconcile stops on the lock.
        let _ = shared.pod_versions.with(|v| v.expect(uid, rv));
    }
}

/// One reconcile of a StatefulSet.
async fn reconcile(original: Arc<StatefulSet>, shared: Arc<Shared>) -> Result<Requeue, Error> {
    let namespace = original.namespace().unwrap_or_default();
    let name = original.name_any();
    let key = format!("{namespace}/{name}");
    // The one clock read: everything below takes time as an input.
    let now = Timestamp::now();
    let recorder = Recorder::about(&shared.recorder, &*original);

    let Some(observed) = observe(&shared, &original, &key, now).await? else {
        return Ok(Requeue::requeue(Duration::from_secs(1)));
    };

    // Validate (defaulting again is idempotent and covers objects that bypassed it).
    let mut set = (*original).clone();
    default_spec(&mut set.spec, shared.settings.defaulting);
    let errors = validate(&set, None);
    if !errors.is_empty() {
        recorder.record(EventRecord::warning(
            REASON_INVALID_SPEC,
            to_message(&errors),
        ));
        return Ok(Requeue::await_change());
    }
    if observed.pod_writes_pending {
        return Ok(Requeue::requeue(POD_WRITE_REQUEUE));
    }

    // Revisions: orphans the selector matches are adopted first.
    let mut history = observed.history;
    history.extend(adopt_revisions(&shared, &set, &namespace, &observed.orphan_revisions).await?);
    let planned = plan::plan_revisions(&set, &history);
    let collisions = set
        .status
        .as_ref()
        .and_then(|s| s.collision_count)
        .unwrap_or(0);
    let revisions =
        match write_revisions(&shared.client, &namespace, planned, collisions, history).await? {
            RevisionStep::Ready(revisions) => revisions,
            RevisionStep::Collision(collision_count) => {
                write_collision_count(&shared.client, &*original, collision_count, |s| {
                    &mut s.collision_count
                })
                .await?;
                return Ok(Requeue::requeue(Duration::from_millis(100)));
            }
        };

    // Pre-download: the new images' ImagePullJobs go out before pods update.
    if shared.pre_download.enabled() {
        let (current, update) = (&revisions.current, &revisions.update);
        let decision = crate::predownload::plan(&set, current, update, shared.settings.gates);
        let uid = set.uid().unwrap_or_default();
        let owner = crate::predownload::job_owner(&set, &namespace, &uid);
        (shared.pre_download)
            .step(&shared.client, &owner, update, decision, &recorder)
            .await;
    }

    // Plan.
    let plan = plan::plan(&PlanInput {
        set: &set,
        pods: &observed.pods,
        claims: &observed.claims,
        expandable_classes: &observed.expandable_classes,
        current_revision: &revisions.current,
        update_revision: &revisions.update,
        revisions: &revisions.all,
        now,
        gates: shared.settings.gates,
        scale_expectations: &observed.satisfaction,
        update_expectations: &observed.update_expectations,
    });
    recorder.record_all(plan.events.iter().cloned());

    // Execute.
    let exec = execute::Exec {
        shared: &shared,
        key: &key,
        set_name: &name,
        namespace: &namespace,
        pods: observed.pods.iter().map(|p| (p.name(), &**p)).collect(),
    };
    let (events, executed) = execute::execute_plan(&exec, &plan).await;
    recorder.record_all(events);

    // Status, after the writes.
    let mut status = plan.status.clone();
    match &executed {
        Err(e) => {
            if let Some(condition) = error::failure_condition(e) {
                set_condition(&mut status, condition, &e.to_string(), now);
            }
        }
        Ok(()) => {
            let created = plan
                .actions
                .iter()
                .any(|a| matches!(a, Action::CreatePod { .. }));
            let updated = plan
                .actions
                .iter()
                .any(|a| matches!(a, Action::DeletePod { .. } | Action::UpdateInPlace { .. }));
            status.conditions.retain(|c| {
                !(created && c.type_ == crate::api::condition::FAILED_CREATE_POD
                    || updated && c.type_ == crate::api::condition::FAILED_UPDATE_POD)
            });
        }
    }
    write_namespaced_status(&shared.client, &*original, &status).await?;
    executed?;
    Ok(match (&observed.satisfaction, plan.requeue_after) {
        (Satisfaction::Pending { remaining, .. }, _) => {
            Requeue::requeue(remaining.unsigned_abs().min(Duration::from_secs(1)))
        }
        (_, Some(d)) => Requeue::requeue(d),
        (_, None) => Requeue::await_change(),
    })
}

/// Adopts the orphan revisions [`plan::orphans_to_adopt`] names: the set's controller
/// reference added, sent with the cached resourceVersion; returns them as written.
async fn adopt_revisions(
    shared: &Shared,
    set: &StatefulSet,
    namespace: &str,
    orphans: &[ControllerRevision],
) -> Result<Vec<ControllerRevision>, Error> {
    let api: Api<ControllerRevision> = Api::namespaced(shared.client.clone(), namespace);
    let mut adopted = Vec::new();
    for orphan in plan::orphans_to_adopt(set, orphans) {
        let name = orphan.name_any();
        let mut owners = orphan.owner_references().to_vec();
        owners.push(plan::owner_ref(set));
        let patch = serde_json::json!({"metadata": {
            "resourceVersion": orphan.metadata.resource_version,
            "ownerReferences": owners,
        }});
        let written = api
            .patch(
                &name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .map_err(|source| {
                ShellError::Revision(kruise_runtime::errors::WriteError { name, source })
            })?;
        adopted.push(written);
    }
    Ok(adopted)
}

/// Sets (or refreshes) a True condition of `type_` (reason empty, as OpenKruise's).
fn set_condition(status: &mut StatefulSetStatus, type_: &str, message: &str, now: Timestamp) {
    let fresh = StatefulSetCondition {
        type_: type_.into(),
        status: "True".into(),
        last_transition_time: Some(Time(now)),
        message: Some(message.into()),
        reason: None,
    };
    kruise_core::api::condition::upsert(
        &mut status.conditions,
        fresh,
        |c| c.type_ == type_,
        |c| c.status == "True" && c.message.as_deref() == Some(message),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_follow_the_feature_gates() {
        let gates = FeatureGates::parse("StatefulSetStartOrdinal=true,PodIndexLabel=false")
            .unwrap_or_else(|e| panic!("{e}"));
        let g = plan_gates(&gates);
        assert!(g.start_ordinal && !g.pod_index_label && g.env_from_metadata);
        let d = defaulting_gates(&FeatureGates::default());
        assert!(d.auto_delete_pvc && !d.auto_resize_pvc);
    }

    #[test]
    fn pod_events_wake_their_set_or_the_set_an_orphan_is_named_after() {
        let pod = |name: &str, owner: Option<(&str, &str, &str)>| {
            CachedPod::from_pod(k8s_openapi::api::core::v1::Pod {
                metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    name: Some(name.into()),
                    namespace: Some("ns".into()),
                    owner_references: owner.map(|(api_version, kind, name)| {
                        vec![
                            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                                api_version: api_version.into(),
                                kind: kind.into(),
                                name: name.into(),
                                controller: Some(true),
                                ..Default::default()
                            },
                        ]
                    }),
                    ..Default::default()
                },
                ..Default::default()
            })
        };
        let woken = |p: &CachedPod| set_of_pod(p).map(|r| (r.name, r.namespace));
        let web = Some(("web".to_string(), Some("ns".to_string())));
        assert_eq!(
            woken(&pod(
                "web-0",
                Some(("apps.kruise.io/v1beta1", "StatefulSet", "web"))
            )),
            web
        );
        assert_eq!(
            woken(&pod("my-web-12", None)),
            Some(("my-web".to_string(), Some("ns".to_string())))
        );
        assert_eq!(
            woken(&pod("web-0", Some(("apps/v1", "StatefulSet", "web")))),
            None
        );
        assert_eq!(woken(&pod("web-abc", None)), None);
    }

    #[test]
    fn a_claim_wakes_every_set_its_name_may_end_in_and_its_owner() {
        let claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "my-data-web-0", "namespace": "ns", "ownerReferences": [
                {"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet", "name": "owner", "uid": "u"}]}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let woken: Vec<String> = sets_of_claim(&claim).into_iter().map(|r| r.name).collect();
        assert_eq!(woken, ["data-web", "owner", "web"]);
    }

    #[test]
    fn only_kruise_statefulset_revisions_are_cached() {
        let rev = |api_version: &str, kind: &str| ControllerRevision {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                owner_references: Some(vec![
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                        api_version: api_version.into(),
                        kind: kind.into(),
                        controller: Some(true),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(owned_by_statefulset(&rev(
            "apps.kruise.io/v1beta1",
            "StatefulSet"
        )));
        assert!(owned_by_statefulset(&rev(
            "apps.kruise.io/v1alpha1",
            "StatefulSet"
        )));
        assert!(!owned_by_statefulset(&rev("apps/v1", "StatefulSet")));
        assert!(
            owned_by_statefulset(&ControllerRevision::default()),
            "an orphan, to adopt"
        );
        assert!(!owned_by_statefulset(&rev(
            "apps.kruise.io/v1beta1",
            "CloneSet"
        )));
    }
}
