//! The env a sidecar gets from the pod: `transferEnv` from named app containers, and the
//! vars an app mount's `subPathExpr` reads.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, EnvVar, ObjectFieldSelector, Pod};

use crate::api::{SIDECAR_ENV_KEY, SidecarContainer};

pub(super) fn env_value<'a>(c: &'a Container, name: &str) -> Option<&'a EnvVar> {
    c.env.iter().flatten().find(|e| e.name == name)
}

/// Whether a pod container was injected by a SidecarSet (`IS_INJECTED=true`).
pub fn is_injected_container(c: &Container) -> bool {
    env_value(c, SIDECAR_ENV_KEY).and_then(|e| e.value.as_deref()) == Some("true")
}

/// `$(VAR)` references in a `subPathExpr`.
pub(super) fn sub_path_expr_vars(expr: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(start) = rest.find("$(") {
        let after = &rest[start + 2..];
        let Some(end) = after.find(')') else { break };
        let name = &after[..end];
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c == '-' || c == '.' || c == '_' || c.is_ascii_alphabetic())
            && name
                .chars()
                .all(|c| c == '-' || c == '.' || c == '_' || c.is_ascii_alphanumeric());
        if valid {
            out.push(name);
            rest = &after[end + 1..];
        } else {
            rest = after;
        }
    }
    out
}

/// Splits `metadata.labels['k']` into (`metadata.labels`, `k`).
fn split_subscripted_path(path: &str) -> Option<(&str, &str)> {
    let inner = path.strip_suffix("']")?;
    let (p, sub) = inner.split_once("['")?;
    Some((p, sub))
}

fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            })
    });
    name_ok && prefix_ok
}

/// The container a `transferEnv[].sourceContainerNameFrom.fieldRef` names
/// (`ExtractContainerNameFromFieldPath`: only subscripted labels / annotations).
pub fn container_name_from_field_ref(fr: &ObjectFieldSelector, pod: &Pod) -> Option<String> {
    let (path, key) = split_subscripted_path(&fr.field_path)?;
    let get = |m: &Option<BTreeMap<String, String>>| {
        m.as_ref()
            .and_then(|m| m.get(key))
            .cloned()
            .unwrap_or_default()
    };
    match path {
        "metadata.annotations" if is_qualified_name(&key.to_lowercase()) => {
            Some(get(&pod.metadata.annotations))
        }
        "metadata.labels" if is_qualified_name(key) => Some(get(&pod.metadata.labels)),
        _ => None,
    }
}

/// `GetSidecarTransferEnvs`: env vars copied from the named pod containers.
pub(super) fn transfer_envs(
    sidecar: &SidecarContainer,
    pod: &Pod,
    pod_containers: &[Container],
) -> Vec<EnvVar> {
    let mut out = Vec::new();
    for t in &sidecar.transfer_env {
        let mut names: BTreeSet<&str> = t.env_names.iter().map(String::as_str).collect();
        if !t.env_name.is_empty() {
            names.insert(&t.env_name);
        }
        let source = match t
            .source_container_name_from
            .as_ref()
            .and_then(|s| s.field_ref.as_ref())
        {
            Some(fr) => match container_name_from_field_ref(fr, pod) {
                Some(n) => n,
                None => continue,
            },
            None => t.source_container_name.clone(),
        };
        // The last container of that name wins, as OpenKruise's map keyed by "<c>/<env>".
        for name in names {
            let found = pod_containers
                .iter()
                .rev()
                .filter(|c| c.name == source)
                .find_map(|c| c.env.iter().flatten().rfind(|e| e.name == name));
            if let Some(e) = found {
                out.push(e.clone());
            }
        }
    }
    out
}

/// `MergeEnvVar`: appends `additional` vars whose names are not present yet.
pub(super) fn merge_env(original: &mut Vec<EnvVar>, additional: Vec<EnvVar>) {
    let mut names: BTreeSet<String> = original.iter().map(|e| e.name.clone()).collect();
    for e in additional {
        if names.insert(e.name.clone()) {
            original.push(e);
        }
    }
}
