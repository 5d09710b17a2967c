//! Defaulting, as OpenKruise's mutating webhook does it (`SetDefaultsStatefulSet`); both
//! versions share the spec, so one function serves both. Kubernetes' pod defaults for the
//! template and PVC defaults for volumeClaimTemplates (unless `TemplateNoDefaults`) are
//! `kruise_compat::pod_defaults`, applied by the webhook (`crate::admission`).

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::DEFAULT_REVISION_HISTORY_LIMIT;
use super::v1beta1::{
    PersistentVolumeClaimRetentionPolicy, PodManagementPolicy, PodUpdatePolicy,
    RetentionPolicyType, RollingUpdateStatefulSetStrategy, StatefulSetSpec, UpdateStrategyType,
    VolumeClaimUpdateStrategyType,
};

/// The feature gates the defaults depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DefaultingGates {
    /// `StatefulSetAutoDeletePVC` (default on): default the retention policy to Retain/Retain.
    pub auto_delete_pvc: bool,
    /// `StatefulSetAutoResizePVCGate` (default off): default `volumeClaimUpdateStrategy` to
    /// `OnDelete`.
    pub auto_resize_pvc: bool,
}

impl Default for DefaultingGates {
    fn default() -> Self {
        Self {
            auto_delete_pvc: true,
            auto_resize_pvc: false,
        }
    }
}

fn unset<T>(value: &Option<T>, empty: impl Fn(&T) -> bool) -> bool {
    value.as_ref().is_none_or(empty)
}

/// podManagementPolicy `OrderedReady`; type `RollingUpdate` with partition 0, maxUnavailable
/// 1, podUpdatePolicy `ReCreate`, minReadySeconds 0; the retention policy Retain/Retain (gate
/// `StatefulSetAutoDeletePVC`); volumeClaimUpdateStrategy `OnDelete` (gate
/// `StatefulSetAutoResizePVCGate`); replicas 1; revisionHistoryLimit 10.
pub fn default_spec(spec: &mut StatefulSetSpec, gates: DefaultingGates) {
    if unset(&spec.pod_management_policy, |p| p.as_str().is_empty()) {
        spec.pod_management_policy = Some(PodManagementPolicy::OrderedReady);
    }
    let strategy = &mut spec.update_strategy;
    if unset(&strategy.type_, |t| t.as_str().is_empty()) {
        strategy.type_ = Some(UpdateStrategyType::RollingUpdate);
    }
    if strategy.type_ == Some(UpdateStrategyType::RollingUpdate) {
        let rolling = strategy
            .rolling_update
            .get_or_insert_with(RollingUpdateStatefulSetStrategy::default);
        rolling.partition.get_or_insert(0);
        rolling.max_unavailable.get_or_insert(IntOrString::Int(1));
        if unset(&rolling.pod_update_policy, |p| p.as_str().is_empty()) {
            rolling.pod_update_policy = Some(PodUpdatePolicy::ReCreate);
        }
        rolling.min_ready_seconds.get_or_insert(0);
    }
    if gates.auto_delete_pvc {
        let policy = spec
            .persistent_volume_claim_retention_policy
            .get_or_insert_with(PersistentVolumeClaimRetentionPolicy::default);
        for field in [&mut policy.when_deleted, &mut policy.when_scaled] {
            if unset(field, |p| p.as_str().is_empty()) {
                *field = Some(RetentionPolicyType::Retain);
            }
        }
    }
    if gates.auto_resize_pvc {
        let vcus = &mut spec.volume_claim_update_strategy;
        if unset(&vcus.type_, |t| t.as_str().is_empty()) {
            vcus.type_ = Some(VolumeClaimUpdateStrategyType::OnDelete);
        }
    }
    spec.replicas.get_or_insert(1);
    spec.revision_history_limit
        .get_or_insert(DEFAULT_REVISION_HISTORY_LIMIT);
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn defaulted(spec: serde_json::Value, gates: DefaultingGates) -> serde_json::Value {
        let mut spec: StatefulSetSpec = serde_json::from_value(spec).unwrap();
        default_spec(&mut spec, gates);
        serde_json::to_value(spec).unwrap()
    }

    #[test]
    fn empty_spec_gets_openkruise_defaults() {
        let got = defaulted(json!({}), DefaultingGates::default());
        assert_eq!(
            got,
            json!({
                "replicas": 1,
                "selector": null,
                "template": {},
                "podManagementPolicy": "OrderedReady",
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                    "partition": 0, "maxUnavailable": 1, "podUpdatePolicy": "ReCreate",
                    "minReadySeconds": 0}},
                "revisionHistoryLimit": 10,
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
            })
        );
    }

    #[test]
    fn set_fields_are_kept_and_gates_switch_their_defaults() {
        let got = defaulted(
            json!({"replicas": 0, "podManagementPolicy": "Parallel",
                   "updateStrategy": {"type": "OnDelete"},
                   "persistentVolumeClaimRetentionPolicy": {"whenScaled": "Delete"}}),
            DefaultingGates {
                auto_delete_pvc: true,
                auto_resize_pvc: true,
            },
        );
        assert_eq!(got["replicas"], 0);
        assert_eq!(got["podManagementPolicy"], "Parallel");
        assert_eq!(got["updateStrategy"], json!({"type": "OnDelete"}));
        assert_eq!(
            got["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Retain", "whenScaled": "Delete"})
        );
        assert_eq!(
            got["volumeClaimUpdateStrategy"],
            json!({"type": "OnDelete"})
        );
        let got = defaulted(
            json!({}),
            DefaultingGates {
                auto_delete_pvc: false,
                auto_resize_pvc: false,
            },
        );
        assert!(got.get("persistentVolumeClaimRetentionPolicy").is_none());
    }
}
