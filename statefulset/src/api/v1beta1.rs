//! `apps.kruise.io/v1beta1` StatefulSet: the storage version, the one the controller
//! reconciles.

super::statefulset_spec!("v1beta1", true);

use super::MAX_MIN_READY_SECONDS;

impl StatefulSet {
    /// `spec.replicas`, 1 when unset.
    pub fn replicas(&self) -> i32 {
        self.spec.replicas.unwrap_or(1)
    }
}

impl StatefulSetSpec {
    /// Whether pods are managed in parallel.
    pub fn is_parallel(&self) -> bool {
        self.pod_management_policy == Some(PodManagementPolicy::Parallel)
    }

    /// Whether the update strategy is `OnDelete`.
    pub fn is_on_delete(&self) -> bool {
        self.update_strategy.type_ == Some(UpdateStrategyType::OnDelete)
    }

    /// `rollingUpdate.minReadySeconds`, clamped to 0..=300.
    pub fn min_ready_seconds(&self) -> i32 {
        self.update_strategy
            .rolling_update
            .as_ref()
            .and_then(|r| r.min_ready_seconds)
            .unwrap_or(0)
            .clamp(0, MAX_MIN_READY_SECONDS)
    }
}

impl RollingUpdateStatefulSetStrategy {
    /// The pod update policy, `ReCreate` when unset or empty.
    pub fn policy(&self) -> PodUpdatePolicy {
        match &self.pod_update_policy {
            None => PodUpdatePolicy::ReCreate,
            Some(PodUpdatePolicy::Unknown(s)) if s.is_empty() => PodUpdatePolicy::ReCreate,
            Some(p) => p.clone(),
        }
    }
}
