//! API errors rendered as `meta.k8s.io/v1` `Status` objects, the way kube-apiserver
//! renders `k8s.io/apimachinery/pkg/api/errors` values.

use serde_json::{Value, json};

/// One cause of an `Invalid` (422) or apply-conflict (409) error.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusCause {
    /// e.g. `FieldValueInvalid`, `FieldValueRequired`, `FieldManagerConflict`.
    pub reason: String,
    pub message: String,
    pub field: String,
}

/// An error that the API server returns to a client as a `Status` object.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: String,
    pub message: String,
    pub name: Option<String>,
    pub group: Option<String>,
    /// `details.kind`: the resource (plural) for most errors, the Kind for `Invalid`.
    pub kind: Option<String>,
    pub causes: Vec<StatusCause>,
    /// `Retry-After` seconds for 429 responses.
    pub retry_after_seconds: Option<u64>,
}

impl ApiError {
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason: reason.to_string(),
            message: message.into(),
            name: None,
            group: None,
            kind: None,
            causes: Vec::new(),
            retry_after_seconds: None,
        }
    }

    fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        self.group = Some(group.to_string());
        self.kind = Some(kind.to_string());
        self.name = Some(name.to_string());
        self
    }

    /// `pods "x" not found` / `clonesets.apps.kruise.io "x" not found`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        ApiError::new(
            404,
            "NotFound",
            format!("{} \"{}\" not found", qualified(group, resource), name),
        )
        .with_details(group, resource, name)
    }

    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{} \"{}\" already exists", qualified(group, resource), name),
        )
        .with_details(group, resource, name)
    }

    /// The optimistic-concurrency conflict of an update with a stale resourceVersion.
    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": {}",
                qualified(group, resource),
                name,
                why
            ),
        )
        .with_details(group, resource, name)
    }

    pub fn stale_conflict(group: &str, resource: &str, name: &str) -> Self {
        Self::conflict(
            group,
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid: `Kind "name" is invalid: field: message, ...`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<StatusCause>) -> Self {
        let summary: Vec<String> = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect();
        let joined = if summary.len() == 1 {
            summary.join("")
        } else {
            format!("[{}]", summary.join(", "))
        };
        let mut err = ApiError::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {joined}"),
        )
        .with_details(group, kind, name);
        err.causes = causes;
        err
    }

    /// A single-field `Invalid` error with the `FieldValueInvalid` cause.
    pub fn invalid_field(
        group: &str,
        kind: &str,
        name: &str,
        field: &str,
        value: &str,
        detail: &str,
    ) -> Self {
        Self::invalid(
            group,
            kind,
            name,
            vec![StatusCause {
                reason: "FieldValueInvalid".into(),
                message: format!("Invalid value: \"{value}\": {detail}"),
                field: field.into(),
            }],
        )
    }

    pub fn required_field(group: &str, kind: &str, name: &str, field: &str, detail: &str) -> Self {
        Self::invalid(
            group,
            kind,
            name,
            vec![StatusCause {
                reason: "FieldValueRequired".into(),
                message: format!("Required value: {detail}"),
                field: field.into(),
            }],
        )
    }

    pub fn forbidden_field(group: &str, kind: &str, name: &str, field: &str, detail: &str) -> Self {
        Self::invalid(
            group,
            kind,
            name,
            vec![StatusCause {
                reason: "FieldValueForbidden".into(),
                message: format!("Forbidden: {detail}"),
                field: field.into(),
            }],
        )
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(400, "BadRequest", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        ApiError::new(403, "Forbidden", message)
    }

    pub fn method_not_allowed() -> Self {
        ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    /// The generic 404 for an unknown path (no such resource/group/version).
    pub fn path_not_found() -> Self {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    pub fn gone(message: impl Into<String>) -> Self {
        ApiError::new(410, "Expired", message)
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        ApiError::new(415, "UnsupportedMediaType", message)
    }

    pub fn not_acceptable(message: impl Into<String>) -> Self {
        ApiError::new(406, "NotAcceptable", message)
    }

    pub fn too_many_requests(message: impl Into<String>, retry_after_seconds: u64) -> Self {
        let mut err = ApiError::new(429, "TooManyRequests", message);
        err.retry_after_seconds = Some(retry_after_seconds);
        err
    }

    pub fn request_entity_too_large(message: impl Into<String>) -> Self {
        ApiError::new(413, "RequestEntityTooLarge", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", message.into()),
        )
    }

    pub fn service_unavailable(message: impl Into<String>) -> Self {
        ApiError::new(503, "ServiceUnavailable", message)
    }

    pub fn timeout(message: impl Into<String>) -> Self {
        ApiError::new(504, "Timeout", message)
    }

    /// The `Status` object sent to clients.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        let mut details = serde_json::Map::new();
        if let Some(name) = &self.name {
            details.insert("name".into(), Value::String(name.clone()));
        }
        if let Some(group) = &self.group
            && !group.is_empty()
        {
            details.insert("group".into(), Value::String(group.clone()));
        }
        if let Some(kind) = &self.kind {
            details.insert("kind".into(), Value::String(kind.clone()));
        }
        if !self.causes.is_empty() {
            let causes: Vec<Value> = self
                .causes
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect();
            details.insert("causes".into(), Value::Array(causes));
        }
        if let Some(secs) = self.retry_after_seconds {
            details.insert("retryAfterSeconds".into(), json!(secs));
        }
        if !details.is_empty() {
            status["details"] = Value::Object(details);
        }
        status
    }
}

/// `pods` for the core group, `deployments.apps` otherwise.
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
