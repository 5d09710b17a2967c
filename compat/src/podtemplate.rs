//! kube-apiserver's checks of a pod template (`ValidatePodTemplateSpec`), shared by every
//! family's webhook and its controller's re-validation, so a template the API server would
//! refuse in a pod is refused at admission with a field path instead of failing every pod
//! write. Checked: the template's metadata (label keys and values, annotation keys, the
//! total annotation size) and its pod spec ([`validate_pod_spec`]: volumes, containers, ports, env,
//! resources, probes, lifecycle handlers, restartPolicy, dnsPolicy).
//!
//! The template is checked as the API server checks the pod made from it, after its
//! defaults are set: a field left empty that kube-apiserver defaults (a port's protocol, a
//! probe's thresholds, `restartPolicy`, …) is accepted, a value set wrong is refused.

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaimVolumeSource, PodSpec, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

mod spec;

pub use spec::{ContainerKind, validate_container, validate_pod_spec, validate_volumes};

use crate::field::{DNS1123_SUBDOMAIN_MESSAGE, FieldError, Path, is_dns1123_subdomain};

/// kube-apiserver's limit on the summed length of a object's annotation keys and values.
pub const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;
/// The longest name part of a qualified name, and the longest label value.
const MAX_NAME_PART_LEN: usize = 63;

const QUALIFIED_NAME_CHARS: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MESSAGE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const SUBDOMAIN_EXAMPLE: &str = " (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// The checks OpenKruise's workloads of long-running pods (CloneSet, Advanced StatefulSet,
/// Advanced DaemonSet) add to the template's: `restartPolicy` only `Always`, no
/// `activeDeadlineSeconds` ("activeDeadlineSeconds in KIND is not Supported", as each
/// spells its kind).
pub fn validate_long_running_pod(spec: &PodSpec, kind: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(policy) = spec.restart_policy.as_deref()
        && !policy.is_empty()
        && policy != "Always"
    {
        errs.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            policy,
            &["Always"],
        ));
    }
    if spec.active_deadline_seconds.is_some() {
        errs.push(FieldError::forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            format!("activeDeadlineSeconds in {kind} is not Supported"),
        ));
    }
    errs
}

/// Validates `template` (found at `path`, e.g. `spec.template`) as kube-apiserver validates
/// a pod template (`ValidatePodTemplateSpec`): its metadata and its pod spec.
pub fn validate_pod_template(template: &PodTemplateSpec, path: &Path) -> Vec<FieldError> {
    let mut errors = match &template.metadata {
        Some(meta) => validate_template_metadata(meta, &path.child("metadata")),
        None => Vec::new(),
    };
    let spec_path = path.child("spec");
    match &template.spec {
        Some(spec) => errors.extend(validate_pod_spec(spec, &spec_path)),
        None => errors.push(FieldError::required(spec_path.child("containers"), "")),
    }
    errors
}

/// [`validate_pod_template`] for a workload whose pods also get a volume per claim
/// template (CloneSet, Advanced StatefulSet): the claims are mocked in as volumes of the
/// same name, as OpenKruise does before validating, so mounts of them are valid.
pub fn validate_pod_template_with_claims<'a>(
    template: &PodTemplateSpec,
    claim_names: impl IntoIterator<Item = &'a str>,
    path: &Path,
) -> Vec<FieldError> {
    let mut template = template.clone();
    if let Some(spec) = template.spec.as_mut() {
        spec.volumes
            .get_or_insert_with(Vec::new)
            .extend(claim_names.into_iter().map(|name| Volume {
                name: name.to_string(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: name.to_string(),
                    read_only: None,
                }),
                ..Volume::default()
            }));
    }
    validate_pod_template(&template, path)
}

/// Validates a pod template's labels and annotations (`ValidateObjectMeta`'s checks that
/// apply to a template): label keys as qualified names, label values, annotation keys as
/// qualified names (lower-cased first, as kube-apiserver does), total annotation size.
pub fn validate_template_metadata(meta: &ObjectMeta, path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let labels_path = path.child("labels");
    for (key, value) in meta.labels.iter().flatten() {
        for detail in qualified_name_errors(key) {
            errors.push(FieldError::invalid(labels_path.clone(), key, detail));
        }
        if value.len() > MAX_NAME_PART_LEN {
            errors.push(FieldError::invalid(
                labels_path.clone(),
                value,
                format!("must be no more than {MAX_NAME_PART_LEN} characters"),
            ));
        } else if !value.is_empty() && !is_name_part(value) {
            errors.push(FieldError::invalid(
                labels_path.clone(),
                value,
                LABEL_VALUE_MESSAGE,
            ));
        }
    }
    let annotations_path = path.child("annotations");
    let mut total = 0usize;
    for (key, value) in meta.annotations.iter().flatten() {
        for detail in qualified_name_errors(&key.to_lowercase()) {
            errors.push(FieldError::invalid(annotations_path.clone(), key, detail));
        }
        total = total.saturating_add(key.len()).saturating_add(value.len());
    }
    if total > MAX_ANNOTATIONS_BYTES {
        errors.push(FieldError::too_long(annotations_path, "", MAX_ANNOTATIONS_BYTES).omit_value());
    }
    errors
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`
fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    let edge_ok = |c: Option<&u8>| c.is_some_and(u8::is_ascii_alphanumeric);
    edge_ok(b.first())
        && edge_ok(b.last())
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// kube-apiserver's `IsQualifiedName`: `[prefix/]name`, the prefix a DNS-1123 subdomain, the
/// name at most 63 characters of [`is_name_part`]. One message per problem, as it words them.
fn qualified_name_errors(key: &str) -> Vec<String> {
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                return vec!["prefix part must be non-empty".into()];
            }
            if !is_dns1123_subdomain(prefix) {
                return vec![format!(
                    "prefix part {DNS1123_SUBDOMAIN_MESSAGE}{SUBDOMAIN_EXAMPLE}"
                )];
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME_CHARS} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    let mut errors = Vec::new();
    if name.is_empty() {
        errors.push("name part must be non-empty".into());
    } else if name.len() > MAX_NAME_PART_LEN {
        errors.push(format!(
            "name part must be no more than {MAX_NAME_PART_LEN} characters"
        ));
    }
    if !is_name_part(name) && !name.is_empty() {
        errors.push(format!("name part {QUALIFIED_NAME_CHARS}"));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::{DNS1123_LABEL_MESSAGE, aggregate};
    use serde_json::json;

    fn template(v: serde_json::Value) -> PodTemplateSpec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn long_running_pods_restart_always_and_have_no_deadline() {
        let spec = |v: serde_json::Value| -> PodSpec { serde_json::from_value(v).unwrap() };
        let ok = spec(json!({"containers": [], "restartPolicy": "Always"}));
        assert!(validate_long_running_pod(&ok, "DaemonSet").is_empty());
        let unset = spec(json!({"containers": [], "restartPolicy": ""}));
        assert!(validate_long_running_pod(&unset, "DaemonSet").is_empty());
        let bad = spec(json!({"containers": [], "restartPolicy": "Never",
                              "activeDeadlineSeconds": 5}));
        assert_eq!(
            aggregate(&validate_long_running_pod(&bad, "DaemonSet")),
            "[spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported \
             values: \"Always\", spec.template.spec.activeDeadlineSeconds: Forbidden: \
             activeDeadlineSeconds in DaemonSet is not Supported]"
        );
    }

    fn errors_of(v: serde_json::Value) -> Vec<String> {
        validate_pod_template(&template(v), &Path::new("spec").child("template"))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    const VALID_SPEC: &str = r#"{"containers": [{"name": "main", "image": "nginx"}]}"#;

    fn with_metadata(meta: serde_json::Value) -> serde_json::Value {
        json!({"metadata": meta, "spec": serde_json::from_str::<serde_json::Value>(VALID_SPEC).unwrap()})
    }

    #[test]
    fn a_valid_template_has_no_errors() {
        assert!(
            errors_of(with_metadata(json!({
                "labels": {"app": "web", "example.com/tier": "front_end-1.2", "empty": ""},
                "annotations": {"Example.com/Some_Key": "anything at all !"},
            })))
            .is_empty()
        );
    }

    #[test]
    fn an_annotation_key_with_a_space_is_refused_as_kube_apiserver_words_it() {
        let errors = errors_of(with_metadata(json!({"annotations": {"bad key!": "v"}})));
        assert_eq!(
            errors,
            vec![format!(
                "spec.template.metadata.annotations: Invalid value: \"bad key!\": name part {QUALIFIED_NAME_CHARS}"
            )]
        );
    }

    #[test]
    fn label_keys_and_values_are_checked() {
        let long = "a".repeat(64);
        let errors = errors_of(with_metadata(json!({"labels": {
            "a/b/c": "ok",
            "/x": "ok",
            "Bad_Prefix.com/x": "ok",
            "ok": "-bad",
            "ok2": long,
        }})));
        assert_eq!(errors.len(), 5, "{errors:#?}");
        assert!(
            errors
                .iter()
                .all(|e| e.starts_with("spec.template.metadata.labels: Invalid value:"))
        );
        assert!(
            errors
                .iter()
                .any(|e| e.contains("prefix part must be non-empty"))
        );
        assert!(
            errors
                .iter()
                .any(|e| e.contains("prefix part a lowercase RFC 1123 subdomain"))
        );
        assert!(
            errors
                .iter()
                .any(|e| e.contains("must be no more than 63 characters"))
        );
    }

    #[test]
    fn annotations_over_256_kib_in_total_are_too_long() {
        let big = "x".repeat(MAX_ANNOTATIONS_BYTES);
        let errors = errors_of(with_metadata(json!({"annotations": {"a": big}})));
        assert_eq!(
            errors,
            vec![
                "spec.template.metadata.annotations: Too long: may not be more than 262144 bytes"
                    .to_string()
            ]
        );
        let fits = "x".repeat(MAX_ANNOTATIONS_BYTES - 1);
        assert!(errors_of(with_metadata(json!({"annotations": {"a": fits}}))).is_empty());
    }

    #[test]
    fn containers_need_unique_dns_label_names_and_an_image() {
        let errors = validate_pod_template(
            &template(json!({"spec": {"containers": [
                {"name": "main", "image": "nginx"},
                {"name": "main", "image": "nginx"},
                {"name": "Bad_Name", "image": "nginx"},
                {"name": "", "image": " "},
            ]}})),
            &Path::new("spec").child("template"),
        );
        assert_eq!(
            aggregate(&errors),
            format!(
                "[spec.template.spec.containers[1].name: Duplicate value: \"main\", spec.template.spec.containers[2].name: Invalid value: \"Bad_Name\": {DNS1123_LABEL_MESSAGE}, spec.template.spec.containers[3].name: Required value, spec.template.spec.containers[3].image: Required value]"
            )
        );
        assert_eq!(
            errors_of(json!({"spec": {"containers": []}})),
            vec!["spec.template.spec.containers: Required value".to_string()]
        );
    }
}
