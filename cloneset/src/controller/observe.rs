//! The observe step: what the caches hold for one CloneSet, and whether they show every
//! create, delete and pod write this controller sent.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kruise_core::expectations::Satisfaction;
use kruise_core::pods::CachedPod;
use kube::runtime::reflector::{self, Store};
use kube::{Resource as _, ResourceExt as _};

use kruise_runtime::errors::ShellError;

use super::{Error, Shared};
use crate::api::v1beta1::CloneSet;

/// What the observe step read: the owned objects and the expectations' verdict.
pub(super) struct Observed {
    pub pods: Vec<Arc<CachedPod>>,
    pub pvcs: Vec<PersistentVolumeClaim>,
    pub history: Vec<ControllerRevision>,
    pub satisfaction: Satisfaction,
    /// A pod we just updated in place is still older in the cache than our write.
    pub pod_writes_pending: bool,
}

/// Observe: the CloneSet's pods, claims and revisions from the caches, and whether the
/// caches show every create, delete and pod write this controller sent. `None` until the
/// caches have synced.
pub(super) async fn observe(
    shared: &Shared,
    cs: &CloneSet,
    key: &str,
    now: Timestamp,
) -> Result<Option<Observed>, Error> {
    let caches = &shared.caches;
    if caches.pods.wait_until_ready().await.is_err()
        || caches.pvcs.wait_until_ready().await.is_err()
        || caches.revisions.wait_until_ready().await.is_err()
    {
        return Ok(None);
    }
    let namespace = cs.namespace().unwrap_or_default();
    let pods = objects_in(&caches.pods, &namespace);
    let pvcs = objects_in(&caches.pvcs, &namespace)
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| (*p).clone())
        .collect();
    let uid = cs.uid().unwrap_or_default();
    let history = objects_in(&caches.revisions, &namespace)
        .into_iter()
        .filter(|r| kruise_core::pods::is_controlled_by(&r.metadata, &uid))
        .map(|r| (*r).clone())
        .collect();
    let satisfaction = shared
        .scale_expectations
        .with(|exp| {
            exp.settle(key, now, |action, name| {
                let cached = caches
                    .pods
                    .get(&reflector::ObjectRef::new(name).within(&namespace));
                action.seen_in(cached.as_deref().map(|p| p.meta()))
            })
        })
        .map_err(ShellError::from)?;
    let pod_writes_pending = !shared
        .pod_versions
        .with(|v| v.all_observed(pods.iter().map(|p| &**p), now))
        .map_err(ShellError::from)?;
    Ok(Some(Observed {
        pods,
        pvcs,
        history,
        satisfaction,
        pod_writes_pending,
    }))
}

/// The cached objects in `namespace`, shared with the cache (not copied).
fn objects_in<K>(store: &Store<K>, namespace: &str) -> Vec<Arc<K>>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
{
    store
        .state()
        .into_iter()
        .filter(|o| o.meta().namespace.as_deref() == Some(namespace))
        .collect()
}
