//! The SidecarSet content hashes (`kruise.io/sidecarset-hash` and
//! `kruise.io/sidecarset-hash-without-image`), computed as OpenKruise's
//! `pkg/control/sidecarcontrol/hash.go` does:
//!
//! `SafeEncodeString(hex(sha256(json.Marshal({"containers": [...], "initContainers": [...]}))))`
//!
//! where `initContainers` is present only when some init container is a native sidecar
//! (`restartPolicy: Always`), and then holds all of them. The "without image" variant blanks
//! every image first.
//!
//! Go's `json.Marshal` writes struct fields in declaration order (not sorted), always writes
//! non-pointer struct fields (`"resources":{}`, `"upgradeStrategy":{}`,
//! `"shareVolumePolicy":{}`) and non-`omitempty` scalars (`"name"`, `"containerPort"`, …),
//! and escapes `<`, `>`, `&`. [`go_sidecar_containers_json`] reproduces those bytes from the
//! field tables below (Kubernetes `k8s.io/api` v0.32, the version OpenKruise builds with), so
//! the hash equals OpenKruise's for the same (defaulted) SidecarSet.
//!
//! Resource quantities (`resources.limits/requests`, `resourceFieldRef.divisor`) are written in
//! Go's canonical form (`0.5` -> `500m`, `1.5Gi` -> `1536Mi`), as `resource.Quantity` marshals.
//!
//! Where equality is impossible or not attempted (documented differences):
//! * quantities beyond `int64` nano-units or with a decimal exponent above `E` are written
//!   as given;
//! * fields unknown to the tables (newer Kubernetes fields) are appended in sorted order,
//!   whereas Go would place them by declaration (or drop them if its `k8s.io/api` lacks them).
//!
//! The hash never decides anything on its own in kruise-rs beyond "updated or not", and pods
//! injected by OpenKruise carry OpenKruise's hash, which we compare as an opaque string.

use serde_json::Value;

use crate::api::SidecarContainer;
use kruise_compat::gojson::to_go_json;
use kruise_core::revision::safe_encode;

/// Why a hash could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum HashError {
    /// The containers did not serialize.
    #[error("encoding SidecarSet containers for hashing: {0}")]
    Encode(#[from] serde_json::Error),
}

/// `kruise.io/sidecarset-hash` of a SidecarSet with these containers.
pub fn sidecarset_hash(
    containers: &[SidecarContainer],
    init_containers: &[SidecarContainer],
) -> Result<String, HashError> {
    let encoded = encode(containers, init_containers, false)?;
    Ok(safe_encode(&sha256_hex(encoded.as_bytes())))
}

/// `kruise.io/sidecarset-hash-without-image`: the same with every image blanked.
pub fn sidecarset_hash_without_image(
    containers: &[SidecarContainer],
    init_containers: &[SidecarContainer],
) -> Result<String, HashError> {
    let encoded = encode(containers, init_containers, true)?;
    Ok(safe_encode(&sha256_hex(encoded.as_bytes())))
}

/// The exact bytes OpenKruise hashes: `{"containers":[…]}` or
/// `{"containers":[…],"initContainers":[…]}`.
pub fn hash_input(
    containers: &[SidecarContainer],
    init_containers: &[SidecarContainer],
    without_image: bool,
) -> Result<String, HashError> {
    encode(containers, init_containers, without_image)
}

fn encode(
    containers: &[SidecarContainer],
    init_containers: &[SidecarContainer],
    without_image: bool,
) -> Result<String, HashError> {
    let mut out = String::from("{\"containers\":");
    out.push_str(&go_sidecar_containers_json(containers, without_image)?);
    if init_containers
        .iter()
        .any(|c| crate::api::is_native_sidecar(&c.container))
    {
        out.push_str(",\"initContainers\":");
        out.push_str(&go_sidecar_containers_json(init_containers, without_image)?);
    }
    out.push('}');
    Ok(out)
}

/// A list of SidecarContainers as Go's `json.Marshal` writes it (`null` for an empty list,
/// as Go writes a nil slice).
pub fn go_sidecar_containers_json(
    containers: &[SidecarContainer],
    without_image: bool,
) -> Result<String, HashError> {
    if containers.is_empty() {
        return Ok("null".into());
    }
    let mut out = String::from("[");
    for (i, c) in containers.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let mut v = serde_json::to_value(c)?;
        if without_image && let Some(obj) = v.as_object_mut() {
            obj.remove("image");
        }
        write_struct(&mut out, &v, SIDECAR_CONTAINER);
    }
    out.push(']');
    Ok(out)
}

/// How a field is typed, for ordering its nested keys.
#[derive(Clone, Copy)]
enum Ty {
    /// Scalar, list of scalars or Go map (sorted keys): written as Go writes generic JSON.
    Leaf,
    /// A struct.
    Obj(&'static [Field]),
    /// A list of structs.
    List(&'static [Field]),
    /// A `resource.Quantity`.
    Quantity,
    /// A `ResourceList` (map of quantities, sorted keys).
    Quantities,
}

/// What Go writes when the field is absent from our JSON.
#[derive(Clone, Copy, PartialEq)]
enum Zero {
    /// Omitted (`omitempty` or pointer).
    Omit,
    /// `""` (a string without `omitempty`).
    EmptyString,
    /// `{}` filled by its own always-fields (a non-pointer struct).
    Struct,
    /// `null` (a pointer without `omitempty`).
    Null,
    /// Omitted when absent or `null`, written as it is otherwise, even `0`, `false` or `""`
    /// (a pointer, or a value without `omitempty`).
    Kept,
}

struct Field {
    name: &'static str,
    ty: Ty,
    zero: Zero,
}

const fn f(name: &'static str) -> Field {
    Field {
        name,
        ty: Ty::Leaf,
        zero: Zero::Omit,
    }
}
/// A pointer leaf (`*bool`, `*int64`, `*string`) or a value without `omitempty`.
const fn kept(name: &'static str) -> Field {
    Field {
        name,
        ty: Ty::Leaf,
        zero: Zero::Kept,
    }
}
const fn always_str(name: &'static str) -> Field {
    Field {
        name,
        ty: Ty::Leaf,
        zero: Zero::EmptyString,
    }
}
const fn obj(name: &'static str, fields: &'static [Field]) -> Field {
    Field {
        name,
        ty: Ty::Obj(fields),
        zero: Zero::Omit,
    }
}
const fn strukt(name: &'static str, fields: &'static [Field]) -> Field {
    Field {
        name,
        ty: Ty::Obj(fields),
        zero: Zero::Struct,
    }
}
const fn list(name: &'static str, fields: &'static [Field]) -> Field {
    Field {
        name,
        ty: Ty::List(fields),
        zero: Zero::Omit,
    }
}

const LOCAL_OBJECT_REF_OPTIONAL: &[Field] = &[f("name"), kept("optional")];
const KEY_SELECTOR: &[Field] = &[f("name"), always_str("key"), kept("optional")];
const OBJECT_FIELD_SELECTOR: &[Field] = &[f("apiVersion"), always_str("fieldPath")];
const RESOURCE_FIELD_SELECTOR: &[Field] = &[
    f("containerName"),
    always_str("resource"),
    Field {
        name: "divisor",
        ty: Ty::Quantity,
        zero: Zero::Omit,
    },
];
const ENV_VAR_SOURCE: &[Field] = &[
    obj("fieldRef", OBJECT_FIELD_SELECTOR),
    obj("resourceFieldRef", RESOURCE_FIELD_SELECTOR),
    obj("configMapKeyRef", KEY_SELECTOR),
    obj("secretKeyRef", KEY_SELECTOR),
];
const ENV_VAR: &[Field] = &[
    always_str("name"),
    f("value"),
    obj("valueFrom", ENV_VAR_SOURCE),
];
const ENV_FROM: &[Field] = &[
    f("prefix"),
    obj("configMapRef", LOCAL_OBJECT_REF_OPTIONAL),
    obj("secretRef", LOCAL_OBJECT_REF_OPTIONAL),
];
const CONTAINER_PORT: &[Field] = &[
    f("name"),
    f("hostPort"),
    kept("containerPort"),
    f("protocol"),
    f("hostIP"),
];
const RESOURCE_CLAIM: &[Field] = &[always_str("name"), f("request")];
const RESOURCES: &[Field] = &[
    Field {
        name: "limits",
        ty: Ty::Quantities,
        zero: Zero::Omit,
    },
    Field {
        name: "requests",
        ty: Ty::Quantities,
        zero: Zero::Omit,
    },
    list("claims", RESOURCE_CLAIM),
];
const RESIZE_POLICY: &[Field] = &[always_str("resourceName"), always_str("restartPolicy")];
const VOLUME_MOUNT: &[Field] = &[
    always_str("name"),
    f("readOnly"),
    kept("recursiveReadOnly"),
    always_str("mountPath"),
    f("subPath"),
    kept("mountPropagation"),
    f("subPathExpr"),
];
const VOLUME_DEVICE: &[Field] = &[always_str("name"), always_str("devicePath")];
const EXEC: &[Field] = &[f("command")];
const HTTP_HEADER: &[Field] = &[always_str("name"), always_str("value")];
const HTTP_GET: &[Field] = &[
    f("path"),
    kept("port"),
    f("host"),
    f("scheme"),
    list("httpHeaders", HTTP_HEADER),
];
const TCP_SOCKET: &[Field] = &[kept("port"), f("host")];
const GRPC: &[Field] = &[
    kept("port"),
    Field {
        name: "service",
        ty: Ty::Leaf,
        zero: Zero::Null,
    },
];
const SLEEP: &[Field] = &[kept("seconds")];
const PROBE: &[Field] = &[
    obj("exec", EXEC),
    obj("httpGet", HTTP_GET),
    obj("tcpSocket", TCP_SOCKET),
    obj("grpc", GRPC),
    f("initialDelaySeconds"),
    f("timeoutSeconds"),
    f("periodSeconds"),
    f("successThreshold"),
    f("failureThreshold"),
    kept("terminationGracePeriodSeconds"),
];
const LIFECYCLE_HANDLER: &[Field] = &[
    obj("exec", EXEC),
    obj("httpGet", HTTP_GET),
    obj("tcpSocket", TCP_SOCKET),
    obj("sleep", SLEEP),
];
const LIFECYCLE: &[Field] = &[
    obj("postStart", LIFECYCLE_HANDLER),
    obj("preStop", LIFECYCLE_HANDLER),
    kept("stopSignal"),
];
const CAPABILITIES: &[Field] = &[f("add"), f("drop")];
const SE_LINUX: &[Field] = &[f("user"), f("role"), f("type"), f("level")];
const WINDOWS: &[Field] = &[
    kept("gmsaCredentialSpecName"),
    kept("gmsaCredentialSpec"),
    kept("runAsUserName"),
    kept("hostProcess"),
];
const PROFILE: &[Field] = &[always_str("type"), kept("localhostProfile")];
const SECURITY_CONTEXT: &[Field] = &[
    obj("capabilities", CAPABILITIES),
    kept("privileged"),
    obj("seLinuxOptions", SE_LINUX),
    obj("windowsOptions", WINDOWS),
    kept("runAsUser"),
    kept("runAsGroup"),
    kept("runAsNonRoot"),
    kept("readOnlyRootFilesystem"),
    kept("allowPrivilegeEscalation"),
    kept("procMount"),
    obj("seccompProfile", PROFILE),
    obj("appArmorProfile", PROFILE),
];
const UPGRADE_STRATEGY: &[Field] = &[f("upgradeType"), f("hotUpgradeEmptyImage")];
const SHARE_VOLUME_POLICY: &[Field] = &[f("type")];
const SOURCE_CONTAINER_NAME: &[Field] = &[obj("fieldRef", OBJECT_FIELD_SELECTOR)];
const TRANSFER_ENV: &[Field] = &[
    f("sourceContainerName"),
    obj("sourceContainerNameFrom", SOURCE_CONTAINER_NAME),
    f("envName"),
    f("envNames"),
];
const RESOURCE_EXPRS: &[Field] = &[f("cpu"), f("memory")];
const RESOURCES_EXPR: &[Field] = &[
    obj("limits", RESOURCE_EXPRS),
    obj("requests", RESOURCE_EXPRS),
];
const RESOURCES_POLICY: &[Field] = &[
    always_str("targetContainersMode"),
    f("targetContainersNameRegex"),
    strukt("resourcesExpr", RESOURCES_EXPR),
];

/// `v1beta1.SidecarContainer`: the inline `corev1.Container` then the sidecar fields.
const SIDECAR_CONTAINER: &[Field] = &[
    always_str("name"),
    f("image"),
    f("command"),
    f("args"),
    f("workingDir"),
    list("ports", CONTAINER_PORT),
    list("envFrom", ENV_FROM),
    list("env", ENV_VAR),
    strukt("resources", RESOURCES),
    list("resizePolicy", RESIZE_POLICY),
    kept("restartPolicy"),
    list("volumeMounts", VOLUME_MOUNT),
    list("volumeDevices", VOLUME_DEVICE),
    obj("livenessProbe", PROBE),
    obj("readinessProbe", PROBE),
    obj("startupProbe", PROBE),
    obj("lifecycle", LIFECYCLE),
    f("terminationMessagePath"),
    f("terminationMessagePolicy"),
    f("imagePullPolicy"),
    obj("securityContext", SECURITY_CONTEXT),
    f("stdin"),
    f("stdinOnce"),
    f("tty"),
    f("podInjectPolicy"),
    strukt("upgradeStrategy", UPGRADE_STRATEGY),
    strukt("shareVolumePolicy", SHARE_VOLUME_POLICY),
    obj("shareVolumeDevicePolicy", SHARE_VOLUME_POLICY),
    list("transferEnv", TRANSFER_ENV),
    obj("resourcesPolicy", RESOURCES_POLICY),
];

fn write_field_value(out: &mut String, v: &Value, ty: Ty) {
    match (ty, v) {
        (Ty::Obj(fields), Value::Object(_)) => write_struct(out, v, fields),
        (Ty::List(fields), Value::Array(items)) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if item.is_object() {
                    write_struct(out, item, fields);
                } else {
                    out.push_str(&to_go_json(item));
                }
            }
            out.push(']');
        }
        (Ty::Quantity, Value::String(q)) => {
            out.push_str(&to_go_json(&Value::String(canonical_quantity(q))));
        }
        (Ty::Quantities, Value::Object(map)) => {
            let canonical: serde_json::Map<String, Value> = map
                .iter()
                .map(|(k, v)| {
                    let v = match v {
                        Value::String(q) => Value::String(canonical_quantity(q)),
                        other => other.clone(),
                    };
                    (k.clone(), v)
                })
                .collect();
            out.push_str(&to_go_json(&Value::Object(canonical)));
        }
        _ => out.push_str(&to_go_json(v)),
    }
}

/// A quantity as Go's `resource.Quantity` marshals it after decoding
/// ([`kruise_compat::quantity::canonical_quantity`]); the input unchanged when it is
/// not a quantity.
pub fn canonical_quantity(q: &str) -> String {
    kruise_compat::quantity::canonical_quantity(q).unwrap_or_else(|| q.to_string())
}

/// Whether Go's `omitempty` leaves `value` out of a field of type `ty`: the zero values of
/// scalars, slices and maps (a struct pointer to `{}` is written).
fn go_omits(value: &Value, ty: Ty) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(entries) => entries.is_empty() && matches!(ty, Ty::Quantities),
    }
}

fn write_struct(out: &mut String, v: &Value, fields: &'static [Field]) {
    let empty = serde_json::Map::new();
    let map = v.as_object().unwrap_or(&empty);
    out.push('{');
    let mut first = true;
    let mut sep = |out: &mut String| {
        if !first {
            out.push(',');
        }
        first = false;
    };
    for field in fields {
        // Go decodes `null` as the zero value, and `omitempty` leaves zero values out
        // (found by sidecarset/tests/openkruise_oracle.rs).
        let present = map.get(field.name).filter(|value| {
            !(value.is_null() || (field.zero == Zero::Omit && go_omits(value, field.ty)))
        });
        match present {
            Some(value) => {
                sep(out);
                out.push_str(&to_go_json(&Value::String(field.name.into())));
                out.push(':');
                write_field_value(out, value, field.ty);
            }
            None => {
                let zero = match field.zero {
                    Zero::Omit | Zero::Kept => continue,
                    Zero::EmptyString => Value::String(String::new()),
                    Zero::Struct => Value::Object(serde_json::Map::new()),
                    Zero::Null => Value::Null,
                };
                sep(out);
                out.push_str(&to_go_json(&Value::String(field.name.into())));
                out.push(':');
                write_field_value(out, &zero, field.ty);
            }
        }
    }
    // Fields our tables do not know (newer Kubernetes) follow in sorted order.
    let mut unknown: Vec<&String> = map
        .keys()
        .filter(|k| !fields.iter().any(|f| f.name == k.as_str()))
        .collect();
    unknown.sort();
    for k in unknown {
        if let Some(value) = map.get(k) {
            sep(out);
            out.push_str(&to_go_json(&Value::String(k.clone())));
            out.push(':');
            out.push_str(&to_go_json(value));
        }
    }
    out.push('}');
}

/// Lower-case hex of the SHA-256 of `data` (Go's `fmt.Sprintf("%x", sha256.Sum256(data))`).
pub fn sha256_hex(data: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, data)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sc(v: Value) -> SidecarContainer {
        serde_json::from_value(v).unwrap()
    }

    /// Go's `omitempty` and `null` decoding, found by the differential test against
    /// OpenKruise (tests/openkruise_oracle.rs): zero values of omitempty fields are not
    /// hashed, pointers keep theirs.
    #[test]
    fn zero_values_are_hashed_as_go_writes_them() {
        let c = sc(json!({"name": "c", "args": [], "securityContext": null,
            "resources": {"requests": {}},
            "startupProbe": {"failureThreshold": 0, "terminationGracePeriodSeconds": 0}}));
        assert_eq!(
            hash_input(&[c], &[], false).unwrap(),
            r#"{"containers":[{"name":"c","resources":{},"startupProbe":{"terminationGracePeriodSeconds":0},"upgradeStrategy":{},"shareVolumePolicy":{}}]}"#
        );
    }

    #[test]
    fn sha256_vectors() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            sha256_hex(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        let long = vec![b'a'; 1000];
        assert_eq!(
            sha256_hex(&long),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"
        );
    }

    #[test]
    fn quantities_are_canonical_as_go_writes_them() {
        for (given, want) in [
            ("100m", "100m"),
            ("0.5", "500m"),
            ("0.1", "100m"),
            ("1.5", "1500m"),
            ("1000m", "1"),
            ("1500", "1500"),
            ("2k", "2k"),
            ("2000", "2k"),
            ("128Mi", "128Mi"),
            ("1.5Gi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("1.5Ki", "1536"),
            ("512", "512"),
            ("1e3", "1e3"),
            ("1000e0", "1e3"),
            ("0", "0"),
            ("junk", "junk"),
        ] {
            assert_eq!(canonical_quantity(given), want, "{given}");
        }
        let c =
            sc(json!({"name": "c", "resources": {"requests": {"memory": "1.5Gi", "cpu": "0.5"}}}));
        assert_eq!(
            hash_input(&[c], &[], true).unwrap(),
            r#"{"containers":[{"name":"c","resources":{"requests":{"cpu":"500m","memory":"1536Mi"}},"upgradeStrategy":{},"shareVolumePolicy":{}}]}"#
        );
    }

    #[test]
    fn go_bytes_have_struct_order_and_artefacts() {
        let c = sc(json!({"name": "c", "image": "i", "env": [{"value": "v", "name": "A"}]}));
        assert_eq!(
            hash_input(&[c], &[], false).unwrap(),
            r#"{"containers":[{"name":"c","image":"i","env":[{"name":"A","value":"v"}],"resources":{},"upgradeStrategy":{},"shareVolumePolicy":{}}]}"#
        );
    }

    // Expected values from OpenKruise's pkg/control/sidecarcontrol/hash_test.go.
    #[test]
    fn hashes_equal_openkruise_test_vectors() {
        let c = sc(json!({"name": "container1", "image": "test-image"}));
        let plain_init = c.clone();
        let native_init =
            sc(json!({"name": "container1", "image": "test-image", "restartPolicy": "Always"}));
        assert_eq!(
            sidecarset_hash(std::slice::from_ref(&c), &[]).unwrap(),
            "w26c4x8fz245642fdv499b464248f974xddx4x55z5dw55bc6x66464fxz77dc78"
        );
        assert_eq!(
            sidecarset_hash(std::slice::from_ref(&c), std::slice::from_ref(&plain_init)).unwrap(),
            "w26c4x8fz245642fdv499b464248f974xddx4x55z5dw55bc6x66464fxz77dc78"
        );
        assert_eq!(
            sidecarset_hash(std::slice::from_ref(&c), std::slice::from_ref(&native_init)).unwrap(),
            "4xwx4d4844vd4v9x79wb4xbxf4xb29475cc4446v8cz2c2f2f5c5bw448vd42z8w"
        );
        assert_eq!(
            sidecarset_hash_without_image(
                std::slice::from_ref(&c),
                std::slice::from_ref(&plain_init)
            )
            .unwrap(),
            "8wzddb4dvv9c6x8zdc77z4z75987424f457dfv6724ddw6zbdx467wz5x24fc759"
        );
        assert_eq!(
            sidecarset_hash_without_image(
                std::slice::from_ref(&c),
                std::slice::from_ref(&native_init)
            )
            .unwrap(),
            "5725fw8bwbx249bw57v5892c847dzf48bww9zb7c86xb95264fdz26654847b2c8"
        );
        let mut changed = c;
        changed.container.image = Some("new-image".into());
        assert_ne!(
            sidecarset_hash(std::slice::from_ref(&changed), &[]).unwrap(),
            "w26c4x8fz245642fdv499b464248f974xddx4x55z5dw55bc6x66464fxz77dc78"
        );
    }
}
