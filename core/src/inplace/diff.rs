//! Revision diff -> [`UpdateSpec`] or "must recreate".

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Map, Value};

use super::types::UpdateSpec;
use crate::api::keys::CLONESET_VCT_HASH_KEY;
use crate::revision::{normalize_data, template_from_revision_data};
use kruise_compat::quantity::parse_nanos;

/// Feature gates the engine reads (passed in; the engine has no global state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InPlaceGates {
    /// `InPlaceUpdateEnvFromMetadata` (default on).
    pub env_from_metadata: bool,
    /// `InPlaceWorkloadVerticalScaling` (default off).
    pub vertical_scaling: bool,
}

impl Default for InPlaceGates {
    fn default() -> Self {
        Self {
            env_from_metadata: true,
            vertical_scaling: false,
        }
    }
}

/// Why a change cannot be made in place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecreateReason {
    /// A revision has no `spec.template`, or it does not parse.
    #[error("revision has no parsable pod template")]
    MissingTemplate,
    /// A change outside `metadata` and the allowed container fields.
    #[error("{op} {path} can not be updated in place")]
    SpecChanged {
        /// `add`, `remove` or `replace`.
        op: &'static str,
        /// JSON pointer relative to the template.
        path: String,
    },
    /// A resource change that is not a cpu/memory quantity replace.
    #[error("resource change {path} can not be made in place: {why}")]
    Resource {
        /// JSON pointer relative to the template.
        path: String,
        /// Detail.
        why: String,
    },
    /// The volumeClaimTemplates hash changed (`RecreatePodWhenChangeVCTInCloneSetGate`).
    #[error("volumeClaimTemplates changed")]
    VolumeClaimTemplatesChanged,
    /// Resources change the pod's QoS class.
    #[error("QoS class would change from {from} to {to}")]
    QosClassChanged {
        /// Old class.
        from: &'static str,
        /// New class.
        to: &'static str,
    },
}

/// Kind of a JSON-patch operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffOpKind {
    /// Member or element added.
    Add,
    /// Member or element removed.
    Remove,
    /// Value replaced.
    Replace,
}

impl DiffOpKind {
    fn as_str(self) -> &'static str {
        match self {
            DiffOpKind::Add => "add",
            DiffOpKind::Remove => "remove",
            DiffOpKind::Replace => "replace",
        }
    }
}

/// One RFC 6902 operation produced by [`json_diff`].
#[derive(Debug, Clone, PartialEq)]
pub struct DiffOp {
    /// Kind.
    pub op: DiffOpKind,
    /// JSON pointer (RFC 6901 escaped).
    pub path: String,
    /// New value (`add` / `replace`).
    pub value: Option<Value>,
}

fn escape(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

fn unescape(k: &str) -> String {
    k.replace("~1", "/").replace("~0", "~")
}

/// RFC 6902 diff with the array semantics OpenKruise's diff library uses: arrays are compared
/// element by element (index-wise), extra elements become `remove` (from the end) / `add`.
pub fn json_diff(a: &Value, b: &Value) -> Vec<DiffOp> {
    let mut ops = Vec::new();
    diff_into(a, b, "", &mut ops);
    ops
}

fn diff_into(a: &Value, b: &Value, path: &str, ops: &mut Vec<DiffOp>) {
    if a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                let p = format!("{path}/{}", escape(k));
                match y.get(k) {
                    Some(w) => diff_into(v, w, &p, ops),
                    None => ops.push(DiffOp {
                        op: DiffOpKind::Remove,
                        path: p,
                        value: None,
                    }),
                }
            }
            for (k, w) in y {
                if !x.contains_key(k) {
                    ops.push(DiffOp {
                        op: DiffOpKind::Add,
                        path: format!("{path}/{}", escape(k)),
                        value: Some(w.clone()),
                    });
                }
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            let n = x.len().min(y.len());
            for i in (n..x.len()).rev() {
                ops.push(DiffOp {
                    op: DiffOpKind::Remove,
                    path: format!("{path}/{i}"),
                    value: None,
                });
            }
            for (i, w) in y.iter().enumerate().skip(n) {
                ops.push(DiffOp {
                    op: DiffOpKind::Add,
                    path: format!("{path}/{i}"),
                    value: Some(w.clone()),
                });
            }
            for i in 0..n {
                diff_into(&x[i], &y[i], &format!("{path}/{i}"), ops);
            }
        }
        _ => ops.push(DiffOp {
            op: DiffOpKind::Replace,
            path: path.to_string(),
            value: Some(b.clone()),
        }),
    }
}

/// JSON merge-patch style diff of two metadata objects: changed members, `null` for removed.
fn merge_diff(a: &Value, b: &Value) -> Option<Value> {
    if a == b {
        return None;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut out = Map::new();
            for (k, v) in x {
                match y.get(k) {
                    Some(w) => {
                        if let Some(d) = merge_diff(v, w) {
                            out.insert(k.clone(), d);
                        }
                    }
                    None => {
                        out.insert(k.clone(), Value::Null);
                    }
                }
            }
            for (k, w) in y {
                if !x.contains_key(k) {
                    out.insert(k.clone(), w.clone());
                }
            }
            Some(Value::Object(out))
        }
        _ => Some(b.clone()),
    }
}

/// `fieldpath.SplitMaybeSubscriptedPath`: `metadata.labels['k']` -> (`metadata.labels`, `k`).
fn split_subscripted(path: &str) -> Option<(&str, &str)> {
    let s = path.strip_suffix("']")?;
    let (p, sub) = s.split_once("['")?;
    (!p.is_empty()).then_some((p, sub))
}

/// Env names never treated as metadata references (SidecarSet's own).
const EXCLUDED_ENVS: [&str; 2] = ["SIDECARSET_VERSION", "SIDECARSET_VERSION_ALT"];

fn references_meta(c: &Container, path: &str, key: &str) -> bool {
    c.env.iter().flatten().any(|e| {
        e.value.as_deref().unwrap_or("").is_empty()
            && !EXCLUDED_ENVS.contains(&e.name.as_str())
            && e.value_from
                .as_ref()
                .and_then(|vf| vf.field_ref.as_ref())
                .and_then(|fr| split_subscripted(&fr.field_path))
                .is_some_and(|(p, k)| p == path && k == key)
    })
}

fn resource_sums(
    spec: &PodSpec,
) -> (
    BTreeMap<&'static str, i128>,
    BTreeMap<&'static str, i128>,
    bool,
) {
    let mut req = BTreeMap::new();
    let mut lim = BTreeMap::new();
    let mut guaranteed = true;
    let all = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    for c in all {
        let r = c.resources.clone().unwrap_or_default();
        let mut limits_found = 0;
        for name in ["cpu", "memory"] {
            let get = |m: &Option<BTreeMap<String, Quantity>>| {
                m.as_ref()
                    .and_then(|m| m.get(name))
                    .and_then(|q| parse_nanos(&q.0))
            };
            if let Some(q) = get(&r.requests)
                && q > 0
            {
                *req.entry(name).or_insert(0) += q;
            }
            if let Some(q) = get(&r.limits)
                && q > 0
            {
                limits_found += 1;
                *lim.entry(name).or_insert(0) += q;
            }
        }
        if limits_found < 2 {
            guaranteed = false;
        }
    }
    (req, lim, guaranteed)
}

/// Kubernetes' `GetPodQOS` over a pod spec: `BestEffort`, `Guaranteed` or `Burstable`.
pub fn pod_qos_class(spec: &PodSpec) -> &'static str {
    let (req, lim, mut guaranteed) = resource_sums(spec);
    if req.is_empty() && lim.is_empty() {
        return "BestEffort";
    }
    if guaranteed {
        guaranteed = req.iter().all(|(k, v)| lim.get(k) == Some(v));
    }
    if guaranteed && req.len() == lim.len() {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

fn parse_template(v: &Value) -> Result<PodTemplateSpec, RecreateReason> {
    serde_json::from_value(v.clone()).map_err(|_| RecreateReason::MissingTemplate)
}

fn spec_changed(op: DiffOpKind, path: &str) -> RecreateReason {
    RecreateReason::SpecChanged {
        op: op.as_str(),
        path: path.to_string(),
    }
}

fn container_index(word: &str, containers: &[Container]) -> Option<usize> {
    word.parse::<usize>().ok().filter(|&i| i < containers.len())
}

/// OpenKruise's `CalculateInPlaceUpdateSpec`: the in-place spec from `old_data` to `new_data`
/// (ControllerRevision data, `{"spec":{"template":...}}`), or why the pod must be recreated.
///
/// In place: `replace` of `spec.containers[i].image`; anything under `metadata`; with
/// `vertical_scaling`, `replace` of a cpu/memory quantity under `spec.containers[i].resources`
/// that keeps the pod's QoS class. With `env_from_metadata`, changed labels/annotations that
/// containers read through the downward API are moved from the metadata patch to
/// `containerRefMetadata` (those containers restart). Everything else recreates.
pub fn calculate_update_spec(
    old_data: &Value,
    new_data: &Value,
    revision: &str,
    gates: InPlaceGates,
    grace_seconds: i32,
) -> Result<UpdateSpec, RecreateReason> {
    let old_t = template_from_revision_data(old_data).ok_or(RecreateReason::MissingTemplate)?;
    let new_t = template_from_revision_data(new_data).ok_or(RecreateReason::MissingTemplate)?;
    let old_tpl = parse_template(old_t)?;
    let new_tpl = parse_template(new_t)?;
    let old_containers = old_tpl
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or(&[]);
    let mut spec = UpdateSpec {
        revision: revision.to_string(),
        grace_seconds,
        ..UpdateSpec::default()
    };
    let mut metadata_ops = Vec::new();
    // Compare normalized templates, so Go struct-encoding artefacts in a revision OpenKruise
    // wrote (`"resources":{}`, `null`s, empty lists) never force a recreate.
    for op in json_diff(&normalize_data(old_t), &normalize_data(new_t)) {
        let path = op.path.as_str();
        if !path.starts_with("/spec/") {
            if path.starts_with("/metadata/") {
                metadata_ops.push(op);
                continue;
            }
            return Err(spec_changed(op.op, path));
        }
        let words: Vec<&str> = path.split('/').collect();
        let is_container = words.len() >= 4 && words[2] == "containers";
        if op.op == DiffOpKind::Replace && is_container && words.len() == 5 && words[4] == "image" {
            let Some(i) = container_index(words[3], old_containers) else {
                return Err(spec_changed(op.op, path));
            };
            let Some(Value::String(img)) = &op.value else {
                return Err(spec_changed(op.op, path));
            };
            spec.container_images
                .insert(old_containers[i].name.clone(), img.clone());
            continue;
        }
        if gates.vertical_scaling && is_container && words.len() >= 5 && words[4] == "resources" {
            let res_err = |why: &str| RecreateReason::Resource {
                path: path.to_string(),
                why: why.to_string(),
            };
            if words.len() != 7 {
                return Err(res_err("invalid resource path"));
            }
            let Some(i) = container_index(words[3], old_containers) else {
                return Err(res_err("invalid container index"));
            };
            if op.op != DiffOpKind::Replace {
                return Err(res_err("can not add or remove resources"));
            }
            let Some(Value::String(q)) = &op.value else {
                return Err(res_err("value is not a quantity"));
            };
            if parse_nanos(q).is_none() {
                return Err(res_err("unparsable quantity"));
            }
            let name = words[6];
            if name != "cpu" && name != "memory" {
                return Err(res_err("only cpu and memory can be resized in place"));
            }
            let entry = spec
                .container_resources
                .entry(old_containers[i].name.clone())
                .or_insert_with(|| ResourceRequirements {
                    limits: Some(BTreeMap::new()),
                    requests: Some(BTreeMap::new()),
                    ..Default::default()
                });
            let target = match words[5] {
                "limits" => entry.limits.get_or_insert_with(BTreeMap::new),
                "requests" => entry.requests.get_or_insert_with(BTreeMap::new),
                _ => return Err(res_err("not limits or requests")),
            };
            target.insert(name.to_string(), Quantity(q.clone()));
            continue;
        }
        return Err(spec_changed(op.op, path));
    }
    if gates.vertical_scaling && !spec.container_resources.is_empty() {
        let default_spec = PodSpec::default();
        let from = pod_qos_class(old_tpl.spec.as_ref().unwrap_or(&default_spec));
        let to = pod_qos_class(new_tpl.spec.as_ref().unwrap_or(&default_spec));
        if from != to {
            return Err(RecreateReason::QosClassChanged { from, to });
        }
    }
    if !metadata_ops.is_empty() {
        let mut old_meta = old_tpl.metadata.clone().unwrap_or_default();
        let mut new_meta = new_tpl.metadata.clone().unwrap_or_default();
        if gates.env_from_metadata {
            let new_containers = new_tpl
                .spec
                .as_ref()
                .map(|s| s.containers.as_slice())
                .unwrap_or(&[]);
            for op in &metadata_ops {
                if op.op == DiffOpKind::Remove {
                    continue;
                }
                let words: Vec<&str> = op.path.splitn(4, '/').collect();
                if words.len() != 4 || (words[2] != "labels" && words[2] != "annotations") {
                    continue;
                }
                let key = unescape(words[3]);
                let field = if words[2] == "labels" {
                    "metadata.labels"
                } else {
                    "metadata.annotations"
                };
                let value = match &op.value {
                    Some(Value::String(s)) => s.clone(),
                    _ => continue,
                };
                for c in new_containers {
                    if !references_meta(c, field, &key) {
                        continue;
                    }
                    let meta: &mut ObjectMeta = spec
                        .container_ref_metadata
                        .entry(c.name.clone())
                        .or_default();
                    let (m, om, nm) = if words[2] == "labels" {
                        (&mut meta.labels, &mut old_meta.labels, &mut new_meta.labels)
                    } else {
                        (
                            &mut meta.annotations,
                            &mut old_meta.annotations,
                            &mut new_meta.annotations,
                        )
                    };
                    m.get_or_insert_with(BTreeMap::new)
                        .insert(key.clone(), value.clone());
                    if let Some(o) = om.as_mut() {
                        o.remove(&key);
                    }
                    if let Some(n) = nm.as_mut() {
                        n.remove(&key);
                    }
                    spec.update_env_from_metadata = true;
                }
            }
        }
        let a = serde_json::to_value(&old_meta).unwrap_or(Value::Null);
        let b = serde_json::to_value(&new_meta).unwrap_or(Value::Null);
        let patch = match merge_diff(&a, &b) {
            Some(d) => serde_json::json!({ "metadata": d }),
            None => Value::Object(Map::new()),
        };
        spec.meta_data_patch = Some(patch);
    }
    Ok(spec)
}

/// [`calculate_update_spec`] over ControllerRevision objects, as OpenKruise calls it: either
/// revision missing -> recreate; the spec's revision is the new revision's name. With
/// `recreate_on_vct_change` (`RecreatePodWhenChangeVCTInCloneSetGate`, and the workload not
/// ignoring VCT hash differences) a differing `kruise.io/cloneset-volumeclaimtemplate-hash`
/// annotation recreates — unless either revision lacks it.
pub fn calculate_update_spec_for_revisions(
    old: Option<&ControllerRevision>,
    new: Option<&ControllerRevision>,
    gates: InPlaceGates,
    grace_seconds: i32,
    recreate_on_vct_change: bool,
) -> Result<UpdateSpec, RecreateReason> {
    let (Some(old), Some(new)) = (old, new) else {
        return Err(RecreateReason::MissingTemplate);
    };
    if recreate_on_vct_change {
        let vct = |r: &ControllerRevision| {
            r.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(CLONESET_VCT_HASH_KEY))
                .cloned()
        };
        if let (Some(a), Some(b)) = (vct(old), vct(new))
            && a != b
        {
            return Err(RecreateReason::VolumeClaimTemplatesChanged);
        }
    }
    let data = |r: &ControllerRevision| r.data.as_ref().map(|d| d.0.clone()).unwrap_or(Value::Null);
    calculate_update_spec(
        &data(old),
        &data(new),
        new.metadata.name.as_deref().unwrap_or(""),
        gates,
        grace_seconds,
    )
}
