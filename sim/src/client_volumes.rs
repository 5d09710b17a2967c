//! The volume provisioner `kruise-sim nodes` runs beside its nodes, for an API server
//! with no storage of its own (the real control plane of e2e/realcluster): a claim that
//! names no StorageClass, or one whose class's provisioner is [`PROVISIONER`], gets a
//! PersistentVolume made for it and pre-bound to it (`claimRef`), which
//! kube-controller-manager's PV controller then binds; a released volume of ours whose
//! reclaim policy is `Delete` is deleted, as an external provisioner does. Without it a
//! pod with a claim (an Advanced StatefulSet's) is never scheduled: kube-scheduler keeps
//! it Pending on "unbound immediate PersistentVolumeClaims". A bound claim of a class of
//! ours whose request grows (kube-apiserver admits that only when the class allows
//! expansion) has its volume grown and its `status.capacity` set, as an external resizer
//! and the kubelet's file system expansion would.
//!
//! The volumes are `hostPath` entries nothing mounts: the simulated kubelet starts pods
//! without their volumes.

use std::time::Duration;

use futures::StreamExt;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::runtime::watcher;
use serde_json::{Value, json};

/// The provisioner name a StorageClass names to have its claims provisioned here, and the
/// `pv.kubernetes.io/provisioned-by` annotation on the volumes made.
pub const PROVISIONER: &str = "sim.kruise.io/provisioner";

const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";

fn resource(group: &str, kind: &str, plural: &str) -> ApiResource {
    let version = "v1";
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The volume to make for `claim`, when it waits for one (Pending, no `volumeName`, not
/// being deleted); `class_provisioner` is the provisioner of the claim's StorageClass
/// (`None` when the claim names none).
pub fn volume_for_claim(claim: &Value, class_provisioner: Option<&str>) -> Option<Value> {
    let waiting =
        str_at(claim, "/status/phase") == "Pending" || claim.pointer("/status/phase").is_none();
    if !waiting
        || !str_at(claim, "/spec/volumeName").is_empty()
        || claim.pointer("/metadata/deletionTimestamp").is_some()
    {
        return None;
    }
    let class = str_at(claim, "/spec/storageClassName");
    if !class.is_empty() && class_provisioner != Some(PROVISIONER) {
        return None;
    }
    let uid = str_at(claim, "/metadata/uid");
    let storage = claim.pointer("/spec/resources/requests/storage")?.clone();
    let name = format!("pvc-{uid}");
    let access_modes = claim
        .pointer("/spec/accessModes")
        .cloned()
        .unwrap_or_else(|| json!(["ReadWriteOnce"]));
    Some(json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {PROVISIONED_BY: PROVISIONER}},
        "spec": {
            "capacity": {"storage": storage},
            "accessModes": access_modes,
            "volumeMode": claim.pointer("/spec/volumeMode").cloned().unwrap_or_else(|| json!("Filesystem")),
            "storageClassName": class,
            "persistentVolumeReclaimPolicy": "Delete",
            "hostPath": {"path": format!("/var/lib/kruise-sim/volumes/{name}")},
            "claimRef": {
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "namespace": str_at(claim, "/metadata/namespace"),
                "name": str_at(claim, "/metadata/name"),
                "uid": uid,
            },
        },
    }))
}

/// The expansion `claim` waits for, as an external resizer and the kubelet would make it:
/// bound to one of our volumes (its class's provisioner ours), its storage request above
/// its capacity. The volume's name and the new size. (kube-apiserver admits a larger
/// request only when the class allows expansion.)
pub fn resize_for_claim(claim: &Value, class_provisioner: Option<&str>) -> Option<(String, Value)> {
    if str_at(claim, "/status/phase") != "Bound"
        || class_provisioner != Some(PROVISIONER)
        || claim.pointer("/metadata/deletionTimestamp").is_some()
    {
        return None;
    }
    let volume = str_at(claim, "/spec/volumeName");
    let requested = claim.pointer("/spec/resources/requests/storage")?;
    let capacity = claim.pointer("/status/capacity/storage")?;
    let bytes = crate::cluster::quantity::units;
    (!volume.is_empty() && bytes(requested) > bytes(capacity))
        .then(|| (volume.to_string(), requested.clone()))
}

/// Whether `volume` is one of ours, released by its claim, to be deleted.
pub fn volume_to_delete(volume: &Value) -> bool {
    str_at(
        volume,
        &format!(
            "/metadata/annotations/{}",
            PROVISIONED_BY.replace('/', "~1")
        ),
    ) == PROVISIONER
        && str_at(volume, "/status/phase") == "Released"
        && str_at(volume, "/spec/persistentVolumeReclaimPolicy") == "Delete"
        && volume.pointer("/metadata/deletionTimestamp").is_none()
}

/// Watches `kind` cluster-wide and calls `act` with every object seen (added, changed or
/// listed again); a failing watch is retried after a pause.
async fn watch_each<F, Fut>(client: kube::Client, ar: ApiResource, what: &str, mut act: F)
where
    F: FnMut(Value) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let api: Api<DynamicObject> = Api::all_with(client, &ar);
    let mut events = watcher::watcher(api, watcher::Config::default()).boxed();
    while let Some(event) = events.next().await {
        let obj = match event {
            Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) => obj,
            Ok(_) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "watching {what}");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if let Ok(obj) = serde_json::to_value(&obj) {
            act(obj).await;
        }
    }
}

/// Provisions volumes for waiting claims until aborted.
pub async fn provision(client: kube::Client) {
    let volumes: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource("", "PersistentVolume", "persistentvolumes"),
    );
    let classes: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource("storage.k8s.io", "StorageClass", "storageclasses"),
    );
    let claims = claim_resource();
    let claims_api: Api<DynamicObject> = Api::all_with(client.clone(), &claims);
    watch_each(client, claims, "claims", |claim| {
        let (volumes, classes, claims_api) = (volumes.clone(), classes.clone(), claims_api.clone());
        async move {
            let class = str_at(&claim, "/spec/storageClassName");
            let provisioner = if class.is_empty() {
                None
            } else {
                classes.get_opt(class).await.ok().flatten().and_then(|c| {
                    c.data
                        .get("provisioner")
                        .and_then(Value::as_str)
                        .map(String::from)
                })
            };
            if let Some((volume, size)) = resize_for_claim(&claim, provisioner.as_deref()) {
                expand(&volumes, &claims_api, &claim, &volume, size).await;
                return;
            }
            let Some(volume) = volume_for_claim(&claim, provisioner.as_deref()) else {
                return;
            };
            let Ok(volume) = serde_json::from_value::<DynamicObject>(volume) else {
                return;
            };
            match volumes.create(&PostParams::default(), &volume).await {
                Ok(_) => tracing::info!(claim = %str_at(&claim, "/metadata/name"), "provisioned a volume"),
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => tracing::warn!(error = %e, "provisioning a volume"),
            }
        }
    })
    .await;
}

/// Grows `volume` to `size`, then reports the claim's new capacity, as the resizer and the
/// kubelet's file system expansion do.
async fn expand(
    volumes: &Api<DynamicObject>,
    claims: &Api<DynamicObject>,
    claim: &Value,
    volume: &str,
    size: Value,
) {
    let grow = json!({"spec": {"capacity": {"storage": size}}});
    if let Err(e) = volumes
        .patch(volume, &PatchParams::default(), &Patch::Merge(&grow))
        .await
    {
        tracing::warn!(error = %e, volume, "expanding a volume");
        return;
    }
    let namespace = str_at(claim, "/metadata/namespace");
    let name = str_at(claim, "/metadata/name");
    let grown = json!({"status": {"capacity": {"storage": size}}});
    let in_namespace: Api<DynamicObject> =
        Api::namespaced_with(claims.clone().into_client(), namespace, &claim_resource());
    match in_namespace
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&grown))
        .await
    {
        Ok(_) => tracing::info!(claim = name, "expanded its volume"),
        Err(e) => tracing::warn!(error = %e, claim = name, "reporting an expanded claim"),
    }
}

fn claim_resource() -> ApiResource {
    resource("", "PersistentVolumeClaim", "persistentvolumeclaims")
}

/// Deletes our released volumes until aborted.
pub async fn reclaim(client: kube::Client) {
    let ar = resource("", "PersistentVolume", "persistentvolumes");
    let volumes: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    watch_each(client, ar, "volumes", |volume| {
        let volumes = volumes.clone();
        async move {
            if !volume_to_delete(&volume) {
                return;
            }
            match volumes
                .delete(str_at(&volume, "/metadata/name"), &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => tracing::warn!(error = %e, "deleting a released volume"),
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(class: Option<&str>, phase: &str) -> Value {
        let mut c = json!({
            "metadata": {"name": "www-web-0", "namespace": "default", "uid": "u1"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": phase},
        });
        if let Some(class) = class {
            c["spec"]["storageClassName"] = json!(class);
        }
        c
    }

    #[test]
    fn a_bound_claim_asking_more_than_its_capacity_is_expanded() {
        let mut bound = claim(Some("elastic"), "Bound");
        bound["spec"]["volumeName"] = json!("pvc-u1");
        bound["status"]["capacity"] = json!({"storage": "1Gi"});
        assert_eq!(
            resize_for_claim(&bound, Some(PROVISIONER)),
            None,
            "as asked"
        );
        bound["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        assert_eq!(
            resize_for_claim(&bound, Some(PROVISIONER)),
            Some(("pvc-u1".to_string(), json!("2Gi")))
        );
        assert_eq!(
            resize_for_claim(&bound, Some("other.example.com/csi")),
            None,
            "another provisioner's volume"
        );
        bound["status"]["capacity"] = json!({"storage": "2048Mi"});
        assert_eq!(resize_for_claim(&bound, Some(PROVISIONER)), None, "done");
    }

    #[test]
    fn a_pending_claim_without_a_class_gets_a_volume_pre_bound_to_it() {
        let volume = volume_for_claim(&claim(None, "Pending"), None).unwrap();
        assert_eq!(volume["metadata"]["name"], "pvc-u1");
        assert_eq!(volume["spec"]["capacity"]["storage"], "1Gi");
        assert_eq!(volume["spec"]["storageClassName"], "");
        assert_eq!(
            volume["spec"]["claimRef"],
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "namespace": "default", "name": "www-web-0", "uid": "u1"})
        );
    }

    #[test]
    fn only_claims_of_no_class_or_of_our_class_waiting_for_a_volume_get_one() {
        assert!(volume_for_claim(&claim(Some("fast"), "Pending"), Some(PROVISIONER)).is_some());
        assert!(
            volume_for_claim(&claim(Some("fast"), "Pending"), Some("ebs.csi.aws.com")).is_none()
        );
        assert!(volume_for_claim(&claim(Some("fast"), "Pending"), None).is_none());
        assert!(volume_for_claim(&claim(None, "Bound"), None).is_none());
        let mut named = claim(None, "Pending");
        named["spec"]["volumeName"] = json!("pv-1");
        assert!(volume_for_claim(&named, None).is_none());
    }

    #[test]
    fn only_our_released_volumes_with_delete_are_deleted() {
        let volume = |by: &str, phase: &str, policy: &str| {
            json!({"metadata": {"name": "pvc-u1", "annotations": {PROVISIONED_BY: by}},
                   "spec": {"persistentVolumeReclaimPolicy": policy},
                   "status": {"phase": phase}})
        };
        assert!(volume_to_delete(&volume(PROVISIONER, "Released", "Delete")));
        assert!(!volume_to_delete(&volume(PROVISIONER, "Bound", "Delete")));
        assert!(!volume_to_delete(&volume(
            PROVISIONER,
            "Released",
            "Retain"
        )));
        assert!(!volume_to_delete(&volume("other", "Released", "Delete")));
    }
}
