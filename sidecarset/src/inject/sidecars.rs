//! Building the sidecars for one pod (shared mounts, env, hot-upgrade pairs, the hash
//! annotations) and merging them into its containers.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, LocalObjectReference, ObjectFieldSelector, Pod, PodSpec,
    Volume,
};

use super::InjectError;
use super::annotations::{SidecarSetUpgradeSpec, go_marshal, parse_hash_annotation};
use super::env::{merge_env, transfer_envs};
use super::matching::{annotation, set_name};
use super::resources::apply_resources_policy;
use super::volumes::{
    merge_devices, merge_mounts, merge_volumes, shared_devices, shared_mounts_and_envs,
};
use crate::api::v1beta1::SidecarSet;
use crate::api::{
    PodInjectPolicy, SIDECAR_ENV_KEY, SIDECARSET_HASH_ANNOTATION,
    SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION, SIDECARSET_INJECTED_LIST_ANNOTATION,
    SIDECARSET_VERSION_ALT_ENV_KEY, SIDECARSET_VERSION_ENV_KEY,
    SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION, SidecarContainer,
    hot_upgrade_container_names, is_native_sidecar, version_alt_annotation, version_annotation,
};

fn annotation_ref_env(name: &str, annotation: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: None,
                field_path: format!("metadata.annotations['{annotation}']"),
            }),
            ..Default::default()
        }),
    }
}

/// `<n>-1` (working) and `<n>-2` (empty image) with their version env.
fn hot_upgrade_pair(sidecar: &SidecarContainer) -> (SidecarContainer, SidecarContainer) {
    let (name1, name2) = hot_upgrade_container_names(sidecar.name());
    let mut c1 = sidecar.clone();
    let mut c2 = sidecar.clone();
    c1.container.name = name1;
    c2.container.name = name2;
    c2.container.image =
        Some(sidecar.upgrade_strategy.hot_upgrade_empty_image.clone()).filter(|i| !i.is_empty());
    for c in [&mut c1, &mut c2] {
        let env = c.container.env.get_or_insert_default();
        env.push(annotation_ref_env(
            SIDECARSET_VERSION_ENV_KEY,
            &version_annotation(&c.container.name),
        ));
        env.push(annotation_ref_env(
            SIDECARSET_VERSION_ALT_ENV_KEY,
            &version_alt_annotation(&c.container.name),
        ));
    }
    (c1, c2)
}

/// What the SidecarSets add to the pod.
#[derive(Default)]
pub(super) struct Built {
    containers: Vec<SidecarContainer>,
    init_containers: Vec<SidecarContainer>,
    secrets: Vec<LocalObjectReference>,
    volumes: Vec<Volume>,
    annotations: BTreeMap<String, String>,
}

impl Built {
    /// Whether any sidecar (init or not) is injected.
    pub(super) fn injects_any(&self) -> bool {
        !self.containers.is_empty() || !self.init_containers.is_empty()
    }

    /// Merges the sidecars, their volumes and pull secrets into `spec`; the annotations to
    /// add to the pod.
    pub(super) fn merge_into(
        self,
        spec: &mut PodSpec,
        sort_containers_by_name: bool,
    ) -> BTreeMap<String, String> {
        let mut init = self.init_containers;
        init.sort_by(|a, b| a.name().cmp(b.name()));
        let merged_init = merge_containers(spec.init_containers.take().unwrap_or_default(), init);
        spec.init_containers = (!merged_init.is_empty()).then_some(merged_init);
        let mut containers = self.containers;
        if sort_containers_by_name {
            containers.sort_by(|a, b| a.name().cmp(b.name()));
        }
        spec.containers = merge_containers(std::mem::take(&mut spec.containers), containers);
        spec.volumes = merge_volumes(spec.volumes.take(), self.volumes);
        let mut secrets = Vec::new();
        let mut secret_names = BTreeSet::new();
        for s in spec
            .image_pull_secrets
            .take()
            .unwrap_or_default()
            .into_iter()
            .chain(self.secrets)
        {
            if secret_names.insert(s.name.clone()) {
                secrets.push(s);
            }
        }
        spec.image_pull_secrets = (!secrets.is_empty()).then_some(secrets);
        self.annotations
    }
}

/// Prepares one sidecar (init or not) for this pod; `sidecar_names` are the containers of
/// every matched SidecarSet (never a `resourcesPolicy` target).
fn prepare_sidecar(
    sidecar: &SidecarContainer,
    pod: &Pod,
    pod_containers: &[Container],
    sidecar_names: &BTreeSet<&str>,
    volumes_by_name: &BTreeMap<&str, &Volume>,
    built: &mut Built,
) -> Result<SidecarContainer, InjectError> {
    let mut s = sidecar.clone();
    apply_resources_policy(&mut s, pod, sidecar_names)?;
    let (mounts, mount_envs) = shared_mounts_and_envs(&s, pod_containers);
    let mut transfer = transfer_envs(&s, pod, pod_containers);
    merge_env(&mut transfer, mount_envs);
    for name in s
        .container
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.name.as_str())
        .chain(
            s.container
                .volume_devices
                .iter()
                .flatten()
                .map(|d| d.name.as_str()),
        )
    {
        if let Some(v) = volumes_by_name.get(name) {
            built.volumes.push((*v).clone());
        }
    }
    merge_mounts(&mut s.container, mounts);
    let env = s.container.env.get_or_insert_default();
    env.push(EnvVar {
        name: SIDECAR_ENV_KEY.into(),
        value: Some("true".into()),
        value_from: None,
    });
    merge_env(env, transfer);
    let devices = shared_devices(&s, pod_containers);
    merge_devices(&mut s.container, devices);
    Ok(s)
}

pub(super) fn build_sidecars(
    pod: &Pod,
    sets: &[SidecarSet],
    now: jiff::Timestamp,
) -> Result<Built, InjectError> {
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    let get = |k: &str| annotations.get(k).map(String::as_str).unwrap_or("");
    let mut hashes =
        parse_hash_annotation(SIDECARSET_HASH_ANNOTATION, get(SIDECARSET_HASH_ANNOTATION))?;
    let mut hashes_without_image = parse_hash_annotation(
        SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION,
        get(SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION),
    )?;
    let mut working: BTreeMap<String, String> =
        serde_json::from_str(get(SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION))
            .unwrap_or_default();
    let mut names: BTreeSet<String> = BTreeSet::new();
    let list = get(SIDECARSET_INJECTED_LIST_ANNOTATION);
    if !list.is_empty() {
        names.extend(list.split(',').map(str::to_string));
    }
    let pod_containers: Vec<Container> = pod
        .spec
        .as_ref()
        .map(|s| s.containers.clone())
        .unwrap_or_default();
    let sidecar_names: BTreeSet<&str> = sets
        .iter()
        .flat_map(|set| set.spec.init_containers.iter().chain(&set.spec.containers))
        .map(SidecarContainer::name)
        .collect();
    let timestamp = now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let mut built = Built::default();
    let mut any_hot = false;

    let mut push_hot = |s: SidecarContainer,
                        out: &mut Vec<SidecarContainer>,
                        built_ann: &mut BTreeMap<String, String>| {
        let (c1, c2) = hot_upgrade_pair(&s);
        built_ann.insert(version_annotation(c1.name()), "1".into());
        built_ann.insert(version_alt_annotation(c1.name()), "0".into());
        built_ann.insert(version_annotation(c2.name()), "0".into());
        built_ann.insert(version_alt_annotation(c2.name()), "1".into());
        working.insert(s.name().to_string(), c1.name().to_string());
        out.push(c1);
        out.push(c2);
    };

    for set in sets {
        let name = set_name(set).to_string();
        names.insert(name.clone());
        let volumes_by_name: BTreeMap<&str, &Volume> = set
            .spec
            .volumes
            .iter()
            .map(|v| (v.name.as_str(), v))
            .collect();
        let mut sidecar_list: BTreeSet<String> = BTreeSet::new();
        let mut injecting = false;
        for init in &set.spec.init_containers {
            if is_native_sidecar(&init.container) {
                sidecar_list.insert(init.name().to_string());
            }
            let s = prepare_sidecar(
                init,
                pod,
                &pod_containers,
                &sidecar_names,
                &volumes_by_name,
                &mut built,
            )?;
            injecting = true;
            if is_native_sidecar(&s.container) && s.is_hot_upgrade() {
                any_hot = true;
                let mut out = std::mem::take(&mut built.init_containers);
                push_hot(s, &mut out, &mut built.annotations);
                built.init_containers = out;
            } else {
                built.init_containers.push(s);
            }
        }
        built
            .secrets
            .extend(set.spec.image_pull_secrets.iter().cloned());
        for c in &set.spec.containers {
            sidecar_list.insert(c.name().to_string());
            let s = prepare_sidecar(
                c,
                pod,
                &pod_containers,
                &sidecar_names,
                &volumes_by_name,
                &mut built,
            )?;
            injecting = true;
            if s.is_hot_upgrade() {
                any_hot = true;
                let mut out = std::mem::take(&mut built.containers);
                push_hot(s, &mut out, &mut built.annotations);
                built.containers = out;
            } else {
                built.containers.push(s);
            }
        }
        if injecting {
            let list: Vec<String> = sidecar_list.into_iter().collect();
            hashes.insert(
                name.clone(),
                SidecarSetUpgradeSpec {
                    update_timestamp: Some(timestamp.clone()),
                    hash: annotation(set, SIDECARSET_HASH_ANNOTATION).to_string(),
                    sidecar_set_name: name.clone(),
                    sidecar_list: Some(list.clone()),
                    controller_revision: set
                        .status
                        .as_ref()
                        .map(|s| s.latest_revision.clone())
                        .unwrap_or_default(),
                },
            );
            hashes_without_image.insert(
                name.clone(),
                SidecarSetUpgradeSpec {
                    update_timestamp: Some(timestamp.clone()),
                    hash: annotation(set, SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION).to_string(),
                    sidecar_set_name: name.clone(),
                    sidecar_list: Some(list),
                    controller_revision: String::new(),
                },
            );
        }
    }
    if any_hot {
        built.annotations.insert(
            SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION.into(),
            go_marshal(&working)?,
        );
    }
    built
        .annotations
        .insert(SIDECARSET_HASH_ANNOTATION.into(), go_marshal(&hashes)?);
    built.annotations.insert(
        SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION.into(),
        go_marshal(&hashes_without_image)?,
    );
    built.annotations.insert(
        SIDECARSET_INJECTED_LIST_ANNOTATION.into(),
        names.into_iter().collect::<Vec<_>>().join(","),
    );
    Ok(built)
}

/// `mergeSidecarContainers`: a sidecar replaces the pod container of the same name in place;
/// others go before (BeforeAppContainer) or after (anything else) the pod's containers.
fn merge_containers(origin: Vec<Container>, injected: Vec<SidecarContainer>) -> Vec<Container> {
    let index: BTreeMap<String, usize> = origin
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.clone(), i))
        .collect();
    let mut origin = origin;
    let mut before = Vec::new();
    let mut after = Vec::new();
    for s in injected {
        if let Some(&i) = index.get(s.name()) {
            origin[i] = s.container;
            continue;
        }
        match s.pod_inject_policy {
            Some(PodInjectPolicy::BeforeAppContainer) => before.push(s.container),
            _ => after.push(s.container),
        }
    }
    before.extend(origin);
    before.extend(after);
    before
}
