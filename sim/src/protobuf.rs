//! Decoding of the Kubernetes protobuf envelope (`application/vnd.kubernetes.protobuf`),
//! which client-go's typed clients and kubectl's `create` commands send, for every built-in
//! kind of the groups in `proto/` (see its README): the envelope's `runtime.Unknown` names
//! the kind, the descriptors compiled from Kubernetes' `.proto` files give its message,
//! and the message becomes the JSON object kube-apiserver would have decoded, with
//! apimachinery's own JSON forms (Time, MicroTime, Duration, Quantity, IntOrString,
//! RawExtension, FieldsV1) and the zero values Go's JSON leaves out left out.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use base64::Engine;
use prost_reflect::{
    DescriptorPool, DynamicMessage, MapKey, MessageDescriptor, ReflectMessage, Value as Proto,
};
use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult};

const MAGIC: &[u8] = b"k8s\0";
const DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/k8s_descriptors.bin"));
const ZERO_OMITTED: &str = include_str!("../proto/zero-omitted.txt");

const META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1";

/// The descriptors, and what `zero-omitted.txt` adds to them.
struct Schema {
    pool: DescriptorPool,
    /// `message.field` scalars whose zero value Go's JSON omits.
    omit_zero: HashSet<String>,
    /// `message.field` → its JSON name, where that differs.
    renames: HashMap<String, String>,
}

static SCHEMA: LazyLock<Option<Schema>> = LazyLock::new(|| {
    let pool = DescriptorPool::decode(DESCRIPTORS).ok()?;
    let mut omit_zero = HashSet::new();
    let mut renames = HashMap::new();
    for line in ZERO_OMITTED.lines() {
        match line.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["omit", field] => {
                omit_zero.insert((*field).to_string());
            }
            ["rename", field, name] => {
                renames.insert((*field).to_string(), (*name).to_string());
            }
            _ => {}
        }
    }
    Some(Schema {
        pool,
        omit_zero,
        renames,
    })
});

fn malformed() -> ApiError {
    ApiError::bad_request("the protobuf body could not be decoded")
}

fn unknown_kind(api_version: &str, kind: &str) -> ApiError {
    ApiError::unsupported_media_type(format!(
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (protobuf is decoded for the built-in kinds only; got {api_version} {kind})"
    ))
}

/// The message of `kind` in `apiVersion`: `apps/v1` is package `k8s.io.api.apps.v1`
/// (a group's first label), the core group `k8s.io.api.core.v1`, and meta's kinds
/// (DeleteOptions, Status) apimachinery's.
fn message_for(pool: &DescriptorPool, api_version: &str, kind: &str) -> Option<MessageDescriptor> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let package = match group {
        "" => format!("k8s.io.api.core.{version}"),
        "meta.k8s.io" => META.to_string(),
        g => format!("k8s.io.api.{}.{version}", g.split('.').next().unwrap_or(g)),
    };
    pool.get_message_by_name(&format!("{package}.{kind}"))
        .or_else(|| pool.get_message_by_name(&format!("{META}.{kind}")))
}

/// The envelope: (apiVersion, kind, raw message).
fn envelope(body: &[u8]) -> ApiResult<(String, String, Vec<u8>)> {
    let schema = SCHEMA.as_ref().ok_or_else(malformed)?;
    let inner = body.strip_prefix(MAGIC).ok_or_else(malformed)?;
    let unknown = schema
        .pool
        .get_message_by_name("k8s.io.apimachinery.pkg.runtime.Unknown")
        .ok_or_else(malformed)?;
    let msg = DynamicMessage::decode(unknown, inner).map_err(|_| malformed())?;
    let text = |m: &DynamicMessage, f: &str| {
        m.get_field_by_name(f)
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    };
    let type_meta = msg
        .get_field_by_name("typeMeta")
        .and_then(|v| v.as_message().cloned())
        .ok_or_else(malformed)?;
    let raw = msg
        .get_field_by_name("raw")
        .and_then(|v| v.as_bytes().map(|b| b.to_vec()))
        .unwrap_or_default();
    Ok((
        text(&type_meta, "apiVersion"),
        text(&type_meta, "kind"),
        raw,
    ))
}

/// Decodes a `application/vnd.kubernetes.protobuf` body into the JSON object.
pub fn decode(body: &[u8]) -> ApiResult<Value> {
    let (api_version, kind, raw) = envelope(body)?;
    let schema = SCHEMA.as_ref().ok_or_else(malformed)?;
    let desc = message_for(&schema.pool, &api_version, &kind)
        .ok_or_else(|| unknown_kind(&api_version, &kind))?;
    let msg = DynamicMessage::decode(desc, raw.as_slice()).map_err(|_| malformed())?;
    let mut obj = message_json(schema, &msg);
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(api_version));
        m.insert("kind".into(), Value::String(kind));
    }
    Ok(obj)
}

fn go_time(seconds: i64, nanos: i64, micro: bool) -> Value {
    if seconds == 0 && nanos == 0 {
        return Value::Null;
    }
    let Ok(t) = jiff::Timestamp::new(seconds, if micro { nanos as i32 } else { 0 }) else {
        return Value::Null;
    };
    let format = if micro {
        "%Y-%m-%dT%H:%M:%S%.6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    json!(t.strftime(format).to_string())
}

/// Go's `time.Duration.String()`: `1h2m3.5s`, `150ms`, `0s`.
fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    let trim = |whole: u64, frac: u64, digits: usize, unit: &str| {
        let f = format!("{frac:0digits$}");
        let f = f.trim_end_matches('0');
        if f.is_empty() {
            format!("{whole}{unit}")
        } else {
            format!("{whole}.{f}{unit}")
        }
    };
    if n < 1_000 {
        return format!("{sign}{n}ns");
    }
    if n < 1_000_000 {
        return format!("{sign}{}", trim(n / 1_000, n % 1_000, 3, "µs"));
    }
    if n < 1_000_000_000 {
        return format!("{sign}{}", trim(n / 1_000_000, n % 1_000_000, 6, "ms"));
    }
    let secs = n / 1_000_000_000;
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let seconds = trim(s, n % 1_000_000_000, 9, "s");
    match (h, m) {
        (0, 0) => format!("{sign}{seconds}"),
        (0, m) => format!("{sign}{m}m{seconds}"),
        (h, m) => format!("{sign}{h}h{m}m{seconds}"),
    }
}

fn int_field(m: &DynamicMessage, name: &str) -> i64 {
    match m.get_field_by_name(name).as_deref() {
        Some(Proto::I64(n)) => *n,
        Some(Proto::I32(n)) => i64::from(*n),
        _ => 0,
    }
}

/// Embedded JSON (RawExtension, FieldsV1): the object, or the bytes base64-encoded when
/// they are not JSON.
fn raw_json(m: &DynamicMessage, field: &str) -> Value {
    let bytes = m
        .get_field_by_name(field)
        .and_then(|v| v.as_bytes().map(|b| b.to_vec()))
        .unwrap_or_default();
    if bytes.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| json!(base64::engine::general_purpose::STANDARD.encode(&bytes)))
}

fn message_json(schema: &Schema, msg: &DynamicMessage) -> Value {
    let desc = msg.descriptor();
    match desc.full_name() {
        "k8s.io.apimachinery.pkg.apis.meta.v1.Time" => {
            go_time(int_field(msg, "seconds"), int_field(msg, "nanos"), false)
        }
        "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime" => {
            go_time(int_field(msg, "seconds"), int_field(msg, "nanos"), true)
        }
        "k8s.io.apimachinery.pkg.apis.meta.v1.Duration" => {
            json!(go_duration(int_field(msg, "duration")))
        }
        "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1" => raw_json(msg, "Raw"),
        "k8s.io.apimachinery.pkg.runtime.RawExtension" => raw_json(msg, "raw"),
        "k8s.io.apimachinery.pkg.api.resource.Quantity" => msg
            .get_field_by_name("string")
            .and_then(|v| v.as_str().map(|s| json!(s)))
            .unwrap_or(Value::Null),
        "k8s.io.apimachinery.pkg.util.intstr.IntOrString" => {
            if int_field(msg, "type") == 1 {
                msg.get_field_by_name("strVal")
                    .and_then(|v| v.as_str().map(|s| json!(s)))
                    .unwrap_or_else(|| json!(""))
            } else {
                json!(int_field(msg, "intVal"))
            }
        }
        message => {
            let mut out = Map::new();
            for (field, value) in msg.fields() {
                let key = format!("{message}.{}", field.name());
                let v = value_json(schema, value);
                let zero =
                    matches!(&v, Value::Null) || (schema.omit_zero.contains(&key) && is_zero(&v));
                if zero {
                    continue;
                }
                let name = schema
                    .renames
                    .get(&key)
                    .cloned()
                    .unwrap_or_else(|| field.name().to_string());
                out.insert(name, v);
            }
            Value::Object(out)
        }
    }
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

fn value_json(schema: &Schema, v: &Proto) -> Value {
    match v {
        Proto::Bool(b) => json!(b),
        Proto::I32(n) => json!(n),
        Proto::I64(n) => json!(n),
        Proto::U32(n) => json!(n),
        Proto::U64(n) => json!(n),
        Proto::F32(n) => json!(n),
        Proto::F64(n) => json!(n),
        Proto::String(s) => json!(s),
        Proto::Bytes(b) => json!(base64::engine::general_purpose::STANDARD.encode(b)),
        Proto::EnumNumber(n) => json!(n),
        Proto::Message(m) => message_json(schema, m),
        Proto::List(items) => Value::Array(items.iter().map(|i| value_json(schema, i)).collect()),
        Proto::Map(entries) => {
            let mut out = Map::new();
            for (k, v) in entries {
                let key = match k {
                    MapKey::String(s) => s.clone(),
                    MapKey::Bool(b) => b.to_string(),
                    MapKey::I32(n) => n.to_string(),
                    MapKey::I64(n) => n.to_string(),
                    MapKey::U32(n) => n.to_string(),
                    MapKey::U64(n) => n.to_string(),
                };
                out.insert(key, value_json(schema, v));
            }
            Value::Object(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_kubectl_configmap() {
        // What kubectl 1.33 sends for `kubectl create configmap foo --from-literal=a=b`.
        let body: &[u8] = &[
            0x6b, 0x38, 0x73, 0x00, 0x0a, 0x0f, 0x0a, 0x02, 0x76, 0x31, 0x12, 0x09, 0x43, 0x6f,
            0x6e, 0x66, 0x69, 0x67, 0x4d, 0x61, 0x70, 0x12, 0x1d, 0x0a, 0x13, 0x0a, 0x03, 0x66,
            0x6f, 0x6f, 0x12, 0x00, 0x1a, 0x00, 0x22, 0x00, 0x2a, 0x00, 0x32, 0x00, 0x38, 0x00,
            0x42, 0x00, 0x12, 0x06, 0x0a, 0x01, 0x61, 0x12, 0x01, 0x62, 0x1a, 0x00, 0x22, 0x00,
        ];
        let v = decode(body).unwrap();
        // The zero values Go writes (generateName "", generation 0, an empty
        // creationTimestamp) are gone, as kube-apiserver's JSON has them.
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "foo"}, "data": {"a": "b"}})
        );
    }

    /// A length-delimited field: tag, length, bytes.
    fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3) | 2];
        let mut len = bytes.len();
        while len >= 0x80 {
            out.push((len as u8 & 0x7f) | 0x80);
            len >>= 7;
        }
        out.push(len as u8);
        out.extend_from_slice(bytes);
        out
    }

    fn varint(number: u8, value: u64) -> Vec<u8> {
        let mut out = vec![number << 3];
        let mut v = value;
        while v >= 0x80 {
            out.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
        out
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let type_meta = [field(1, api_version.as_bytes()), field(2, kind.as_bytes())].concat();
        [b"k8s\0".to_vec(), field(1, &type_meta), field(2, raw)].concat()
    }

    #[test]
    fn decodes_client_go_delete_options() {
        // The shape client-go sends with a typed client's Delete (helm uninstall purging
        // its release Secret): grace period, a uid precondition, the propagation policy.
        let options = [
            varint(1, 30),
            field(2, &field(1, b"u1")),
            field(4, b"Background"),
        ]
        .concat();
        let v = decode(&envelope("v1", "DeleteOptions", &options)).unwrap();
        assert_eq!(v["gracePeriodSeconds"], json!(30));
        assert_eq!(v["preconditions"]["uid"], json!("u1"));
        assert_eq!(v["propagationPolicy"], json!("Background"));
    }

    #[test]
    fn decodes_a_deployment_with_apimachinery_forms() {
        // A Deployment as client-go encodes it: replicas 0 kept (a pointer), a
        // hostNetwork false left out (omitempty), maxSurge as IntOrString, a cpu request
        // as Quantity, creationTimestamp as Time.
        let int_or_string = |ty: u64, int: u64, s: &str| {
            [varint(1, ty), varint(2, int), field(3, s.as_bytes())].concat()
        };
        let metadata = [
            field(1, b"web"),
            field(8, &[varint(1, 1_767_225_600), varint(2, 0)].concat()),
            field(11, &[field(1, b"app"), field(2, b"web")].concat()),
        ]
        .concat();
        let container = [
            field(1, b"c"),
            field(2, b"nginx:1.25"),
            field(
                8,
                &field(
                    2,
                    &[field(1, b"cpu"), field(2, &field(1, b"100m"))].concat(),
                ),
            ),
        ]
        .concat();
        let pod_spec = [field(2, &container), varint(11, 0)].concat();
        let template = [
            field(
                1,
                &field(11, &[field(1, b"app"), field(2, b"web")].concat()),
            ),
            field(2, &pod_spec),
        ]
        .concat();
        let strategy = [
            field(1, b"RollingUpdate"),
            field(
                2,
                &[
                    field(1, &int_or_string(1, 0, "25%")),
                    field(2, &int_or_string(0, 1, "")),
                ]
                .concat(),
            ),
        ]
        .concat();
        let spec = [
            varint(1, 0),
            field(2, &field(1, &[field(1, b"app"), field(2, b"web")].concat())),
            field(3, &template),
            field(4, &strategy),
        ]
        .concat();
        let body = envelope(
            "apps/v1",
            "Deployment",
            &[field(1, &metadata), field(2, &spec)].concat(),
        );
        let v = decode(&body).unwrap();
        assert_eq!(v["kind"], "Deployment");
        assert_eq!(v["metadata"]["creationTimestamp"], "2026-01-01T00:00:00Z");
        assert_eq!(v["spec"]["replicas"], 0);
        assert_eq!(
            v["spec"]["strategy"]["rollingUpdate"],
            json!({"maxUnavailable": "25%", "maxSurge": 1})
        );
        let pod = &v["spec"]["template"]["spec"];
        assert_eq!(pod["containers"][0]["resources"]["requests"]["cpu"], "100m");
        assert!(pod.get("hostNetwork").is_none(), "{pod}");
    }

    #[test]
    fn a_webhook_configuration_gets_its_json_names() {
        let webhook = [field(1, b"pods.example.com")].concat();
        let raw = [field(1, &field(1, b"hooks")), field(2, &webhook)].concat();
        let v = decode(&envelope(
            "admissionregistration.k8s.io/v1",
            "MutatingWebhookConfiguration",
            &raw,
        ))
        .unwrap();
        assert_eq!(v["webhooks"][0]["name"], "pods.example.com");
    }

    #[test]
    fn unknown_kinds_are_415_and_garbage_is_an_error_not_a_panic() {
        let err = decode(&envelope("example.com/v1", "Widget", &[])).unwrap_err();
        assert_eq!(err.code, 415);
        assert!(decode(b"k8s\0\xff\xff\xff").is_err());
        assert!(decode(b"nope").is_err());
        assert!(decode(b"k8s\0\x12\x7f").is_err());
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(150_000_000), "150ms");
        assert_eq!(go_duration(3_723_500_000_000), "1h2m3.5s");
        assert_eq!(go_duration(60_000_000_000), "1m0s");
        assert_eq!(go_duration(1_500), "1.5µs");
    }
}
