//! The deletion-protection handlers of built-in kinds, golden: AdmissionReviews as
//! kube-apiserver sends them, answered with a fixture inventory (what `Cascading` counts,
//! or a failing list); and fuzzed, so no old object makes one panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use futures::future::BoxFuture;
use kruise_admission::AdmissionRoutes;
use kruise_protection::deletion_webhook::{Inventory, handlers};
use kruise_runtime::Metrics;
use kruise_testkit::admission::{Target, response_of, review_body};
use kube::api::ApiResource;
use proptest::prelude::*;
use serde_json::{Value, json};

/// Fixed counts; `None` fails the list with `boom`.
struct Fixture {
    pods: Option<usize>,
    claims: Option<usize>,
    objects: Option<usize>,
}

fn counted(n: Option<usize>) -> BoxFuture<'static, Result<usize, String>> {
    Box::pin(async move { n.ok_or_else(|| "boom".to_string()) })
}

impl Inventory for Fixture {
    fn active_pods<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<usize, String>> {
        counted(self.pods)
    }
    fn bound_claims<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<usize, String>> {
        counted(self.claims)
    }
    fn active_objects<'a>(&'a self, _: &'a ApiResource) -> BoxFuture<'a, Result<usize, String>> {
        counted(self.objects)
    }
}

fn routes(crd_gate: bool, fixture: Fixture) -> AdmissionRoutes {
    handlers(crd_gate, Arc::new(fixture), &Metrics::new())
        .into_iter()
        .fold(AdmissionRoutes::new(), AdmissionRoutes::shared_handler)
}

const NAMESPACE: Target<'static> = Target {
    group: "",
    version: "v1",
    kind: "Namespace",
    resource: "namespaces",
    name: "team",
};
const CRD: Target<'static> = Target {
    group: "apiextensions.k8s.io",
    version: "v1",
    kind: "CustomResourceDefinition",
    resource: "customresourcedefinitions",
    name: "widgets.example.com",
};
const DEPLOYMENT: Target<'static> = Target {
    group: "apps",
    version: "v1",
    kind: "Deployment",
    resource: "deployments",
    name: "web",
};

fn labelled(name: &str, value: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {"policy.kruise.io/delete-protection": value}}})
}

fn widgets_crd(value: &str) -> Value {
    let mut crd = labelled("widgets.example.com", value);
    crd["spec"] = json!({"group": "example.com", "names": {"plural": "widgets", "kind": "Widget"},
        "versions": [{"name": "v1beta1", "storage": false}, {"name": "v1", "storage": true}]});
    crd
}

async fn answer(routes: &AdmissionRoutes, path: &str, body: &[u8]) -> Value {
    response_of(&routes.review(path, body).await.unwrap())
}

fn denied(response: &Value) -> (bool, i64, &str) {
    (
        response["allowed"].as_bool().unwrap(),
        response["status"]["code"].as_i64().unwrap_or(0),
        response["status"]["message"].as_str().unwrap_or(""),
    )
}

#[tokio::test]
async fn cascading_checks_answer_with_openkruise_messages() {
    let ns = labelled("team", "Cascading");
    let delete_ns = review_body(NAMESPACE, "DELETE", None, Some(ns));
    let cases = [
        (
            Fixture {
                pods: Some(0),
                claims: Some(0),
                objects: None,
            },
            true,
            "",
        ),
        (
            Fixture {
                pods: Some(0),
                claims: Some(2),
                objects: None,
            },
            false,
            "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Cascading and \"Bound\" status pvc 2>0",
        ),
        (
            Fixture {
                pods: None,
                claims: Some(0),
                objects: None,
            },
            false,
            "forbidden by ResourcesProtectionDeletion for list pods error: boom",
        ),
        (
            Fixture {
                pods: Some(0),
                claims: None,
                objects: None,
            },
            false,
            "forbidden by ResourcesProtectionDeletion for list pvc error: boom",
        ),
    ];
    for (fixture, allowed, message) in cases {
        let response = answer(&routes(true, fixture), "/validate-namespace", &delete_ns).await;
        if allowed {
            assert_eq!(response["allowed"], true, "{response}");
        } else {
            assert_eq!(denied(&response), (false, 403, message));
        }
    }

    let delete_crd = review_body(CRD, "DELETE", None, Some(widgets_crd("Cascading")));
    let path = "/validate-customresourcedefinition";
    let none_left = Fixture {
        pods: None,
        claims: None,
        objects: Some(0),
    };
    assert_eq!(
        answer(&routes(true, none_left), path, &delete_crd).await["allowed"],
        true
    );
    let failing = Fixture {
        pods: None,
        claims: None,
        objects: None,
    };
    assert_eq!(
        denied(&answer(&routes(true, failing), path, &delete_crd).await),
        (
            false,
            403,
            "failed to list CRs of example.com/v1, Kind=Widget: boom"
        )
    );
    let gate_off = Fixture {
        pods: None,
        claims: None,
        objects: Some(0),
    };
    assert_eq!(
        denied(&answer(&routes(false, gate_off), path, &delete_crd).await),
        (
            false,
            403,
            "feature-gate DeletionProtectionForCRDCascadingGate is not enabled"
        )
    );
}

#[tokio::test]
async fn only_a_delete_with_its_old_object_is_judged() {
    let routes = routes(
        true,
        Fixture {
            pods: None,
            claims: None,
            objects: None,
        },
    );
    let path = "/validate-apps-deployment";
    let mut web = labelled("web", "Always");
    web["spec"] = json!({"replicas": 3});
    let update = review_body(DEPLOYMENT, "UPDATE", Some(web.clone()), Some(web.clone()));
    assert_eq!(answer(&routes, path, &update).await["allowed"], true);
    let no_old = review_body(DEPLOYMENT, "DELETE", None, None);
    assert_eq!(answer(&routes, path, &no_old).await["allowed"], true);
    let delete = review_body(DEPLOYMENT, "DELETE", None, Some(web));
    assert_eq!(
        denied(&answer(&routes, path, &delete).await),
        (
            false,
            403,
            "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Always"
        )
    );
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        prop_oneof![Just("Always"), Just("Cascading"), Just("v1"), Just("x")].prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(
                prop_oneof![
                    Just("spec".to_string()),
                    Just("replicas".to_string()),
                    Just("versions".to_string()),
                    Just("storage".to_string()),
                    Just("names".to_string()),
                    Just("group".to_string()),
                    "[a-z]{1,6}",
                ],
                inner,
                0..4,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn no_old_object_makes_a_handler_panic(spec in arbitrary_json(), value in "Always|Cascading|None") {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let routes = routes(true, Fixture { pods: Some(1), claims: Some(1), objects: Some(1) });
        let mut old = labelled("x", &value);
        old["spec"] = spec;
        for (target, path) in [
            (NAMESPACE, "/validate-namespace"),
            (CRD, "/validate-customresourcedefinition"),
            (DEPLOYMENT, "/validate-apps-deployment"),
        ] {
            let body = review_body(target, "DELETE", None, Some(old.clone()));
            let out = runtime.block_on(routes.review(path, &body));
            // Answered (allowed or denied), never a crash.
            let response = response_of(&out.unwrap());
            prop_assert!(response["allowed"].is_boolean());
            prop_assert_ne!(response["status"]["code"].as_i64(), Some(500));
        }
    }
}
