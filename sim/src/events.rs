//! `events.k8s.io/v1` Events share storage with core `v1` Events, as on the real
//! server: objects are stored in the core shape and converted on the way in and out
//! (the field mapping of `k8s.io/kubernetes/pkg/apis/events/v1` conversions).

use serde_json::{Map, Value};

/// (events.k8s.io/v1 field, core/v1 field); fields with equal names are copied as is.
const RENAMES: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn rename(obj: &Value, from_events: bool, api_version: &str) -> Value {
    let Some(map) = obj.as_object() else {
        return obj.clone();
    };
    let mut out = Map::new();
    for (k, v) in map {
        let renamed = RENAMES.iter().find_map(|(ev, core)| {
            if from_events && k == ev {
                Some(*core)
            } else if !from_events && k == core {
                Some(*ev)
            } else {
                None
            }
        });
        out.insert(renamed.unwrap_or(k).to_string(), v.clone());
    }
    out.insert("apiVersion".into(), Value::String(api_version.to_string()));
    out.insert("kind".into(), Value::String("Event".into()));
    Value::Object(out)
}

/// events.k8s.io/v1 shape -> stored core/v1 shape.
pub fn to_core(obj: &Value) -> Value {
    rename(obj, true, "v1")
}

/// Stored core/v1 shape -> events.k8s.io/v1 shape.
pub fn from_core(obj: &Value) -> Value {
    rename(obj, false, "events.k8s.io/v1")
}

/// Field-selector names of events.k8s.io/v1 mapped onto the stored shape.
pub fn core_field(field: &str) -> String {
    for (ev, core) in RENAMES {
        if field == *ev {
            return core.to_string();
        }
        if let Some(rest) = field.strip_prefix(&format!("{ev}.")) {
            return format!("{core}.{rest}");
        }
    }
    field.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trip() {
        let ev = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"kind": "Pod", "name": "p"}, "note": "hello", "reason": "Started",
            "reportingController": "kubelet", "type": "Normal"});
        let core = to_core(&ev);
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["message"], "hello");
        assert_eq!(core["reportingComponent"], "kubelet");
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(from_core(&core), ev);
        assert_eq!(core_field("regarding.name"), "involvedObject.name");
    }
}
