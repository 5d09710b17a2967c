//! The volumes, mounts and devices a sidecar shares with the app containers.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, EnvVar, Volume, VolumeDevice, VolumeMount};

use super::env::{env_value, is_injected_container, sub_path_expr_vars};
use crate::api::SidecarContainer;

/// The app containers' volume mounts (and the env their `subPathExpr` reads) for a sidecar
/// with `shareVolumePolicy: enabled` (`GetInjectedVolumeMountsAndEnvs`).
pub(super) fn shared_mounts_and_envs(
    sidecar: &SidecarContainer,
    pod_containers: &[Container],
) -> (Vec<VolumeMount>, Vec<EnvVar>) {
    if !sidecar.shares_volume_mounts() {
        return (Vec::new(), Vec::new());
    }
    let mut mounts = Vec::new();
    let mut envs = Vec::new();
    for app in pod_containers.iter().filter(|c| !is_injected_container(c)) {
        for m in app.volume_mounts.iter().flatten() {
            mounts.push(m.clone());
            for var in sub_path_expr_vars(m.sub_path_expr.as_deref().unwrap_or("")) {
                if let Some(e) = env_value(app, var) {
                    envs.push(e.clone());
                }
            }
        }
    }
    (mounts, envs)
}

pub(super) fn shared_devices(
    sidecar: &SidecarContainer,
    pod_containers: &[Container],
) -> Vec<VolumeDevice> {
    if !sidecar.shares_volume_devices() {
        return Vec::new();
    }
    pod_containers
        .iter()
        .filter(|c| !is_injected_container(c))
        .flat_map(|c| c.volume_devices.iter().flatten().cloned())
        .collect()
}

/// `MergeVolumeMounts`: appends mounts whose path is not used by a mount or device yet.
pub(super) fn merge_mounts(c: &mut Container, additional: Vec<VolumeMount>) {
    let mut paths: BTreeSet<String> = c
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.clone())
        .chain(
            c.volume_devices
                .iter()
                .flatten()
                .map(|d| d.device_path.clone()),
        )
        .collect();
    let mut mounts = c.volume_mounts.take().unwrap_or_default();
    for m in additional {
        if paths.insert(m.mount_path.clone()) {
            mounts.push(m);
        }
    }
    c.volume_mounts = (!mounts.is_empty()).then_some(mounts);
}

/// `MergeVolumeDevices`: appends devices whose path is not used yet.
pub(super) fn merge_devices(c: &mut Container, additional: Vec<VolumeDevice>) {
    let mut paths: BTreeSet<String> = c
        .volume_devices
        .iter()
        .flatten()
        .map(|d| d.device_path.clone())
        .chain(
            c.volume_mounts
                .iter()
                .flatten()
                .map(|m| m.mount_path.clone()),
        )
        .collect();
    let mut devices = c.volume_devices.take().unwrap_or_default();
    for d in additional {
        if paths.insert(d.device_path.clone()) {
            devices.push(d);
        }
    }
    c.volume_devices = (!devices.is_empty()).then_some(devices);
}

/// The pod's volumes plus the sidecars' volumes it has no volume of the same name for (the
/// pod's win).
pub(super) fn merge_volumes(pod: Option<Vec<Volume>>, added: Vec<Volume>) -> Option<Vec<Volume>> {
    let mut volumes = pod.unwrap_or_default();
    let mut names: BTreeSet<String> = volumes.iter().map(|v| v.name.clone()).collect();
    for v in added {
        if names.insert(v.name.clone()) {
            volumes.push(v);
        }
    }
    (!volumes.is_empty()).then_some(volumes)
}
