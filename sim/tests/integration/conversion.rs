//! CRD version conversion through a real conversion webhook: the CloneSet CRD (v1alpha1
//! and v1beta1 served, v1beta1 stored) with kruise-cloneset's own `/convert` served over
//! HTTPS. An object written in one version reads back converted in the other, on get,
//! list, watch and writes; with the webhook down only the storage version can be read.

use futures::StreamExt as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_admission::AdmissionRoutes;
use kruise_admission::publish::{self, Owned};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::json;

use crate::common::{api_err, eventually};

fn resource(version: &str) -> ApiResource {
    ApiResource {
        group: "apps.kruise.io".into(),
        version: version.into(),
        api_version: format!("apps.kruise.io/{version}"),
        kind: "CloneSet".into(),
        plural: "clonesets".into(),
    }
}

#[tokio::test]
async fn objects_convert_through_the_crd_conversion_webhook() {
    let sim = crate::common::sim().await;
    let client = sim.client().unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(
        &PostParams::default(),
        &kruise_cloneset::api::crd::crd().unwrap(),
    )
    .await
    .unwrap();
    let server = crate::webhooks::serve(
        AdmissionRoutes::new().converter(kruise_cloneset::conversion::CloneSetConverter),
    )
    .await;
    let owned = Owned {
        mutating: None,
        validating: None,
        crds: vec!["clonesets.apps.kruise.io".into()],
    };
    publish::publish(
        &client,
        &server.routes,
        &owned,
        &server.endpoint,
        &server.ca.cert_pem,
        true,
    )
    .await
    .unwrap();
    let alpha: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &resource("v1alpha1"));
    let beta: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &resource("v1beta1"));

    // Written as v1alpha1 (an OpenKruise manifest): InPlaceIfPossible is the strategy type.
    let manifest: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
        "metadata": {"name": "demo", "labels": {"app": "demo"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "demo"}},
                 "updateStrategy": {"type": "InPlaceIfPossible", "partition": 1},
                 "template": {"metadata": {"labels": {"app": "demo"}},
                              "spec": {"containers": [{"name": "main", "image": "nginx"}]}}}
    }))
    .unwrap();
    let created = alpha
        .create(&PostParams::default(), &manifest)
        .await
        .unwrap();
    assert_eq!(
        created.types.as_ref().unwrap().api_version,
        "apps.kruise.io/v1alpha1"
    );
    assert_eq!(
        created.data["spec"]["updateStrategy"]["type"],
        "InPlaceIfPossible"
    );

    // Read as v1beta1: the strategy moved to rollingUpdate.podUpdatePolicy.
    let read = beta.get("demo").await.unwrap();
    assert_eq!(
        read.types.as_ref().unwrap().api_version,
        "apps.kruise.io/v1beta1"
    );
    assert_eq!(read.data["spec"]["updateStrategy"]["type"], "RollingUpdate");
    assert_eq!(
        read.data["spec"]["updateStrategy"]["rollingUpdate"]["podUpdatePolicy"],
        "InPlaceIfPossible"
    );
    assert_eq!(read.metadata.uid, created.metadata.uid);
    assert_eq!(
        read.metadata.resource_version,
        created.metadata.resource_version
    );

    // And back as v1alpha1, on get and list.
    let back = alpha.get("demo").await.unwrap();
    assert_eq!(
        back.data["spec"]["updateStrategy"]["type"],
        "InPlaceIfPossible"
    );
    let listed = alpha.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        listed.items[0].data["spec"]["updateStrategy"]["type"],
        "InPlaceIfPossible"
    );

    // A patch through v1alpha1 applies to the v1alpha1 view and is stored converted.
    alpha
        .patch(
            "demo",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"updateStrategy": {"partition": 2}}})),
        )
        .await
        .unwrap();
    let read = beta.get("demo").await.unwrap();
    assert_eq!(
        read.data["spec"]["updateStrategy"]["rollingUpdate"]["partition"],
        2
    );
    assert_eq!(
        read.data["spec"]["updateStrategy"]["rollingUpdate"]["podUpdatePolicy"],
        "InPlaceIfPossible"
    );
    assert_eq!(read.metadata.generation, Some(2));

    // A v1alpha1 watch sees the objects converted.
    let seen = eventually(10, "a v1alpha1 watch event", || {
        let alpha = alpha.clone();
        async move {
            let stream = watcher(alpha, watcher::Config::default()).applied_objects();
            let mut stream = std::pin::pin!(stream);
            let first = tokio::time::timeout(std::time::Duration::from_secs(5), stream.next())
                .await
                .ok()??;
            first.ok()
        }
    })
    .await;
    assert_eq!(
        seen.data["spec"]["updateStrategy"]["type"],
        "InPlaceIfPossible"
    );

    // Webhook down: the other version fails as kube-apiserver reports it; storage works.
    server.stop.cancel();
    let err = eventually(10, "conversion failing", || {
        let alpha = alpha.clone();
        async move { alpha.get("demo").await.err() }
    })
    .await;
    let status = api_err(err);
    assert_eq!(status.code, 500, "{status:?}");
    assert!(
        status.message.contains("conversion webhook for"),
        "{}",
        status.message
    );
    assert!(beta.get("demo").await.is_ok());
}
