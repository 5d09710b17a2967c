//! The PVC binder: claims bind with their request as capacity; a raised request completes
//! on a StorageClass that allows expansion and is refused as kube-apiserver refuses it
//! on one that does not; a shrink is invalid.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{eventually, sim_with};

fn class(name: &str, expandable: bool) -> StorageClass {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "provisioner": "sim.kruise.io/hostpath",
        "allowVolumeExpansion": expandable,
    }))
    .unwrap()
}

fn claim(name: &str, class: &str, size: &str) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": class,
            "resources": {"requests": {"storage": size}},
        },
    }))
    .unwrap()
}

fn capacity(c: &PersistentVolumeClaim) -> Option<String> {
    let st = c.status.as_ref()?;
    (st.phase.as_deref() == Some("Bound"))
        .then(|| st.capacity.as_ref()?.get("storage").map(|q| q.0.clone()))
        .flatten()
}

fn raise(size: &str) -> Patch<serde_json::Value> {
    Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": size}}}}))
}

#[tokio::test]
async fn claims_bind_and_expand_only_on_an_expandable_class() {
    let sim = sim_with(kruise_sim::SimConfig {
        nodes: 1,
        ..Default::default()
    })
    .await;
    let client = sim.client().unwrap();
    let classes: Api<StorageClass> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client, "default");
    let pp = PostParams::default();
    classes.create(&pp, &class("elastic", true)).await.unwrap();
    classes.create(&pp, &class("fixed", false)).await.unwrap();
    claims
        .create(&pp, &claim("grows", "elastic", "1Gi"))
        .await
        .unwrap();
    claims
        .create(&pp, &claim("stays", "fixed", "1Gi"))
        .await
        .unwrap();
    for name in ["grows", "stays"] {
        let bound = eventually(10, "claim bound", || async {
            let c = claims.get(name).await.ok()?;
            capacity(&c).map(|_| c)
        })
        .await;
        assert_eq!(capacity(&bound).as_deref(), Some("1Gi"));
        let st = bound.status.unwrap();
        assert_eq!(st.access_modes, Some(vec!["ReadWriteOnce".to_string()]));
    }

    let pa = PatchParams::default();
    claims.patch("grows", &pa, &raise("2Gi")).await.unwrap();
    eventually(10, "capacity follows the raised request", || async {
        let c = claims.get("grows").await.ok()?;
        (capacity(&c).as_deref() == Some("2Gi")).then_some(())
    })
    .await;

    let refused = claims.patch("stays", &pa, &raise("2Gi")).await.unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("expected an API error, got {refused:?}");
    };
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        status.message,
        "persistentvolumeclaims \"stays\" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"
    );
    let stays = claims.get("stays").await.unwrap();
    assert_eq!(
        stays.spec.unwrap().resources.unwrap().requests.unwrap()["storage"].0,
        "1Gi"
    );

    let shrink = claims.patch("grows", &pa, &raise("1Gi")).await.unwrap_err();
    let kube::Error::Api(status) = shrink else {
        panic!("expected an API error, got {shrink:?}");
    };
    assert_eq!(status.code, 422);
    assert!(
        status.message.contains(
            "spec.resources.requests.storage: Forbidden: field can not be less than previous value"
        ),
        "{}",
        status.message
    );
}
