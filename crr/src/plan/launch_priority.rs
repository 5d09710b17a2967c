//! Container launch priority (OpenKruise's `pkg/webhook/pod/mutating/container_launch_priority.go`
//! and `pkg/controller/containerlaunchpriority`): the pod webhook gives every container of a
//! prioritized pod the env `KRUISE_CONTAINER_BARRIER` read from key `p_<priority>` of the
//! ConfigMap `<pod>-barrier`; the kubelet holds a container until its key exists, and the
//! controller adds the keys from the highest priority down as containers become ready.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ConfigMapKeySelector, EnvVar, EnvVarSource, Pod};

use kruise_core::api::keys;

/// The pod annotation asking for containers to start one after another, in container order.
pub const LAUNCH_PRIORITY_KEY: &str = keys::CONTAINER_LAUNCH_PRIORITY_KEY;
/// The value of [`LAUNCH_PRIORITY_KEY`] that orders the containers.
pub const ORDERED: &str = "Ordered";
/// The container env giving its priority (higher starts first).
pub const PRIORITY_ENV: &str = keys::ENV_CONTAINER_PRIORITY;
/// The env the webhook adds, read from the barrier ConfigMap.
pub const BARRIER_ENV: &str = keys::ENV_CONTAINER_BARRIER;
/// The pod annotation the controller sets once every prioritized container is ready.
pub const COMPLETED_KEY: &str = keys::CONTAINER_LAUNCH_PRIORITY_COMPLETED_KEY;

/// The barrier ConfigMap of pod `pod_name`.
pub fn barrier_name(pod_name: &str) -> String {
    format!("{pod_name}-barrier")
}

/// The barrier key of `priority` (`p_-1` for -1, as OpenKruise writes it).
pub fn barrier_key(priority: i32) -> String {
    format!("p_{priority}")
}

/// A pod the webhook cannot admit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("container {container}: {PRIORITY_ENV} {value:?} is not a 32-bit integer")]
pub struct InvalidPriority {
    /// The container's name.
    pub container: String,
    /// The env's value.
    pub value: String,
}

/// The priorities the webhook gives the pod's containers, in container order, or `None` when
/// launch priority does not apply: a single container, neither the `Ordered` annotation nor
/// a non-zero `KRUISE_CONTAINER_PRIORITY`, or every container with the same priority.
pub fn priorities(pod: &Pod) -> Result<Option<Vec<i32>>, InvalidPriority> {
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or(&[]);
    if containers.len() <= 1 {
        return Ok(None);
    }
    let ordered = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(LAUNCH_PRIORITY_KEY))
        .is_some_and(|v| v == ORDERED);
    if ordered {
        // 0, -1, -2, …: the first container starts first.
        return Ok(Some((0..containers.len()).map(|i| -(i as i32)).collect()));
    }
    let mut found = Vec::with_capacity(containers.len());
    for container in containers {
        let mut priority = 0;
        for env in container.env.iter().flatten() {
            if env.name == PRIORITY_ENV {
                let value = env.value.clone().unwrap_or_default();
                priority = value.trim().parse().map_err(|_| InvalidPriority {
                    container: container.name.clone(),
                    value,
                })?;
            }
        }
        found.push(priority);
    }
    let all_equal = found.windows(2).all(|w| w[0] == w[1]);
    if found.iter().all(|p| *p == 0) || all_equal {
        return Ok(None);
    }
    Ok(Some(found))
}

/// What the webhook does to a pod being created: gives a generateName-only pod its name now
/// (so the barrier's name is known, K#782; `suffix` is the random part, as the API server
/// would pick it) and adds the barrier env to every container. False when nothing applies
/// or the pod already carries the barrier (a pod may pass the chain twice).
pub fn inject_barrier(pod: &mut Pod, suffix: &str) -> Result<bool, InvalidPriority> {
    let Some(priorities) = priorities(pod)? else {
        return Ok(false);
    };
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(false);
    };
    let has_barrier = spec
        .containers
        .iter()
        .any(|c| c.env.iter().flatten().any(|e| e.name == BARRIER_ENV));
    if has_barrier {
        return Ok(false);
    }
    let name = match pod.metadata.name.as_deref().filter(|n| !n.is_empty()) {
        Some(name) => name.to_string(),
        None => {
            let base = pod.metadata.generate_name.clone().unwrap_or_default();
            let name = generated_name(&base, suffix);
            pod.metadata.name = Some(name.clone());
            name
        }
    };
    let barrier = barrier_name(&name);
    if let Some(spec) = pod.spec.as_mut() {
        for (container, priority) in spec.containers.iter_mut().zip(priorities) {
            container.env.get_or_insert_with(Vec::new).push(EnvVar {
                name: BARRIER_ENV.into(),
                value: None,
                value_from: Some(EnvVarSource {
                    config_map_key_ref: Some(ConfigMapKeySelector {
                        name: barrier.clone(),
                        key: barrier_key(priority),
                        optional: None,
                    }),
                    ..EnvVarSource::default()
                }),
            });
        }
    }
    Ok(true)
}

/// The API server's rule for a generated name: the base cut to 58 characters, then the
/// 5-character random suffix (63 at most).
fn generated_name(base: &str, suffix: &str) -> String {
    let base: String = base.chars().take(58).collect();
    format!("{base}{suffix}")
}

/// What the controller does for one pod.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BarrierPlan {
    /// Create the barrier ConfigMap (owned by the pod) holding these keys.
    pub create: Option<BTreeSet<String>>,
    /// Add these keys to the existing barrier.
    pub open: BTreeSet<String>,
    /// Set [`COMPLETED_KEY`] on the pod.
    pub complete: bool,
}

impl BarrierPlan {
    /// True when there is nothing to write.
    pub fn is_idle(&self) -> bool {
        self.create.is_none() && self.open.is_empty() && !self.complete
    }
}

/// The priority of each container that reads the pod's barrier (`None` for the others).
pub fn barrier_priorities(pod: &Pod) -> Vec<(String, Option<i32>)> {
    let barrier = barrier_name(pod.metadata.name.as_deref().unwrap_or_default());
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| {
            let priority = c
                .env
                .iter()
                .flatten()
                .filter(|e| e.name == BARRIER_ENV)
                .filter_map(|e| e.value_from.as_ref()?.config_map_key_ref.as_ref())
                .filter(|r| r.name == barrier)
                .find_map(|r| r.key.strip_prefix("p_")?.parse().ok());
            (c.name.clone(), priority)
        })
        .collect()
}

/// True when some container of the pod waits on its barrier.
pub fn reads_barrier(pod: &Pod) -> bool {
    barrier_priorities(pod).iter().any(|(_, p)| p.is_some())
}

/// What the controller does for `pod`, given its barrier's data (`None`: no barrier).
///
/// The keys that should exist are those of every priority at or above the highest priority
/// of a container not yet ready (all of them once every such container is ready). A container
/// without a status yet counts as not ready, and the pod's ContainersReady condition is not
/// consulted, so a pod without one still progresses (K#1283). A missing barrier is created
/// with those keys while the pod lives, after completion too, so containers restarted later
/// still find their key (K#914, K#1322). Keys are only ever added.
pub fn plan_barrier(pod: &Pod, barrier: Option<&BTreeMap<String, String>>) -> BarrierPlan {
    let finished = pod.metadata.deletion_timestamp.is_some()
        || pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Succeeded" || p == "Failed");
    if finished {
        return BarrierPlan::default();
    }
    let prioritized: Vec<(String, i32)> = barrier_priorities(pod)
        .into_iter()
        .filter_map(|(name, p)| Some((name, p?)))
        .collect();
    if prioritized.is_empty() {
        return BarrierPlan::default();
    }
    let ready: BTreeSet<&str> = pod
        .status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
        .filter(|s| s.ready)
        .map(|s| s.name.as_str())
        .collect();
    let next = prioritized
        .iter()
        .filter(|(name, _)| !ready.contains(name.as_str()))
        .map(|(_, p)| *p)
        .max();
    let wanted: BTreeSet<String> = prioritized
        .iter()
        .filter(|(_, p)| next.is_none_or(|next| *p >= next))
        .map(|(_, p)| barrier_key(*p))
        .collect();
    let completed = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(COMPLETED_KEY))
        .is_some_and(|v| v == "true");
    let complete = next.is_none() && !completed;
    match barrier {
        None => BarrierPlan {
            create: Some(wanted),
            open: BTreeSet::new(),
            complete,
        },
        Some(data) => BarrierPlan {
            create: None,
            open: wanted
                .into_iter()
                .filter(|k| !data.contains_key(k))
                .collect(),
            complete,
        },
    }
}

#[cfg(test)]
mod tests;
