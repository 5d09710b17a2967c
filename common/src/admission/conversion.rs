//! CRD version conversion (`apiextensions.k8s.io/v1` ConversionReview at `/convert`).
//! Each family registers a [`Converter`] for its kinds; the server dispatches every object
//! of a review by its group and kind.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Converts objects of some kinds between their served versions.
pub trait Converter: Send + Sync + 'static {
    /// Whether this converter owns objects of `group`/`kind`.
    fn handles(&self, group: &str, kind: &str) -> bool;
    /// Converts one object to `desired_api_version` (`group/version`). The result must keep
    /// metadata as it was, apart from `apiVersion`. An `Err` fails the whole review with
    /// its message.
    fn convert(&self, object: Value, desired_api_version: &str) -> Result<Value, String>;
}

/// The ConversionReview envelope (not in k8s-openapi, which carries only REST resources).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConversionReview {
    /// `apiextensions.k8s.io/v1`.
    pub api_version: String,
    /// `ConversionReview`.
    pub kind: String,
    /// Set by the API server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<ConversionRequest>,
    /// Set by the webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<ConversionResponse>,
}

/// What to convert.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConversionRequest {
    /// Copied into the response.
    pub uid: String,
    /// Target `group/version`.
    #[serde(rename = "desiredAPIVersion")]
    pub desired_api_version: String,
    /// Objects to convert.
    #[serde(default)]
    pub objects: Vec<Value>,
}

/// The converted objects, or the failure.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConversionResponse {
    /// The request's uid.
    pub uid: String,
    /// In request order.
    #[serde(default)]
    pub converted_objects: Vec<Value>,
    /// `{status: Success}` or `{status: Failure, message}`.
    pub result: Value,
}

/// Answers one ConversionReview body; `Err` (HTTP 400) when the body is not one.
pub fn review(converters: &[std::sync::Arc<dyn Converter>], body: &[u8]) -> Result<Value, String> {
    let review: ConversionReview =
        serde_json::from_slice(body).map_err(|e| format!("malformed ConversionReview: {e}"))?;
    if review.kind != "ConversionReview" || !review.api_version.starts_with("apiextensions.k8s.io/")
    {
        return Err(format!(
            "unsupported review {}/{}: want apiextensions.k8s.io/v1 ConversionReview",
            review.api_version, review.kind
        ));
    }
    let api_version = review.api_version.clone();
    let request = review
        .request
        .ok_or_else(|| "ConversionReview has no request".to_string())?;
    let response = match convert_all(converters, &request) {
        Ok(objects) => ConversionResponse {
            uid: request.uid.clone(),
            converted_objects: objects,
            result: serde_json::json!({"status": "Success"}),
        },
        Err(message) => ConversionResponse {
            uid: request.uid.clone(),
            converted_objects: Vec::new(),
            result: serde_json::json!({"status": "Failure", "message": message}),
        },
    };
    serde_json::to_value(ConversionReview {
        api_version,
        kind: "ConversionReview".into(),
        request: None,
        response: Some(response),
    })
    .map_err(|e| e.to_string())
}

fn convert_all(
    converters: &[std::sync::Arc<dyn Converter>],
    request: &ConversionRequest,
) -> Result<Vec<Value>, String> {
    request
        .objects
        .iter()
        .map(|obj| {
            let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
            let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
            let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
            if api_version == request.desired_api_version {
                return Ok(obj.clone());
            }
            let converter = converters
                .iter()
                .find(|c| c.handles(group, kind))
                .ok_or_else(|| format!("no converter for {kind} in group {group:?}"))?;
            let converted = converter.convert(obj.clone(), &request.desired_api_version)?;
            if converted.get("apiVersion").and_then(Value::as_str)
                != Some(request.desired_api_version.as_str())
            {
                return Err(format!(
                    "converter returned {kind} without apiVersion {}",
                    request.desired_api_version
                ));
            }
            Ok(converted)
        })
        .collect()
}
