//! Small helpers around object metadata: timestamps, uids, name validation, JSON paths.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value};

/// Now, as the API server writes `metav1.Time` (RFC 3339, second precision, UTC).
pub fn now_rfc3339() -> String {
    format_time(jiff::Timestamp::now())
}

pub fn format_time(ts: jiff::Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub fn parse_time(s: &str) -> Option<jiff::Timestamp> {
    s.parse::<jiff::Timestamp>().ok()
}

static UID_COUNTER: AtomicU64 = AtomicU64::new(0);

/// 64 pseudo-random bits (std's per-instance random SipHash keys mixed with a counter).
/// Uniqueness, not unpredictability, is what uids and generated names need here.
pub fn random_u64() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(UID_COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.finish()
}

/// A random (version 4 layout) UUID string.
pub fn new_uid() -> String {
    let hi = random_u64();
    let lo = random_u64();
    let hi = (hi & 0xffff_ffff_ffff_0fff) | 0x0000_0000_0000_4000;
    let lo = (lo & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0xffff,
        lo >> 48,
        lo & 0xffff_ffff_ffff
    )
}

/// The 5-character suffix `generateName` gets (same alphabet as apimachinery's `rand.String`).
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut bits = random_u64();
    let mut out = String::with_capacity(5);
    for _ in 0..5 {
        out.push(ALPHABET[(bits % ALPHABET.len() as u64) as usize] as char);
        bits /= ALPHABET.len() as u64;
    }
    out
}

pub const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
pub const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
pub const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

fn is_label_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// Which name rule a resource uses (apimachinery `path.ValidatePathSegmentName` plus
/// the per-kind `ValidateNameFunc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    Dns1123Subdomain,
    Dns1123Label,
    Dns1035Label,
    /// Only path-segment safety (no `/`, `%`, not `.` or `..`); e.g. RBAC-style names.
    PathSegment,
}

/// Returns the error detail when `name` breaks `rule`.
pub fn validate_name(name: &str, rule: NameRule) -> Result<(), String> {
    if name == "." || name == ".." {
        return Err(format!("may not be '{name}'"));
    }
    if name.contains('/') || name.contains('%') {
        return Err("may not contain '/' or '%'".to_string());
    }
    match rule {
        NameRule::PathSegment => Ok(()),
        NameRule::Dns1123Subdomain => {
            if name.len() > 253 {
                return Err("must be no more than 253 characters".into());
            }
            if name.split('.').all(is_label_part) {
                Ok(())
            } else {
                Err(DNS1123_SUBDOMAIN_MSG.into())
            }
        }
        NameRule::Dns1123Label => {
            if name.len() > 63 {
                return Err("must be no more than 63 characters".into());
            }
            if is_label_part(name) {
                Ok(())
            } else {
                Err(DNS1123_LABEL_MSG.into())
            }
        }
        NameRule::Dns1035Label => {
            if name.len() > 63 {
                return Err("must be no more than 63 characters".into());
            }
            if is_label_part(name) && name.as_bytes()[0].is_ascii_lowercase() {
                Ok(())
            } else {
                Err(DNS1035_LABEL_MSG.into())
            }
        }
    }
}

/// `.metadata` of an object, if it is a map.
pub fn metadata(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

/// `.metadata` of an object, created when missing (or replaced when not a map).
pub fn metadata_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    let map = obj.as_object_mut()?;
    let entry = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut()
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    metadata(obj)
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub fn name_of(obj: &Value) -> &str {
    meta_str(obj, "name")
}

pub fn labels_of(obj: &Value) -> Option<&Map<String, Value>> {
    metadata(obj)
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
}

pub fn finalizers_of(obj: &Value) -> Vec<String> {
    metadata(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

pub fn is_terminating(obj: &Value) -> bool {
    metadata(obj)
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|v| !v.is_null())
}

/// Value at a simple JSONPath-like dotted path (`.spec.replicas`, `spec.nodeName`,
/// `.metadata.labels.app`). Bracketed segments `['a.b']` / `[0]` are supported too.
pub fn get_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = obj;
    for seg in split_path(path) {
        cur = match seg {
            PathSeg::Key(k) => cur.get(k.as_str())?,
            PathSeg::Index(i) => cur.get(i)?,
        };
    }
    Some(cur)
}

/// Sets the value at a dotted path, creating intermediate maps.
pub fn set_path(obj: &mut Value, path: &str, value: Value) -> bool {
    let segs = split_path(path);
    let mut cur = obj;
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        match seg {
            PathSeg::Key(k) => {
                if !cur.is_object() {
                    if cur.is_null() {
                        *cur = Value::Object(Map::new());
                    } else {
                        return false;
                    }
                }
                let Some(map) = cur.as_object_mut() else {
                    return false;
                };
                if last {
                    map.insert(k.clone(), value);
                    return true;
                }
                cur = map.entry(k.clone()).or_insert(Value::Null);
            }
            PathSeg::Index(idx) => {
                let Some(arr) = cur.as_array_mut() else {
                    return false;
                };
                let Some(slot) = arr.get_mut(*idx) else {
                    return false;
                };
                if last {
                    *slot = value;
                    return true;
                }
                cur = slot;
            }
        }
    }
    false
}

#[derive(Debug, Clone, PartialEq)]
pub enum PathSeg {
    Key(String),
    Index(usize),
}

pub fn split_path(path: &str) -> Vec<PathSeg> {
    let mut out = Vec::new();
    let path = path.trim();
    let path = path
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(path);
    let mut chars = path.chars().peekable();
    let mut cur = String::new();
    while let Some(c) = chars.next() {
        match c {
            '.' => {
                if !cur.is_empty() {
                    out.push(PathSeg::Key(std::mem::take(&mut cur)));
                }
            }
            '[' => {
                if !cur.is_empty() {
                    out.push(PathSeg::Key(std::mem::take(&mut cur)));
                }
                let mut inner = String::new();
                for c2 in chars.by_ref() {
                    if c2 == ']' {
                        break;
                    }
                    inner.push(c2);
                }
                let inner = inner.trim();
                if let Some(quoted) = inner
                    .strip_prefix('\'')
                    .and_then(|s| s.strip_suffix('\''))
                    .or_else(|| inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')))
                {
                    out.push(PathSeg::Key(quoted.to_string()));
                } else if let Ok(i) = inner.parse::<usize>() {
                    out.push(PathSeg::Index(i));
                } else {
                    out.push(PathSeg::Key(inner.to_string()));
                }
            }
            // `\.` is a dot inside a key (a label such as `crr.apps.kruise.io/node-name`).
            '\\' => match chars.next() {
                Some(escaped) => cur.push(escaped),
                None => cur.push(c),
            },
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(PathSeg::Key(cur));
    }
    out
}

/// `duration.HumanDuration` from apimachinery: how `kubectl get` renders ages.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    let minutes = secs / 60;
    let hours = secs / 3600;
    if secs < 60 * 2 {
        return format!("{secs}s");
    }
    if minutes < 10 {
        let s = secs % 60;
        if s == 0 {
            return format!("{minutes}m");
        }
        return format!("{minutes}m{s}s");
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            return format!("{hours}h");
        }
        return format!("{hours}h{m}m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            return format!("{}d", hours / 24);
        }
        return format!("{}d{}h", hours / 24, h);
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            return format!("{}y", hours / 24 / 365);
        }
        return format!("{}y{}d", hours / 24 / 365, dy);
    }
    format!("{}y", hours / 24 / 365)
}

/// Age of an RFC 3339 timestamp, rendered like kubectl.
pub fn age(ts: &str) -> String {
    match parse_time(ts) {
        Some(t) => {
            let secs = jiff::Timestamp::now().as_second() - t.as_second();
            human_duration(secs)
        }
        None => "<unknown>".into(),
    }
}

/// The `status.conditions` entry of type `ty`, if any.
pub fn condition<'a>(obj: &'a Value, ty: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
}

/// Whether condition `ty` has status `status` ("True", "False").
pub fn condition_is(obj: &Value, ty: &str, status: &str) -> bool {
    condition(obj, ty)
        .and_then(|c| c.get("status"))
        .and_then(Value::as_str)
        == Some(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_escaped_dot_stays_in_the_key() {
        assert_eq!(
            split_path(r".metadata.labels.crr\.apps\.kruise\.io/node-name"),
            [
                PathSeg::Key("metadata".into()),
                PathSeg::Key("labels".into()),
                PathSeg::Key("crr.apps.kruise.io/node-name".into()),
            ]
        );
    }

    #[test]
    fn names() {
        assert!(validate_name("a.b-c", NameRule::Dns1123Subdomain).is_ok());
        assert!(validate_name("A", NameRule::Dns1123Subdomain).is_err());
        assert!(validate_name("a.b", NameRule::Dns1123Label).is_err());
        assert!(validate_name("1abc", NameRule::Dns1035Label).is_err());
        assert!(validate_name("-a", NameRule::Dns1123Subdomain).is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(119), "119s");
        assert_eq!(human_duration(125), "2m5s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(10 * 3600), "10h");
        assert_eq!(human_duration(3 * 86400), "3d");
    }

    #[test]
    fn paths() {
        let v = serde_json::json!({"spec": {"a": [1, {"b": 2}]}, "metadata": {"labels": {"x.y/z": "v"}}});
        assert_eq!(get_path(&v, ".spec.a[1].b"), Some(&serde_json::json!(2)));
        assert_eq!(
            get_path(&v, ".metadata.labels['x.y/z']"),
            Some(&serde_json::json!("v"))
        );
        let mut w = serde_json::json!({});
        assert!(set_path(&mut w, ".spec.replicas", serde_json::json!(3)));
        assert_eq!(w, serde_json::json!({"spec": {"replicas": 3}}));
    }
}
