//! CRD version conversion (`apiextensions.k8s.io/v1` ConversionReview at `/convert`).
//! Each family registers a [`Converter`] for its kinds; the server dispatches every object
//! of a review by its group and kind.
//!
//! A family describes a kind's two versions with a [`VersionMapping`]: two edits of the JSON
//! object that rewrite only the fields that differ. Every other field — metadata, status,
//! the pod template, and fields the family's types do not know (a newer CRD's) — is carried
//! over as it came. Every `VersionMapping` is a [`Converter`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::api::version::{APPS_GROUP, V1ALPHA1, V1BETA1, group_of, version_of};

/// Converts objects of some kinds between their served versions.
pub trait Converter: Send + Sync + 'static {
    /// Whether this converter owns objects of `group`/`kind`.
    fn handles(&self, group: &str, kind: &str) -> bool;
    /// Converts one object to `desired_api_version` (`group/version`). The result must keep
    /// metadata as it was, apart from `apiVersion`. An `Err` fails the whole review with
    /// its message.
    fn convert(&self, object: Value, desired_api_version: &str) -> Result<Value, String>;
}

/// What differs between the two served versions of one kind, as edits of the JSON object.
/// The group and versions default to every kruise kind's: `apps.kruise.io`, `v1alpha1`
/// served, `v1beta1` stored.
pub trait VersionMapping: Send + Sync + 'static {
    /// The kind, e.g. `CloneSet`.
    fn kind(&self) -> &str;
    /// The API group.
    fn group(&self) -> &str {
        APPS_GROUP
    }
    /// The hub (storage) version name.
    fn hub(&self) -> &str {
        V1BETA1
    }
    /// The other served version name.
    fn spoke(&self) -> &str {
        V1ALPHA1
    }
    /// Rewrites a spoke object into the hub's shape in place (the converter sets `apiVersion`).
    fn spoke_to_hub(&self, object: &mut Map<String, Value>) -> Result<(), ConversionError>;
    /// Rewrites a hub object into the spoke's shape in place.
    fn hub_to_spoke(&self, object: &mut Map<String, Value>) -> Result<(), ConversionError>;
}

/// Why an object could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConversionError {
    /// The object or the desired version is not a served version of the kind.
    #[error("unsupported apiVersion {api_version:?} for {kind} conversion")]
    UnsupportedVersion {
        /// The kind.
        kind: String,
        /// The apiVersion asked for or found.
        api_version: String,
    },
    /// A field the mapping rewrites does not have the shape it needs.
    #[error("converting {kind}: {field} is not an object")]
    NotAnObject {
        /// The kind.
        kind: String,
        /// The field, e.g. `spec.updateStrategy`.
        field: String,
    },
    /// A value the mapping carries across does not parse (OpenKruise's message).
    #[error("{0}")]
    Invalid(String),
}

/// A kind whose two versions have the same fields: only `apiVersion` changes, fields the
/// types do not know included.
#[derive(Debug, Clone, Copy)]
pub struct SameFields(pub &'static str);

impl VersionMapping for SameFields {
    fn kind(&self) -> &str {
        self.0
    }

    fn spoke_to_hub(&self, _object: &mut Map<String, Value>) -> Result<(), ConversionError> {
        Ok(())
    }

    fn hub_to_spoke(&self, _object: &mut Map<String, Value>) -> Result<(), ConversionError> {
        Ok(())
    }
}

/// Converts one object of `mapping`'s kind to `desired_api_version` (`group/version`).
pub fn convert_object<M: VersionMapping + ?Sized>(
    mapping: &M,
    object: Value,
    desired_api_version: &str,
) -> Result<Value, ConversionError> {
    let from = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if from == desired_api_version {
        return Ok(object);
    }
    let unsupported = |api_version: &str| ConversionError::UnsupportedVersion {
        kind: mapping.kind().to_string(),
        api_version: api_version.to_string(),
    };
    let served = |api_version: &str| {
        group_of(api_version) == mapping.group()
            && [mapping.hub(), mapping.spoke()].contains(&version_of(api_version))
    };
    if !served(&from) {
        return Err(unsupported(&from));
    }
    if !served(desired_api_version) {
        return Err(unsupported(desired_api_version));
    }
    let Value::Object(mut fields) = object else {
        return Err(ConversionError::NotAnObject {
            kind: mapping.kind().to_string(),
            field: "the object".into(),
        });
    };
    // Two served versions: a change is either spoke -> hub or hub -> spoke.
    if version_of(desired_api_version) == mapping.hub() {
        mapping.spoke_to_hub(&mut fields)?;
    } else {
        mapping.hub_to_spoke(&mut fields)?;
    }
    fields.insert("apiVersion".into(), desired_api_version.into());
    Ok(Value::Object(fields))
}

impl<M: VersionMapping> Converter for M {
    fn handles(&self, group: &str, kind: &str) -> bool {
        group == self.group() && kind == self.kind()
    }

    fn convert(&self, object: Value, desired_api_version: &str) -> Result<Value, String> {
        convert_object(self, object, desired_api_version).map_err(|e| e.to_string())
    }
}

/// The object at `parent[key]`, created empty when absent or `null`, for a mapping to edit;
/// `path` names the field in the error when it holds something else.
pub fn object_field<'a>(
    parent: &'a mut Map<String, Value>,
    key: &str,
    kind: &str,
    path: &str,
) -> Result<&'a mut Map<String, Value>, ConversionError> {
    let slot = parent
        .entry(key)
        .or_insert_with(|| Value::Object(Map::new()));
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
        .ok_or_else(|| ConversionError::NotAnObject {
            kind: kind.to_string(),
            field: path.to_string(),
        })
}

/// Removes `parent[key]` when it is an empty object (so an edit that emptied a map does not
/// leave `{}` behind).
pub fn remove_if_empty(parent: &mut Map<String, Value>, key: &str) {
    if parent
        .get(key)
        .and_then(Value::as_object)
        .is_some_and(Map::is_empty)
    {
        parent.remove(key);
    }
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

/// A ConversionReview as the API server sends it. kube-apiserver also sends an empty
/// `response` (`{"uid":"","convertedObjects":null,"result":{"metadata":{}}}`), which is
/// not read, so its nulls do not make the review malformed.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IncomingReview {
    api_version: String,
    kind: String,
    #[serde(default)]
    request: Option<ConversionRequest>,
}

/// Answers one ConversionReview body; `Err` (HTTP 400) when the body is not one.
pub fn review(converters: &[std::sync::Arc<dyn Converter>], body: &[u8]) -> Result<Value, String> {
    let review: IncomingReview =
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `v1alpha1` calls it `spec.size`, `v1beta1` calls it `spec.replicas`.
    struct Renamed;

    impl VersionMapping for Renamed {
        fn group(&self) -> &str {
            "example.io"
        }
        fn kind(&self) -> &str {
            "Widget"
        }
        fn hub(&self) -> &str {
            "v1beta1"
        }
        fn spoke(&self) -> &str {
            "v1alpha1"
        }
        fn spoke_to_hub(&self, object: &mut Map<String, Value>) -> Result<(), ConversionError> {
            let spec = object_field(object, "spec", "Widget", "spec")?;
            if let Some(size) = spec.remove("size") {
                spec.insert("replicas".into(), size);
            }
            Ok(())
        }
        fn hub_to_spoke(&self, object: &mut Map<String, Value>) -> Result<(), ConversionError> {
            let spec = object_field(object, "spec", "Widget", "spec")?;
            if let Some(replicas) = spec.remove("replicas") {
                spec.insert("size".into(), replicas);
            }
            Ok(())
        }
    }

    #[test]
    fn unknown_fields_survive_a_round_trip() {
        let alpha = json!({"apiVersion": "example.io/v1alpha1", "kind": "Widget",
            "metadata": {"name": "w", "futureMeta": 1},
            "spec": {"size": 3, "futureField": {"a": [1, 2]}},
            "status": {"ready": 2}, "futureTop": true});
        let beta = Renamed
            .convert(alpha.clone(), "example.io/v1beta1")
            .unwrap();
        assert_eq!(
            beta,
            json!({"apiVersion": "example.io/v1beta1", "kind": "Widget",
                "metadata": {"name": "w", "futureMeta": 1},
                "spec": {"replicas": 3, "futureField": {"a": [1, 2]}},
                "status": {"ready": 2}, "futureTop": true})
        );
        assert_eq!(Renamed.convert(beta, "example.io/v1alpha1").unwrap(), alpha);
    }

    #[test]
    fn only_served_versions_of_the_kind_convert() {
        let alpha = json!({"apiVersion": "example.io/v1alpha1", "kind": "Widget", "spec": {}});
        assert_eq!(
            Renamed.convert(alpha.clone(), "example.io/v1alpha1"),
            Ok(alpha.clone())
        );
        assert_eq!(
            Renamed.convert(alpha.clone(), "example.io/v2"),
            Err("unsupported apiVersion \"example.io/v2\" for Widget conversion".into())
        );
        assert!(
            Renamed
                .convert(
                    json!({"apiVersion": "other.io/v1alpha1"}),
                    "example.io/v1beta1"
                )
                .is_err()
        );
        assert_eq!(
            Renamed.convert(
                json!({"apiVersion": "example.io/v1alpha1", "spec": 5}),
                "example.io/v1beta1"
            ),
            Err("converting Widget: spec is not an object".into())
        );
        assert!(Renamed.handles("example.io", "Widget"));
        assert!(!Renamed.handles("example.io", "Gadget"));
    }

    /// kube-apiserver's request body, byte for byte in shape: it carries an empty
    /// `response` with a null `convertedObjects` (found against the real control plane:
    /// every conversion of a SidecarSet failed with HTTP 400).
    #[test]
    fn a_review_as_kube_apiserver_sends_it_converts() {
        let body = json!({
            "kind": "ConversionReview",
            "apiVersion": "apiextensions.k8s.io/v1",
            "request": {"uid": "u1", "desiredAPIVersion": "example.io/v1beta1",
                "objects": [{"apiVersion": "example.io/v1alpha1", "kind": "Widget", "spec": {"size": 2}}]},
            "response": {"uid": "", "convertedObjects": null, "result": {"metadata": {}}},
        });
        let converters: Vec<std::sync::Arc<dyn Converter>> = vec![std::sync::Arc::new(Renamed)];
        let out = review(&converters, &serde_json::to_vec(&body).unwrap()).unwrap();
        assert_eq!(out["response"]["uid"], "u1");
        assert_eq!(out["response"]["result"]["status"], "Success");
        assert_eq!(
            out["response"]["convertedObjects"][0]["spec"],
            json!({"replicas": 2})
        );
    }
}
