//! `apps.kruise.io/runtime-containers-meta`: what the runtime knows of a pod's containers
//! (ID, restart count, the kubelet's hash of the spec each was created from), in OpenKruise's
//! format (kruise-daemon's `containermeta` controller writes it).
//!
//! An in-place update is judged complete by its containers' image IDs; a new tag of the same
//! digest changes none, and a runtime that reports a container's image by the digest's first
//! tag (containerd 1.6) leaves the status unchanged too: only the runtime can tell that the
//! kubelet restarted the container under the new spec. kruise-rs's agent writes the
//! annotation for exactly those pods, once: when the completion check waits on an unchanged
//! image ID ([`needs_runtime_meta`]) and the runtime shows every container, under the ID the
//! status reports, created from the spec's hash ([`runtime_meta`]), so the write completes
//! the update. OpenKruise's daemon writes it on every container change of every Kruise pod;
//! no other reader uses it here yet.

use k8s_openapi::api::core::v1::Pod;
use kruise_compat::gohash::kubelet_container_hash;
use kruise_core::api::keys::RUNTIME_CONTAINERS_META_KEY;
use kruise_core::inplace::{CompletionCheck, NotCompleted, check_update_completed};
use serde::Serialize;

use super::agent::RuntimeContainer;

#[derive(Serialize)]
struct MetaSet<'a> {
    containers: Vec<Meta<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Meta<'a> {
    name: &'a str,
    #[serde(rename = "containerID")]
    container_id: &'a str,
    restart_count: i32,
    hashes: Hashes,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Hashes {
    plain_hash: u64,
    /// The kubelet no longer keeps a hash without resources (1.31 and later).
    plain_hash_without_resources: u64,
}

/// Whether the pod's in-place update waits on an unchanged image ID: the one case the
/// runtime's view may settle (checked before the runtime is asked).
pub fn needs_runtime_meta(pod: &Pod) -> bool {
    matches!(
        check_update_completed(pod, &CompletionCheck::default()),
        Err(NotCompleted::ImageNotChanged(_))
    )
}

/// The annotation's value to write on `pod` given the runtime's view of its containers, if
/// writing it completes the pod's in-place update: every spec container's status ID is a
/// runtime container created from the spec's kubelet hash. `None` otherwise (the kubelet
/// has not restarted them yet, or an older kubelet's hash).
pub fn runtime_meta(pod: &Pod, runtime: &[RuntimeContainer]) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    let mut containers = Vec::with_capacity(spec.containers.len());
    for c in &spec.containers {
        let status_id = statuses
            .iter()
            .find(|s| s.name == c.name)?
            .container_id
            .as_deref()?;
        let running = runtime.iter().find(|r| r.id == status_id)?;
        let hash = running.kubelet_hash?;
        if hash != kubelet_container_hash(&c.name, c.image.as_deref().unwrap_or_default()) {
            return None;
        }
        containers.push(Meta {
            name: &c.name,
            container_id: status_id,
            restart_count: running.restart_count,
            hashes: Hashes {
                plain_hash: hash,
                plain_hash_without_resources: 0,
            },
        });
    }
    let value = serde_json::to_string(&MetaSet { containers }).ok()?;
    // Written only if the check then passes (not while a grace period or a later batch
    // holds the update).
    let mut annotated = pod.clone();
    annotated
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(RUNTIME_CONTAINERS_META_KEY.to_string(), value.clone());
    check_update_completed(&annotated, &CompletionCheck::default())
        .is_ok()
        .then_some(value)
}

#[cfg(test)]
mod tests;
