//! What the simulated kubelet needs from an API server, behind one trait: read the pods
//! bound to its nodes, write a pod's status, make the final delete, record an event; and
//! the stream of pods that changed. The in-process implementation here reads and writes
//! kruise-sim's store directly (no HTTP, the same calls and request counts as before);
//! `crate::client_nodes` implements it with a kube client against any API server, so one
//! kubelet serves both.

use std::future::Future;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::mpsc;

use super::{EventSource, nodes};
use crate::ops::{DeleteOptions, Subresource};
use crate::registry::GroupResource;
use crate::{ApiResult, SimShared, StoreEvent, meta};

/// A pod's namespace and name.
pub type PodKey = (String, String);

/// A write that did not happen: the HTTP status code and why.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code}: {message}")]
pub struct WriteError {
    pub code: u16,
    pub message: String,
}

impl From<crate::ApiError> for WriteError {
    fn from(e: crate::ApiError) -> Self {
        WriteError {
            code: e.code,
            message: e.message,
        }
    }
}

/// The kubelet's reads and writes.
pub trait KubeletApi: Send + Sync + 'static {
    /// The pod as last seen (a cache; never a round trip for the in-process store).
    fn pod(&self, key: &PodKey) -> Option<Arc<Value>>;

    /// Every pod the kubelet may care about, after it lost track of changes.
    fn pod_keys(&self) -> Vec<PodKey>;

    /// Writes the pod's status through the status subresource: `render` gets the
    /// latest pod and returns its status (or an error, e.g. when the uid changed); it is
    /// called again on a conflict, with the newer pod.
    fn write_status<F>(
        &self,
        key: &PodKey,
        node: &str,
        render: F,
    ) -> impl Future<Output = Result<(), WriteError>> + Send
    where
        F: FnMut(&Value) -> ApiResult<Value> + Send;

    /// The kubelet's final delete of a pod whose containers stopped: grace 0 with a uid
    /// precondition, so a new pod with the same name is never removed by mistake.
    fn delete_pod(
        &self,
        key: &PodKey,
        uid: &str,
        node: &str,
    ) -> impl Future<Output = Result<(), WriteError>> + Send;

    /// The `data` of ConfigMap `namespace/name` (`Some(None)`: no such ConfigMap), read
    /// for env `valueFrom.configMapKeyRef`; `None` when this API cannot tell, and then
    /// containers start without waiting for their keys.
    fn config_map_data(&self, _namespace: &str, _name: &str) -> Option<Option<Value>> {
        None
    }

    /// Records a core/v1 Event about `object` from the kubelet of `node`; failures are
    /// only logged.
    fn record_event(
        &self,
        node: &str,
        object: &Value,
        type_: &str,
        reason: &str,
        message: &str,
    ) -> impl Future<Output = ()> + Send;
}

/// What the change stream reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodChange {
    /// This pod changed (or was deleted).
    Pod(PodKey),
    /// Changes were lost: look at every pod.
    All,
}

/// What [`PodChanges::try_next`] finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waiting {
    Change(PodChange),
    /// Nothing waiting.
    Nothing,
    /// The source is gone.
    Closed,
}

/// The pods that changed, in order.
pub trait PodChanges: Send {
    /// The next change; None once the source is gone.
    fn next(&mut self) -> impl Future<Output = Option<PodChange>> + Send;
    /// A change already waiting, without waiting.
    fn try_next(&mut self) -> Waiting;
}

impl PodChanges for mpsc::UnboundedReceiver<PodChange> {
    async fn next(&mut self) -> Option<PodChange> {
        self.recv().await
    }

    fn try_next(&mut self) -> Waiting {
        match self.try_recv() {
            Ok(c) => Waiting::Change(c),
            Err(mpsc::error::TryRecvError::Empty) => Waiting::Nothing,
            Err(mpsc::error::TryRecvError::Disconnected) => Waiting::Closed,
        }
    }
}

/// kruise-sim's own store.
pub struct StoreApi {
    pub sh: Arc<SimShared>,
}

fn pods_gr() -> GroupResource {
    GroupResource::new("", "pods")
}

fn not_registered() -> WriteError {
    WriteError {
        code: 404,
        message: "pods are not registered".into(),
    }
}

impl KubeletApi for StoreApi {
    fn pod(&self, key: &PodKey) -> Option<Arc<Value>> {
        self.sh.store.get(&pods_gr(), &key.0, &key.1)
    }

    fn pod_keys(&self) -> Vec<PodKey> {
        self.sh
            .store
            .list(&pods_gr(), None)
            .0
            .iter()
            .map(|p| {
                (
                    meta::meta_str(p, "namespace").to_string(),
                    meta::name_of(p).to_string(),
                )
            })
            .collect()
    }

    async fn write_status<F>(
        &self,
        key: &PodKey,
        node: &str,
        mut render: F,
    ) -> Result<(), WriteError>
    where
        F: FnMut(&Value) -> ApiResult<Value> + Send,
    {
        let def = self
            .sh
            .resolve("", "v1", "pods")
            .ok_or_else(not_registered)?;
        self.sh
            .update_with(
                &def,
                "v1",
                &key.0,
                &key.1,
                Subresource::Status,
                &nodes::kubelet_opts(node),
                |cur| Ok(crate::ops::status_write(cur, render(cur)?)),
            )
            .await?;
        Ok(())
    }

    fn config_map_data(&self, namespace: &str, name: &str) -> Option<Option<Value>> {
        let gr = GroupResource::new("", "configmaps");
        let config_map = self.sh.store.get(&gr, namespace, name);
        Some(config_map.map(|cm| cm.get("data").cloned().unwrap_or(Value::Null)))
    }

    async fn delete_pod(&self, key: &PodKey, uid: &str, node: &str) -> Result<(), WriteError> {
        let def = self
            .sh
            .resolve("", "v1", "pods")
            .ok_or_else(not_registered)?;
        let opts = DeleteOptions {
            grace_period_seconds: Some(0),
            precondition_uid: Some(uid.to_string()),
            ..Default::default()
        };
        self.sh
            .delete(&def, &key.0, &key.1, &opts, &nodes::kubelet_opts(node))
            .await?;
        Ok(())
    }

    async fn record_event(
        &self,
        node: &str,
        object: &Value,
        type_: &str,
        reason: &str,
        message: &str,
    ) {
        let source = EventSource {
            component: "kubelet",
            host: Some(node),
        };
        super::record_event(&self.sh, source, object, type_, reason, message).await;
    }
}

/// The store's change events, pods only.
pub struct StoreChanges {
    pub rx: broadcast::Receiver<Arc<StoreEvent>>,
}

fn pod_change(ev: &StoreEvent) -> Option<PodChange> {
    (ev.gr == pods_gr()).then(|| PodChange::Pod((ev.namespace.clone(), ev.name.clone())))
}

impl PodChanges for StoreChanges {
    async fn next(&mut self) -> Option<PodChange> {
        loop {
            match self.rx.recv().await {
                Ok(ev) => {
                    if let Some(c) = pod_change(&ev) {
                        return Some(c);
                    }
                }
                Err(RecvError::Lagged(_)) => return Some(PodChange::All),
                Err(RecvError::Closed) => return None,
            }
        }
    }

    fn try_next(&mut self) -> Waiting {
        loop {
            match self.rx.try_recv() {
                Ok(ev) => {
                    if let Some(c) = pod_change(&ev) {
                        return Waiting::Change(c);
                    }
                }
                Err(TryRecvError::Lagged(_)) => return Waiting::Change(PodChange::All),
                Err(TryRecvError::Empty) => return Waiting::Nothing,
                Err(TryRecvError::Closed) => return Waiting::Closed,
            }
        }
    }
}
