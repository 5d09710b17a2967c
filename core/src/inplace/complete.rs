//! Completion check and refresh (finishing a half-done update from the annotations alone).

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Container, Pod, PodStatus};
use serde::Deserialize;

use super::apply::{PodWrite, apply_spec_to_pod, pod_write, remove_grace};
use super::readiness::ready_status;
use super::types::{InPlaceUpdateState, UpdateSpec, grace_spec, update_state};
use crate::api::keys::RUNTIME_CONTAINERS_META_KEY;
use crate::pods::{ContainerRef, ContainerStatusRef, PodView, pod_revision};
use crate::revision::equal_to_revision_hash;
use kruise_compat::gohash::kubelet_container_hash;
use kruise_compat::quantity::quantities_equal;

/// Why an update is not complete (or could not be judged).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotCompleted {
    /// The grace period has not ended (the spec is not applied yet).
    #[error("still in grace period of in-place update")]
    InGrace,
    /// Lower-priority containers still wait for their batch.
    #[error("existing containers to in-place update in next batches")]
    NextBatches,
    /// A container still reports the old image.
    #[error("container {0} imageID not changed")]
    ImageNotChanged(String),
    /// Recorded containers missing from the status.
    #[error("not found statuses of containers {0:?}")]
    StatusMissing(Vec<String>),
    /// Resources not yet resized.
    #[error("container {0} resources not changed")]
    ResourcesNotResized(String),
    /// Env-from-metadata restart not yet observed.
    #[error("waiting for all containers hash consistent: {0}")]
    HashNotConsistent(String),
    /// An updated container is not ready (only with [`CompletionCheck::require_ready`]).
    #[error("container {0} not ready")]
    NotReady(String),
    /// An annotation does not parse.
    #[error("invalid annotation: {0}")]
    Invalid(String),
}

/// Computes a container's expected `extractedEnvFromMetadataHash` (node-agent specific).
pub type EnvHashFn<'a> = &'a dyn Fn(&Container, &Pod) -> u64;

/// Options of the completion check.
#[derive(Clone, Copy, Default)]
pub struct CompletionCheck<'a> {
    /// `InPlaceWorkloadVerticalScaling`: check status resources when resources were updated.
    pub vertical_scaling: bool,
    /// Also require every updated container to be ready (OpenKruise does not; off by default).
    pub require_ready: bool,
    /// Expected `extractedEnvFromMetadataHash` of a container, as the node agent computes it.
    /// Without it, env-from-metadata completion only checks containerID consistency.
    pub env_hash: Option<EnvHashFn<'a>>,
}

impl std::fmt::Debug for CompletionCheck<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletionCheck")
            .field("vertical_scaling", &self.vertical_scaling)
            .field("require_ready", &self.require_ready)
            .field("env_hash", &self.env_hash.is_some())
            .finish()
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuntimeMetaSet {
    #[serde(default)]
    containers: Vec<RuntimeMeta>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuntimeMeta {
    name: String,
    #[serde(default, rename = "containerID")]
    container_id: String,
    #[serde(default)]
    hashes: RuntimeHashes,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuntimeHashes {
    #[serde(default)]
    plain_hash: u64,
    #[serde(default)]
    extracted_env_from_metadata_hash: u64,
}

fn runtime_meta<P: PodView + ?Sized>(pod: &P) -> Result<Option<RuntimeMetaSet>, NotCompleted> {
    match pod.annotation(RUNTIME_CONTAINERS_META_KEY) {
        None => Ok(None),
        Some(s) => serde_json::from_str(s)
            .map(Some)
            .map_err(|e| NotCompleted::Invalid(e.to_string())),
    }
}

enum HashKind<'a> {
    /// The kubelet's hash of each container (Kubernetes 1.31 and later: see
    /// [`kubelet_container_hash`]); an older kubelet's never matches, and the images decide.
    Plain,
    Env(Option<EnvHashFn<'a>>),
}

fn hashes_consistent(pod: &Pod, meta: &RuntimeMetaSet, kind: &HashKind<'_>) -> Result<(), String> {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    for c in pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or(&[])
    {
        let st = statuses
            .and_then(|v| v.iter().find(|s| s.name == c.name))
            .ok_or_else(|| format!("no status for {}", c.name))?;
        let m = meta
            .containers
            .iter()
            .rev()
            .find(|m| m.name == c.name)
            .ok_or_else(|| format!("no runtime meta for {}", c.name))?;
        if Some(&m.container_id) != st.container_id.as_ref() {
            return Err(format!(
                "container {} has a different containerID in runtime meta",
                c.name
            ));
        }
        let ok = match kind {
            HashKind::Plain => {
                kubelet_container_hash(&c.name, c.image.as_deref().unwrap_or_default())
                    == m.hashes.plain_hash
            }
            HashKind::Env(Some(f)) => f(c, pod) == m.hashes.extracted_env_from_metadata_hash,
            HashKind::Env(None) => true,
        };
        if !ok {
            return Err(format!("container {} hash differs", c.name));
        }
    }
    Ok(())
}

/// Normalize an image reference the way OpenKruise compares it (no `:` -> `:latest`).
fn with_tag(image: &str) -> String {
    if image.contains(':') {
        image.to_string()
    } else {
        format!("{image}:latest")
    }
}

/// OpenKruise's containers check (`CheckContainersUpdateCompleted`).
fn check_containers<P: PodView + ?Sized>(
    pod: &P,
    state: &InPlaceUpdateState,
    check: &CompletionCheck<'_>,
) -> Result<(), NotCompleted> {
    let meta = runtime_meta(pod)?;
    if state.update_env_from_metadata {
        let Some(m) = &meta else {
            return Err(NotCompleted::HashNotConsistent(
                "runtime-containers-meta not found".into(),
            ));
        };
        // The node agent's hashes read the whole container: judged on a full copy.
        hashes_consistent(&pod.to_pod(), m, &HashKind::Env(check.env_hash))
            .map_err(NotCompleted::HashNotConsistent)?;
    }
    let containers: Vec<ContainerRef<'_>> = pod.containers().collect();
    let statuses: Vec<ContainerStatusRef<'_>> = pod.container_statuses().collect();
    if check.vertical_scaling && state.update_resources {
        if statuses.len() != containers.len() {
            return Err(NotCompleted::ResourcesNotResized(
                "(some container status is not reported)".into(),
            ));
        }
        for cs in &statuses {
            let spec_res = containers
                .iter()
                .find(|c| c.name == cs.name)
                .and_then(|c| c.resources.cloned())
                .unwrap_or_default();
            let Some(st_res) = cs.resources else {
                return Err(NotCompleted::ResourcesNotResized(cs.name.to_string()));
            };
            let same = |a: &Option<
                BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
            >,
                        b: &Option<
                BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
            >| {
                let e = BTreeMap::new();
                let (a, b) = (a.as_ref().unwrap_or(&e), b.as_ref().unwrap_or(&e));
                a.len() == b.len()
                    && a.iter()
                        .all(|(k, q)| b.get(k).is_some_and(|r| quantities_equal(&q.0, &r.0)))
            };
            if !same(&spec_res.limits, &st_res.limits)
                || !same(&spec_res.requests, &st_res.requests)
            {
                return Err(NotCompleted::ResourcesNotResized(cs.name.to_string()));
            }
        }
    }
    if check.require_ready {
        for name in state
            .last_container_statuses
            .iter()
            .flatten()
            .map(|(k, _)| k)
        {
            if !statuses.iter().any(|s| s.name == name && s.ready) {
                return Err(NotCompleted::NotReady(name.clone()));
            }
        }
    }
    // Every container running under the spec's kubelet hash (as a node agent read it from
    // the runtime): complete, whatever the status says about images.
    if let Some(m) = &meta
        && hashes_consistent(&pod.to_pod(), m, &HashKind::Plain).is_ok()
    {
        return Ok(());
    }
    let mut remaining = state.last_container_statuses.clone().unwrap_or_default();
    for cs in &statuses {
        if let Some(old) = remaining.remove(cs.name)
            && old.image_id == cs.image_id
        {
            // Same imageID: either the kubelet has not restarted the container yet, or the
            // new tag resolves to the same digest — then the status image shows the new tag.
            let want = containers
                .iter()
                .find(|c| c.name == cs.name)
                .and_then(|c| c.image)
                .map(with_tag);
            if want.as_deref() != Some(cs.image) {
                return Err(NotCompleted::ImageNotChanged(cs.name.to_string()));
            }
        }
    }
    if !remaining.is_empty() {
        return Err(NotCompleted::StatusMissing(remaining.into_keys().collect()));
    }
    Ok(())
}

/// OpenKruise's `DefaultCheckInPlaceUpdateCompleted`: not complete while the grace annotation
/// exists or later batches remain; complete when there is no state; otherwise every container
/// whose image changed runs a different imageID than recorded (or, with an equal imageID,
/// reports the new image string — a tag resolving to the same digest), resources are resized
/// where asked (vertical scaling), and env-from-metadata restarts are visible in
/// `apps.kruise.io/runtime-containers-meta`. When that annotation shows every container
/// running under the spec's kubelet hash, the images are not compared.
pub fn check_update_completed<P: PodView + ?Sized>(
    pod: &P,
    check: &CompletionCheck<'_>,
) -> Result<(), NotCompleted> {
    if grace_spec(pod).is_some() {
        return Err(NotCompleted::InGrace);
    }
    let state = match update_state(pod) {
        None => return Ok(()),
        Some(Err(e)) => return Err(NotCompleted::Invalid(e.to_string())),
        Some(Ok(s)) => s,
    };
    if state.has_next_batch() {
        return Err(NotCompleted::NextBatches);
    }
    check_containers(pod, &state, check)
}

/// What [`refresh`] wants written.
#[derive(Debug, Clone, PartialEq)]
pub enum RefreshAction {
    /// Nothing to do now.
    Nothing,
    /// In the grace period: requeue after this (rounded up to whole seconds).
    WaitGrace {
        /// Requeue delay.
        requeue_after: SignedDuration,
    },
    /// Write the pod: grace ended (spec applied), grace dropped (revision changed), or the
    /// next container batch applied.
    Write(Box<PodWrite>),
    /// Write this status: `InPlaceUpdateReady=True`.
    SetReady(Box<PodStatus>),
    /// An annotation is unparsable.
    Invalid(String),
}

fn round_up_secs(d: SignedDuration) -> SignedDuration {
    let secs = d.as_secs() + i64::from(d.subsec_nanos() > 0);
    SignedDuration::from_secs(secs)
}

/// OpenKruise's `Refresh`, from the pod's annotations alone — so it also finishes an update a
/// previous controller process started:
/// 1. grace annotation present: if the pod's revision label no longer matches the spec's
///    revision, drop the grace; else wait until `updateTimestamp + graceSeconds`, then apply
///    the spec and drop the grace;
/// 2. state present: until the containers completed, nothing; then, if later batches remain
///    and the previous batch's containers are ready, apply the next batch;
/// 3. finally, with the readiness gate, set `InPlaceUpdateReady=True` if it is not already.
pub fn refresh<P: PodView + ?Sized>(
    pod: &P,
    now: Timestamp,
    check: &CompletionCheck<'_>,
) -> RefreshAction {
    if let Some(grace) = grace_spec(pod) {
        let spec: UpdateSpec = match grace {
            Ok(s) => s,
            Err(e) => return RefreshAction::Invalid(e.to_string()),
        };
        let mut state = match update_state(pod) {
            None => {
                return RefreshAction::Invalid(
                    "pod has apps.kruise.io/inplace-update-grace but no state".into(),
                );
            }
            Some(Err(_)) => return RefreshAction::Nothing,
            Some(Ok(s)) => s,
        };
        let old = pod.to_pod();
        let mut new = old.clone();
        if !pod_revision(pod).is_some_and(|r| equal_to_revision_hash(r, &spec.revision)) {
            remove_grace(&mut new);
            return RefreshAction::Write(Box::new(pod_write(&old, new, &BTreeMap::new())));
        }
        let grace = SignedDuration::from_secs(i64::from(spec.grace_seconds));
        let span = now.duration_since(state.update_timestamp.0);
        if span < grace {
            return RefreshAction::WaitGrace {
                requeue_after: round_up_secs(grace - span),
            };
        }
        let (mut patched, expected) = apply_spec_to_pod(&new, &spec, &mut state, now);
        remove_grace(&mut patched);
        new = patched;
        return RefreshAction::Write(Box::new(pod_write(&old, new, &expected)));
    }
    if let Some(state) = update_state(pod) {
        let mut state = match state {
            Ok(s) => s,
            Err(e) => return RefreshAction::Invalid(e.to_string()),
        };
        if check_containers(pod, &state, check).is_err() {
            return RefreshAction::Nothing;
        }
        if state.has_next_batch() {
            let ready = state
                .pre_check_before_next
                .iter()
                .flat_map(|p| p.containers_required_ready.iter())
                .all(|n| pod.container_statuses().any(|s| s.name == n && s.ready));
            if !ready {
                return RefreshAction::Nothing;
            }
            let spec = UpdateSpec {
                container_images: state.next_container_images.clone(),
                container_ref_metadata: state.next_container_ref_metadata.clone(),
                container_resources: state.next_container_resources.clone(),
                update_env_from_metadata: state.update_env_from_metadata,
                ..UpdateSpec::default()
            };
            let old = pod.to_pod();
            let (new, expected) = apply_spec_to_pod(&old, &spec, &mut state, now);
            return RefreshAction::Write(Box::new(pod_write(&old, new, &expected)));
        }
    }
    match ready_status(pod, now) {
        Some(s) => RefreshAction::SetReady(Box::new(s)),
        None => RefreshAction::Nothing,
    }
}
