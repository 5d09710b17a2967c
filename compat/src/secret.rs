//! What kube-apiserver does to every Secret it receives (its v1 conversion): `stringData`
//! written into `data`, base64-encoded, over any key of the same name, and dropped, so it is
//! never stored nor returned.

use base64::Engine as _;
use serde_json::{Map, Value};

/// Moves the `stringData` of `secret` (a Secret's JSON object) into its `data`.
pub fn merge_string_data(secret: &mut Map<String, Value>) {
    let Some(Value::Object(strings)) = secret.remove("stringData") else {
        return;
    };
    if strings.is_empty() {
        return;
    }
    let mut data = match secret.remove("data") {
        Some(Value::Object(data)) => data,
        _ => Map::new(),
    };
    for (key, value) in strings {
        let text = value.as_str().unwrap_or_default();
        data.insert(
            key,
            Value::String(base64::engine::general_purpose::STANDARD.encode(text)),
        );
    }
    secret.insert("data".into(), Value::Object(data));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn string_data_overwrites_data_and_is_dropped() {
        let mut secret =
            json!({"data": {"a": "eA==", "b": "eQ=="}, "stringData": {"b": "new", "c": "z"}});
        merge_string_data(secret.as_object_mut().unwrap());
        assert_eq!(
            secret,
            json!({"data": {"a": "eA==", "b": "bmV3", "c": "eg=="}})
        );
        let mut empty = json!({"stringData": {}});
        merge_string_data(empty.as_object_mut().unwrap());
        assert_eq!(empty, json!({}));
    }
}
