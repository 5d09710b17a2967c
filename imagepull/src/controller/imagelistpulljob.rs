//! The ImageListPullJob controller shell (see [`crate::plan::imagelistpulljob`] for every
//! decision): watches ImageListPullJobs and the ImagePullJobs they control; creates and
//! deletes the children, writes the status, deletes a completed list after its TTL.

use std::sync::Arc;
use std::time::Duration;

use kruise_runtime::errors::{WriteError, is_not_found};
use kruise_runtime::events::{EventQueue, EventRecord, Recorder};
use kruise_runtime::status::write_status_if_changed;
use kruise_runtime::watch::Watch;
use kruise_runtime::{RunOptions, run_controller, warm_until_leading};
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt as _};

use super::{Error, REASON_INVALID_SPEC, Settings, cache_ready};
use crate::api::v1beta1::{ImageListPullJob, ImagePullJob};
use crate::api::validation::validate_imagelistpulljob;
use crate::api::{IMAGELISTPULLJOB_KIND, defaults};
use crate::plan::imagelistpulljob::{Action, plan};

/// The event reporter, as OpenKruise names it.
pub const EVENT_REPORTER: &str = "imagelistpulljob-controller";
/// How soon a reconcile that found the children's cache not yet filled is tried again.
const CACHE_REQUEUE: Duration = Duration::from_millis(500);

struct Shared {
    client: Client,
    children: Store<ImagePullJob>,
    recorder: EventQueue,
    settings: Settings,
}

/// Runs the ImageListPullJob controller until `opts.shutdown` fires.
pub async fn run(client: Client, settings: Settings, opts: RunOptions) {
    let ns = settings.namespace.clone();
    let recorder = EventQueue::for_controller(client.clone(), EVENT_REPORTER, &opts.metrics);
    let (lists, mut list_stream) =
        Watch::<ImageListPullJob>::primary(client.clone(), ns.as_deref(), &opts, &recorder)
            .reflect();
    let (children, mut child_stream) = Watch::<ImagePullJob>::new(client.clone(), ns.as_deref())
        .keep_only(|job: &ImagePullJob| {
            job.owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && o.kind == IMAGELISTPULLJOB_KIND)
        })
        .reflect();
    if !warm_until_leading(&opts, &mut [&mut list_stream, &mut child_stream]).await {
        return;
    }
    let shared = Arc::new(Shared {
        client,
        children,
        recorder,
        settings,
    });
    let controller = Controller::for_stream(list_stream, lists)
        .reconcile_all_on(futures::stream::once(async {}))
        .owns_stream(child_stream);
    run_controller(controller, reconcile, shared, opts).await;
}

async fn reconcile(original: Arc<ImageListPullJob>, shared: Arc<Shared>) -> Result<Requeue, Error> {
    if !cache_ready(&shared.children, CACHE_REQUEUE).await {
        return Ok(Requeue::requeue(CACHE_REQUEUE));
    }
    let now = (shared.settings.clock)();
    let namespace = original.namespace().unwrap_or_default();
    let name = original.name_any();
    let recorder = Recorder::about(&shared.recorder, &*original);
    if original.metadata.deletion_timestamp.is_some() {
        return Ok(Requeue::await_change());
    }
    let mut list = (*original).clone();
    defaults::default_imagelistpulljob(&mut list.spec);
    let errors = validate_imagelistpulljob(&list);
    if !errors.is_empty() {
        recorder.record(EventRecord::warning(
            REASON_INVALID_SPEC,
            kruise_compat::field::aggregate(&errors),
        ));
        return Ok(Requeue::await_change());
    }
    let uid = list.uid().unwrap_or_default();
    let children: Vec<ImagePullJob> = shared
        .children
        .state()
        .iter()
        .filter(|c| c.namespace().as_deref() == Some(namespace.as_str()))
        .filter(|c| kruise_core::pods::is_controlled_by(&c.metadata, &uid))
        .map(|c| (**c).clone())
        .collect();
    let plan = plan(&list, &children, now);
    let lists: Api<ImageListPullJob> = Api::namespaced(shared.client.clone(), &namespace);
    let jobs: Api<ImagePullJob> = Api::namespaced(shared.client.clone(), &namespace);
    for action in &plan.actions {
        match action {
            Action::Create(child) => {
                jobs.create(&PostParams::default(), child)
                    .await
                    .map_err(WriteError::on(format!("a child of {namespace}/{name}")))
                    .map_err(Error::Create)?;
            }
            Action::Delete(child) => match jobs.delete(child, &DeleteParams::background()).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => {
                    return Err(Error::Delete(WriteError {
                        name: child.clone(),
                        source: e,
                    }));
                }
            },
            Action::DeleteList => {
                return match lists.delete(&name, &DeleteParams::background()).await {
                    Ok(_) => Ok(Requeue::await_change()),
                    Err(e) if is_not_found(&e) => Ok(Requeue::await_change()),
                    Err(e) => Err(Error::Delete(WriteError { name, source: e })),
                };
            }
        }
    }
    write_status_if_changed(&lists, &original, &plan.status).await?;
    Ok(match plan.requeue_after {
        Some(d) => Requeue::requeue(d),
        None => Requeue::await_change(),
    })
}
