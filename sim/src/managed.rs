//! managedFields bookkeeping and server-side apply.
//!
//! Simplified model (see README): a manager owns a set of leaf field paths (fieldsV1
//! style: `f:name`, `k:{"name":"x"}` for keyed list items, `v:"x"` for set items).
//! Keyed lists are the strategic-merge-patch merge keys of built-in kinds; every other
//! list (and every list of a custom resource) is atomic. Apply conflicts are detected
//! when the applied value of a leaf differs from the live value and another manager
//! owns that leaf; `force` transfers ownership. Fields a manager applied before and
//! omits now are removed unless another manager still owns them.

use std::collections::{BTreeMap, BTreeSet};

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
        tree_insert(&mut root, path);
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
    let only_status = subresource == "status";
    let (changed, removed) = match old {
        Some(old) => changed_leaves(kind, old, new, only_status),
        None => (leaf_paths(kind, new, only_status, false), FieldSet::new()),
    };
    if changed.is_empty() && removed.is_empty() {
        let same = |o: &Value| {
            crate::meta::metadata(o).and_then(|m| m.get("managedFields"))
                == crate::meta::metadata(new).and_then(|m| m.get("managedFields"))
        };
        // Nothing changed hands: what the old object says stands (it was written here).
        if !old.is_some_and(same) {
            let entries = old.map(read_entries).unwrap_or_default();
            write_entries(new, &entries);
        }
        return;
    }
    let entries = old
        .and_then(crate::meta::metadata)
        .and_then(|m| m.get("managedFields"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let time = crate::meta::now_rfc3339();
    let entries = transfer_fields(
        entries,
        &changed,
        &removed,
        manager,
        subresource,
        api_version,
        &time,
    );
    if let Some(meta) = crate::meta::metadata_mut(new) {
        if entries.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(entries));
        }
    }
}

/// The managedFields entries after `manager` updated `changed` and dropped `removed`:
/// those leaves become its own (in its `Update` entry for `subresource`, created at the
/// end when missing) and are taken from every other entry; an entry left with no field
/// goes. Entries that hold none of the leaves are kept as they are, so a write edits only
/// the entries it concerns instead of re-reading and re-rendering them all; the result is
/// what [`read_entries`] → edit → [`write_entries`] gives for entries this server wrote.
fn transfer_fields(
    mut entries: Vec<Value>,
    changed: &FieldSet,
    removed: &FieldSet,
    manager: &str,
    subresource: &str,
    api_version: &str,
    time: &str,
) -> Vec<Value> {
    let is_mine = |e: &Value| {
        let s = |k: &str| e.get(k).and_then(Value::as_str);
        s("manager") == Some(manager)
            && s("operation").unwrap_or("Update") == "Update"
            && s("subresource").unwrap_or("") == subresource
    };
    let mine = match entries.iter().position(is_mine) {
        Some(i) => i,
        None => {
            let mut e = json!({
                "manager": manager, "operation": "Update", "apiVersion": api_version,
                "time": time, "fieldsType": "FieldsV1", "fieldsV1": {},
            });
            if !subresource.is_empty() {
                e["subresource"] = json!(subresource);
            }
            entries.push(e);
            entries.len() - 1
        }
    };
    for (i, e) in entries.iter_mut().enumerate() {
        let Some(tree) = e
            .as_object_mut()
            .map(|m| m.entry("fieldsV1").or_insert_with(|| json!({})))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        // Taken from everyone first, then given to the writer, as a set edit would.
        for p in changed.iter().chain(removed) {
            tree_remove_leaf(tree, p);
        }
        if i == mine {
            for p in changed {
                tree_insert(tree, p);
            }
            e["apiVersion"] = json!(api_version);
            e["time"] = json!(time);
        }
    }
    entries.retain(|e| {
        e.get("fieldsV1")
            .and_then(Value::as_object)
            .is_some_and(|t| !t.is_empty())
    });
    entries
}

/// Adds a leaf to a fieldsV1 tree.
fn tree_insert(tree: &mut Map<String, Value>, path: &[String]) {
    let mut cur = tree;
    for seg in path {
        let entry = cur
            .entry(seg.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        let Some(m) = entry.as_object_mut() else {
            return;
        };
        cur = m;
    }
}

/// Removes a leaf (an empty map at the end of `path`) from a fieldsV1 tree, and the
/// maps it leaves empty; a path that is not a leaf there is left alone, as it was never
/// in the set [`from_fields_v1`] reads. True when something was removed.
fn tree_remove_leaf(tree: &mut Map<String, Value>, path: &[String]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    let Some(Value::Object(child)) = tree.get_mut(first.as_str()) else {
        return false;
    };
    if !rest.is_empty() && !tree_remove_leaf(child, rest) {
        return false;
    }
    if !child.is_empty() {
        // A leaf has no children; an inner map keeps the leaves still under it.
        return !rest.is_empty();
    }
    tree.remove(first.as_str());
    true
}

/// The leaves of `new` whose value differs from `old`'s, and the leaves of `old` that
/// `new` no longer has, as [`leaf_paths`] on both objects would give them; equal
/// subtrees are skipped whole, so a write costs what it changed, not the object's size.
fn changed_leaves(
    kind: Option<&str>,
    old: &Value,
    new: &Value,
    only_status: bool,
) -> (FieldSet, FieldSet) {
    let mut diff = LeafDiff {
        kind,
        old_root: old,
        new_root: new,
        changed: FieldSet::new(),
        removed: FieldSet::new(),
    };
    let empty = Map::new();
    let (om, nm) = (
        old.as_object().unwrap_or(&empty),
        new.as_object().unwrap_or(&empty),
    );
    let mut prefix = FieldPath::new();
    for k in union_keys(om, nm) {
        if k == "apiVersion" || k == "kind" || (only_status && k != "status") {
            continue;
        }
        let (o, n) = (om.get(k), nm.get(k));
        if o == n {
            continue;
        }
        prefix.push(format!("f:{k}"));
        if k == "metadata" {
            // leaf_paths walks metadata's own fields, leaving out the system's.
            let (omm, nmm) = (
                o.and_then(Value::as_object).unwrap_or(&empty),
                n.and_then(Value::as_object).unwrap_or(&empty),
            );
            for mk in union_keys(omm, nmm) {
                if SYSTEM_META.contains(&mk) {
                    continue;
                }
                prefix.push(format!("f:{mk}"));
                diff.node("metadata", mk, omm.get(mk), nmm.get(mk), &mut prefix);
                prefix.pop();
            }
        } else {
            diff.node("", k, o, n, &mut prefix);
        }
        prefix.pop();
    }
    (diff.changed, diff.removed)
}

fn union_keys<'a>(a: &'a Map<String, Value>, b: &'a Map<String, Value>) -> Vec<&'a str> {
    let mut keys: Vec<&str> = a.keys().chain(b.keys()).map(String::as_str).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// A non-empty list's elements by their `k:` segment, when every element has the merge
/// key and no two share it (otherwise the list is compared leaf by leaf).
fn keyed<'v>(merge_key: &str, items: &'v [Value]) -> Option<BTreeMap<String, &'v Value>> {
    if items.is_empty() {
        return None;
    }
    let mut out = BTreeMap::new();
    for e in items {
        if out.insert(key_segment(merge_key, e)?, e).is_some() {
            return None;
        }
    }
    Some(out)
}

struct LeafDiff<'a> {
    kind: Option<&'a str>,
    old_root: &'a Value,
    new_root: &'a Value,
    changed: FieldSet,
    removed: FieldSet,
}

impl LeafDiff<'_> {
    /// One field at `prefix` (already pushed), as [`collect`] would walk it.
    fn node(
        &mut self,
        parent: &str,
        field: &str,
        old: Option<&Value>,
        new: Option<&Value>,
        prefix: &mut FieldPath,
    ) {
        if old == new {
            return;
        }
        if let (Some(Value::Object(om)), Some(Value::Object(nm))) = (old, new)
            && !om.is_empty()
            && !nm.is_empty()
        {
            for k in union_keys(om, nm) {
                prefix.push(format!("f:{k}"));
                self.node(field, k, om.get(k), nm.get(k), prefix);
                prefix.pop();
            }
            return;
        }
        if let (Some(Value::Array(ol)), Some(Value::Array(nl)), Some(kind)) = (old, new, self.kind)
            && let ListStrategy::MergeKey(mk) = list_strategy(kind, parent, field)
            && let (Some(om), Some(nm)) = (keyed(mk, ol), keyed(mk, nl))
        {
            // Keyed lists: element by element, each as `k:{key}` with its `.` leaf.
            let mut segs: Vec<&String> = om.keys().chain(nm.keys()).collect();
            segs.sort_unstable();
            segs.dedup();
            let empty = Map::new();
            for seg in segs {
                let (oe, ne) = (om.get(seg).copied(), nm.get(seg).copied());
                if oe == ne {
                    continue;
                }
                prefix.push(seg.clone());
                let mut dot = prefix.clone();
                dot.push(".".into());
                if ne.is_some() {
                    self.changed.insert(dot);
                } else {
                    self.removed.insert(dot);
                }
                let (oem, nem) = (
                    oe.and_then(Value::as_object).unwrap_or(&empty),
                    ne.and_then(Value::as_object).unwrap_or(&empty),
                );
                for k in union_keys(oem, nem) {
                    prefix.push(format!("f:{k}"));
                    self.node(field, k, oem.get(k), nem.get(k), prefix);
                    prefix.pop();
                }
                prefix.pop();
            }
            return;
        }
        // Lists and leaves: compare the leaves of both sides, as the full walk would.
        let leaves = |v: Option<&Value>, prefix: &mut FieldPath| {
            let mut out = FieldSet::new();
            if let Some(v) = v {
                collect(self.kind, parent, field, v, prefix, &mut out);
            }
            out
        };
        let old_leaves = leaves(old, prefix);
        let new_leaves = leaves(new, prefix);
        for p in &new_leaves {
            if value_at(self.old_root, p) != value_at(self.new_root, p) {
                self.changed.insert(p.clone());
            }
        }
        self.removed
            .extend(old_leaves.difference(&new_leaves).cloned());
    }
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

    // As kube-apiserver's field manager does, the applier's timestamp moves only when the
    // apply changed the object, so re-applying the same configuration is a no-op (same
    // resourceVersion, no watch event), which `helm upgrade` of an untouched chart relies on.
    let object_changed = live.is_none_or(|l| !same_ignoring_managed_fields(l, &merged));
    let previous_time = entries
        .iter()
        .find(|e| e.manager == manager && e.operation == "Apply" && e.subresource == subresource)
        .map(|e| e.time.clone());
    let mine = entry_mut(&mut entries, manager, "Apply", subresource, api_version);
    if let Some(time) = previous_time.filter(|_| !object_changed) {
        mine.time = time;
    }
    mine.fields = config_fields;
    entries.retain(|e| !e.fields.is_empty());
    write_entries(&mut merged, &entries);
    Ok(merged)
}

/// Whether `a` and `b` are the same object apart from their managedFields.
fn same_ignoring_managed_fields(a: &Value, b: &Value) -> bool {
    let (Some(ao), Some(bo)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let metadata_same = match (ao.get("metadata"), bo.get("metadata")) {
        (Some(Value::Object(am)), Some(Value::Object(bm))) => equal_except(am, bm, "managedFields"),
        (am, bm) => am == bm,
    };
    metadata_same && equal_except(ao, bo, "metadata")
}

/// Whether two maps hold the same entries, `skip` aside.
fn equal_except(a: &Map<String, Value>, b: &Map<String, Value>, skip: &str) -> bool {
    let len = |m: &Map<String, Value>| m.len() - usize::from(m.contains_key(skip));
    len(a) == len(b) && a.iter().all(|(k, v)| k == skip || b.get(k) == Some(v))
}

#[cfg(test)]
mod tests;
