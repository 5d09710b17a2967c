//! PersistentVolumeClaims as a cluster with a dynamic provisioner treats them: the
//! binder binds every claim (`status.phase: Bound`, `status.capacity` = the requested
//! storage, the spec's access modes; no PersistentVolume object is made), and an
//! expansion completes once the claim's StorageClass has `allowVolumeExpansion: true`
//! (capacity follows the raised request). kube-apiserver's `PersistentVolumeClaimResize`
//! admission refuses a raise the class does not allow, and validation refuses a shrink;
//! `admit_update` does both for every client write.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::quantity;
use crate::SimShared;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::ops::{Subresource, WriteOptions};
use crate::registry::{GroupResource, ResourceDef};
use crate::store::Store;

/// The message kube-apiserver's resize admission refuses a raise with.
const RESIZE_FORBIDDEN: &str = "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize";

fn pvc_gr() -> GroupResource {
    GroupResource::new("", "persistentvolumeclaims")
}

fn requested_storage(pvc: &Value) -> Option<&Value> {
    pvc.pointer("/spec/resources/requests/storage")
}

fn storage_bytes(v: Option<&Value>) -> Option<kruise_compat::quantity::Nanos> {
    v.and_then(quantity::parse_value)
}

/// Whether the claim's StorageClass exists and allows expansion (a claim without a
/// class, or whose class is gone, is not expandable, as upstream's `allowResize`).
fn class_allows_expansion(store: &Store, pvc: &Value) -> bool {
    let class = pvc
        .pointer("/spec/storageClassName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if class.is_empty() {
        return false;
    }
    store
        .get(
            &GroupResource::new("storage.k8s.io", "storageclasses"),
            "",
            class,
        )
        .and_then(|sc| sc.get("allowVolumeExpansion").and_then(Value::as_bool))
        .unwrap_or(false)
}

/// The checks kube-apiserver makes on a client's update of a claim's spec: a shrink is
/// invalid; a raise needs a bound claim whose StorageClass allows expansion.
pub(crate) fn admit_update(
    store: &Store,
    def: &ResourceDef,
    old: &Value,
    new: &Value,
    opts: &WriteOptions,
) -> ApiResult<()> {
    if !(def.builtin && def.gr() == pvc_gr()) || opts.internal {
        return Ok(());
    }
    let (Some(before), Some(after)) = (
        storage_bytes(requested_storage(old)),
        storage_bytes(requested_storage(new)),
    ) else {
        return Ok(());
    };
    let name = meta::name_of(new);
    if after < before {
        return Err(ApiError::forbidden_field(
            "",
            "PersistentVolumeClaim",
            name,
            "spec.resources.requests.storage",
            "field can not be less than previous value",
        ));
    }
    if after == before {
        return Ok(());
    }
    let forbidden = |why: &str| {
        ApiError::forbidden(format!(
            "persistentvolumeclaims \"{name}\" is forbidden: {why}"
        ))
    };
    if old.pointer("/status/phase").and_then(Value::as_str) != Some("Bound") {
        return Err(forbidden(
            "Only bound persistent volume claims can be expanded",
        ));
    }
    if !class_allows_expansion(store, new) {
        return Err(forbidden(RESIZE_FORBIDDEN));
    }
    Ok(())
}

/// The status the binder gives the claim, or None when it already has it: bound with the
/// requested capacity; a raised request shows in the capacity once the class allows
/// expansion (a claim is never shrunk).
pub fn next_status(pvc: &Value, expandable: bool) -> Option<Value> {
    let status = pvc.get("status").cloned().unwrap_or_else(|| json!({}));
    let request = requested_storage(pvc).cloned();
    let mut next = status.clone();
    let bound = status.get("phase").and_then(Value::as_str) == Some("Bound");
    if !bound {
        next["phase"] = json!("Bound");
        if let Some(modes) = pvc.pointer("/spec/accessModes") {
            next["accessModes"] = modes.clone();
        }
        if let Some(req) = &request {
            next["capacity"] = json!({"storage": req});
        }
    } else if expandable
        && let Some(req) = &request
        && storage_bytes(Some(req)) > storage_bytes(status.pointer("/capacity/storage"))
    {
        next["capacity"]["storage"] = req.clone();
    }
    (next != status).then_some(next)
}

async fn sync(sh: &Arc<SimShared>, def: &Arc<ResourceDef>, ns: &str, name: &str) {
    let Some(pvc) = sh.store.get(&pvc_gr(), ns, name) else {
        return;
    };
    if meta::is_terminating(&pvc) {
        return;
    }
    let Some(status) = next_status(&pvc, class_allows_expansion(&sh.store, &pvc)) else {
        return;
    };
    let opts = WriteOptions {
        user_agent: "persistent-volume-binder".into(),
        ..Default::default()
    };
    let res = sh
        .update_with(def, "v1", ns, name, Subresource::Status, &opts, |cur| {
            let mut next = cur.clone();
            if let Some(m) = next.as_object_mut() {
                m.insert("status".into(), status.clone());
            }
            Ok(next)
        })
        .await;
    if let Err(e) = res {
        tracing::debug!(error = %e, claim = %name, "binding a claim failed");
    }
}

/// Runs the binder until the store's change stream closes: every claim change, and every
/// StorageClass change (a class that starts allowing expansion completes pending raises).
pub(crate) async fn run(sh: Arc<SimShared>) {
    let Some(def) = sh.resolve("", "v1", "persistentvolumeclaims") else {
        return;
    };
    let mut rx = sh.store.subscribe();
    let classes_gr = GroupResource::new("storage.k8s.io", "storageclasses");
    let all_claims = |sh: &SimShared| -> HashSet<(String, String)> {
        sh.store
            .list(&pvc_gr(), None)
            .0
            .iter()
            .map(|c| {
                (
                    meta::meta_str(c, "namespace").to_string(),
                    meta::name_of(c).to_string(),
                )
            })
            .collect()
    };
    let mut dirty = all_claims(&sh);
    let mut resync = tokio::time::interval(Duration::from_secs(5));
    loop {
        for (ns, name) in std::mem::take(&mut dirty) {
            sync(&sh, &def, &ns, &name).await;
        }
        tokio::select! {
            ev = rx.recv() => match ev {
                Ok(ev) if ev.gr == pvc_gr() => { dirty.insert((ev.namespace.clone(), ev.name.clone())); }
                Ok(ev) if ev.gr == classes_gr => dirty = all_claims(&sh),
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => dirty = all_claims(&sh),
                Err(RecvError::Closed) => return,
            },
            _ = resync.tick() => dirty = all_claims(&sh),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(request: &str, status: Value) -> Value {
        json!({
            "metadata": {"name": "data-web-0", "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": request}}},
            "status": status,
        })
    }

    #[test]
    fn a_pending_claim_binds_with_its_request_as_capacity() {
        let next = next_status(&claim("1Gi", json!({"phase": "Pending"})), false);
        assert_eq!(
            next,
            Some(
                json!({"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}})
            )
        );
    }

    #[test]
    fn a_raised_request_grows_the_capacity_only_on_an_expandable_class() {
        let bound = json!({"phase": "Bound", "capacity": {"storage": "1Gi"}});
        let raised = claim("2Gi", bound.clone());
        assert_eq!(next_status(&raised, false), None);
        let grown = next_status(&raised, true);
        assert_eq!(
            grown.and_then(|s| s.pointer("/capacity/storage").cloned()),
            Some(json!("2Gi"))
        );
        // Same size in other units: nothing to do.
        assert_eq!(next_status(&claim("1024Mi", bound), true), None);
    }
}
