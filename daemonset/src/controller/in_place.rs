//! The in-place side of the shell: updates sent and not yet in the cache, carrying an
//! update forward (the next container batch, `InPlaceUpdateReady`), and the one writer of
//! each pod at a time (claims), shared with the pod-event path.

use super::*;

/// Whether an in-place update sent for one of `pods` is not yet in the cache; forgets those
/// that are, and those of pods gone.
pub(super) fn in_place_pending(shared: &Shared, key: &str, pods: &[Arc<CachedPod>]) -> bool {
    let Ok(mut in_flight) = shared.in_flight.lock() else {
        return true;
    };
    let Some(sent) = in_flight.get_mut(key) else {
        return false;
    };
    sent.retain(|name, hash| {
        pods.iter()
            .find(|p| p.name() == name.as_str())
            .is_some_and(|p| p.label(CONTROLLER_REVISION_HASH_KEY) != Some(hash.as_str()))
    });
    let pending = !sent.is_empty();
    if !pending {
        in_flight.remove(key);
    }
    pending
}

/// Carries the in-place updates of `pods` forward (`kruise_core::inplace::refresh`): the next
/// container batch, and `InPlaceUpdateReady=True` once the kubelet is done (most of them
/// have gone out from the pod events already, [`refresh_on_pod_events`]). The writes go
/// out [`WRITE_CONCURRENCY`] at a time. Returns when to look again for a grace period.
pub(super) async fn refresh_in_place(
    pods_writer: &Writer<Pod>,
    shared: &Shared,
    pods: &[Arc<CachedPod>],
    now: Timestamp,
) -> Result<Option<Duration>, Error> {
    let mut after: Option<Duration> = None;
    let mut writes = Vec::new();
    // The check is not Send: every decision is taken before any write is awaited.
    for pod in pods {
        match claim_and_decide(shared, pod, now) {
            Ok(Decided::Skip) => {}
            Ok(Decided::Wait(wait)) => after = Some(after.map_or(wait, |a| a.min(wait))),
            Ok(Decided::Write(write)) => writes.push(write),
            Err(e) => {
                for write in &writes {
                    release(shared, write.pod());
                }
                return Err(e);
            }
        }
    }
    let outcomes: Vec<_> = futures::stream::iter(writes)
        .map(|write| send_refresh(pods_writer, shared, write))
        .buffer_unordered(WRITE_CONCURRENCY)
        .collect()
        .await;
    let first_error = outcomes.into_iter().find_map(|(_, outcome)| outcome.err());
    match first_error {
        Some(e) => Err(e),
        None => Ok(after),
    }
}

/// A refresh write decided on; the pod is claimed until it is sent.
pub(super) enum RefreshWrite {
    /// The next container batch (with its resources' resize, sent first), or the spec
    /// once a grace period ended.
    Patch(Arc<CachedPod>, serde_json::Value, Option<serde_json::Value>),
    /// `InPlaceUpdateReady=True`.
    Ready(Arc<CachedPod>, Box<k8s_openapi::api::core::v1::PodStatus>),
}

impl RefreshWrite {
    fn pod(&self) -> &CachedPod {
        match self {
            RefreshWrite::Patch(pod, ..) | RefreshWrite::Ready(pod, _) => pod,
        }
    }
}

/// What the refresh of one pod decided.
pub(super) enum Decided {
    /// Nothing to write now, or another writer holds the pod, or its cached copy is older
    /// than our last write.
    Skip,
    /// A grace period runs: look again after this.
    Wait(Duration),
    /// Send this (the pod is claimed).
    Write(RefreshWrite),
}

/// Claims `pod` ([`claim`]) and decides its refresh; the claim is kept only with a write.
pub(super) fn claim_and_decide(
    shared: &Shared,
    pod: &Arc<CachedPod>,
    now: Timestamp,
) -> Result<Decided, Error> {
    let Some(pod) = claim(shared, pod, now)? else {
        return Ok(Decided::Skip);
    };
    let check = CompletionCheck {
        vertical_scaling: shared.settings.in_place_gates.vertical_scaling,
        ..CompletionCheck::default()
    };
    let decided = match refresh(&*pod, now, &check) {
        RefreshAction::Nothing | RefreshAction::Invalid(_) => Decided::Skip,
        RefreshAction::WaitGrace { requeue_after } => Decided::Wait(Duration::from_secs(
            requeue_after.as_secs().max(1).unsigned_abs(),
        )),
        RefreshAction::Write(write) => match write.patch {
            Some(patch) => {
                Decided::Write(RefreshWrite::Patch(pod.clone(), patch, write.resize_patch))
            }
            None => Decided::Skip,
        },
        RefreshAction::SetReady(status) => Decided::Write(RefreshWrite::Ready(pod.clone(), status)),
    };
    if !matches!(decided, Decided::Write(_)) {
        release(shared, &pod);
    }
    Ok(decided)
}

/// Sends a claimed refresh write, records the version it returned and releases the pod.
pub(super) async fn send_refresh(
    pods_writer: &Writer<Pod>,
    shared: &Shared,
    write: RefreshWrite,
) -> (Arc<CachedPod>, Result<(), Error>) {
    let (pod, written) = match write {
        RefreshWrite::Patch(pod, patch, resize) => {
            // The resize first: were the patch first and the resize then refused, the state
            // would show the batch done and the resources would never change.
            let sent = async {
                if let Some(resize) = &resize {
                    let written = pods_writer
                        .patch_subresource_strategic("resize", pod.name(), resize)
                        .await?;
                    record_version(shared, Some(&written));
                }
                pods_writer
                    .patch_strategic(pod.name(), &patch)
                    .await
                    .map(Some)
            }
            .await
            .map_err(|source| Error::InPlace(WriteError::on(pod.name().to_string())(source)));
            (pod, sent)
        }
        RefreshWrite::Ready(pod, status) => {
            let sent = pods_writer
                .patch_pod_status(pod.name(), Some(&*pod), &status, &serde_json::Value::Null)
                .await
                .map_err(Error::from);
            (pod, sent)
        }
    };
    let outcome = written.map(|written| record_version(shared, written.as_ref()));
    release(shared, &pod);
    (pod, outcome)
}

/// Takes `pod` for an in-place write and returns its latest cached copy, to decide on;
/// `None` when another writer holds it, it is gone, or the cache does not yet show (at
/// least) the version our last write to it returned (it would decide the same write
/// again: the kubelet's own status writes move the version on before ours reaches the
/// cache). The copy is read under the lock writers release it with, after recording their
/// version, so no copy older than a finished write is ever decided on. An expectation that
/// outlived its timeout is dropped and no longer holds the pod back.
pub(super) fn claim(
    shared: &Shared,
    pod: &CachedPod,
    now: Timestamp,
) -> Result<Option<Arc<CachedPod>>, Error> {
    let poisoned = |_| ShellError::from(kruise_core::expectations::PoisonedExpectations);
    let mut writing = shared.writing.lock().map_err(poisoned)?;
    let Some(latest) = shared.pods.get(&ObjectRef::from(pod)) else {
        return Ok(None);
    };
    let meta = PodView::meta(&*latest);
    let (Some(uid), Some(version)) = (meta.uid.as_deref(), meta.resource_version.as_deref()) else {
        return Ok(None);
    };
    if writing.contains(uid) {
        return Ok(None);
    }
    let current = shared
        .pod_versions
        .with(|v| match v.satisfied(uid, version, now) {
            Satisfaction::Satisfied => true,
            Satisfaction::Pending { .. } => false,
            Satisfaction::Expired { .. } => {
                v.delete(uid);
                true
            }
        })
        .map_err(ShellError::from)?;
    if !current {
        return Ok(None);
    }
    writing.insert(uid.to_string());
    Ok(Some(latest))
}

/// Lets go of a pod [`claim`] took.
fn release(shared: &Shared, pod: &CachedPod) {
    if let (Some(uid), Ok(mut writing)) = (PodView::meta(pod).uid.as_deref(), shared.writing.lock())
    {
        writing.remove(uid);
    }
}

/// Remembers the version a write of ours returned, so no pass acts on an older copy.
fn record_version(shared: &Shared, written: Option<&Written>) {
    if let Some(written) = written
        && let (Some(uid), Some(version)) = (written.uid(), written.resource_version())
    {
        // A poisoned lock only loses this record: the next pass stops on the lock anyway.
        let _ = shared.pod_versions.with(|v| v.expect(uid, version));
    }
}

/// Updates `name` in place: `InPlaceUpdateReady=False` first, then the new images, hash
/// label and `apps.kruise.io/inplace-update-state`. `Ok(false)` when the change cannot be
/// made in place (the caller recreates the pod).
pub(super) async fn in_place_update(
    pods_writer: &Writer<Pod>,
    shared: &Shared,
    key: &str,
    pods: &[Arc<CachedPod>],
    name: &str,
    request: &(dyn Fn(&CachedPod) -> Option<UpdateRequest> + Sync),
    now: Timestamp,
) -> Result<bool, Error> {
    let Some(planned) = pods.iter().find(|p| p.name() == name) else {
        return Ok(false);
    };
    // Held for both writes: between them the pod looks finished (the old state, the
    // condition False), and a refresh would send it True again.
    let Some(pod) = claim(shared, planned, now)? else {
        return Err(Error::Busy(name.to_string()));
    };
    let writes = request(&pod).and_then(|req| {
        let update = begin_update(&*pod, &req, now).ok()?;
        Some((update.into_writes(&*pod), req.revision))
    });
    let sent = match &writes {
        Some((writes, revision)) => send_update(pods_writer, shared, key, &pod, revision, writes)
            .await
            .map(|()| true),
        None => Ok(false),
    };
    release(shared, &pod);
    sent
}

/// The writes of an in-place update of `pod`, each recording the version it returned.
async fn send_update(
    pods_writer: &Writer<Pod>,
    shared: &Shared,
    key: &str,
    pod: &CachedPod,
    revision: &str,
    writes: &kruise_core::inplace::InPlaceWrites,
) -> Result<(), Error> {
    let name = pod.name();
    let failed = |source| {
        Error::InPlace(WriteError {
            name: name.to_string(),
            source,
        })
    };
    if let Some(unready) = &writes.unready_conditions {
        let written = pods_writer
            .patch_pod_status(name, Some(pod), unready, &serde_json::Value::Null)
            .await?;
        record_version(shared, written.as_ref());
    }
    // The resize before the patch, as in `send_refresh`.
    if let Some(resize) = &writes.resize_patch {
        let written = pods_writer
            .patch_subresource_strategic("resize", name, resize)
            .await
            .map_err(failed)?;
        record_version(shared, Some(&written));
    }
    if let Some(patch) = &writes.patch {
        if let Ok(mut in_flight) = shared.in_flight.lock() {
            in_flight
                .entry(key.to_string())
                .or_default()
                .insert(name.to_string(), revision.to_string());
        }
        match pods_writer.patch_strategic(name, patch).await {
            Ok(written) => record_version(shared, Some(&written)),
            Err(e) => {
                if let Ok(mut in_flight) = shared.in_flight.lock()
                    && let Some(sent) = in_flight.get_mut(key)
                {
                    sent.remove(name);
                }
                return Err(failed(e));
            }
        }
    }
    Ok(())
}
