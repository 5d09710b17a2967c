//! The NodeImage controller shell (see [`crate::plan::nodeimage`] for every decision).
//!
//! NodeImages are the primary kind; a node event reconciles the NodeImage of its name. A
//! node without a NodeImage has nothing to reconcile, so node events also go to a small
//! creator loop that creates the NodeImage once the node has been Ready for the creation
//! delay. Nodes are cached reduced to their labels and Ready condition.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeStatus, Secret};
use kruise_runtime::errors::{WriteError, is_not_found};
use kruise_runtime::events::{EventQueue, EventRecord, Recorder};
use kruise_runtime::status::write_status_if_changed;
use kruise_runtime::watch::Watch;
use kruise_runtime::{RunOptions, run_controller, warm_until_leading};
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt as _};
use tokio::sync::mpsc;

use super::{Error, Settings, cache_ready};
use crate::api::REFERENCE_MODE_BATCH;
use crate::api::v1beta1::{ImagePullJob, NodeImage};
use crate::plan::nodeimage::{Action, NodeFacts, NodeImageInput, PULL_IMAGE_FAILED, plan};

/// The event reporter, as OpenKruise names it.
pub const EVENT_REPORTER: &str = "nodeimage-controller";
/// How soon a reconcile that found a cache not yet filled is tried again.
const CACHE_REQUEUE: Duration = Duration::from_millis(500);

struct Shared {
    client: Client,
    nodes: Store<Node>,
    jobs: Store<ImagePullJob>,
    recorder: EventQueue,
    settings: Settings,
}

/// Runs the NodeImage controller until `opts.shutdown` fires.
pub async fn run(client: Client, settings: Settings, opts: RunOptions) {
    let recorder = EventQueue::for_controller(client.clone(), EVENT_REPORTER, &opts.metrics);
    let (node_images, mut node_image_stream) =
        Watch::<NodeImage>::primary(client.clone(), None, &opts, &recorder).reflect();
    let (nodes, mut node_stream) = Watch::<Node>::new(client.clone(), None)
        .shrink(node_view)
        .reflect();
    let (jobs, mut job_stream) = Watch::<ImagePullJob>::new(client.clone(), None).reflect();
    if !warm_until_leading(
        &opts,
        &mut [&mut node_image_stream, &mut node_stream, &mut job_stream],
    )
    .await
    {
        return;
    }
    let shared = Arc::new(Shared {
        client,
        nodes: nodes.clone(),
        jobs,
        recorder,
        settings,
    });
    let (created_tx, created_rx) = mpsc::unbounded_channel::<String>();
    for node in nodes.state() {
        let _ = created_tx.send(node.name_any());
    }
    tokio::spawn(create_missing(
        shared.clone(),
        node_images.clone(),
        created_tx.clone(),
        created_rx,
        opts.shutdown.clone(),
    ));
    let all_node_images = node_images.clone();
    let controller = Controller::for_stream(node_image_stream, node_images)
        .reconcile_all_on(futures::stream::once(async {}))
        .watches_stream(node_stream, move |node: Node| {
            let _ = created_tx.send(node.name_any());
            Some(ObjectRef::<NodeImage>::new(&node.name_any()))
        })
        // A job created or gone changes which tags keep their owners: every NodeImage
        // holding one of its tags is looked at.
        .watches_stream(job_stream, move |job: ImagePullJob| {
            let uid = job.uid();
            all_node_images
                .state()
                .iter()
                .filter(|n| {
                    n.spec.images.values().any(|i| {
                        i.tags.iter().any(|t| {
                            t.owner_references
                                .iter()
                                .any(|o| o.uid == uid || o.name.as_deref() == Some(&job.name_any()))
                        })
                    })
                })
                .map(|n| ObjectRef::from(n.as_ref()))
                .collect::<Vec<_>>()
        });
    run_controller(controller, reconcile, shared, opts).await;
}

/// What the planner reads of a node: its labels, deletion and Ready condition.
fn node_view(node: &mut Node) {
    node.spec = None;
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .cloned();
    node.status = Some(NodeStatus {
        conditions: ready.map(|c| vec![c]),
        ..Default::default()
    });
    node.metadata.annotations = None;
}

fn facts(node: &Node) -> NodeFacts {
    let ready_since = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready" && c.status == "True"))
        .map(|c| {
            c.last_transition_time
                .as_ref()
                .map_or(jiff::Timestamp::UNIX_EPOCH, |t| t.0)
        });
    NodeFacts {
        labels: node.labels().clone(),
        ready_since,
        deleting: node.metadata.deletion_timestamp.is_some(),
    }
}

fn live_jobs(shared: &Shared) -> BTreeMap<(String, String), String> {
    shared
        .jobs
        .state()
        .iter()
        .map(|j| {
            (
                (j.namespace().unwrap_or_default(), j.name_any()),
                j.uid().unwrap_or_default(),
            )
        })
        .collect()
}

/// Creates the NodeImage of each named node that has none, once the node has been Ready
/// for the creation delay (a node not yet there is sent again when the delay ends).
async fn create_missing(
    shared: Arc<Shared>,
    node_images: Store<NodeImage>,
    again: mpsc::UnboundedSender<String>,
    mut names: mpsc::UnboundedReceiver<String>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let api: Api<NodeImage> = Api::all(shared.client.clone());
    while !cache_ready(&node_images, CACHE_REQUEUE).await
        || !cache_ready(&shared.nodes, CACHE_REQUEUE).await
    {
        if shutdown.is_cancelled() {
            return;
        }
    }
    loop {
        let name = tokio::select! {
            _ = shutdown.cancelled() => return,
            name = names.recv() => match name { Some(n) => n, None => return },
        };
        if node_images.get(&ObjectRef::new(&name)).is_some() {
            continue;
        }
        let Some(node) = shared.nodes.get(&ObjectRef::new(&name)) else {
            continue;
        };
        let facts = facts(&node);
        let plan = plan(&NodeImageInput {
            name: &name,
            node: Some(&facts),
            node_image: None,
            jobs: &BTreeMap::new(),
            secrets: &BTreeSet::new(),
            now: (shared.settings.clock)(),
            creation_delay: shared.settings.creation_delay,
        });
        if let Some(Action::Create(node_image)) = plan.actions.into_iter().next() {
            match api.create(&PostParams::default(), &node_image).await {
                Ok(_) => {}
                Err(e) if kruise_runtime::errors::is_already_exists(&e) => {}
                Err(e) => {
                    tracing::warn!(node = %name, error = %e, "creating its NodeImage");
                    resend_after(&again, name, Duration::from_secs(1));
                }
            }
        } else if let Some(wait) = plan.requeue_after {
            resend_after(&again, name, wait);
        }
    }
}

fn resend_after(again: &mpsc::UnboundedSender<String>, name: String, wait: Duration) {
    let again = again.clone();
    tokio::spawn(async move {
        tokio::time::sleep(wait).await;
        let _ = again.send(name);
    });
}

/// The non-batch pull secrets the NodeImage lists that still exist (read, not cached:
/// only NodeImages written before secrets were synced once per source list any).
async fn existing_secrets(
    shared: &Shared,
    node_image: &NodeImage,
) -> Result<BTreeSet<(String, String)>, Error> {
    let mut existing = BTreeSet::new();
    for secret in node_image
        .spec
        .images
        .values()
        .flat_map(|i| i.pull_secrets.iter())
        .filter(|s| s.mode != REFERENCE_MODE_BATCH)
    {
        let api: Api<Secret> = Api::namespaced(shared.client.clone(), &secret.namespace);
        match api.get_metadata_opt(&secret.name).await {
            Ok(Some(_)) => {
                existing.insert((secret.namespace.clone(), secret.name.clone()));
            }
            Ok(None) => {}
            // Unknown: kept, as OpenKruise keeps it.
            Err(e) if !is_not_found(&e) => {
                existing.insert((secret.namespace.clone(), secret.name.clone()));
            }
            Err(_) => {}
        }
    }
    Ok(existing)
}

async fn reconcile(node_image: Arc<NodeImage>, shared: Arc<Shared>) -> Result<Requeue, Error> {
    // A node or job missing from a cache still filling would read as gone (and delete a
    // NodeImage, or prune a tag): wait for both caches.
    if !cache_ready(&shared.nodes, CACHE_REQUEUE).await
        || !cache_ready(&shared.jobs, CACHE_REQUEUE).await
    {
        return Ok(Requeue::requeue(CACHE_REQUEUE));
    }
    let now = (shared.settings.clock)();
    let name = node_image.name_any();
    let node = shared.nodes.get(&ObjectRef::new(&name)).map(|n| facts(&n));
    let jobs = live_jobs(&shared);
    let secrets = existing_secrets(&shared, &node_image).await?;
    let plan = plan(&NodeImageInput {
        name: &name,
        node: node.as_ref(),
        node_image: Some(&node_image),
        jobs: &jobs,
        secrets: &secrets,
        now,
        creation_delay: shared.settings.creation_delay,
    });
    let recorder = Recorder::about(&shared.recorder, &*node_image);
    for event in &plan.extra {
        recorder.record(EventRecord::warning(
            PULL_IMAGE_FAILED,
            event.message.clone(),
        ));
        for owner in &event.owners {
            Recorder::new(&shared.recorder, owner.clone()).record(EventRecord::warning(
                PULL_IMAGE_FAILED,
                event.message.clone(),
            ));
        }
    }
    let api: Api<NodeImage> = Api::all(shared.client.clone());
    match plan.actions.into_iter().next() {
        None | Some(Action::Create(_)) => {}
        Some(Action::Delete) => match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => return Ok(Requeue::await_change()),
            Err(e) if is_not_found(&e) => return Ok(Requeue::await_change()),
            Err(e) => return Err(Error::Delete(WriteError { name, source: e })),
        },
        Some(Action::Update(updated)) => {
            api.replace(&name, &PostParams::default(), &updated)
                .await
                .map_err(WriteError::on(name.clone()))
                .map_err(Error::Update)?;
        }
        Some(Action::Status(status)) => {
            write_status_if_changed(&api, &node_image, &*status).await?;
        }
    }
    Ok(match plan.requeue_after {
        Some(d) => Requeue::requeue(d),
        None => Requeue::await_change(),
    })
}
