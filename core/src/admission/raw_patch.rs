//! JSONPatches against the object exactly as the API server sent it.
//!
//! A mutating webhook decodes the object into this build's Kubernetes types, changes the
//! typed value and answers with a patch. Diffing the typed values alone goes wrong when the
//! object carries fields the types do not know (a newer API version than the one compiled
//! in): those fields are invisible to the diff, so a list whose elements moved (a sidecar
//! inserted before the app container) leaves them at their old index, on the wrong element,
//! and an element rebuilt from the types drops them. [`patch_against_raw`] instead rebuilds
//! the changed parts on the raw object, matching list elements by name (containers, init
//! containers, volumes, env, pull secrets) or else by value, so every field the types do
//! not know stays on the element it came with.

use serde::Serialize;
use serde_json::{Map, Value};

/// The JSONPatch taking `raw` (the object as sent) to `mutated`, where `decoded` is `raw`
/// as the typed model read it and `mutated` is that typed value after the webhook's
/// changes. Only what differs between `decoded` and `mutated` is written; anything equal in
/// both (such as a namespace the webhook filled in for its own use) keeps its raw form.
pub fn patch_against_raw<T: Serialize>(
    raw: &Value,
    decoded: &T,
    mutated: &T,
) -> Result<json_patch::Patch, serde_json::Error> {
    let decoded = serde_json::to_value(decoded)?;
    let mutated = serde_json::to_value(mutated)?;
    let target = rebuild(Some(raw), Some(&decoded), &mutated).unwrap_or(Value::Null);
    Ok(json_patch::diff(raw, &target))
}

/// `mutated` written over `raw`; `None` when the value is to be absent (it was absent from
/// `raw` and the webhook did not change it).
fn rebuild(raw: Option<&Value>, decoded: Option<&Value>, mutated: &Value) -> Option<Value> {
    if decoded == Some(mutated) {
        return raw.cloned();
    }
    match (raw, decoded, mutated) {
        (Some(Value::Object(raw)), Some(Value::Object(decoded)), Value::Object(mutated)) => {
            Some(Value::Object(rebuild_object(raw, decoded, mutated)))
        }
        (Some(Value::Array(raw)), Some(Value::Array(decoded)), Value::Array(mutated))
            // The typed model keeps every element in order, so raw and decoded align by
            // index; anything else is not an object the types decoded, and is written whole.
            if raw.len() == decoded.len() =>
        {
            Some(Value::Array(rebuild_list(raw, decoded, mutated)))
        }
        _ => Some(mutated.clone()),
    }
}

fn rebuild_object(
    raw: &Map<String, Value>,
    decoded: &Map<String, Value>,
    mutated: &Map<String, Value>,
) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, raw_value) in raw {
        match mutated.get(key) {
            Some(value) => {
                if let Some(v) = rebuild(Some(raw_value), decoded.get(key), value) {
                    out.insert(key.clone(), v);
                }
            }
            // A field the types do not know: it stays as sent.
            None if !decoded.contains_key(key) => {
                out.insert(key.clone(), raw_value.clone());
            }
            // A known field the webhook removed.
            None => {}
        }
    }
    for (key, value) in mutated {
        if !raw.contains_key(key)
            && let Some(v) = rebuild(None, decoded.get(key), value)
        {
            out.insert(key.clone(), v);
        }
    }
    out
}

/// Each element of `mutated` is rebuilt on the raw element it came from: the element of the
/// same name where every element has a distinct name, else an unused equal element.
fn rebuild_list(raw: &[Value], decoded: &[Value], mutated: &[Value]) -> Vec<Value> {
    if let (Some(decoded_names), Some(_)) = (distinct_names(decoded), distinct_names(mutated)) {
        return mutated
            .iter()
            .map(|item| {
                let origin =
                    name_of(item).and_then(|name| decoded_names.iter().position(|n| *n == name));
                match origin {
                    Some(i) => rebuild(Some(&raw[i]), Some(&decoded[i]), item)
                        .unwrap_or_else(|| item.clone()),
                    None => item.clone(),
                }
            })
            .collect();
    }
    let mut used = vec![false; decoded.len()];
    mutated
        .iter()
        .map(|item| {
            let origin = (0..decoded.len()).find(|&i| !used[i] && decoded[i] == *item);
            match origin {
                Some(i) => {
                    used[i] = true;
                    raw[i].clone()
                }
                None => item.clone(),
            }
        })
        .collect()
}

fn name_of(item: &Value) -> Option<&str> {
    item.get("name").and_then(Value::as_str)
}

/// The elements' names, in order, when every element is named and no name repeats.
fn distinct_names(items: &[Value]) -> Option<Vec<&str>> {
    let names = items.iter().map(name_of).collect::<Option<Vec<&str>>>()?;
    let mut sorted = names.clone();
    sorted.sort_unstable();
    sorted.dedup();
    (sorted.len() == names.len()).then_some(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, Pod};
    use serde_json::json;

    /// A pod whose app container carries `restartPolicyRules`, which Kubernetes 1.33's
    /// types (the version compiled in) do not have, plus an unknown spec-level field.
    fn raw_pod() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "futureSchedulingHint": "spread",
                "containers": [{
                    "name": "main", "image": "nginx:1.25",
                    "restartPolicyRules": [{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]
                }],
                "volumes": [{"name": "data", "emptyDir": {}, "futureVolumeFlag": true}]
            }
        })
    }

    fn apply(raw: &Value, patch: &json_patch::Patch) -> Value {
        let mut doc = raw.clone();
        json_patch::patch(&mut doc, patch).unwrap();
        doc
    }

    #[test]
    fn the_compiled_types_do_not_know_the_test_field() {
        let pod: Pod = serde_json::from_value(raw_pod()).unwrap();
        let reencoded = serde_json::to_value(&pod).unwrap();
        assert!(reencoded["spec"]["containers"][0]["restartPolicyRules"].is_null());
    }

    #[test]
    fn a_container_inserted_before_the_app_leaves_unknown_fields_on_the_app() {
        let raw = raw_pod();
        let decoded: Pod = serde_json::from_value(raw.clone()).unwrap();
        let mut mutated = decoded.clone();
        let spec = mutated.spec.as_mut().unwrap();
        spec.containers.insert(
            0,
            Container {
                name: "sidecar".into(),
                image: Some("envoy".into()),
                ..Container::default()
            },
        );
        let patched = apply(&raw, &patch_against_raw(&raw, &decoded, &mutated).unwrap());
        let containers = patched["spec"]["containers"].as_array().unwrap();
        assert_eq!(containers[0]["name"], "sidecar");
        assert!(containers[0].get("restartPolicyRules").is_none());
        assert_eq!(containers[1]["name"], "main");
        assert_eq!(
            containers[1]["restartPolicyRules"],
            raw["spec"]["containers"][0]["restartPolicyRules"]
        );
        assert_eq!(patched["spec"]["futureSchedulingHint"], "spread");
        assert_eq!(patched["spec"]["volumes"][0]["futureVolumeFlag"], true);
    }

    #[test]
    fn a_changed_element_keeps_its_unknown_fields_and_gets_the_change() {
        let raw = raw_pod();
        let decoded: Pod = serde_json::from_value(raw.clone()).unwrap();
        let mut mutated = decoded.clone();
        mutated.spec.as_mut().unwrap().containers[0].image = Some("nginx:1.27".into());
        let patched = apply(&raw, &patch_against_raw(&raw, &decoded, &mutated).unwrap());
        let main = &patched["spec"]["containers"][0];
        assert_eq!(main["image"], "nginx:1.27");
        assert_eq!(
            main["restartPolicyRules"],
            raw["spec"]["containers"][0]["restartPolicyRules"]
        );
    }

    #[test]
    fn known_fields_a_webhook_removes_are_removed_and_unchanged_ones_are_not_written() {
        let raw = raw_pod();
        let mut decoded: Pod = serde_json::from_value(raw.clone()).unwrap();
        // Filled in for the webhook's own use; not part of the patch.
        decoded.metadata.namespace = Some("default".into());
        assert!(
            patch_against_raw(&raw, &decoded, &decoded)
                .unwrap()
                .0
                .is_empty()
        );
        let mut mutated = decoded.clone();
        mutated.metadata.labels = None;
        let patch = patch_against_raw(&raw, &decoded, &mutated).unwrap();
        assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            json!([{"op": "remove", "path": "/metadata/labels"}])
        );
    }

    #[test]
    fn unnamed_elements_are_matched_by_value() {
        let raw = json!({"items": [{"v": 1, "extra": "a"}, {"v": 2, "extra": "b"}]});
        let decoded = json!({"items": [{"v": 1}, {"v": 2}]});
        let mutated = json!({"items": [{"v": 0}, {"v": 2}, {"v": 1}]});
        let target = rebuild(Some(&raw), Some(&decoded), &mutated).unwrap();
        assert_eq!(
            target,
            json!({"items": [{"v": 0}, {"v": 2, "extra": "b"}, {"v": 1, "extra": "a"}]})
        );
    }
}
