//! Golden admission tests: AdmissionReview bodies as the API server sends them, and what a
//! response carries (the uid echoed, the JSONPatch decoded), so each family's
//! `tests/admission_golden.rs` states only its objects and expectations.

use base64::Engine as _;
use serde_json::{Value, json};

/// The uid every review built here carries (the example uid of Kubernetes' docs).
pub const REVIEW_UID: &str = "705ab4f5-6393-11e8-b7cc-42010a800002";

/// What a review is about: `kind` (plural `resource`) of `group`/`version`, named `name`
/// in `default`.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
    pub resource: &'a str,
    pub name: &'a str,
}

impl<'a> Target<'a> {
    /// An `apps.kruise.io` kind.
    pub fn apps(version: &'a str, kind: &'a str, resource: &'a str, name: &'a str) -> Self {
        Target {
            group: "apps.kruise.io",
            version,
            kind,
            resource,
            name,
        }
    }
}

/// An `admission.k8s.io/v1` AdmissionReview of `operation` on `target` by user `admin`, with
/// `object` and `old_object` (JSON null when absent), not a dry run.
pub fn review_body(
    target: Target<'_>,
    operation: &str,
    object: Option<Value>,
    old_object: Option<Value>,
) -> Vec<u8> {
    let Target {
        group,
        version,
        kind,
        resource,
        name,
    } = target;
    let body = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": REVIEW_UID,
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "name": name,
            "namespace": "default",
            "operation": operation,
            "userInfo": {"username": "admin"},
            "object": object,
            "oldObject": old_object,
            "dryRun": false
        }
    });
    // A `Value` always serialises.
    serde_json::to_vec(&body).unwrap_or_default()
}

/// The `response` of a review answered by a handler, after checking it echoes
/// [`REVIEW_UID`].
///
/// # Panics
/// When the uid differs, as a test assertion.
pub fn response_of(review: &Value) -> Value {
    assert_eq!(
        review["response"]["uid"], REVIEW_UID,
        "the review's uid echoed"
    );
    review["response"].clone()
}

/// The JSONPatch a response carries, decoded.
///
/// # Panics
/// When the response carries no base64 JSONPatch, as a test assertion.
pub fn decoded_patch(response: &Value) -> Value {
    assert_eq!(response["patchType"], "JSONPatch", "{response}");
    let encoded = response["patch"].as_str().unwrap_or_default();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .unwrap_or_default();
    serde_json::from_slice(&bytes).unwrap_or(Value::Null)
}
