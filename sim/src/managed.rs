//! managedFields bookkeeping and server-side apply.
//!
//! Simplified model (see README): a manager owns a set of leaf field paths (fieldsV1
//! style: `f:name`, `k:{"name":"x"}` for keyed list items, `v:"x"` for set items).
//! Keyed lists are the strategic-merge-patch merge keys of built-in kinds; every other
//! list (and every list of a custom resource) is atomic. Apply conflicts are detected
//! when the applied value of a leaf differs from the live value and another manager
//! owns that leaf; `force` transfers ownership. Fields a manager applied before and
//! omits now are removed unless another manager still owns them.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult, StatusCause};
use crate::patch::{ListStrategy, list_strategy};

pub type FieldPath = Vec<String>;
pub type FieldSet = BTreeSet<FieldPath>;

#[derive(Debug, Clone, PartialEq)]
pub struct ManagedEntry {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub time: String,
    pub subresource: String,
    pub fields: FieldSet,
}

/// Metadata fields the system owns; never part of a manager's set.
const SYSTEM_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "generateName",
];

/// Leaf paths of an object, as a manager touching the whole object would own them.
/// `kind` selects merge keys for built-ins (`None` = custom resource: lists atomic).
/// `subresource` "status" keeps only `.status`; "" drops `.status` when `skip_status`.
pub fn leaf_paths(
    kind: Option<&str>,
    obj: &Value,
    only_status: bool,
    skip_status: bool,
) -> FieldSet {
    let mut out = FieldSet::new();
    let Some(map) = obj.as_object() else {
        return out;
    };
    for (k, v) in map {
        if k == "apiVersion" || k == "kind" {
            continue;
        }
        if only_status && k != "status" {
            continue;
        }
        if skip_status && k == "status" {
            continue;
        }
        let mut prefix = vec![format!("f:{k}")];
        if k == "metadata" {
            if let Some(meta) = v.as_object() {
                for (mk, mv) in meta {
                    if SYSTEM_META.contains(&mk.as_str()) {
                        continue;
                    }
                    prefix.push(format!("f:{mk}"));
                    collect(kind, "metadata", mk, mv, &mut prefix, &mut out);
                    prefix.pop();
                }
            }
            continue;
        }
        collect(kind, "", k, v, &mut prefix, &mut out);
    }
    out
}

fn key_segment(merge_key: &str, elem: &Value) -> Option<String> {
    let kv = elem.get(merge_key)?;
    let mut m = Map::new();
    m.insert(merge_key.to_string(), kv.clone());
    Some(format!("k:{}", Value::Object(m)))
}

fn collect(
    kind: Option<&str>,
    parent: &str,
    field: &str,
    v: &Value,
    prefix: &mut FieldPath,
    out: &mut FieldSet,
) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                prefix.push(format!("f:{k}"));
                collect(kind, field, k, child, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) if kind.is_some() && !items.is_empty() => {
            match list_strategy(kind.unwrap_or(""), parent, field) {
                ListStrategy::MergeKey(mk) if items.iter().all(|e| e.get(mk).is_some()) => {
                    for e in items {
                        let Some(seg) = key_segment(mk, e) else {
                            continue;
                        };
                        prefix.push(seg);
                        let mut dot = prefix.clone();
                        dot.push(".".into());
                        out.insert(dot);
                        if let Some(em) = e.as_object() {
                            for (k, child) in em {
                                prefix.push(format!("f:{k}"));
                                collect(kind, field, k, child, prefix, out);
                                prefix.pop();
                            }
                        }
                        prefix.pop();
                    }
                }
                ListStrategy::MergePrimitives => {
                    for e in items {
                        let mut p = prefix.clone();
                        p.push(format!("v:{e}"));
                        out.insert(p);
                    }
                }
                _ => {
                    out.insert(prefix.clone());
                }
            }
        }
        _ => {
            out.insert(prefix.clone());
        }
    }
}

/// Resolves one path segment against a value.
fn step<'a>(v: &'a Value, seg: &str) -> Option<&'a Value> {
    if let Some(f) = seg.strip_prefix("f:") {
        return v.get(f);
    }
    if let Some(k) = seg.strip_prefix("k:") {
        let key: Map<String, Value> = serde_json::from_str(k).ok()?;
        return v
            .as_array()?
            .iter()
            .find(|e| key.iter().all(|(kk, kv)| e.get(kk) == Some(kv)));
    }
    if let Some(val) = seg.strip_prefix("v:") {
        let val: Value = serde_json::from_str(val).ok()?;
        return v.as_array()?.iter().find(|e| **e == val);
    }
    if seg == "." {
        return Some(v);
    }
    None
}

pub fn value_at<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = obj;
    for seg in path {
        cur = step(cur, seg)?;
    }
    Some(cur)
}

/// Removes the field (or list element) a path designates.
fn remove_path(obj: &mut Value, path: &[String]) {
    let path: Vec<&String> = path.iter().filter(|s| s.as_str() != ".").collect();
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for seg in parents {
        let next = if let Some(f) = seg.strip_prefix("f:") {
            cur.get_mut(f)
        } else if let Some(k) = seg.strip_prefix("k:") {
            let Ok(key) = serde_json::from_str::<Map<String, Value>>(k) else {
                return;
            };
            cur.as_array_mut().and_then(|a| {
                a.iter_mut()
                    .find(|e| key.iter().all(|(kk, kv)| e.get(kk) == Some(kv)))
            })
        } else {
            None
        };
        let Some(n) = next else { return };
        cur = n;
    }
    if let Some(f) = last.strip_prefix("f:") {
        if let Some(m) = cur.as_object_mut() {
            m.remove(f);
        }
    } else if let Some(k) = last.strip_prefix("k:") {
        if let (Ok(key), Some(a)) = (
            serde_json::from_str::<Map<String, Value>>(k),
            cur.as_array_mut(),
        ) {
            a.retain(|e| !key.iter().all(|(kk, kv)| e.get(kk) == Some(kv)));
        }
    } else if let Some(val) = last.strip_prefix("v:")
        && let (Ok(val), Some(a)) = (serde_json::from_str::<Value>(val), cur.as_array_mut())
    {
        a.retain(|e| *e != val);
    }
}

/// fieldsV1 nested-map rendering of a field set.
pub fn to_fields_v1(fields: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in fields {
        let mut cur = &mut root;
        for seg in path {
            let entry = cur
                .entry(seg.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            let Some(m) = entry.as_object_mut() else {
                break;
            };
            cur = m;
        }
    }
    Value::Object(root)
}

fn from_fields_v1(v: &Value, prefix: &mut FieldPath, out: &mut FieldSet) {
    let Some(m) = v.as_object() else { return };
    if m.is_empty() {
        if !prefix.is_empty() {
            out.insert(prefix.clone());
        }
        return;
    }
    for (k, child) in m {
        prefix.push(k.clone());
        from_fields_v1(child, prefix, out);
        prefix.pop();
    }
}

pub fn read_entries(obj: &Value) -> Vec<ManagedEntry> {
    let Some(list) = crate::meta::metadata(obj)
        .and_then(|m| m.get("managedFields"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|e| {
            let mut fields = FieldSet::new();
            if let Some(f) = e.get("fieldsV1") {
                from_fields_v1(f, &mut Vec::new(), &mut fields);
            }
            Some(ManagedEntry {
                manager: e.get("manager")?.as_str()?.to_string(),
                operation: e
                    .get("operation")
                    .and_then(Value::as_str)
                    .unwrap_or("Update")
                    .to_string(),
                api_version: e
                    .get("apiVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                time: e
                    .get("time")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                subresource: e
                    .get("subresource")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                fields,
            })
        })
        .collect()
}

pub fn write_entries(obj: &mut Value, entries: &[ManagedEntry]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut m = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": to_fields_v1(&e.fields),
            });
            if !e.subresource.is_empty() {
                m["subresource"] = json!(e.subresource);
            }
            m
        })
        .collect();
    if let Some(meta) = crate::meta::metadata_mut(obj) {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

fn entry_mut<'a>(
    entries: &'a mut Vec<ManagedEntry>,
    manager: &str,
    operation: &str,
    subresource: &str,
    api_version: &str,
) -> &'a mut ManagedEntry {
    let pos = entries.iter().position(|e| {
        e.manager == manager && e.operation == operation && e.subresource == subresource
    });
    let idx = match pos {
        Some(i) => i,
        None => {
            entries.push(ManagedEntry {
                manager: manager.to_string(),
                operation: operation.to_string(),
                api_version: api_version.to_string(),
                time: String::new(),
                subresource: subresource.to_string(),
                fields: FieldSet::new(),
            });
            entries.len() - 1
        }
    };
    let e = &mut entries[idx];
    e.api_version = api_version.to_string();
    e.time = crate::meta::now_rfc3339();
    e
}

/// Records a non-apply write (create/update/patch) by `manager`: the leaves it changed
/// become its own and are taken from every other manager.
pub fn record_update(
    kind: Option<&str>,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    subresource: &str,
) {
    let mut entries = old.map(read_entries).unwrap_or_default();
    let only_status = subresource == "status";
    let new_leaves = leaf_paths(kind, new, only_status, false);
    let old_leaves = old
        .map(|o| leaf_paths(kind, o, only_status, false))
        .unwrap_or_default();
    let changed: FieldSet = new_leaves
        .iter()
        .filter(|p| old.is_none_or(|o| value_at(o, p) != value_at(new, p)))
        .cloned()
        .collect();
    let removed: FieldSet = old_leaves.difference(&new_leaves).cloned().collect();
    if changed.is_empty() && removed.is_empty() {
        write_entries(new, &entries);
        return;
    }
    for e in entries.iter_mut() {
        e.fields
            .retain(|p| !changed.contains(p) && !removed.contains(p));
    }
    let mine = entry_mut(&mut entries, manager, "Update", subresource, api_version);
    mine.fields.extend(changed);
    entries.retain(|e| !e.fields.is_empty());
    write_entries(new, &entries);
}

/// Merges an applied configuration into the live object (maps recursively, keyed
/// lists by key for built-ins, everything else replaced).
fn merge_apply(
    kind: Option<&str>,
    parent: &str,
    field: &str,
    live: &Value,
    config: &Value,
) -> Value {
    match (live, config) {
        (Value::Object(l), Value::Object(c)) => {
            let mut out = l.clone();
            for (k, cv) in c {
                let merged = match l.get(k) {
                    Some(lv) => merge_apply(kind, field, k, lv, cv),
                    None => cv.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(c)) if kind.is_some() => {
            match list_strategy(kind.unwrap_or(""), parent, field) {
                ListStrategy::MergeKey(mk)
                    if c.iter().all(|e| e.get(mk).is_some())
                        && l.iter().all(|e| e.get(mk).is_some()) =>
                {
                    let mut out = l.clone();
                    for ce in c {
                        match out.iter().position(|le| le.get(mk) == ce.get(mk)) {
                            Some(i) => {
                                let merged = merge_apply(kind, field, field, &out[i], ce);
                                out[i] = merged;
                            }
                            None => out.push(ce.clone()),
                        }
                    }
                    Value::Array(out)
                }
                ListStrategy::MergePrimitives => {
                    let mut out = l.clone();
                    for ce in c {
                        if !out.contains(ce) {
                            out.push(ce.clone());
                        }
                    }
                    Value::Array(out)
                }
                _ => config.clone(),
            }
        }
        _ => config.clone(),
    }
}

fn path_string(path: &[String]) -> String {
    let mut s = String::new();
    for seg in path {
        if let Some(f) = seg.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = seg.strip_prefix("k:") {
            s.push('[');
            s.push_str(k);
            s.push(']');
        } else if let Some(v) = seg.strip_prefix("v:") {
            s.push_str(&format!("[{v}]"));
        }
    }
    s
}

/// Server-side apply of `config` by `manager` onto `live` (None: the object is new).
/// Returns the merged object with updated managedFields.
#[allow(clippy::too_many_arguments)]
pub fn apply(
    kind: Option<&str>,
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
    api_version: &str,
    subresource: &str,
    group: &str,
    resource: &str,
    name: &str,
) -> ApiResult<Value> {
    let only_status = subresource == "status";
    let config_fields = leaf_paths(kind, config, only_status, !only_status);
    let mut entries = live.map(read_entries).unwrap_or_default();
    let mut merged = match live {
        Some(l) => merge_apply(kind, "", "", l, config),
        None => config.clone(),
    };

    // Conflicts: another manager owns a leaf whose live value the config changes.
    let mut conflicts: Vec<(String, FieldPath)> = Vec::new();
    if let Some(l) = live {
        for e in &entries {
            if e.manager == manager && e.operation == "Apply" || e.subresource != subresource {
                continue;
            }
            for p in config_fields.intersection(&e.fields) {
                if value_at(l, p) != value_at(config, p) {
                    conflicts.push((e.manager.clone(), p.clone()));
                }
            }
        }
    }
    if !conflicts.is_empty() && !force {
        let causes: Vec<StatusCause> = conflicts
            .iter()
            .map(|(m, p)| StatusCause {
                reason: "FieldManagerConflict".into(),
                message: format!("conflict with \"{m}\""),
                field: path_string(p),
            })
            .collect();
        let detail: Vec<String> = conflicts
            .iter()
            .map(|(m, p)| format!("- conflict with \"{m}\": {}", path_string(p)))
            .collect();
        let mut err = ApiError::conflict(
            group,
            resource,
            name,
            &format!(
                "Apply failed with {} conflict{}: {}",
                conflicts.len(),
                if conflicts.len() == 1 { "" } else { "s" },
                detail.join("\n")
            ),
        );
        err.message = format!(
            "Apply failed with {} conflict{}: {}",
            conflicts.len(),
            if conflicts.len() == 1 { "" } else { "s" },
            conflicts
                .iter()
                .map(|(m, p)| format!("conflict with \"{m}\": {}", path_string(p)))
                .collect::<Vec<_>>()
                .join("\n")
        );
        err.causes = causes;
        return Err(err);
    }
    if force {
        for e in entries.iter_mut() {
            if e.manager == manager && e.operation == "Apply" {
                continue;
            }
            e.fields
                .retain(|p| !conflicts.iter().any(|(_, cp)| cp == p));
        }
    }

    // Fields this manager applied before but no longer does: remove unless shared.
    let previous: FieldSet = entries
        .iter()
        .find(|e| e.manager == manager && e.operation == "Apply" && e.subresource == subresource)
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    for p in previous.difference(&config_fields) {
        let owned_elsewhere = entries
            .iter()
            .any(|e| !(e.manager == manager && e.operation == "Apply") && e.fields.contains(p));
        if !owned_elsewhere {
            remove_path(&mut merged, p);
        }
    }

    let mine = entry_mut(&mut entries, manager, "Apply", subresource, api_version);
    mine.fields = config_fields;
    entries.retain(|e| !e.fields.is_empty());
    write_entries(&mut merged, &entries);
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_and_roundtrip() {
        let obj = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let leaves = leaf_paths(Some("Pod"), &obj, false, true);
        assert!(leaves.contains(&vec![
            "f:metadata".to_string(),
            "f:labels".into(),
            "f:a".into()
        ]));
        assert!(leaves.contains(&vec![
            "f:spec".to_string(),
            "f:containers".into(),
            "k:{\"name\":\"c\"}".into(),
            "f:image".into()
        ]));
        let v1 = to_fields_v1(&leaves);
        let mut back = FieldSet::new();
        from_fields_v1(&v1, &mut Vec::new(), &mut back);
        assert_eq!(back, leaves);
    }

    #[test]
    fn apply_conflict_and_force() {
        let cfg_a = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "a"}});
        let live = apply(
            Some("ConfigMap"),
            None,
            &cfg_a,
            "a",
            false,
            "v1",
            "",
            "",
            "configmaps",
            "c",
        );
        let Ok(live) = live else {
            panic!("apply failed")
        };
        let cfg_b = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "b"}});
        let err = apply(
            Some("ConfigMap"),
            Some(&live),
            &cfg_b,
            "b",
            false,
            "v1",
            "",
            "",
            "configmaps",
            "c",
        );
        assert_eq!(err.as_ref().err().map(|e| e.code), Some(409));
        let forced = apply(
            Some("ConfigMap"),
            Some(&live),
            &cfg_b,
            "b",
            true,
            "v1",
            "",
            "",
            "configmaps",
            "c",
        );
        let Ok(forced) = forced else {
            panic!("forced apply failed")
        };
        assert_eq!(forced["data"]["k"], "b");
        // Manager a dropping its field: b still owns it, so it stays.
        let cfg_a2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"other": "x"}});
        let after = apply(
            Some("ConfigMap"),
            Some(&forced),
            &cfg_a2,
            "a",
            false,
            "v1",
            "",
            "",
            "configmaps",
            "c",
        );
        let Ok(after) = after else {
            panic!("apply failed")
        };
        assert_eq!(after["data"], json!({"k": "b", "other": "x"}));
    }
}
