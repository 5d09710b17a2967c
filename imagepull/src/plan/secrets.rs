//! Pull-secret syncing (OpenKruise's `syncJobPullSecrets`, reference §7.c/§7.d.4): the agent
//! may read secrets only in its own namespace, so each pull secret a job names is copied
//! there — once per source, shared by every job that names it (the sorted
//! `imagepulljobs.kruise.io/references` annotation lists them), its data kept equal to the
//! source's, and deleted when no job refers to it any more: when the last referring job
//! finishes or is deleted (K#2235, K#2290).
//!
//! A job in the agent's namespace uses its secrets in place.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::{
    REFERENCE_MODE_BATCH, ReferenceObject, SECRET_MODE_ANNOTATION, SECRET_REFERENCES_ANNOTATION,
    SOURCE_SECRET_KEY_ANNOTATION, SOURCE_SECRET_UID_LABEL,
};

/// What the planner reads.
#[derive(Clone, Debug)]
pub struct SecretSyncInput<'a> {
    /// The job's namespace.
    pub job_namespace: &'a str,
    /// The job's name.
    pub job_name: &'a str,
    /// Its `spec.pullSecrets`.
    pub pull_secrets: &'a [String],
    /// Whether the job still pulls (false once finished or being deleted: release them all).
    pub active: bool,
    /// The agent's namespace (`kruise-daemon-config`).
    pub agent_namespace: &'a str,
    /// The secrets of the job's namespace that exist, by name.
    pub sources: &'a BTreeMap<String, Secret>,
    /// The secrets of the agent's namespace.
    pub synced: &'a [Secret],
}

/// One write to the agent's namespace.
#[derive(Clone, Debug, PartialEq)]
pub enum SecretAction {
    /// Create a copy (named by `generateName: <source>-`).
    Create(Secret),
    /// Replace a copy (data or references changed; carries the `resourceVersion` read).
    Update(Secret),
    /// Delete a copy no job refers to any more.
    Delete {
        /// Its name.
        name: String,
    },
}

/// What the planner decided.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SecretSync {
    /// Writes, in order.
    pub actions: Vec<SecretAction>,
    /// The copies the job's NodeImages must list (`mode: batch`).
    pub refs: Vec<ReferenceObject>,
    /// A copy is being created: its name is known only once it exists, so the job's
    /// NodeImage writes wait for the next reconcile.
    pub creating: bool,
}

/// The job as a reference (`<namespace>/<name>`).
fn job_key(input: &SecretSyncInput<'_>) -> String {
    format!("{}/{}", input.job_namespace, input.job_name)
}

/// The jobs a copy's references annotation lists.
pub fn references(secret: &Secret) -> BTreeSet<String> {
    annotation(secret, SECRET_REFERENCES_ANNOTATION)
        .map(|v| {
            v.split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn annotation<'s>(secret: &'s Secret, key: &str) -> Option<&'s str> {
    secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn with_references(secret: &Secret, refs: &BTreeSet<String>) -> Secret {
    let mut out = secret.clone();
    out.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(
            SECRET_REFERENCES_ANNOTATION.into(),
            refs.iter().cloned().collect::<Vec<_>>().join(","),
        );
    out
}

/// The copies to create, update or delete for one job, and the references its NodeImages list.
pub fn plan(input: &SecretSyncInput<'_>) -> SecretSync {
    if input.job_namespace == input.agent_namespace {
        return SecretSync {
            refs: input
                .pull_secrets
                .iter()
                .map(|name| ReferenceObject {
                    namespace: input.job_namespace.into(),
                    name: name.clone(),
                    mode: String::new(),
                })
                .collect(),
            ..Default::default()
        };
    }
    let job = job_key(input);
    // Source key -> the copy this job uses (one per source; the one it already refers to
    // wins, else the first by name).
    let mut desired: BTreeMap<String, Option<&Secret>> = BTreeMap::new();
    if input.active {
        for name in input.pull_secrets {
            desired.insert(format!("{}/{name}", input.job_namespace), None);
        }
    }
    let mut synced: Vec<&Secret> = input
        .synced
        .iter()
        .filter(|s| s.metadata.deletion_timestamp.is_none())
        .filter(|s| annotation(s, SOURCE_SECRET_KEY_ANNOTATION).is_some())
        .collect();
    synced.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut released = Vec::new();
    for secret in synced {
        let refers = references(secret).contains(&job);
        let source = annotation(secret, SOURCE_SECRET_KEY_ANNOTATION).unwrap_or_default();
        match desired.get_mut(source) {
            Some(slot @ None) => *slot = Some(secret),
            Some(slot) if refers => {
                if let Some(previous) = slot.replace(secret)
                    && references(previous).contains(&job)
                {
                    released.push(previous);
                }
            }
            Some(_) => {}
            None if refers => released.push(secret),
            None => {}
        }
    }
    let mut sync = SecretSync::default();
    for secret in released {
        let mut refs = references(secret);
        refs.remove(&job);
        let name = secret.metadata.name.clone().unwrap_or_default();
        sync.actions.push(if refs.is_empty() {
            SecretAction::Delete { name }
        } else {
            SecretAction::Update(with_references(secret, &refs))
        });
    }
    for (source_key, copy) in desired {
        let source_name = source_key
            .split_once('/')
            .map_or(source_key.as_str(), |(_, n)| n);
        let Some(source) = input.sources.get(source_name) else {
            continue;
        };
        match copy {
            None => {
                sync.creating = true;
                sync.actions.push(SecretAction::Create(new_copy(
                    source,
                    &source_key,
                    &job,
                    input.agent_namespace,
                )));
            }
            Some(copy) => {
                sync.refs.push(ReferenceObject {
                    namespace: input.agent_namespace.into(),
                    name: copy.metadata.name.clone().unwrap_or_default(),
                    mode: annotation(copy, SECRET_MODE_ANNOTATION)
                        .unwrap_or_default()
                        .into(),
                });
                let mut refs = references(copy);
                refs.insert(job.clone());
                let mut updated = with_references(copy, &refs);
                updated.data = source.data.clone();
                updated.string_data = source.string_data.clone();
                label_source_uid(&mut updated, source);
                if &updated != copy {
                    sync.actions.push(SecretAction::Update(updated));
                }
            }
        }
    }
    sync
}

/// Labels `copy` with its source's UID ([`SOURCE_SECRET_UID_LABEL`]), copies made before
/// the label included.
fn label_source_uid(copy: &mut Secret, source: &Secret) {
    if let Some(uid) = &source.metadata.uid {
        copy.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(SOURCE_SECRET_UID_LABEL.into(), uid.clone());
    }
}

fn new_copy(source: &Secret, source_key: &str, job: &str, namespace: &str) -> Secret {
    let mut annotations = source.metadata.annotations.clone().unwrap_or_default();
    annotations.insert(SECRET_REFERENCES_ANNOTATION.into(), job.into());
    annotations.insert(SOURCE_SECRET_KEY_ANNOTATION.into(), source_key.into());
    annotations.insert(SECRET_MODE_ANNOTATION.into(), REFERENCE_MODE_BATCH.into());
    let mut copy = Secret {
        metadata: ObjectMeta {
            namespace: Some(namespace.into()),
            generate_name: Some(format!(
                "{}-",
                source.metadata.name.as_deref().unwrap_or_default()
            )),
            labels: source.metadata.labels.clone(),
            annotations: Some(annotations),
            ..Default::default()
        },
        type_: source.type_.clone(),
        data: source.data.clone(),
        string_data: source.string_data.clone(),
        immutable: None,
    };
    label_source_uid(&mut copy, source);
    copy
}

#[cfg(test)]
mod tests;
