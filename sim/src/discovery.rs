//! Discovery documents (`/version`, `/api`, `/apis`, resource lists) and a minimal
//! OpenAPI v2/v3 that satisfies kubectl's schema and field-validation lookups.

use serde_json::{Value, json};

use crate::registry::{Registry, ResourceDef};

pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "emulationMajor": "1",
        "emulationMinor": "33",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "32",
        "gitVersion": "v1.33.0-kruise-sim",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

pub fn core_versions(server_addr: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_addr}]
    })
}

fn group_json(reg: &Registry, group: &str) -> Value {
    let versions = reg.group_versions(group);
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    let preferred = vs.first().cloned().unwrap_or(json!({}));
    json!({"name": group, "versions": vs, "preferredVersion": preferred})
}

pub fn group_list(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg
        .group_order
        .iter()
        .filter(|g| !g.is_empty())
        .map(|g| group_json(reg, g))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn group(reg: &Registry, group: &str) -> Option<Value> {
    if reg.group_versions(group).is_empty() {
        return None;
    }
    let mut g = group_json(reg, group);
    if let Some(m) = g.as_object_mut() {
        m.insert("kind".into(), json!("APIGroup"));
        m.insert("apiVersion".into(), json!("v1"));
    }
    Some(g)
}

fn storage_hash(def: &ResourceDef) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (&def.group, def.storage_version(), &def.kind).hash(&mut h);
    let bytes = h.finish().to_be_bytes();
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let defs = reg.resources_in(group, version);
    if defs.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for d in defs {
        let mut r = json!({
            "name": d.plural,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": d.verbs,
            "storageVersionHash": storage_hash(&d),
        });
        if !d.short_names.is_empty() {
            r["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            r["categories"] = json!(d.categories);
        }
        resources.push(r);
        if d.has_status(version) {
            resources.push(json!({"name": format!("{}/status", d.plural), "singularName": "", "namespaced": d.namespaced, "kind": d.kind, "verbs": ["get", "patch", "update"]}));
        }
        if d.scale(version).is_some() {
            resources.push(json!({"name": format!("{}/scale", d.plural), "singularName": "", "namespaced": d.namespaced, "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]}));
        }
        for sub in &d.extra_subresources {
            let (kind, verbs, group_version): (&str, Vec<&str>, Option<(&str, &str)>) = match *sub {
                "binding" => ("Binding", vec!["create"], None),
                "eviction" => ("Eviction", vec!["create"], Some(("policy", "v1"))),
                "finalize" => ("Namespace", vec!["update"], None),
                "resize" => ("Pod", vec!["get", "patch", "update"], None),
                _ => continue,
            };
            let mut s = json!({"name": format!("{}/{}", d.plural, sub), "singularName": "", "namespaced": d.namespaced, "kind": kind, "verbs": verbs});
            if let Some((g, v)) = group_version {
                s["group"] = json!(g);
                s["version"] = json!(v);
            }
            resources.push(s);
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

/// `/openapi/v3`: one path per group-version.
pub fn openapi_v3_root(reg: &Registry) -> Value {
    let mut paths = serde_json::Map::new();
    for gr in reg.by_gr.values() {
        for v in gr.versions.iter().filter(|v| v.served) {
            let key = if gr.group.is_empty() {
                format!("api/{}", v.name)
            } else {
                format!("apis/{}/{}", gr.group, v.name)
            };
            let url = format!("/openapi/v3/{key}?hash=0000000000000000");
            paths.insert(key, json!({"serverRelativeURL": url}));
        }
    }
    json!({"paths": paths})
}

fn gvk_ext(def: &ResourceDef, version: &str) -> Value {
    json!([{"group": def.group, "version": version, "kind": def.kind}])
}

fn schema_name(def: &ResourceDef, version: &str) -> String {
    let g = if def.group.is_empty() {
        "core"
    } else {
        def.group.as_str()
    };
    let rev: Vec<&str> = g.split('.').rev().collect();
    format!("{}.{}.{}", rev.join("."), version, def.kind)
}

/// A permissive schema for a resource: CRD schemas as declared, built-ins open
/// (`x-kubernetes-preserve-unknown-fields`), so client-side validation accepts them.
fn resource_schema(def: &ResourceDef, version: &str) -> Value {
    let declared = def
        .versions
        .iter()
        .find(|v| v.name == version)
        .and_then(|v| v.schema.clone());
    let mut schema = declared
        .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    if let Some(m) = schema.as_object_mut() {
        m.insert(
            "x-kubernetes-group-version-kind".into(),
            gvk_ext(def, version),
        );
        let props = m.entry("properties").or_insert_with(|| json!({}));
        if let Some(p) = props.as_object_mut() {
            p.entry("apiVersion").or_insert(json!({"type": "string"}));
            p.entry("kind").or_insert(json!({"type": "string"}));
            p.entry("metadata")
                .or_insert(json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
        }
    }
    schema
}

fn patch_params() -> Value {
    json!([
        {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
        {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
        {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
        {"name": "force", "in": "query", "schema": {"type": "boolean"}}
    ])
}

/// `/openapi/v3/apis/<g>/<v>` (or `api/v1`).
pub fn openapi_v3_gv(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let defs = reg.resources_in(group, version);
    if defs.is_empty() {
        return None;
    }
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    for d in defs {
        let name = schema_name(&d, version);
        schemas.insert(name.clone(), resource_schema(&d, version));
        let prefix = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let base = if d.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", d.plural)
        } else {
            format!("{prefix}/{}", d.plural)
        };
        let ref_ = json!({"$ref": format!("#/components/schemas/{name}")});
        let op = |verb: &str| {
            json!({
                "x-kubernetes-action": verb,
                "x-kubernetes-group-version-kind": {"group": d.group, "version": version, "kind": d.kind},
                "parameters": patch_params(),
                "responses": {"200": {"content": {"application/json": {"schema": ref_.clone()}}}}
            })
        };
        paths.insert(base.clone(), json!({"get": op("list"), "post": op("post")}));
        paths.insert(
            format!("{base}/{{name}}"),
            json!({"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")}),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas}
    }))
}

/// `/openapi/v2`: definitions keyed like the real document, with GVK extensions.
pub fn openapi_v2(reg: &Registry) -> Value {
    let mut defs = serde_json::Map::new();
    let mut paths = serde_json::Map::new();
    for d in reg.by_gr.values() {
        for v in d.versions.iter().filter(|v| v.served) {
            let name = schema_name(d, &v.name);
            defs.insert(name.clone(), resource_schema(d, &v.name));
            let prefix = if d.group.is_empty() {
                format!("/api/{}", v.name)
            } else {
                format!("/apis/{}/{}", d.group, v.name)
            };
            let base = if d.namespaced {
                format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", d.plural)
            } else {
                format!("{prefix}/{}/{{name}}", d.plural)
            };
            paths.insert(base, json!({"patch": {
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {"group": d.group, "version": v.name, "kind": d.kind},
                "parameters": [
                    {"name": "fieldValidation", "in": "query", "type": "string", "uniqueItems": true},
                    {"name": "fieldManager", "in": "query", "type": "string", "uniqueItems": true}
                ],
                "responses": {"200": {"description": "OK", "schema": {"$ref": format!("#/definitions/{name}")}}}
            }}));
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "definitions": defs
    })
}

/// A minimal gnostic `openapi_v2.Document` in protobuf wire format: `swagger: "2.0"`
/// and `info {title, version}`, nothing else.
pub fn openapi_v2_protobuf_minimal() -> Vec<u8> {
    fn field(out: &mut Vec<u8>, number: u8, bytes: &[u8]) {
        out.push((number << 3) | 2);
        // Lengths here are < 128, so one varint byte.
        out.push(bytes.len() as u8);
        out.extend_from_slice(bytes);
    }
    let mut info = Vec::new();
    field(&mut info, 1, b"Kubernetes");
    field(&mut info, 2, b"v1.33.0");
    let mut doc = Vec::new();
    field(&mut doc, 1, b"2.0");
    field(&mut doc, 2, &info);
    doc
}
