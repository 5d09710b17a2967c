//! Applying an [`UpdateSpec`] to a pod and producing the writes the controller sends.

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Container, Pod, PodStatus, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde_json::{Map, Value, json};

use super::diff::{InPlaceGates, RecreateReason, calculate_update_spec};
use super::readiness::{needs_unready, not_ready_status};
use super::types::{
    ContainerBatch, ContainerStatusRecord, InPlaceUpdateState, PreCheckBeforeNext, UpdateSpec,
};
use crate::api::keys::{
    ENV_CONTAINER_BARRIER, INPLACE_UPDATE_GRACE_KEY, INPLACE_UPDATE_GRACE_KEY_OLD,
    INPLACE_UPDATE_STATE_KEY, INPLACE_UPDATE_STATE_KEY_OLD,
};
use kruise_compat::quantity::quantities_equal;

/// A container's launch priority: the number after `p_` in the `configMapKeyRef.key` of its
/// `KRUISE_CONTAINER_BARRIER` env (unparsable: 0); `None` without that env.
pub fn container_priority(c: &Container) -> Option<i32> {
    let e = c
        .env
        .iter()
        .flatten()
        .find(|e| e.name == ENV_CONTAINER_BARRIER)?;
    let key = e
        .value_from
        .as_ref()
        .and_then(|v| v.config_map_key_ref.as_ref())
        .map(|r| r.key.as_str())
        .unwrap_or("");
    Some(key.get(2..).and_then(|s| s.parse().ok()).unwrap_or(0))
}

/// RFC 7386 JSON merge patch.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

fn apply_meta_patch(meta: &ObjectMeta, patch: &Value) -> ObjectMeta {
    let Some(mp) = patch.get("metadata") else {
        return meta.clone();
    };
    let mut v = serde_json::to_value(meta).unwrap_or(Value::Null);
    merge_patch(&mut v, mp);
    serde_json::from_value(v).unwrap_or_else(|_| meta.clone())
}

/// Containers sharing a changed label/annotation key with a batch container join the batch
/// (transitively).
fn add_metadata_sharers(batch: &mut BTreeSet<String>, ref_meta: &BTreeMap<String, ObjectMeta>) {
    loop {
        let keys = |m: &ObjectMeta| -> (BTreeSet<String>, BTreeSet<String>) {
            (
                m.labels.iter().flatten().map(|(k, _)| k.clone()).collect(),
                m.annotations
                    .iter()
                    .flatten()
                    .map(|(k, _)| k.clone())
                    .collect(),
            )
        };
        let mut labels = BTreeSet::new();
        let mut annos = BTreeSet::new();
        for c in batch.iter() {
            if let Some(m) = ref_meta.get(c) {
                let (l, a) = keys(m);
                labels.extend(l);
                annos.extend(a);
            }
        }
        let added: Vec<String> = ref_meta
            .iter()
            .filter(|(c, _)| !batch.contains(*c))
            .filter(|(_, m)| {
                let (l, a) = keys(m);
                !l.is_disjoint(&labels) || !a.is_disjoint(&annos)
            })
            .map(|(c, _)| c.clone())
            .collect();
        if added.is_empty() {
            return;
        }
        batch.extend(added);
    }
}

/// OpenKruise's `PatchSpecToPod`: apply this batch of `spec` to a copy of `pod` — the metadata
/// patch, then, for the containers in this batch (containers without launch priority, plus the
/// highest-priority ones, plus those sharing changed metadata keys), new images, ref-metadata
/// labels/annotations and resources; later batches go to `state.next*`. Records imageIDs
/// (first time only), the batch, and writes the state annotation. Returns the pod and the
/// resources to resize.
pub fn apply_spec_to_pod(
    pod: &Pod,
    spec: &UpdateSpec,
    state: &mut InPlaceUpdateState,
    now: Timestamp,
) -> (Pod, BTreeMap<String, ResourceRequirements>) {
    let mut pod = pod.clone();
    state.next_container_images.clear();
    state.next_container_ref_metadata.clear();
    state.next_container_resources.clear();
    if let Some(p) = &spec.meta_data_patch {
        pod.metadata = apply_meta_patch(&pod.metadata, p);
    }
    let containers: Vec<Container> = pod
        .spec
        .as_ref()
        .map(|s| s.containers.clone())
        .unwrap_or_default();
    let mut batch = BTreeSet::new();
    let mut highest: Option<i32> = None;
    let mut highest_names = Vec::new();
    for c in &containers {
        let touched = spec.container_images.contains_key(&c.name)
            || spec.container_ref_metadata.contains_key(&c.name)
            || spec.container_resources.contains_key(&c.name);
        if !touched {
            continue;
        }
        match container_priority(c) {
            None => {
                batch.insert(c.name.clone());
            }
            Some(p) if highest.is_none_or(|h| h < p) => {
                highest = Some(p);
                highest_names = vec![c.name.clone()];
            }
            Some(p) if highest == Some(p) => highest_names.push(c.name.clone()),
            Some(_) => {}
        }
    }
    batch.extend(highest_names);
    add_metadata_sharers(&mut batch, &spec.container_ref_metadata);

    let mut image_changed = BTreeSet::new();
    if let Some(ps) = pod.spec.as_mut() {
        for c in ps.containers.iter_mut() {
            if let Some(img) = spec.container_images.get(&c.name) {
                if batch.contains(&c.name) {
                    c.image = Some(img.clone());
                    image_changed.insert(c.name.clone());
                } else {
                    state
                        .next_container_images
                        .insert(c.name.clone(), img.clone());
                }
            }
        }
    }
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    for cs in &statuses {
        if image_changed.contains(&cs.name) {
            state
                .last_container_statuses
                .get_or_insert_with(BTreeMap::new)
                .entry(cs.name.clone())
                .or_insert_with(|| ContainerStatusRecord {
                    image_id: cs.image_id.clone(),
                });
        }
    }
    let mut expected = BTreeMap::new();
    if let Some(ps) = pod.spec.as_mut() {
        for c in ps.containers.iter_mut() {
            let Some(r) = spec.container_resources.get(&c.name) else {
                continue;
            };
            if batch.contains(&c.name) {
                let res = c.resources.get_or_insert_with(Default::default);
                for (src, dst) in [
                    (&r.limits, &mut res.limits),
                    (&r.requests, &mut res.requests),
                ] {
                    for (k, q) in src.iter().flatten() {
                        if k == "cpu" || k == "memory" {
                            dst.get_or_insert_with(BTreeMap::new)
                                .insert(k.clone(), q.clone());
                        }
                    }
                }
                expected.insert(c.name.clone(), r.clone());
            } else {
                state
                    .next_container_resources
                    .insert(c.name.clone(), r.clone());
            }
        }
    }
    for (c, m) in &spec.container_ref_metadata {
        if batch.contains(c) {
            for (k, v) in m.labels.iter().flatten() {
                pod.metadata
                    .labels
                    .get_or_insert_with(BTreeMap::new)
                    .insert(k.clone(), v.clone());
            }
            for (k, v) in m.annotations.iter().flatten() {
                pod.metadata
                    .annotations
                    .get_or_insert_with(BTreeMap::new)
                    .insert(k.clone(), v.clone());
            }
        } else {
            state
                .next_container_ref_metadata
                .insert(c.clone(), m.clone());
        }
    }
    let batch_names: Vec<String> = batch.into_iter().collect();
    state.pre_check_before_next = state.has_next_batch().then(|| PreCheckBeforeNext {
        containers_required_ready: batch_names.clone(),
    });
    state.container_batches_record.push(ContainerBatch {
        timestamp: Time(now),
        containers: batch_names,
    });
    set_state_annotation(&mut pod, state);
    (pod, expected)
}

fn set_state_annotation(pod: &mut Pod, state: &InPlaceUpdateState) {
    let a = pod.metadata.annotations.get_or_insert_with(BTreeMap::new);
    a.insert(
        INPLACE_UPDATE_STATE_KEY.into(),
        serde_json::to_string(state).unwrap_or_default(),
    );
    a.remove(INPLACE_UPDATE_STATE_KEY_OLD);
}

pub(super) fn remove_grace(pod: &mut Pod) {
    if let Some(a) = pod.metadata.annotations.as_mut() {
        a.remove(INPLACE_UPDATE_GRACE_KEY);
        a.remove(INPLACE_UPDATE_GRACE_KEY_OLD);
    }
}

fn map_diff(
    a: Option<&BTreeMap<String, String>>,
    b: Option<&BTreeMap<String, String>>,
) -> Option<Value> {
    let empty = BTreeMap::new();
    let (a, b) = (a.unwrap_or(&empty), b.unwrap_or(&empty));
    let mut out = Map::new();
    for k in a.keys() {
        if !b.contains_key(k) {
            out.insert(k.clone(), Value::Null);
        }
    }
    for (k, v) in b {
        if a.get(k) != Some(v) {
            out.insert(k.clone(), Value::String(v.clone()));
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// The strategic-merge patch from `old` to `new` covering what the engine changes: labels and
/// annotations (`null` removes) and container images (merged by container name). `None` when
/// nothing changed. It carries no resourceVersion: the engine's status write just before it
/// (`InPlaceUpdateReady=False`) makes the kubelet write status too, so a precondition would
/// fail almost every time; callers plan from a cache at least as new as their own last write
/// (resourceVersion expectations), and the patch names only the fields it changes.
pub fn pod_patch(old: &Pod, new: &Pod) -> Option<Value> {
    let mut meta = Map::new();
    if let Some(d) = map_diff(old.metadata.labels.as_ref(), new.metadata.labels.as_ref()) {
        meta.insert("labels".into(), d);
    }
    if let Some(d) = map_diff(
        old.metadata.annotations.as_ref(),
        new.metadata.annotations.as_ref(),
    ) {
        meta.insert("annotations".into(), d);
    }
    let mut containers = Vec::new();
    let old_cs = old
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or(&[]);
    for c in new
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or(&[])
    {
        let before = old_cs
            .iter()
            .find(|o| o.name == c.name)
            .and_then(|o| o.image.as_ref());
        if let Some(img) = c.image.as_ref().filter(|i| Some(*i) != before) {
            containers.push(json!({"name": c.name, "image": img}));
        }
    }
    if meta.is_empty() && containers.is_empty() {
        return None;
    }
    let mut patch = json!({ "metadata": meta });
    if !containers.is_empty() {
        patch["spec"] = json!({ "containers": containers });
    }
    Some(patch)
}

/// The strategic-merge patch for the pod `resize` subresource (Kubernetes >= 1.32): per
/// container only the cpu/memory values that differ from the pod's current spec.
fn resize_patch(pod: &Pod, expected: &BTreeMap<String, ResourceRequirements>) -> Option<Value> {
    let mut containers = Vec::new();
    for c in pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or(&[])
    {
        let Some(r) = expected.get(&c.name) else {
            continue;
        };
        let cur = c.resources.clone().unwrap_or_default();
        let mut res = Map::new();
        for (field, want, have) in [
            ("limits", &r.limits, &cur.limits),
            ("requests", &r.requests, &cur.requests),
        ] {
            let mut m = Map::new();
            for (k, q) in want.iter().flatten() {
                if k != "cpu" && k != "memory" {
                    continue;
                }
                let same = have
                    .as_ref()
                    .and_then(|h| h.get(k))
                    .is_some_and(|h| quantities_equal(&h.0, &q.0));
                if !same {
                    m.insert(k.clone(), Value::String(q.0.clone()));
                }
            }
            if !m.is_empty() {
                res.insert(field.into(), Value::Object(m));
            }
        }
        if !res.is_empty() {
            containers.push(json!({"name": c.name, "resources": res}));
        }
    }
    (!containers.is_empty()).then(|| json!({"spec": {"containers": containers}}))
}

/// A pod write: the full desired pod, the patch to send, and an optional resize patch.
#[derive(Debug, Clone, PartialEq)]
pub struct PodWrite {
    /// The pod as it should be after the write (for the caller's cache / expectations).
    pub pod: Pod,
    /// Strategic-merge patch for the pod (see [`pod_patch`]); `None` if nothing changed.
    pub patch: Option<Value>,
    /// Strategic-merge patch for the `resize` subresource, when resources change.
    pub resize_patch: Option<Value>,
}

pub(super) fn pod_write(
    old: &Pod,
    new: Pod,
    expected: &BTreeMap<String, ResourceRequirements>,
) -> PodWrite {
    PodWrite {
        patch: pod_patch(old, &new),
        resize_patch: resize_patch(old, expected),
        pod: new,
    }
}

/// Input of [`begin_update`].
#[derive(Debug, Clone, Default)]
pub struct UpdateRequest {
    /// Data of the pod's current revision.
    pub old_revision_data: Value,
    /// Data of the target revision.
    pub new_revision_data: Value,
    /// Target revision string recorded in the state (the ControllerRevision name, or e.g. a
    /// DaemonSet hash).
    pub revision: String,
    /// Feature gates.
    pub gates: InPlaceGates,
    /// `inPlaceUpdateStrategy.gracePeriodSeconds`.
    pub grace_period_seconds: i32,
    /// Revision labels to write (see `revision::pod_revision_labels`).
    pub revision_labels: BTreeMap<String, String>,
    /// Extra labels written in the same update (e.g. lifecycle state `Updating`).
    pub extra_labels: BTreeMap<String, String>,
    /// Extra annotations written in the same update (e.g. lifecycle timestamp).
    pub extra_annotations: BTreeMap<String, String>,
}

impl UpdateRequest {
    /// The request that moves a pod from revision `old` to `target`: their stored data (empty
    /// when absent), recorded under `target`'s name. The caller adds gates, grace, labels.
    pub fn between(old: &ControllerRevision, target: &ControllerRevision) -> Self {
        let data =
            |r: &ControllerRevision| r.data.as_ref().map(|d| d.0.clone()).unwrap_or_default();
        UpdateRequest {
            old_revision_data: data(old),
            new_revision_data: data(target),
            revision: target.metadata.name.clone().unwrap_or_default(),
            ..UpdateRequest::default()
        }
    }

    /// Moves the pod's lifecycle state to `Updating` (label and timestamp) in the same write.
    pub fn mark_updating(&mut self, now: Timestamp) {
        crate::pods::lifecycle::mark_state(
            &mut self.extra_labels,
            &mut self.extra_annotations,
            crate::api::LifecycleState::Updating,
            now,
        );
    }
}

/// Result of [`begin_update`]: the writes, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct BeginUpdate {
    /// The computed spec.
    pub spec: UpdateSpec,
    /// 1. Status to write first (`InPlaceUpdateReady=False`), when the pod needs to go unready.
    pub unready_status: Option<PodStatus>,
    /// 2. The pod write: revision labels, state annotation, and either the spec change or the
    ///    grace annotation.
    pub write: PodWrite,
    /// Requeue after the grace period.
    pub requeue_after: Option<SignedDuration>,
}

/// The requests a [`BeginUpdate`] comes down to, without the pod copies it was computed
/// from: what a plan holding thousands of in-place updates keeps (a `BeginUpdate` carries
/// a whole pod and its status, ~15 KB).
#[derive(Debug, Clone, PartialEq)]
pub struct InPlaceWrites {
    /// 1. The status conditions that change when the pod goes unready
    ///    (`InPlaceUpdateReady=False`, and `Ready` with it), to write first.
    pub unready_conditions: Option<PodStatus>,
    /// 3. Strategic-merge patch for the pod; `None` if nothing changed.
    pub patch: Option<Value>,
    /// 2. Strategic-merge patch for the `resize` subresource, when resources change: sent
    ///    before the patch, since a pod patched to the new revision whose resize then
    ///    failed would look complete (its spec and status resources agree) and never be
    ///    resized.
    pub resize_patch: Option<Value>,
    /// Requeue after the grace period.
    pub requeue_after: Option<SignedDuration>,
}

impl BeginUpdate {
    /// The requests to send for this update of `pod` (the pod it was planned from).
    pub fn into_writes<P: crate::pods::PodView + ?Sized>(self, pod: &P) -> InPlaceWrites {
        InPlaceWrites {
            unready_conditions: self.unready_status.map(|status| PodStatus {
                conditions: Some(
                    crate::pods::changed_conditions(pod, &status)
                        .cloned()
                        .collect(),
                ),
                ..Default::default()
            }),
            patch: self.write.patch,
            resize_patch: self.write.resize_patch,
            requeue_after: self.requeue_after,
        }
    }
}

/// OpenKruise's `Update`: plan an in-place update of `pod`, or say why it must be recreated.
pub fn begin_update<P: crate::pods::PodView + ?Sized>(
    view: &P,
    req: &UpdateRequest,
    now: Timestamp,
) -> Result<BeginUpdate, RecreateReason> {
    let spec = calculate_update_spec(
        &req.old_revision_data,
        &req.new_revision_data,
        &req.revision,
        req.gates,
        req.grace_period_seconds,
    )?;
    let unready_status =
        needs_unready(view, &spec, req.gates.vertical_scaling).then(|| not_ready_status(view, now));
    let pod = &view.to_pod();
    let mut new = pod.clone();
    let labels = new.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.extend(req.revision_labels.clone());
    labels.extend(req.extra_labels.clone());
    new.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .extend(req.extra_annotations.clone());
    let mut state = InPlaceUpdateState {
        revision: spec.revision.clone(),
        update_timestamp: Time(now),
        last_container_statuses: None,
        update_env_from_metadata: spec.update_env_from_metadata,
        update_resources: !spec.container_resources.is_empty(),
        update_images: !spec.container_images.is_empty(),
        next_container_images: BTreeMap::new(),
        next_container_ref_metadata: BTreeMap::new(),
        next_container_resources: BTreeMap::new(),
        pre_check_before_next: None,
        container_batches_record: Vec::new(),
    };
    set_state_annotation(&mut new, &state);
    let mut expected = BTreeMap::new();
    if spec.grace_seconds <= 0 {
        let (patched, exp) = apply_spec_to_pod(&new, &spec, &mut state, now);
        new = patched;
        expected = exp;
        remove_grace(&mut new);
    } else {
        new.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(
                INPLACE_UPDATE_GRACE_KEY.into(),
                serde_json::to_string(&spec).unwrap_or_default(),
            );
    }
    let requeue_after = (req.grace_period_seconds > 0)
        .then(|| SignedDuration::from_secs(i64::from(req.grace_period_seconds)));
    Ok(BeginUpdate {
        write: pod_write(pod, new, &expected),
        spec,
        unready_status,
        requeue_after,
    })
}
