use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::{ApiResource, Discovery};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::{Value, json};

use crate::common::{api_err, raw, sim};

pub fn cloneset_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "clonesets.apps.kruise.io"},
        "spec": {
            "group": "apps.kruise.io",
            "names": {"kind": "CloneSet", "listKind": "CloneSetList", "plural": "clonesets", "singular": "cloneset",
                      "shortNames": ["clone"], "categories": ["all", "kruise"]},
            "scope": "Namespaced",
            "versions": [
                {"name": "v1alpha1", "served": true, "storage": false,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                 "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.labelSelector"}},
                 "additionalPrinterColumns": [
                    {"name": "DESIRED", "type": "integer", "jsonPath": ".spec.replicas"},
                    {"name": "UPDATED", "type": "integer", "jsonPath": ".status.updatedReplicas"},
                    {"name": "UPDATED_READY", "type": "integer", "jsonPath": ".status.updatedReadyReplicas"},
                    {"name": "READY", "type": "integer", "jsonPath": ".status.readyReplicas"},
                    {"name": "TOTAL", "type": "integer", "jsonPath": ".status.replicas"},
                    {"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                 ]},
                {"name": "v1beta1", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                 "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.labelSelector"}}}
            ]
        }
    })
}

pub async fn install_crd(client: &kube::Client, crd: Value) -> CustomResourceDefinition {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
    let name = crd.metadata.name.clone().unwrap();
    api.create(&PostParams::default(), &crd).await.unwrap();
    tokio::time::timeout(
        Duration::from_secs(5),
        await_condition(api.clone(), &name, conditions::is_crd_established()),
    )
    .await
    .expect("CRD established in time")
    .unwrap();
    api.get(&name).await.unwrap()
}

fn cloneset_api(client: &kube::Client, version: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apps.kruise.io", version, "CloneSet"),
        "clonesets",
    );
    Api::namespaced_with(client.clone(), "default", &ar)
}

fn cloneset(name: &str, replicas: i64) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}},
        "status": {"replicas": 99}
    }))
    .unwrap()
}

#[tokio::test]
async fn crd_registers_resource_and_discovery() {
    let sim = sim().await;
    let client = sim.client().unwrap();
    let crd = install_crd(&client, cloneset_crd()).await;
    let status = crd.status.unwrap();
    let types: Vec<String> = status
        .conditions
        .unwrap()
        .into_iter()
        .filter(|c| c.status == "True")
        .map(|c| c.type_)
        .collect();
    assert!(
        types.contains(&"Established".to_string()) && types.contains(&"NamesAccepted".to_string())
    );
    assert_eq!(status.accepted_names.unwrap().plural, "clonesets");
    assert_eq!(status.stored_versions, Some(vec!["v1beta1".to_string()]));

    let (code, groups) = raw(&client, "GET", "/apis", None, b"").await;
    assert_eq!(code, 200);
    let group = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "apps.kruise.io")
        .cloned()
        .unwrap();
    // GA > beta > alpha.
    assert_eq!(group["preferredVersion"]["version"], "v1beta1");
    let (code, list) = raw(&client, "GET", "/apis/apps.kruise.io/v1alpha1", None, b"").await;
    assert_eq!(code, 200);
    let names: Vec<&str> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(
        names,
        vec!["clonesets", "clonesets/status", "clonesets/scale"]
    );
    let main = &list["resources"][0];
    assert_eq!(main["shortNames"], json!(["clone"]));
    assert_eq!(main["categories"], json!(["all", "kruise"]));
    assert_eq!(main["kind"], "CloneSet");
    assert_eq!(main["namespaced"], true);

    // kube's discovery client understands it.
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    assert!(discovery.groups().any(|g| g.name() == "apps.kruise.io"));
}

#[tokio::test]
async fn custom_resource_semantics() {
    let sim = sim().await;
    let client = sim.client().unwrap();
    install_crd(&client, cloneset_crd()).await;
    let api = cloneset_api(&client, "v1alpha1");
    let created = api
        .create(&PostParams::default(), &cloneset("cs", 2))
        .await
        .unwrap();
    // Status is dropped on create when the status subresource is enabled.
    assert!(created.data.get("status").is_none());
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(
        created.types.as_ref().unwrap().api_version,
        "apps.kruise.io/v1alpha1"
    );

    // Served at another version with the same storage.
    let beta = cloneset_api(&client, "v1beta1");
    let same = beta.get("cs").await.unwrap();
    assert_eq!(
        same.types.as_ref().unwrap().api_version,
        "apps.kruise.io/v1beta1"
    );
    assert_eq!(same.metadata.uid, created.metadata.uid);

    // Custom resources require resourceVersion on update.
    let mut no_rv = created.clone();
    no_rv.metadata.resource_version = None;
    let err = api_err(
        api.replace("cs", &PostParams::default(), &no_rv)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message.contains("metadata.resourceVersion"),
        "{}",
        err.message
    );

    // Status writes go through /status and never bump generation.
    let st = api
        .patch_status(
            "cs",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 2, "labelSelector": "app=cs"}})),
        )
        .await
        .unwrap();
    assert_eq!(st.metadata.generation, Some(1));
    assert_eq!(st.data["status"]["replicas"], 2);
    // Main-resource writes ignore status and bump generation on spec change.
    let main = api
        .patch(
            "cs",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}, "status": {"replicas": 50}})),
        )
        .await
        .unwrap();
    assert_eq!(main.metadata.generation, Some(2));
    assert_eq!(main.data["status"]["replicas"], 2);

    // Unknown resources 404 at the path level.
    let (code, status) = raw(
        &client,
        "GET",
        "/apis/apps.kruise.io/v1alpha1/namespaces/default/nothings",
        None,
        b"",
    )
    .await;
    assert_eq!(code, 404);
    assert_eq!(status["reason"], "NotFound");
}

#[tokio::test]
async fn scale_subresource() {
    let sim = sim().await;
    let client = sim.client().unwrap();
    install_crd(&client, cloneset_crd()).await;
    let api = cloneset_api(&client, "v1alpha1");
    api.create(&PostParams::default(), &cloneset("cs", 2))
        .await
        .unwrap();
    api.patch_status(
        "cs",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"replicas": 2, "labelSelector": "app=cs"}})),
    )
    .await
    .unwrap();
    let scale = api.get_scale("cs").await.unwrap();
    assert_eq!(scale.spec.as_ref().unwrap().replicas, Some(2));
    let st = scale.status.clone().unwrap();
    assert_eq!(st.replicas, 2);
    assert_eq!(st.selector.as_deref(), Some("app=cs"));
    let patched = api
        .patch_scale(
            "cs",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.spec.unwrap().replicas, Some(5));
    let obj = api.get("cs").await.unwrap();
    assert_eq!(obj.data["spec"]["replicas"], 5);
    assert_eq!(obj.metadata.generation, Some(2));
    let mut s = api.get_scale("cs").await.unwrap();
    s.spec.as_mut().unwrap().replicas = Some(1);
    let replaced = api
        .replace_scale("cs", &PostParams::default(), &s)
        .await
        .unwrap();
    assert_eq!(replaced.spec.unwrap().replicas, Some(1));
    // A stale Scale resourceVersion conflicts.
    let err = api_err(
        api.replace_scale("cs", &PostParams::default(), &s)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 409);
}

#[tokio::test]
async fn replicas_at_the_scale_path_must_be_a_non_negative_int32() {
    let sim = sim().await;
    let client = sim.client().unwrap();
    install_crd(&client, cloneset_crd()).await;
    let api = cloneset_api(&client, "v1alpha1");
    // kube-apiserver's own check, before any validating webhook is called.
    let err = api_err(
        api.create(&PostParams::default(), &cloneset("negative", -1))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message
            .ends_with(".spec.replicas: Invalid value: -1: should be a non-negative integer"),
        "{}",
        err.message
    );
    let err = api_err(
        api.create(&PostParams::default(), &cloneset("huge", 1 << 31))
            .await
            .unwrap_err(),
    );
    assert!(
        err.message
            .ends_with("should be less than or equal to 2147483647"),
        "{}",
        err.message
    );
    api.create(&PostParams::default(), &cloneset("zero", 0))
        .await
        .unwrap();
    let err = api_err(
        api.patch(
            "zero",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": -2}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 422, "{}", err.message);
}

#[tokio::test]
async fn table_output_uses_printer_columns() {
    let sim = sim().await;
    let client = sim.client().unwrap();
    install_crd(&client, cloneset_crd()).await;
    let api = cloneset_api(&client, "v1alpha1");
    api.create(&PostParams::default(), &cloneset("cs", 3))
        .await
        .unwrap();
    let req = http::Request::builder()
        .uri("/apis/apps.kruise.io/v1alpha1/namespaces/default/clonesets")
        .header(
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Vec::new())
        .unwrap();
    let table: Value = client.request(req).await.unwrap();
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
    let cols: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        cols,
        vec![
            "Name",
            "DESIRED",
            "UPDATED",
            "UPDATED_READY",
            "READY",
            "TOTAL",
            "AGE"
        ]
    );
    let cells = table["rows"][0]["cells"].as_array().unwrap();
    assert_eq!(cells[0], "cs");
    assert_eq!(cells[1], 3);
    assert!(cells[2].is_null());
    let age = cells[6].as_str().unwrap();
    assert!(age.ends_with('s'), "{age}");
    assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");

    // Built-in tables for kubectl get pods/ns.
    let req = http::Request::builder()
        .uri("/api/v1/namespaces")
        .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(Vec::new())
        .unwrap();
    let table: Value = client.request(req).await.unwrap();
    let cols: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(cols, vec!["Name", "Status", "Age"]);
    assert_eq!(table["rows"][0]["cells"][1], "Active");
}

#[tokio::test]
async fn deleting_a_crd_removes_its_objects_and_api() {
    let sim = sim().await;
    let client = sim.client().unwrap();
    install_crd(&client, cloneset_crd()).await;
    let api = cloneset_api(&client, "v1alpha1");
    api.create(&PostParams::default(), &cloneset("cs", 1))
        .await
        .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.delete("clonesets.apps.kruise.io", &Default::default())
        .await
        .unwrap();
    let err = api_err(api.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(err.code, 404);
    // Re-creating the CRD does not resurrect old objects.
    install_crd(&client, cloneset_crd()).await;
    assert!(
        api.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn invalid_crd_is_rejected() {
    let sim = sim().await;
    let client = sim.client().unwrap();
    let mut bad = cloneset_crd();
    bad["metadata"]["name"] = json!("wrong.apps.kruise.io");
    let (code, status) = raw(
        &client,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some("application/json"),
        bad.to_string().as_bytes(),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(status["reason"], "Invalid");
}

#[tokio::test]
async fn structural_schema_prunes_unknown_fields_and_defaults() {
    let sim = sim().await;
    let client = sim.client().unwrap();
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "plural": "widgets"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer", "default": 3},
                        "color": {"type": "string"}
                    }},
                    "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
                }}}
            }]
        }
    });
    install_crd(&client, crd).await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
    let w: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"color": "red", "shape": "round"}
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(created.data["spec"], json!({"color": "red", "size": 3}));
    let st = api
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true, "extra": 1}})),
        )
        .await
        .unwrap();
    assert_eq!(st.data["status"], json!({"ready": true}));
}
