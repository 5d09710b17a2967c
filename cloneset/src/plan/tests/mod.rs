//! Planner tests: a tiny world (pods, PVCs, revisions, a clock and a toy kubelet) driven by
//! the planner, table tests for each documented behaviour, and property tests for the bounds.

mod lessons;
mod props;
mod table;

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{
    ContainerStatus, PersistentVolumeClaim, Pod, PodCondition, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_core::api::keys::INPLACE_UPDATE_READY;
use kruise_core::revision::{NewRevision, new_controller_revision, template_revision_data};
use serde_json::{Value, json};

use super::*;
use crate::api::defaults::default_v1beta1;
use crate::api::v1beta1::CloneSet;
use kruise_core::expectations::Satisfaction;
use kruise_core::pods::CachedPod;

pub fn t0() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

/// The pod template: besides the image, fields a real pod carries that no planner reads
/// (the pod cache drops them; every plan is checked to be the same without them).
pub fn template(image: &str) -> Value {
    json!({"metadata": {"labels": {"app": "demo"}},
           "spec": {"containers": [{"name": "main", "image": image,
                                    "ports": [{"containerPort": 80}],
                                    "readinessProbe": {"httpGet": {"path": "/", "port": 80}},
                                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                    "volumes": [{"name": "data", "emptyDir": {}}],
                    "tolerations": [{"key": "dedicated", "operator": "Exists"}]}})
}

/// A defaulted v1beta1 CloneSet `demo` with `image` and the given spec overrides.
pub fn cloneset(image: &str, spec: Value) -> CloneSet {
    let mut base = json!({
        "replicas": 3,
        "selector": {"matchLabels": {"app": "demo"}},
        "template": template(image),
    });
    merge(&mut base, &spec);
    let mut cs: CloneSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
        "metadata": {"name": "demo", "namespace": "default", "uid": "cs-uid", "generation": 1},
        "spec": base,
    }))
    .unwrap();
    default_v1beta1(&mut cs.spec);
    cs
}

/// JSON merge (objects merged, `null` removes, everything else replaced).
pub fn merge(into: &mut Value, patch: &Value) {
    match (into, patch) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                if v.is_null() {
                    a.remove(k);
                } else {
                    merge(a.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

pub fn revision_for(cs: &CloneSet, number: i64) -> ControllerRevision {
    let tpl = serde_json::to_value(&cs.spec.template).unwrap();
    new_controller_revision(&NewRevision {
        parent_name: "demo".into(),
        namespace: Some("default".into()),
        data: template_revision_data(&kruise_compat::pod_defaults::go_encoded_pod_template(&tpl)),
        revision: number,
        collision_count: Some(0),
        ..Default::default()
    })
}

pub fn rev_name(r: &ControllerRevision) -> String {
    r.metadata.name.clone().unwrap()
}

/// The world the planner acts on.
pub struct World {
    pub cs: CloneSet,
    pub pods: Vec<Pod>,
    pub pvcs: Vec<PersistentVolumeClaim>,
    pub revisions: Vec<ControllerRevision>,
    pub current: String,
    pub now: Timestamp,
    pub gates: PlanGates,
    pub next_id: usize,
    /// Pods the kubelet will not make ready (crash-looping), by name.
    pub broken: Vec<String>,
    /// Images that never become ready.
    pub broken_images: Vec<String>,
    /// Images the kubelet resolves to an existing digest: tag -> digest of another tag.
    pub same_digest: BTreeMap<String, String>,
    pub last_plan: Plan,
}

impl World {
    pub fn new(cs: CloneSet) -> Self {
        let rev = revision_for(&cs, 1);
        let current = rev_name(&rev);
        World {
            cs,
            pods: vec![],
            pvcs: vec![],
            revisions: vec![rev],
            current,
            now: t0(),
            gates: PlanGates::default(),
            next_id: 0,
            broken: vec![],
            broken_images: vec![],
            same_digest: BTreeMap::new(),
            last_plan: Plan::default(),
        }
    }

    /// Starts with `n` ready pods at the current revision (by running the planner).
    pub fn with_ready(cs: CloneSet) -> Self {
        let mut w = World::new(cs);
        w.settle(30);
        w
    }

    pub fn update_revision(&self) -> &ControllerRevision {
        self.revisions.last().unwrap()
    }

    pub fn current_revision(&self) -> &ControllerRevision {
        self.revisions
            .iter()
            .find(|r| rev_name(r) == self.current)
            .unwrap_or_else(|| self.update_revision())
    }

    /// Change the template (new image) like `kubectl apply` does: new update revision.
    pub fn set_image(&mut self, image: &str) {
        self.cs.spec.template = serde_json::from_value(template(image)).unwrap();
        self.cs.metadata.generation = Some(self.cs.metadata.generation.unwrap_or(1) + 1);
        let candidate = revision_for(&self.cs, self.revisions.len() as i64 + 1);
        // Reuse an equal revision (rollback) by moving it to the end.
        if let Some(pos) = self.revisions.iter().position(|r| r.data == candidate.data) {
            let r = self.revisions.remove(pos);
            self.revisions.push(r);
        } else {
            self.revisions.push(candidate);
        }
    }

    pub fn set_template(&mut self, tpl: Value) {
        self.cs.spec.template = serde_json::from_value(tpl).unwrap();
        let candidate = revision_for(&self.cs, self.revisions.len() as i64 + 1);
        self.revisions.push(candidate);
    }

    pub fn plan(&mut self) -> Plan {
        let wanted = usize::try_from(self.cs.spec.replicas.unwrap_or(0).max(0)).unwrap_or(0);
        let count = wanted.min(MAX_CREATIONS_PER_PLAN) + 50;
        let ids: Vec<String> = (self.next_id..self.next_id + count)
            .map(|i| format!("i{i:04}"))
            .collect();
        let update = self.update_revision().clone();
        let current = self.current_revision().clone();
        // As the controller's cache holds them: decoded from the pod's JSON.
        let pods: Vec<std::sync::Arc<CachedPod>> = self
            .pods
            .iter()
            .map(|p| {
                std::sync::Arc::new(
                    serde_json::from_value(serde_json::to_value(p).unwrap()).unwrap(),
                )
            })
            .collect();
        let input = PlanInput {
            cloneset: &self.cs,
            pods: &pods,
            pvcs: &self.pvcs,
            current_revision: &current,
            update_revision: &update,
            revisions: &self.revisions,
            now: self.now,
            gates: self.gates,
            instance_ids: &ids,
            scale_expectations: &Satisfaction::Satisfied,
        };
        let p = plan(&input);
        self.last_plan = p.clone();
        p
    }

    pub fn pod_mut(&mut self, name: &str) -> Option<&mut Pod> {
        self.pods
            .iter_mut()
            .find(|p| p.metadata.name.as_deref() == Some(name))
    }

    pub fn apply(&mut self, plan: &Plan) {
        self.cs.status = Some(plan.status.clone());
        self.current = plan.status.current_revision.clone();
        for a in &plan.actions {
            self.apply_action(a);
        }
    }

    fn apply_action(&mut self, a: &Action) {
        {
            match a {
                Action::CreatePod { pod, pvcs } => {
                    let mut pod = (**pod).clone();
                    pod.metadata.creation_timestamp = Some(Time(self.now));
                    pod.metadata.uid =
                        Some(format!("uid-{}", pod.metadata.name.as_deref().unwrap()));
                    pod.status = Some(PodStatus {
                        phase: Some("Pending".into()),
                        ..Default::default()
                    });
                    self.next_id += 1;
                    self.pods.push(pod);
                    self.pvcs.extend(pvcs.iter().cloned());
                }
                Action::DeletePod { name, pvcs } => {
                    self.pods
                        .retain(|p| p.metadata.name.as_deref() != Some(name));
                    self.pvcs
                        .retain(|p| !pvcs.contains(p.metadata.name.as_ref().unwrap()));
                }
                Action::SetLifecycleState {
                    name,
                    patch,
                    status: Some(status),
                    ..
                } => {
                    // As the API server merges the status patch: conditions by type; the
                    // labels and annotations travel with it.
                    if let Some(p) = self.pod_mut(name) {
                        kruise_core::pods::merge_conditions(
                            p.status.get_or_insert_with(Default::default),
                            status,
                        );
                    }
                    self.apply_action(&Action::PatchPod {
                        name: name.clone(),
                        patch: patch.clone(),
                    });
                }
                Action::SetLifecycleState { name, patch, .. }
                | Action::PatchPod { name, patch } => {
                    let patch = patch.clone();
                    if let Some(p) = self.pod_mut(name) {
                        let mut v = serde_json::to_value(&*p).unwrap();
                        let fin = patch["metadata"].get("finalizers").cloned();
                        let mut patch = patch;
                        if let Some(obj) = patch["metadata"].as_object_mut() {
                            obj.remove("finalizers");
                        }
                        merge(&mut v, &patch);
                        if let Some(Value::Array(f)) = fin {
                            let list = v["metadata"]["finalizers"]
                                .as_array()
                                .cloned()
                                .unwrap_or_default();
                            let mut list = list;
                            for x in f {
                                if !list.contains(&x) {
                                    list.push(x);
                                }
                            }
                            v["metadata"]["finalizers"] = Value::Array(list);
                        }
                        *p = serde_json::from_value(v).unwrap();
                    }
                }
                Action::ResizePod { name, resize } => {
                    if let Some(p) = self.pod_mut(name) {
                        let v = serde_json::to_value(&*p).unwrap();
                        let merged = kruise_sim::patch::strategic_merge("Pod", v, resize).unwrap();
                        *p = serde_json::from_value(merged).unwrap();
                    }
                }
                Action::UpdateInPlace { name, update, .. } => {
                    // As the API server applies the status write, then the patches.
                    if let Some(p) = self.pod_mut(name) {
                        if let Some(st) = &update.unready_conditions {
                            kruise_core::pods::merge_conditions(
                                p.status.get_or_insert_with(Default::default),
                                st,
                            );
                        }
                        for patch in [&update.patch, &update.resize_patch].into_iter().flatten() {
                            let v = serde_json::to_value(&*p).unwrap();
                            let merged =
                                kruise_sim::patch::strategic_merge("Pod", v, patch).unwrap();
                            *p = serde_json::from_value(merged).unwrap();
                        }
                    }
                }
                Action::MarkSpecifiedDelete { name, .. } => {
                    if let Some(p) = self.pod_mut(name) {
                        p.metadata
                            .labels
                            .get_or_insert_with(BTreeMap::new)
                            .insert("apps.kruise.io/specified-delete".into(), "true".into());
                    }
                }
                Action::UpdatePodStatus { name, status } => {
                    // As the API server merges the status patch: conditions by type.
                    if let Some(p) = self.pod_mut(name) {
                        kruise_core::pods::merge_conditions(
                            p.status.get_or_insert_with(Default::default),
                            status,
                        );
                    }
                }
                Action::ReleasePod { name } => {
                    if let Some(p) = self.pod_mut(name) {
                        p.metadata.owner_references = None;
                    }
                }
                Action::DeletePvc { name } => {
                    self.pvcs
                        .retain(|p| p.metadata.name.as_deref() != Some(name));
                }
                Action::ReassignPvcToPod { .. } => {}
                Action::TruncatePodsToDelete { pods_to_delete } => {
                    self.cs.spec.scale_strategy.pods_to_delete = pods_to_delete.clone();
                }
                Action::DeleteRevision { name } => {
                    self.revisions
                        .retain(|r| r.metadata.name.as_deref() != Some(name));
                }
            }
        }
    }

    fn image_id(&self, image: &str) -> String {
        let resolved = self
            .same_digest
            .get(image)
            .cloned()
            .unwrap_or_else(|| image.to_string());
        format!("docker.io/library/x@sha256:{resolved}")
    }

    /// The toy kubelet: schedules, runs containers of the spec image, and derives `Ready`
    /// from container readiness and the readiness gates.
    pub fn kubelet(&mut self) {
        let now = self.now;
        let broken = self.broken.clone();
        let broken_images = self.broken_images.clone();
        let pods = std::mem::take(&mut self.pods);
        let mut out = Vec::new();
        for mut pod in pods {
            let name = pod.metadata.name.clone().unwrap();
            let spec = pod.spec.get_or_insert_with(Default::default);
            if spec.node_name.is_none() {
                spec.node_name = Some("node-1".into());
            }
            let containers = spec.containers.clone();
            let gates: Vec<String> = spec
                .readiness_gates
                .iter()
                .flatten()
                .map(|g| g.condition_type.clone())
                .collect();
            let mut status = pod.status.clone().unwrap_or_default();
            status.phase = Some("Running".into());
            status.pod_ip = Some("10.0.0.1".into());
            status.qos_class = Some("BestEffort".into());
            let mut statuses = status.container_statuses.clone().unwrap_or_default();
            for c in &containers {
                let image = c.image.clone().unwrap_or_default();
                let image_id = self.image_id(&image);
                match statuses.iter_mut().find(|s| s.name == c.name) {
                    Some(s) if s.image != image => {
                        s.image = image;
                        s.image_id = image_id;
                        s.restart_count += 1;
                        s.container_id = Some(format!("cid-{name}-{}", s.restart_count));
                    }
                    Some(_) => {}
                    None => statuses.push(ContainerStatus {
                        name: c.name.clone(),
                        image,
                        image_id,
                        ready: true,
                        container_id: Some(format!("cid-{name}-0")),
                        started: Some(true),
                        state: Some(serde_json::from_value(json!({"running": {}})).unwrap()),
                        ..Default::default()
                    }),
                }
            }
            let containers_ready = !broken.contains(&name)
                && !containers
                    .iter()
                    .any(|c| broken_images.contains(c.image.as_ref().unwrap()));
            for s in &mut statuses {
                s.ready = containers_ready;
            }
            status.container_statuses = Some(statuses);
            let mut conds = status.conditions.clone().unwrap_or_default();
            let set = |conds: &mut Vec<PodCondition>, ty: &str, ok: bool| {
                let s = if ok { "True" } else { "False" };
                match conds.iter_mut().find(|c| c.type_ == ty) {
                    Some(c) if c.status == s => {}
                    Some(c) => {
                        c.status = s.into();
                        c.last_transition_time = Some(Time(now));
                    }
                    None => conds.push(PodCondition {
                        type_: ty.into(),
                        status: s.into(),
                        last_transition_time: Some(Time(now)),
                        ..Default::default()
                    }),
                }
            };
            set(&mut conds, "PodScheduled", true);
            set(&mut conds, "ContainersReady", containers_ready);
            let gates_ok = gates
                .iter()
                .all(|g| conds.iter().any(|c| &c.type_ == g && c.status == "True"));
            set(&mut conds, "Ready", containers_ready && gates_ok);
            status.conditions = Some(conds);
            pod.status = Some(status);
            out.push(pod);
        }
        self.pods = out;
    }

    /// One reconcile + kubelet pass; returns the plan.
    pub fn step(&mut self) -> Plan {
        let p = self.plan();
        self.apply(&p);
        self.kubelet();
        self.now += SignedDuration::from_secs(2);
        p
    }

    /// Steps until a plan has no pod actions and status is stable (or `max` steps).
    pub fn settle(&mut self, max: usize) -> usize {
        for i in 0..max {
            let p = self.step();
            if p.actions.is_empty() && !p.extra.status_changed && p.requeue_after.is_none() {
                return i;
            }
        }
        max
    }

    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        v.sort();
        v
    }

    pub fn count_at(&self, revision: &str) -> usize {
        self.pods
            .iter()
            .filter(|p| diffs::at_revision(p, revision))
            .count()
    }

    pub fn available(&self) -> usize {
        self.pods
            .iter()
            .filter(|p| diffs::is_available(p, self.cs.spec.min_ready_seconds, self.now))
            .count()
    }

    pub fn pod(&self, name: &str) -> &Pod {
        self.pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .unwrap()
    }
}

pub fn creates(p: &Plan) -> Vec<&Pod> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreatePod { pod, .. } => Some(&**pod),
            _ => None,
        })
        .collect()
}

pub fn deletes(p: &Plan) -> Vec<String> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::DeletePod { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

pub fn in_place(p: &Plan) -> Vec<String> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::UpdateInPlace { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

pub fn marked(p: &Plan) -> Vec<String> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::MarkSpecifiedDelete { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

#[allow(dead_code)]
pub fn has_gate(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.condition_type == INPLACE_UPDATE_READY))
}
