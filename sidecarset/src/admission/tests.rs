use super::*;
use kruise_common::admission::AdmissionRoutes;
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
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
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

fn pod_json(labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-", "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}})
}

#[tokio::test]
async fn pod_review_gets_sidecar_patch() {
    let routes =
        AdmissionRoutes::new().handler(PodInjectionHandler::new(snapshot(vec![nginx_set()])));
    let pod = pod_json(json!({"app": "nginx"}));
    let body = review(
        json!({"group": "", "version": "v1", "resource": "pods"}),
        "CREATE",
        pod.clone(),
        None,
    );
    let out = routes.review("/mutate-pod", &body).await.unwrap();
    assert_eq!(out["response"]["allowed"], true);
    assert_eq!(out["response"]["patchType"], "JSONPatch");
    let patch = decode_patch(&out).unwrap();
    let mut doc = pod.clone();
    json_patch::patch(&mut doc, &patch).unwrap();
    // Applied to the pod as sent: the sidecar is first, no namespace was invented.
    assert_eq!(doc["spec"]["containers"][0]["name"], "sidecar1");
    assert_eq!(
        doc["spec"]["containers"][0]["env"],
        json!([{"name": "IS_INJECTED", "value": "true"}])
    );
    assert_eq!(doc["spec"]["containers"][1]["name"], "main");
    assert!(doc["metadata"].get("namespace").is_none());
    assert_eq!(
        doc["metadata"]["annotations"]["kruise.io/sidecarset-injected-list"],
        "test-sidecarset"
    );
    let hash = &doc["metadata"]["annotations"]["kruise.io/sidecarset-hash"];
    let parsed: Value = serde_json::from_str(hash.as_str().unwrap()).unwrap();
    assert_eq!(
        parsed["test-sidecarset"]["hash"],
        nginx_set().metadata.annotations.unwrap()["kruise.io/sidecarset-hash"].as_str()
    );

    // A pod no SidecarSet matches is allowed unchanged.
    let other = review(
        json!({"group": "", "version": "v1", "resource": "pods"}),
        "CREATE",
        pod_json(json!({"app": "redis"})),
        None,
    );
    let out = routes.review("/mutate-pod", &other).await.unwrap();
    assert_eq!(out["response"]["allowed"], true);
    assert!(out["response"].get("patch").is_none());

    // UPDATE and subresources are not touched.
    let upd = review(
        json!({"group": "", "version": "v1", "resource": "pods"}),
        "UPDATE",
        pod.clone(),
        Some(pod),
    );
    let out = routes.review("/mutate-pod", &upd).await.unwrap();
    assert!(out["response"].get("patch").is_none());
}

#[tokio::test]
async fn bad_pod_annotation_denies_with_message() {
    let routes =
        AdmissionRoutes::new().handler(PodInjectionHandler::new(snapshot(vec![nginx_set()])));
    let mut pod = pod_json(json!({"app": "nginx"}));
    pod["metadata"]["annotations"] = json!({"kruise.io/sidecarset-hash": "[1,2"});
    let body = review(
        json!({"group": "", "version": "v1", "resource": "pods"}),
        "CREATE",
        pod,
        None,
    );
    let out = routes.review("/mutate-pod", &body).await.unwrap();
    assert_eq!(out["response"]["allowed"], false);
    assert!(
        out["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("kruise.io/sidecarset-hash")
    );
}

#[test]
fn webhook_scope_narrows_to_sidecarset_selectors() {
    let handler = PodInjectionHandler::new(snapshot(vec![nginx_set()]));
    let spec = handler.webhook();
    assert_eq!(spec.failure_policy, FailurePolicy::Fail);
    assert_eq!(spec.kind, WebhookKind::Mutating);
    assert_eq!(
        spec.rules,
        vec![Rule::new(&["CREATE"], "", &["v1"], &["pods"])]
    );
    assert_eq!(
        serde_json::to_value(&spec.object_selector).unwrap(),
        json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["nginx"]}]})
    );
    assert_eq!(
        serde_json::to_value(&spec.namespace_selector).unwrap(),
        json!({"matchExpressions": [{"key": "control-plane", "operator": "DoesNotExist"}]})
    );

    // Two SidecarSets: the union of `app` values; keys not shared are dropped.
    let mut redis = nginx_set();
    redis.metadata.name = Some("redis".into());
    redis.spec.selector = Some(
        serde_json::from_value(json!({"matchLabels": {"app": "redis", "tier": "db"}})).unwrap(),
    );
    redis.spec.namespace_selector = Some(
        serde_json::from_value(json!({"matchLabels": {"kubernetes.io/metadata.name": "db"}}))
            .unwrap(),
    );
    let scope = pod_webhook_scope(&[nginx_set(), redis.clone()]);
    assert_eq!(
        serde_json::to_value(&scope.object_selector).unwrap(),
        json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["nginx", "redis"]}]})
    );
    // Not every SidecarSet selects namespaces: no namespace narrowing beyond control-plane.
    assert_eq!(
        scope
            .namespace_selector
            .match_expressions
            .as_ref()
            .unwrap()
            .len(),
        1
    );
    let scope = pod_webhook_scope(&[redis]);
    assert_eq!(
        serde_json::to_value(&scope.namespace_selector).unwrap(),
        json!({"matchExpressions": [{"key": "control-plane", "operator": "DoesNotExist"},
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["db"]}]})
    );

    // Disjoint keys: the union is not one selector, so no object narrowing.
    let mut zone = nginx_set();
    zone.spec.selector = Some(
        serde_json::from_value(
            json!({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}),
        )
        .unwrap(),
    );
    assert_eq!(
        pod_webhook_scope(&[nginx_set(), zone]).object_selector,
        None
    );

    // No active SidecarSet: the webhook matches no pod at all.
    let mut paused = nginx_set();
    paused.spec.injection_strategy.paused = true;
    let scope = pod_webhook_scope(&[paused]);
    let nothing = scope.object_selector.unwrap();
    let labels = BTreeMap::from([(NO_SIDECARSET_KEY.to_string(), "x".to_string())]);
    assert!(!kruise_common::pods::selector::selector_matches(&nothing, &labels).unwrap());
    assert!(!kruise_common::pods::selector::selector_matches(&nothing, &BTreeMap::new()).unwrap());
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
    assert_eq!(
        out["response"]["status"]["message"],
        "spec.containers: Invalid value: \"sidecar1\": container sidecar1 already exist in test-sidecarset"
    );
}

proptest! {
    #[test]
    fn arbitrary_pod_reviews_never_panic(obj in crate::conversion::tests::arb_json(), labels in proptest::option::of(Just(json!({"app": "nginx"})))) {
        let handler = PodInjectionHandler::new(snapshot(vec![nginx_set()]));
        let mut obj = obj;
        if let (Some(l), Some(m)) = (labels, obj.as_object_mut()) {
            m.insert("metadata".into(), json!({"labels": l}));
        }
        let body = review(json!({"group": "", "version": "v1", "resource": "pods"}), "CREATE", obj, None);
        let Ok(review) = serde_json::from_slice::<kube::core::admission::AdmissionReview<DynamicObject>>(&body) else { return Ok(()) };
        let Ok(request): Result<AdmissionRequest<DynamicObject>, _> = review.try_into() else { return Ok(()) };
        let _ = handler.decide(&request, jiff::Timestamp::UNIX_EPOCH, 0.5);
        let _ = SidecarSetMutatingHandler::decide(&request);
    }
}

#[test]
fn unknown_pod_fields_stay_with_their_container() {
    let handler = PodInjectionHandler::new(Arc::new(StaticSnapshot {
        sidecar_sets: vec![nginx_set()].into(),
        ..Default::default()
    }));
    let mut pod = pod_json(json!({"app": "nginx"}));
    pod["spec"]["containers"][0]["futureField"] = json!({"x": 1});
    pod["spec"]["futureSpecField"] = json!(true);
    let body = review(
        json!({"group": "", "version": "v1", "resource": "pods"}),
        "CREATE",
        pod.clone(),
        None,
    );
    let review: kube::core::admission::AdmissionReview<DynamicObject> =
        serde_json::from_slice(&body).unwrap();
    let request: AdmissionRequest<DynamicObject> = review.try_into().unwrap();
    let patch = handler
        .decide(&request, jiff::Timestamp::UNIX_EPOCH, 0.5)
        .unwrap()
        .unwrap();
    let mut doc = pod.clone();
    json_patch::patch(&mut doc, &patch).unwrap();
    assert_eq!(doc["spec"]["containers"][1]["name"], "main");
    assert_eq!(doc["spec"]["containers"][1]["futureField"], json!({"x": 1}));
    assert!(doc["spec"]["containers"][0].get("futureField").is_none());
    assert_eq!(doc["spec"]["futureSpecField"], true);
}
