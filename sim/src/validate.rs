//! ObjectMeta validation every kind gets (apimachinery `ValidateObjectMeta`): label
//! keys and values, annotation keys and total size, ownerReferences, finalizer names.

use serde_json::Value;

use crate::error::{ApiError, ApiResult, StatusCause};
use crate::meta::{self, NameRule};
use crate::registry::ResourceDef;

const NAME_PART_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

fn name_part_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// `IsQualifiedName`: `[prefix/]name`, prefix a DNS-1123 subdomain, name <= 63.
fn qualified_name_errors(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        if p.is_empty() {
            errs.push("prefix part must be non-empty".to_string());
        } else if let Err(e) = meta::validate_name(p, NameRule::Dns1123Subdomain) {
            errs.push(format!("prefix part {e}"));
        }
    }
    if name.is_empty() {
        errs.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".into());
    } else if !name_part_ok(name) {
        errs.push(NAME_PART_MSG.into());
    }
    if key.matches('/').count() > 1 {
        errs.push("a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".into());
    }
    errs
}

fn invalid(field: &str, value: &str, detail: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: \"{value}\": {detail}"),
        field: field.into(),
    }
}

/// Validates the object's metadata; 422 Invalid with one cause per problem.
pub fn object_meta(def: &ResourceDef, obj: &Value) -> ApiResult<()> {
    let mut causes = Vec::new();
    let Some(m) = meta::metadata(obj) else {
        return Ok(());
    };
    if let Some(labels) = m.get("labels").and_then(Value::as_object) {
        for (k, v) in labels {
            for e in qualified_name_errors(k) {
                causes.push(invalid("metadata.labels", k, &e));
            }
            match v.as_str() {
                Some(val) if val.len() > 63 => causes.push(invalid(
                    "metadata.labels",
                    val,
                    "must be no more than 63 characters",
                )),
                Some(val) if !val.is_empty() && !name_part_ok(val) => {
                    causes.push(invalid("metadata.labels", val, LABEL_VALUE_MSG))
                }
                Some(_) | None => {}
            }
        }
    }
    if let Some(annotations) = m.get("annotations").and_then(Value::as_object) {
        let mut total = 0usize;
        for (k, v) in annotations {
            for e in qualified_name_errors(&k.to_lowercase()) {
                causes.push(invalid("metadata.annotations", k, &e));
            }
            total += k.len() + v.as_str().map_or(0, str::len);
        }
        if total > MAX_ANNOTATIONS_BYTES {
            causes.push(StatusCause {
                reason: "FieldValueTooLong".into(),
                message: format!("Too long: may not be more than {MAX_ANNOTATIONS_BYTES} bytes"),
                field: "metadata.annotations".into(),
            });
        }
    }
    if let Some(refs) = m.get("ownerReferences").and_then(Value::as_array) {
        let mut controllers = 0;
        for r in refs {
            for f in ["apiVersion", "kind", "name", "uid"] {
                if r.get(f).and_then(Value::as_str).unwrap_or("").is_empty() {
                    causes.push(invalid(
                        &format!("metadata.ownerReferences.{f}"),
                        "",
                        &format!("{f} must not be empty"),
                    ));
                }
            }
            if r.get("controller").and_then(Value::as_bool) == Some(true) {
                controllers += 1;
            }
        }
        if controllers > 1 {
            causes.push(StatusCause {
                reason: "FieldValueInvalid".into(),
                message: "Invalid value: \"\": Only one reference can have Controller set to true"
                    .into(),
                field: "metadata.ownerReferences".into(),
            });
        }
    }
    if let Some(finalizers) = m.get("finalizers").and_then(Value::as_array) {
        for f in finalizers.iter().filter_map(Value::as_str) {
            for e in qualified_name_errors(f) {
                causes.push(invalid("metadata.finalizers", f, &e));
            }
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(
            &def.group,
            &def.kind,
            meta::name_of(obj),
            causes,
        ))
    }
}

/// `Required value` at `field`, as apimachinery's `field.Required` reads.
pub(crate) fn required(field: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueRequired".into(),
        message: "Required value".into(),
        field: field.into(),
    }
}

fn duplicate(field: &str, value: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueDuplicate".into(),
        message: format!("Duplicate value: \"{value}\""),
        field: field.into(),
    }
}

fn not_found(field: &str, value: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueNotFound".into(),
        message: format!("Not found: \"{value}\""),
        field: field.into(),
    }
}

/// The structural pod-spec rules controllers most often trip over: containers
/// present, names valid and unique across all container lists, images set, volume
/// names unique, volume mounts referring to declared volumes, valid ports.
pub fn pod_spec(spec: &Value, prefix: &str, causes: &mut Vec<StatusCause>) {
    let containers = spec.get("containers").and_then(Value::as_array);
    if containers.is_none_or(|c| c.is_empty()) {
        causes.push(required(&format!("{prefix}.containers")));
    }
    let mut volumes: Vec<&str> = Vec::new();
    if let Some(vs) = spec.get("volumes").and_then(Value::as_array) {
        for (i, v) in vs.iter().enumerate() {
            let name = v.get("name").and_then(Value::as_str).unwrap_or("");
            let field = format!("{prefix}.volumes[{i}].name");
            if name.is_empty() {
                causes.push(required(&field));
            } else if let Err(e) = meta::validate_name(name, NameRule::Dns1123Label) {
                causes.push(invalid(&field, name, &e));
            } else if volumes.contains(&name) {
                causes.push(duplicate(&field, name));
            }
            volumes.push(name);
        }
    }
    let mut names: Vec<&str> = Vec::new();
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        let Some(cs) = spec.get(list).and_then(Value::as_array) else {
            continue;
        };
        for (i, c) in cs.iter().enumerate() {
            let at = format!("{prefix}.{list}[{i}]");
            let name = c.get("name").and_then(Value::as_str).unwrap_or("");
            if name.is_empty() {
                causes.push(required(&format!("{at}.name")));
            } else if let Err(e) = meta::validate_name(name, NameRule::Dns1123Label) {
                causes.push(invalid(&format!("{at}.name"), name, &e));
            } else if names.contains(&name) {
                causes.push(duplicate(&format!("{at}.name"), name));
            }
            names.push(name);
            if list != "ephemeralContainers"
                && c.get("image")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .trim()
                    .is_empty()
            {
                causes.push(required(&format!("{at}.image")));
            }
            if let Some(mounts) = c.get("volumeMounts").and_then(Value::as_array) {
                for (j, m) in mounts.iter().enumerate() {
                    let vname = m.get("name").and_then(Value::as_str).unwrap_or("");
                    if !volumes.contains(&vname) {
                        causes.push(not_found(&format!("{at}.volumeMounts[{j}].name"), vname));
                    }
                }
            }
            if let Some(ports) = c.get("ports").and_then(Value::as_array) {
                for (j, p) in ports.iter().enumerate() {
                    let port = p.get("containerPort").and_then(Value::as_i64).unwrap_or(0);
                    if !(1..=65535).contains(&port) {
                        causes.push(StatusCause {
                            reason: "FieldValueInvalid".into(),
                            message: format!(
                                "Invalid value: {port}: must be between 1 and 65535, inclusive"
                            ),
                            field: format!("{at}.ports[{j}].containerPort"),
                        });
                    }
                }
            }
        }
    }
}

/// Kind-specific checks of built-ins: pod specs (and the pod templates of workloads),
/// ConfigMap and Secret contents (and, on update from `old`, what may not change).
pub fn builtin_spec(def: &ResourceDef, old: Option<&Value>, obj: &Value) -> ApiResult<()> {
    if !def.builtin {
        return Ok(());
    }
    let mut causes = match old {
        Some(old) => config_update(def, old, obj),
        None => Vec::new(),
    };
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "pods") => {
            if let Some(spec) = obj.get("spec") {
                pod_spec(spec, "spec", &mut causes);
            } else {
                causes.push(required("spec.containers"));
            }
        }
        ("apps", "deployments" | "replicasets" | "statefulsets" | "daemonsets")
        | ("batch", "jobs") => {
            if let Some(spec) = obj.pointer("/spec/template/spec") {
                pod_spec(spec, "spec.template.spec", &mut causes);
            }
        }
        ("", "configmaps") => config_map(obj, &mut causes),
        ("", "secrets") => secret(obj, &mut causes),
        _ => {}
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(
            &def.group,
            &def.kind,
            meta::name_of(obj),
            causes,
        ))
    }
}

/// Kubernetes' message for a key that is not a valid ConfigMap or Secret key.
const CONFIG_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
/// The most data a ConfigMap or Secret may hold (`core.MaxSecretSize`).
const MAX_CONFIG_BYTES: usize = 1024 * 1024;

/// `IsConfigMapKey`: the problems with `key` as a ConfigMap or Secret key.
fn config_key_errors(key: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if key.len() > 253 {
        errors.push("must be no more than 253 characters".to_string());
    }
    let valid = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if !valid {
        errors.push(CONFIG_KEY_MSG.to_string());
    }
    match key {
        "." => errors.push("must not be '.'".into()),
        ".." => errors.push("must not be '..'".into()),
        k if k.starts_with("..") => errors.push("must not start with '..'".into()),
        _ => {}
    }
    errors
}

/// The keys of the map at `key` of `obj`, with the length of each value (decoded base64 for
/// `data` of a Secret and `binaryData`).
fn data_entries(obj: &Value, key: &str, base64: bool) -> Vec<(String, usize)> {
    use base64::Engine as _;
    obj.get(key)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let text = v.as_str().unwrap_or_default();
                    let len = if base64 {
                        base64::engine::general_purpose::STANDARD
                            .decode(text)
                            .map_or(text.len(), |d| d.len())
                    } else {
                        text.len()
                    };
                    (k.clone(), len)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn too_long(field: &str, max: usize) -> StatusCause {
    StatusCause {
        reason: "FieldValueTooLong".into(),
        message: format!("Too long: may not be more than {max} bytes"),
        field: field.into(),
    }
}

/// `ValidateConfigMap`: valid keys, none in both `data` and `binaryData`, 1 MiB at most.
fn config_map(obj: &Value, causes: &mut Vec<StatusCause>) {
    let data = data_entries(obj, "data", false);
    let binary = data_entries(obj, "binaryData", true);
    let mut total = 0;
    for (key, len) in &data {
        for e in config_key_errors(key) {
            causes.push(invalid(&format!("data[{key}]"), key, &e));
        }
        if binary.iter().any(|(b, _)| b == key) {
            causes.push(invalid(
                &format!("data[{key}]"),
                key,
                "duplicate of key present in binaryData",
            ));
        }
        total += len;
    }
    for (key, len) in &binary {
        for e in config_key_errors(key) {
            causes.push(invalid(&format!("binaryData[{key}]"), key, &e));
        }
        total += len;
    }
    if total > MAX_CONFIG_BYTES {
        causes.push(too_long("", MAX_CONFIG_BYTES));
    }
}

/// `ValidateSecret`: valid keys, 1 MiB at most, and what its `type` requires.
fn secret(obj: &Value, causes: &mut Vec<StatusCause>) {
    use base64::Engine as _;
    let data = data_entries(obj, "data", true);
    let mut total = 0;
    for (key, len) in &data {
        for e in config_key_errors(key) {
            causes.push(invalid(&format!("data[{key}]"), key, &e));
        }
        total += len;
    }
    if total > MAX_CONFIG_BYTES {
        causes.push(too_long("data", MAX_CONFIG_BYTES));
    }
    let has = |key: &str| data.iter().any(|(k, _)| k == key);
    let decoded = |key: &str| {
        obj.pointer(&format!(
            "/data/{}",
            key.replace('~', "~0").replace('/', "~1")
        ))
        .and_then(Value::as_str)
        .and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok())
    };
    let require = |causes: &mut Vec<StatusCause>, key: &str| {
        if !has(key) {
            causes.push(required(&format!("data[{key}]")));
        }
    };
    let json_object = |causes: &mut Vec<StatusCause>, key: &str| {
        if !has(key) {
            causes.push(required(&format!("data[{key}]")));
        } else if decoded(key)
            .and_then(|d| serde_json::from_slice::<serde_json::Map<String, Value>>(&d).ok())
            .is_none()
        {
            causes.push(invalid(
                &format!("data[{key}]"),
                "<secret contents redacted>",
                "invalid JSON",
            ));
        }
    };
    match obj.get("type").and_then(Value::as_str).unwrap_or_default() {
        "kubernetes.io/service-account-token" => {
            let named = obj
                .pointer("/metadata/annotations/kubernetes.io~1service-account.name")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty());
            if !named {
                causes.push(required(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                ));
            }
        }
        "kubernetes.io/dockercfg" => json_object(causes, ".dockercfg"),
        "kubernetes.io/dockerconfigjson" => json_object(causes, ".dockerconfigjson"),
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            require(causes, "username");
            require(causes, "password");
        }
        "kubernetes.io/ssh-auth" if decoded("ssh-privatekey").is_none_or(|d| d.is_empty()) => {
            causes.push(required("data[ssh-privatekey]"));
        }
        "kubernetes.io/tls" => {
            require(causes, "tls.crt");
            require(causes, "tls.key");
        }
        _ => {}
    }
}

/// `ValidateSecretUpdate` and `ValidateConfigMapUpdate`'s own checks (before those of the
/// object itself): a Secret's `type` is immutable, and once `immutable` is true neither it
/// nor the data may change.
fn config_update(def: &ResourceDef, old: &Value, new: &Value) -> Vec<StatusCause> {
    let fields: &[&str] = match (def.group.as_str(), def.plural.as_str()) {
        ("", "secrets") => &["data"],
        ("", "configmaps") => &["data", "binaryData"],
        _ => return Vec::new(),
    };
    let mut causes = Vec::new();
    if def.plural == "secrets" && old.get("type") != new.get("type") {
        let value = new.get("type").and_then(Value::as_str).unwrap_or_default();
        causes.push(invalid("type", value, "field is immutable"));
    }
    if old.get("immutable") == Some(&Value::Bool(true)) {
        let forbidden = |field: &str| StatusCause {
            reason: "FieldValueForbidden".into(),
            message: "Forbidden: field is immutable when `immutable` is set".into(),
            field: field.into(),
        };
        if new.get("immutable") != Some(&Value::Bool(true)) {
            causes.push(forbidden("immutable"));
        }
        for field in fields {
            if old.get(*field) != new.get(*field) {
                causes.push(forbidden(field));
            }
        }
    }
    causes
}

/// A custom resource's replicas at its scale subresource's `specReplicasPath`
/// (apiextensions' `ValidateScaleSpec`, part of the strategy's validation, so before any
/// validating webhook): when set, an integer from 0 to 2147483647.
pub fn custom_resource_scale(def: &ResourceDef, obj: &Value) -> ApiResult<()> {
    if def.builtin {
        return Ok(());
    }
    let version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.rsplit('/').next())
        .unwrap_or_default();
    let Some(scale) = def
        .versions
        .iter()
        .find(|v| v.name == version)
        .and_then(|v| v.scale.as_ref())
    else {
        return Ok(());
    };
    let Some(replicas) = meta::get_path(obj, &scale.spec_replicas_path).and_then(Value::as_i64)
    else {
        return Ok(());
    };
    let detail = if replicas < 0 {
        "should be a non-negative integer".to_string()
    } else if replicas > i64::from(i32::MAX) {
        format!("should be less than or equal to {}", i32::MAX)
    } else {
        return Ok(());
    };
    let cause = StatusCause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {replicas}: {detail}"),
        field: scale.spec_replicas_path.clone(),
    };
    Err(ApiError::invalid(
        &def.group,
        &def.kind,
        meta::name_of(obj),
        vec![cause],
    ))
}

const POD_UPDATE_FORBIDDEN: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// `ValidatePodUpdate`: a pod's spec is immutable except container images,
/// activeDeadlineSeconds, added tolerations and removed scheduling gates.
pub fn pod_update(old: &Value, new: &Value) -> ApiResult<()> {
    let (Some(old_spec), Some(new_spec)) = (old.get("spec"), new.get("spec")) else {
        return Ok(());
    };
    // Start from the new spec and put back everything that may change; what is
    // left must equal the old spec.
    let mut normalized = new_spec.clone();
    for list in ["containers", "initContainers"] {
        let old_list = old_spec.get(list).and_then(Value::as_array);
        if let (Some(n), Some(o)) = (
            normalized.get_mut(list).and_then(Value::as_array_mut),
            old_list,
        ) && n.len() == o.len()
        {
            for (nc, oc) in n.iter_mut().zip(o) {
                if let (Some(nm), Some(img)) = (nc.as_object_mut(), oc.get("image")) {
                    nm.insert("image".into(), img.clone());
                }
            }
        }
    }
    if let Some(m) = normalized.as_object_mut() {
        for f in ["activeDeadlineSeconds", "terminationGracePeriodSeconds"] {
            match old_spec.get(f) {
                Some(v) => {
                    m.insert(f.into(), v.clone());
                }
                None => {
                    m.remove(f);
                }
            }
        }
        // Tolerations may only be added.
        let old_tol = old_spec.get("tolerations").and_then(Value::as_array);
        let new_tol = m.get("tolerations").and_then(Value::as_array);
        let only_added = match (old_tol, new_tol) {
            (None, _) => true,
            (Some(o), Some(n)) => o.iter().all(|t| n.contains(t)),
            (Some(o), None) => o.is_empty(),
        };
        if only_added {
            match old_spec.get("tolerations") {
                Some(v) => {
                    m.insert("tolerations".into(), v.clone());
                }
                None => {
                    m.remove("tolerations");
                }
            }
        }
        // Scheduling gates may only be removed.
        let old_gates = old_spec.get("schedulingGates").and_then(Value::as_array);
        let new_gates = m.get("schedulingGates").and_then(Value::as_array);
        if new_gates.is_none_or(|n| old_gates.is_some_and(|o| n.iter().all(|g| o.contains(g)))) {
            match old_spec.get("schedulingGates") {
                Some(v) => {
                    m.insert("schedulingGates".into(), v.clone());
                }
                None => {
                    m.remove("schedulingGates");
                }
            }
        }
    }
    if normalized == *old_spec {
        return Ok(());
    }
    Err(ApiError::invalid(
        "",
        "Pod",
        meta::name_of(new),
        vec![StatusCause {
            reason: "FieldValueForbidden".into(),
            message: format!("Forbidden: {POD_UPDATE_FORBIDDEN}"),
            field: "spec".into(),
        }],
    ))
}

/// The pod's QoS class from its containers' cpu/memory requests and limits, as
/// `GetPodQOS` computes it (requests default to limits).
fn pod_qos(spec: &Value) -> &'static str {
    let ctrs: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|k| spec.get(*k).and_then(Value::as_array))
        .flatten()
        .collect();
    let res = |c: &Value, kind: &str, r: &str| {
        c.pointer(&format!("/resources/{kind}/{r}"))
            .filter(|v| !v.is_null())
            .cloned()
    };
    let any = ctrs.iter().any(|c| {
        ["requests", "limits"]
            .iter()
            .any(|k| ["cpu", "memory"].iter().any(|r| res(c, k, r).is_some()))
    });
    if !any {
        return "BestEffort";
    }
    let guaranteed = ctrs.iter().all(|c| {
        ["cpu", "memory"].iter().all(|r| match res(c, "limits", r) {
            None => false,
            Some(limit) => res(c, "requests", r).is_none_or(|req| {
                crate::cluster::quantity::parse_value(&req)
                    == crate::cluster::quantity::parse_value(&limit)
            }),
        })
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// `ValidatePodResize` (pods/resize, Kubernetes 1.33): only the cpu and memory
/// requests and limits of (non-init) containers may change, containers keep their
/// names and order, set quantities may not be removed, and the QoS class stays.
pub fn pod_resize(old: &Value, new: &Value) -> ApiResult<()> {
    let name = meta::name_of(old).to_string();
    let forbidden =
        |field: &str, detail: &str| Err(ApiError::forbidden_field("", "Pod", &name, field, detail));
    let (Some(old_spec), Some(new_spec)) = (old.get("spec"), new.get("spec")) else {
        return Ok(());
    };
    let list = |s: &Value| {
        s.get("containers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (old_c, new_c) = (list(old_spec), list(new_spec));
    let names = |l: &[Value]| l.iter().map(|c| c.get("name").cloned()).collect::<Vec<_>>();
    if names(&old_c) != names(&new_c) {
        return forbidden(
            "spec.containers",
            "containers may not be renamed or reordered on resize",
        );
    }
    for (i, (o, n)) in old_c.iter().zip(&new_c).enumerate() {
        for kind in ["requests", "limits"] {
            for r in ["cpu", "memory"] {
                let p = format!("/resources/{kind}/{r}");
                let had = o.pointer(&p).is_some_and(|v| !v.is_null());
                let has = n.pointer(&p).is_some_and(|v| !v.is_null());
                if had && !has {
                    let what = if kind == "requests" {
                        "requests"
                    } else {
                        "limits"
                    };
                    return forbidden(
                        &format!("spec.containers[{i}].resources.{kind}"),
                        &format!("resource {what} cannot be removed"),
                    );
                }
            }
        }
    }
    // Everything but cpu/memory of the containers' resources must be unchanged.
    let strip = |spec: &Value| {
        let mut s = spec.clone();
        if let Some(ctrs) = s.get_mut("containers").and_then(Value::as_array_mut) {
            for c in ctrs {
                for kind in ["requests", "limits"] {
                    if let Some(m) = c
                        .pointer_mut(&format!("/resources/{kind}"))
                        .and_then(Value::as_object_mut)
                    {
                        m.remove("cpu");
                        m.remove("memory");
                        if m.is_empty()
                            && let Some(r) = c.get_mut("resources").and_then(Value::as_object_mut)
                        {
                            r.remove(kind);
                        }
                    }
                }
                if c.get("resources")
                    .and_then(Value::as_object)
                    .is_some_and(|r| r.is_empty())
                    && let Some(cm) = c.as_object_mut()
                {
                    cm.remove("resources");
                }
            }
        }
        s
    };
    if strip(old_spec) != strip(new_spec) {
        return forbidden("spec", "only cpu and memory resources are mutable");
    }
    let (was, now) = (pod_qos(old_spec), pod_qos(new_spec));
    if was != now {
        return Err(ApiError::invalid(
            "",
            "Pod",
            &name,
            vec![StatusCause {
                reason: "FieldValueInvalid".into(),
                message: format!(
                    "Invalid value: \"{now}\": Pod QOS Class may not change as a result of resizing"
                ),
                field: "spec".into(),
            }],
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        assert!(qualified_name_errors("app").is_empty());
        assert!(qualified_name_errors("apps.kruise.io/revision").is_empty());
        assert!(!qualified_name_errors("bad key").is_empty());
        assert!(!qualified_name_errors("/x").is_empty());
        assert!(!qualified_name_errors("a/b/c").is_empty());
        assert!(!qualified_name_errors(&"x".repeat(64)).is_empty());
    }
}
