//! The PodUnavailableBudget controller shell (see [`crate::plan::budget`] for every
//! number it writes): observe the budget's pods and expected count, annotate the pods with
//! the budget's name, plan the status, write it only when it changed.
//!
//! * **Pods.** `targetRef`: the pods of the workload's `spec.selector` in the budget's
//!   namespace, expected `spec.replicas` of the workload (any kind the API serves, found by
//!   discovery: Deployment, ReplicaSet, StatefulSet, CloneSet, Advanced StatefulSet, …);
//!   `selector`: the active pods it matches, expected the sum of their distinct controllers'
//!   replicas — a ReplicaSet owned by a Deployment counts the Deployment's. A budget created
//!   before its workload or pods converges once they exist: every pod change wakes the
//!   budgets of its namespace, and a budget with no pods is looked at again every
//!   [`RESYNC`]. `protectTotalReplicas` overrides the expected count. As OpenKruise's,
//!   the controller watches Deployments, StatefulSets, CloneSets and Advanced StatefulSets
//!   ([`WATCHED_WORKLOADS`]): one created, deleted or whose `spec.replicas` changed wakes
//!   the budgets that target or select it, so a scale-down's or the garbage collector's pod
//!   deletions are not refused for a count that no longer holds.
//! * **Annotations.** A pod without `pub.kruise.io/related-pub` gets it and
//!   `kruise.io/related-pub` (one merge patch).
//! * **Status.** Written only when it changed, as a merge patch conditioned on the
//!   budget's resourceVersion: a webhook replica's grant in between makes it conflict and
//!   retry on fresh data, never erase the grant.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{BoxStream, StreamExt as _};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use kruise_core::pods::selector::selector_matches;
use kruise_core::pods::{controller_ref, is_pod_active};
use kruise_runtime::errors::{ShellError, WriteError, is_not_found};
use kruise_runtime::events::{EventQueue, EventRecord, Recorder, pod_reference};
use kruise_runtime::status::write_namespaced_status;
use kruise_runtime::watch::{Watch, api_in, wait_for_crd};
use kruise_runtime::{RunOptions, run_controller, warm_until_leading};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};

use crate::api::v1beta1::PodUnavailableBudget;
use crate::api::{LEGACY_RELATED_PUB_ANNOTATION, RELATED_PUB_ANNOTATION};
use crate::plan::budget::{BudgetInput, PodState, plan};

/// The controller's name (`--controllers`, metrics).
pub const CONTROLLER_NAME: &str = "podunavailablebudget";
/// The event reporter, as OpenKruise names it.
pub const EVENT_REPORTER: &str = "podunavailablebudget-controller";
/// How often a budget is looked at again without a pod change (workload replicas are read,
/// not watched).
pub const RESYNC: Duration = Duration::from_secs(30);

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A shared shell step.
    #[error(transparent)]
    Shell(#[from] ShellError),
    /// Reading a workload.
    #[error("reading {what}: {source}")]
    Workload {
        /// The workload.
        what: String,
        /// What failed.
        #[source]
        source: kube::Error,
    },
    /// The budget's numbers do not resolve (an invalid percent).
    #[error("calculating the expected pods of {name}: {reason}")]
    Budget {
        /// The budget.
        name: String,
        /// Why.
        reason: String,
    },
}

impl kruise_runtime::ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::Shell(e) => e.category(),
            Error::Workload { .. } => "workload",
            Error::Budget { .. } => "budget",
        }
    }
    fn is_conflict(&self) -> bool {
        matches!(self, Error::Shell(e) if e.is_conflict())
    }
}

struct Shared {
    client: Client,
    pods: Store<Pod>,
    recorder: EventQueue,
    /// API resources found by discovery, by group/version/kind.
    resources: Mutex<HashMap<(String, String, String), ApiResource>>,
}

/// Runs the PodUnavailableBudget controller until `opts.shutdown` fires.
pub async fn run(client: Client, namespace: Option<&str>, opts: RunOptions) {
    let recorder = EventQueue::for_controller(client.clone(), EVENT_REPORTER, &opts.metrics);
    let (budgets, mut budget_stream) =
        Watch::<PodUnavailableBudget>::primary(client.clone(), namespace, &opts, &recorder)
            .reflect();
    let (pods, mut pod_stream) = Watch::<Pod>::new(client.clone(), namespace).reflect();
    if !warm_until_leading(&opts, &mut [&mut budget_stream, &mut pod_stream]).await {
        return;
    }
    let shared = Arc::new(Shared {
        client,
        pods,
        recorder,
        resources: Mutex::default(),
    });
    let all_budgets = budgets.clone();
    let budgets_of_workload = budgets.clone();
    let workloads = workload_changes(&shared.client, namespace, &opts.shutdown);
    let controller = Controller::for_stream(budget_stream, budgets)
        .reconcile_all_on(futures::stream::once(async {}))
        .watches_stream(pod_stream, move |pod: Pod| {
            let namespace = pod.namespace();
            all_budgets
                .state()
                .iter()
                .filter(|b| b.namespace() == namespace)
                .map(|b| ObjectRef::from(b.as_ref()))
                .collect::<Vec<_>>()
        })
        .reconcile_on(workloads.flat_map(move |workload| {
            let budgets = budgets_of_workload
                .state()
                .iter()
                .filter(|b| b.namespace() == workload.namespace() && concerns(b, &workload))
                .map(|b| ObjectRef::from(b.as_ref()))
                .collect::<Vec<_>>();
            futures::stream::iter(budgets)
        }));
    run_controller(controller, reconcile, shared, opts).await;
}

/// The workload kinds whose replicas a budget follows as they change, as OpenKruise's PUB
/// controller watches them: (apiVersion, kind, plural, the CRD that serves it).
pub const WATCHED_WORKLOADS: [(&str, &str, &str, Option<&str>); 4] = [
    ("apps/v1", "Deployment", "deployments", None),
    ("apps/v1", "StatefulSet", "statefulsets", None),
    (
        "apps.kruise.io/v1alpha1",
        "CloneSet",
        "clonesets",
        Some("clonesets.apps.kruise.io"),
    ),
    (
        "apps.kruise.io/v1beta1",
        "StatefulSet",
        "statefulsets",
        Some("statefulsets.apps.kruise.io"),
    ),
];

/// Whether a change of `workload` concerns `budget`: its `targetRef` names it (group, kind
/// and name: a Kruise StatefulSet is not an `apps` one; any version of the group), or its
/// selector matches the workload's pod template labels.
fn concerns(budget: &PodUnavailableBudget, workload: &DynamicObject) -> bool {
    fn group(api_version: &str) -> &str {
        api_version.rsplit_once('/').map_or("", |(group, _)| group)
    }
    if let Some(target) = &budget.spec.target_reference {
        return workload.types.as_ref().is_some_and(|t| {
            t.kind == target.kind && group(&t.api_version) == group(&target.api_version)
        }) && target.name == workload.name_any();
    }
    let Some(selector) = &budget.spec.selector else {
        return false;
    };
    let labels: BTreeMap<String, String> = workload
        .data
        .pointer("/spec/template/metadata/labels")
        .cloned()
        .and_then(|l| serde_json::from_value(l).ok())
        .unwrap_or_default();
    selector_matches(selector, &labels).unwrap_or(false)
}

/// The [`WATCHED_WORKLOADS`] created, deleted, or whose `spec.replicas` changed (a custom
/// kind watched once its CRD is installed). What their first lists hold is only
/// remembered: the first pass of every budget follows those lists anyway.
fn workload_changes(
    client: &Client,
    namespace: Option<&str>,
    shutdown: &tokio_util::sync::CancellationToken,
) -> BoxStream<'static, DynamicObject> {
    let streams = WATCHED_WORKLOADS.map(|(api_version, kind, plural, crd)| {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        let api: Api<DynamicObject> = api_in(client.clone(), namespace, &resource);
        let (client, shutdown) = (client.clone(), shutdown.clone());
        let installed = async move {
            match crd {
                Some(name) => wait_for_crd(&client, name, &shutdown).await,
                None => true,
            }
        };
        let replicas: HashMap<(Option<String>, String), i32> = HashMap::new();
        futures::stream::once(installed)
            .flat_map(move |installed| match installed {
                true => watcher(api.clone(), watcher::Config::default())
                    .default_backoff()
                    .boxed(),
                false => futures::stream::empty().boxed(),
            })
            .scan(replicas, move |replicas, event| {
                let changed = event.map(|event| match event {
                    watcher::Event::InitApply(object) => {
                        let key = (object.namespace(), object.name_any());
                        replicas.insert(key, replicas_of(&object));
                        None
                    }
                    watcher::Event::Apply(object) => {
                        let key = (object.namespace(), object.name_any());
                        let now = replicas_of(&object);
                        (replicas.insert(key, now) != Some(now)).then_some(object)
                    }
                    watcher::Event::Delete(object) => {
                        replicas.remove(&(object.namespace(), object.name_any()));
                        Some(object)
                    }
                    watcher::Event::Init | watcher::Event::InitDone => None,
                });
                futures::future::ready(Some(changed))
            })
            .filter_map(move |changed| {
                let changed = match changed {
                    Ok(object) => object,
                    Err(e) => {
                        // The watcher backs off and lists again; budgets resync meanwhile.
                        tracing::warn!(kind, error = %e, "watching workloads for budgets");
                        None
                    }
                };
                futures::future::ready(changed.map(|mut object| {
                    // `concerns` reads the kind; a watched list's items may omit it.
                    object.types = Some(kube::core::TypeMeta {
                        api_version: api_version.to_string(),
                        kind: kind.to_string(),
                    });
                    object
                }))
            })
            .boxed()
    });
    futures::stream::select_all(streams).boxed()
}

async fn reconcile(
    budget: Arc<PodUnavailableBudget>,
    shared: Arc<Shared>,
) -> Result<Action, Error> {
    let name = budget.name_any();
    let namespace = budget.namespace().unwrap_or_default();
    let (pods, workload_replicas) = observe(&budget, &namespace, &shared).await?;
    let expected = budget.protect_total_replicas().unwrap_or(workload_replicas);
    annotate(&shared.client, &namespace, &name, &pods).await?;

    let states: Vec<PodState> = pods.iter().map(|p| PodState::of(p)).collect();
    let last = budget.status.clone().unwrap_or_default();
    let now = Timestamp::now();
    let planned = plan(&BudgetInput {
        spec: &budget.spec,
        generation: budget.metadata.generation.unwrap_or(0),
        status: &last,
        pods: &states,
        expected,
        now,
    })
    .map_err(|e| Error::Budget {
        name: name.clone(),
        reason: e.to_string(),
    })?;
    for pod in &planned.extra {
        Recorder::new(&shared.recorder, pod_reference(Some(&namespace), pod)).record(
            EventRecord::warning(
                "NotDeleted",
                format!("Pod was expected by PUB {namespace}/{name} to be deleted but it wasn't"),
            ),
        );
    }
    write_namespaced_status(&shared.client, &*budget, &planned.status).await?;
    let wait = planned.requeue_after.map_or(RESYNC, |d| d.min(RESYNC));
    Ok(Action::requeue(wait))
}

/// The budget's active pods and the replicas of their workloads.
async fn observe(
    budget: &PodUnavailableBudget,
    namespace: &str,
    shared: &Shared,
) -> Result<(Vec<Arc<Pod>>, i32), Error> {
    let in_namespace = |selector: &LabelSelector| -> Vec<Arc<Pod>> {
        shared
            .pods
            .state()
            .into_iter()
            .filter(|p| p.namespace().as_deref() == Some(namespace) && is_pod_active(p.as_ref()))
            .filter(|p| {
                let labels = p.metadata.labels.clone().unwrap_or_default();
                selector_matches(selector, &labels).unwrap_or(false)
            })
            .collect()
    };
    if let Some(target) = &budget.spec.target_reference {
        let Some(workload) = get_workload(
            shared,
            namespace,
            &target.api_version,
            &target.kind,
            &target.name,
        )
        .await?
        else {
            return Ok((Vec::new(), 0));
        };
        let selector = workload
            .data
            .pointer("/spec/selector")
            .cloned()
            .and_then(|s| serde_json::from_value::<LabelSelector>(s).ok())
            .filter(|s| s.match_labels.is_some() || s.match_expressions.is_some());
        let pods = selector.as_ref().map(in_namespace).unwrap_or_default();
        return Ok((pods, replicas_of(&workload)));
    }
    let Some(selector) = &budget.spec.selector else {
        return Ok((Vec::new(), 0));
    };
    let pods = in_namespace(selector);
    if budget.protect_total_replicas().is_some() {
        return Ok((pods, 0));
    }
    let mut owners: BTreeMap<String, OwnerReference> = BTreeMap::new();
    for pod in &pods {
        if let Some(owner) = controller_ref(&pod.metadata) {
            owners
                .entry(owner.uid.clone())
                .or_insert_with(|| owner.clone());
        }
    }
    let mut counted: BTreeMap<String, i32> = BTreeMap::new();
    for owner in owners.values() {
        if let Some((uid, replicas)) = scale_of_owner(shared, namespace, owner).await? {
            counted.insert(uid, replicas);
        }
    }
    Ok((pods, counted.values().sum()))
}

/// The workload a pod's controller stands for (a Deployment for its ReplicaSets) and its
/// replicas; `None` when it is gone or being deleted.
fn scale_of_owner<'a>(
    shared: &'a Shared,
    namespace: &'a str,
    owner: &'a OwnerReference,
) -> BoxFuture<'a, Result<Option<(String, i32)>, Error>> {
    Box::pin(async move {
        let Some(workload) = get_workload(
            shared,
            namespace,
            &owner.api_version,
            &owner.kind,
            &owner.name,
        )
        .await?
        else {
            return Ok(None);
        };
        if workload.metadata.deletion_timestamp.is_some() {
            return Ok(None);
        }
        if owner.kind == "ReplicaSet"
            && kruise_core::pods::api_group(&owner.api_version) == "apps"
            && let Some(deployment) = controller_ref(&workload.metadata)
            && deployment.kind == "Deployment"
        {
            return scale_of_owner(shared, namespace, deployment).await;
        }
        Ok(Some((
            workload.uid().unwrap_or_default(),
            replicas_of(&workload),
        )))
    })
}

/// `spec.replicas`, 1 when unset (the API server's default for every scalable workload).
fn replicas_of(workload: &DynamicObject) -> i32 {
    workload
        .data
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .and_then(|r| i32::try_from(r).ok())
        .unwrap_or(1)
}

/// A workload by apiVersion, kind and name; `None` when it, or its kind, does not exist.
async fn get_workload(
    shared: &Shared,
    namespace: &str,
    api_version: &str,
    kind: &str,
    name: &str,
) -> Result<Option<DynamicObject>, Error> {
    let what = || format!("{kind} {namespace}/{name}");
    let (group, version) = match api_version.rsplit_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), api_version.to_string()),
    };
    let key = (group.clone(), version.clone(), kind.to_string());
    let cached = shared
        .resources
        .lock()
        .ok()
        .and_then(|r| r.get(&key).cloned());
    let resource = match cached {
        Some(r) => r,
        None => {
            let gvk = GroupVersionKind::gvk(&group, &version, kind);
            match kube::discovery::pinned_kind(&shared.client, &gvk).await {
                Ok((resource, _)) => {
                    if let Ok(mut resources) = shared.resources.lock() {
                        resources.insert(key, resource.clone());
                    }
                    resource
                }
                // The kind is not served (its CRD not installed): no workload.
                Err(kube::Error::Discovery(_)) => return Ok(None),
                Err(e) if is_not_found(&e) => return Ok(None),
                Err(source) => {
                    return Err(Error::Workload {
                        what: what(),
                        source,
                    });
                }
            }
        }
    };
    Api::<DynamicObject>::namespaced_with(shared.client.clone(), namespace, &resource)
        .get_opt(name)
        .await
        .map_err(|source| Error::Workload {
            what: what(),
            source,
        })
}

/// Writes the related-pub annotations on the pods that lack them.
async fn annotate(
    client: &Client,
    namespace: &str,
    budget: &str,
    pods: &[Arc<Pod>],
) -> Result<(), Error> {
    let api = Api::<Pod>::namespaced(client.clone(), namespace);
    for pod in pods {
        let annotated = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| {
                a.get(RELATED_PUB_ANNOTATION)
                    .or_else(|| a.get(LEGACY_RELATED_PUB_ANNOTATION))
            })
            .is_some_and(|v| !v.is_empty());
        if annotated {
            continue;
        }
        let name = pod.name_any();
        let body = json!({"metadata": {"annotations": {
            RELATED_PUB_ANNOTATION: budget, LEGACY_RELATED_PUB_ANNOTATION: budget}}});
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(ShellError::UpdatePod(WriteError::on(name)(e)).into()),
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn budget(spec: serde_json::Value) -> PodUnavailableBudget {
        serde_json::from_value(json!({
            "apiVersion": "policy.kruise.io/v1beta1", "kind": "PodUnavailableBudget",
            "metadata": {"name": "pub", "namespace": "default"}, "spec": spec
        }))
        .unwrap()
    }

    fn workload(
        api_version: &str,
        kind: &str,
        name: &str,
        labels: serde_json::Value,
    ) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"template": {"metadata": {"labels": labels}}}
        }))
        .unwrap()
    }

    #[test]
    fn a_target_reference_concerns_the_workload_of_its_group_kind_and_name_only() {
        let target = budget(json!({"targetRef": {
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet", "name": "web"}}));
        let no_labels = json!({});
        // Any version of the group.
        assert!(concerns(
            &target,
            &workload(
                "apps.kruise.io/v1alpha1",
                "StatefulSet",
                "web",
                no_labels.clone()
            )
        ));
        assert!(concerns(
            &target,
            &workload(
                "apps.kruise.io/v1beta1",
                "StatefulSet",
                "web",
                no_labels.clone()
            )
        ));
        // The `apps` StatefulSet of the same name is another workload.
        assert!(!concerns(
            &target,
            &workload("apps/v1", "StatefulSet", "web", no_labels.clone())
        ));
        assert!(!concerns(
            &target,
            &workload(
                "apps.kruise.io/v1beta1",
                "StatefulSet",
                "db",
                no_labels.clone()
            )
        ));
        assert!(!concerns(
            &target,
            &workload("apps.kruise.io/v1alpha1", "CloneSet", "web", no_labels)
        ));
    }

    #[test]
    fn a_selector_concerns_workloads_whose_pod_template_it_matches() {
        let selector = budget(json!({"selector": {"matchLabels": {"app": "web"}}}));
        assert!(concerns(
            &selector,
            &workload(
                "apps/v1",
                "Deployment",
                "any",
                json!({"app": "web", "tier": "x"})
            )
        ));
        assert!(!concerns(
            &selector,
            &workload("apps/v1", "Deployment", "any", json!({"app": "db"}))
        ));
    }
}
