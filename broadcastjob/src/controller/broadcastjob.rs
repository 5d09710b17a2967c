//! The BroadcastJob controller shell (see [`crate::plan::broadcastjob`] for every decision).
//!
//! * **Cache only what it reads.** Pods through the `broadcastjob-controller-uid` label;
//!   nodes reduced to what the fit check reads (labels, taints, unschedulable,
//!   allocatable: [`crate::plan::fit::fit_view`]), and a node change wakes the unfinished
//!   jobs only when one of those changed, not on every status heartbeat.
//! * **No double creates.** A scale expectation per node is recorded before its pod is
//!   created and satisfied once a pod of the job for that node is in the cache (a pod bound
//!   by affinity counts before the scheduler binds it); while one is pending the planner
//!   does nothing.
//! * **Slow start.** Pod creations go out in batches of 1, 2, 4, … and stop at the first
//!   failure (`kruise_runtime::execute`).
//! * **Deadlines hold across restarts** (K#1409): every reconcile requeues for
//!   `activeDeadlineSeconds` from `status.startTime`, and a new leader reconciles every job.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash as _, Hasher as _};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_core::expectations::{Satisfaction, ScaleAction, ScaleExpectations, SharedExpectations};
use kruise_runtime::errors::{ShellError, WriteError, is_not_found};
use kruise_runtime::events::{EventQueue, EventRecord, Recorder};
use kruise_runtime::execute::{Lane, Scheduled, WRITE_CONCURRENCY, execute};
use kruise_runtime::scale_writes::ScaleWrites;
use kruise_runtime::status::write_namespaced_status;
use kruise_runtime::watch::Watch;
use kruise_runtime::{RunOptions, run_controller, warm_until_leading};
use kube::api::{Api, DeleteParams};
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt as _};

use super::{Error, REASON_INVALID_SPEC, Settings};
use crate::api::v1beta1::BroadcastJob;
use crate::api::validation::{to_message, validate_broadcastjob};
use crate::api::{BROADCASTJOB_UID_LABEL, defaults};
use crate::plan::broadcastjob::{Action, Input, assigned_node, is_finished, plan, reason};
use crate::plan::fit::fit_view;

/// The event reporter, as OpenKruise names it.
pub const EVENT_REPORTER: &str = "broadcastjob-controller";
/// How soon a job whose expectations are pending is looked at again.
const EXPECTATIONS_REQUEUE: Duration = Duration::from_millis(500);

struct Shared {
    client: Client,
    pods: Store<Pod>,
    nodes: Store<Node>,
    expectations: SharedExpectations<ScaleExpectations>,
    recorder: EventQueue,
    settings: Settings,
}

/// Runs the BroadcastJob controller until `opts.shutdown` fires.
pub async fn run(client: Client, settings: Settings, opts: RunOptions) {
    let ns = settings.namespace.as_deref();
    let recorder = EventQueue::for_controller(client.clone(), EVENT_REPORTER, &opts.metrics);
    let (jobs, mut job_stream) =
        Watch::<BroadcastJob>::primary(client.clone(), ns, &opts, &recorder).reflect();
    let (pods, mut pod_stream) = Watch::<Pod>::new(client.clone(), ns)
        .labels(BROADCASTJOB_UID_LABEL)
        .reflect();
    let (nodes, mut node_stream) = Watch::<Node>::new(client.clone(), None)
        .shrink(fit_view)
        .reflect();
    if !warm_until_leading(
        &opts,
        &mut [&mut job_stream, &mut pod_stream, &mut node_stream],
    )
    .await
    {
        return;
    }
    let shared = Arc::new(Shared {
        client,
        pods,
        nodes,
        expectations: SharedExpectations::new(ScaleExpectations::new(settings.expectation_timeout)),
        recorder,
        settings,
    });
    let fit_changes = only_fit_changes(node_stream, shared.nodes.clone());
    let all_jobs = jobs.clone();
    let controller = Controller::for_stream(job_stream, jobs)
        .reconcile_all_on(futures::stream::once(async {}))
        .owns_stream(pod_stream)
        .watches_stream(fit_changes, move |_: Node| {
            all_jobs
                .state()
                .iter()
                .filter(|job| !is_finished(job))
                .map(|job| ObjectRef::from(job.as_ref()))
                .collect::<Vec<_>>()
        });
    run_controller(controller, reconcile, shared, opts).await;
}

/// The node events whose fit-relevant fields changed, every first sight of a node, and every
/// deletion (the reflector has dropped the node from `store` by the time its event passes).
fn only_fit_changes(
    nodes: kruise_runtime::watch::TouchedStream<Node>,
    store: Store<Node>,
) -> kruise_runtime::watch::TouchedStream<Node> {
    let seen: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    nodes
        .filter(move |event| {
            let pass = match event {
                Ok(node) => {
                    let name = node.name_any();
                    let gone = store.get(&ObjectRef::new(&name)).is_none();
                    match seen.lock() {
                        Ok(mut seen) if gone => seen.remove(&name).is_some(),
                        Ok(mut seen) => {
                            let print = fit_fingerprint(node);
                            seen.insert(name, print) != Some(print)
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

/// A hash of what the fit check reads of a node.
fn fit_fingerprint(node: &Node) -> u64 {
    let mut h = DefaultHasher::new();
    node.metadata.labels.hash(&mut h);
    node.metadata.deletion_timestamp.is_some().hash(&mut h);
    if let Some(spec) = &node.spec {
        spec.unschedulable.hash(&mut h);
        for t in spec.taints.iter().flatten() {
            (&t.key, &t.value, &t.effect).hash(&mut h);
        }
    }
    if let Some(alloc) = node.status.as_ref().and_then(|s| s.allocatable.as_ref()) {
        for (k, v) in alloc {
            (k, &v.0).hash(&mut h);
        }
    }
    h.finish()
}

impl Scheduled for Action {
    fn lane(&self) -> Lane<'_> {
        match self {
            Action::CreatePod { .. } => Lane::SlowStart,
            Action::DeletePod { name, .. } => Lane::Group(name),
            Action::DeleteJob => Lane::Alone,
        }
    }
}

/// Marks pending creates (by node) and deletes (by pod name) the cache now shows as done.
fn observe_expectations(
    shared: &Shared,
    key: &str,
    pods: &[Arc<Pod>],
    now: jiff::Timestamp,
) -> Result<Satisfaction, Error> {
    shared
        .expectations
        .with(|exp| {
            // Creates are expected by node (the pod's name is the server's), deletes by name.
            exp.settle(key, now, |action, name| {
                let cached = pods.iter().find(|p| match action {
                    ScaleAction::Create => assigned_node(p).as_deref() == Some(name),
                    ScaleAction::Delete => p.metadata.name.as_deref() == Some(name),
                });
                action.seen_in(cached.map(|p| &p.metadata))
            })
        })
        .map_err(ShellError::from)
}

async fn reconcile(original: Arc<BroadcastJob>, shared: Arc<Shared>) -> Result<Requeue, Error> {
    let now = (shared.settings.clock)();
    let namespace = original.namespace().unwrap_or_default();
    let key = format!("{namespace}/{}", original.name_any());
    let recorder = Recorder::about(&shared.recorder, &*original);

    // Validate (the webhook normally did; defaulting again is idempotent).
    let mut job = (*original).clone();
    defaults::default_broadcastjob(&mut job.spec);
    let errors = validate_broadcastjob(&job);
    if !errors.is_empty() {
        recorder.record(EventRecord::warning(
            REASON_INVALID_SPEC,
            to_message(&errors),
        ));
        return Ok(Requeue::await_change());
    }

    // Observe.
    if shared.pods.wait_until_ready().await.is_err()
        || shared.nodes.wait_until_ready().await.is_err()
    {
        return Ok(Requeue::requeue(EXPECTATIONS_REQUEUE));
    }
    let uid = job.uid().unwrap_or_default();
    let pods: Vec<Arc<Pod>> = shared
        .pods
        .state()
        .into_iter()
        .filter(|p| {
            p.metadata.namespace.as_deref() == Some(namespace.as_str())
                && kruise_core::pods::is_controlled_by(&p.metadata, &uid)
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
    // A finished job only waits for its TTL: its pods and the nodes are not read.
    let finished = is_finished(&job);
    let pods: Vec<Pod> = match finished {
        true => Vec::new(),
        false => pods.iter().map(|p| (**p).clone()).collect(),
    };
    let mut nodes: Vec<Node> = match finished {
        true => Vec::new(),
        false => shared.nodes.state().iter().map(|n| (**n).clone()).collect(),
    };
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));

    // Plan.
    let plan = plan(&Input {
        job: &job,
        pods: &pods,
        nodes: &nodes,
        now,
        binding: shared.settings.pod_binding,
    });
    recorder.record_all(plan.events.iter().cloned());

    // Execute.
    let scale_writes = ScaleWrites::new(
        shared.client.clone(),
        &namespace,
        &shared.expectations,
        &key,
    );
    let job_api: Api<BroadcastJob> = Api::namespaced(shared.client.clone(), &namespace);
    let outcomes = execute(&plan.actions, WRITE_CONCURRENCY, |action| {
        let (scale_writes, job_api, recorder) = (&scale_writes, &job_api, &recorder);
        let job_name = job.name_any();
        async move {
            match action {
                Action::CreatePod { node, pod } => {
                    // Expected by node: the observe step finds the new pod by it.
                    let what = format!("pod for node {node}");
                    scale_writes
                        .create_recorded(pod, Some(node), recorder, &what)
                        .await?;
                    Ok(())
                }
                Action::DeletePod { name, .. } => {
                    let deleted = scale_writes.delete(name).await.map_err(|e| {
                        e.into_family(|source| Error::Delete(WriteError::on(name.as_str())(source)))
                    })?;
                    if deleted {
                        recorder.record(EventRecord::normal(
                            reason::SUCCESSFUL_DELETE,
                            format!("Delete pod: {name}"),
                        ));
                    }
                    Ok(())
                }
                Action::DeleteJob => {
                    match job_api.delete(&job_name, &DeleteParams::background()).await {
                        Ok(_) => Ok(()),
                        Err(e) if is_not_found(&e) => Ok(()),
                        Err(e) => Err(Error::Delete(WriteError {
                            name: job_name,
                            source: e,
                        })),
                    }
                }
            }
        }
    })
    .await;
    let deleted_job = plan.actions.contains(&Action::DeleteJob);
    let first_error = outcomes.into_iter().find_map(|(_, r)| r.err());

    // Status, after the writes.
    if !deleted_job {
        write_namespaced_status(&shared.client, &*original, &plan.status).await?;
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    Ok(match plan.requeue_after {
        Some(d) => Requeue::requeue(d.min(shared.settings.max_requeue)),
        None => Requeue::await_change(),
    })
}
