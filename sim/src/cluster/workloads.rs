//! What kube-controller-manager's workload controllers here (Job, Deployment, ReplicaSet)
//! share: pods from an owner's template as upstream's `GetPodFromTemplate` makes them,
//! created and deleted with the controller's events, and the loop that syncs each object
//! when it or what it owns changes.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::{EventSource, record_event};
use crate::SimShared;
use crate::meta;
use crate::ops::{DeleteOptions, Subresource, WriteOptions};
use crate::registry::GroupResource;
use crate::store::StoreEvent;

/// How kube-controller-manager's `controller` writes: its user agent and field manager.
pub(crate) fn controller_manager(controller: &str) -> WriteOptions {
    WriteOptions {
        user_agent: format!(
            "kube-controller-manager/v1.33.0 (linux/amd64) kubernetes/{controller}"
        ),
        field_manager: Some("kube-controller-manager".into()),
        ..Default::default()
    }
}

/// `obj` with its `apiVersion` and `kind`, as an event's involved object names it (the
/// store keeps neither).
pub(crate) fn typed(obj: &Value, api_version: &str, kind: &str) -> Value {
    let mut typed = obj.clone();
    if let Some(m) = typed.as_object_mut() {
        m.insert("apiVersion".into(), json!(api_version));
        m.insert("kind".into(), json!(kind));
    }
    typed
}

/// Writes `status` through the status subresource of `resource` `ns/name`, when it
/// differs from what `current` has; whether it wrote. Failures are logged: the next sync
/// tries again.
pub(crate) async fn write_status(
    sh: &SimShared,
    resource: (&str, &str),
    current: &Value,
    status: &Value,
    opts: &WriteOptions,
) -> bool {
    if current.get("status") == Some(status) {
        return false;
    }
    let Some(def) = sh.resolve(resource.0, "v1", resource.1) else {
        return false;
    };
    let (ns, name) = (meta::meta_str(current, "namespace"), meta::name_of(current));
    let res = sh
        .update_with(&def, "v1", ns, name, Subresource::Status, opts, |cur| {
            let mut next = cur.clone();
            next["status"] = status.clone();
            Ok(next)
        })
        .await;
    if let Err(e) = &res {
        tracing::debug!(error = %e, resource = resource.1, name, "status update failed");
    }
    res.is_ok()
}

/// A pod of `owner` (`apiVersion`/`kind` as its controller reference names them) from its
/// `spec.template`: the template's labels, annotations and finalizers, the name
/// `<owner>-<5 chars>`, the owner as controller (blocking its deletion).
pub(crate) fn pod_from_template(owner: &Value, api_version: &str, kind: &str) -> Value {
    let name = meta::name_of(owner);
    let template = owner.pointer("/spec/template").cloned().unwrap_or_default();
    let mut metadata = Map::new();
    for field in ["labels", "annotations", "finalizers"] {
        if let Some(v) = template.pointer(&format!("/metadata/{field}")) {
            metadata.insert(field.into(), v.clone());
        }
    }
    metadata.insert("generateName".into(), json!(format!("{name}-")));
    metadata.insert(
        "ownerReferences".into(),
        json!([{
            "apiVersion": api_version, "kind": kind, "name": name,
            "uid": meta::meta_str(owner, "uid"),
            "controller": true, "blockOwnerDeletion": true,
        }]),
    );
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": template.get("spec").cloned().unwrap_or_default(),
    })
}

/// Creates up to `count` pods made by `pod`, recording `SuccessfulCreate` for each and
/// `FailedCreate` for the first failure, where it stops (a refused pod would be refused
/// again). Returns how many were created and the failure's event message.
pub(crate) async fn create_pods(
    sh: &SimShared,
    source: EventSource<'_>,
    owner: &Value,
    count: usize,
    pod: impl Fn() -> Value,
    opts: &WriteOptions,
) -> (usize, Option<String>) {
    let Some(def) = sh.resolve("", "v1", "pods") else {
        return (0, None);
    };
    let ns = meta::meta_str(owner, "namespace");
    let mut created = 0;
    for _ in 0..count {
        match sh.create(&def, "v1", ns, pod(), opts).await {
            Ok(p) => {
                created += 1;
                let msg = format!("Created pod: {}", meta::name_of(&p));
                record_event(sh, source, owner, "Normal", "SuccessfulCreate", &msg).await;
            }
            Err(e) => {
                let msg = format!("Error creating: {}", e.message);
                record_event(sh, source, owner, "Warning", "FailedCreate", &msg).await;
                return (created, Some(msg));
            }
        }
    }
    (created, None)
}

/// Deletes `owner`'s pods `names`, recording `SuccessfulDelete` for each.
pub(crate) async fn delete_pods(
    sh: &SimShared,
    source: EventSource<'_>,
    owner: &Value,
    names: &[String],
    opts: &WriteOptions,
) {
    let Some(def) = sh.resolve("", "v1", "pods") else {
        return;
    };
    let ns = meta::meta_str(owner, "namespace");
    for pod in names {
        if sh
            .delete(&def, ns, pod, &DeleteOptions::default(), opts)
            .await
            .is_ok()
        {
            let msg = format!("Deleted pod: {pod}");
            record_event(sh, source, owner, "Normal", "SuccessfulDelete", &msg).await;
        }
    }
}

/// A namespaced object's key.
pub(crate) type Key = (String, String);

/// Runs a controller of `resource` until the store's change stream closes: every object
/// is synced at start, then each whose own change, or a change `owner_of` maps to it (a
/// pod of its), comes through; `sync` returns when to look again (a deadline, a pod
/// waiting out `minReadySeconds`), checked once a second; a lagging stream syncs all.
pub(crate) async fn run_controller<S, F, O>(
    sh: Arc<SimShared>,
    resource: GroupResource,
    owner_of: O,
    sync: S,
) where
    S: Fn(Arc<SimShared>, Key) -> F,
    F: Future<Output = Option<Duration>>,
    O: Fn(&SimShared, &StoreEvent) -> Option<Key>,
{
    let mut rx = sh.store.subscribe();
    let all = |sh: &SimShared| -> HashSet<Key> {
        sh.store
            .list(&resource, None)
            .0
            .iter()
            .map(|o| {
                (
                    meta::meta_str(o, "namespace").to_string(),
                    meta::name_of(o).to_string(),
                )
            })
            .collect()
    };
    let mut dirty = all(&sh);
    let mut waiting: HashSet<Key> = HashSet::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        for key in std::mem::take(&mut dirty) {
            if sync(sh.clone(), key.clone()).await.is_some() {
                waiting.insert(key);
            } else {
                waiting.remove(&key);
            }
        }
        tokio::select! {
            ev = rx.recv() => match ev {
                Ok(ev) if ev.gr == resource => {
                    dirty.insert((ev.namespace.clone(), ev.name.clone()));
                }
                Ok(ev) => dirty.extend(owner_of(&sh, &ev)),
                Err(RecvError::Lagged(_)) => dirty = all(&sh),
                Err(RecvError::Closed) => return,
            },
            _ = tick.tick() => dirty.extend(waiting.iter().cloned()),
        }
    }
}
