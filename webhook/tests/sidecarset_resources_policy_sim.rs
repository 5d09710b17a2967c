//! SidecarSet `resourcesPolicy` and `patchPodMetadata` through kruise-sim's API server (or
//! the real one of `KRUISE_TEST_KUBECONFIG`), with
//! kruise-webhook as a real HTTPS webhook: a pod gets a sidecar whose resources are computed
//! from its `app-*` containers and the annotation the SidecarSet patches; a pod none of whose
//! containers matches is refused with OpenKruise's message. kruise-sidecarset admits a
//! SidecarSet with `patchPodMetadata` only once the `kruise-configuration` ConfigMap of the
//! kruise namespace whitelists its annotation keys.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kruise_testkit as support;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kruise_sidecarset::api::v1beta1::SidecarSet;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, PostParams};
use serde_json::json;

mod sidecarset_binaries;
use sidecarset_binaries::WEBHOOK_BIN as BIN;

fn pod(name: &str, containers: serde_json::Value) -> Pod {
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "shop"}, "annotations": {"mesh.io/inject": "false"}},
        "spec": {"containers": containers}}))
    .unwrap()
}

fn app(name: &str, cpu: &str, memory: &str) -> serde_json::Value {
    json!({"name": name, "image": "nginx:1.25",
           "resources": {"limits": {"cpu": cpu, "memory": memory}, "requests": {"cpu": cpu, "memory": memory}}})
}

fn quantities(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect(),
    )
}

/// No `kruise-configuration` in `kruise-system` (which exists), as on a fresh cluster: a
/// shared API server may hold one an earlier run left.
async fn without_kruise_configuration(client: &kube::Client) {
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "kruise-system"}})).unwrap();
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(e) => panic!("creating kruise-system: {e}"),
    }
    let configs: Api<ConfigMap> = Api::namespaced(client.clone(), "kruise-system");
    match configs
        .delete("kruise-configuration", &DeleteParams::default())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(e) => panic!("deleting kruise-configuration: {e}"),
    }
}

#[tokio::test]
async fn injected_sidecar_resources_follow_the_pods_containers() {
    let crd: CustomResourceDefinition = kruise_sidecarset::api::crd::crd().unwrap();
    let (cluster, client) = support::cluster_with_crds(0, &[crd]).await;
    let sidecarsets: Api<DynamicObject> =
        Api::all_with(client.clone(), &support::sidecarset_resource());
    let set: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "mesh"},
        "spec": {
            "selector": {"matchLabels": {"app": "shop"}},
            "containers": [{"name": "proxy", "image": "envoy:1.30",
                // Set by the SidecarSet defaulting webhook (kruise-sidecarset), not run here.
                "podInjectPolicy": "AfterAppContainer",
                "resourcesPolicy": {
                    "targetContainersMode": "max",
                    "targetContainersNameRegex": "^app-",
                    "resourcesExpr": {
                        "limits": {"cpu": "cpu*50%", "memory": "memory/4"},
                        "requests": {"cpu": "max(cpu*10%, 50m)", "memory": "64Mi"}
                    }
                }}],
            "patchPodMetadata": [{"annotations": {"mesh.io/inject": "true"}, "patchPolicy": "Overwrite"}]
        }
    }))
    .unwrap();
    sidecarsets
        .create(&PostParams::default(), &set)
        .await
        .unwrap();
    let kubeconfig = cluster.kubeconfig_path();
    let port = support::free_port();
    let mut webhook = support::spawn_replica(
        BIN,
        &kubeconfig,
        port,
        &["--webhook-cert-check-interval", "1s"],
        &[],
    );
    let configs: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    support::eventually(
        "a webhook entry for app=shop",
        Duration::from_secs(60),
        || async {
            let c = configs
                .get_opt("kruise-mutating-webhook-configuration")
                .await
                .ok()??;
            c.webhooks?
                .iter()
                .any(|w| {
                    w.client_config.ca_bundle.is_some()
                        && w.object_selector
                            .as_ref()
                            .and_then(|s| s.match_labels.as_ref())
                            .and_then(|l| l.get("app"))
                            .map(String::as_str)
                            == Some("shop")
                })
                .then_some(())
        },
    )
    .await;

    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let shop_1 = pod(
        "shop-1",
        json!([
            app("app-web", "1", "1Gi"),
            app("app-api", "3", "2Gi"),
            app("cache", "8", "16Gi")
        ]),
    );
    support::dry_run_until(
        &pods,
        &shop_1,
        "kube-apiserver calling the app=shop entry",
        |answer| (answer.ok()?.spec?.containers.len() == 4).then_some(()),
    )
    .await;
    let created = pods.create(&PostParams::default(), &shop_1).await.unwrap();
    let containers = created.spec.unwrap().containers;
    let names: Vec<&str> = containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["app-web", "app-api", "cache", "proxy"]);
    // max over app-web and app-api (cache does not match): 3 CPUs, 2Gi.
    let resources = containers[3].resources.clone().unwrap();
    assert_eq!(
        resources.limits,
        quantities(&[("cpu", "1500m"), ("memory", "512Mi")])
    );
    assert_eq!(
        resources.requests,
        quantities(&[("cpu", "300m"), ("memory", "64Mi")])
    );
    let annotations = created.metadata.annotations.unwrap();
    assert_eq!(annotations["mesh.io/inject"], "true");

    // No `app-` container: refused, nothing created.
    let err = pods
        .create(
            &PostParams::default(),
            &pod("shop-2", json!([app("cache", "1", "1Gi")])),
        )
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 500);
            assert!(
                status
                    .message
                    .contains(r#"no containers match the regex pattern "^app-""#),
                "{}",
                status.message
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(pods.get_opt("shop-2").await.unwrap().is_none());

    webhook.stop(port).await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn patch_pod_metadata_is_admitted_only_as_the_kruise_configuration_whitelist_allows() {
    let binary = kruise_sidecarset::binary::binary().unwrap();
    let (cluster, client) = support::cluster_with_crds(1, binary.crd_definitions()).await;
    without_kruise_configuration(&client).await;
    let binaries = sidecarset_binaries::start(&cluster, &[]).await;

    let sets: Api<SidecarSet> = Api::all(client.clone());
    let set: SidecarSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "mesh"},
        "spec": {"selector": {"matchLabels": {"app": "shop"}},
                 "containers": [{"name": "proxy", "image": "envoy:1.30"}],
                 "patchPodMetadata": [{"annotations": {"mesh.io/inject": "true"}, "patchPolicy": "Overwrite"}]}
    }))
    .unwrap();
    // No kruise-configuration in kruise-system (the binary's namespace without POD_NAMESPACE).
    let err = sets
        .create(&PostParams::default(), &set)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "spec.patchPodMetadata: Required value: SidecarSet patch metadata whitelist not found"
        ),
        "{err}"
    );
    let whitelist = json!({"rules": [{"allowedAnnotationKeyExprs": ["^mesh\\.io/"]}]});
    let config: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kruise-configuration", "namespace": "kruise-system"},
        "data": {"SidecarSet_PatchPodMetadata_WhiteList": whitelist.to_string()}
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), "kruise-system")
        .create(&PostParams::default(), &config)
        .await
        .unwrap();
    // A key the whitelist does not allow is still refused.
    let mut other_key = set.clone();
    other_key.metadata.name = Some("other".into());
    other_key.spec.patch_pod_metadata[0].annotations =
        BTreeMap::from([("other.io/x".to_string(), "1".to_string())]);
    let err = sets
        .create(&PostParams::default(), &other_key)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sidecarSet patch metadata annotation(other.io/x) is not allowed"),
        "{err}"
    );
    sets.create(&PostParams::default(), &set).await.unwrap();

    // Once kruise-webhook's cache holds the SidecarSet, a new pod gets the sidecar and the
    // patched annotation (earlier attempts may be created before it does).
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let attempt = std::sync::atomic::AtomicUsize::new(0);
    let created = support::eventually(
        "a pod created with the sidecar",
        Duration::from_secs(30),
        || async {
            let n = attempt.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let created = pods
                .create(
                    &PostParams::default(),
                    &pod(&format!("shop-{n}"), json!([app("app-web", "1", "1Gi")])),
                )
                .await
                .ok()?;
            let spec = created.spec.as_ref()?;
            spec.containers
                .iter()
                .any(|c| c.name == "proxy")
                .then_some(created)
        },
    )
    .await;
    assert_eq!(
        created.metadata.annotations.as_ref().unwrap()["mesh.io/inject"],
        "true"
    );
    let names = sidecarset_binaries::container_names(&created);
    assert_eq!(names, ["proxy", "app-web"]);

    binaries.stop().await;
    without_kruise_configuration(&client).await;
    cluster.shutdown().await;
}
