//! A CRD's validation schema as a flat field list, to compare a family's generated CRD with
//! OpenKruise's published one (committed per kind as a fixture, written by
//! `testkit/crd-fields.py` from OpenKruise's
//! `config/crd/bases/*.yaml`).
//!
//! One line per schema node of `spec` and `status`:
//! `<version> <path> <type>[ required][ list-type=…][ map-keys=a,b][ enum=a|b][ default=<json>]`,
//! where a path is `.a.b` for properties, `[]` for array items and `{}` for
//! `additionalProperties`; `<type>` is the OpenAPI type, `int-or-string`, or `opaque` for a
//! node that keeps unknown fields and lists no properties (nothing below it is listed).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Map, Value};

/// The field list of `crd` (a `CustomResourceDefinition` as JSON), in the fixture's format.
pub fn field_list(crd: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    for version in versions {
        let name = version.get("name").and_then(Value::as_str).unwrap_or("");
        let Some(schema) = version.pointer("/schema/openAPIV3Schema") else {
            continue;
        };
        let required = required_names(schema);
        for part in ["spec", "status"] {
            if let Some(node) = schema.get("properties").and_then(|p| p.get(part)) {
                walk(
                    name,
                    &format!(".{part}"),
                    node,
                    required.contains(part),
                    &mut out,
                );
            }
        }
    }
    out
}

/// Differences between `crd` (ours, as JSON) and `published`, OpenKruise's CRD as a
/// fixture in this format (written by `testkit/crd-fields.py`), leaving out `allowed`.
pub fn differences_from_published(crd: &Value, published: &str, allowed: &[&str]) -> Vec<String> {
    let theirs: Vec<String> = published.lines().map(str::to_string).collect();
    differences(&field_list(crd), &theirs, allowed)
}

/// [`differences_from_published`] of a typed CRD as one report for a test to print:
/// `Err` lists each difference as `path: ours | OpenKruise's`.
pub fn compare_with_published(
    crd: &CustomResourceDefinition,
    published: &str,
    allowed: &[&str],
) -> Result<(), String> {
    let ours = serde_json::to_value(crd).map_err(|e| format!("encoding the CRD: {e}"))?;
    let diffs = differences_from_published(&ours, published, allowed);
    if diffs.is_empty() {
        return Ok(());
    }
    Err(format!("ours | OpenKruise's:\n{}", diffs.join("\n")))
}

/// Differences between `ours` and `theirs` (field lists), as `path: ours | theirs` lines
/// (`-` for a node one side lacks), leaving out the `allowed` paths (deliberate
/// differences) and everything below a node OpenKruise leaves opaque.
pub fn differences(ours: &[String], theirs: &[String], allowed: &[&str]) -> Vec<String> {
    let split = |lines: &[String]| -> BTreeMap<String, String> {
        lines
            .iter()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .filter_map(|l| {
                let mut parts = l.splitn(3, ' ');
                let version = parts.next()?;
                let path = parts.next()?;
                Some((
                    format!("{version} {path}"),
                    parts.next().unwrap_or("").to_string(),
                ))
            })
            .collect()
    };
    let ours = split(ours);
    let theirs = split(theirs);
    let opaque: Vec<&String> = theirs
        .iter()
        .filter(|(_, attrs)| attrs.starts_with("opaque"))
        .map(|(key, _)| key)
        .collect();
    let below_opaque = |key: &str| {
        opaque.iter().any(|o| {
            key.strip_prefix(o.as_str())
                .is_some_and(|rest| rest.starts_with(['.', '[', '{']))
        })
    };
    let keys: BTreeSet<&String> = ours.keys().chain(theirs.keys()).collect();
    keys.into_iter()
        .filter(|key| !below_opaque(key) && !allowed.contains(&key.as_str()))
        .filter_map(|key| {
            let a = ours.get(key).map_or("-", String::as_str);
            let b = theirs.get(key).map_or("-", String::as_str);
            (a != b).then(|| format!("{key}: {a} | {b}"))
        })
        .collect()
}

fn required_names(schema: &Value) -> BTreeSet<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

fn node_type(schema: &Value) -> &str {
    let flag = |key: &str| schema.get(key).and_then(Value::as_bool) == Some(true);
    let has_properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty());
    if flag("x-kubernetes-int-or-string") {
        "int-or-string"
    } else if flag("x-kubernetes-preserve-unknown-fields") && !has_properties {
        "opaque"
    } else {
        schema.get("type").and_then(Value::as_str).unwrap_or("any")
    }
}

fn walk(version: &str, path: &str, schema: &Value, required: bool, out: &mut Vec<String>) {
    let kind = node_type(schema);
    let mut attrs = vec![kind.to_string()];
    if required {
        attrs.push("required".into());
    }
    if let Some(t) = schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        attrs.push(format!("list-type={t}"));
    }
    if let Some(keys) = schema
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
    {
        let keys: Vec<&str> = keys.iter().filter_map(Value::as_str).collect();
        attrs.push(format!("map-keys={}", keys.join(",")));
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let values: Vec<String> = values
            .iter()
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        attrs.push(format!("enum={}", values.join("|")));
    }
    if let Some(default) = schema.get("default") {
        attrs.push(format!("default={default}"));
    }
    out.push(format!("{version} {path} {}", attrs.join(" ")));
    if kind == "opaque" {
        return;
    }
    let required = required_names(schema);
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        let mut names: Vec<&String> = properties.keys().collect();
        names.sort();
        for name in names {
            if let Some(child) = properties.get(name) {
                let child_path = format!("{path}.{name}");
                walk(
                    version,
                    &child_path,
                    child,
                    required.contains(name.as_str()),
                    out,
                );
            }
        }
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        walk(version, &format!("{path}[]"), items, false, out);
    }
    if let Some(values) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        walk(version, &format!("{path}{{}}"), values, false, out);
    }
}

/// Kubernetes' `LabelSelector` schema marks `matchExpressions` and each expression's
/// `values` `x-kubernetes-list-type: atomic`; k8s-openapi's does not. Applied to every
/// label selector below `schema`, as OpenKruise's generated CRDs have it.
pub fn atomic_label_selector_lists(schema: &mut Map<String, Value>) {
    let is_selector = |props: &Map<String, Value>| {
        props.contains_key("matchLabels") && props.contains_key("matchExpressions")
    };
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        if is_selector(props)
            && let Some(Value::Object(expressions)) = props.get_mut("matchExpressions")
        {
            atomic_list(expressions);
            if let Some(Value::Object(values)) = expressions
                .get_mut("items")
                .and_then(|i| i.get_mut("properties"))
                .and_then(|p| p.get_mut("values"))
            {
                atomic_list(values);
            }
        }
        for child in props.values_mut() {
            if let Value::Object(child) = child {
                atomic_label_selector_lists(child);
            }
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(Value::Object(child)) = schema.get_mut(key) {
            atomic_label_selector_lists(child);
        }
    }
}

/// Runs `edit` on the schema object at `pointer` below `schema` (a JSON pointer such as
/// `/properties/spec`); nothing when there is none.
pub fn edit_at(
    schema: &mut Map<String, Value>,
    pointer: &str,
    edit: impl FnOnce(&mut Map<String, Value>),
) {
    let pointer = pointer.trim_start_matches('/');
    if pointer.is_empty() {
        return edit(schema);
    }
    let (first, rest) = pointer.split_once('/').unwrap_or((pointer, ""));
    if let Some(child) = schema.get_mut(first).and_then(Value::as_object_mut) {
        edit_at(child, rest, edit);
    }
}

/// Restricts the schema object to `values` (a kubebuilder `+kubebuilder:validation:Enum`).
pub fn one_of(schema: &mut Map<String, Value>, values: &[&str]) {
    schema.insert("enum".into(), Value::from(values));
}

/// Marks the schema array `x-kubernetes-list-type: atomic` (Kubernetes' own types mark
/// some lists so; k8s-openapi's schemas do not).
pub fn atomic_list(schema: &mut Map<String, Value>) {
    schema.insert("x-kubernetes-list-type".into(), "atomic".into());
}

/// Adds `names` to the schema object's `required` list (once each).
pub fn require(schema: &mut Map<String, Value>, names: &[&str]) {
    let list = schema
        .entry("required")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = list {
        for name in names {
            if !list.iter().any(|v| v.as_str() == Some(name)) {
                list.push(Value::String((*name).to_string()));
            }
        }
    }
}

/// Removes `name` from the schema object's `required` list (dropping an emptied list).
pub fn unrequire(schema: &mut Map<String, Value>, name: &str) {
    if let Some(Value::Array(list)) = schema.get_mut("required") {
        list.retain(|v| v.as_str() != Some(name));
        if list.is_empty() {
            schema.remove("required");
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{differences, field_list};

    #[test]
    fn lists_every_node_with_what_validates_it() {
        let crd = json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
            "type": "object", "required": ["spec"],
            "properties": {"spec": {"type": "object", "required": ["mode"], "properties": {
                "mode": {"type": "string", "enum": ["A", "B"], "default": "A"},
                "size": {"x-kubernetes-int-or-string": true},
                "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "keys": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}
            }}}
        }}}]}});
        assert_eq!(
            field_list(&crd),
            [
                "v1 .spec object required",
                "v1 .spec.keys array list-type=map map-keys=name",
                "v1 .spec.keys[] object",
                "v1 .spec.keys[].name string",
                "v1 .spec.labels object",
                "v1 .spec.labels{} string",
                "v1 .spec.mode string required enum=A|B default=\"A\"",
                "v1 .spec.size int-or-string",
                "v1 .spec.template opaque",
            ]
        );
    }

    #[test]
    fn differences_skip_allowed_paths_and_what_openkruise_leaves_opaque() {
        let lines = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let theirs = lines(&[
            "v1 .spec object",
            "v1 .spec.template opaque required",
            "v1 .spec.mode string enum=A|B",
            "v1 .spec.extra boolean",
        ]);
        let ours = lines(&[
            "v1 .spec object",
            "v1 .spec.template opaque required",
            "v1 .spec.template.spec object",
            "v1 .spec.mode string enum=A|B|",
            "v1 .spec.ours integer",
        ]);
        assert_eq!(
            differences(&ours, &theirs, &["v1 .spec.ours"]),
            [
                "v1 .spec.extra: - | boolean",
                "v1 .spec.mode: string enum=A|B| | string enum=A|B",
            ]
        );
    }

    #[test]
    fn selector_lists_become_atomic_at_any_depth() {
        let selector = json!({"type": "object", "properties": {
            "matchLabels": {"type": "object"},
            "matchExpressions": {"type": "array", "items": {"type": "object", "properties": {
                "key": {"type": "string"}, "values": {"type": "array"}}}}}});
        let mut schema = json!({"type": "object", "properties": {
            "selector": selector,
            "terms": {"type": "array", "items": {"type": "object", "properties": {"matchSelector": selector}}}
        }});
        super::atomic_label_selector_lists(schema.as_object_mut().unwrap());
        for at in [
            "/properties/selector/properties/matchExpressions",
            "/properties/selector/properties/matchExpressions/items/properties/values",
            "/properties/terms/items/properties/matchSelector/properties/matchExpressions",
        ] {
            assert_eq!(
                schema.pointer(at).unwrap()["x-kubernetes-list-type"],
                "atomic",
                "{at}"
            );
        }
    }
}
