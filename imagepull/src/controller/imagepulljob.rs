//! The ImagePullJob controller shell (see [`crate::plan::imagepulljob`] and
//! [`crate::plan::secrets`] for every decision).
//!
//! * **Finalizer** `apps.kruise.io/deletion-protection`: added first, removed once the
//!   job's secret copies are released (on deletion, and once it completed).
//! * **NodeImage writes** replace the cached object (its `resourceVersion` the
//!   precondition), so a stale cache costs a conflict, never a lost tag. Until the cache
//!   shows each write, the job waits (an expectation per job: two jobs on one node never
//!   wait on each other, K#1528).
//! * **Watches**: ImagePullJobs and NodeImages (a NodeImage event wakes the unfinished
//!   jobs it concerns, [`crate::plan::wakeups`]), and Secrets' metadata only (a change to
//!   a secret wakes the unfinished jobs of its namespace that name it, so the copy follows
//!   the source at once). Pods (for `podSelector`) and secrets' data are read when a job
//!   needs them, not cached.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kruise_core::pods::selector::format_label_selector;
use kruise_runtime::errors::{WriteError, is_already_exists, is_not_found};
use kruise_runtime::events::{EventQueue, EventRecord, Recorder};
use kruise_runtime::status::write_status_if_changed;
use kruise_runtime::watch::Watch;
use kruise_runtime::{RunOptions, run_controller, warm_until_leading};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, ResourceExt as _};

use super::{Error, REASON_INVALID_SPEC, Settings, cache_ready};
use crate::api::image::ImageRef;
use crate::api::v1beta1::{ImagePullJob, NodeImage};
use crate::api::validation::validate_imagepulljob;
use crate::api::{PROTECTION_FINALIZER, defaults};
use crate::plan::imagepulljob::{Finished, PlanInput, finished, plan, target_nodes};
use crate::plan::secrets::{self, SecretAction, SecretSyncInput};
use crate::plan::wakeups::{Fingerprint, changes, fingerprint};

/// The event reporter, as OpenKruise names it.
pub const EVENT_REPORTER: &str = "imagepulljob-controller";
/// How soon a job waiting for its writes to show in the cache is looked at again.
const EXPECTATIONS_REQUEUE: Duration = Duration::from_millis(500);
/// How long a job waits for a write to show before it plans anyway.
const EXPECTATION_TIMEOUT: Duration = Duration::from_secs(5);

/// Per job: the NodeImages it wrote, each with the `resourceVersion` it had before the
/// write — the write shows once the cache holds another.
type Pending = HashMap<String, (Instant, Vec<(String, Option<String>)>)>;

struct Shared {
    client: Client,
    node_images: Store<NodeImage>,
    pending: Mutex<Pending>,
    recorder: EventQueue,
    settings: Settings,
}

/// Runs the ImagePullJob controller until `opts.shutdown` fires.
pub async fn run(client: Client, settings: Settings, opts: RunOptions) {
    let ns = settings.namespace.clone();
    let recorder = EventQueue::for_controller(client.clone(), EVENT_REPORTER, &opts.metrics);
    let (jobs, mut job_stream) =
        Watch::<ImagePullJob>::primary(client.clone(), ns.as_deref(), &opts, &recorder).reflect();
    let (node_images, mut node_image_stream) =
        Watch::<NodeImage>::new(client.clone(), None).reflect();
    if !warm_until_leading(&opts, &mut [&mut job_stream, &mut node_image_stream]).await {
        return;
    }
    let shared = Arc::new(Shared {
        client,
        node_images,
        pending: Mutex::new(HashMap::new()),
        recorder,
        settings,
    });
    let all_jobs = jobs.clone();
    let cached_node_images = shared.node_images.clone();
    let prints: Mutex<HashMap<String, Fingerprint>> = Mutex::default();
    let jobs_of_secret = jobs.clone();
    let secret_changes = secret_changes(&shared.client, ns.as_deref());
    let controller = Controller::for_stream(job_stream, jobs)
        .reconcile_all_on(futures::stream::once(async {}))
        .watches_stream(node_image_stream, move |node_image: NodeImage| {
            let name = node_image.name_any();
            // The store already reflects the event: a NodeImage missing from it is gone.
            let present = cached_node_images.get(&ObjectRef::new(&name)).is_some();
            let changed = {
                let mut prints = prints.lock().unwrap_or_else(PoisonError::into_inner);
                if present {
                    let new = fingerprint(&node_image);
                    prints
                        .insert(name, new.clone())
                        .and_then(|old| changes(&old, &new))
                } else {
                    prints.remove(&name);
                    None
                }
            };
            all_jobs
                .state()
                .iter()
                .filter(|j| {
                    j.status
                        .as_ref()
                        .is_none_or(|s| s.completion_time.is_none())
                })
                .filter(|j| match (&changed, ImageRef::parse(&j.spec.image)) {
                    (Some(c), Ok(image)) => c.concern(&image.familiar_name(), &image.api_tag()),
                    _ => true,
                })
                .map(|j| ObjectRef::from(j.as_ref()))
                .collect::<Vec<_>>()
        })
        .watches_stream(secret_changes, move |secret: PartialObjectMeta<Secret>| {
            let (namespace, name) = (secret.namespace(), secret.name_any());
            jobs_of_secret
                .state()
                .iter()
                .filter(|j| {
                    j.namespace() == namespace
                        && j.spec.template.pull_secrets.contains(&name)
                        && j.status
                            .as_ref()
                            .is_none_or(|s| s.completion_time.is_none())
                })
                .map(|j| ObjectRef::from(j.as_ref()))
                .collect::<Vec<_>>()
        });
    run_controller(controller, reconcile, shared, opts).await;
}

/// Secrets that changed, metadata only (their data is read when a job needs it): a job's
/// copy follows its source as OpenKruise's, which caches every Secret, does.
fn secret_changes(
    client: &Client,
    namespace: Option<&str>,
) -> impl futures::Stream<Item = Result<PartialObjectMeta<Secret>, watcher::Error>> + Send + 'static
{
    let api: Api<PartialObjectMeta<Secret>> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    watcher(api, watcher::Config::default())
        .default_backoff()
        .touched_objects()
}

/// Whether the cache shows every NodeImage write of `key` (or they are too old to wait for).
fn writes_observed(shared: &Shared, key: &str) -> bool {
    // The map holds plain data: a panic elsewhere while it was locked leaves it usable.
    let mut pending = shared
        .pending
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some((since, writes)) = pending.get(key) else {
        return true;
    };
    let observed = writes.iter().all(|(name, before)| {
        shared
            .node_images
            .get(&ObjectRef::new(name))
            .is_none_or(|n| n.metadata.resource_version != *before)
    });
    if observed || since.elapsed() > EXPECTATION_TIMEOUT {
        pending.remove(key);
        return true;
    }
    false
}

async fn reconcile(original: Arc<ImagePullJob>, shared: Arc<Shared>) -> Result<Requeue, Error> {
    let now = (shared.settings.clock)();
    let namespace = original.namespace().unwrap_or_default();
    let name = original.name_any();
    let key = format!("{namespace}/{name}");
    let recorder = Recorder::about(&shared.recorder, &*original);
    let api: Api<ImagePullJob> = Api::namespaced(shared.client.clone(), &namespace);
    // A NodeImage missing from a cache still filling would read as a node not targeted.
    if !cache_ready(&shared.node_images, EXPECTATIONS_REQUEUE).await
        || !writes_observed(&shared, &key)
    {
        return Ok(Requeue::requeue(EXPECTATIONS_REQUEUE));
    }

    // Deleting, or completed: release the secret copies and the finalizer; a completed
    // job then waits for its TTL.
    let completed = original
        .status
        .as_ref()
        .is_some_and(|s| s.completion_time.is_some());
    if original.metadata.deletion_timestamp.is_some() || completed {
        finalize(&shared, &api, &original).await?;
        if original.metadata.deletion_timestamp.is_some() {
            return Ok(Requeue::await_change());
        }
        return Ok(match finished(&original, now) {
            Finished::Delete => {
                match api.delete(&name, &DeleteParams::background()).await {
                    Ok(_) => {}
                    Err(e) if is_not_found(&e) => {}
                    Err(e) => return Err(Error::Delete(WriteError { name, source: e })),
                }
                Requeue::await_change()
            }
            Finished::RequeueAfter(d) => Requeue::requeue(d),
            Finished::Keep => Requeue::await_change(),
        });
    }
    if !original
        .finalizers()
        .iter()
        .any(|f| f == PROTECTION_FINALIZER)
    {
        let mut finalizers = original.finalizers().to_vec();
        finalizers.push(PROTECTION_FINALIZER.into());
        set_finalizers(&api, &original, finalizers).await?;
        return Ok(Requeue::await_change());
    }

    // Validate (the webhook normally did; defaulting again is idempotent).
    let mut job = (*original).clone();
    defaults::default_imagepulljob(&mut job.spec);
    let errors = validate_imagepulljob(&job);
    if !errors.is_empty() {
        recorder.record(EventRecord::warning(
            REASON_INVALID_SPEC,
            kruise_compat::field::aggregate(&errors),
        ));
        return Ok(Requeue::await_change());
    }

    // Observe.
    let node_images: Vec<NodeImage> = shared
        .node_images
        .state()
        .iter()
        .map(|n| (**n).clone())
        .collect();
    let pods = match &job.spec.template.pod_selector {
        Some(selector) => {
            let api: Api<Pod> = Api::namespaced(shared.client.clone(), &namespace);
            let params =
                ListParams::default().labels(&format_label_selector(&selector.label_selector));
            api.list(&params)
                .await
                .map_err(WriteError::on(format!("pods of {key}")))
                .map_err(Error::Read)?
                .items
        }
        None => Vec::new(),
    };
    let targets = target_nodes(&job, &node_images, &pods);
    let by_name: BTreeMap<&str, &NodeImage> = node_images
        .iter()
        .filter_map(|n| n.metadata.name.as_deref().map(|k| (k, n)))
        .collect();
    let targets: Vec<&NodeImage> = targets
        .iter()
        .filter_map(|t| by_name.get(t.as_str()).copied())
        .collect();
    let secret_sync = sync_secrets(&shared, &job, true).await?;

    // Plan.
    let tag_settings = shared.settings.tag_settings();
    let plan = match plan(&PlanInput {
        job: &job,
        node_images: targets,
        secrets: &secret_sync.refs,
        hold_writes: secret_sync.creating,
        now,
        tag_settings,
    }) {
        Ok(plan) => plan,
        Err(e) => {
            recorder.record(EventRecord::warning(REASON_INVALID_SPEC, e.to_string()));
            return Ok(Requeue::await_change());
        }
    };

    // Execute: NodeImage writes, then the status.
    let node_image_api: Api<NodeImage> = Api::all(shared.client.clone());
    let mut written = Vec::new();
    let mut first_error = None;
    for write in &plan.actions {
        let Some(cached) = by_name.get(write.node_image.as_str()) else {
            continue;
        };
        let mut updated = (*cached).clone();
        updated
            .spec
            .images
            .insert(write.image.clone(), write.spec.clone());
        match node_image_api
            .replace(&write.node_image, &PostParams::default(), &updated)
            .await
        {
            Ok(_) => written.push((write.node_image.clone(), write.resource_version.clone())),
            Err(e) => {
                first_error = Some(Error::Update(WriteError {
                    name: write.node_image.clone(),
                    source: e,
                }));
                break;
            }
        }
    }
    if !written.is_empty() {
        shared
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key.clone(), (Instant::now(), written));
    }
    write_status_if_changed(&api, &original, &plan.status).await?;
    if let Some(e) = first_error {
        return Err(e);
    }
    Ok(match (secret_sync.creating, plan.requeue_after) {
        (true, _) => Requeue::requeue(EXPECTATIONS_REQUEUE),
        (false, Some(d)) => Requeue::requeue(d),
        (false, None) => Requeue::await_change(),
    })
}

/// Releases the job's secret copies, then drops its finalizer.
async fn finalize(
    shared: &Shared,
    api: &Api<ImagePullJob>,
    job: &ImagePullJob,
) -> Result<(), Error> {
    if !job.finalizers().iter().any(|f| f == PROTECTION_FINALIZER) {
        return Ok(());
    }
    sync_secrets(shared, job, false).await?;
    let finalizers = job
        .finalizers()
        .iter()
        .filter(|f| *f != PROTECTION_FINALIZER)
        .cloned()
        .collect();
    set_finalizers(api, job, finalizers).await
}

async fn set_finalizers(
    api: &Api<ImagePullJob>,
    job: &ImagePullJob,
    finalizers: Vec<String>,
) -> Result<(), Error> {
    let patch = serde_json::json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": job.resource_version(),
    }});
    match api
        .patch(
            &job.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(Error::Update(WriteError {
            name: job.name_any(),
            source: e,
        })),
    }
}

/// Plans and writes the job's secret copies; returns the plan (its references for the
/// NodeImages, whether a copy is still being created).
async fn sync_secrets(
    shared: &Shared,
    job: &ImagePullJob,
    active: bool,
) -> Result<secrets::SecretSync, Error> {
    let namespace = job.namespace().unwrap_or_default();
    let agent_namespace = shared.settings.agent_namespace.as_str();
    let pull_secrets = &job.spec.template.pull_secrets;
    if pull_secrets.is_empty() && active {
        return Ok(secrets::SecretSync::default());
    }
    let source_api: Api<Secret> = Api::namespaced(shared.client.clone(), &namespace);
    let mut sources = BTreeMap::new();
    if active {
        for name in pull_secrets {
            if let Some(secret) = source_api
                .get_opt(name)
                .await
                .map_err(WriteError::on(format!("{namespace}/{name}")))
                .map_err(Error::Read)?
            {
                sources.insert(name.clone(), secret);
            }
        }
    }
    let agent_api: Api<Secret> = Api::namespaced(shared.client.clone(), agent_namespace);
    let synced = if namespace == agent_namespace {
        Vec::new()
    } else {
        agent_api
            .list(&ListParams::default())
            .await
            .map_err(WriteError::on(format!("secrets of {agent_namespace}")))
            .map_err(Error::Read)?
            .items
    };
    let sync = secrets::plan(&SecretSyncInput {
        job_namespace: &namespace,
        job_name: &job.name_any(),
        pull_secrets,
        active,
        agent_namespace,
        sources: &sources,
        synced: &synced,
    });
    for action in &sync.actions {
        let result = match action {
            SecretAction::Create(secret) => create_copy(shared, &agent_api, secret)
                .await
                .map_err(WriteError::on(format!("a copy of a secret of {namespace}")))
                .map_err(Error::Create),
            SecretAction::Update(secret) => {
                let name = secret.name_any();
                agent_api
                    .replace(&name, &PostParams::default(), secret)
                    .await
                    .map(|_| ())
                    .map_err(WriteError::on(name))
                    .map_err(Error::Update)
            }
            SecretAction::Delete { name } => {
                match agent_api.delete(name, &DeleteParams::default()).await {
                    Ok(_) => Ok(()),
                    Err(e) if is_not_found(&e) => Ok(()),
                    Err(e) => Err(Error::Delete(WriteError {
                        name: name.clone(),
                        source: e,
                    })),
                }
            }
        };
        result?;
    }
    Ok(sync)
}

/// Creates a secret copy in the agent namespace. Where no install made that namespace
/// (OpenKruise's creates `kruise-daemon-config`; a cluster without it would fail every job
/// with pull secrets), the first copy creates it.
async fn create_copy(
    shared: &Shared,
    agent_api: &Api<Secret>,
    secret: &Secret,
) -> Result<(), kube::Error> {
    match agent_api.create(&PostParams::default(), secret).await {
        // On a create, only the namespace can be missing.
        Err(e) if is_not_found(&e) => {}
        other => return other.map(|_| ()),
    }
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(shared.settings.agent_namespace.clone()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    match Api::<Namespace>::all(shared.client.clone())
        .create(&PostParams::default(), &namespace)
        .await
    {
        Ok(_) => tracing::info!(
            namespace = %shared.settings.agent_namespace,
            "created the namespace for pull secret copies"
        ),
        Err(e) if is_already_exists(&e) => {}
        Err(e) => return Err(e),
    }
    agent_api
        .create(&PostParams::default(), secret)
        .await
        .map(|_| ())
}
