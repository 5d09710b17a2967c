//! The StatefulSet webhooks as the API server sees them: AdmissionReview JSON in, response
//! out (the exact JSONPatch of the defaults, denials with field paths, deletion protection),
//! for both served versions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kruise_statefulset::admission::{MUTATE_PATH, MutateStatefulSet, VALIDATE_PATH, routes};
use kruise_statefulset::api::defaults::DefaultingGates;
use kruise_testkit::admission::{self, Target, decoded_patch};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn review_body(
    version: &str,
    operation: &str,
    object: Option<Value>,
    old: Option<Value>,
) -> Vec<u8> {
    let target = Target::apps(version, "StatefulSet", "statefulsets", "web");
    admission::review_body(target, operation, object, old)
}

fn statefulset(version: &str, spec: Value) -> Value {
    json!({
        "apiVersion": format!("apps.kruise.io/{version}"),
        "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": "default", "uid": "sts-uid"},
        "spec": spec,
    })
}

fn minimal_spec() -> Value {
    json!({
        "replicas": 3,
        "serviceName": "web",
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "main", "image": "nginx:1", "x-unknown": "kept"}]}
        }
    })
}

async fn answer(path: &str, body: &[u8]) -> Value {
    answer_with(MutateStatefulSet::default(), path, body).await
}

async fn answer_with(mutate: MutateStatefulSet, path: &str, body: &[u8]) -> Value {
    let out = routes(mutate, None).review(path, body).await.unwrap();
    admission::response_of(&out)
}

/// Defaulting with `TemplateNoDefaults` on: the spec's defaults only.
fn no_template_defaults() -> MutateStatefulSet {
    let mut mutate = MutateStatefulSet::default();
    mutate.template_defaults.enabled = false;
    mutate
}

#[tokio::test]
async fn create_of_either_version_gets_openkruise_defaults_as_a_patch() {
    for version in ["v1alpha1", "v1beta1"] {
        let body = review_body(
            version,
            "CREATE",
            Some(statefulset(version, minimal_spec())),
            None,
        );
        let response = answer_with(no_template_defaults(), MUTATE_PATH, &body).await;
        assert_eq!(response["allowed"], true);
        assert_eq!(
            decoded_patch(&response),
            json!([
                {"op": "add", "path": "/spec/persistentVolumeClaimRetentionPolicy",
                 "value": {"whenDeleted": "Retain", "whenScaled": "Retain"}},
                {"op": "add", "path": "/spec/podManagementPolicy", "value": "OrderedReady"},
                {"op": "add", "path": "/spec/revisionHistoryLimit", "value": 10},
                {"op": "add", "path": "/spec/updateStrategy", "value": {
                    "type": "RollingUpdate", "rollingUpdate": {"partition": 0, "maxUnavailable": 1,
                    "podUpdatePolicy": "ReCreate", "minReadySeconds": 0}}}
            ]),
            "{version}"
        );
    }
}

/// `object` with the JSONPatch of `response` (if any) applied.
fn patched(object: &Value, response: &Value) -> Value {
    let mut out = object.clone();
    if response.get("patch").is_none() {
        return out;
    }
    let patch: json_patch::Patch = serde_json::from_value(decoded_patch(response)).unwrap();
    json_patch::patch(&mut out, &patch).unwrap();
    out
}

#[tokio::test]
async fn templates_get_kubernetes_defaults_on_create_and_on_a_template_change_only() {
    let mut spec = minimal_spec();
    spec["volumeClaimTemplates"] = json!([{"metadata": {"name": "data"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1000Mi"}}}}]);
    let created = statefulset("v1beta1", spec);
    let body = review_body("v1beta1", "CREATE", Some(created.clone()), None);
    let stored = patched(&created, &answer(MUTATE_PATH, &body).await);
    // As OpenKruise stores it: SetDefaultPodSpec on the template, written as Go encodes it,
    // and SetDefaults_PersistentVolumeClaim on each claim template.
    assert_eq!(
        stored["spec"]["template"],
        json!({
            "metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
            "spec": {
                "containers": [{"name": "main", "image": "nginx:1", "resources": {},
                                "x-unknown": "kept",
                                "imagePullPolicy": "Always",
                                "terminationMessagePath": "/dev/termination-log",
                                "terminationMessagePolicy": "File"}],
                "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
                "dnsPolicy": "ClusterFirst", "securityContext": {},
                "schedulerName": "default-scheduler",
            },
        })
    );
    assert_eq!(
        stored["spec"]["volumeClaimTemplates"][0],
        json!({"metadata": {"name": "data", "creationTimestamp": null},
               "spec": {"accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1000Mi"}}},
               "status": {"phase": "Pending"}})
    );
    // An UPDATE that leaves the template alone gets the spec's defaults only; one that
    // changes it gets the template defaults too.
    let mut scaled = stored.clone();
    scaled["spec"]["replicas"] = json!(5);
    scaled["spec"]["template"]["spec"]
        .as_object_mut()
        .unwrap()
        .remove("dnsPolicy");
    let mut old = scaled.clone();
    let body = review_body("v1beta1", "UPDATE", Some(scaled.clone()), Some(old.clone()));
    let response = answer(MUTATE_PATH, &body).await;
    assert_eq!(
        patched(&scaled, &response)["spec"]["template"]["spec"].get("dnsPolicy"),
        None
    );
    old["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:0");
    let body = review_body("v1beta1", "UPDATE", Some(scaled.clone()), Some(old));
    let response = answer(MUTATE_PATH, &body).await;
    assert_eq!(
        patched(&scaled, &response)["spec"]["template"]["spec"]["dnsPolicy"],
        "ClusterFirst"
    );
    // TemplateNoDefaults: none.
    let body = review_body("v1beta1", "CREATE", Some(created.clone()), None);
    let response = answer_with(no_template_defaults(), MUTATE_PATH, &body).await;
    assert_eq!(
        patched(&created, &response)["spec"]["template"],
        created["spec"]["template"]
    );
}

#[tokio::test]
async fn defaulted_sample_is_admitted_and_an_invalid_one_denied_with_paths() {
    let mut spec = minimal_spec();
    spec["podManagementPolicy"] = json!("OrderedReady");
    spec["updateStrategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {
        "partition": 0, "maxUnavailable": 1, "podUpdatePolicy": "ReCreate", "minReadySeconds": 0}});
    for version in ["v1alpha1", "v1beta1"] {
        let body = review_body(
            version,
            "CREATE",
            Some(statefulset(version, spec.clone())),
            None,
        );
        assert_eq!(
            answer(VALIDATE_PATH, &body).await["allowed"],
            true,
            "{version}"
        );
    }
    let mut bad = spec.clone();
    bad["reserveOrdinals"] = json!(["3-1"]);
    bad["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = json!(2);
    bad["updateStrategy"]["rollingUpdate"]["podUpdatePolicy"] = json!("InPlaceIfPossible");
    let body = review_body(
        "v1alpha1",
        "CREATE",
        Some(statefulset("v1alpha1", bad)),
        None,
    );
    let response = answer(VALIDATE_PATH, &body).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 422);
    let message = response["status"]["message"].as_str().unwrap();
    for part in [
        "spec: Invalid value",
        "0 th reserve ordinal is invalid",
        "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: 2: can only work with Parallel PodManagementPolicyType",
        "spec.template.spec.readinessGates: Invalid value: null: must contains InPlaceUpdateReady when podUpdatePolicy is InPlaceIfPossible",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    // An update of an immutable field.
    let old = statefulset("v1beta1", spec.clone());
    let mut changed = spec;
    changed["serviceName"] = json!("other");
    let body = review_body(
        "v1beta1",
        "UPDATE",
        Some(statefulset("v1beta1", changed)),
        Some(old),
    );
    let response = answer(VALIDATE_PATH, &body).await;
    assert_eq!(response["allowed"], false);
    assert!(
        response["status"]["message"]
            .as_str()
            .unwrap()
            .contains("spec: Forbidden: updates to statefulset spec")
    );
}

#[tokio::test]
async fn deletion_protection_refuses_delete_of_a_protected_set() {
    let mut old = statefulset("v1beta1", minimal_spec());
    old["metadata"]["labels"] = json!({"policy.kruise.io/delete-protection": "Cascading"});
    let body = review_body("v1beta1", "DELETE", None, Some(old.clone()));
    let response = answer(VALIDATE_PATH, &body).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 403);
    assert_eq!(
        response["status"]["message"],
        "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Cascading and replicas 3>0"
    );
    old["spec"]["replicas"] = json!(0);
    let body = review_body("v1beta1", "DELETE", None, Some(old));
    assert_eq!(answer(VALIDATE_PATH, &body).await["allowed"], true);
}

fn arbitrary_json() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-zA-Z0-9%-]{0,6}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(
                prop_oneof![
                    Just("replicas".to_string()),
                    Just("reserveOrdinals".to_string()),
                    Just("updateStrategy".to_string()),
                    Just("rollingUpdate".to_string()),
                    Just("maxUnavailable".to_string()),
                    Just("template".to_string()),
                    Just("selector".to_string()),
                    "[a-z]{1,8}",
                ],
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest::proptest! {
    /// Any JSON as a spec, old spec or version never panics a handler: it is answered.
    #[test]
    fn arbitrary_objects_are_answered(spec in arbitrary_json(), old in arbitrary_json(), beta in proptest::bool::ANY) {
        let version = if beta { "v1beta1" } else { "v1alpha1" };
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        for (path, operation, old) in [
            (MUTATE_PATH, "CREATE", None),
            (VALIDATE_PATH, "CREATE", None),
            (VALIDATE_PATH, "UPDATE", Some(statefulset(version, old.clone()))),
            (VALIDATE_PATH, "DELETE", Some(statefulset(version, old.clone()))),
        ] {
            let object = (operation != "DELETE").then(|| statefulset(version, spec.clone()));
            let body = review_body(version, operation, object, old);
            let out = runtime.block_on(routes(MutateStatefulSet::default(), None).review(path, &body));
            proptest::prop_assert!(out.is_ok(), "{out:?}");
        }
    }
}

#[tokio::test]
async fn with_the_resize_gate_an_on_pod_rolling_update_claim_template_keeps_its_class() {
    let mut spec = minimal_spec();
    spec["podManagementPolicy"] = json!("OrderedReady");
    spec["updateStrategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {
        "partition": 0, "maxUnavailable": 1, "podUpdatePolicy": "ReCreate", "minReadySeconds": 0}});
    spec["volumeClaimUpdateStrategy"] = json!({"type": "OnPodRollingUpdate"});
    let claims = |class: &str, size: &str| {
        json!([{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "storageClassName": class, "resources": {"requests": {"storage": size}}}}])
    };
    let mut old = spec.clone();
    old["volumeClaimTemplates"] = claims("a", "1Gi");
    let gated = routes(
        MutateStatefulSet {
            gates: DefaultingGates {
                auto_resize_pvc: true,
                ..DefaultingGates::default()
            },
            ..MutateStatefulSet::default()
        },
        None,
    );
    for (class, size, allowed) in [("a", "2Gi", true), ("b", "1Gi", false)] {
        let mut new = spec.clone();
        new["volumeClaimTemplates"] = claims(class, size);
        let body = review_body(
            "v1beta1",
            "UPDATE",
            Some(statefulset("v1beta1", new)),
            Some(statefulset("v1beta1", old.clone())),
        );
        let out = gated.review(VALIDATE_PATH, &body).await.unwrap();
        assert_eq!(out["response"]["allowed"], allowed, "{out}");
        if !allowed {
            let message = out["response"]["status"]["message"].as_str().unwrap();
            assert!(
                message.contains("spec.volumeClaimTemplates[data]")
                    && message
                        .contains("volumeClaimTemplate can not be modified when OnRollingUpdate"),
                "{message}"
            );
        }
        // Without the gate, the class change is not refused.
        assert_eq!(answer(VALIDATE_PATH, &body).await["allowed"], true);
    }
}

/// With the resize gate, a claim template's size change is refused when its StorageClass,
/// read from kruise-sim through the webhook's client, forbids expansion (OpenKruise's
/// `ValidateVolumeClaimTemplateUpdate`); allowed when the class allows it.
#[tokio::test]
async fn with_the_resize_gate_a_resize_needs_a_class_read_from_the_cluster_that_allows_it() {
    use k8s_openapi::api::storage::v1::StorageClass;
    let (_sim, client) = kruise_testkit::sim_with_crds(1, &[]).await;
    let classes: kube::Api<StorageClass> = kube::Api::all(client.clone());
    for (name, expandable, default) in [
        ("fixed", false, false),
        ("growing", true, false),
        ("standard", false, true),
    ] {
        let mut class = json!({"metadata": {"name": name}, "provisioner": "sim.kruise.io/hostpath",
                               "allowVolumeExpansion": expandable});
        if default {
            class["metadata"]["annotations"] =
                json!({"storageclass.kubernetes.io/is-default-class": "true"});
        }
        classes
            .create(&Default::default(), &serde_json::from_value(class).unwrap())
            .await
            .unwrap();
    }
    let mut spec = minimal_spec();
    spec["podManagementPolicy"] = json!("OrderedReady");
    spec["updateStrategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {
        "partition": 0, "maxUnavailable": 1, "podUpdatePolicy": "ReCreate", "minReadySeconds": 0}});
    spec["volumeClaimUpdateStrategy"] = json!({"type": "OnPodRollingUpdate"});
    let claims = |class: Option<&str>, size: &str| {
        let mut template = json!({"metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}});
        if let Some(class) = class {
            template["spec"]["storageClassName"] = json!(class);
        }
        json!([template])
    };
    let gated = routes(
        MutateStatefulSet {
            gates: DefaultingGates {
                auto_resize_pvc: true,
                ..DefaultingGates::default()
            },
            ..MutateStatefulSet::default()
        },
        Some(client.clone()),
    );
    let storage = "spec.volumeClaimTemplates[data].spec.resources.requests.storage";
    for (class, denial) in [
        (Some("growing"), None),
        (
            Some("fixed"),
            Some(format!(
                "{storage}: Forbidden: storage class fixed does not support volume expansion"
            )),
        ),
        (
            Some("missing"),
            Some(
                "spec.volumeClaimTemplates[data].spec.storageClassName: Invalid value: \"missing\": can not get sc"
                    .to_string(),
            ),
        ),
        // No class named: the cluster's default one, which forbids expansion.
        (
            None,
            Some(format!(
                "{storage}: Forbidden: storage class standard does not support volume expansion"
            )),
        ),
    ] {
        let mut old = spec.clone();
        old["volumeClaimTemplates"] = claims(class, "1Gi");
        let mut new = spec.clone();
        new["volumeClaimTemplates"] = claims(class, "2Gi");
        let body = review_body(
            "v1beta1",
            "UPDATE",
            Some(statefulset("v1beta1", new.clone())),
            Some(statefulset("v1beta1", old.clone())),
        );
        let out = gated.review(VALIDATE_PATH, &body).await.unwrap();
        assert_eq!(
            out["response"]["allowed"],
            denial.is_none(),
            "{class:?}: {out}"
        );
        if let Some(denial) = denial {
            let message = out["response"]["status"]["message"].as_str().unwrap();
            assert!(message.contains(&denial), "{class:?}: {message}");
            assert_eq!(out["response"]["status"]["code"], 422, "{out}");
        }
        // The same template unchanged in size is not checked.
        let body = review_body(
            "v1beta1",
            "UPDATE",
            Some(statefulset("v1beta1", old.clone())),
            Some(statefulset("v1beta1", old)),
        );
        let out = gated.review(VALIDATE_PATH, &body).await.unwrap();
        assert_eq!(out["response"]["allowed"], true, "{class:?}: {out}");
    }
}
