//! The serde and schemars helpers the API types of every family use, so a field is left out
//! of the wire form (and shows in the schema) the same way in every kind.

/// `skip_serializing_if` for an `i32` that is 0 (Go's `omitempty`).
pub fn is_zero_i32(v: &i32) -> bool {
    *v == 0
}

/// `skip_serializing_if` for an `i64` that is 0.
pub fn is_zero_i64(v: &i64) -> bool {
    *v == 0
}

/// `skip_serializing_if` for a `bool` that is false.
pub fn is_false(v: &bool) -> bool {
    !*v
}

/// `skip_serializing_if` for a struct equal to its default (Go's `omitempty` on a struct
/// behind a pointer, where the default is "not set").
pub fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// `schemars(schema_with)` for OpenKruise's schemaless fields (a pod `template`,
/// `volumeClaimTemplates`, sidecar containers and volumes): any value, unknown fields kept.
pub fn preserve_unknown_fields(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "x-kubernetes-preserve-unknown-fields": true })
}
