//! Kubernetes-style field errors (apimachinery's `field.Error` / `field.ErrorList`): a path
//! such as `spec.template.spec.containers[0].image`, a type, the offending value and a
//! reason, printed exactly as kube-apiserver prints them, e.g.
//! `spec.replicas: Invalid value: -1: must be greater than or equal to 0`.
//!
//! Every family's validator returns an [`ErrorList`]; an admission denial or a controller
//! condition shows it with [`aggregate`] (one error alone, several in brackets).

use std::fmt;

/// A field path: `spec`, `.child`, `[index]` and `[key]` segments, as `field.Path` prints.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Path(String);

impl Path {
    /// A root path (`spec`, `metadata`).
    pub fn new(root: &str) -> Self {
        Path(root.to_string())
    }

    /// `self.name`.
    pub fn child(&self, name: &str) -> Self {
        Path(format!("{}.{name}", self.0))
    }

    /// `self[index]`.
    pub fn index(&self, index: usize) -> Self {
        Path(format!("{}[{index}]", self.0))
    }

    /// `self[key]`.
    pub fn key(&self, key: &str) -> Self {
        Path(format!("{}[{key}]", self.0))
    }

    /// The path as printed.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for Path {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Path {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl From<&str> for Path {
    fn from(s: &str) -> Self {
        Path(s.to_string())
    }
}

impl From<String> for Path {
    fn from(s: String) -> Self {
        Path(s)
    }
}

impl From<&String> for Path {
    fn from(s: &String) -> Self {
        Path(s.clone())
    }
}

impl From<&Path> for Path {
    fn from(p: &Path) -> Self {
        p.clone()
    }
}

/// Kubernetes' `field.ErrorType`, printed as its `String()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorType {
    /// `Not found`.
    NotFound,
    /// `Required value`.
    Required,
    /// `Duplicate value`.
    Duplicate,
    /// `Invalid value`.
    Invalid,
    /// `Unsupported value`.
    NotSupported,
    /// `Forbidden`.
    Forbidden,
    /// `Too long`.
    TooLong,
    /// `Too many`.
    TooMany,
    /// `Internal error`.
    Internal,
}

impl ErrorType {
    /// The wording kube-apiserver prints.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorType::NotFound => "Not found",
            ErrorType::Required => "Required value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Invalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::Internal => "Internal error",
        }
    }

    /// Types whose message never shows the value (as apimachinery's `ErrorBody`).
    fn hides_value(self) -> bool {
        matches!(
            self,
            ErrorType::Required
                | ErrorType::Forbidden
                | ErrorType::TooLong
                | ErrorType::TooMany
                | ErrorType::Internal
        )
    }
}

/// An offending value as Kubernetes renders it: strings quoted, numbers and booleans plain,
/// anything else as given (JSON for objects). [`BadValue::Omitted`] leaves it out of the
/// message; [`BadValue::Null`] prints `null` (Go's nil).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum BadValue {
    /// Not shown (Go's `omitValue`).
    Omitted,
    /// `null`.
    Null,
    /// Already rendered.
    Rendered(String),
}

impl BadValue {
    /// A value rendered by the caller (objects as JSON, as Go prints structs closest).
    pub fn raw(rendered: impl Into<String>) -> Self {
        BadValue::Rendered(rendered.into())
    }

    /// Any serializable value as compact JSON (`null` when it does not encode).
    pub fn json<T: serde::Serialize + ?Sized>(value: &T) -> Self {
        BadValue::Rendered(serde_json::to_string(value).unwrap_or_else(|_| "null".into()))
    }
}

impl From<&str> for BadValue {
    fn from(s: &str) -> Self {
        BadValue::Rendered(format!("{s:?}"))
    }
}

impl From<&String> for BadValue {
    fn from(s: &String) -> Self {
        BadValue::from(s.as_str())
    }
}

impl From<String> for BadValue {
    fn from(s: String) -> Self {
        BadValue::from(s.as_str())
    }
}

macro_rules! plain_bad_value {
    ($($t:ty),*) => {$(
        impl From<$t> for BadValue {
            fn from(v: $t) -> Self {
                BadValue::Rendered(v.to_string())
            }
        }
        impl From<&$t> for BadValue {
            fn from(v: &$t) -> Self {
                BadValue::Rendered(v.to_string())
            }
        }
    )*};
}

plain_bad_value!(i32, i64, u32, usize, bool);

/// One validation problem.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub struct FieldError {
    /// What is wrong.
    pub type_: ErrorType,
    /// Where, e.g. `spec.containers[0].name`.
    pub field: Path,
    /// The offending value.
    pub value: BadValue,
    /// Why (may be empty).
    pub detail: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.type_.as_str())?;
        if !self.type_.hides_value() {
            match &self.value {
                BadValue::Omitted => {}
                BadValue::Null => f.write_str(": null")?,
                BadValue::Rendered(v) => write!(f, ": {v}")?,
            }
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

impl FieldError {
    fn new(
        type_: ErrorType,
        field: impl Into<Path>,
        value: BadValue,
        detail: impl Into<String>,
    ) -> Self {
        FieldError {
            type_,
            field: field.into(),
            value,
            detail: detail.into(),
        }
    }

    /// `field.Invalid(path, value, detail)`.
    pub fn invalid(
        field: impl Into<Path>,
        value: impl Into<BadValue>,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(ErrorType::Invalid, field, value.into(), detail)
    }

    /// `field.Required(path, detail)`.
    pub fn required(field: impl Into<Path>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Required, field, BadValue::Omitted, detail)
    }

    /// `field.Forbidden(path, detail)`.
    pub fn forbidden(field: impl Into<Path>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Forbidden, field, BadValue::Omitted, detail)
    }

    /// `field.NotSupported(path, value, validValues)`: lists the supported values quoted.
    pub fn not_supported(
        field: impl Into<Path>,
        value: impl Into<BadValue>,
        supported: &[&str],
    ) -> Self {
        let quoted: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        Self::new(
            ErrorType::NotSupported,
            field,
            value.into(),
            format!("supported values: {}", quoted.join(", ")),
        )
    }

    /// `field.Duplicate(path, value)`.
    pub fn duplicate(field: impl Into<Path>, value: impl Into<BadValue>) -> Self {
        Self::new(ErrorType::Duplicate, field, value.into(), "")
    }

    /// `field.NotFound(path, value)`.
    pub fn not_found(field: impl Into<Path>, value: impl Into<BadValue>) -> Self {
        Self::new(ErrorType::NotFound, field, value.into(), "")
    }

    /// `field.TooLong(path, value, maxLength)`.
    pub fn too_long(field: impl Into<Path>, value: impl Into<BadValue>, max_len: usize) -> Self {
        Self::new(
            ErrorType::TooLong,
            field,
            value.into(),
            format!("may not be more than {max_len} bytes"),
        )
    }

    /// `field.InternalError(path, err)`.
    pub fn internal(field: impl Into<Path>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Internal, field, BadValue::Omitted, detail)
    }

    /// The same error with the value left out of the message (Go's `omitValue`).
    pub fn omit_value(mut self) -> Self {
        self.value = BadValue::Omitted;
        self
    }
}

/// Every problem a validator found, in the order found.
pub type ErrorList = Vec<FieldError>;

/// Kubernetes' `ErrorList.ToAggregate().Error()`: one error as is, several in brackets
/// (repeated messages once).
pub fn aggregate(errors: &[FieldError]) -> String {
    let mut seen = std::collections::HashSet::new();
    let messages: Vec<String> = errors
        .iter()
        .map(ToString::to_string)
        .filter(|m| seen.insert(m.clone()))
        .collect();
    match messages.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// The list always in brackets, even for one error (a condition message's form).
pub fn bracketed(errors: &[FieldError]) -> String {
    let parts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// Kubernetes' DNS-1123 subdomain check (`IsDNS1123Subdomain`, without the message).
pub fn is_dns1123_subdomain(name: &str) -> bool {
    !name.is_empty() && name.len() <= 253 && name.split('.').all(is_dns1123_label_part)
}

/// Kubernetes' DNS-1123 label check (`IsDNS1123Label`, without the message).
pub fn is_dns1123_label(name: &str) -> bool {
    name.len() <= 63 && is_dns1123_label_part(name)
}

fn is_dns1123_label_part(label: &str) -> bool {
    !label.is_empty()
        && label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !label.starts_with('-')
        && !label.ends_with('-')
}

/// Kubernetes' message for a name that is not a DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
/// Kubernetes' message for a name that is not a DNS-1123 label.
pub const DNS1123_LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
/// The example and pattern Kubernetes appends to [`DNS1123_LABEL_MESSAGE`].
pub const DNS1123_LABEL_EXAMPLE: &str = " (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// Kubernetes' `IsDNS1123Label`: its messages about `name`, none when it is one (a namespace
/// name's check, `ValidateNamespaceName`).
pub fn dns1123_label_errors(name: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if name.len() > 63 {
        errors.push("must be no more than 63 characters".to_string());
    }
    if !is_dns1123_label_part(name) {
        errors.push(format!("{DNS1123_LABEL_MESSAGE}{DNS1123_LABEL_EXAMPLE}"));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_as_kube_apiserver_prints_them() {
        let spec = Path::new("spec");
        let cases = [
            (
                FieldError::invalid(
                    spec.child("replicas"),
                    -1,
                    "must be greater than or equal to 0",
                ),
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            ),
            (
                FieldError::required(
                    spec.child("template")
                        .child("spec")
                        .child("containers")
                        .index(0)
                        .child("image"),
                    "",
                ),
                "spec.template.spec.containers[0].image: Required value",
            ),
            (
                FieldError::forbidden("spec", "field is immutable"),
                "spec: Forbidden: field is immutable",
            ),
            (
                FieldError::not_supported("spec.restartPolicy", "Never", &["Always"]),
                "spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
            ),
            (
                FieldError::duplicate("spec.volumes[1].name", "data"),
                "spec.volumes[1].name: Duplicate value: \"data\"",
            ),
            (
                FieldError::not_found("spec.containers[0].volumeMounts[0].name", "v"),
                "spec.containers[0].volumeMounts[0].name: Not found: \"v\"",
            ),
            (
                FieldError::too_long("metadata.name", "x", 63),
                "metadata.name: Too long: may not be more than 63 bytes",
            ),
            (
                FieldError::invalid("revision", BadValue::Omitted, "cannot be empty"),
                "revision: Invalid value: cannot be empty",
            ),
            (
                FieldError::invalid("spec.x", BadValue::Null, ""),
                "spec.x: Invalid value: null",
            ),
            (
                FieldError::invalid(Path::new("metadata").child("labels").key("a/b"), true, "no"),
                "metadata.labels[a/b]: Invalid value: true: no",
            ),
        ];
        for (error, want) in cases {
            assert_eq!(error.to_string(), want);
        }
    }

    #[test]
    fn aggregate_lists_several_in_brackets_once_each() {
        let a = FieldError::required("spec.selector", "");
        let b = FieldError::invalid("spec.replicas", -1, "must be greater than or equal to 0");
        assert_eq!(
            aggregate(std::slice::from_ref(&a)),
            "spec.selector: Required value"
        );
        assert_eq!(
            aggregate(&[a.clone(), b.clone(), a.clone()]),
            "[spec.selector: Required value, spec.replicas: Invalid value: -1: must be greater than or equal to 0]"
        );
        assert_eq!(bracketed(&[a]), "[spec.selector: Required value]");
    }

    #[test]
    fn dns_names() {
        assert!(is_dns1123_subdomain("web.example-1"));
        assert!(!is_dns1123_subdomain("Web"));
        assert!(!is_dns1123_subdomain("-a"));
        assert!(is_dns1123_label("main"));
        assert!(!is_dns1123_label("a.b"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
    }
}
