//! Planner tests: a small world (pods, revisions, a clock, a toy kubelet and a delete that
//! can hang in Terminating) driven by the planner; table tests per behaviour and property
//! tests for the bounds.

mod bounds;
mod claims;
mod lifecycle;
mod props;
mod resize;
mod table;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{
    ContainerStatus, PersistentVolumeClaim, Pod, PodCondition, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_core::expectations::Satisfaction;
use kruise_core::pods::CachedPod;
use serde_json::{Value, json};

use super::*;
use crate::api::defaults::{DefaultingGates, default_spec};

pub fn t0() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

pub fn template(image: &str) -> Value {
    json!({"metadata": {"labels": {"app": "demo"}},
           "spec": {"readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
                    "containers": [{"name": "main", "image": image}]}})
}

/// A defaulted StatefulSet `demo` (OrderedReady, 3 replicas) with `spec` merged in.
pub fn statefulset(image: &str, spec: Value) -> StatefulSet {
    let mut base = json!({
        "replicas": 3,
        "serviceName": "demo-svc",
        "selector": {"matchLabels": {"app": "demo"}},
        "template": template(image),
    });
    json_patch::merge(&mut base, &spec);
    let mut set: StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
        "metadata": {"name": "demo", "namespace": "default", "uid": "sts-uid", "generation": 1},
        "spec": base,
    }))
    .unwrap();
    default_spec(&mut set.spec, DefaultingGates::default());
    set
}

/// The world the planner acts on.
pub struct World {
    pub set: StatefulSet,
    pub pods: BTreeMap<String, Pod>,
    /// Claims by name; a toy garbage collector deletes those whose owners are all gone.
    pub claims: BTreeMap<String, PersistentVolumeClaim>,
    /// StorageClasses that allow expansion.
    pub expandable_classes: BTreeSet<String>,
    pub revisions: Vec<ControllerRevision>,
    pub now: Timestamp,
    pub gates: PlanGates,
    /// Pods the kubelet never makes ready.
    pub broken: BTreeSet<String>,
    /// Deleted pods that stay Terminating.
    pub stuck: BTreeSet<String>,
    pub update_expectations: BTreeMap<String, String>,
    /// Every plan so far.
    pub plans: Vec<Plan>,
    /// How many pods each name was created as.
    pub created: BTreeMap<String, usize>,
}

impl World {
    pub fn new(set: StatefulSet) -> Self {
        let mut w = World {
            set,
            pods: BTreeMap::new(),
            claims: BTreeMap::new(),
            expandable_classes: BTreeSet::new(),
            revisions: vec![],
            now: t0(),
            gates: PlanGates::default(),
            broken: BTreeSet::new(),
            stuck: BTreeSet::new(),
            update_expectations: BTreeMap::new(),
            plans: vec![],
            created: BTreeMap::new(),
        };
        w.sync_revisions();
        w
    }

    /// Runs until settled: every ordinal ready at the current template.
    pub fn ready(set: StatefulSet) -> Self {
        let mut w = World::new(set);
        w.settle(40);
        w
    }

    /// What the controller's revision step does.
    pub fn sync_revisions(&mut self) -> RevisionPlan {
        let planned = plan_revisions(&self.set, &self.revisions);
        match &planned.write {
            RevisionWrite::None => {}
            RevisionWrite::Update(r) => {
                self.revisions
                    .retain(|x| x.metadata.name != r.metadata.name);
                self.revisions.push((**r).clone());
            }
            RevisionWrite::Create(r) => self.revisions.push((**r).clone()),
        }
        planned
    }

    pub fn set_image(&mut self, image: &str) {
        self.set.spec.template = serde_json::from_value(template(image)).unwrap();
        self.set.metadata.generation = Some(self.set.metadata.generation.unwrap_or(1) + 1);
        self.sync_revisions();
    }

    pub fn update_revision(&self) -> String {
        plan_revisions(&self.set, &self.revisions)
            .update
            .metadata
            .name
            .unwrap()
    }

    pub fn cached(&self) -> Vec<Arc<CachedPod>> {
        self.pods
            .values()
            .map(|p| Arc::new(CachedPod::from_pod(p.clone())))
            .collect()
    }

    pub fn plan(&mut self) -> Plan {
        let revisions = self.sync_revisions();
        let pods = self.cached();
        // What the controller's observe step does before each plan.
        crate::plan::keep_unseen_updates(&mut self.update_expectations, &pods);
        let claims: Vec<Arc<PersistentVolumeClaim>> =
            self.claims.values().cloned().map(Arc::new).collect();
        let input = PlanInput {
            set: &self.set,
            pods: &pods,
            claims: &claims,
            expandable_classes: &self.expandable_classes,
            current_revision: &revisions.current,
            update_revision: &revisions.update,
            revisions: &self.revisions,
            now: self.now,
            gates: self.gates,
            scale_expectations: &Satisfaction::Satisfied,
            update_expectations: &self.update_expectations,
        };
        plan(&input)
    }

    pub fn apply(&mut self, plan: &Plan) {
        self.set.status = Some(plan.status.clone());
        for action in &plan.actions {
            self.apply_action(action);
        }
        self.collect_garbage();
        self.plans.push(plan.clone());
    }

    fn apply_action(&mut self, action: &Action) {
        match action {
            Action::CreatePod { pod, claims } => {
                self.create_claims(claims);
                let mut pod = (**pod).clone();
                let name = pod.metadata.name.clone().unwrap();
                assert!(!self.pods.contains_key(&name), "{name} created twice");
                *self.created.entry(name.clone()).or_default() += 1;
                pod.metadata.creation_timestamp = Some(Time(self.now));
                pod.metadata.uid = Some(format!("uid-{name}-{}", self.created[&name]));
                pod.status = Some(PodStatus {
                    phase: Some("Pending".into()),
                    ..Default::default()
                });
                self.pods.insert(name, pod);
            }
            Action::DeletePod { name, .. } => {
                if self.stuck.contains(name) {
                    if let Some(p) = self.pods.get_mut(name) {
                        p.metadata.deletion_timestamp = Some(Time(self.now));
                    }
                } else {
                    self.pods.remove(name);
                }
            }
            Action::PatchPod { name, patch }
            | Action::ResizePod {
                name,
                resize: patch,
            } => self.patch(name, patch),
            Action::UpdateInPlace {
                name,
                revision,
                update,
            } => {
                if let Some(p) = self.pods.get_mut(name)
                    && let Some(st) = &update.unready_conditions
                {
                    kruise_core::pods::merge_conditions(
                        p.status.get_or_insert_with(Default::default),
                        st,
                    );
                }
                if let Some(patch) = &update.patch {
                    self.patch(name, patch);
                }
                self.update_expectations
                    .insert(name.clone(), revision.clone());
            }
            Action::UpdatePodStatus {
                name,
                status,
                metadata,
            } => {
                if let Some(p) = self.pods.get_mut(name) {
                    kruise_core::pods::merge_conditions(
                        p.status.get_or_insert_with(Default::default),
                        status,
                    );
                }
                if let Some(patch) = metadata {
                    self.patch(name, patch);
                }
            }
            Action::SetPodOwners {
                name,
                owner_references,
                ..
            } => {
                if let Some(p) = self.pods.get_mut(name) {
                    p.metadata.owner_references = Some(owner_references.clone());
                }
            }
            Action::CreateClaims { claims, .. } => self.create_claims(claims),
            Action::SetClaimOwners {
                name,
                owner_references,
                ..
            } => {
                if let Some(c) = self.claims.get_mut(name) {
                    c.metadata.owner_references = Some(owner_references.clone());
                }
            }
            Action::ExpandClaim { name, patch, .. } => {
                if let Some(c) = self.claims.get_mut(name) {
                    let mut v = serde_json::to_value(&*c).unwrap();
                    json_patch::merge(&mut v, patch);
                    *c = serde_json::from_value(v).unwrap();
                }
            }
            Action::DeleteRevision { name } => {
                self.revisions
                    .retain(|r| r.metadata.name.as_deref() != Some(name));
            }
        }
    }

    fn create_claims(&mut self, claims: &[PersistentVolumeClaim]) {
        for claim in claims {
            let name = claim.metadata.name.clone().unwrap();
            let mut claim = claim.clone();
            claim.metadata.uid = Some(format!("uid-{name}"));
            self.claims.entry(name).or_insert(claim);
        }
    }

    /// Deletes the claims that have owners, none of which exists any more (the set's uid
    /// is `sts-uid`; `set_deleted` drops it).
    pub fn collect_garbage(&mut self) {
        let mut live: BTreeSet<String> = self
            .pods
            .values()
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        if self.set.metadata.deletion_timestamp.is_none() {
            live.insert(self.set.metadata.uid.clone().unwrap_or_default());
        }
        self.claims.retain(|_, c| {
            let owners = c.metadata.owner_references.clone().unwrap_or_default();
            owners.is_empty() || owners.iter().any(|o| live.contains(&o.uid))
        });
    }

    /// The uids of `claim`'s owners.
    pub fn claim_owners(&self, claim: &str) -> Vec<String> {
        self.claims[claim]
            .metadata
            .owner_references
            .iter()
            .flatten()
            .map(|o| o.uid.clone())
            .collect()
    }

    fn patch(&mut self, name: &str, patch: &Value) {
        if let Some(p) = self.pods.get_mut(name) {
            let v = serde_json::to_value(&*p).unwrap();
            let merged = kruise_sim::patch::strategic_merge("Pod", v, patch).unwrap();
            *p = serde_json::from_value(merged).unwrap();
        }
    }

    /// The toy kubelet: runs the spec's images (a changed image restarts its container),
    /// Ready from container readiness and the readiness gates.
    pub fn kubelet(&mut self) {
        let now = self.now;
        for (name, pod) in self.pods.iter_mut() {
            if pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let spec = pod.spec.clone().unwrap_or_default();
            let mut status = pod.status.clone().unwrap_or_default();
            status.phase = Some("Running".into());
            let mut statuses = status.container_statuses.clone().unwrap_or_default();
            for c in &spec.containers {
                let image = c.image.clone().unwrap_or_default();
                match statuses.iter_mut().find(|s| s.name == c.name) {
                    Some(s) if s.image != image => {
                        s.image_id = format!("sha-{image}");
                        s.image = image;
                        s.restart_count += 1;
                        s.container_id = Some(format!("cid-{name}-{}", s.restart_count));
                    }
                    Some(_) => {}
                    None => statuses.push(ContainerStatus {
                        name: c.name.clone(),
                        image_id: format!("sha-{image}"),
                        image,
                        container_id: Some(format!("cid-{name}-0")),
                        ..Default::default()
                    }),
                }
            }
            let ok = !self.broken.contains(name);
            for s in &mut statuses {
                s.ready = ok;
            }
            status.container_statuses = Some(statuses);
            let mut conds = status.conditions.clone().unwrap_or_default();
            let gates_ok = spec.readiness_gates.iter().flatten().all(|g| {
                conds
                    .iter()
                    .any(|c| c.type_ == g.condition_type && c.status == "True")
            });
            let ready = if ok && gates_ok { "True" } else { "False" };
            match conds.iter_mut().find(|c| c.type_ == "Ready") {
                Some(c) if c.status == ready => {}
                Some(c) => {
                    c.status = ready.into();
                    c.last_transition_time = Some(Time(now));
                }
                None => conds.push(PodCondition {
                    type_: "Ready".into(),
                    status: ready.into(),
                    last_transition_time: Some(Time(now)),
                    ..Default::default()
                }),
            }
            status.conditions = Some(conds);
            pod.status = Some(status);
        }
    }

    /// One reconcile then one kubelet pass, two seconds later.
    pub fn step(&mut self) -> Plan {
        let p = self.plan();
        self.apply(&p);
        self.kubelet();
        self.now += SignedDuration::from_secs(2);
        p
    }

    /// Steps until a plan has nothing to do (or `max` steps).
    pub fn settle(&mut self, max: usize) {
        for _ in 0..max {
            let p = self.step();
            if p.actions.is_empty() && p.requeue_after.is_none() {
                return;
            }
        }
    }

    pub fn names(&self) -> Vec<String> {
        self.pods.keys().cloned().collect()
    }

    pub fn revision_of(&self, name: &str) -> String {
        self.pods[name].metadata.labels.as_ref().unwrap()["controller-revision-hash"].clone()
    }

    pub fn is_ready(&self, name: &str) -> bool {
        let pod = &self.pods[name];
        pod.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            && pod.metadata.deletion_timestamp.is_none()
    }
}

pub fn creates(p: &Plan) -> Vec<String> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreatePod { pod, .. } => pod.metadata.name.clone(),
            _ => None,
        })
        .collect()
}

pub fn deletes(p: &Plan) -> Vec<(String, DeleteReason)> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::DeletePod { name, reason } => Some((name.clone(), *reason)),
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

pub fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}
