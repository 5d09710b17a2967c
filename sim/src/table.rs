//! Server-side `meta.k8s.io/v1` Table output, as `kubectl get` requests it.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::meta::{self, PathSeg, age, get_path, split_path};
use crate::registry::ResourceDef;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn parse(s: Option<&str>) -> IncludeObject {
        match s {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

struct Col {
    name: &'static str,
    type_: &'static str,
    format: &'static str,
    priority: i64,
    description: &'static str,
}

const fn col(name: &'static str, type_: &'static str, priority: i64) -> Col {
    Col {
        name,
        type_,
        format: "",
        priority,
        description: "",
    }
}

const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

fn name_col() -> Col {
    Col {
        name: "Name",
        type_: "string",
        format: "name",
        priority: 0,
        description: NAME_DESC,
    }
}

fn age_col() -> Col {
    Col {
        name: "Age",
        type_: "string",
        format: "",
        priority: 0,
        description: AGE_DESC,
    }
}

fn s(obj: &Value, path: &str) -> String {
    match get_path(obj, path) {
        Some(Value::String(x)) => x.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn i(obj: &Value, path: &str) -> i64 {
    get_path(obj, path).and_then(Value::as_i64).unwrap_or(0)
}

fn or_none(v: String) -> String {
    if v.is_empty() { "<none>".into() } else { v }
}

fn obj_age(obj: &Value) -> String {
    age(meta::meta_str(obj, "creationTimestamp"))
}

fn builtin_columns(def: &ResourceDef) -> Option<Vec<Col>> {
    if !def.builtin {
        return None;
    }
    let cols = match (def.group.as_str(), def.plural.as_str()) {
        ("", "pods") => vec![
            name_col(),
            col("Ready", "string", 0),
            col("Status", "string", 0),
            col("Restarts", "string", 0),
            age_col(),
            col("IP", "string", 1),
            col("Node", "string", 1),
            col("Nominated Node", "string", 1),
            col("Readiness Gates", "string", 1),
        ],
        ("", "namespaces") => vec![name_col(), col("Status", "string", 0), age_col()],
        ("", "nodes") => vec![
            name_col(),
            col("Status", "string", 0),
            col("Roles", "string", 0),
            age_col(),
            col("Version", "string", 0),
        ],
        ("", "configmaps") => vec![name_col(), col("Data", "integer", 0), age_col()],
        ("", "secrets") => vec![
            name_col(),
            col("Type", "string", 0),
            col("Data", "integer", 0),
            age_col(),
        ],
        ("", "services") => vec![
            name_col(),
            col("Type", "string", 0),
            col("Cluster-IP", "string", 0),
            col("External-IP", "string", 0),
            col("Port(s)", "string", 0),
            age_col(),
            col("Selector", "string", 1),
        ],
        ("", "events") => vec![
            col("Last Seen", "string", 0),
            col("Type", "string", 0),
            col("Reason", "string", 0),
            col("Object", "string", 0),
            col("Message", "string", 0),
        ],
        ("", "persistentvolumeclaims") => vec![
            name_col(),
            col("Status", "string", 0),
            col("Volume", "string", 0),
            col("Capacity", "string", 0),
            col("Access Modes", "string", 0),
            col("StorageClass", "string", 0),
            age_col(),
        ],
        ("apps", "deployments") => vec![
            name_col(),
            col("Ready", "string", 0),
            col("Up-to-date", "integer", 0),
            col("Available", "integer", 0),
            age_col(),
        ],
        ("apps", "replicasets") => vec![
            name_col(),
            col("Desired", "integer", 0),
            col("Current", "integer", 0),
            col("Ready", "integer", 0),
            age_col(),
        ],
        ("apps", "statefulsets") => vec![name_col(), col("Ready", "string", 0), age_col()],
        ("apps", "daemonsets") => vec![
            name_col(),
            col("Desired", "integer", 0),
            col("Current", "integer", 0),
            col("Ready", "integer", 0),
            col("Up-to-date", "integer", 0),
            col("Available", "integer", 0),
            col("Node Selector", "string", 0),
            age_col(),
        ],
        ("apps", "controllerrevisions") => vec![
            name_col(),
            col("Controller", "string", 0),
            col("Revision", "integer", 0),
            age_col(),
        ],
        ("batch", "jobs") => vec![
            name_col(),
            col("Status", "string", 0),
            col("Completions", "string", 0),
            col("Duration", "string", 0),
            age_col(),
        ],
        ("coordination.k8s.io", "leases") => {
            vec![name_col(), col("Holder", "string", 0), age_col()]
        }
        ("policy", "poddisruptionbudgets") => vec![
            name_col(),
            col("Min Available", "string", 0),
            col("Max Unavailable", "string", 0),
            col("Allowed Disruptions", "integer", 0),
            age_col(),
        ],
        ("apiextensions.k8s.io", "customresourcedefinitions") => vec![
            name_col(),
            Col {
                name: "Created At",
                type_: "date",
                format: "",
                priority: 0,
                description: AGE_DESC,
            },
        ],
        _ => vec![name_col(), age_col()],
    };
    Some(cols)
}

fn pod_cells(obj: &Value) -> Vec<Value> {
    let statuses = get_path(obj, "status.containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let total = get_path(obj, "spec.containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let ready = statuses
        .iter()
        .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    let restarts: i64 = statuses
        .iter()
        .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
        .sum();
    let mut reason = s(obj, "status.phase");
    let r = s(obj, "status.reason");
    if !r.is_empty() {
        reason = r;
    }
    for c in &statuses {
        if let Some(w) = c.pointer("/state/waiting/reason").and_then(Value::as_str) {
            reason = w.to_string();
        } else if let Some(t) = c
            .pointer("/state/terminated/reason")
            .and_then(Value::as_str)
        {
            reason = t.to_string();
        }
    }
    if meta::is_terminating(obj) {
        reason = "Terminating".into();
    }
    let gates = get_path(obj, "spec.readinessGates")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let gates_cell = if gates == 0 {
        "<none>".to_string()
    } else {
        let conds = get_path(obj, "status.conditions").and_then(Value::as_array);
        let ok = get_path(obj, "spec.readinessGates")
            .and_then(Value::as_array)
            .map_or(0, |g| {
                g.iter()
                    .filter(|gate| {
                        let t = gate.get("conditionType");
                        conds.is_some_and(|cs| {
                            cs.iter().any(|c| {
                                c.get("type") == t
                                    && c.get("status").and_then(Value::as_str) == Some("True")
                            })
                        })
                    })
                    .count()
            });
        format!("{ok}/{gates}")
    };
    vec![
        json!(meta::name_of(obj)),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts.to_string()),
        json!(obj_age(obj)),
        json!(or_none(s(obj, "status.podIP"))),
        json!(or_none(s(obj, "spec.nodeName"))),
        json!(or_none(s(obj, "status.nominatedNodeName"))),
        json!(gates_cell),
    ]
}

fn map_len(obj: &Value, a: &str, b: &str) -> i64 {
    let n = |p: &str| {
        get_path(obj, p)
            .and_then(Value::as_object)
            .map_or(0, |m| m.len())
    };
    (n(a) + n(b)) as i64
}

fn builtin_cells(def: &ResourceDef, obj: &Value) -> Vec<Value> {
    let name = json!(meta::name_of(obj));
    let age = json!(obj_age(obj));
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "pods") => pod_cells(obj),
        ("", "namespaces") => vec![name, json!(s(obj, "status.phase")), age],
        ("", "nodes") => {
            let ready = get_path(obj, "status.conditions")
                .and_then(Value::as_array)
                .and_then(|cs| {
                    cs.iter()
                        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
                })
                .map(|c| c.get("status").and_then(Value::as_str) == Some("True"));
            let mut status = match ready {
                Some(true) => "Ready".to_string(),
                _ => "NotReady".to_string(),
            };
            if get_path(obj, "spec.unschedulable").and_then(Value::as_bool) == Some(true) {
                status.push_str(",SchedulingDisabled");
            }
            let roles: Vec<String> = meta::labels_of(obj)
                .map(|l| {
                    l.keys()
                        .filter_map(|k| {
                            k.strip_prefix("node-role.kubernetes.io/")
                                .map(str::to_string)
                        })
                        .collect()
                })
                .unwrap_or_default();
            vec![
                name,
                json!(status),
                json!(or_none(roles.join(","))),
                age,
                json!(s(obj, "status.nodeInfo.kubeletVersion")),
            ]
        }
        ("", "configmaps") => vec![name, json!(map_len(obj, "data", "binaryData")), age],
        ("", "secrets") => vec![
            name,
            json!(s(obj, "type")),
            json!(map_len(obj, "data", "stringData")),
            age,
        ],
        ("", "services") => {
            let ports: Vec<String> = get_path(obj, "spec.ports")
                .and_then(Value::as_array)
                .map(|ps| {
                    ps.iter()
                        .map(|p| {
                            format!(
                                "{}/{}",
                                p.get("port").map(Value::to_string).unwrap_or_default(),
                                p.get("protocol").and_then(Value::as_str).unwrap_or("TCP")
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            let selector: Vec<String> = get_path(obj, "spec.selector")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                        .collect()
                })
                .unwrap_or_default();
            vec![
                name,
                json!(s(obj, "spec.type")),
                json!(or_none(s(obj, "spec.clusterIP"))),
                json!("<none>"),
                json!(or_none(ports.join(","))),
                age,
                json!(or_none(selector.join(","))),
            ]
        }
        ("", "events") => {
            let last = [
                s(obj, "lastTimestamp"),
                s(obj, "eventTime"),
                meta::meta_str(obj, "creationTimestamp").to_string(),
            ]
            .into_iter()
            .find(|t| !t.is_empty())
            .unwrap_or_default();
            let kind = s(obj, "involvedObject.kind").to_lowercase();
            vec![
                json!(age_or_unknown(&last)),
                json!(s(obj, "type")),
                json!(s(obj, "reason")),
                json!(format!("{}/{}", kind, s(obj, "involvedObject.name"))),
                json!(s(obj, "message")),
            ]
        }
        ("", "persistentvolumeclaims") => vec![
            name,
            json!(s(obj, "status.phase")),
            json!(s(obj, "spec.volumeName")),
            json!(s(obj, "status.capacity.storage")),
            json!(""),
            json!(or_none(s(obj, "spec.storageClassName"))),
            age,
        ],
        ("apps", "deployments") => vec![
            name,
            json!(format!(
                "{}/{}",
                i(obj, "status.readyReplicas"),
                i(obj, "spec.replicas")
            )),
            json!(i(obj, "status.updatedReplicas")),
            json!(i(obj, "status.availableReplicas")),
            age,
        ],
        ("apps", "replicasets") => vec![
            name,
            json!(i(obj, "spec.replicas")),
            json!(i(obj, "status.replicas")),
            json!(i(obj, "status.readyReplicas")),
            age,
        ],
        ("apps", "statefulsets") => vec![
            name,
            json!(format!(
                "{}/{}",
                i(obj, "status.readyReplicas"),
                i(obj, "spec.replicas")
            )),
            age,
        ],
        ("apps", "daemonsets") => {
            let sel: Vec<String> = get_path(obj, "spec.template.spec.nodeSelector")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                        .collect()
                })
                .unwrap_or_default();
            vec![
                name,
                json!(i(obj, "status.desiredNumberScheduled")),
                json!(i(obj, "status.currentNumberScheduled")),
                json!(i(obj, "status.numberReady")),
                json!(i(obj, "status.updatedNumberScheduled")),
                json!(i(obj, "status.numberAvailable")),
                json!(or_none(sel.join(","))),
                age,
            ]
        }
        ("apps", "controllerrevisions") => {
            let controller = metadata_owner(obj);
            vec![
                name,
                json!(or_none(controller)),
                json!(i(obj, "revision")),
                age,
            ]
        }
        ("batch", "jobs") => {
            let completions = match get_path(obj, "spec.completions").and_then(Value::as_i64) {
                Some(c) => format!("{}/{}", i(obj, "status.succeeded"), c),
                None => format!(
                    "{}/1 of {}",
                    i(obj, "status.succeeded"),
                    i(obj, "spec.parallelism")
                ),
            };
            let status = job_status(obj);
            let duration = match (
                meta::parse_time(&s(obj, "status.startTime")),
                meta::parse_time(&s(obj, "status.completionTime")),
            ) {
                (Some(start), Some(end)) => {
                    meta::human_duration(end.as_second() - start.as_second())
                }
                (Some(start), None) => {
                    meta::human_duration(jiff::Timestamp::now().as_second() - start.as_second())
                }
                _ => String::new(),
            };
            vec![
                name,
                json!(status),
                json!(completions),
                json!(duration),
                age,
            ]
        }
        ("coordination.k8s.io", "leases") => {
            vec![name, json!(s(obj, "spec.holderIdentity")), age]
        }
        ("policy", "poddisruptionbudgets") => vec![
            name,
            json!(if s(obj, "spec.minAvailable").is_empty() {
                "N/A".to_string()
            } else {
                s(obj, "spec.minAvailable")
            }),
            json!(if s(obj, "spec.maxUnavailable").is_empty() {
                "N/A".to_string()
            } else {
                s(obj, "spec.maxUnavailable")
            }),
            json!(i(obj, "status.disruptionsAllowed")),
            age,
        ],
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            vec![name, json!(meta::meta_str(obj, "creationTimestamp"))]
        }
        _ => vec![name, age],
    }
}

fn job_status(obj: &Value) -> &'static str {
    let conds = get_path(obj, "status.conditions").and_then(Value::as_array);
    let has = |t: &str| {
        conds.is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(t)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
    };
    if has("Complete") {
        "Complete"
    } else if has("Failed") {
        "Failed"
    } else if has("Suspended") {
        "Suspended"
    } else if meta::is_terminating(obj) {
        "Terminating"
    } else {
        "Running"
    }
}

fn metadata_owner(obj: &Value) -> String {
    meta::metadata(obj)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .and_then(|o| {
            o.iter()
                .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        })
        .map(|r| {
            format!(
                "{}/{}",
                r.get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_lowercase(),
                r.get("name").and_then(Value::as_str).unwrap_or("")
            )
        })
        .unwrap_or_default()
}

fn age_or_unknown(ts: &str) -> String {
    if ts.is_empty() {
        "<unknown>".into()
    } else {
        age(ts)
    }
}

/// The value a CRD printer column shows: the first result of its JSONPath, as
/// kube-apiserver's table convertor takes `results[0][0]` — so `[*]` (CloneSet's CONTAINERS
/// and IMAGES) shows the first element, and nothing when the list is empty.
fn first_match<'a>(obj: &'a Value, json_path: &str) -> Option<&'a Value> {
    fn walk<'a>(cur: &'a Value, segs: &[PathSeg]) -> Option<&'a Value> {
        let Some((seg, rest)) = segs.split_first() else {
            return Some(cur);
        };
        match seg {
            PathSeg::Key(k) if k == "*" => match cur {
                Value::Array(items) => items.iter().find_map(|item| walk(item, rest)),
                // Go walks a map's values in no fixed order; key order is one of them.
                Value::Object(map) => {
                    let mut keys: Vec<&String> = map.keys().collect();
                    keys.sort();
                    keys.into_iter()
                        .find_map(|k| map.get(k).and_then(|v| walk(v, rest)))
                }
                _ => None,
            },
            PathSeg::Key(k) => walk(cur.get(k.as_str())?, rest),
            PathSeg::Index(i) => walk(cur.get(i)?, rest),
        }
    }
    walk(obj, &split_path(json_path))
}

/// Cell for a CRD printer column (apiextensions `cellForJSONValue`).
fn crd_cell(type_: &str, v: Option<&Value>) -> Value {
    let Some(v) = v else { return Value::Null };
    match type_ {
        "string" => match v {
            Value::String(s) => json!(s),
            Value::Null => Value::Null,
            other => json!(other.to_string()),
        },
        "integer" => match v {
            Value::Number(n) => n
                .as_i64()
                .map(|x| json!(x))
                .or_else(|| n.as_f64().map(|f| json!(f as i64)))
                .unwrap_or(Value::Null),
            _ => Value::Null,
        },
        "number" => match v {
            Value::Number(n) => json!(n.as_f64()),
            _ => Value::Null,
        },
        "boolean" => match v {
            Value::Bool(b) => json!(b),
            _ => Value::Null,
        },
        "date" => match v {
            Value::String(ts) => match meta::parse_time(ts) {
                Some(t) => json!(meta::human_duration(
                    jiff::Timestamp::now().as_second() - t.as_second()
                )),
                None => json!("<invalid>"),
            },
            _ => Value::Null,
        },
        _ => Value::Null,
    }
}

pub fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
    })
}

fn column_defs(def: &ResourceDef, version: &str) -> Vec<Value> {
    if let Some(cols) = builtin_columns(def) {
        return cols
            .iter()
            .map(|c| json!({"name": c.name, "type": c.type_, "format": c.format, "description": c.description, "priority": c.priority}))
            .collect();
    }
    let mut out = vec![
        json!({"name": "Name", "type": "string", "format": "name", "description": NAME_DESC, "priority": 0}),
    ];
    if let Some(v) = def.versions.iter().find(|v| v.name == version) {
        for c in &v.printer_columns {
            let desc = if c.description.is_empty() {
                format!(
                    "Custom resource definition column (in JSONPath format): {}",
                    c.json_path
                )
            } else {
                c.description.clone()
            };
            out.push(json!({"name": c.name, "type": c.type_, "format": c.format, "description": desc, "priority": c.priority}));
        }
    }
    out
}

fn row(def: &ResourceDef, version: &str, obj: &Value, include: IncludeObject) -> Value {
    let cells = if def.builtin {
        builtin_cells(def, obj)
    } else {
        let mut cells = vec![json!(meta::name_of(obj))];
        if let Some(v) = def.versions.iter().find(|v| v.name == version) {
            for c in &v.printer_columns {
                cells.push(crd_cell(&c.type_, first_match(obj, &c.json_path)));
            }
        }
        cells
    };
    let mut r = json!({"cells": cells});
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => r["object"] = partial_metadata(obj),
        IncludeObject::Object => r["object"] = obj.clone(),
    }
    r
}

/// A Table for objects; `headers` false omits columnDefinitions (watch events after
/// the first).
#[allow(clippy::too_many_arguments)]
pub fn table(
    def: &ResourceDef,
    version: &str,
    objs: &[Arc<Value>],
    include: IncludeObject,
    headers: bool,
    resource_version: Option<u64>,
    continue_token: Option<&str>,
    remaining: Option<u64>,
) -> Value {
    let rows: Vec<Value> = objs.iter().map(|o| row(def, version, o, include)).collect();
    let mut metadata = serde_json::Map::new();
    if let Some(rv) = resource_version {
        metadata.insert("resourceVersion".into(), json!(rv.to_string()));
    }
    if let Some(c) = continue_token {
        metadata.insert("continue".into(), json!(c));
    }
    if let Some(r) = remaining {
        metadata.insert("remainingItemCount".into(), json!(r));
    }
    let cols = if headers {
        Value::Array(column_defs(def, version))
    } else {
        Value::Null
    };
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": cols,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{Value, json};

    use super::{IncludeObject, table};
    use crate::registry::def_from_crd;

    /// A CloneSet-like CRD with OpenKruise's `-o wide` columns CONTAINERS and IMAGES.
    fn crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "clonesets.apps.kruise.io"},
            "spec": {
                "group": "apps.kruise.io",
                "names": {"kind": "CloneSet", "listKind": "CloneSetList", "plural": "clonesets", "singular": "cloneset"},
                "scope": "Namespaced",
                "versions": [{
                    "name": "v1beta1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                    "additionalPrinterColumns": [
                        {"name": "CONTAINERS", "type": "string", "priority": 1, "jsonPath": ".spec.template.spec.containers[*].name"},
                        {"name": "IMAGES", "type": "string", "priority": 1, "jsonPath": ".spec.template.spec.containers[*].image"},
                        {"name": "PORT", "type": "integer", "jsonPath": ".spec.template.spec.containers[*].ports[*].containerPort"}
                    ]
                }]
            }
        })
    }

    fn cells(containers: Value) -> Vec<Value> {
        let def = def_from_crd(&crd()).unwrap();
        let obj = Arc::new(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
            "metadata": {"name": "sample", "namespace": "default"},
            "spec": {"template": {"spec": {"containers": containers}}}
        }));
        let t = table(
            &def,
            "v1beta1",
            &[obj],
            IncludeObject::None,
            true,
            None,
            None,
            None,
        );
        t["rows"][0]["cells"].as_array().unwrap().clone()
    }

    /// kube-apiserver's table convertor shows the first JSONPath result.
    #[test]
    fn a_wildcard_column_shows_the_first_match() {
        let cells = cells(json!([
            {"name": "main", "image": "nginx:alpine"},
            {"name": "sidecar", "image": "busybox", "ports": [{"containerPort": 8080}, {"containerPort": 9090}]}
        ]));
        assert_eq!(
            cells,
            [
                json!("sample"),
                json!("main"),
                json!("nginx:alpine"),
                json!(8080)
            ]
        );
    }

    #[test]
    fn a_wildcard_over_nothing_is_an_empty_cell() {
        let cells = cells(json!([]));
        assert_eq!(
            cells,
            [json!("sample"), Value::Null, Value::Null, Value::Null]
        );
    }
}
