//! Structural-schema handling of custom resources, as the apiextensions server does on
//! every write: unknown fields are pruned and `default`s are applied, both driven by
//! the version's `openAPIV3Schema` (`properties`, `items`, `additionalProperties`,
//! `x-kubernetes-preserve-unknown-fields`, `x-kubernetes-embedded-resource`).
//! Value validation follows, in `crate::crd_validation`.

use serde_json::{Map, Value};

fn preserves_unknown(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn embedded(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-embedded-resource")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Prunes and defaults `obj` (a whole custom resource) in place.
pub fn prune_and_default(obj: &mut Value, schema: &Value) {
    walk(obj, schema, true);
}

fn walk(v: &mut Value, schema: &Value, root: bool) {
    match v {
        Value::Object(map) => walk_object(map, schema, root || embedded(schema)),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    walk(item, item_schema, false);
                }
            }
        }
        _ => {}
    }
}

fn walk_object(map: &mut Map<String, Value>, schema: &Value, keeps_type_meta: bool) {
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties");
    let preserve = preserves_unknown(schema);
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        // apiVersion/kind/metadata of the object (or of an embedded resource) are
        // handled by the server, not the schema.
        if keeps_type_meta && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        let child_schema = props
            .and_then(|p| p.get(&key))
            .or_else(|| match additional {
                Some(a) if a.is_object() => Some(a),
                _ => None,
            });
        match child_schema {
            Some(cs) => {
                if let Some(child) = map.get_mut(&key) {
                    walk(child, cs, false);
                }
            }
            None => {
                let allowed = preserve || additional.and_then(Value::as_bool) == Some(true);
                if !allowed {
                    map.remove(&key);
                }
            }
        }
    }
    if let Some(props) = props {
        for (key, ps) in props {
            if map.contains_key(key) {
                continue;
            }
            if let Some(default) = ps.get("default") {
                let mut d = default.clone();
                walk(&mut d, ps, false);
                map.insert(key.clone(), d);
            }
        }
    }
}

/// The fields of `obj` (a whole custom resource) pruning would drop, as dotted paths
/// (`spec.foo`, `spec.items[0].bar`); `obj` is not changed.
pub fn unknown_fields(obj: &Value, schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut path = String::new();
    find_unknown(obj, schema, true, &mut path, &mut out);
    out
}

fn find_unknown(v: &Value, schema: &Value, root: bool, path: &mut String, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            let keeps_type_meta = root || embedded(schema);
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            let preserve = preserves_unknown(schema);
            for (key, child) in map {
                if keeps_type_meta && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let child_schema = props.and_then(|p| p.get(key)).or_else(|| match additional {
                    Some(a) if a.is_object() => Some(a),
                    _ => None,
                });
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                match child_schema {
                    Some(cs) => find_unknown(child, cs, false, path, out),
                    None => {
                        if !(preserve || additional.and_then(Value::as_bool) == Some(true)) {
                            out.push(path.clone());
                        }
                    }
                }
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    find_unknown(item, item_schema, false, path, out);
                    path.truncate(len);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prunes_unknown_and_applies_defaults() {
        let schema = json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "replicas": {"type": "integer", "default": 1},
                    "paused": {"type": "boolean"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                    "strategy": {"type": "object", "default": {}, "properties": {"type": {"type": "string", "default": "Rolling"}}}
                }},
                "status": {"type": "object", "properties": {"ready": {"type": "integer"}}}
            }
        });
        let mut obj = json!({
            "apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"},
            "spec": {"paused": true, "bogus": 1, "labels": {"a": "b"}, "template": {"anything": 1},
                     "items": [{"name": "n", "extra": 2}]},
            "status": {"ready": 1, "unknown": 2},
            "top": 3
        });
        prune_and_default(&mut obj, &schema);
        assert_eq!(
            obj,
            json!({
                "apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"},
                "spec": {"paused": true, "replicas": 1, "labels": {"a": "b"}, "template": {"anything": 1},
                         "items": [{"name": "n"}], "strategy": {"type": "Rolling"}},
                "status": {"ready": 1}
            })
        );
    }

    #[test]
    fn unknown_fields_are_what_pruning_drops() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}
            }}
        }});
        let obj = json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"},
            "spec": {"replicas": 1, "replicaz": 2, "template": {"anything": 1},
                     "items": [{"name": "n"}, {"name": "m", "extra": 2}]},
            "top": 3});
        let mut unknown = unknown_fields(&obj, &schema);
        unknown.sort();
        assert_eq!(unknown, ["spec.items[1].extra", "spec.replicaz", "top"]);
    }

    #[test]
    fn preserve_unknown_at_root_keeps_everything() {
        let schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        let mut obj = json!({"apiVersion": "x/v1", "kind": "X", "spec": {"a": 1}, "other": 2});
        let before = obj.clone();
        prune_and_default(&mut obj, &schema);
        assert_eq!(obj, before);
    }
}
