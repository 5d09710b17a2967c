//! Bad input never crashes an admission handler: arbitrary bytes, arbitrary JSON as the
//! review, and arbitrary JSON as the object of an otherwise valid review, through
//! kruise-webhook's composed pod chain and kruise-sidecarset's SidecarSet handlers. A
//! handler panic would be caught by the server and answered "internal error"; that answer
//! is a failure here too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use kruise_admission::AdmissionRoutes;
use kruise_admission::pod_chain::{KruisePodReadyGate, PodChain, PodMutator};
use kruise_sidecarset::admission::{SidecarSetInjectionStep, StaticSnapshot};
use kruise_sidecarset::api::v1beta1::SidecarSet;
use proptest::prelude::*;
use serde_json::{Value, json};

fn sidecar_sets() -> Arc<[SidecarSet]> {
    let set: SidecarSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "s", "annotations": {"kruise.io/sidecarset-hash": "h"}},
        "spec": {"selector": {"matchLabels": {"app": "nginx"}},
                 "containers": [{"name": "sidecar1", "image": "busybox",
                    "podInjectPolicy": "BeforeAppContainer",
                    "shareVolumePolicy": {"type": "enabled"},
                    "transferEnv": [{"sourceContainerName": "main", "envName": "A"}],
                    "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty"}}],
                 "volumes": [{"name": "v", "emptyDir": {}}]}
    }))
    .unwrap();
    vec![set].into()
}

fn pod_chain() -> AdmissionRoutes {
    let snapshot = StaticSnapshot {
        sidecar_sets: sidecar_sets(),
        ..StaticSnapshot::default()
    };
    AdmissionRoutes::new().handler(PodChain::new(vec![
        Arc::new(KruisePodReadyGate { all_pods: true }) as Arc<dyn PodMutator>,
        Arc::new(SidecarSetInjectionStep::new(snapshot)),
    ]))
}

fn sidecarset_routes() -> AdmissionRoutes {
    let snapshot = StaticSnapshot {
        sidecar_sets: sidecar_sets(),
        ..StaticSnapshot::default()
    };
    kruise_sidecarset::binary::routes(Arc::new(snapshot))
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[a-zA-Z0-9:/._ -]{0,12}".prop_map(Value::String),
        Just(json!("nginx")),
        Just(json!("app")),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("metadata".to_string()),
                    Just("spec".to_string()),
                    Just("labels".to_string()),
                    Just("annotations".to_string()),
                    Just("containers".to_string()),
                    Just("initContainers".to_string()),
                    Just("volumes".to_string()),
                    Just("name".to_string()),
                    Just("image".to_string()),
                    Just("env".to_string()),
                    Just("volumeMounts".to_string()),
                    Just("app".to_string()),
                    "[a-z]{1,6}".prop_map(|s| s),
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A pod-ish object: mostly the right shape, arbitrary within.
fn arb_object() -> impl Strategy<Value = Value> {
    (arb_json(), arb_json(), arb_json()).prop_map(|(meta, spec, labels)| {
        let mut o = json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec});
        if let Some(m) = o["metadata"].as_object_mut() {
            m.insert("labels".into(), labels);
        }
        o
    })
}

fn review(
    group: &str,
    version: &str,
    resource: &str,
    kind: &str,
    op: &str,
    object: Value,
    old: Option<Value>,
) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u-1",
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "namespace": "default", "operation": op, "userInfo": {"username": "fuzz"},
            "object": object, "oldObject": old}
    }))
    .unwrap()
}

/// The outcome is a well-formed answer: a 4xx with a reason, or a review whose response
/// carries the request's uid and is not the server's panic fallback.
async fn check(routes: &AdmissionRoutes, path: &str, body: &[u8]) -> Result<(), TestCaseError> {
    match routes.review(path, body).await {
        Err((code, reason)) => {
            prop_assert!((400..500).contains(&code), "{code} {reason}");
        }
        Ok(v) => {
            prop_assert_eq!(&v["response"]["uid"], &json!("u-1"));
            prop_assert_ne!(
                v.pointer("/response/status/message")
                    .and_then(Value::as_str),
                Some("internal error in admission handler"),
                "a handler panicked"
            );
        }
    }
    Ok(())
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes(body in prop::collection::vec(any::<u8>(), 0..256)) {
        block_on(async {
            let routes = pod_chain();
            if let Err((code, _)) = routes.review("/mutate-pod", &body).await {
                prop_assert_eq!(code, 400);
            }
            Ok(())
        })?;
    }

    #[test]
    fn arbitrary_reviews(review in arb_json()) {
        let body = serde_json::to_vec(&review).unwrap();
        block_on(async {
            match pod_chain().review("/mutate-pod", &body).await {
                Err((code, _)) => prop_assert_eq!(code, 400),
                Ok(v) => prop_assert!(v["response"].is_object()),
            }
            Ok(())
        })?;
    }

    #[test]
    fn arbitrary_pods_through_the_chain(object in arb_object()) {
        let body = review("", "v1", "pods", "Pod", "CREATE", object, None);
        block_on(check(&pod_chain(), "/mutate-pod", &body))?;
    }

    #[test]
    fn arbitrary_sidecarsets_through_kruise_sidecarset(
        spec in arb_json(),
        old_spec in proptest::option::of(arb_json()),
        version in prop_oneof![Just("v1alpha1"), Just("v1beta1")],
    ) {
        let obj = |spec: Value| json!({"apiVersion": format!("apps.kruise.io/{version}"),
            "kind": "SidecarSet", "metadata": {"name": "fuzz"}, "spec": spec});
        let op = if old_spec.is_some() { "UPDATE" } else { "CREATE" };
        let body = review("apps.kruise.io", version, "sidecarsets", "SidecarSet", op,
            obj(spec), old_spec.map(obj));
        let routes = sidecarset_routes();
        block_on(async {
            check(&routes, "/mutate-apps-kruise-io-sidecarset", &body).await?;
            check(&routes, "/validate-apps-kruise-io-sidecarset", &body).await
        })?;
    }
}
