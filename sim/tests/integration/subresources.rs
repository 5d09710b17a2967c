use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, EvictParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{api_err, raw, sim};

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}
    }))
    .unwrap()
}

async fn running(api: &Api<Pod>, name: &str) {
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn binding_assigns_a_node_once() {
    let sim = sim().await;
    let client = sim.client().unwrap();
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &pod("p")).await.unwrap();
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}});
    let (code, _) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/pods/p/binding",
        Some("application/json"),
        binding.to_string().as_bytes(),
    )
    .await;
    assert_eq!(code, 201);
    let p = api.get("p").await.unwrap();
    assert_eq!(p.spec.unwrap().node_name.as_deref(), Some("node-1"));
    let conds = p.status.unwrap().conditions.unwrap();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "True")
    );
    let (code, status) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/pods/p/binding",
        Some("application/json"),
        binding.to_string().as_bytes(),
    )
    .await;
    assert_eq!(code, 409);
    assert_eq!(status["reason"], "Conflict");
}

#[tokio::test]
async fn eviction_honours_pod_disruption_budgets() {
    let sim = sim().await;
    // kube retries 429 by default; assert the server's answer directly.
    let client = sim.client_without_retries().unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("p1"))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("p2"))
        .await
        .unwrap();
    running(&pods, "p1").await;
    running(&pods, "p2").await;
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}
    }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    // Nothing computed disruptionsAllowed yet: 0, so eviction is refused with 429.
    let err = api_err(pods.evict("p1", &EvictParams::default()).await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (429, "TooManyRequests"));
    assert_eq!(
        err.message,
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    assert!(pods.get_opt("p1").await.unwrap().is_some());

    pdbs.patch_status("web", &PatchParams::default(), &Patch::Merge(json!({"status": {"disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}})))
        .await
        .unwrap();
    pods.evict("p1", &EvictParams::default()).await.unwrap();
    assert!(pods.get_opt("p1").await.unwrap().is_none());
    let after = pdbs.get_status("web").await.unwrap().status.unwrap();
    assert_eq!(after.disruptions_allowed, 0);
    assert!(after.disrupted_pods.unwrap().contains_key("p1"));
    let err = api_err(pods.evict("p2", &EvictParams::default()).await.unwrap_err());
    assert_eq!(err.code, 429);

    // Pending pods are not protected by budgets.
    pods.create(&PostParams::default(), &pod("p3"))
        .await
        .unwrap();
    pods.evict("p3", &EvictParams::default()).await.unwrap();
    assert!(pods.get_opt("p3").await.unwrap().is_none());
}

#[tokio::test]
async fn status_subresource_get_put_patch() {
    let sim = sim().await;
    let api: Api<Pod> = Api::namespaced(sim.client().unwrap(), "default");
    api.create(&PostParams::default(), &pod("p")).await.unwrap();
    let mut st = api.get_status("p").await.unwrap();
    st.status.as_mut().unwrap().phase = Some("Running".into());
    st.metadata.labels = Some([("written-with-status".to_string(), "no".to_string())].into());
    let out = api
        .replace_status("p", &PostParams::default(), &st)
        .await
        .unwrap();
    assert_eq!(out.status.unwrap().phase.as_deref(), Some("Running"));
    // A pod status write ignores spec changes but, as kube-apiserver's pod status
    // strategy, not label changes (custom resources' status writes ignore both).
    assert!(
        out.metadata
            .labels
            .unwrap()
            .contains_key("written-with-status")
    );
    let out = api
        .patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"nodeName": "x"}, "status": {"podIP": "10.0.0.1"}})),
        )
        .await
        .unwrap();
    assert_eq!(out.status.unwrap().pod_ip.as_deref(), Some("10.0.0.1"));
    assert_eq!(out.spec.unwrap().node_name, None);
}

/// kube-apiserver's pod status strategy resets spec, deletionTimestamp and ownerReferences
/// only: labels, annotations and conditions change together through pods/status (the
/// workload controllers rely on it to write lifecycle labels with InPlaceUpdateReady).
#[tokio::test]
async fn pod_status_writes_keep_labels_and_annotations_but_not_spec() {
    let sim = sim().await;
    let client = sim.client().unwrap();
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &pod("meta"))
        .await
        .unwrap();
    let patched = api
        .patch_status(
            "meta",
            &PatchParams::default(),
            &Patch::Strategic(json!({
                "metadata": {"labels": {"state": "Normal"}, "annotations": {"a": "b"},
                             "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                                                  "name": "x", "uid": "u"}]},
                "spec": {"containers": [{"name": "c", "image": "nginx:9"}]},
                "status": {"conditions": [{"type": "InPlaceUpdateReady", "status": "True"}]}
            })),
        )
        .await
        .unwrap();
    assert_eq!(patched.metadata.labels.as_ref().unwrap()["state"], "Normal");
    assert_eq!(patched.metadata.labels.as_ref().unwrap()["app"], "web");
    assert_eq!(patched.metadata.annotations.as_ref().unwrap()["a"], "b");
    assert!(patched.metadata.owner_references.is_none());
    assert_eq!(
        patched.spec.as_ref().unwrap().containers[0]
            .image
            .as_deref(),
        Some("nginx:1.25")
    );
    let conds = patched.status.unwrap().conditions.unwrap();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "InPlaceUpdateReady" && c.status == "True")
    );
}

#[tokio::test]
async fn an_evictions_deletion_is_not_sent_to_delete_webhooks() {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    let sim = sim().await;
    let client = sim.client_without_retries().unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for name in ["p1", "p2"] {
        pods.create(&PostParams::default(), &pod(name))
            .await
            .unwrap();
        running(&pods, name).await;
    }
    // A webhook for pod DELETEs that nothing serves, failing closed.
    let configuration: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": "pod-deletes"},
        "webhooks": [{"name": "vpod.test.kruise.io", "admissionReviewVersions": ["v1"],
            "sideEffects": "None", "failurePolicy": "Fail",
            "clientConfig": {"url": "https://127.0.0.1:1/validate-pod"},
            "rules": [{"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["pods"]}]}]
    }))
    .unwrap();
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &configuration)
        .await
        .unwrap();
    let err = api_err(pods.delete("p1", &Default::default()).await.unwrap_err());
    assert_eq!(err.code, 500, "{}", err.message);
    // kube-apiserver's eviction deletes through the store: only the Eviction is admitted.
    pods.evict("p2", &EvictParams::default()).await.unwrap();
    let evicted = pods.get_opt("p2").await.unwrap();
    assert!(evicted.is_none_or(|p| p.metadata.deletion_timestamp.is_some()));
}
