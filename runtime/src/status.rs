//! Writing an object's status only when it changed, the same way in every family: one JSON
//! merge patch of the status subresource carrying just the fields that differ from the
//! cached status (removed ones as `null`) and the cached resourceVersion, so a write
//! computed from a stale cache is a conflict (requeued quietly) instead of going backwards.

use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, Patch, PatchParams};
use kube::core::object::HasStatus;
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
/// status; returns whether it wrote. A failure is the shell's `update_status` step, named
/// by the object's `namespace/name`.
pub async fn write_status_if_changed<K>(
    api: &Api<K>,
    object: &K,
    desired: &K::Status,
) -> Result<bool, ShellError>
where
    K: Resource + HasStatus + Clone + DeserializeOwned + std::fmt::Debug,
    K::Status: Serialize + PartialEq,
{
    send_status(api, object, desired)
        .await
        .map_err(ShellError::status_of(object_key(object)))
}

async fn send_status<K>(api: &Api<K>, object: &K, desired: &K::Status) -> Result<bool, StatusError>
where
    K: Resource + HasStatus + Clone + DeserializeOwned + std::fmt::Debug,
    K::Status: Serialize + PartialEq,
{
    let cached = object.status();
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

/// `namespace/name`, or the name of a cluster-scoped object.
fn object_key<K: Resource>(object: &K) -> String {
    match object.namespace() {
        Some(namespace) => format!("{namespace}/{}", object.name_any()),
        None => object.name_any(),
    }
}

/// [`write_status_if_changed`] for a namespaced `object` through `client`: what the
/// workload families' status step is.
pub async fn write_namespaced_status<K>(
    client: &Client,
    object: &K,
    desired: &K::Status,
) -> Result<bool, ShellError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + HasStatus
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    K::Status: Serialize + PartialEq,
{
    let api: Api<K> = Api::namespaced(client.clone(), &object.namespace().unwrap_or_default());
    write_status_if_changed(&api, object, desired).await
}

/// Records a revision-name collision: the cached status with its `collisionCount` (the
/// field `collision_count` gives) set to `count`, so the next reconcile hashes (and names)
/// the revision anew.
pub async fn write_collision_count<K>(
    client: &Client,
    object: &K,
    count: i32,
    collision_count: impl FnOnce(&mut K::Status) -> &mut Option<i32>,
) -> Result<bool, ShellError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + HasStatus
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    K::Status: Serialize + PartialEq + Clone + Default,
{
    let mut status = object.status().cloned().unwrap_or_default();
    *collision_count(&mut status) = Some(count);
    write_namespaced_status(client, object, &status).await
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
