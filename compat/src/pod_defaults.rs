//! The pod-template defaults OpenKruise's workload webhooks inject (`SetDefaultPodSpec` in
//! OpenKruise's `apis/apps/defaults/pod.go`, used by CloneSet, Advanced StatefulSet,
//! BroadcastJob, AdvancedCronJob and UnitedDeployment unless `TemplateNoDefaults`): the
//! Kubernetes `SetDefaults_*` functions kube-apiserver applies to a pod, called field by field
//! on the template, and `SetDefaults_PersistentVolumeClaim` on claim templates.
//!
//! What is defaulted, exactly as Kubernetes v1.32–v1.33 does it (an absent, `null` or empty
//! field counts as unset, as Go's zero value does):
//!
//! * pod spec: `dnsPolicy: ClusterFirst`, `restartPolicy: Always`, `securityContext: {}`,
//!   `terminationGracePeriodSeconds: 30`, `schedulerName: default-scheduler`; `overhead`
//!   quantities; with `DefaultHostNetworkHostPortsInPodTemplates` and `hostNetwork`, each
//!   port's `hostPort` is its `containerPort`;
//! * containers: `imagePullPolicy: Always` (OpenKruise's choice, for in-place updates);
//!   init containers by tag as Kubernetes does (`Always` for `:latest` or no tag,
//!   `IfNotPresent` otherwise, and for a digest without a tag or an unparsable image);
//!   both: `terminationMessagePath: /dev/termination-log`, `terminationMessagePolicy: File`;
//!   ephemeral containers get none of these;
//! * every container kind: ports `protocol: TCP`, env `valueFrom.fieldRef.apiVersion: v1`,
//!   `resources` quantities, probes (`timeoutSeconds` 1, `periodSeconds` 10,
//!   `successThreshold` 1, `failureThreshold` 3, `httpGet` `path: /` and `scheme: HTTP`),
//!   lifecycle `postStart`/`preStop` `httpGet` likewise;
//! * volumes: `emptyDir: {}` when no source is set; `defaultMode: 420` (0644) for secret,
//!   configMap, downwardAPI and projected; hostPath `type: ""`; downwardAPI `fieldRef`
//!   `apiVersion: v1`; projected serviceAccountToken `expirationSeconds: 3600`;
//! * claim templates: `status.phase: Pending` and their quantities.
//!
//! Quantities are written in Go's canonical form, rounded up to milli-units
//! (`SetDefaults_ResourceList`; see [`crate::quantity`]).
//!
//! Not defaulted, as OpenKruise does not: `enableServiceLinks` and the other pod-only
//! defaults of `SetDefaults_Pod`, a claim's `volumeMode` (`SetDefaults_PersistentVolumeClaimSpec`
//! is not called), an image volume's `pullPolicy` (behind Kubernetes' `ImageVolume` gate, off
//! in these versions). The functions work on JSON, so fields unknown to this code stay as
//! they are.

use serde_json::{Map, Value, json};

use crate::quantity::{canonical_milli_quantity, canonical_quantity};

/// `v1.DefaultTerminationGracePeriodSeconds`.
const TERMINATION_GRACE_PERIOD_SECONDS: i64 = 30;
/// The default file mode of projected files, 0644.
const DEFAULT_MODE: i64 = 0o644;
/// `ServiceAccountTokenProjection.expirationSeconds` default, one hour.
const TOKEN_EXPIRATION_SECONDS: i64 = 3600;

/// Options of [`default_pod_spec`], from OpenKruise's feature gates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodDefaultsOptions {
    /// `DefaultHostNetworkHostPortsInPodTemplates`: with `hostNetwork`, default each port's
    /// `hostPort` to its `containerPort` (what Kubernetes did before 1.28).
    pub host_network_host_ports: bool,
}

/// Defaults the pod spec of a pod template (`template.spec`), if it is an object.
pub fn default_pod_template(template: &mut Value, options: PodDefaultsOptions) {
    if let Some(Value::Object(spec)) = template.get_mut("spec") {
        default_pod_spec(spec, options);
    }
}

/// OpenKruise's `SetDefaultPodSpec` on a pod spec.
pub fn default_pod_spec(spec: &mut Map<String, Value>, options: PodDefaultsOptions) {
    set_if_unset(spec, "dnsPolicy", json!("ClusterFirst"));
    set_if_unset(spec, "restartPolicy", json!("Always"));
    if is_null(spec.get("securityContext")) {
        spec.insert("securityContext".into(), json!({}));
    }
    // A pointer in Go: an explicit 0 stays.
    if is_null(spec.get("terminationGracePeriodSeconds")) {
        spec.insert(
            "terminationGracePeriodSeconds".into(),
            json!(TERMINATION_GRACE_PERIOD_SECONDS),
        );
    }
    set_if_unset(spec, "schedulerName", json!("default-scheduler"));
    let host_network = spec.get("hostNetwork") == Some(&Value::Bool(true));
    if options.host_network_host_ports && host_network {
        for key in ["containers", "initContainers"] {
            for container in objects_mut(spec, key) {
                for port in objects_mut(container, "ports") {
                    if is_zero(port.get("hostPort"))
                        && let Some(container_port) = port.get("containerPort").cloned()
                    {
                        port.insert("hostPort".into(), container_port);
                    }
                }
            }
        }
    }
    for volume in objects_mut(spec, "volumes") {
        default_volume(volume);
    }
    for container in objects_mut(spec, "initContainers") {
        default_container(container);
        default_container_parts(container);
    }
    for container in objects_mut(spec, "containers") {
        // OpenKruise pulls every time unless told otherwise, so an in-place image change
        // never runs a stale local image.
        set_if_unset(container, "imagePullPolicy", json!("Always"));
        default_container(container);
        default_container_parts(container);
    }
    for container in objects_mut(spec, "ephemeralContainers") {
        default_container_parts(container);
    }
    default_resource_list(spec.get_mut("overhead"));
}

/// The template as Go's `json.Marshal` writes it back after decoding, which is how
/// OpenKruise's webhook stores it: [`crate::gojson::with_go_artefacts`]
/// (`metadata.creationTimestamp: null`, `resources: {}` on every container), a
/// `resourceFieldRef`'s `divisor` (a Go `Quantity` value, `"0"` when unset), an ephemeral
/// volume's claim template as Go writes it, the canonical form of every quantity (the
/// defaulted ones already are; a DaemonSet's template is not defaulted at all), and no
/// `omitempty` scalar at its zero value (`hostNetwork: false`, a probe's `periodSeconds: 0`,
/// `workingDir: ""`; the user's manifest may spell them out, Go does not write them).
pub fn go_encoded_pod_template(template: &Value) -> Value {
    let mut encoded = crate::gojson::with_go_artefacts(template);
    let Some(Value::Object(spec)) = encoded.get_mut("spec") else {
        return encoded;
    };
    for key in ["containers", "initContainers", "ephemeralContainers"] {
        for container in objects_mut(spec, key) {
            if let Some(Value::Object(resources)) = container.get_mut("resources") {
                canonicalize_list(resources.get_mut("limits"), canonical_quantity);
                canonicalize_list(resources.get_mut("requests"), canonical_quantity);
            }
            for env in objects_mut(container, "env") {
                if let Some(Value::Object(field_ref)) = env
                    .get_mut("valueFrom")
                    .and_then(|v| v.get_mut("resourceFieldRef"))
                {
                    encode_divisor(field_ref);
                }
            }
        }
    }
    // The pod-level resources are not defaulted, only written back canonical.
    if let Some(Value::Object(resources)) = spec.get_mut("resources") {
        canonicalize_list(resources.get_mut("limits"), canonical_quantity);
        canonicalize_list(resources.get_mut("requests"), canonical_quantity);
    }
    for volume in objects_mut(spec, "volumes") {
        encode_volume(volume);
    }
    drop_omitted_zeros(&mut encoded, &mut String::new());
    drop_omitted_empties(&mut encoded);
    encoded
}

/// Leaves out what Go's `omitempty` leaves out of a pod template at its zero value: the
/// scalar fields of [`go_omitempty::OMITTED_ZEROS`] (generated from k8s.io/api's struct
/// tags), when `false`, `0` or `""`. `path` is where `value` is in the template
/// (`spec.containers[]`).
fn drop_omitted_zeros(value: &mut Value, path: &mut String) {
    let len = path.len();
    match value {
        Value::Object(map) => map.retain(|key, field| {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(key);
            let omitted = is_go_zero(field)
                && go_omitempty::OMITTED_ZEROS
                    .binary_search(&path.as_str())
                    .is_ok();
            if !omitted {
                drop_omitted_zeros(field, path);
            }
            path.truncate(len);
            !omitted
        }),
        Value::Array(items) => {
            path.push_str("[]");
            for item in items {
                drop_omitted_zeros(item, path);
            }
            path.truncate(len);
        }
        _ => {}
    }
}

/// `false`, `0` or `""`: what `omitempty` leaves out of a scalar field.
fn is_go_zero(value: &Value) -> bool {
    match value {
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

/// Volumes as Go's `json.Marshal` writes them back after decoding (what
/// [`go_encoded_pod_template`] does to a template's volumes): SidecarSet revisions carry
/// their volumes so.
pub fn go_encoded_volumes(volumes: &Value) -> Value {
    let mut encoded = volumes.clone();
    if let Value::Array(items) = &mut encoded {
        for item in items.iter_mut() {
            if let Value::Object(volume) = item {
                encode_volume(volume);
            }
            drop_omitted_zeros(item, &mut "spec.volumes[]".to_string());
            drop_omitted_empties(item);
        }
    }
    encoded
}

fn encode_volume(volume: &mut Map<String, Value>) {
    if let Some(size) = volume
        .get_mut("emptyDir")
        .and_then(|e| e.get_mut("sizeLimit"))
    {
        canonicalize(size, canonical_quantity);
    }
    if let Some(Value::Object(claim)) = volume
        .get_mut("ephemeral")
        .and_then(|e| e.get_mut("volumeClaimTemplate"))
    {
        encode_claim_template(claim);
    }
    if let Some(Value::Object(downward)) = volume.get_mut("downwardAPI") {
        encode_item_divisors(downward);
    }
    if let Some(Value::Object(projected)) = volume.get_mut("projected") {
        for source in objects_mut(projected, "sources") {
            if let Some(Value::Object(downward)) = source.get_mut("downwardAPI") {
                encode_item_divisors(downward);
            }
        }
    }
}

/// The pod template's map-typed fields (Go `map[string]…`, `omitempty`): an empty one is
/// not written back. Struct-typed fields (`emptyDir: {}`, `resources: {}`) are.
const MAP_FIELDS: &[&str] = &[
    "labels",
    "annotations",
    "nodeSelector",
    "limits",
    "requests",
    "overhead",
    "volumeAttributes",
];

/// The pod template's slice-typed fields Go writes even when empty (no `omitempty`).
const ALWAYS_WRITTEN_SLICES: &[&str] = &["containers", "sources", "nodeSelectorTerms"];

/// What Go's `omitempty` leaves out when OpenKruise's webhook writes the decoded template
/// back: empty maps, empty slices (but [`ALWAYS_WRITTEN_SLICES`]) and nulls (but
/// `creationTimestamp`, a struct Go writes as `null`). Found by the differential test
/// against OpenKruise (`cloneset/tests/openkruise_oracle.rs`).
fn drop_omitted_empties(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|key, field| match field {
                Value::Null => key == "creationTimestamp",
                Value::Array(items) => {
                    !items.is_empty() || ALWAYS_WRITTEN_SLICES.contains(&key.as_str())
                }
                Value::Object(entries) => {
                    !entries.is_empty() || !MAP_FIELDS.contains(&key.as_str())
                }
                _ => true,
            });
            for (key, field) in map.iter_mut() {
                if !MAP_FIELDS.contains(&key.as_str()) {
                    drop_omitted_empties(field);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(drop_omitted_empties),
        _ => {}
    }
}

/// An ephemeral volume's claim template as Go writes it: `metadata.creationTimestamp`,
/// `spec.resources` always there, quantities canonical.
fn encode_claim_template(claim: &mut Map<String, Value>) {
    for key in ["metadata", "spec"] {
        let part = claim.entry(key).or_insert_with(|| json!({}));
        if part.is_null() {
            *part = json!({});
        }
    }
    if let Some(Value::Object(metadata)) = claim.get_mut("metadata") {
        metadata.entry("creationTimestamp").or_insert(Value::Null);
    }
    if let Some(Value::Object(spec)) = claim.get_mut("spec") {
        let resources = spec.entry("resources").or_insert_with(|| json!({}));
        if resources.is_null() {
            *resources = json!({});
        }
        if let Value::Object(resources) = resources {
            canonicalize_list(resources.get_mut("limits"), canonical_quantity);
            canonicalize_list(resources.get_mut("requests"), canonical_quantity);
        }
    }
}

fn encode_item_divisors(downward: &mut Map<String, Value>) {
    for item in objects_mut(downward, "items") {
        if let Some(Value::Object(field_ref)) = item.get_mut("resourceFieldRef") {
            encode_divisor(field_ref);
        }
    }
}

fn encode_divisor(field_ref: &mut Map<String, Value>) {
    let divisor = field_ref.entry("divisor").or_insert(Value::Null);
    if divisor.is_null() {
        *divisor = json!("0");
    }
    canonicalize(divisor, canonical_quantity);
}

/// OpenKruise's defaults of a CloneSet's (or StatefulSet's) volume claim template:
/// `SetDefaults_PersistentVolumeClaim` (`status.phase: Pending`) and its quantities.
pub fn default_volume_claim_template(claim: &mut Value) {
    let Value::Object(claim) = claim else {
        return;
    };
    let status = claim.entry("status").or_insert_with(|| json!({}));
    if status.is_null() {
        *status = json!({});
    }
    if let Value::Object(status) = status {
        set_if_unset(status, "phase", json!("Pending"));
        default_resource_list(status.get_mut("capacity"));
    }
    if let Some(Value::Object(resources)) =
        claim.get_mut("spec").and_then(|s| s.get_mut("resources"))
    {
        default_resource_list(resources.get_mut("limits"));
        default_resource_list(resources.get_mut("requests"));
    }
}

/// OpenKruise's template defaults of a workload (`injectTemplateDefaults` in the CloneSet
/// and Advanced StatefulSet webhooks): Kubernetes' pod defaults in `spec.template`, written
/// as Go encodes it, and each `spec.volumeClaimTemplates` entry defaulted and written with
/// what Go's encoding always adds.
pub fn inject_workload_template_defaults(object: &mut Value, options: PodDefaultsOptions) {
    if let Some(template) = object.pointer_mut("/spec/template")
        && template.is_object()
    {
        default_pod_template(template, options);
        *template = go_encoded_pod_template(template);
    }
    if let Some(Value::Array(claims)) = object.pointer_mut("/spec/volumeClaimTemplates") {
        for claim in claims.iter_mut().filter(|c| c.is_object()) {
            default_volume_claim_template(claim);
            with_claim_go_artefacts(claim);
        }
    }
}

/// Whether a workload webhook injects the template defaults (OpenKruise's rule): on CREATE
/// (no `old`), and on UPDATE only when `spec.template` changed.
pub fn template_changed(new: &Value, old: Option<&Value>) -> bool {
    old.is_none_or(|old| old.pointer("/spec/template") != new.pointer("/spec/template"))
}

/// Whether and how a workload's defaulting webhook writes the pod defaults into its
/// templates, from OpenKruise's feature gates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TemplateDefaults {
    /// Inject them (`TemplateNoDefaults` off, OpenKruise's default).
    pub enabled: bool,
    /// `DefaultHostNetworkHostPortsInPodTemplates`.
    pub pod: PodDefaultsOptions,
}

/// OpenKruise's defaults: both gates off (`FeatureGates::template_defaults` in kruise-core
/// reads them from `--feature-gates`).
impl Default for TemplateDefaults {
    fn default() -> Self {
        TemplateDefaults {
            enabled: true,
            pod: PodDefaultsOptions {
                host_network_host_ports: false,
            },
        }
    }
}

impl TemplateDefaults {
    /// The options a request's templates are defaulted with, `None` when they are not: off,
    /// or an UPDATE (`old` given) that leaves `spec.template` as it was ([`template_changed`]).
    pub fn for_request(&self, object: &Value, old: Option<&Value>) -> Option<PodDefaultsOptions> {
        (self.enabled && template_changed(object, old)).then_some(self.pod)
    }
}

/// What Go's encoding of a `PersistentVolumeClaim` always writes: `metadata.creationTimestamp`
/// (`null`), `spec.resources` and `status` (`{}` when empty).
fn with_claim_go_artefacts(claim: &mut Value) {
    let Value::Object(claim) = claim else {
        return;
    };
    for (key, empty) in [
        ("metadata", json!({})),
        ("spec", json!({})),
        ("status", json!({})),
    ] {
        let part = claim.entry(key).or_insert(empty.clone());
        if part.is_null() {
            *part = empty;
        }
    }
    if let Some(Value::Object(metadata)) = claim.get_mut("metadata") {
        metadata.entry("creationTimestamp").or_insert(Value::Null);
    }
    if let Some(Value::Object(spec)) = claim.get_mut("spec") {
        let resources = spec.entry("resources").or_insert(json!({}));
        if resources.is_null() {
            *resources = json!({});
        }
    }
}

/// `SetDefaults_Container`: the pull policy by tag and the termination message fields.
fn default_container(container: &mut Map<String, Value>) {
    if is_unset(container.get("imagePullPolicy")) {
        let image = container.get("image").and_then(Value::as_str).unwrap_or("");
        let policy = if image_tag_is_latest(image) {
            "Always"
        } else {
            "IfNotPresent"
        };
        container.insert("imagePullPolicy".into(), json!(policy));
    }
    set_if_unset(
        container,
        "terminationMessagePath",
        json!("/dev/termination-log"),
    );
    set_if_unset(container, "terminationMessagePolicy", json!("File"));
}

/// Ports, env field references, resources, probes and lifecycle handlers of any container.
fn default_container_parts(container: &mut Map<String, Value>) {
    for port in objects_mut(container, "ports") {
        set_if_unset(port, "protocol", json!("TCP"));
    }
    for env in objects_mut(container, "env") {
        if let Some(Value::Object(field_ref)) =
            env.get_mut("valueFrom").and_then(|v| v.get_mut("fieldRef"))
        {
            set_if_unset(field_ref, "apiVersion", json!("v1"));
        }
    }
    if let Some(Value::Object(resources)) = container.get_mut("resources") {
        default_resource_list(resources.get_mut("limits"));
        default_resource_list(resources.get_mut("requests"));
    }
    for key in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(Value::Object(probe)) = container.get_mut(key) {
            default_probe(probe);
        }
    }
    if let Some(Value::Object(lifecycle)) = container.get_mut("lifecycle") {
        for key in ["postStart", "preStop"] {
            if let Some(Value::Object(http_get)) =
                lifecycle.get_mut(key).and_then(|h| h.get_mut("httpGet"))
            {
                default_http_get(http_get);
            }
        }
    }
}

/// `SetDefaults_Probe` and, for an HTTP probe, `SetDefaults_HTTPGetAction`.
fn default_probe(probe: &mut Map<String, Value>) {
    for (key, value) in [
        ("timeoutSeconds", 1),
        ("periodSeconds", 10),
        ("successThreshold", 1),
        ("failureThreshold", 3),
    ] {
        if is_zero(probe.get(key)) {
            probe.insert(key.into(), json!(value));
        }
    }
    if let Some(Value::Object(http_get)) = probe.get_mut("httpGet") {
        default_http_get(http_get);
    }
}

fn default_http_get(http_get: &mut Map<String, Value>) {
    set_if_unset(http_get, "path", json!("/"));
    set_if_unset(http_get, "scheme", json!("HTTP"));
}

/// `SetDefaults_Volume` and the defaults of its source.
fn default_volume(volume: &mut Map<String, Value>) {
    // Any key besides the name is a source (one this code does not know included): only a
    // volume without one becomes an emptyDir.
    let has_source = volume
        .iter()
        .any(|(key, value)| key != "name" && !value.is_null());
    if !has_source {
        volume.insert("emptyDir".into(), json!({}));
    }
    if let Some(Value::Object(host_path)) = volume.get_mut("hostPath")
        && host_path.get("type").is_none_or(Value::is_null)
    {
        host_path.insert("type".into(), json!(""));
    }
    for key in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(Value::Object(source)) = volume.get_mut(key)
            && is_null(source.get("defaultMode"))
        {
            source.insert("defaultMode".into(), json!(DEFAULT_MODE));
        }
    }
    if let Some(Value::Object(downward)) = volume.get_mut("downwardAPI") {
        default_downward_items(downward);
    }
    if let Some(Value::Object(projected)) = volume.get_mut("projected") {
        for source in objects_mut(projected, "sources") {
            if let Some(Value::Object(downward)) = source.get_mut("downwardAPI") {
                default_downward_items(downward);
            }
            if let Some(Value::Object(token)) = source.get_mut("serviceAccountToken")
                && is_null(token.get("expirationSeconds"))
            {
                token.insert("expirationSeconds".into(), json!(TOKEN_EXPIRATION_SECONDS));
            }
        }
    }
}

fn default_downward_items(downward: &mut Map<String, Value>) {
    for item in objects_mut(downward, "items") {
        if let Some(Value::Object(field_ref)) = item.get_mut("fieldRef") {
            set_if_unset(field_ref, "apiVersion", json!("v1"));
        }
    }
}

/// `SetDefaults_ResourceList`: every quantity rounded up to milli-units and written in
/// canonical form. A value that is not a quantity is left for validation to refuse.
fn default_resource_list(list: Option<&mut Value>) {
    let Some(Value::Object(list)) = list else {
        return;
    };
    for value in list.values_mut() {
        canonicalize(value, canonical_milli_quantity);
    }
}

/// Every quantity of a resource list in `canonical` form.
fn canonicalize_list(list: Option<&mut Value>, canonical: fn(&str) -> Option<String>) {
    if let Some(Value::Object(list)) = list {
        for value in list.values_mut() {
            canonicalize(value, canonical);
        }
    }
}

/// Replaces a quantity (a string, or a number as YAML may give it) by its canonical form.
fn canonicalize(value: &mut Value, canonical: fn(&str) -> Option<String>) {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return,
    };
    if let Some(c) = canonical(&text) {
        *value = Value::String(c);
    }
}

/// Whether Kubernetes' `ParseImageName` gives `image` the tag `latest`: written so, or no
/// tag and no digest. An image it cannot parse has no tag.
pub fn image_tag_is_latest(image: &str) -> bool {
    image_tag(image).is_some_and(|tag| tag == "latest")
}

/// The tag `ParseImageName` finds (`latest` when neither tag nor digest is given), `None` if
/// `image` is not a valid reference (docker's `ParseNormalizedNamed`).
fn image_tag(image: &str) -> Option<&str> {
    let is_lower_hex = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    if image.len() == 64 && is_lower_hex(image) {
        return None;
    }
    let (name_and_tag, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    if let Some(digest) = digest {
        let (algorithm, encoded) = digest.split_once(':')?;
        let length = match algorithm {
            "sha256" => 64,
            "sha384" => 96,
            "sha512" => 128,
            _ => return None,
        };
        if encoded.len() != length || !is_lower_hex(encoded) {
            return None;
        }
    }
    let last_slash = name_and_tag.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match name_and_tag[last_slash..].rfind(':') {
        Some(i) => (
            &name_and_tag[..last_slash + i],
            Some(&name_and_tag[last_slash + i + 1..]),
        ),
        None => (name_and_tag, None),
    };
    if let Some(tag) = tag {
        let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
        let bytes = tag.as_bytes();
        let valid = !bytes.is_empty()
            && bytes.len() <= 128
            && word(bytes[0])
            && bytes[1..]
                .iter()
                .all(|&b| word(b) || b == b'.' || b == b'-');
        if !valid {
            return None;
        }
    }
    if !valid_repository(name) {
        return None;
    }
    match (tag, digest) {
        (Some(tag), _) => Some(tag),
        (None, Some(_)) => Some(""),
        (None, None) => Some("latest"),
    }
}

/// docker's repository grammar: an optional domain, then lowercase path components, at
/// most 255 characters in all (counting `docker.io/library/` as Docker Hub names do).
fn valid_repository(name: &str) -> bool {
    let (domain, remainder) = match name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.to_lowercase() != first =>
        {
            (first, rest)
        }
        _ => ("docker.io", name),
    };
    let full_len = if domain == "docker.io" && !remainder.contains('/') {
        domain.len() + "/library/".len() + remainder.len()
    } else {
        domain.len() + 1 + remainder.len()
    };
    full_len <= 255
        && (valid_domain(domain) || valid_path_component(domain))
        && !remainder.is_empty()
        && remainder.split('/').all(valid_path_component)
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`.
fn valid_path_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let mut i = 0;
    loop {
        let start = i;
        while i < bytes.len() && alnum(bytes[i]) {
            i += 1;
        }
        if i == start {
            return false;
        }
        if i == bytes.len() {
            return true;
        }
        let separator_start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let separator = &component[separator_start..i];
        let dashes = !separator.is_empty() && separator.bytes().all(|b| b == b'-');
        if !(matches!(separator, "." | "_" | "__") || dashes) {
            return false;
        }
    }
}

/// A host name (components of letters, digits and inner dashes) or a bracketed IPv6
/// address, with an optional `:port`.
fn valid_domain(domain: &str) -> bool {
    let (host_valid, port) = if let Some(rest) = domain.strip_prefix('[') {
        let Some((inner, port)) = rest.split_once(']') else {
            return false;
        };
        let valid = !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_hexdigit() || b == b':');
        (
            valid,
            port.strip_prefix(':')
                .or(if port.is_empty() { None } else { Some("") }),
        )
    } else {
        let (host, port) = match domain.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (domain, None),
        };
        let valid = !host.is_empty()
            && host.split('.').all(|c| {
                let bytes = c.as_bytes();
                !bytes.is_empty()
                    && bytes[0].is_ascii_alphanumeric()
                    && bytes[bytes.len() - 1].is_ascii_alphanumeric()
                    && bytes
                        .iter()
                        .all(|&b| b.is_ascii_alphanumeric() || b == b'-')
            });
        (valid, port)
    };
    host_valid && port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// The objects of the list at `key`.
fn objects_mut<'a>(
    parent: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    parent
        .get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

fn is_null(value: Option<&Value>) -> bool {
    value.is_none_or(Value::is_null)
}

/// Go's zero value of a string field: absent, `null` or `""`.
fn is_unset(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(_) => false,
    }
}

/// Go's zero value of a number field: absent, `null` or `0`.
fn is_zero(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        Some(_) => false,
    }
}

/// Sets a string field Go would see as its zero value (absent, `null` or `""`).
fn set_if_unset(map: &mut Map<String, Value>, key: &str, default: Value) {
    if is_unset(map.get(key)) {
        map.insert(key.into(), default);
    }
}

mod go_omitempty;

#[cfg(test)]
mod tests;
