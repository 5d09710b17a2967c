//! The observe step: the set's pods, claims and revisions from the caches, and whether
//! they show every write this controller sent.

use super::*;

/// What the observe step read.
pub(super) struct Observed {
    pub(super) expandable_classes: BTreeSet<String>,
    /// Revisions of the namespace no controller owns.
    pub(super) orphan_revisions: Vec<ControllerRevision>,
    pub(super) pods: Vec<Arc<CachedPod>>,
    pub(super) claims: Vec<Arc<PersistentVolumeClaim>>,
    pub(super) history: Vec<ControllerRevision>,
    pub(super) satisfaction: Satisfaction,
    pub(super) pod_writes_pending: bool,
    pub(super) update_expectations: BTreeMap<String, String>,
}

/// Observe: the set's pods and revisions from the caches, and whether they show every
/// create, delete, pod write and in-place update this controller sent.
pub(super) async fn observe(
    shared: &Shared,
    set: &StatefulSet,
    key: &str,
    now: Timestamp,
) -> Result<Option<Observed>, Error> {
    if shared.pods.wait_until_ready().await.is_err()
        || shared.revisions.wait_until_ready().await.is_err()
        || shared.claims.wait_until_ready().await.is_err()
        || match &shared.classes {
            Some(classes) => classes.wait_until_ready().await.is_err(),
            None => false,
        }
    {
        return Ok(None);
    }
    let namespace = set.namespace().unwrap_or_default();
    let uid = set.uid().unwrap_or_default();
    let mut pods: Vec<Arc<CachedPod>> = shared
        .pods
        .state()
        .into_iter()
        .filter(|p| {
            // Ours, and orphans the planner may adopt.
            p.namespace() == namespace
                && (kruise_core::pods::is_controlled_by(p.meta(), &uid)
                    || kruise_core::pods::controller_ref(p.meta()).is_none())
        })
        .collect();
    pods.extend(departed_pods(shared, &namespace, &uid).await?);
    let claims = shared
        .claims
        .state()
        .into_iter()
        .filter(|c| c.metadata.namespace.as_deref() == Some(namespace.as_str()))
        .collect();
    let (history, orphan_revisions) = shared
        .revisions
        .state()
        .into_iter()
        .filter(|r| r.metadata.namespace.as_deref() == Some(namespace.as_str()))
        .filter(|r| {
            kruise_core::pods::is_controlled_by(&r.metadata, &uid)
                || kruise_core::pods::controller_ref(&r.metadata).is_none()
        })
        .map(|r| (*r).clone())
        .partition(|r| kruise_core::pods::is_controlled_by(&r.metadata, &uid));
    let satisfaction = shared
        .scale_expectations
        .with(|exp| {
            exp.settle(key, now, |action, name| {
                let cached = shared
                    .pods
                    .get(&reflector::ObjectRef::new(name).within(&namespace));
                action.seen_in(cached.as_deref().map(kruise_core::pods::PodView::meta))
            })
        })
        .map_err(ShellError::from)?;
    if let Satisfaction::Expired { .. } = satisfaction {
        // Acting on what the cache shows is safe: pod names are deterministic.
        shared
            .scale_expectations
            .with(|e| e.delete(key))
            .map_err(ShellError::from)?;
    }
    let pod_writes_pending = !shared
        .pod_versions
        .with(|v| v.all_observed(pods.iter().map(|p| &**p), now))
        .map_err(ShellError::from)?;
    // Drop the in-place expectations the cache shows (or whose pod is gone).
    let update_expectations = shared
        .update_expectations
        .with(|all| {
            let Some(mine) = all.get_mut(key) else {
                return BTreeMap::new();
            };
            plan::keep_unseen_updates(mine, &pods);
            let left = mine.clone();
            if mine.is_empty() {
                all.remove(key);
            }
            left
        })
        .map_err(ShellError::from)?;
    let expandable_classes = shared
        .classes
        .as_ref()
        .map(|classes| {
            classes
                .state()
                .iter()
                .filter(|c| c.allow_volume_expansion == Some(true))
                .map(|c| c.name_any())
                .collect()
        })
        .unwrap_or_default();
    Ok(Some(Observed {
        expandable_classes,
        orphan_revisions,
        pods,
        claims,
        history,
        satisfaction,
        pod_writes_pending,
        update_expectations,
    }))
}

/// The set's pods that left the pod watch by losing the pod-name label (the planner
/// releases them): each one the watch reported DELETED without a deletionTimestamp is read
/// back once; gone, labelled again (the cache has it) or no longer the set's, it is
/// forgotten.
async fn departed_pods(
    shared: &Shared,
    namespace: &str,
    uid: &str,
) -> Result<Vec<Arc<CachedPod>>, Error> {
    let ours: Vec<(String, Departed)> = shared
        .departed
        .with(|d| {
            d.iter()
                .filter(|(_, p)| {
                    p.pod.namespace() == namespace
                        && kruise_core::pods::is_controlled_by(p.pod.meta(), uid)
                })
                .map(|(k, p)| (k.clone(), p.clone()))
                .collect()
        })
        .map_err(ShellError::from)?;
    let api: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(shared.client.clone(), namespace);
    let mut pods = Vec::new();
    for (key, entry) in ours {
        if entry.confirmed {
            pods.push(entry.pod);
            continue;
        }
        let read = api
            .get_opt(entry.pod.name())
            .await
            .map_err(|e| Error::update_pod(entry.pod.name(), e))?;
        let left = read
            .map(CachedPod::from_pod)
            .filter(|p| {
                kruise_core::pods::LabelsAndFinalizers::label(p, STATEFULSET_POD_NAME_KEY).is_none()
                    && kruise_core::pods::is_controlled_by(PodView::meta(p), uid)
            })
            .map(Arc::new);
        shared
            .departed
            .with(|d| match &left {
                Some(pod) => {
                    d.insert(
                        key,
                        Departed {
                            pod: pod.clone(),
                            confirmed: true,
                        },
                    );
                }
                None => {
                    d.remove(&key);
                }
            })
            .map_err(ShellError::from)?;
        pods.extend(left);
    }
    Ok(pods)
}
