//! Decoding of the Kubernetes protobuf envelope for the few kinds kubectl >= 1.32
//! sends as protobuf from its typed clients (`kubectl create namespace|configmap|
//! secret|serviceaccount`), and the DeleteOptions client-go's typed clients (helm's release
//! storage) send with a delete. Other kinds get 415 UnsupportedMediaType.
//!
//! Field numbers follow `k8s.io/api/*/generated.proto` and
//! `k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto`.

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult};

const MAGIC: &[u8] = b"k8s\0";

#[derive(Clone, Copy)]
enum Kind {
    Str,
    Int,
    Bool,
    Msg(&'static [Field]),
    RepeatedStr,
    RepeatedMsg(&'static [Field]),
    MapStr,
    MapBytes,
}

type Field = (u64, &'static str, Kind);

const OWNER_REFERENCE: &[Field] = &[
    (1, "kind", Kind::Str),
    (3, "name", Kind::Str),
    (4, "uid", Kind::Str),
    (5, "apiVersion", Kind::Str),
    (6, "controller", Kind::Bool),
    (7, "blockOwnerDeletion", Kind::Bool),
];

const OBJECT_META: &[Field] = &[
    (1, "name", Kind::Str),
    (2, "generateName", Kind::Str),
    (3, "namespace", Kind::Str),
    (5, "uid", Kind::Str),
    (6, "resourceVersion", Kind::Str),
    (7, "generation", Kind::Int),
    (11, "labels", Kind::MapStr),
    (12, "annotations", Kind::MapStr),
    (13, "ownerReferences", Kind::RepeatedMsg(OWNER_REFERENCE)),
    (14, "finalizers", Kind::RepeatedStr),
];

const CONFIG_MAP: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "data", Kind::MapStr),
    (3, "binaryData", Kind::MapBytes),
    (4, "immutable", Kind::Bool),
];

const SECRET: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "data", Kind::MapBytes),
    (3, "type", Kind::Str),
    (4, "stringData", Kind::MapStr),
    (5, "immutable", Kind::Bool),
];

const NAMESPACE_SPEC: &[Field] = &[(1, "finalizers", Kind::RepeatedStr)];
const NAMESPACE_STATUS: &[Field] = &[(1, "phase", Kind::Str)];
const NAMESPACE: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(NAMESPACE_SPEC)),
    (3, "status", Kind::Msg(NAMESPACE_STATUS)),
];

const LOCAL_OBJECT_REFERENCE: &[Field] = &[(1, "name", Kind::Str)];
const SERVICE_ACCOUNT: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (
        3,
        "imagePullSecrets",
        Kind::RepeatedMsg(LOCAL_OBJECT_REFERENCE),
    ),
    (4, "automountServiceAccountToken", Kind::Bool),
];

const PRECONDITIONS: &[Field] = &[(1, "uid", Kind::Str), (2, "resourceVersion", Kind::Str)];
const DELETE_OPTIONS: &[Field] = &[
    (1, "gracePeriodSeconds", Kind::Int),
    (2, "preconditions", Kind::Msg(PRECONDITIONS)),
    (3, "orphanDependents", Kind::Bool),
    (4, "propagationPolicy", Kind::Str),
    (5, "dryRun", Kind::RepeatedStr),
];

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

fn malformed() -> ApiError {
    ApiError::bad_request("the protobuf body could not be decoded")
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> ApiResult<u64> {
        let mut out = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos).ok_or_else(malformed)?;
            self.pos += 1;
            out |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err(malformed())
    }

    fn bytes(&mut self) -> ApiResult<&'a [u8]> {
        let len = usize::try_from(self.varint()?).map_err(|_| malformed())?;
        let end = self.pos.checked_add(len).ok_or_else(malformed)?;
        let s = self.buf.get(self.pos..end).ok_or_else(malformed)?;
        self.pos = end;
        Ok(s)
    }

    /// Next (field number, wire type), or None at the end.
    fn tag(&mut self) -> ApiResult<Option<(u64, u64)>> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let t = self.varint()?;
        Ok(Some((t >> 3, t & 7)))
    }

    fn skip(&mut self, wire: u64) -> ApiResult<()> {
        match wire {
            0 => self.varint().map(|_| ()),
            1 => {
                self.pos += 8;
                Ok(())
            }
            2 => self.bytes().map(|_| ()),
            5 => {
                self.pos += 4;
                Ok(())
            }
            _ => Err(malformed()),
        }
    }
}

fn utf8(b: &[u8]) -> ApiResult<String> {
    String::from_utf8(b.to_vec()).map_err(|_| malformed())
}

fn map_entry(b: &[u8], bytes_value: bool) -> ApiResult<(String, Value)> {
    let mut r = Reader { buf: b, pos: 0 };
    let mut key = String::new();
    let mut value = Value::String(String::new());
    while let Some((n, w)) = r.tag()? {
        match (n, w) {
            (1, 2) => key = utf8(r.bytes()?)?,
            (2, 2) => {
                let v = r.bytes()?;
                value = if bytes_value {
                    Value::String(base64::engine::general_purpose::STANDARD.encode(v))
                } else {
                    Value::String(utf8(v)?)
                };
            }
            (_, w) => r.skip(w)?,
        }
    }
    Ok((key, value))
}

fn decode_message(b: &[u8], schema: &[Field]) -> ApiResult<Value> {
    let mut r = Reader { buf: b, pos: 0 };
    let mut out = Map::new();
    while let Some((n, w)) = r.tag()? {
        let Some((_, name, kind)) = schema.iter().find(|(num, _, _)| *num == n) else {
            r.skip(w)?;
            continue;
        };
        let name = name.to_string();
        match (*kind, w) {
            (Kind::Str, 2) => {
                out.insert(name, Value::String(utf8(r.bytes()?)?));
            }
            (Kind::Int, 0) => {
                out.insert(name, json!(r.varint()? as i64));
            }
            (Kind::Bool, 0) => {
                out.insert(name, Value::Bool(r.varint()? != 0));
            }
            (Kind::Msg(s), 2) => {
                out.insert(name, decode_message(r.bytes()?, s)?);
            }
            (Kind::RepeatedStr, 2) => {
                let v = Value::String(utf8(r.bytes()?)?);
                push(&mut out, name, v);
            }
            (Kind::RepeatedMsg(s), 2) => {
                let v = decode_message(r.bytes()?, s)?;
                push(&mut out, name, v);
            }
            (Kind::MapStr, 2) | (Kind::MapBytes, 2) => {
                let (k, v) = map_entry(r.bytes()?, matches!(kind, Kind::MapBytes))?;
                let entry = out.entry(name).or_insert_with(|| Value::Object(Map::new()));
                if let Some(m) = entry.as_object_mut() {
                    m.insert(k, v);
                }
            }
            (_, w) => r.skip(w)?,
        }
    }
    Ok(Value::Object(out))
}

fn push(out: &mut Map<String, Value>, name: String, v: Value) {
    let entry = out.entry(name).or_insert_with(|| Value::Array(Vec::new()));
    if let Some(a) = entry.as_array_mut() {
        a.push(v);
    }
}

/// Decodes a `application/vnd.kubernetes.protobuf` body into the JSON object.
pub fn decode(body: &[u8]) -> ApiResult<Value> {
    let inner = body.strip_prefix(MAGIC).ok_or_else(malformed)?;
    let mut r = Reader { buf: inner, pos: 0 };
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    while let Some((n, w)) = r.tag()? {
        match (n, w) {
            (1, 2) => {
                let tm = r.bytes()?;
                let mut t = Reader { buf: tm, pos: 0 };
                while let Some((tn, tw)) = t.tag()? {
                    match (tn, tw) {
                        (1, 2) => api_version = utf8(t.bytes()?)?,
                        (2, 2) => kind = utf8(t.bytes()?)?,
                        (_, tw) => t.skip(tw)?,
                    }
                }
            }
            (2, 2) => raw = r.bytes()?,
            (_, w) => r.skip(w)?,
        }
    }
    let schema = match (api_version.as_str(), kind.as_str()) {
        ("v1", "ConfigMap") => CONFIG_MAP,
        ("v1", "Secret") => SECRET,
        ("v1", "Namespace") => NAMESPACE,
        ("v1", "ServiceAccount") => SERVICE_ACCOUNT,
        ("v1" | "meta.k8s.io/v1", "DeleteOptions") => DELETE_OPTIONS,
        _ => {
            return Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (protobuf is decoded only for v1 ConfigMap, Secret, Namespace, ServiceAccount and DeleteOptions; got {api_version} {kind})"
            )));
        }
    };
    let mut obj = decode_message(raw, schema)?;
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(api_version));
        m.insert("kind".into(), Value::String(kind));
    }
    Ok(obj)
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
        let v = decode(body).ok();
        assert_eq!(
            v.as_ref().and_then(|v| v.pointer("/metadata/name")),
            Some(&json!("foo"))
        );
        assert_eq!(
            v.as_ref().and_then(|v| v.pointer("/data/a")),
            Some(&json!("b"))
        );
        assert_eq!(
            v.as_ref().and_then(|v| v.get("kind")),
            Some(&json!("ConfigMap"))
        );
    }

    /// A length-delimited field: tag, length, bytes.
    fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3) | 2, u8::try_from(bytes.len()).unwrap()];
        out.extend_from_slice(bytes);
        out
    }

    #[test]
    fn decodes_client_go_delete_options() {
        // The shape client-go sends with a typed client's Delete (helm uninstall purging
        // its release Secret): grace period, a uid precondition, the propagation policy.
        let type_meta = [field(1, b"v1"), field(2, b"DeleteOptions")].concat();
        let options = [
            vec![0x08, 30],
            field(2, &field(1, b"u1")),
            field(4, b"Background"),
        ]
        .concat();
        let body = [b"k8s\0".to_vec(), field(1, &type_meta), field(2, &options)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(v["gracePeriodSeconds"], json!(30));
        assert_eq!(v["preconditions"]["uid"], json!("u1"));
        assert_eq!(v["propagationPolicy"], json!("Background"));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode(b"k8s\0\xff\xff\xff").is_err());
        assert!(decode(b"nope").is_err());
        assert!(decode(b"k8s\0\x12\x7f").is_err());
    }
}
