//! The pure per-pod side of the SidecarSet controller, as OpenKruise's `sidecarcontrol`
//! defines it: which pods a SidecarSet manages, their [`PodUpgradeState`], the pod an
//! in-place sidecar upgrade writes ([`upgrade_pod`]), the hot-upgrade reset of the idle
//! container ([`reset_hot_upgrade`]) and the `SidecarSetUpgradable` pod condition.
//!
//! Only images change in place (the API server allows nothing else on a running pod's
//! containers); other changes reach pods when they are recreated.
//!
//! * **Updated**: the pod's `kruise.io/sidecarset-hash` entry for the set equals the set's hash.
//! * **Upgradable**: the pod's `…-hash-without-image` entry equals the set's (only images differ).
//! * **Consistent**: every sidecar container runs what its spec names. With digest images the
//!   status imageID must carry the digest; otherwise the imageID recorded before the upgrade
//!   (`kruise.io/sidecarset-inplace-update-state`) must have changed.
//! * **Hot upgrade**: the idle one of `<name>-1`/`<name>-2` (the one on `hotUpgradeEmptyImage`,
//!   else the not-ready one, else the older) gets the new image and becomes the working
//!   container; once it runs and the pod is ready, the old one is reset to the empty image.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_core::inplace::{ContainerStatusRecord, InPlaceUpdateState};
use kruise_core::pods::{is_pod_active, is_pod_ready, pod_condition, pod_phase};

use crate::api::hash::{HashError, sidecarset_hash, sidecarset_hash_without_image};
use crate::api::v1beta1::SidecarSet;
use crate::api::{
    SIDECARSET_HASH_ANNOTATION, SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION,
    SIDECARSET_INJECTED_LIST_ANNOTATION, SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION,
    SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION, SidecarContainer,
    hot_upgrade_container_names, is_native_sidecar, version_alt_annotation, version_annotation,
};
use crate::inject::{
    InjectError, SidecarSetUpgradeSpec, go_marshal, parse_hash_annotation, patch_pod_metadata,
};

/// Pod condition type reporting whether every SidecarSet can upgrade the pod in place.
pub const SIDECARSET_UPGRADABLE: &str = "SidecarSetUpgradable";
/// `SidecarSetUpgradable=True` reason.
pub const REASON_ALL_UPGRADABLE: &str = "AllSidecarsetUpgradable";
/// `SidecarSetUpgradable=False` reason.
pub const REASON_UPDATE_IMMUTABLE_FIELD: &str = "UpdateImmutableField";

/// What the controller knows about one matched pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PodUpgradeState {
    /// The pod's `kruise.io/sidecarset-hash` entry equals the SidecarSet's hash.
    pub updated: bool,
    /// Only sidecar images differ from the SidecarSet (equal hash-without-image), so
    /// an in-place upgrade can bring the pod up to date.
    pub upgradable: bool,
    /// The pod's status agrees with its spec: no sidecar upgrade still in flight.
    pub consistent: bool,
    /// The pod is Ready (and running).
    pub ready: bool,
}

/// Why a pod write could not be built.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    /// Hashing the SidecarSet failed.
    #[error(transparent)]
    Hash(#[from] HashError),
    /// An annotation did not parse, or patchPodMetadata failed.
    #[error(transparent)]
    Inject(#[from] InjectError),
    /// Encoding an annotation failed.
    #[error("encoding pod annotations: {0}")]
    Encode(#[from] serde_json::Error),
}

/// The SidecarSet's two hashes: its annotations (the defaulting webhook writes them), computed
/// when missing (an object that bypassed the webhook).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetHashes {
    /// `kruise.io/sidecarset-hash`.
    pub hash: String,
    /// `kruise.io/sidecarset-hash-without-image`.
    pub without_image: String,
}

impl SetHashes {
    /// The hashes of `set`.
    pub fn of(set: &SidecarSet) -> Result<Self, HashError> {
        let ann = set.metadata.annotations.as_ref();
        let get = |k: &str| {
            ann.and_then(|a| a.get(k))
                .filter(|v| !v.is_empty())
                .cloned()
        };
        let hash = match get(SIDECARSET_HASH_ANNOTATION) {
            Some(h) => h,
            None => sidecarset_hash(&set.spec.containers, &set.spec.init_containers)?,
        };
        let without_image = match get(SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION) {
            Some(h) => h,
            None => sidecarset_hash_without_image(&set.spec.containers, &set.spec.init_containers)?,
        };
        Ok(Self {
            hash,
            without_image,
        })
    }
}

fn set_name(set: &SidecarSet) -> &str {
    set.metadata.name.as_deref().unwrap_or("")
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn containers(pod: &Pod) -> &[Container] {
    pod.spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or(&[])
}

fn container<'a>(pod: &'a Pod, name: &str) -> Option<&'a Container> {
    containers(pod).iter().find(|c| c.name == name)
}

/// Whether the pod's `kruise.io/sidecarset-injected-list` names the SidecarSet.
pub fn injected_by(pod: &Pod, set_name: &str) -> bool {
    annotation(pod, SIDECARSET_INJECTED_LIST_ANNOTATION)
        .is_some_and(|l| l.split(',').any(|n| n == set_name))
}

/// The SidecarSets a pod's `kruise.io/sidecarset-injected-list` names.
pub fn injected_sets(pod: &Pod) -> Vec<String> {
    annotation(pod, SIDECARSET_INJECTED_LIST_ANNOTATION)
        .map(|l| {
            l.split(',')
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The working container of each hot-upgrade sidecar (`kruise.io/sidecarset-working-hotupgrade-container`).
pub fn working_containers(pod: &Pod) -> BTreeMap<String, String> {
    annotation(pod, SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION)
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default()
}

/// `(working, other)` containers of a hot-upgrade sidecar: the working one per the pod's
/// annotation (`<name>-2` unless it names `<name>-1`).
pub fn hot_upgrade_pair(sidecar: &str, pod: &Pod) -> (String, String) {
    let (one, two) = hot_upgrade_container_names(sidecar);
    if working_containers(pod).get(sidecar) == Some(&one) {
        (one, two)
    } else {
        (two, one)
    }
}

/// The pod container names of the SidecarSet's sidecars (`<name>-1` and `<name>-2` for hot
/// upgrade).
pub fn sidecar_containers_in_pod(set: &SidecarSet) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for c in &set.spec.containers {
        if c.is_hot_upgrade() {
            let (one, two) = hot_upgrade_container_names(c.name());
            names.insert(one);
            names.insert(two);
        } else {
            names.insert(c.name().to_string());
        }
    }
    names
}

/// Whether the pod holds every sidecar of the set (hot upgrade: both containers and the
/// working-container annotation), as `IsPodConsistentWithSidecarSet`.
pub fn has_all_sidecars(pod: &Pod, set: &SidecarSet) -> bool {
    let working = working_containers(pod);
    set.spec.containers.iter().all(|c| {
        if c.is_hot_upgrade() {
            let (one, two) = hot_upgrade_container_names(c.name());
            working.contains_key(c.name())
                && container(pod, &one).is_some()
                && container(pod, &two).is_some()
        } else {
            container(pod, c.name()).is_some()
        }
    })
}

/// Whether the SidecarSet manages this pod, given that its selector and namespace matched:
/// active, injected by it, holding all its sidecars.
pub fn is_managed(pod: &Pod, set: &SidecarSet) -> bool {
    is_pod_active(pod) && injected_by(pod, set_name(set)) && has_all_sidecars(pod, set)
}

fn pod_hash(pod: &Pod, set: &str, key: &str) -> Option<String> {
    let value = annotation(pod, key)?;
    parse_hash_annotation(key, value)
        .ok()?
        .remove(set)
        .map(|s| s.hash)
}

fn sidecar_states(pod: &Pod) -> BTreeMap<String, InPlaceUpdateState> {
    annotation(pod, SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION)
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default()
}

/// Whether an image reference names a digest (`…@sha256:…`).
fn is_digest(image: &str) -> bool {
    image.contains("@sha256:")
}

/// Whether a status imageID is the digest the spec image names.
fn image_id_matches(image: &str, image_id: &str) -> bool {
    match image.split_once('@') {
        Some((_, digest)) => image_id.ends_with(digest),
        None => false,
    }
}

/// Whether the named sidecar containers run what their spec says (`IsPodStateConsistent`).
pub fn is_state_consistent(pod: &Pod, set_name: &str, names: &BTreeSet<String>) -> bool {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or(&[]);
    if containers(pod).len() != statuses.len() {
        return false;
    }
    let image_ids: BTreeMap<&str, &str> = statuses
        .iter()
        .map(|s| (s.name.as_str(), s.image_id.as_str()))
        .collect();
    let mut all_digest = true;
    for c in containers(pod).iter().filter(|c| names.contains(&c.name)) {
        let image = c.image.as_deref().unwrap_or("");
        if !is_digest(image) {
            all_digest = false;
            break;
        }
        match image_ids.get(c.name.as_str()) {
            Some(id) if image_id_matches(image, id) => {}
            _ => return false,
        }
    }
    if all_digest {
        return true;
    }
    // The imageID recorded before the upgrade must have changed, unless the status already
    // reports the spec's image. No record: injected, never upgraded, consistent.
    let Some(raw) = annotation(pod, SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION) else {
        return true;
    };
    let Ok(states) = serde_json::from_str::<BTreeMap<String, InPlaceUpdateState>>(raw) else {
        return false;
    };
    let recorded: BTreeMap<&str, &ContainerStatusRecord> = states
        .get(set_name)
        .and_then(|s| s.last_container_statuses.as_ref())
        .map(|m| m.iter().map(|(k, v)| (k.as_str(), v)).collect())
        .unwrap_or_default();
    statuses
        .iter()
        .filter(|s| names.contains(&s.name))
        .all(|s| match recorded.get(s.name.as_str()) {
            Some(before) => {
                let spec_image = container(pod, &s.name).and_then(|c| c.image.as_deref());
                !(before.image_id == s.image_id && spec_image != Some(s.image.as_str()))
            }
            None => true,
        })
}

fn container_ready(pod: &Pod, name: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == name))
        .is_some_and(|c| c.ready)
}

/// Whether the pod is ready for the SidecarSet (`IsPodReady`): idle hot-upgrade containers on
/// the empty image, the pod running and Ready.
pub fn is_ready_for(pod: &Pod, set: &SidecarSet) -> bool {
    for c in set.spec.containers.iter().filter(|c| c.is_hot_upgrade()) {
        let (_, idle) = hot_upgrade_pair(c.name(), pod);
        let empty = &c.upgrade_strategy.hot_upgrade_empty_image;
        if !empty.is_empty()
            && container(pod, &idle).and_then(|c| c.image.as_deref()) != Some(empty.as_str())
        {
            return false;
        }
    }
    pod_phase(pod) == "Running" && is_pod_ready(pod)
}

/// The facts the planner and the status need about one managed pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PodFacts {
    /// For [`crate::plan::next_upgrades`]: `consistent` means no upgrade in flight on a
    /// ready sidecar (candidates) or all sidecars consistent (updated pods).
    pub plan: PodUpgradeState,
    /// For [`crate::plan::count`]: `consistent` means all sidecars consistent.
    pub status: PodUpgradeState,
}

/// The [`PodFacts`] of a managed pod.
pub fn pod_facts(pod: &Pod, set: &SidecarSet, hashes: &SetHashes) -> PodFacts {
    let name = set_name(set);
    let updated =
        pod_hash(pod, name, SIDECARSET_HASH_ANNOTATION).as_deref() == Some(hashes.hash.as_str());
    let upgradable = pod_hash(pod, name, SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION).as_deref()
        == Some(hashes.without_image.as_str());
    let sidecars = sidecar_containers_in_pod(set);
    let all_consistent = is_state_consistent(pod, name, &sidecars);
    // A ready sidecar whose state is not consistent is mid-upgrade: wait for it.
    let none_in_flight = sidecars.iter().all(|s| {
        !container_ready(pod, s) || is_state_consistent(pod, name, &BTreeSet::from([s.clone()]))
    });
    let ready = is_ready_for(pod, set);
    let status = PodUpgradeState {
        updated,
        upgradable,
        consistent: all_consistent,
        ready,
    };
    PodFacts {
        plan: PodUpgradeState {
            consistent: if updated {
                all_consistent
            } else {
                upgradable && none_in_flight
            },
            ..status
        },
        status,
    }
}

/// Which of a hot-upgrade sidecar's containers to upgrade, and the other one: the one on the
/// empty image, else the not-ready one, else the older (not working) one.
fn container_to_hot_upgrade(sidecar: &SidecarContainer, pod: &Pod, set: &str) -> (String, String) {
    let (one, two) = hot_upgrade_container_names(sidecar.name());
    let empty = sidecar.upgrade_strategy.hot_upgrade_empty_image.as_str();
    let image = |n: &str| container(pod, n).and_then(|c| c.image.as_deref());
    if image(&one) == Some(empty) {
        return (one, two);
    }
    if image(&two) == Some(empty) {
        return (two, one);
    }
    let ready = |n: &String| {
        container_ready(pod, n) && is_state_consistent(pod, set, &BTreeSet::from([n.clone()]))
    };
    match (ready(&one), ready(&two)) {
        (true, false) => (two, one),
        (false, true) => (one, two),
        _ => {
            let (working, older) = hot_upgrade_pair(sidecar.name(), pod);
            (older, working)
        }
    }
}

fn set_image(pod: &mut Pod, name: &str, image: &str) {
    if let Some(c) = pod
        .spec
        .as_mut()
        .and_then(|s| s.containers.iter_mut().find(|c| c.name == name))
    {
        c.image = Some(image.to_string());
    }
}

/// Records, per changed container, the imageID it ran before the change; the change is
/// complete once the status reports another (`UpdatePodAnnotationsInUpgrade`).
fn record_in_place_state(
    pod: &mut Pod,
    set: &str,
    revision: &str,
    changed: &[String],
    now: Timestamp,
) -> Result<(), UpgradeError> {
    let mut states = sidecar_states(pod);
    let state = states
        .entry(set.to_string())
        .or_insert_with(|| InPlaceUpdateState {
            revision: revision.to_string(),
            update_timestamp: Time(now),
            last_container_statuses: None,
            update_env_from_metadata: false,
            update_resources: false,
            update_images: false,
            next_container_images: BTreeMap::new(),
            next_container_ref_metadata: BTreeMap::new(),
            next_container_resources: BTreeMap::new(),
            pre_check_before_next: None,
            container_batches_record: Vec::new(),
        });
    let ids: BTreeMap<String, String> = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| {
            cs.iter()
                .map(|c| (c.name.clone(), c.image_id.clone()))
                .collect()
        })
        .unwrap_or_default();
    let records = state.last_container_statuses.get_or_insert_default();
    for name in changed {
        records.insert(
            name.clone(),
            ContainerStatusRecord {
                image_id: ids.get(name).cloned().unwrap_or_default(),
            },
        );
    }
    let value = serde_json::to_string(&states)?;
    pod.metadata
        .annotations
        .get_or_insert_default()
        .insert(SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION.into(), value);
    Ok(())
}

fn sidecar_list(set: &SidecarSet) -> Vec<String> {
    let mut list: BTreeSet<String> = set
        .spec
        .init_containers
        .iter()
        .filter(|c| is_native_sidecar(&c.container))
        .map(|c| c.name().to_string())
        .collect();
    list.extend(set.spec.containers.iter().map(|c| c.name().to_string()));
    list.into_iter().collect()
}

/// The pod after an in-place upgrade to the SidecarSet (`updatePodSidecarAndHash`): new
/// sidecar images (hot upgrade: into the idle container, which becomes the working one, with
/// the version annotations), the pod's hash entry for the set, the in-place state and the
/// set's patchPodMetadata. `version` is the SidecarSet's resourceVersion.
pub fn upgrade_pod(
    pod: &Pod,
    set: &SidecarSet,
    hashes: &SetHashes,
    now: Timestamp,
) -> Result<Pod, UpgradeError> {
    let name = set_name(set);
    let version = set.metadata.resource_version.clone().unwrap_or_default();
    let mut out = pod.clone();
    let mut changed = Vec::new();
    for sidecar in &set.spec.containers {
        let want = sidecar.container.image.as_deref().unwrap_or("");
        let (target, other) = if sidecar.is_hot_upgrade() {
            container_to_hot_upgrade(sidecar, &out, name)
        } else {
            (sidecar.name().to_string(), sidecar.name().to_string())
        };
        let current = container(&out, &other).and_then(|c| c.image.as_deref());
        if current == Some(want) {
            continue;
        }
        set_image(&mut out, &target, want);
        changed.push(target.clone());
        if sidecar.is_hot_upgrade() {
            let mut working = working_containers(&out);
            working.insert(sidecar.name().to_string(), target.clone());
            let older_version = annotation(&out, &version_annotation(&other))
                .unwrap_or("")
                .to_string();
            let ann = out.metadata.annotations.get_or_insert_default();
            ann.insert(
                SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION.into(),
                go_marshal(&working)?,
            );
            ann.insert(version_annotation(&target), version.clone());
            ann.insert(version_alt_annotation(&target), older_version);
            ann.insert(version_alt_annotation(&other), version.clone());
        }
    }
    // The pod's hash entry for this set (the without-image entry is equal already).
    let mut hashes_by_set = match annotation(&out, SIDECARSET_HASH_ANNOTATION) {
        Some(v) => parse_hash_annotation(SIDECARSET_HASH_ANNOTATION, v).unwrap_or_default(),
        None => BTreeMap::new(),
    };
    hashes_by_set.insert(
        name.to_string(),
        SidecarSetUpgradeSpec {
            update_timestamp: Some(now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
            hash: hashes.hash.clone(),
            sidecar_set_name: name.to_string(),
            sidecar_list: Some(sidecar_list(set)),
            controller_revision: set
                .status
                .as_ref()
                .map(|s| s.latest_revision.clone())
                .unwrap_or_default(),
        },
    );
    let encoded = go_marshal(&hashes_by_set)?;
    out.metadata
        .annotations
        .get_or_insert_default()
        .insert(SIDECARSET_HASH_ANNOTATION.into(), encoded);
    record_in_place_state(&mut out, name, &hashes.hash, &changed, now)?;
    let ann = out.metadata.annotations.get_or_insert_default();
    patch_pod_metadata(ann, &set.spec.patch_pod_metadata, name)?;
    Ok(out)
}

/// Whether the pod finished a hot upgrade and its old container is due for the reset to the
/// empty image: an idle container is not on the empty image, the working ones run their spec,
/// and every container but the idle ones is ready.
pub fn hot_upgrade_reset_due(pod: &Pod, set: &SidecarSet) -> bool {
    let mut idle = BTreeSet::new();
    let mut upgrading = false;
    for c in set.spec.containers.iter().filter(|c| c.is_hot_upgrade()) {
        let (_, other) = hot_upgrade_pair(c.name(), pod);
        let empty = c.upgrade_strategy.hot_upgrade_empty_image.as_str();
        if container(pod, &other).and_then(|c| c.image.as_deref()) != Some(empty) {
            upgrading = true;
        }
        idle.insert(other);
    }
    if !upgrading {
        return false;
    }
    let working: BTreeSet<String> = sidecar_containers_in_pod(set)
        .difference(&idle)
        .cloned()
        .collect();
    if !is_state_consistent(pod, set_name(set), &working) {
        return false;
    }
    if pod_phase(pod) == "Running" && is_pod_ready(pod) {
        return true;
    }
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .filter(|c| !idle.contains(&c.name))
                .all(|c| c.ready)
        })
}

/// The pod with each hot-upgrade sidecar's old container reset to the empty image (version
/// annotations `"0"`), recorded in the in-place state. `None` when nothing is to reset.
pub fn reset_hot_upgrade(
    pod: &Pod,
    set: &SidecarSet,
    hashes: &SetHashes,
    now: Timestamp,
) -> Result<Option<Pod>, UpgradeError> {
    let mut out = pod.clone();
    let mut changed = Vec::new();
    for c in set.spec.containers.iter().filter(|c| c.is_hot_upgrade()) {
        let (working, idle) = hot_upgrade_pair(c.name(), pod);
        let empty = c.upgrade_strategy.hot_upgrade_empty_image.as_str();
        if container(pod, &idle).and_then(|c| c.image.as_deref()) == Some(empty) {
            continue;
        }
        set_image(&mut out, &idle, empty);
        let ann = out.metadata.annotations.get_or_insert_default();
        ann.insert(version_annotation(&idle), "0".into());
        ann.insert(version_alt_annotation(&working), "0".into());
        changed.push(idle);
    }
    if changed.is_empty() {
        return Ok(None);
    }
    record_in_place_state(&mut out, set_name(set), &hashes.hash, &changed, now)?;
    Ok(Some(out))
}

/// The pod's `SidecarSetUpgradable` condition after recording `upgradable` for the set, or
/// `None` when it would not change. The message is the JSON map of every SidecarSet's verdict.
pub fn upgradable_condition(
    pod: &Pod,
    set: &str,
    upgradable: bool,
    now: Timestamp,
) -> Option<PodCondition> {
    let old = pod_condition(pod, SIDECARSET_UPGRADABLE);
    let mut verdicts: BTreeMap<String, bool> = old
        .and_then(|c| c.message)
        .filter(|m| !m.is_empty())
        .and_then(|m| serde_json::from_str(m).ok())
        .unwrap_or_default();
    verdicts.insert(set.to_string(), upgradable);
    let all = verdicts.values().all(|v| *v);
    let status = if all { "True" } else { "False" };
    let reason = if all {
        REASON_ALL_UPGRADABLE
    } else {
        REASON_UPDATE_IMMUTABLE_FIELD
    };
    let message = go_marshal(&verdicts).ok()?;
    if let Some(c) = old
        && c.status == status
        && c.reason == Some(reason)
        && c.message == Some(message.as_str())
    {
        return None;
    }
    let transition = match old {
        Some(c) if c.status == status => c.last_transition_time.map(Time),
        _ => Some(Time(now)),
    };
    Some(PodCondition {
        type_: SIDECARSET_UPGRADABLE.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_transition_time: transition,
        last_probe_time: None,
        observed_generation: None,
    })
}

#[cfg(test)]
mod tests;
