//! Patch formats: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and strategic
//! merge patch with the merge keys of the built-in types.

use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }
}

/// How a list field merges in a strategic merge patch of a built-in kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListStrategy {
    /// Replace the whole list (the default; also what `patchStrategy` absent means).
    Replace,
    /// Merge elements by this key.
    MergeKey(&'static str),
    /// Union of primitive values (e.g. `finalizers`).
    MergePrimitives,
}

/// Merge strategy of list field `field` in a built-in object of `kind`, given the
/// name of the parent field (which disambiguates e.g. container vs service ports).
pub fn list_strategy(kind: &str, parent: &str, field: &str) -> ListStrategy {
    use ListStrategy::*;
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims"
        | "schedulingGates" => MergeKey("name"),
        "volumeMounts" => MergeKey("mountPath"),
        "volumeDevices" => MergeKey("devicePath"),
        "ports" => {
            if kind == "Service" {
                MergeKey("port")
            } else if parent == "spec" && kind == "Endpoints" {
                Replace
            } else {
                MergeKey("containerPort")
            }
        }
        "conditions" => MergeKey("type"),
        "webhooks"
            if kind == "MutatingWebhookConfiguration"
                || kind == "ValidatingWebhookConfiguration" =>
        {
            MergeKey("name")
        }
        "secrets" if kind == "ServiceAccount" => MergeKey("name"),
        "addresses" if kind == "Node" => MergeKey("type"),
        "ownerReferences" => MergeKey("uid"),
        "hostAliases" => MergeKey("ip"),
        "podIPs" | "hostIPs" => MergeKey("ip"),
        "topologySpreadConstraints" => MergeKey("topologyKey"),
        "finalizers" => MergePrimitives,
        _ => Replace,
    }
}

/// Applies a strategic merge patch to `original` for a built-in `kind`.
pub fn strategic_merge(kind: &str, original: Value, patch: &Value) -> ApiResult<Value> {
    let Value::Object(pmap) = patch else {
        return Err(ApiError::bad_request(
            "the body of a strategic merge patch must be a JSON object",
        ));
    };
    let base = match original {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    match merge_map(kind, "", base, pmap)? {
        Some(m) => Ok(Value::Object(m)),
        None => Ok(Value::Object(Map::new())),
    }
}

/// Merges `patch` into `orig`. Returns None when the patch says `$patch: delete`.
fn merge_map(
    kind: &str,
    parent: &str,
    mut orig: Map<String, Value>,
    patch: &Map<String, Value>,
) -> ApiResult<Option<Map<String, Value>>> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("delete") => return Ok(None),
        Some("replace") => {
            let mut replaced = Map::new();
            for (k, v) in patch {
                if k != "$patch" && !k.starts_with("$setElementOrder/") {
                    replaced.insert(k.clone(), strip_directives(v));
                }
            }
            return Ok(Some(replaced));
        }
        Some("merge") | None => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "unknown patch type: {other:?} in map: {patch:?}"
            )));
        }
    }
    if let Some(retain) = patch.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = retain.iter().filter_map(Value::as_str).collect();
        orig.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (key, pval) in patch {
        if key == "$patch" || key == "$retainKeys" || key.starts_with("$setElementOrder/") {
            // $setElementOrder only fixes ordering; tolerated, order of the merge kept.
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            let remove: Vec<&Value> = pval
                .as_array()
                .map(|a| a.iter().collect())
                .unwrap_or_default();
            if let Some(Value::Array(list)) = orig.get_mut(field) {
                list.retain(|x| !remove.contains(&x));
            }
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        if pval.is_null() {
            orig.remove(key);
            continue;
        }
        let merged = match (orig.remove(key), pval) {
            (Some(Value::Object(o)), Value::Object(p)) => {
                merge_map(kind, key, o, p)?.map(Value::Object)
            }
            (Some(Value::Array(o)), Value::Array(p)) => Some(merge_list(kind, parent, key, o, p)?),
            (None, Value::Object(p)) => merge_map(kind, key, Map::new(), p)?.map(Value::Object),
            (None, Value::Array(p)) => Some(merge_list(kind, parent, key, Vec::new(), p)?),
            (_, other) => Some(strip_directives(other)),
        };
        if let Some(v) = merged {
            orig.insert(key.clone(), v);
        }
    }
    Ok(Some(orig))
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(
            a.iter()
                .filter(|x| {
                    !x.as_object()
                        .is_some_and(|m| m.contains_key("$patch") && m.len() == 1)
                })
                .map(strip_directives)
                .collect(),
        ),
        other => other.clone(),
    }
}

fn merge_list(
    kind: &str,
    parent: &str,
    field: &str,
    orig: Vec<Value>,
    patch: &[Value],
) -> ApiResult<Value> {
    // A `{"$patch": "replace"}` element replaces the list with the other elements.
    if patch.iter().any(|e| {
        e.get("$patch").and_then(Value::as_str) == Some("replace")
            && e.as_object().is_some_and(|m| m.len() == 1)
    }) {
        return Ok(Value::Array(
            patch
                .iter()
                .filter(|e| e.get("$patch").is_none())
                .map(strip_directives)
                .collect(),
        ));
    }
    match list_strategy(kind, parent, field) {
        ListStrategy::Replace => Ok(Value::Array(patch.iter().map(strip_directives).collect())),
        ListStrategy::MergePrimitives => {
            let mut out = orig;
            for p in patch {
                if !out.contains(p) {
                    out.push(p.clone());
                }
            }
            Ok(Value::Array(out))
        }
        ListStrategy::MergeKey(merge_key) => {
            let mut out = orig;
            for p in patch {
                let Some(pm) = p.as_object() else {
                    return Err(ApiError::bad_request(format!(
                        "unable to find api field in struct for the list {field}: element is not an object"
                    )));
                };
                let Some(key_val) = pm.get(merge_key) else {
                    if pm.get("$patch").is_some() {
                        continue;
                    }
                    return Err(ApiError::bad_request(format!(
                        "map: {pm:?} does not contain declared merge key: {merge_key}"
                    )));
                };
                let pos = out.iter().position(|o| o.get(merge_key) == Some(key_val));
                let directive = pm.get("$patch").and_then(Value::as_str);
                match (pos, directive) {
                    (Some(i), Some("delete")) => {
                        out.remove(i);
                    }
                    (None, Some("delete")) => {}
                    (Some(i), _) => {
                        let existing = match out.remove(i) {
                            Value::Object(m) => m,
                            _ => Map::new(),
                        };
                        if let Some(m) = merge_map(kind, field, existing, pm)? {
                            out.insert(i, Value::Object(m));
                        }
                    }
                    (None, _) => out.push(strip_directives(p)),
                }
            }
            Ok(Value::Array(out))
        }
    }
}

/// RFC 7386 JSON merge patch.
pub fn merge_patch(mut original: Value, patch: &Value) -> Value {
    json_patch::merge(&mut original, patch);
    original
}

/// RFC 6902 JSON patch; failures to apply are 422 like the API server's.
pub fn json_patch(original: Value, patch_body: &[u8]) -> ApiResult<Value> {
    let patch: json_patch::Patch = serde_json::from_slice(patch_body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    let mut out = original;
    json_patch::patch(&mut out, &patch).map_err(|e| {
        let mut err = ApiError::new(422, "Invalid", e.to_string());
        err.message =
            format!("the server rejected our request due to an error in our request: {e}");
        err
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn smp_containers_by_name() {
        let orig = json!({"spec": {"containers": [
            {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "b:1"}
        ]}});
        let patch = json!({"spec": {"containers": [
            {"name": "a", "image": "a:2", "env": [{"name": "Y", "value": "2"}]},
            {"name": "b", "$patch": "delete"}
        ]}});
        let out = strategic_merge("Pod", orig.clone(), &patch).ok();
        assert_eq!(
            out,
            Some(json!({"spec": {"containers": [
                {"name": "a", "image": "a:2", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]}
            ]}}))
        );
    }

    #[test]
    fn smp_replace_and_null() {
        let orig = json!({"metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x"]}, "spec": {"tolerations": [{"key": "k"}]}});
        let patch = json!({"metadata": {"labels": {"a": null}, "finalizers": ["y"]}, "spec": {"tolerations": [{"key": "j"}]}});
        let out = strategic_merge("Pod", orig.clone(), &patch).ok();
        assert_eq!(
            out,
            Some(
                json!({"metadata": {"labels": {"b": "2"}, "finalizers": ["x", "y"]}, "spec": {"tolerations": [{"key": "j"}]}})
            )
        );
        let patch = json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}}});
        let out = strategic_merge("Pod", orig.clone(), &patch).ok();
        assert_eq!(
            out.as_ref()
                .and_then(|o| o.pointer("/metadata/labels"))
                .cloned(),
            Some(json!({"c": "3"}))
        );
    }

    #[test]
    fn smp_webhooks_by_name() {
        let orig =
            json!({"webhooks": [{"name": "a", "clientConfig": {"caBundle": ""}}, {"name": "b"}]});
        let patch = json!({"webhooks": [{"name": "a", "clientConfig": {"caBundle": "Q0E="}}]});
        let out = strategic_merge("MutatingWebhookConfiguration", orig.clone(), &patch).ok();
        assert_eq!(
            out,
            Some(
                json!({"webhooks": [{"name": "a", "clientConfig": {"caBundle": "Q0E="}}, {"name": "b"}]})
            )
        );
    }

    #[test]
    fn smp_element_order_tolerated() {
        let orig = json!({"spec": {"containers": [{"name": "a"}]}});
        let patch = json!({"spec": {"$setElementOrder/containers": [{"name": "a"}], "containers": [{"name": "a", "image": "i"}]}});
        let out = strategic_merge("Pod", orig.clone(), &patch).ok();
        assert_eq!(
            out,
            Some(json!({"spec": {"containers": [{"name": "a", "image": "i"}]}}))
        );
    }
}
