//! Value validation of custom resources against their version's `openAPIV3Schema`, as the
//! apiextensions server runs it after pruning and defaulting: `type` (with `nullable`,
//! `x-kubernetes-int-or-string` and `x-kubernetes-preserve-unknown-fields`), `required`,
//! `enum`, `minimum` / `maximum`, and the uniqueness of `x-kubernetes-list-type` `map` and
//! `set` lists, with kube-apiserver's messages (`spec.replicas: Invalid value: "string":
//! spec.replicas in body must be of type integer: "string"`).
//!
//! On update, validation ratchets as kube-apiserver's `CRDValidationRatcheting` (on by
//! default since 1.30) does: a value equal to the old object's at the same place (object
//! fields by name, map-list items by key) is not validated again, so an object stored under
//! an older, looser schema stays writable where it did not change.
//!
//! Not checked: `pattern`, `format`, lengths and counts, CEL rules.

use serde_json::{Map, Value};

use crate::error::StatusCause;

/// The schema errors of `obj` (a whole custom resource), `old` its stored version on update.
pub fn validate(obj: &Value, old: Option<&Value>, schema: &Value) -> Vec<StatusCause> {
    let mut out = Vec::new();
    if let (Some(map), Some(props)) = (
        obj.as_object(),
        schema.get("properties").and_then(Value::as_object),
    ) {
        // apiVersion, kind and metadata are the server's.
        let old_map = old.and_then(Value::as_object);
        check_required(map, schema, "", &mut out);
        for (key, child_schema) in props {
            if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(child) = map.get(key) {
                let old_child = old_map.and_then(|m| m.get(key));
                walk(child, old_child, child_schema, key, &mut out);
            }
        }
    }
    out
}

fn walk(v: &Value, old: Option<&Value>, schema: &Value, path: &str, out: &mut Vec<StatusCause>) {
    if old == Some(v) {
        return;
    }
    if !type_ok(v, schema, path, out) {
        return;
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array)
        && !values.contains(v)
    {
        out.push(not_supported(path, v, values));
    }
    check_bounds(v, schema, path, out);
    match v {
        Value::Object(map) => walk_object(map, old.and_then(Value::as_object), schema, path, out),
        Value::Array(items) => walk_array(items, old.and_then(Value::as_array), schema, path, out),
        _ => {}
    }
}

fn walk_object(
    map: &Map<String, Value>,
    old: Option<&Map<String, Value>>,
    schema: &Value,
    path: &str,
    out: &mut Vec<StatusCause>,
) {
    check_required(map, schema, path, out);
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    let embedded = schema
        .get("x-kubernetes-embedded-resource")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    for (key, child) in map {
        if embedded && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        let Some(child_schema) = props.and_then(|p| p.get(key)).or(additional) else {
            continue;
        };
        let old_child = old.and_then(|m| m.get(key));
        walk(
            child,
            old_child,
            child_schema,
            &format!("{path}.{key}"),
            out,
        );
    }
}

fn walk_array(
    items: &[Value],
    old: Option<&Vec<Value>>,
    schema: &Value,
    path: &str,
    out: &mut Vec<StatusCause>,
) {
    let list_type = schema.get("x-kubernetes-list-type").and_then(Value::as_str);
    let keys: Vec<&str> = schema
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .map(|k| k.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match list_type {
        Some("map") => {
            for (i, item) in items.iter().enumerate() {
                let key = map_key(item, &keys);
                if items[..i]
                    .iter()
                    .any(|earlier| map_key(earlier, &keys) == key)
                {
                    out.push(duplicate(&format!("{path}[{i}]"), &go_map(&key)));
                }
            }
        }
        Some("set") => {
            for (i, item) in items.iter().enumerate() {
                if items[..i].contains(item) {
                    out.push(duplicate(&format!("{path}[{i}]"), &go_value(item)));
                }
            }
        }
        _ => {}
    }
    let Some(item_schema) = schema.get("items") else {
        return;
    };
    for (i, item) in items.iter().enumerate() {
        // Only map-list items are matched with the old list's (by their keys).
        let old_item = match list_type {
            Some("map") => {
                let key = map_key(item, &keys);
                old.and_then(|o| o.iter().find(|x| map_key(x, &keys) == key))
            }
            _ => None,
        };
        walk(item, old_item, item_schema, &format!("{path}[{i}]"), out);
    }
}

/// A map-list item's key fields, in the schema's order.
fn map_key(item: &Value, keys: &[&str]) -> Vec<(String, Value)> {
    keys.iter()
        .filter_map(|k| item.get(*k).map(|v| ((*k).to_string(), v.clone())))
        .collect()
}

fn check_required(
    map: &Map<String, Value>,
    schema: &Value,
    path: &str,
    out: &mut Vec<StatusCause>,
) {
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !map.contains_key(name) {
            let field = if path.is_empty() {
                name.to_string()
            } else {
                format!("{path}.{name}")
            };
            out.push(crate::validate::required(&field));
        }
    }
}

/// Whether `v` has the schema's type; pushes the error when not.
fn type_ok(v: &Value, schema: &Value, path: &str, out: &mut Vec<StatusCause>) -> bool {
    let flag = |name: &str| schema.get(name).and_then(Value::as_bool).unwrap_or(false);
    let int_or_string = flag("x-kubernetes-int-or-string");
    let expected = schema.get("type").and_then(Value::as_str);
    let actual = json_type(v);
    let ok = match (expected, v) {
        (_, Value::Null) => flag("nullable") || (expected.is_none() && !int_or_string),
        _ if int_or_string => matches!(actual, "integer" | "string"),
        (None, _) => true,
        (Some("number"), Value::Number(_)) => true,
        (Some(t), _) => t == actual,
    };
    if !ok {
        let expected = match expected {
            Some(t) => t,
            None if int_or_string => "integer,string",
            None => "object",
        };
        out.push(StatusCause {
            reason: "FieldValueTypeInvalid".into(),
            message: format!(
                "Invalid value: \"{actual}\": {path} in body must be of type {expected}: \"{actual}\""
            ),
            field: path.into(),
        });
    }
    ok
}

/// The JSON schema type of a value (a number with no fraction is an integer).
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn check_bounds(v: &Value, schema: &Value, path: &str, out: &mut Vec<StatusCause>) {
    let Some(n) = v.as_f64() else {
        return;
    };
    let bound = |name: &str| schema.get(name).and_then(Value::as_f64);
    let exclusive = |name: &str| schema.get(name).and_then(Value::as_bool).unwrap_or(false);
    let mut fail = |relation: &str, limit: f64| {
        out.push(StatusCause {
            reason: "FieldValueInvalid".into(),
            message: format!(
                "Invalid value: {}: {path} in body should be {relation} {}",
                go_value(v),
                go_number(limit)
            ),
            field: path.into(),
        });
    };
    if let Some(min) = bound("minimum") {
        if exclusive("exclusiveMinimum") && n <= min {
            fail("greater than", min);
        } else if n < min {
            fail("greater than or equal to", min);
        }
    }
    if let Some(max) = bound("maximum") {
        if exclusive("exclusiveMaximum") && n >= max {
            fail("less than", max);
        } else if n > max {
            fail("less than or equal to", max);
        }
    }
}

fn not_supported(path: &str, v: &Value, values: &[Value]) -> StatusCause {
    let supported: Vec<String> = values
        .iter()
        .map(|s| match s {
            Value::String(s) => format!("{s:?}"),
            other => format!("\"{other}\""),
        })
        .collect();
    StatusCause {
        reason: "FieldValueNotSupported".into(),
        message: format!(
            "Unsupported value: {}: supported values: {}",
            go_value(v),
            supported.join(", ")
        ),
        field: path.into(),
    }
}

fn duplicate(path: &str, value: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueDuplicate".into(),
        message: format!("Duplicate value: {value}"),
        field: path.into(),
    }
}

/// A value as Go's `%#v` prints it in field errors: strings quoted, numbers bare.
fn go_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

fn go_number(n: f64) -> String {
    if n.fract() == 0.0 {
        format!("{}", n as i64)
    } else {
        n.to_string()
    }
}

/// A map-list key as Go prints the `map[string]interface{}` kube-apiserver reports.
fn go_map(key: &[(String, Value)]) -> String {
    let fields: Vec<String> = key
        .iter()
        .map(|(k, v)| format!("{k:?}:{}", go_value(v)))
        .collect();
    format!("map[string]interface {{}}{{{}}}", fields.join(", "))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["podName"], "properties": {
                "podName": {"type": "string"},
                "replicas": {"type": "integer", "minimum": 0},
                "policy": {"type": "string", "enum": ["Allow", "Forbid"]},
                "partition": {"x-kubernetes-int-or-string": true},
                "note": {"type": "string", "nullable": true},
                "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            }},
            "status": {"type": "object", "properties": {
                "conditions": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["type"],
                    "items": {"type": "object", "required": ["type", "status"], "properties": {
                        "type": {"type": "string"},
                        "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                    }}},
            }},
        }})
    }

    fn messages(obj: Value, old: Option<Value>) -> Vec<String> {
        validate(&obj, old.as_ref(), &schema())
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn a_valid_object_passes() {
        let obj = json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"},
            "spec": {"podName": "p", "replicas": 2, "policy": "Allow", "partition": "50%",
                "note": null, "template": {"anything": [1, "two"]}, "labels": {"a": "b"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(messages(obj, None), Vec::<String>::new());
    }

    #[test]
    fn errors_read_as_kube_apiservers() {
        let obj = json!({"spec": {"replicas": "two", "policy": "Replace", "partition": true,
            "labels": {"a": 1}},
            "status": {"conditions": [{"type": "Ready", "status": "Yes"}, {"type": "Ready", "status": "True"}]}});
        assert_eq!(
            messages(obj, None),
            [
                "spec.podName: Required value",
                r#"spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: "integer""#,
                r#"spec.partition: Invalid value: "boolean": spec.partition in body must be of type integer,string: "boolean""#,
                r#"spec.policy: Unsupported value: "Replace": supported values: "Allow", "Forbid""#,
                r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
                r#"status.conditions[1]: Duplicate value: map[string]interface {}{"type":"Ready"}"#,
                r#"status.conditions[0].status: Unsupported value: "Yes": supported values: "True", "False", "Unknown""#,
            ]
        );
        assert_eq!(
            messages(json!({"spec": {"podName": "p", "replicas": -1}}), None),
            [
                "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"
            ]
        );
        assert_eq!(
            messages(json!({"spec": {"podName": null}}), None),
            [
                r#"spec.podName: Invalid value: "null": spec.podName in body must be of type string: "null""#
            ]
        );
    }

    #[test]
    fn an_update_ratchets_what_did_not_change() {
        // Stored under a looser schema: no podName, a policy no longer supported.
        let old = json!({"spec": {"policy": "Replace", "replicas": 1},
            "status": {"conditions": [{"type": "Ready", "status": "Yes"}]}});
        let mut new = old.clone();
        new["spec"]["replicas"] = json!(2);
        new["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "Synced", "status": "Maybe"}));
        // Required fields are checked on every write, as kube-apiserver's ratcheting
        // leaves `required` of a changed object to the full check.
        assert_eq!(
            messages(new, Some(old)),
            [
                "spec.podName: Required value",
                r#"status.conditions[1].status: Unsupported value: "Maybe": supported values: "True", "False", "Unknown""#,
            ]
        );
    }
}
