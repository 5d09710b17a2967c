use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::json;

use crate::common::{api_err, raw, sim};
use crate::crd::{cloneset_crd, install_crd};

async fn make_cm(api: &Api<ConfigMap>, name: &str) -> ConfigMap {
    let c: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": name}, "data": {"a": "1", "b": "2"}}))
            .unwrap();
    api.create(&PostParams::default(), &c).await.unwrap()
}

#[tokio::test]
async fn json_patch_applies_and_failed_test_is_422() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    make_cm(&api, "c").await;
    let p: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/data/a", "value": "x"},
        {"op": "remove", "path": "/data/b"}
    ]))
    .unwrap();
    let out = api
        .patch("c", &PatchParams::default(), &Patch::Json::<()>(p))
        .await
        .unwrap();
    assert_eq!(
        out.data.unwrap(),
        [("a".to_string(), "x".to_string())].into()
    );
    let p: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/data/a", "value": "nope"}]))
            .unwrap();
    let err = api_err(
        api.patch("c", &PatchParams::default(), &Patch::Json::<()>(p))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
}

#[tokio::test]
async fn merge_patch_null_deletes() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    make_cm(&api, "c").await;
    let out = api
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": null, "c": "3"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        out.data.unwrap(),
        [
            ("b".to_string(), "2".to_string()),
            ("c".to_string(), "3".to_string())
        ]
        .into()
    );
}

#[tokio::test]
async fn patch_with_stale_resource_version_conflicts() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    let c = make_cm(&api, "c").await;
    api.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"a": "2"}})),
    )
    .await
    .unwrap();
    let stale =
        json!({"metadata": {"resourceVersion": c.metadata.resource_version}, "data": {"a": "3"}});
    let err = api_err(
        api.patch("c", &PatchParams::default(), &Patch::Merge(stale))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
}

#[tokio::test]
async fn strategic_merge_patch_uses_merge_keys() {
    use k8s_openapi::api::apps::v1::Deployment;
    let sim = sim().await;
    let api: Api<Deployment> = Api::namespaced(sim.client().unwrap(), "default");
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "d", "finalizers": ["a/b"]},
        "spec": {
            "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}}, "spec": {
                "containers": [
                    {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}],
                     "ports": [{"containerPort": 80}], "volumeMounts": [{"name": "v", "mountPath": "/v"}]},
                    {"name": "side", "image": "side:1"}
                ],
                "volumes": [{"name": "v", "emptyDir": {}}],
                "tolerations": [{"key": "k1", "operator": "Exists"}]
            }}
        }
    }))
    .unwrap();
    api.create(&PostParams::default(), &d).await.unwrap();
    let patch = json!({
        "metadata": {"finalizers": ["c/d"]},
        "spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "app"}, {"name": "side"}],
            "containers": [
                {"name": "app", "image": "app:2", "env": [{"name": "B", "value": "2"}], "ports": [{"containerPort": 8080}]},
                {"name": "side", "$patch": "delete"}
            ],
            "volumes": [{"name": "w", "emptyDir": {}}],
            "tolerations": [{"key": "k2", "operator": "Exists"}]
        }}}
    });
    let out = api
        .patch("d", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    let spec = out.spec.unwrap().template.spec.unwrap();
    assert_eq!(spec.containers.len(), 1);
    let app = &spec.containers[0];
    assert_eq!(app.image.as_deref(), Some("app:2"));
    let env: Vec<String> = app
        .env
        .clone()
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(env, vec!["A", "B"]);
    let ports: Vec<i32> = app
        .ports
        .clone()
        .unwrap()
        .into_iter()
        .map(|p| p.container_port)
        .collect();
    assert_eq!(ports, vec![80, 8080]);
    assert_eq!(app.volume_mounts.as_ref().unwrap().len(), 1);
    let vols: Vec<String> = spec.volumes.unwrap().into_iter().map(|v| v.name).collect();
    assert_eq!(vols, vec!["v", "w"]);
    // Tolerations have no merge key in PodSpec: replaced.
    let tol: Vec<String> = spec
        .tolerations
        .unwrap()
        .into_iter()
        .filter_map(|t| t.key)
        .collect();
    assert_eq!(tol, vec!["k2"]);
    assert_eq!(out.metadata.finalizers.unwrap(), vec!["a/b", "c/d"]);

    // $patch: replace on a list (the mount of "v" must go too, or validation fails).
    let patch = json!({"spec": {"template": {"spec": {
        "containers": [{"name": "app", "volumeMounts": [{"$patch": "replace"}]}],
        "volumes": [{"$patch": "replace"}, {"name": "only", "emptyDir": {}}]
    }}}});
    let out = api
        .patch("d", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    let spec = out.spec.unwrap().template.spec.unwrap();
    let vols: Vec<String> = spec.volumes.unwrap().into_iter().map(|v| v.name).collect();
    assert_eq!(vols, vec!["only"]);
    assert!(
        spec.containers[0]
            .volume_mounts
            .as_ref()
            .is_none_or(|m| m.is_empty())
    );
}

#[tokio::test]
async fn pod_spec_is_immutable_except_images_and_added_tolerations() {
    let sim = sim().await;
    let api: Api<Pod> = Api::namespaced(sim.client().unwrap(), "default");
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "app", "image": "app:1"}], "tolerations": [{"key": "k1", "operator": "Exists"}]}
    }))
    .unwrap();
    api.create(&PostParams::default(), &p).await.unwrap();
    // In-place image update: allowed.
    let out = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"containers": [{"name": "app", "image": "app:2"}]}})),
        )
        .await
        .unwrap();
    assert_eq!(
        out.spec.unwrap().containers[0].image.as_deref(),
        Some("app:2")
    );
    // Adding a toleration: allowed; labels: allowed.
    api.patch("p", &PatchParams::default(), &Patch::Merge(json!({
        "metadata": {"labels": {"x": "y"}},
        "spec": {"tolerations": [{"key": "k1", "operator": "Exists"}, {"key": "k2", "operator": "Exists"}]}
    })))
    .await
    .unwrap();
    // Anything else: 422 with the API server's message.
    let err = api_err(
        api.patch("p", &PatchParams::default(), &Patch::Strategic(json!({"spec": {"containers": [{"name": "app", "env": [{"name": "A", "value": "1"}]}]}})))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert!(err.message.contains("Pod \"p\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"), "{}", err.message);
    // Pod creation validates the spec.
    let bad: Pod = serde_json::from_value(json!({
        "metadata": {"name": "bad"},
        "spec": {"containers": [{"name": "a", "image": "i"}, {"name": "a", "image": ""}]}
    }))
    .unwrap();
    let err = api_err(api.create(&PostParams::default(), &bad).await.unwrap_err());
    assert_eq!(err.code, 422);
    let fields: Vec<String> = err
        .details
        .unwrap()
        .causes
        .into_iter()
        .map(|c| c.field)
        .collect();
    assert_eq!(
        fields,
        vec!["spec.containers[1].name", "spec.containers[1].image"]
    );
}

#[tokio::test]
async fn strategic_merge_patch_on_custom_resource_is_415() {
    let sim = sim().await;
    let client = sim.client().unwrap();
    install_crd(&client, cloneset_crd()).await;
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "apps.kruise.io",
        "v1alpha1",
        "CloneSet",
    ));
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
        "metadata": {"name": "cs"}, "spec": {"replicas": 1}
    }))
    .unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
    let err = api_err(
        api.patch(
            "cs",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        (err.code, err.reason.as_str()),
        (415, "UnsupportedMediaType")
    );
    let out = api
        .patch(
            "cs",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(out.data["spec"]["replicas"], 2);
}

#[tokio::test]
async fn server_side_apply_owns_fields_and_detects_conflicts() {
    let sim = sim().await;
    let client = sim.client().unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s", "labels": {"team": "a"}}, "data": {"x": "1", "y": "1"}});
    let mut changes = sim.store().subscribe();
    let out = api
        .patch("s", &PatchParams::apply("alice"), &Patch::Apply(&cfg))
        .await
        .unwrap();
    // An apply that creates is one write (one ADDED event). (The ServiceAccount controller
    // may be writing meanwhile: only the ConfigMap's events count.)
    let configmap_events: Vec<_> = std::iter::from_fn(|| changes.try_recv().ok())
        .filter(|ev| ev.gr.resource == "configmaps")
        .collect();
    assert_eq!(configmap_events.len(), 1);
    assert_eq!(configmap_events[0].event_type, kruise_sim::EventType::Added);
    let mf = out.metadata.managed_fields.clone().unwrap();
    assert_eq!(mf.len(), 1);
    assert_eq!(mf[0].manager.as_deref(), Some("alice"));
    assert_eq!(mf[0].operation.as_deref(), Some("Apply"));
    let fields = serde_json::to_value(&mf[0].fields_v1).unwrap();
    assert!(fields["f:data"]["f:x"].is_object(), "{fields}");

    // Re-applying the same configuration changes nothing.
    let again = api
        .patch("s", &PatchParams::apply("alice"), &Patch::Apply(&cfg))
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version,
        out.metadata.resource_version
    );

    // Another manager changing an owned field conflicts...
    let bob = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"}, "data": {"x": "2"}});
    let err = api_err(
        api.patch("s", &PatchParams::apply("bob"), &Patch::Apply(&bob))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert!(
        err.message.contains("conflict with \"alice\""),
        "{}",
        err.message
    );
    let causes = err.details.unwrap().causes;
    assert_eq!(causes[0].reason, "FieldManagerConflict");
    assert_eq!(causes[0].field, ".data.x");
    // ...unless forced, which transfers ownership.
    let forced = api
        .patch("s", &PatchParams::apply("bob").force(), &Patch::Apply(&bob))
        .await
        .unwrap();
    assert_eq!(forced.data.as_ref().unwrap()["x"], "2");

    // Alice drops y from her configuration: y is removed (nobody else owns it);
    // x stays (bob owns it now).
    let alice2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s", "labels": {"team": "a"}}, "data": {}});
    let out = api
        .patch("s", &PatchParams::apply("alice"), &Patch::Apply(&alice2))
        .await
        .unwrap();
    let data = out.data.unwrap();
    assert_eq!(data.get("x").map(String::as_str), Some("2"));
    assert!(!data.contains_key("y"));

    // A resourceVersion in the applied configuration is a precondition.
    let stale = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s", "resourceVersion": "1"}, "data": {"z": "1"}});
    let err = api_err(
        api.patch("s", &PatchParams::apply("alice"), &Patch::Apply(&stale))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 409);

    // fieldManager is required for apply.
    let (code, status) = raw(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/s",
        Some("application/apply-patch+yaml"),
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\n",
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(status["reason"], "BadRequest");

    // YAML bodies are accepted, and apply creates missing objects (201).
    let yaml = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fromyaml\ndata:\n  k: v\n";
    let (code, obj) = raw(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/fromyaml?fieldManager=yaml",
        Some("application/apply-patch+yaml"),
        yaml,
    )
    .await;
    assert_eq!(code, 201, "{obj}");
    assert_eq!(obj["data"]["k"], "v");
}
