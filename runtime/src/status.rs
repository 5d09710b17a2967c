//! Writing an object's status only when it changed, the same way in every family: one JSON
//! merge patch of the status subresource carrying just the fields that differ from the
//! cached status (removed ones as `null`) and the cached resourceVersion, so a write
//! computed from a stale cache is a conflict (requeued quietly) instead of going backwards.

use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt as _};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::errors::ShellError;
pub use crate::errors::StatusError;

/// The RFC 7386 merge patch that turns `old` into `new`: changed and added fields with their
/// new value, removed ones as `null`, arrays replaced whole. `None` when they are equal.
pub fn merge_diff(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut patch = Map::new();
            for (key, value) in n {
                match o.get(key) {
                    Some(before) => {
                        if let Some(d) = merge_diff(before, value) {
                            patch.insert(key.clone(), d);
                        }
                    }
                    None => {
                        patch.insert(key.clone(), value.clone());
                    }
                }
            }
            for key in o.keys().filter(|k| !n.contains_key(*k)) {
                patch.insert(key.clone(), Value::Null);
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        _ if old == new => None,
        _ => Some(new.clone()),
    }
}

/// Writes `desired` as the status of `object` (as cached) when it differs from the cached
/// status; returns whether it wrote.
pub async fn write_status_if_changed<K, S>(
    api: &Api<K>,
    object: &K,
    cached: Option<&S>,
    desired: &S,
) -> Result<bool, StatusError>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    S: Serialize + PartialEq,
{
    if cached == Some(desired) {
        return Ok(false);
    }
    let Some(body) = status_patch(object.resource_version(), cached, desired)? else {
        return Ok(false);
    };
    api.patch_status(
        &object.name_any(),
        &PatchParams::default(),
        &Patch::Merge(body),
    )
    .await
    .map_err(StatusError::Api)?;
    Ok(true)
}

/// [`write_status_if_changed`] for a namespaced `object` through `client`, its failure the
/// shell's `update_status` step: what the workload families' status step is.
pub async fn write_namespaced_status<K, S>(
    client: &Client,
    object: &K,
    cached: Option<&S>,
    desired: &S,
) -> Result<bool, ShellError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    S: Serialize + PartialEq,
{
    let api: Api<K> = Api::namespaced(client.clone(), &object.namespace().unwrap_or_default());
    write_status_if_changed(&api, object, cached, desired)
        .await
        .map_err(ShellError::status_of(object.name_any()))
}

/// The merge patch [`write_status_if_changed`] sends; `None` when nothing changes.
pub fn status_patch<S: Serialize>(
    resource_version: Option<String>,
    cached: Option<&S>,
    desired: &S,
) -> Result<Option<Value>, StatusError> {
    let old = match cached {
        Some(s) => serde_json::to_value(s).map_err(StatusError::Encode)?,
        None => Value::Object(Map::new()),
    };
    let new = serde_json::to_value(desired).map_err(StatusError::Encode)?;
    let Some(diff) = merge_diff(&old, &new) else {
        return Ok(None);
    };
    let mut body = serde_json::json!({ "status": diff });
    if let Some(rv) = resource_version {
        body["metadata"] = serde_json::json!({ "resourceVersion": rv });
    }
    Ok(Some(body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_diff_holds_only_what_changed_and_nulls_what_went() {
        let old = json!({"replicas": 3, "ready": 2, "conditions": [{"type": "A"}], "x": {"a": 1, "b": 2}});
        let new = json!({"replicas": 3, "ready": 0, "conditions": [], "x": {"a": 1}});
        assert_eq!(
            merge_diff(&old, &new),
            Some(json!({"ready": 0, "conditions": [], "x": {"b": null}}))
        );
        assert_eq!(merge_diff(&old, &old), None);
        assert_eq!(
            merge_diff(&json!({"a": 1}), &json!({})),
            Some(json!({"a": null}))
        );
    }

    #[test]
    fn the_patch_carries_the_cached_resource_version() {
        let patch = status_patch(Some("7".into()), Some(&json!({"a": 1})), &json!({"a": 2}))
            .unwrap()
            .unwrap();
        assert_eq!(
            patch,
            json!({"metadata": {"resourceVersion": "7"}, "status": {"a": 2}})
        );
        assert_eq!(
            status_patch(None, Some(&json!({"a": 1})), &json!({"a": 1})).unwrap(),
            None
        );
    }
}
