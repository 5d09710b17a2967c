//! The execute step: each write of the plan sent as the plan says, with OpenKruise's
//! events, the scale expectations that hold the next pass back until the cache shows it,
//! and the check of what the plan took from the cache alone ([`confirm_uncounted`]).

use super::*;

/// What one pass's writes need.
pub(super) struct Exec<'a> {
    pub pods_writer: &'a Writer<Pod>,
    /// Pod creates and deletes under the set's scale expectations.
    pub scale_writes: ScaleWrites<'a>,
    pub shared: &'a Shared,
    pub recorder: &'a Recorder,
    pub key: &'a str,
    pub ds: &'a DaemonSet,
    pub hash: &'a str,
    pub pods: &'a [Arc<CachedPod>],
    pub in_place_request: &'a (dyn Fn(&CachedPod) -> Option<UpdateRequest> + Sync),
    pub namespace: &'a str,
    pub now: Timestamp,
}

impl Exec<'_> {
    /// Sends `action`.
    pub(super) async fn perform(&self, action: &Action) -> Result<(), Error> {
        let Exec {
            pods_writer,
            ref scale_writes,
            shared,
            recorder,
            key,
            ds,
            hash,
            pods,
            in_place_request,
            namespace,
            now,
        } = *self;
        match action {
            Action::Create { node } => {
                let pod = new_pod(ds, node, hash, shared.settings.placement);
                // Expected by the name it gets: with surge the node already has a pod,
                // which must not count as the one created.
                let what = format!("pod for node {node}");
                scale_writes
                    .create_recorded(&pod, None, recorder, &what)
                    .await?;
                Ok(())
            }
            Action::UpdateInPlace { pod, otherwise } => {
                let updated =
                    in_place_update(pods_writer, shared, key, pods, pod, in_place_request, now)
                        .await;
                match &updated {
                    Ok(true) => recorder.record(
                        EventRecord::normal(
                            reason::SUCCESSFUL_UPDATE_POD_IN_PLACE,
                            format!("successfully update pod {pod} in-place"),
                        )
                        .related_to(Some(pod_reference(Some(namespace), pod))),
                    ),
                    Ok(false) | Err(Error::Busy(_)) => {}
                    Err(e) => recorder.record(EventRecord::warning(
                        reason::FAILED_UPDATE_POD_IN_PLACE,
                        format!("failed to update pod {pod} in-place(revision {hash}): {e}"),
                    )),
                }
                // Not in place after all (the change needs a new pod): taken away as
                // the plan says, and recreated.
                match (updated?, otherwise) {
                    (true, _) | (false, Removal::Held) => Ok(()),
                    (false, Removal::PrepareDelete) => prepare_delete(pods_writer, pod, now).await,
                    (false, Removal::Delete) => delete_pod(scale_writes, recorder, pod).await,
                }
            }
            Action::PrepareDelete { pod } => prepare_delete(pods_writer, pod, now).await,
            Action::Delete { pod } => delete_pod(scale_writes, recorder, pod).await,
        }
    }
}

impl Scheduled for Action {
    fn lane(&self) -> Lane<'_> {
        match self {
            Action::Create { .. } => Lane::SlowStart,
            Action::Delete { pod }
            | Action::PrepareDelete { pod }
            | Action::UpdateInPlace { pod, .. } => Lane::Group(pod),
        }
    }
}

/// Keeps back each action of `plan` no budget counted because its old pod looked unavailable
/// in the cache, when the pod read from the API is available after all (the cache had not
/// yet seen it become Ready): acting would take down, or surge beside, one available pod
/// more than maxUnavailable or maxSurge allow. True when any was kept back; the pass runs
/// again once the cache has caught up. One read per such action, only while a rollout
/// meets unavailable old pods.
pub(super) async fn confirm_uncounted(
    pod_api: &Api<Pod>,
    plan: &mut crate::plan::Plan,
    min_ready_seconds: i64,
) -> Result<bool, Error> {
    let min_ready_seconds = i32::try_from(min_ready_seconds).unwrap_or(i32::MAX);
    let mut held = false;
    for uncounted in std::mem::take(&mut plan.extra.uncounted) {
        let pod = pod_api
            .get_opt(&uncounted.pod)
            .await
            .map_err(|source| Error::ReadPod(WriteError::on(uncounted.pod.clone())(source)))?;
        let available = pod.is_some_and(|pod| {
            pod.metadata.deletion_timestamp.is_none()
                && kruise_core::pods::is_pod_available(&pod, min_ready_seconds, Timestamp::now())
        });
        if available {
            plan.actions.retain(|a| *a != uncounted.action);
            held = true;
        }
    }
    Ok(held)
}

/// Marks `pod` `PreparingDelete`: its preDelete hook holds it.
async fn prepare_delete(pods_writer: &Writer<Pod>, pod: &str, now: Timestamp) -> Result<(), Error> {
    let patch = state_patch(LifecycleState::PreparingDelete, now, None);
    pods_writer
        .patch_strategic(pod, &patch)
        .await
        .map(|_| ())
        .map_err(|e| {
            Error::PrepareDelete(WriteError {
                name: pod.to_string(),
                source: e,
            })
        })
}

/// Deletes `pod`, expected until the cache shows it gone or terminating.
async fn delete_pod(
    scale_writes: &ScaleWrites<'_>,
    recorder: &Recorder,
    pod: &str,
) -> Result<(), Error> {
    let deleted = scale_writes.delete(pod).await.map_err(|e| {
        e.into_family(|source| Error::from(ShellError::Delete(WriteError::on(pod)(source))))
    })?;
    if deleted {
        recorder.record(EventRecord::normal(
            reason::SUCCESSFUL_DELETE,
            format!("Deleted pod: {pod}"),
        ));
    }
    Ok(())
}
