//! Pod and claim identity: `<set>-<ordinal>`, hostname and subdomain, the identity labels,
//! claims `<template>-<set>-<ordinal>` mounted in place of same-named template volumes.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kruise_core::api::LifecycleState;
use kruise_core::api::keys::{
    CONTROLLER_REVISION_HASH_KEY, POD_INDEX_KEY, STATEFULSET_POD_NAME_KEY,
};
use kruise_core::pods::lifecycle::mark_state;
use kruise_core::revision::template_from_revision_data;

use crate::api::v1beta1::StatefulSet;

/// A revision's name (`""` when unset).
pub fn revision_name(rev: &ControllerRevision) -> &str {
    rev.metadata.name.as_deref().unwrap_or_default()
}

/// `<set>-<ordinal>`.
pub fn pod_name(set: &str, ordinal: i64) -> String {
    format!("{set}-{ordinal}")
}

/// The ordinal of a pod named `<set>-<ordinal>` (OpenKruise's `getParentNameAndOrdinal`:
/// the last `-` splits, the ordinal is a non-negative integer); `None` for any other name.
pub fn ordinal_of(set: &str, pod: &str) -> Option<i64> {
    let (parent, ordinal) = pod.rsplit_once('-')?;
    if parent != set || ordinal.is_empty() || !ordinal.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    ordinal.parse().ok()
}

/// `<template>-<set>-<ordinal>`.
pub fn claim_name(template: &str, set: &str, ordinal: i64) -> String {
    format!("{template}-{set}-{ordinal}")
}

/// The controller owner reference every pod of `set` carries.
pub fn owner_ref(set: &StatefulSet) -> OwnerReference {
    OwnerReference {
        api_version: kruise_core::api::version::APPS_V1BETA1.into(),
        kind: crate::api::KIND.into(),
        name: set.metadata.name.clone().unwrap_or_default(),
        uid: set.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The pod template of a revision: the set's own template for the update revision, the
/// revision data's template otherwise (OpenKruise's `ApplyRevision`).
pub fn template_for(
    set: &StatefulSet,
    revision: &ControllerRevision,
    update_revision: &str,
) -> Option<PodTemplateSpec> {
    if revision_name(revision) == update_revision {
        return Some(set.spec.template.clone());
    }
    let data = revision.data.as_ref()?;
    let mut template = template_from_revision_data(&data.0)?.clone();
    if let Some(obj) = template.as_object_mut() {
        obj.remove("$patch");
    }
    serde_json::from_value(template).ok()
}

/// Options of [`new_pod`] the feature gates decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdentityGates {
    /// `PodIndexLabel` (default on): write `apps.kubernetes.io/pod-index`.
    pub pod_index_label: bool,
}

/// The pod for `ordinal` at `revision`: the template's labels, annotations, finalizers and
/// spec; name `<set>-<ordinal>`, hostname = name, subdomain = serviceName; the revision,
/// pod-name and pod-index labels; lifecycle state `Normal`; the controller owner reference;
/// the claims of the volumeClaimTemplates as volumes.
pub fn new_pod(
    set: &StatefulSet,
    template: &PodTemplateSpec,
    revision: &str,
    ordinal: i64,
    gates: IdentityGates,
    now: Timestamp,
) -> Pod {
    let set_name = set.metadata.name.clone().unwrap_or_default();
    let name = pod_name(&set_name, ordinal);
    let tmeta = template.metadata.clone().unwrap_or_default();
    let mut labels = tmeta.labels.unwrap_or_default();
    labels.insert(CONTROLLER_REVISION_HASH_KEY.into(), revision.into());
    labels.insert(STATEFULSET_POD_NAME_KEY.into(), name.clone());
    if gates.pod_index_label {
        labels.insert(POD_INDEX_KEY.into(), ordinal.to_string());
    }
    let mut annotations = tmeta.annotations.unwrap_or_default();
    mark_state(&mut labels, &mut annotations, LifecycleState::Normal, now);
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.hostname = Some(name.clone());
    if !set.spec.service_name.is_empty() {
        spec.subdomain = Some(set.spec.service_name.clone());
    }
    let templates: BTreeSet<String> = set
        .spec
        .volume_claim_templates
        .iter()
        .filter_map(|v| v.metadata.name.clone())
        .collect();
    if !templates.is_empty() {
        let volumes = spec.volumes.get_or_insert_with(Vec::new);
        volumes.retain(|v| !templates.contains(&v.name));
        for template in &templates {
            volumes.push(Volume {
                name: template.clone(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim_name(template, &set_name, ordinal),
                    read_only: None,
                }),
                ..Default::default()
            });
        }
    }
    Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: set.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: Some(annotations),
            finalizers: tmeta.finalizers,
            owner_references: Some(vec![owner_ref(set)]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// The claims of `ordinal`: one per volumeClaimTemplate, labelled with the template's labels
/// and the selector's matchLabels. Created before the pod; one that exists is kept as it is.
pub fn new_claims(set: &StatefulSet, ordinal: i64) -> Vec<PersistentVolumeClaim> {
    let set_name = set.metadata.name.clone().unwrap_or_default();
    let selector_labels = set
        .spec
        .selector
        .as_ref()
        .and_then(|s: &LabelSelector| s.match_labels.clone())
        .unwrap_or_default();
    set.spec
        .volume_claim_templates
        .iter()
        .filter_map(|template| {
            let template_name = template.metadata.name.clone()?;
            let mut labels: BTreeMap<String, String> =
                template.metadata.labels.clone().unwrap_or_default();
            labels.extend(selector_labels.clone());
            Some(PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(claim_name(&template_name, &set_name, ordinal)),
                    namespace: set.metadata.namespace.clone(),
                    labels: Some(labels),
                    annotations: template.metadata.annotations.clone(),
                    ..Default::default()
                },
                spec: template.spec.clone(),
                status: None,
            })
        })
        .collect()
}
