use super::*;
use kruise_admission::AdmissionRoutes;
use proptest::prelude::*;
use serde_json::{Value, json};

struct Snapshot {
    sets: Arc<[SidecarSet]>,
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
}

impl SidecarSetSnapshot for Snapshot {
    fn sidecar_sets(&self) -> Arc<[SidecarSet]> {
        self.sets.clone()
    }
    fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.namespaces.get(namespace).cloned()
    }
}

fn set(v: Value) -> SidecarSet {
    let mut v = v;
    v["apiVersion"] = json!("apps.kruise.io/v1beta1");
    v["kind"] = json!("SidecarSet");
    let mut s: SidecarSet = serde_json::from_value(v).unwrap();
    defaults::default_v1beta1(&mut s).unwrap();
    s
}

fn nginx_set() -> SidecarSet {
    set(json!({"metadata": {"name": "test-sidecarset"},
        "spec": {"selector": {"matchLabels": {"app": "nginx"}},
                 "containers": [{"name": "sidecar1", "image": "centos:6.7", "command": ["sleep", "999d"]}]}}))
}

fn snapshot(sets: Vec<SidecarSet>) -> Snapshot {
    Snapshot {
        sets: sets.into(),
        namespaces: BTreeMap::from([("default".to_string(), BTreeMap::new())]),
    }
}

fn review(resource: Value, operation: &str, object: Value, old: Option<Value>) -> Vec<u8> {
    let mut request = json!({
        "uid": "u1",
        "kind": {"group": resource["group"], "version": resource["version"], "kind": "SidecarSet"},
        "resource": resource,
        "operation": operation,
        "namespace": "default",
        "name": "",
        "userInfo": {},
        "object": object,
        "dryRun": false
    });
    if let Some(o) = old {
        request["oldObject"] = o;
    }
    serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})).unwrap()
}

fn decode_patch(resp: &Value) -> Option<json_patch::Patch> {
    use base64::Engine as _;
    let b64 = resp.pointer("/response/patch")?.as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[tokio::test]
async fn sidecarset_defaulting_and_validation_webhooks() {
    let routes = AdmissionRoutes::new()
        .handler(SidecarSetMutatingHandler)
        .handler(SidecarSetValidatingHandler::new(snapshot(
            vec![nginx_set()],
        )));
    let gvr = json!({"group": "apps.kruise.io", "version": "v1alpha1", "resource": "sidecarsets"});
    let obj = json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet", "metadata": {"name": "s2"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "namespace": "prod",
                 "containers": [{"name": "c", "image": "busybox"}]}});
    let out = routes
        .review(
            "/mutate-apps-kruise-io-sidecarset",
            &review(gvr.clone(), "CREATE", obj.clone(), None),
        )
        .await
        .unwrap();
    let mut doc = obj.clone();
    json_patch::patch(&mut doc, &decode_patch(&out).unwrap()).unwrap();
    assert_eq!(
        doc["spec"]["containers"][0]["podInjectPolicy"],
        "BeforeAppContainer"
    );
    assert_eq!(doc["spec"]["containers"][0]["imagePullPolicy"], "Always");
    assert_eq!(doc["spec"]["updateStrategy"]["type"], "RollingUpdate");
    assert_eq!(doc["spec"]["namespace"], "prod");
    assert!(doc["metadata"]["annotations"]["kruise.io/sidecarset-hash"].is_string());

    // Validation of the defaulted object: allowed; a clash with test-sidecarset is denied.
    let out = routes
        .review(
            "/validate-apps-kruise-io-sidecarset",
            &review(gvr.clone(), "CREATE", doc.clone(), None),
        )
        .await
        .unwrap();
    assert_eq!(out["response"]["allowed"], true);
    let mut clash = doc.clone();
    clash["spec"]["selector"] = json!({"matchLabels": {"app": "nginx"}});
    clash["spec"].as_object_mut().unwrap().remove("namespace");
    clash["spec"]["containers"][0]["name"] = json!("sidecar1");
    let out = routes
        .review(
            "/validate-apps-kruise-io-sidecarset",
            &review(gvr, "CREATE", clash, None),
        )
        .await
        .unwrap();
    assert_eq!(out["response"]["allowed"], false);
    assert_eq!(out["response"]["status"]["code"], 422);
    assert_eq!(
        out["response"]["status"]["message"],
        "spec.containers: Invalid value: \"sidecar1\": container sidecar1 already exist in test-sidecarset"
    );
}

proptest! {
    #[test]
    fn arbitrary_sidecarset_reviews_never_panic(
        spec in crate::conversion::tests::arb_json(),
        version in prop_oneof![Just("v1alpha1"), Just("v1beta1"), Just("v2")],
        operation in prop_oneof![Just("CREATE"), Just("UPDATE"), Just("DELETE")],
    ) {
        let gvr = json!({"group": "apps.kruise.io", "version": version, "resource": "sidecarsets"});
        let obj = json!({"apiVersion": format!("apps.kruise.io/{version}"), "kind": "SidecarSet",
            "metadata": {"name": "s"}, "spec": spec});
        let body = review(gvr, operation, obj.clone(), Some(obj));
        let Ok(review) = serde_json::from_slice::<kube::core::admission::AdmissionReview<DynamicObject>>(&body) else { return Ok(()) };
        let Ok(request): Result<AdmissionRequest<DynamicObject>, _> = review.try_into() else { return Ok(()) };
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let _ = SidecarSetMutatingHandler.handle(&request).await;
            let _ = SidecarSetValidatingHandler::new(snapshot(vec![nginx_set()])).handle(&request).await;
        });
    }
}

#[tokio::test]
async fn defaulting_leaves_fields_the_types_do_not_know_alone() {
    let routes = AdmissionRoutes::new().handler(SidecarSetMutatingHandler);
    for version in ["v1alpha1", "v1beta1"] {
        let gvr = json!({"group": "apps.kruise.io", "version": version, "resource": "sidecarsets"});
        let obj = json!({"apiVersion": format!("apps.kruise.io/{version}"), "kind": "SidecarSet",
            "metadata": {"name": "s", "futureMeta": 1},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "futureSpecField": {"a": 1},
                     "containers": [{"name": "c", "image": "busybox", "futureContainerField": [1]}]},
            "futureTopLevel": true});
        let out = routes
            .review(
                "/mutate-apps-kruise-io-sidecarset",
                &review(gvr, "CREATE", obj.clone(), None),
            )
            .await
            .unwrap();
        let patch = decode_patch(&out).unwrap();
        let ops = serde_json::to_value(&patch).unwrap();
        assert!(
            ops.as_array()
                .unwrap()
                .iter()
                .all(|op| op["op"] != "remove"),
            "{version}: {ops}"
        );
        let mut doc = obj.clone();
        json_patch::patch(&mut doc, &patch).unwrap();
        assert_eq!(doc["spec"]["futureSpecField"], json!({"a": 1}), "{version}");
        assert_eq!(
            doc["spec"]["containers"][0]["futureContainerField"],
            json!([1])
        );
        assert_eq!(doc["metadata"]["futureMeta"], 1);
        assert_eq!(doc["futureTopLevel"], true);
        // The defaults themselves are there.
        assert_eq!(
            doc["spec"]["containers"][0]["podInjectPolicy"],
            "BeforeAppContainer"
        );
        assert_eq!(doc["spec"]["updateStrategy"]["type"], "RollingUpdate");
        assert!(doc["metadata"]["annotations"]["kruise.io/sidecarset-hash"].is_string());
    }
}

/// Validates a v1beta1 SidecarSet patching `annotations` against a snapshot whose
/// `kruise-configuration` holds `whitelist` (no key when `None`).
async fn whitelist_review(
    labels: Value,
    annotations: Value,
    whitelist: Option<Value>,
    defaults_allowed: bool,
) -> Value {
    let snapshot = StaticSnapshot {
        kruise_configuration: whitelist
            .map(|w| {
                BTreeMap::from([(
                    "SidecarSet_PatchPodMetadata_WhiteList".to_string(),
                    w.to_string(),
                )])
            })
            .unwrap_or_default(),
        patch_metadata_defaults_allowed: defaults_allowed,
        ..StaticSnapshot::default()
    };
    let routes = AdmissionRoutes::new()
        .handler(SidecarSetMutatingHandler)
        .handler(SidecarSetValidatingHandler::new(snapshot));
    let gvr = json!({"group": "apps.kruise.io", "version": "v1beta1", "resource": "sidecarsets"});
    let obj = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "patcher", "labels": labels},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "containers": [{"name": "c", "image": "busybox"}],
                 "patchPodMetadata": [{"annotations": annotations, "patchPolicy": "Overwrite"}]}});
    let out = routes
        .review(
            "/mutate-apps-kruise-io-sidecarset",
            &review(gvr.clone(), "CREATE", obj.clone(), None),
        )
        .await
        .unwrap();
    let mut doc = obj;
    json_patch::patch(&mut doc, &decode_patch(&out).unwrap()).unwrap();
    let out = routes
        .review(
            "/validate-apps-kruise-io-sidecarset",
            &review(gvr, "CREATE", doc, None),
        )
        .await
        .unwrap();
    out["response"].clone()
}

#[tokio::test]
async fn patch_pod_metadata_needs_openkruises_whitelist() {
    let gated = json!({"rules": [
        {"selector": {"matchLabels": {"team": "mesh"}}, "allowedAnnotationKeyExprs": ["^mesh\\.io/.*"]},
        {"allowedAnnotationKeyExprs": ["oom-score"]}
    ]});
    let denied = |message: &str| json!({"allowed": false, "code": 422, "message": message});
    let outcome = |r: Value| {
        if r["allowed"] == true {
            json!({"allowed": true})
        } else {
            json!({"allowed": false, "code": r["status"]["code"], "message": r["status"]["message"]})
        }
    };
    for (labels, annotations, whitelist, defaults_allowed, want) in [
        // No ConfigMap key: refused, unless the gate allows defaults.
        (
            json!({}),
            json!({"a.io/x": "1"}),
            None,
            false,
            denied(
                "spec.patchPodMetadata: Required value: SidecarSet patch metadata whitelist not found",
            ),
        ),
        (
            json!({}),
            json!({"a.io/x": "1"}),
            None,
            true,
            json!({"allowed": true}),
        ),
        // A rule's selector scopes it to SidecarSets with those labels.
        (
            json!({"team": "mesh"}),
            json!({"mesh.io/inject": "1", "oom-score": "5"}),
            Some(gated.clone()),
            false,
            json!({"allowed": true}),
        ),
        (
            json!({}),
            json!({"mesh.io/inject": "1"}),
            Some(gated.clone()),
            false,
            denied(
                "spec.patchPodMetadata: Required value: sidecarSet patch metadata annotation(mesh.io/inject) is not allowed",
            ),
        ),
        // Keys are Go regexps searched in the key (unanchored).
        (
            json!({}),
            json!({"x/oom-score-adj": "1"}),
            Some(gated.clone()),
            false,
            json!({"allowed": true}),
        ),
        // No rule applies to this SidecarSet.
        (
            json!({}),
            json!({"a.io/x": "1"}),
            Some(
                json!({"rules": [{"selector": {"matchLabels": {"team": "mesh"}}, "allowedAnnotationKeyExprs": [".*"]}]}),
            ),
            false,
            denied(
                "spec.patchPodMetadata: Required value: sidecarSet patch metadata annotation is not allowed",
            ),
        ),
    ] {
        let got = whitelist_review(
            labels.clone(),
            annotations.clone(),
            whitelist,
            defaults_allowed,
        )
        .await;
        assert_eq!(
            outcome(got),
            want,
            "labels {labels} annotations {annotations}"
        );
    }
}
