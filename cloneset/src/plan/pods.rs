//! Building pods and PVCs for new instances, instance ids, PVC clean-up.

use kruise_core::pods::{CachedPod, LabelsAndFinalizers as _, PodView as _};
use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kruise_core::api::LifecycleState;
use kruise_core::api::keys::CLONESET_INSTANCE_ID_KEY;
use kruise_core::inplace::inject_readiness_gate;
use kruise_core::pods::lifecycle::mark_state;
use kruise_core::revision::{pod_revision_labels, template_from_revision_data};

use super::Action;
use crate::api::v1beta1::CloneSet;

/// A pod's name (`""` when unset).
pub fn name_of(pod: &CachedPod) -> &str {
    pod.name()
}

/// A revision's name (`""` when unset).
pub fn name_of_revision(rev: &ControllerRevision) -> &str {
    rev.metadata.name.as_deref().unwrap_or_default()
}

fn instance_id(meta: &ObjectMeta) -> Option<&str> {
    meta.labels
        .as_ref()?
        .get(CLONESET_INSTANCE_ID_KEY)
        .map(String::as_str)
        .filter(|s| !s.is_empty())
}

fn pod_instance_id(pod: &CachedPod) -> Option<&str> {
    pod.label(CLONESET_INSTANCE_ID_KEY)
        .filter(|s| !s.is_empty())
}

/// `<vct>-<cloneset>-<instance-id>`.
pub fn pvc_name(vct: &str, cloneset: &str, id: &str) -> String {
    format!("{vct}-{cloneset}-{id}")
}

fn owner_ref(cs: &CloneSet) -> OwnerReference {
    OwnerReference {
        api_version: kruise_core::api::version::APPS_V1BETA1.into(),
        kind: crate::api::KIND.into(),
        name: cs.metadata.name.clone().unwrap_or_default(),
        uid: cs.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The pod template of a revision: the CloneSet's own template for the update revision, the
/// revision data's template otherwise (OpenKruise's `ApplyRevision`).
pub fn template_for(
    cs: &CloneSet,
    revision: &ControllerRevision,
    update_revision: &str,
) -> Option<PodTemplateSpec> {
    if name_of_revision(revision) == update_revision {
        return Some(cs.spec.template.clone());
    }
    let data = revision.data.as_ref()?;
    let mut template = template_from_revision_data(&data.0)?.clone();
    if let Some(obj) = template.as_object_mut() {
        obj.remove("$patch");
    }
    serde_json::from_value(template).ok()
}

/// A new pod for instance `id` at `revision`: template labels/annotations/finalizers/spec,
/// controller owner reference, name `<cloneset>-<id>`, instance-id and revision labels, the
/// `InPlaceUpdateReady` readiness gate, PVC volumes for the claim templates (replacing
/// same-named template volumes) and lifecycle state `PreparingNormal`.
pub fn new_pod(
    cs: &CloneSet,
    template: &PodTemplateSpec,
    revision: &str,
    id: &str,
    short_hash: bool,
    now: Timestamp,
) -> Pod {
    let cs_name = cs.metadata.name.clone().unwrap_or_default();
    let tmeta = template.metadata.clone().unwrap_or_default();
    let mut labels = tmeta.labels.unwrap_or_default();
    labels.extend(pod_revision_labels(revision, short_hash));
    labels.insert(CLONESET_INSTANCE_ID_KEY.into(), id.into());
    let mut annotations = tmeta.annotations.unwrap_or_default();
    mark_state(
        &mut labels,
        &mut annotations,
        LifecycleState::PreparingNormal,
        now,
    );
    let mut pod = Pod {
        metadata: ObjectMeta {
            name: Some(format!("{cs_name}-{id}")),
            namespace: cs.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: Some(annotations),
            finalizers: tmeta.finalizers,
            owner_references: Some(vec![owner_ref(cs)]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    };
    inject_readiness_gate(&mut pod);
    if !cs.spec.volume_claim_templates.is_empty()
        && let Some(spec) = pod.spec.as_mut()
    {
        let vcts: BTreeSet<String> = cs
            .spec
            .volume_claim_templates
            .iter()
            .filter_map(|v| v.metadata.name.clone())
            .collect();
        let volumes = spec.volumes.get_or_insert_with(Vec::new);
        volumes.retain(|v| !vcts.contains(&v.name));
        for vct in &vcts {
            volumes.push(Volume {
                name: vct.clone(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: pvc_name(vct, &cs_name, id),
                    read_only: None,
                }),
                ..Default::default()
            });
        }
    }
    pod
}

/// The claims of instance `id`: labels = claim-template labels + selector matchLabels +
/// instance id, controller owner reference to the CloneSet.
pub fn new_pvcs(cs: &CloneSet, id: &str) -> Vec<PersistentVolumeClaim> {
    let cs_name = cs.metadata.name.clone().unwrap_or_default();
    let match_labels = cs
        .spec
        .selector
        .as_ref()
        .and_then(|s| s.match_labels.clone())
        .unwrap_or_default();
    cs.spec
        .volume_claim_templates
        .iter()
        .filter_map(|vct| {
            let vct_name = vct.metadata.name.clone()?;
            let mut labels = vct.metadata.labels.clone().unwrap_or_default();
            labels.extend(match_labels.clone());
            labels.insert(CLONESET_INSTANCE_ID_KEY.into(), id.into());
            Some(PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(pvc_name(&vct_name, &cs_name, id)),
                    namespace: cs.metadata.namespace.clone(),
                    labels: Some(labels),
                    annotations: vct.metadata.annotations.clone(),
                    owner_references: Some(vec![owner_ref(cs)]),
                    ..Default::default()
                },
                spec: vct.spec.clone(),
                status: None,
            })
        })
        .collect()
}

/// Instance ids for `count` new pods: ids of PVCs no pod uses first (sorted, so the plan is
/// deterministic), then the caller's random suffixes that collide with no existing id.
pub fn available_ids(
    count: usize,
    pods: &[&CachedPod],
    pvcs: &[PersistentVolumeClaim],
    random: &[String],
) -> Vec<String> {
    let mut existing = BTreeSet::new();
    let mut reusable = BTreeSet::new();
    for pvc in pvcs {
        if let Some(id) = instance_id(&pvc.metadata) {
            existing.insert(id.to_string());
            reusable.insert(id.to_string());
        }
    }
    for pod in pods {
        if let Some(id) = pod_instance_id(pod) {
            existing.insert(id.to_string());
            reusable.remove(id);
        }
    }
    let mut ids: Vec<String> = reusable.into_iter().take(count).collect();
    for r in random {
        if ids.len() >= count {
            break;
        }
        if !existing.contains(r) && !ids.contains(r) {
            ids.push(r.clone());
        }
    }
    ids
}

/// PVC clean-up with reuse disabled: a PVC whose instance id no active pod has is handed to
/// the inactive pod with that id (so it goes with it) or deleted. Returns the PVCs that stay.
pub fn cleanup_pvcs(
    pvcs: &[PersistentVolumeClaim],
    owned: &[&CachedPod],
    active: &[&CachedPod],
    actions: &mut Vec<Action>,
) -> Vec<PersistentVolumeClaim> {
    let active_ids: BTreeSet<&str> = active.iter().filter_map(|p| pod_instance_id(p)).collect();
    let inactive: BTreeMap<&str, &str> = owned
        .iter()
        .filter(|p| !kruise_core::pods::is_pod_active(p))
        .filter_map(|p| Some((pod_instance_id(p)?, name_of(p))))
        .collect();
    let mut keep = Vec::new();
    for pvc in pvcs {
        let Some(id) = instance_id(&pvc.metadata) else {
            keep.push(pvc.clone());
            continue;
        };
        if active_ids.contains(id) {
            keep.push(pvc.clone());
            continue;
        }
        let name = pvc.metadata.name.clone().unwrap_or_default();
        match inactive.get(id) {
            Some(pod) => actions.push(Action::ReassignPvcToPod {
                pvc: name,
                pod: (*pod).to_string(),
            }),
            None => actions.push(Action::DeletePvc { name }),
        }
    }
    keep
}

/// PVC names of a pod's instance (deleted with the pod).
pub fn pvcs_of(pod: &CachedPod, pvcs: &[PersistentVolumeClaim]) -> Vec<String> {
    let Some(id) = pod_instance_id(pod) else {
        return Vec::new();
    };
    pvcs.iter()
        .filter(|p| instance_id(&p.metadata) == Some(id))
        .filter_map(|p| p.metadata.name.clone())
        .collect()
}
