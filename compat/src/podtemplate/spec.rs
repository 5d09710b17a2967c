//! kube-apiserver's checks of a pod spec (`ValidatePodSpec` and the container, volume, probe
//! and resource checks it calls), worded as it words them. Fields the API server defaults
//! before it validates (a port's protocol, a probe's thresholds and scheme, a container's
//! pull and termination-message policies, the pod's restartPolicy and dnsPolicy) are
//! accepted empty; set to a wrong value they are refused.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, EphemeralVolumeSource, Lifecycle, LifecycleHandler, PodSpec,
    Probe, ResourceRequirements, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

mod handlers;
mod resources;

use super::qualified_name_errors;
use crate::field::{DNS1123_LABEL_MESSAGE, FieldError, Path, is_dns1123_label};
use crate::quantity::{Nanos, parse_nanos};
use handlers::{validate_lifecycle, validate_probe};
use resources::validate_resources;

/// Which list a container is in: init containers may not have probes or lifecycle handlers
/// unless they are restartable (`restartPolicy: Always`, a native sidecar); regular
/// containers may not have a restartPolicy at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContainerKind {
    /// `spec.containers`.
    Regular,
    /// `spec.initContainers`.
    Init,
}

/// kube-apiserver's default `terminationGracePeriodSeconds`, the bound of a `sleep` handler.
const DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS: i64 = 30;
const PORT_RANGE_MESSAGE: &str = "must be between 1 and 65535, inclusive";
const NEGATIVE_MESSAGE: &str = "must be greater than or equal to 0";
const MORE_THAN_ONE_VOLUME_TYPE: &str = "may not specify more than 1 volume type";
const MORE_THAN_ONE_HANDLER_TYPE: &str = "may not specify more than 1 handler type";
const RELAXED_ENV_NAME_MESSAGE: &str = "a valid environment variable name must consist only of printable ASCII characters other than '='";
const QUANTITY_FORMAT_MESSAGE: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
const INIT_ONLY_RESTARTABLE: &str =
    "may not be set for init containers without restartPolicy=Always";

/// Volume sources in the order kube-apiserver looks at them: the first one set is the
/// volume's type, each further one is refused at its own path (as kube-apiserver names the
/// paths, including `cephFS` and `downwarAPI`).
const VOLUME_SOURCES: &[(&str, &str)] = &[
    ("emptyDir", "emptyDir"),
    ("hostPath", "hostPath"),
    ("gitRepo", "gitRepo"),
    ("gcePersistentDisk", "gcePersistentDisk"),
    ("awsElasticBlockStore", "awsElasticBlockStore"),
    ("secret", "secret"),
    ("nfs", "nfs"),
    ("iscsi", "iscsi"),
    ("glusterfs", "glusterfs"),
    ("flocker", "flocker"),
    ("persistentVolumeClaim", "persistentVolumeClaim"),
    ("rbd", "rbd"),
    ("cinder", "cinder"),
    ("cephfs", "cephFS"),
    ("quobyte", "quobyte"),
    ("downwardAPI", "downwarAPI"),
    ("fc", "fc"),
    ("flexVolume", "flexVolume"),
    ("configMap", "configMap"),
    ("azureFile", "azureFile"),
    ("vsphereVolume", "vsphereVolume"),
    ("photonPersistentDisk", "photonPersistentDisk"),
    ("portworxVolume", "portworxVolume"),
    ("azureDisk", "azureDisk"),
    ("storageos", "storageos"),
    ("projected", "projected"),
    ("scaleIO", "scaleIO"),
    ("csi", "csi"),
    ("ephemeral", "ephemeral"),
    ("image", "image"),
];

/// Validates a pod spec found at `path` (e.g. `spec.template.spec`).
pub fn validate_pod_spec(spec: &PodSpec, path: &Path) -> Vec<FieldError> {
    let (volumes, mut errors) = validate_volumes(
        spec.volumes.as_deref().unwrap_or(&[]),
        &path.child("volumes"),
    );
    let grace = spec
        .termination_grace_period_seconds
        .unwrap_or(DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS);

    let containers_path = path.child("containers");
    if spec.containers.is_empty() {
        errors.push(FieldError::required(containers_path.clone(), ""));
    }
    let mut names: BTreeSet<&str> = BTreeSet::new();
    for (i, c) in spec.containers.iter().enumerate() {
        let at = containers_path.index(i);
        errors.extend(validate_container(
            c,
            ContainerKind::Regular,
            &at,
            &volumes,
            grace,
        ));
        if !names.insert(c.name.as_str()) {
            errors.push(FieldError::duplicate(at.child("name"), &c.name));
        }
    }
    errors.extend(host_port_conflicts(&spec.containers, &containers_path));

    let init_path = path.child("initContainers");
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let at = init_path.index(i);
        errors.extend(validate_container(
            c,
            ContainerKind::Init,
            &at,
            &volumes,
            grace,
        ));
        if names.contains(c.name.as_str()) {
            errors.push(FieldError::duplicate(at.child("name"), &c.name));
        } else if !c.name.is_empty() {
            names.insert(c.name.as_str());
        }
        // Init containers run one at a time, so only their own ports can collide.
        errors.extend(host_port_conflicts(std::slice::from_ref(c), &init_path));
    }

    errors.extend(host_network_port_errors(spec, &containers_path));

    if let Some(policy) = spec.restart_policy.as_deref().filter(|p| !p.is_empty())
        && !matches!(policy, "Always" | "OnFailure" | "Never")
    {
        errors.push(FieldError::not_supported(
            path.child("restartPolicy"),
            policy,
            &["Always", "OnFailure", "Never"],
        ));
    }
    let dns_policy = spec.dns_policy.as_deref().filter(|p| !p.is_empty());
    if let Some(policy) = dns_policy
        && !matches!(
            policy,
            "ClusterFirstWithHostNet" | "ClusterFirst" | "Default" | "None"
        )
    {
        errors.push(FieldError::not_supported(
            path.child("dnsPolicy"),
            policy,
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        ));
    }
    if dns_policy == Some("None") {
        let config_path = path.child("dnsConfig");
        match &spec.dns_config {
            None => errors.push(FieldError::required(
                config_path,
                "must provide `dnsConfig` when `dnsPolicy` is None",
            )),
            Some(config) if config.nameservers.as_ref().is_none_or(Vec::is_empty) => {
                errors.push(FieldError::required(
                    config_path.child("nameservers"),
                    "must provide at least one DNS nameserver when `dnsPolicy` is None",
                ));
            }
            Some(_) => {}
        }
    }
    if let Some(seconds) = spec.termination_grace_period_seconds
        && seconds < 0
    {
        errors.push(FieldError::invalid(
            path.child("terminationGracePeriodSeconds"),
            seconds,
            NEGATIVE_MESSAGE,
        ));
    }
    errors
}

/// Validates a pod's volumes (names DNS-1123 labels and unique, exactly one source each, the
/// source's required fields); returns the names of the valid ones, which mounts may refer to.
pub fn validate_volumes(volumes: &[Volume], path: &Path) -> (BTreeSet<String>, Vec<FieldError>) {
    let mut valid = BTreeSet::new();
    let mut errors = Vec::new();
    for (i, volume) in volumes.iter().enumerate() {
        let at = path.index(i);
        let name_path = at.child("name");
        let mut own = volume_source_errors(volume, &at);
        if volume.name.is_empty() {
            own.push(FieldError::required(name_path.clone(), ""));
        } else if !is_dns1123_label(&volume.name) {
            own.push(FieldError::invalid(
                name_path.clone(),
                &volume.name,
                DNS1123_LABEL_MESSAGE,
            ));
        }
        if valid.contains(&volume.name) {
            own.push(FieldError::duplicate(name_path, &volume.name));
        }
        if own.is_empty() {
            valid.insert(volume.name.clone());
        } else {
            errors.extend(own);
        }
    }
    (valid, errors)
}

fn volume_source_errors(volume: &Volume, at: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    // The set sources, read from the serialized volume so every source the API knows counts.
    let serialized = serde_json::to_value(volume).unwrap_or_default();
    let mut set = VOLUME_SOURCES
        .iter()
        .filter(|(key, _)| serialized.get(*key).is_some_and(|v| !v.is_null()));
    match set.next() {
        None => errors.push(FieldError::required(
            at.clone(),
            "must specify a volume type",
        )),
        Some((key, path_name)) => {
            errors.extend(first_source_errors(volume, key, &at.child(path_name)));
            for (_, extra) in set {
                errors.push(FieldError::forbidden(
                    at.child(extra),
                    MORE_THAN_ONE_VOLUME_TYPE,
                ));
            }
        }
    }
    errors
}

/// The required fields of the common volume sources.
fn first_source_errors(volume: &Volume, key: &str, at: &Path) -> Vec<FieldError> {
    let empty = |s: Option<&str>| s.is_none_or(str::is_empty);
    let missing = match key {
        "hostPath" => empty(volume.host_path.as_ref().map(|h| h.path.as_str())).then_some("path"),
        "secret" => empty(
            volume
                .secret
                .as_ref()
                .and_then(|s| s.secret_name.as_deref()),
        )
        .then_some("secretName"),
        "configMap" => empty(volume.config_map.as_ref().map(|c| c.name.as_str())).then_some("name"),
        "persistentVolumeClaim" => empty(
            volume
                .persistent_volume_claim
                .as_ref()
                .map(|c| c.claim_name.as_str()),
        )
        .then_some("claimName"),
        _ => None,
    };
    let mut errors: Vec<FieldError> = missing
        .map(|field| FieldError::required(at.child(field), ""))
        .into_iter()
        .collect();
    if let Some(limit) = volume
        .empty_dir
        .as_ref()
        .and_then(|e| e.size_limit.as_ref())
        && key == "emptyDir"
        && parse_nanos(&limit.0).is_some_and(|n| n < 0)
    {
        errors.push(FieldError::forbidden(
            at.child("sizeLimit"),
            "SizeLimit field must be a valid resource quantity",
        ));
    }
    if key == "ephemeral"
        && let Some(ephemeral) = &volume.ephemeral
    {
        errors.extend(ephemeral_claim_errors(ephemeral, at));
    }
    errors
}

/// `ValidatePersistentVolumeClaimTemplate`'s storage rule for an ephemeral volume: a claim
/// template with a storage request above zero. Found by the differential test against
/// OpenKruise (cloneset/tests/openkruise_oracle.rs).
fn ephemeral_claim_errors(ephemeral: &EphemeralVolumeSource, at: &Path) -> Vec<FieldError> {
    let Some(template) = &ephemeral.volume_claim_template else {
        return vec![FieldError::required(at.child("volumeClaimTemplate"), "")];
    };
    let storage_path = at
        .child("volumeClaimTemplate")
        .child("spec")
        .child("resources")
        .key("storage");
    let storage = template
        .spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|requests| requests.get("storage"));
    match storage {
        None => vec![FieldError::required(storage_path, "")],
        Some(quantity) if parse_nanos(&quantity.0).is_some_and(|n| n <= 0) => {
            vec![FieldError::invalid(
                storage_path,
                &quantity.0,
                "must be greater than zero",
            )]
        }
        Some(_) => Vec::new(),
    }
}

/// Validates one container at `path` (e.g. `spec.containers[0]`) as kube-apiserver does in a
/// pod: name, image, ports, env, volume mounts (against `volumes`), pull and
/// termination-message policies, resources, probes and lifecycle handlers, restartPolicy.
/// Name uniqueness across the pod's lists is the caller's.
pub fn validate_container(
    c: &Container,
    kind: ContainerKind,
    path: &Path,
    volumes: &BTreeSet<String>,
    grace_period_seconds: i64,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let name_path = path.child("name");
    if c.name.is_empty() {
        errors.push(FieldError::required(name_path, ""));
    } else if !is_dns1123_label(&c.name) {
        errors.push(FieldError::invalid(
            name_path,
            &c.name,
            DNS1123_LABEL_MESSAGE,
        ));
    }
    // kube-apiserver refuses an image with surrounding whitespace in a pod.
    if c.image.as_deref().is_none_or(|i| i.trim().is_empty()) {
        errors.push(FieldError::required(path.child("image"), ""));
    }
    if let Some(policy) = c
        .termination_message_policy
        .as_deref()
        .filter(|p| !p.is_empty())
        && !matches!(policy, "File" | "FallbackToLogsOnError")
    {
        errors.push(FieldError::not_supported(
            path.child("terminationMessagePolicy"),
            policy,
            &["File", "FallbackToLogsOnError"],
        ));
    }
    errors.extend(validate_ports(
        c.ports.as_deref().unwrap_or(&[]),
        &path.child("ports"),
    ));
    errors.extend(validate_env(
        c.env.as_deref().unwrap_or(&[]),
        &path.child("env"),
    ));
    errors.extend(validate_volume_mounts(
        c.volume_mounts.as_deref().unwrap_or(&[]),
        volumes,
        &path.child("volumeMounts"),
    ));
    if let Some(policy) = c.image_pull_policy.as_deref().filter(|p| !p.is_empty())
        && !matches!(policy, "Always" | "IfNotPresent" | "Never")
    {
        errors.push(FieldError::not_supported(
            path.child("imagePullPolicy"),
            policy,
            &["Always", "IfNotPresent", "Never"],
        ));
    }
    if let Some(resources) = &c.resources {
        errors.extend(validate_resources(resources, &path.child("resources")));
    }

    let restartable = match (kind, c.restart_policy.as_deref()) {
        (ContainerKind::Regular, Some(_)) => {
            errors.push(FieldError::forbidden(
                path.child("restartPolicy"),
                "may not be set for non-init containers",
            ));
            true
        }
        (ContainerKind::Regular, None) => true,
        (ContainerKind::Init, Some("Always")) => true,
        (ContainerKind::Init, Some(other)) => {
            errors.push(FieldError::not_supported(
                path.child("restartPolicy"),
                other,
                &["Always"],
            ));
            false
        }
        (ContainerKind::Init, None) => false,
    };
    let probes = [
        ("livenessProbe", c.liveness_probe.as_ref()),
        ("readinessProbe", c.readiness_probe.as_ref()),
        ("startupProbe", c.startup_probe.as_ref()),
    ];
    if restartable {
        if let Some(lifecycle) = &c.lifecycle {
            errors.extend(validate_lifecycle(
                lifecycle,
                &path.child("lifecycle"),
                grace_period_seconds,
            ));
        }
        for (field, probe) in probes {
            if let Some(probe) = probe {
                errors.extend(validate_probe(probe, field, &path.child(field)));
            }
        }
    } else {
        if c.lifecycle.is_some() {
            errors.push(FieldError::forbidden(
                path.child("lifecycle"),
                INIT_ONLY_RESTARTABLE,
            ));
        }
        for (field, probe) in probes {
            if probe.is_some() {
                errors.push(FieldError::forbidden(
                    path.child(field),
                    INIT_ONLY_RESTARTABLE,
                ));
            }
        }
    }
    errors
}

/// `IsValidPortNum`.
fn port_number_ok(port: i32) -> bool {
    (1..=65535).contains(&port)
}

/// `IsValidPortName` (an IANA_SVC_NAME): its messages, one per problem.
fn port_name_errors(name: &str) -> Vec<&'static str> {
    let mut errors = Vec::new();
    if name.len() > 15 {
        errors.push("must be no more than 15 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errors.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        errors.push("must contain at least one letter (a-z)");
    }
    if name.contains("--") {
        errors.push("must not contain consecutive hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') {
        errors.push("must not begin or end with a hyphen");
    }
    errors
}

fn validate_ports(ports: &[ContainerPort], path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut names = BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        let at = path.index(i);
        if let Some(name) = port.name.as_deref().filter(|n| !n.is_empty()) {
            let problems = port_name_errors(name);
            if !problems.is_empty() {
                for detail in problems {
                    errors.push(FieldError::invalid(at.child("name"), name, detail));
                }
            } else if !names.insert(name) {
                errors.push(FieldError::duplicate(at.child("name"), name));
            }
        }
        if port.container_port == 0 {
            errors.push(FieldError::required(at.child("containerPort"), ""));
        } else if !port_number_ok(port.container_port) {
            errors.push(FieldError::invalid(
                at.child("containerPort"),
                port.container_port,
                PORT_RANGE_MESSAGE,
            ));
        }
        if let Some(host) = port.host_port.filter(|p| *p != 0)
            && !port_number_ok(host)
        {
            errors.push(FieldError::invalid(
                at.child("hostPort"),
                host,
                PORT_RANGE_MESSAGE,
            ));
        }
        if let Some(protocol) = port.protocol.as_deref().filter(|p| !p.is_empty())
            && !matches!(protocol, "SCTP" | "TCP" | "UDP")
        {
            errors.push(FieldError::not_supported(
                at.child("protocol"),
                protocol,
                &["SCTP", "TCP", "UDP"],
            ));
        }
    }
    errors
}

/// Host ports may not collide (protocol, host IP and port) across `containers`.
fn host_port_conflicts(containers: &[Container], path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut seen = BTreeSet::new();
    for (ci, c) in containers.iter().enumerate() {
        for (pi, port) in c.ports.iter().flatten().enumerate() {
            let Some(host) = port.host_port.filter(|p| *p != 0) else {
                continue;
            };
            let protocol = port
                .protocol
                .as_deref()
                .filter(|p| !p.is_empty())
                .unwrap_or("TCP");
            let key = format!(
                "{protocol}/{}/{host}",
                port.host_ip.as_deref().unwrap_or("")
            );
            if !seen.insert(key.clone()) {
                errors.push(FieldError::duplicate(
                    path.index(ci).child("ports").index(pi).child("hostPort"),
                    key,
                ));
            }
        }
    }
    errors
}

/// Kubernetes' `validateHostNetwork` with the options OpenKruise's webhooks pass
/// (`ResourceIsPod`): with `hostNetwork`, each regular container port's `hostPort` must equal
/// its `containerPort`, an unset one included (a workload template is validated as the pod
/// it becomes; CloneSet's defaults fill it in only under
/// `DefaultHostNetworkHostPortsInPodTemplates`). Found by the differential test against
/// OpenKruise (daemonset/tests/openkruise_oracle.rs).
fn host_network_port_errors(spec: &PodSpec, containers_path: &Path) -> Vec<FieldError> {
    if spec.host_network != Some(true) {
        return Vec::new();
    }
    let mut errors = Vec::new();
    for (ci, container) in spec.containers.iter().enumerate() {
        for (pi, port) in container.ports.iter().flatten().enumerate() {
            let host_port = port.host_port.unwrap_or(0);
            if host_port != port.container_port {
                errors.push(FieldError::invalid(
                    containers_path
                        .index(ci)
                        .child("ports")
                        .index(pi)
                        .child("hostPort"),
                    host_port,
                    "must match `containerPort` when `hostNetwork` is true",
                ));
            }
        }
    }
    errors
}

/// Env names as kube-apiserver 1.33 checks them (`RelaxedEnvironmentVariableValidation`,
/// on by default since 1.32): any printable ASCII but `=`; and each `valueFrom` with exactly
/// one source and no `value` beside it.
fn validate_env(vars: &[EnvVar], path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, var) in vars.iter().enumerate() {
        let at = path.index(i);
        if var.name.is_empty() {
            errors.push(FieldError::required(at.child("name"), ""));
        } else if !var
            .name
            .bytes()
            .all(|b| (b' '..=b'~').contains(&b) && b != b'=')
        {
            errors.push(FieldError::invalid(
                at.child("name"),
                &var.name,
                RELAXED_ENV_NAME_MESSAGE,
            ));
        }
        let Some(from) = &var.value_from else {
            continue;
        };
        let from_path = at.child("valueFrom");
        let mut sources = 0;
        if let Some(field_ref) = &from.field_ref {
            sources += 1;
            errors.extend(field_ref_errors(
                &field_ref.field_path,
                &from_path.child("fieldRef"),
            ));
        }
        if let Some(resource_ref) = &from.resource_field_ref {
            sources += 1;
            if resource_ref.resource.is_empty() {
                errors.push(FieldError::required(
                    from_path.child("resourceFieldRef").child("resource"),
                    "",
                ));
            }
        }
        if let Some(key_ref) = &from.config_map_key_ref {
            sources += 1;
            if key_ref.key.is_empty() {
                errors.push(FieldError::required(
                    from_path.child("configMapKeyRef").child("key"),
                    "",
                ));
            }
        }
        if let Some(key_ref) = &from.secret_key_ref {
            sources += 1;
            if key_ref.key.is_empty() {
                errors.push(FieldError::required(
                    from_path.child("secretKeyRef").child("key"),
                    "",
                ));
            }
        }
        let has_value = var.value.as_deref().is_some_and(|v| !v.is_empty());
        let detail = if sources == 0 {
            Some(
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            )
        } else if has_value {
            Some("may not be specified when `value` is not empty")
        } else if sources > 1 {
            Some("may not have more than one field specified at a time")
        } else {
            None
        };
        if let Some(detail) = detail {
            errors.push(FieldError::invalid(from_path, "", detail));
        }
    }
    errors
}

/// The pod fields an env var's `fieldRef` may name (`validEnvDownwardAPIFieldPathExpressions`,
/// sorted as kube-apiserver lists them), plus a subscripted label or annotation.
const ENV_FIELD_PATHS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

fn field_ref_errors(field_path: &str, at: &Path) -> Vec<FieldError> {
    if field_path.is_empty() {
        return vec![FieldError::required(at.child("fieldPath"), "")];
    }
    let subscripted = ["metadata.labels['", "metadata.annotations['"]
        .iter()
        .any(|prefix| field_path.starts_with(prefix) && field_path.ends_with("']"));
    if subscripted || ENV_FIELD_PATHS.contains(&field_path) {
        Vec::new()
    } else {
        vec![FieldError::not_supported(
            at.child("fieldPath"),
            field_path,
            ENV_FIELD_PATHS,
        )]
    }
}

fn validate_volume_mounts(
    mounts: &[VolumeMount],
    volumes: &BTreeSet<String>,
    path: &Path,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut mount_paths = BTreeSet::new();
    for (i, mount) in mounts.iter().enumerate() {
        let at = path.index(i);
        if mount.name.is_empty() {
            errors.push(FieldError::required(at.child("name"), ""));
        }
        if !volumes.contains(&mount.name) {
            errors.push(FieldError::not_found(at.child("name"), &mount.name));
        }
        if mount.mount_path.is_empty() {
            errors.push(FieldError::required(at.child("mountPath"), ""));
        }
        if !mount_paths.insert(mount.mount_path.as_str()) {
            errors.push(FieldError::invalid(
                at.child("mountPath"),
                &mount.mount_path,
                "must be unique",
            ));
        }
        let sub_path = mount.sub_path.as_deref().unwrap_or("");
        let sub_path_expr = mount.sub_path_expr.as_deref().unwrap_or("");
        if !sub_path.is_empty() && !sub_path_expr.is_empty() {
            errors.push(FieldError::invalid(
                at.child("subPathExpr"),
                sub_path_expr,
                "subPathExpr and subPath are mutually exclusive",
            ));
        }
        // kube-apiserver reports these at the list's path, not the mount's.
        for (value, field) in [(sub_path, "subPath"), (sub_path_expr, "subPathExpr")] {
            if value.starts_with('/') {
                errors.push(FieldError::invalid(
                    path.child(field),
                    value,
                    "must be a relative path",
                ));
            }
            if value.split('/').any(|part| part == "..") {
                errors.push(FieldError::invalid(
                    path.child(field),
                    value,
                    "must not contain '..'",
                ));
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests;
