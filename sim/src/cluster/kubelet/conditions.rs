//! The pod conditions the kubelet writes: one condition set as the kubelet sets it, and
//! the Ready message for readiness gates that are not True.

use serde_json::{Map, Value, json};

use super::runtime::str_of;
use crate::meta;

/// None when every readiness gate's condition is True; otherwise the kubelet's
/// message for the first gate that is not.
pub(super) fn readiness_gates_message(pod: &Value, conds: &[Value]) -> Option<String> {
    let gates = pod
        .pointer("/spec/readinessGates")
        .and_then(Value::as_array)?;
    for g in gates {
        let t = str_of(g, "conditionType");
        match conds.iter().find(|c| str_of(c, "type") == t) {
            None => {
                return Some(format!(
                    "corresponding condition of pod readiness gate \"{t}\" does not exist."
                ));
            }
            Some(c) if str_of(c, "status") != "True" => {
                return Some(format!(
                    "the status of pod readiness gate \"{t}\" is not \"True\", but {}",
                    str_of(c, "status")
                ));
            }
            Some(_) => {}
        }
    }
    None
}

/// Sets one condition, keeping lastTransitionTime when the status did not change.
/// `overwrite` false only adds the condition when missing (PodScheduled belongs to the
/// scheduler/binding).
pub(super) fn set_cond(
    conds: &mut Vec<Value>,
    ty: &str,
    ok: bool,
    reason: Option<&str>,
    message: Option<&str>,
    overwrite: bool,
) {
    let status = if ok { "True" } else { "False" };
    let existing = conds.iter().position(|c| str_of(c, "type") == ty);
    if existing.is_some() && !overwrite {
        return;
    }
    let mut c = Map::new();
    c.insert("type".into(), json!(ty));
    c.insert("status".into(), json!(status));
    c.insert("lastProbeTime".into(), Value::Null);
    let ltt = existing
        .and_then(|i| conds.get(i))
        .filter(|old| str_of(old, "status") == status)
        .and_then(|old| old.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(meta::now_rfc3339()));
    c.insert("lastTransitionTime".into(), ltt);
    if let Some(r) = reason {
        c.insert("reason".into(), json!(r));
    }
    if let Some(m) = message {
        c.insert("message".into(), json!(m));
    }
    match existing {
        Some(i) => conds[i] = Value::Object(c),
        None => conds.push(Value::Object(c)),
    }
}
