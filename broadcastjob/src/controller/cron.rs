//! The AdvancedCronJob controller shell (see [`crate::plan::cron`] for every decision).
//!
//! * **Cache only what it owns.** Jobs, BroadcastJobs and ImageListPullJobs are cached only
//!   when an AdvancedCronJob controls them (no label marks them, as in OpenKruise);
//!   ImageListPullJobs once their CRD is installed (another family's kind).
//! * **One child per run, even across a restart.** A child's name is its run's time; a
//!   create answered `AlreadyExists` is the run already done.
//! * **Its clock is a setting** ([`Settings::clock`]), and it looks at its schedule at
//!   least every [`Settings::max_requeue`].

use std::sync::Arc;

use futures::FutureExt as _;
use k8s_openapi::api::batch::v1::Job;
use kruise_runtime::errors::{WriteError, is_already_exists, is_not_found};
use kruise_runtime::events::{EventQueue, EventRecord, Recorder};
use kruise_runtime::status::write_namespaced_status;
use kruise_runtime::watch::{DecodeGuard, Watch};
use kruise_runtime::{RunOptions, run_controller, warm_until_leading};
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt as _};

use super::{Error, REASON_INVALID_SPEC, Settings};
use crate::api::imagelistpulljob::{IMAGELISTPULLJOB_CRD, ImageListPullJob};
use crate::api::v1beta1::{AdvancedCronJob, BroadcastJob};
use crate::api::validation::{to_message, validate_advancedcronjob};
use crate::api::{ADVANCEDCRONJOB_KIND, GROUP, TemplateKind, defaults};
use crate::plan::cron::{
    Action, Child, Input, broadcastjob_child, image_list_pull_job_child, job_child,
    new_broadcastjob, new_image_list_pull_job, new_job, plan, reason, template_kind,
};

/// The event reporter.
pub const EVENT_REPORTER: &str = "advancedcronjob-controller";
/// Reason of the Warning event for an `imageListPullJobTemplate` in a cluster without the
/// ImageListPullJob CRD.
pub const REASON_MISSING_KIND: &str = "MissingKind";

struct Shared {
    client: Client,
    jobs: Store<Job>,
    broadcastjobs: Store<BroadcastJob>,
    /// Not ready while the ImageListPullJob CRD is not installed.
    image_list_pull_jobs: Store<ImageListPullJob>,
    recorder: EventQueue,
    settings: Settings,
}

/// Whether an AdvancedCronJob (either version) controls the object.
fn controlled_by_cron(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> bool {
    kruise_core::pods::controller_ref(meta).is_some_and(|o| {
        o.kind == ADVANCEDCRONJOB_KIND && kruise_core::pods::api_group(&o.api_version) == GROUP
    })
}

/// Runs the AdvancedCronJob controller until `opts.shutdown` fires.
pub async fn run(client: Client, settings: Settings, opts: RunOptions) {
    let ns = settings.namespace.as_deref();
    let recorder = EventQueue::for_controller(client.clone(), EVENT_REPORTER, &opts.metrics);
    let (crons, mut cron_stream) =
        Watch::<AdvancedCronJob>::primary(client.clone(), ns, &opts, &recorder).reflect();
    let (jobs, mut job_stream) = Watch::<Job>::new(client.clone(), ns)
        .keep_only(|job: &Job| controlled_by_cron(&job.metadata))
        .reflect();
    // The BroadcastJob controller reports undecodable BroadcastJobs; this watch only logs them.
    let (broadcastjobs, mut bcj_stream) = Watch::<BroadcastJob>::new(client.clone(), ns)
        .guarded(DecodeGuard::logging_only())
        .keep_only(|job: &BroadcastJob| controlled_by_cron(&job.metadata))
        .reflect();
    // Another family's kind: watched once its CRD is installed.
    let (image_list_pull_jobs, mut ilpj_stream) =
        Watch::<ImageListPullJob>::new(client.clone(), ns)
            .guarded(DecodeGuard::logging_only())
            .keep_only(|job: &ImageListPullJob| controlled_by_cron(&job.metadata))
            .after_crd(IMAGELISTPULLJOB_CRD, opts.shutdown.clone())
            .reflect();
    if !warm_until_leading(
        &opts,
        &mut [
            &mut cron_stream,
            &mut job_stream,
            &mut bcj_stream,
            &mut ilpj_stream,
        ],
    )
    .await
    {
        return;
    }
    let shared = Arc::new(Shared {
        client,
        jobs,
        broadcastjobs,
        image_list_pull_jobs,
        recorder,
        settings,
    });
    let controller = Controller::for_stream(cron_stream, crons)
        .reconcile_all_on(futures::stream::once(async {}))
        .owns_stream(job_stream)
        .owns_stream(bcj_stream)
        .owns_stream(ilpj_stream);
    run_controller(controller, reconcile, shared, opts).await;
}

/// The children of `uid` in `namespace` from `store`.
fn children_in<K>(
    store: &Store<K>,
    namespace: &str,
    uid: &str,
    child: fn(&K) -> Child,
) -> Vec<Child>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    store
        .state()
        .iter()
        .filter(|o| {
            o.meta().namespace.as_deref() == Some(namespace)
                && kruise_core::pods::is_controlled_by(o.meta(), uid)
        })
        .map(|o| child(o))
        .collect()
}

async fn reconcile(original: Arc<AdvancedCronJob>, shared: Arc<Shared>) -> Result<Requeue, Error> {
    let now = (shared.settings.clock)();
    let namespace = original.namespace().unwrap_or_default();
    let recorder = Recorder::about(&shared.recorder, &*original);

    let mut cron = (*original).clone();
    defaults::default_advancedcronjob(&mut cron.spec);
    let errors = validate_advancedcronjob(&cron);
    if !errors.is_empty() {
        recorder.record(EventRecord::warning(
            REASON_INVALID_SPEC,
            to_message(&errors),
        ));
        return Ok(Requeue::await_change());
    }
    let uid = cron.uid().unwrap_or_default();
    let children = match template_kind(&cron) {
        TemplateKind::Job => children_in(&shared.jobs, &namespace, &uid, job_child),
        TemplateKind::BroadcastJob => {
            children_in(&shared.broadcastjobs, &namespace, &uid, broadcastjob_child)
        }
        TemplateKind::ImageListPullJob => {
            let ready = shared
                .image_list_pull_jobs
                .wait_until_ready()
                .now_or_never()
                .is_some_and(|r| r.is_ok());
            if !ready {
                recorder.record(EventRecord::warning(
                    REASON_MISSING_KIND,
                    format!("{IMAGELISTPULLJOB_CRD} is not installed: no ImageListPullJob can run"),
                ));
                return Ok(Requeue::requeue(shared.settings.max_requeue));
            }
            children_in(
                &shared.image_list_pull_jobs,
                &namespace,
                &uid,
                image_list_pull_job_child,
            )
        }
        TemplateKind::Unknown(_) => return Ok(Requeue::await_change()),
    };
    let plan = plan(&Input {
        cron: &cron,
        children: &children,
        now,
        default_zone: &shared.settings.default_zone,
    });
    recorder.record_all(plan.events.iter().cloned());

    let mut status = plan.status.clone();
    for action in &plan.actions {
        match action {
            Action::DeleteChild { name, .. } => {
                delete_child(&shared, &cron, &namespace, name).await?;
                recorder.record(EventRecord::normal(
                    reason::SUCCESSFUL_DELETE,
                    format!("Deleted job {name}"),
                ));
            }
            Action::CreateChild { name, scheduled } => {
                match create_child(&shared, &cron, &namespace, name, *scheduled).await {
                    Ok(true) => recorder.record(EventRecord::normal(
                        reason::SUCCESSFUL_CREATE,
                        format!("Created job {name}"),
                    )),
                    Ok(false) => {}
                    Err(e) => {
                        recorder.record(EventRecord::warning(
                            reason::FAILED_CREATE,
                            format!("Error creating job {name}: {e}"),
                        ));
                        return Err(e);
                    }
                }
                // The run is taken even before its child shows in the cache.
                status.last_schedule_time = Some(
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(*scheduled),
                );
            }
        }
    }
    write_namespaced_status(&shared.client, &*original, &status).await?;
    // At the next run, and at least every `max_requeue` (also when paused or stuck on
    // missed runs), so a clock that moved is caught up with.
    let max = shared.settings.max_requeue;
    Ok(Requeue::requeue(
        plan.requeue_after.map_or(max, |d| d.min(max)),
    ))
}

async fn delete_child(
    shared: &Shared,
    cron: &AdvancedCronJob,
    namespace: &str,
    name: &str,
) -> Result<(), Error> {
    let params = DeleteParams::background();
    let client = shared.client.clone();
    let result = match template_kind(cron) {
        TemplateKind::Job => Api::<Job>::namespaced(client, namespace)
            .delete(name, &params)
            .await
            .map(|_| ()),
        TemplateKind::ImageListPullJob => Api::<ImageListPullJob>::namespaced(client, namespace)
            .delete(name, &params)
            .await
            .map(|_| ()),
        _ => Api::<BroadcastJob>::namespaced(client, namespace)
            .delete(name, &params)
            .await
            .map(|_| ()),
    };
    match result {
        Ok(()) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(Error::Delete(WriteError {
            name: name.to_string(),
            source: e,
        })),
    }
}

/// Creates the run's child; false when it exists already.
async fn create_child(
    shared: &Shared,
    cron: &AdvancedCronJob,
    namespace: &str,
    name: &str,
    scheduled: jiff::Timestamp,
) -> Result<bool, Error> {
    let params = PostParams::default();
    let result = if let Some(job) = new_job(cron, name, scheduled) {
        Api::<Job>::namespaced(shared.client.clone(), namespace)
            .create(&params, &job)
            .await
            .map(|_| ())
    } else if let Some(job) = new_image_list_pull_job(cron, name, scheduled) {
        Api::<ImageListPullJob>::namespaced(shared.client.clone(), namespace)
            .create(&params, &job)
            .await
            .map(|_| ())
    } else if let Some(job) = new_broadcastjob(cron, name, scheduled) {
        Api::<BroadcastJob>::namespaced(shared.client.clone(), namespace)
            .create(&params, &job)
            .await
            .map(|_| ())
    } else {
        return Ok(false);
    };
    match result {
        Ok(()) => Ok(true),
        // Created before (a restart between the create and the status write).
        Err(e) if is_already_exists(&e) => Ok(false),
        Err(e) => Err(Error::Create(WriteError {
            name: name.to_string(),
            source: e,
        })),
    }
}
