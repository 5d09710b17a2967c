//! Server-side field validation (`?fieldValidation=`), as kube-apiserver does it since
//! 1.27: Strict refuses a write with an undeclared field (400 BadRequest naming it),
//! Warn (the default) drops it and returns a `Warning` header, Ignore drops it silently;
//! for built-in kinds and custom resources, on create, update and patch.

use http_body_util::BodyExt as _;
use serde_json::{Value, json};

use crate::common::sim;
use crate::crd::install_crd;

struct Reply {
    status: u16,
    warnings: Vec<String>,
    body: Value,
}

async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: &Value,
) -> Reply {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(kube::client::Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let status = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    Reply {
        status,
        warnings,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    }
}

fn typo_pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "nginx", "imagePullPolicyy": "Always"}],
                 "restartPolicyy": "Never"}})
}

const POD_TYPOS: &str =
    "unknown field \"spec.containers[0].imagePullPolicyy\", unknown field \"spec.restartPolicyy\"";

#[tokio::test]
async fn built_in_kinds_refuse_warn_about_or_ignore_unknown_fields() {
    let sim = sim().await;
    let client = sim.client().unwrap();
    let pods = "/api/v1/namespaces/default/pods";

    let strict = send(
        &client,
        "POST",
        &format!("{pods}?fieldValidation=Strict"),
        "application/json",
        &typo_pod("strict"),
    )
    .await;
    assert_eq!(strict.status, 400, "{}", strict.body);
    assert_eq!(strict.body["reason"], "BadRequest");
    assert_eq!(
        strict.body["message"],
        format!(
            "Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: {POD_TYPOS}"
        )
    );
    let missing = send(
        &client,
        "GET",
        &format!("{pods}/strict"),
        "application/json",
        &json!({}),
    )
    .await;
    assert_eq!(missing.status, 404);

    // No parameter means Warn: stored without the unknown fields, one warning each.
    for (query, warned) in [
        ("", true),
        ("?fieldValidation=Warn", true),
        ("?fieldValidation=Ignore", false),
    ] {
        let name = format!("pod-{}", query.len());
        let reply = send(
            &client,
            "POST",
            &format!("{pods}{query}"),
            "application/json",
            &typo_pod(&name),
        )
        .await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        assert!(reply.body["spec"].get("restartPolicyy").is_none());
        assert!(
            reply.body["spec"]["containers"][0]
                .get("imagePullPolicyy")
                .is_none()
        );
        let expected: Vec<String> = if warned {
            vec![
                "299 - \"unknown field \\\"spec.containers[0].imagePullPolicyy\\\"\"".into(),
                "299 - \"unknown field \\\"spec.restartPolicyy\\\"\"".into(),
            ]
        } else {
            vec![]
        };
        assert_eq!(reply.warnings, expected, "{query}");
    }

    // update and patch: the same rules, patches without the decode prefix.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"k": "v"}});
    let created = send(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        &cm,
    )
    .await;
    assert_eq!(created.status, 201);
    let mut typo = created.body.clone();
    typo["dataa"] = json!({"k": "w"});
    let put = send(
        &client,
        "PUT",
        "/api/v1/namespaces/default/configmaps/cm?fieldValidation=Strict",
        "application/json",
        &typo,
    )
    .await;
    assert_eq!(put.status, 400);
    assert_eq!(
        put.body["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"dataa\""
    );
    for content_type in [
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
    ] {
        let patch = send(
            &client,
            "PATCH",
            "/api/v1/namespaces/default/configmaps/cm?fieldValidation=Strict",
            content_type,
            &json!({"dataa": {"k": "w"}}),
        )
        .await;
        assert_eq!(patch.status, 400, "{content_type}");
        assert_eq!(
            patch.body["message"],
            "strict decoding error: unknown field \"dataa\""
        );
    }
    let json_patch = send(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/cm?fieldValidation=Strict",
        "application/json-patch+json",
        &json!([{"op": "add", "path": "/dataa", "value": {"k": "w"}}]),
    )
    .await;
    assert_eq!(json_patch.status, 400);
    // A patch of known fields passes even under Strict.
    let fine = send(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/cm?fieldValidation=Strict",
        "application/merge-patch+json",
        &json!({"data": {"k": "w"}}),
    )
    .await;
    assert_eq!(fine.status, 200, "{}", fine.body);
    assert!(fine.warnings.is_empty());
    let bad_mode = send(
        &client,
        "POST",
        &format!("{pods}?fieldValidation=Loud"),
        "application/json",
        &typo_pod("loud"),
    )
    .await;
    assert_eq!(bad_mode.status, 400);
    sim.shutdown().await;
}

#[tokio::test]
async fn custom_resources_are_checked_against_their_structural_schema() {
    let sim = sim().await;
    let client = sim.client().unwrap();
    install_crd(
        &client,
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                "scope": "Namespaced",
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {
                            "replicas": {"type": "integer"},
                            "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                        }}
                    }}}}]
            }
        }),
    )
    .await;
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let widget = |name: &str, spec: Value| json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec});

    let strict = send(
        &client,
        "POST",
        &format!("{widgets}?fieldValidation=Strict"),
        "application/json",
        &widget("w", json!({"replicaz": 2})),
    )
    .await;
    assert_eq!(strict.status, 400, "{}", strict.body);
    assert_eq!(
        strict.body["message"],
        "Widget in version \"v1\" cannot be handled as a Widget: strict decoding error: unknown field \"spec.replicaz\""
    );
    // x-kubernetes-preserve-unknown-fields keeps anything below it.
    let kept = send(
        &client,
        "POST",
        &format!("{widgets}?fieldValidation=Strict"),
        "application/json",
        &widget(
            "w",
            json!({"replicas": 1, "template": {"anything": {"goes": true}}}),
        ),
    )
    .await;
    assert_eq!(kept.status, 201, "{}", kept.body);
    assert_eq!(kept.body["spec"]["template"]["anything"]["goes"], true);
    // ObjectMeta's fields are checked too.
    let mut meta_typo = widget("m", json!({}));
    meta_typo["metadata"]["labelz"] = json!({"a": "b"});
    let meta = send(
        &client,
        "POST",
        &format!("{widgets}?fieldValidation=Strict"),
        "application/json",
        &meta_typo,
    )
    .await;
    assert_eq!(meta.status, 400);
    assert!(
        meta.body["message"]
            .as_str()
            .unwrap()
            .ends_with("unknown field \"metadata.labelz\""),
        "{}",
        meta.body
    );
    // Warn: pruned and warned about; patches too.
    let patched = send(
        &client,
        "PATCH",
        &format!("{widgets}/w"),
        "application/merge-patch+json",
        &json!({"spec": {"replicaz": 3}}),
    )
    .await;
    assert_eq!(patched.status, 200, "{}", patched.body);
    assert!(patched.body["spec"].get("replicaz").is_none());
    assert_eq!(
        patched.warnings,
        ["299 - \"unknown field \\\"spec.replicaz\\\"\""]
    );
    sim.shutdown().await;
}
