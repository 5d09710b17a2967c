//! The node agent's `apps.kruise.io/runtime-containers-meta` writer (the shell of
//! [`crate::plan::containers_meta`]): it watches its node's pods that carry an in-place
//! update state, and for one whose update waits on an unchanged image ID it asks the runtime
//! for the pod's containers and writes the annotation when that completes the update (a new
//! tag of the same digest, which containerd 1.6 reports under the first tag). One write per
//! such update; none for any other pod.

use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kruise_core::api::keys::{INPLACE_UPDATE_STATE_KEY, RUNTIME_CONTAINERS_META_KEY};
use kruise_cri::RuntimeServiceClient;
use kruise_runtime::watch::{DecodeGuard, Watch};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt as _};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

use crate::plan::containers_meta::{needs_runtime_meta, runtime_meta};
use crate::runtime_containers::pod_containers;

/// The field manager and user agent of the writes (OpenKruise's daemon controller's name).
pub const FIELD_MANAGER: &str = "kruise-daemon-containermeta";
/// How soon a pod whose sync failed (runtime or API error) is tried again.
const RETRY: Duration = Duration::from_secs(2);

/// Runs until `shutdown` fires.
pub async fn run(
    client: Client,
    node: String,
    cri: RuntimeServiceClient<Channel>,
    shutdown: CancellationToken,
) {
    let (pods, mut events) = Watch::<Pod>::new(client.clone(), None)
        .fields(&format!("spec.nodeName={node}"))
        .keep_only(|pod: &Pod| pod.annotations().contains_key(INPLACE_UPDATE_STATE_KEY))
        .guarded(DecodeGuard::logging_only())
        .reflect_events();
    let (retries, mut due) = mpsc::unbounded_channel::<ObjectRef<Pod>>();
    let writer = Writer { client, cri, pods };
    // The pods seen while listing, synced once the listing is complete (the store is only
    // then whole): after a restart, a pod that waits on the runtime gets no other event.
    let mut listed = Vec::new();
    loop {
        let keys = tokio::select! {
            () = shutdown.cancelled() => return,
            event = events.next() => match event {
                None => return,
                Some(Ok(watcher::Event::Apply(pod))) => vec![ObjectRef::from_obj(&pod)],
                Some(Ok(watcher::Event::InitApply(pod))) => {
                    listed.push(ObjectRef::from_obj(&pod));
                    continue;
                }
                Some(Ok(watcher::Event::Init)) => {
                    listed.clear();
                    continue;
                }
                Some(Ok(watcher::Event::InitDone)) => std::mem::take(&mut listed),
                Some(Ok(watcher::Event::Delete(_))) => continue,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "watching the node's pods for runtime-containers-meta");
                    continue;
                }
            },
            Some(key) = due.recv() => vec![key],
        };
        for key in keys {
            if let Err(e) = writer.sync(&key).await {
                tracing::warn!(pod = %key, error = %e, "writing runtime-containers-meta; retrying");
                let retries = retries.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(RETRY).await;
                    let _ = retries.send(key);
                });
            }
        }
    }
}

struct Writer {
    client: Client,
    cri: RuntimeServiceClient<Channel>,
    pods: Store<Pod>,
}

impl Writer {
    async fn sync(&self, key: &ObjectRef<Pod>) -> anyhow::Result<()> {
        let Some(pod) = self.pods.get(key) else {
            return Ok(());
        };
        if !needs_runtime_meta(&pod) {
            return Ok(());
        }
        // The runtime's name as the status spells container IDs (`containerd://…`).
        let Some(runtime_name) = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|s| s.iter().find_map(|c| c.container_id.as_deref()))
            .and_then(|id| id.split_once("://"))
            .map(|(name, _)| name.to_string())
        else {
            return Ok(());
        };
        let uid = pod.uid().unwrap_or_default();
        let containers = pod_containers(&mut self.cri.clone(), &uid, &runtime_name).await?;
        let Some(meta) = runtime_meta(&pod, &containers) else {
            return Ok(());
        };
        let namespace = pod.namespace().unwrap_or_default();
        Api::<Pod>::namespaced(self.client.clone(), &namespace)
            .patch(
                &pod.name_any(),
                &PatchParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..Default::default()
                },
                &Patch::Merge(
                    json!({"metadata": {"annotations": {RUNTIME_CONTAINERS_META_KEY: meta}}}),
                ),
            )
            .await?;
        tracing::info!(pod = %key, "wrote runtime-containers-meta: the in-place update runs under the spec's hash");
        Ok(())
    }
}
