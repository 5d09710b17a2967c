//! The admission server over real TLS: a certificate it generated, verified by the caBundle
//! it would publish; reviews decided, malformed ones refused with 400, handler failures
//! turned into denials, conversion reviews answered.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use futures::future::BoxFuture;
use kruise_admission::certs::{self, SelfManaged, StoredCerts};
use kruise_admission::{
    self as admission, AdmissionHandler, AdmissionRoutes, Converter, FailurePolicy, HandlerError,
    Rule, WebhookKind, WebhookSpec,
};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Adds a label; denies objects named `forbidden` (no code: a policy denial) and `invalid`
/// (422); fails on `broken`, cannot decode `undecodable`; panics on `panic`.
struct LabelPods;

impl AdmissionHandler for LabelPods {
    fn path(&self) -> &str {
        "/mutate-pod"
    }
    fn webhook(&self) -> WebhookSpec {
        WebhookSpec {
            name: "mpod.test.kruise.io".into(),
            kind: WebhookKind::Mutating,
            rules: vec![Rule::new(&["CREATE"], "", &["v1"], &["pods"])],
            failure_policy: FailurePolicy::Ignore,
            namespace_selector: None,
            object_selector: None,
            timeout_seconds: 5,
        }
    }
    fn handle<'a>(
        &'a self,
        req: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(async move {
            match req.name.as_str() {
                "forbidden" => Ok(AdmissionResponse::from(req).deny("name is forbidden")),
                "invalid" => Ok(admission::denied(
                    req,
                    422,
                    "metadata.name: Invalid value: \"invalid\"",
                )),
                "broken" => Err(HandlerError::Internal("cannot read the pod's owner".into())),
                "undecodable" => Err(HandlerError::Decode {
                    kind: "Pod".into(),
                    reason: "invalid type: string, expected i32".into(),
                }),
                "panic" => panic!("handler bug"),
                _ => {
                    let patch: json_patch::Patch = serde_json::from_value(json!([
                        {"op": "add", "path": "/metadata/labels", "value": {"injected": "true"}}
                    ]))
                    .unwrap();
                    Ok(AdmissionResponse::from(req).with_patch(patch).unwrap())
                }
            }
        })
    }
}

struct RenameVersion;

impl Converter for RenameVersion {
    fn handles(&self, group: &str, kind: &str) -> bool {
        group == "example.kruise.io" && kind == "Greeting"
    }
    fn convert(&self, mut object: Value, desired: &str) -> Result<Value, String> {
        if object["spec"]["message"] == "unconvertible" {
            return Err("message cannot be converted".into());
        }
        object["apiVersion"] = json!(desired);
        Ok(object)
    }
}

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
           "spec": {"containers": [{"name": "main", "image": "nginx"}]}})
}

struct Running {
    addr: std::net::SocketAddr,
    bundle: String,
    stop: CancellationToken,
}

async fn start() -> Running {
    let mut settings = SelfManaged::for_service("kruise-system", "certs", "kruise-webhook");
    settings.hosts = vec!["localhost".into(), "127.0.0.1".into()];
    let empty = StoredCerts::default();
    let now = jiff::Timestamp::now();
    let stored = certs::plan_renewal(&empty, &settings, now)
        .unwrap()
        .unwrap();
    let serving = stored.serving_cert(now).unwrap();
    let tls = axum_server::tls_rustls::RustlsConfig::from_pem(
        serving.cert_pem.clone().into_bytes(),
        serving.key_pem.clone().into_bytes(),
    )
    .await
    .unwrap();
    let routes = AdmissionRoutes::new()
        .handler(LabelPods)
        .converter(RenameVersion);
    let stop = CancellationToken::new();
    let server = admission::serve("127.0.0.1:0".parse().unwrap(), routes, tls, stop.clone())
        .await
        .unwrap();
    Running {
        addr: server.addr,
        bundle: serving.ca_bundle,
        stop,
    }
}

#[tokio::test]
async fn mutating_review_over_tls_verified_by_the_ca_bundle() {
    let s = start().await;
    let body = support::review("", "v1", "Pod", "pods", pod("web-0"));
    let (code, text) = support::post_tls(s.addr, "localhost", &s.bundle, "/mutate-pod", &body)
        .await
        .unwrap();
    assert_eq!(code, 200, "{text}");
    let review: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(review["kind"], "AdmissionReview");
    let resp = &review["response"];
    assert_eq!(resp["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_eq!(resp["allowed"], true);
    assert_eq!(resp["patchType"], "JSONPatch");
    let patch = String::from_utf8(base64_decode(resp["patch"].as_str().unwrap())).unwrap();
    let patch: Value = serde_json::from_str(&patch).unwrap();
    assert_eq!(patch[0]["path"], "/metadata/labels");
    // By IP as well: the certificate covers 127.0.0.1.
    let (code, _) = support::post_tls(s.addr, "127.0.0.1", &s.bundle, "/mutate-pod", &body)
        .await
        .unwrap();
    assert_eq!(code, 200);
    s.stop.cancel();
}

#[tokio::test]
async fn a_different_ca_is_refused() {
    let s = start().await;
    let other = certs::generate_ca(
        "someone-else",
        jiff::Timestamp::now(),
        Duration::from_secs(3600),
    )
    .unwrap();
    let body = support::review("", "v1", "Pod", "pods", pod("web-0"));
    let err = support::post_tls(s.addr, "localhost", &other.cert_pem, "/mutate-pod", &body)
        .await
        .unwrap_err();
    assert!(err.to_lowercase().contains("certificate"), "{err}");
}

/// Each denial carries the code and reason the API server hands to the client (kubectl
/// prints `Error from server (<reason>): …`), as controller-runtime's helpers answer for
/// OpenKruise: a policy denial 403 Forbidden, an undecodable object 400 BadRequest, a
/// handler failure 500 InternalError; a handler's own code is kept (422 without a reason,
/// as OpenKruise's `admission.Errored(422, …)`).
#[tokio::test]
async fn denials_errors_and_panics_become_responses() {
    let s = start().await;
    for (name, code, reason, message) in [
        ("forbidden", 403, "Forbidden", "name is forbidden"),
        (
            "invalid",
            422,
            "",
            "metadata.name: Invalid value: \"invalid\"",
        ),
        (
            "undecodable",
            400,
            "BadRequest",
            "cannot decode Pod: invalid type: string, expected i32",
        ),
        (
            "broken",
            500,
            "InternalError",
            "cannot read the pod's owner",
        ),
        (
            "panic",
            500,
            "InternalError",
            "internal error in admission handler",
        ),
    ] {
        let body = support::review("", "v1", "Pod", "pods", pod(name));
        let (http, text) = support::post_tls(s.addr, "localhost", &s.bundle, "/mutate-pod", &body)
            .await
            .unwrap();
        assert_eq!(http, 200, "{name}: {text}");
        let review: Value = serde_json::from_str(&text).unwrap();
        let status = &review["response"]["status"];
        assert_eq!(review["response"]["allowed"], false, "{name}");
        assert_eq!(status["message"], message, "{name}");
        assert_eq!(status["code"], code, "{name}");
        assert_eq!(status["reason"].as_str().unwrap_or(""), reason, "{name}");
    }
    // The server survived the panic.
    let body = support::review("", "v1", "Pod", "pods", pod("after-panic"));
    let (code, _) = support::post_tls(s.addr, "localhost", &s.bundle, "/mutate-pod", &body)
        .await
        .unwrap();
    assert_eq!(code, 200);
}

/// An UPDATE review carries the object and its old version: for an object of 1.5 MiB (a
/// large annotation) that is over 3 MiB, more than axum's default body limit (2 MB).
#[tokio::test]
async fn an_update_review_of_a_large_object_is_answered() {
    let s = start().await;
    let mut large = pod("large");
    large["metadata"]["annotations"] = json!({"example.com/blob": "x".repeat(1536 * 1024)});
    let body = serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u-large",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "large", "namespace": "default", "operation": "UPDATE",
            "userInfo": {"username": "admin"},
            "object": large, "oldObject": large}
    }))
    .unwrap();
    assert!(body.len() > 3 * 1024 * 1024, "{}", body.len());
    let (code, text) = support::post_tls(s.addr, "localhost", &s.bundle, "/mutate-pod", &body)
        .await
        .unwrap();
    assert_eq!(code, 200, "{}", &text[..text.len().min(300)]);
    let review: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(review["response"]["uid"], "u-large");
    assert_eq!(review["response"]["allowed"], true);

    // Beyond what the API server can send (two objects at its 3 MiB limit and the
    // request around them), the body is refused unread.
    let too_large = vec![b' '; admission::MAX_ADMISSION_REVIEW_BYTES + 1];
    let outcome =
        support::post_tls(s.addr, "localhost", &s.bundle, "/mutate-pod", &too_large).await;
    // The server may answer 413 before the whole body is sent, or close the connection.
    if let Ok((code, text)) = outcome {
        assert_eq!(code, 413, "{text}");
    }
    // And it still serves.
    let body = support::review("", "v1", "Pod", "pods", pod("after-large"));
    let (code, _) = support::post_tls(s.addr, "localhost", &s.bundle, "/mutate-pod", &body)
        .await
        .unwrap();
    assert_eq!(code, 200);
    s.stop.cancel();
}

#[tokio::test]
async fn malformed_reviews_get_400_with_a_reason() {
    let s = start().await;
    for (body, reason) in [
        (b"not json".to_vec(), "malformed AdmissionReview"),
        (
            br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{}}"#
                .to_vec(),
            "unsupported review",
        ),
        (
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec(),
            "no request",
        ),
    ] {
        let (code, text) = support::post_tls(s.addr, "localhost", &s.bundle, "/mutate-pod", &body)
            .await
            .unwrap();
        assert_eq!(code, 400, "{text}");
        assert!(text.contains(reason), "{text}");
    }
}

#[tokio::test]
async fn conversion_reviews() {
    let s = start().await;
    let review = |message: &str| {
        serde_json::to_vec(&json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "u1", "desiredAPIVersion": "example.kruise.io/v1beta1", "objects": [
                {"apiVersion": "example.kruise.io/v1alpha1", "kind": "Greeting",
                 "metadata": {"name": "g", "namespace": "default", "uid": "x"}, "spec": {"message": message}}
            ]}
        }))
        .unwrap()
    };
    let (code, text) = support::post_tls(s.addr, "localhost", &s.bundle, "/convert", &review("hi"))
        .await
        .unwrap();
    assert_eq!(code, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["kind"], "ConversionReview");
    assert_eq!(v["response"]["uid"], "u1");
    assert_eq!(v["response"]["result"]["status"], "Success");
    assert_eq!(
        v["response"]["convertedObjects"][0]["apiVersion"],
        "example.kruise.io/v1beta1"
    );
    assert_eq!(v["response"]["convertedObjects"][0]["metadata"]["uid"], "x");
    let (_, text) = support::post_tls(
        s.addr,
        "localhost",
        &s.bundle,
        "/convert",
        &review("unconvertible"),
    )
    .await
    .unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["response"]["result"]["status"], "Failure");
    assert_eq!(
        v["response"]["result"]["message"],
        "message cannot be converted"
    );
    let (code, _) = support::post_tls(s.addr, "localhost", &s.bundle, "/convert", b"{}")
        .await
        .unwrap();
    assert_eq!(code, 400);
}

/// The API server converts a LIST in one review: a page of objects well over one object's
/// size limit is converted, not refused with 413.
#[tokio::test]
async fn a_conversion_review_of_many_objects_is_answered() {
    let s = start().await;
    let objects: Vec<Value> = (0..8)
        .map(|i| {
            json!({"apiVersion": "example.kruise.io/v1alpha1", "kind": "Greeting",
                "metadata": {"name": format!("g{i}"), "namespace": "default", "uid": format!("u{i}")},
                "spec": {"message": "x".repeat(1024 * 1024)}})
        })
        .collect();
    let body = serde_json::to_vec(&json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "list", "desiredAPIVersion": "example.kruise.io/v1beta1",
            "objects": objects}
    }))
    .unwrap();
    assert!(body.len() > admission::MAX_ADMISSION_REVIEW_BYTES);
    let (code, text) = support::post_tls(s.addr, "localhost", &s.bundle, "/convert", &body)
        .await
        .unwrap();
    assert_eq!(code, 200, "{}", &text[..text.len().min(300)]);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["response"]["result"]["status"], "Success");
    assert_eq!(
        v["response"]["convertedObjects"].as_array().unwrap().len(),
        8
    );
    s.stop.cancel();
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

#[tokio::test]
async fn requests_denials_and_latency_are_counted_per_webhook() {
    let metrics = kruise_runtime::Metrics::new();
    let routes = AdmissionRoutes::new()
        .handler(LabelPods)
        .with_metrics(&metrics);
    for name in ["ok-1", "ok-2", "forbidden"] {
        let body = support::review("", "v1", "Pod", "pods", pod(name));
        routes.review("/mutate-pod", &body).await.unwrap();
    }
    assert_eq!(
        routes
            .review("/mutate-pod", b"not json")
            .await
            .unwrap_err()
            .0,
        400
    );
    let text = metrics.encode().unwrap();
    for line in [
        r#"controller_runtime_webhook_requests_total{webhook="/mutate-pod",code="200"} 3"#,
        r#"controller_runtime_webhook_requests_total{webhook="/mutate-pod",code="400"} 1"#,
        r#"kruise_webhook_denials_total{webhook="/mutate-pod"} 1"#,
        r#"controller_runtime_webhook_latency_seconds_count{webhook="/mutate-pod"} 4"#,
        r#"controller_runtime_webhook_requests_in_flight{webhook="/mutate-pod"} 0"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}
