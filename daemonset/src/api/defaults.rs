//! Defaulting, as OpenKruise's mutating webhook does it (`SetDefaultsDaemonSetV1beta1`, and
//! `SetDefaultsDaemonSet` for `v1alpha1`). The pod template is not defaulted (OpenKruise's
//! DaemonSet webhook leaves it alone too). A `v1alpha1` spec decodes as the `v1beta1` type:
//! its fields are a subset.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::v1beta1::{
    DaemonSetSpec, RollingUpdateDaemonSet, RollingUpdateType, UpdateStrategyType,
};
use super::{DEFAULT_BURST_REPLICAS, DEFAULT_REVISION_HISTORY_LIMIT, Served};

fn unset<T>(value: &Option<T>, as_str: impl Fn(&T) -> &str) -> bool {
    value.as_ref().is_none_or(|v| as_str(v).is_empty())
}

/// burstReplicas 250; type `RollingUpdate` with rollingUpdateType `Standard` and, when
/// neither is set, maxUnavailable 1 / maxSurge 0; revisionHistoryLimit 10. Through
/// `v1alpha1`, `Surging` first gets maxSurge 1 and maxUnavailable 0 where unset, and becomes
/// `Standard`.
pub fn default_spec(spec: &mut DaemonSetSpec, served: Served) {
    spec.burst_replicas
        .get_or_insert(IntOrString::Int(DEFAULT_BURST_REPLICAS));
    let strategy = &mut spec.update_strategy;
    if unset(&strategy.type_, UpdateStrategyType::as_str) {
        strategy.type_ = Some(UpdateStrategyType::RollingUpdate);
    }
    if strategy.type_ == Some(UpdateStrategyType::RollingUpdate) {
        let rolling = strategy
            .rolling_update
            .get_or_insert_with(RollingUpdateDaemonSet::default);
        let surging = rolling.type_ == Some(RollingUpdateType::Surging);
        if served == Served::V1alpha1 && surging {
            rolling.max_surge.get_or_insert(IntOrString::Int(1));
            rolling.max_unavailable.get_or_insert(IntOrString::Int(0));
        }
        if unset(&rolling.type_, RollingUpdateType::as_str)
            || (served == Served::V1alpha1 && surging)
        {
            rolling.type_ = Some(RollingUpdateType::Standard);
        }
        if rolling.max_unavailable.is_none() && rolling.max_surge.is_none() {
            rolling.max_unavailable = Some(IntOrString::Int(1));
            rolling.max_surge = Some(IntOrString::Int(0));
        }
    }
    spec.revision_history_limit
        .get_or_insert(DEFAULT_REVISION_HISTORY_LIMIT);
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::{Value, json};

    fn defaulted(spec: Value, served: Served) -> Value {
        let mut spec: DaemonSetSpec = serde_json::from_value(spec).unwrap();
        default_spec(&mut spec, served);
        serde_json::to_value(spec).unwrap()
    }

    #[test]
    fn empty_spec_gets_openkruise_defaults_in_either_version() {
        for served in [Served::V1alpha1, Served::V1beta1] {
            assert_eq!(
                defaulted(json!({}), served),
                json!({
                    "selector": null,
                    "template": {},
                    "burstReplicas": 250,
                    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                        "rollingUpdateType": "Standard", "maxUnavailable": 1, "maxSurge": 0}},
                    "revisionHistoryLimit": 10,
                })
            );
        }
    }

    #[test]
    fn set_fields_are_kept_and_one_of_surge_or_unavailable_suppresses_the_pair() {
        let got = defaulted(
            json!({"burstReplicas": "10%", "revisionHistoryLimit": 0,
                   "updateStrategy": {"rollingUpdate": {"maxSurge": "20%"}}}),
            Served::V1beta1,
        );
        assert_eq!(got["burstReplicas"], "10%");
        assert_eq!(got["revisionHistoryLimit"], 0);
        assert_eq!(
            got["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {
                "rollingUpdateType": "Standard", "maxSurge": "20%"}})
        );
        let got = defaulted(
            json!({"updateStrategy": {"type": "OnDelete"}}),
            Served::V1beta1,
        );
        assert_eq!(got["updateStrategy"], json!({"type": "OnDelete"}));
    }

    #[test]
    fn surging_becomes_standard_with_surge_1_only_through_v1alpha1() {
        let spec = json!({"updateStrategy": {"rollingUpdate": {"rollingUpdateType": "Surging"}}});
        assert_eq!(
            defaulted(spec.clone(), Served::V1alpha1)["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {
                "rollingUpdateType": "Standard", "maxUnavailable": 0, "maxSurge": 1}})
        );
        let spec2 = json!({"updateStrategy": {"rollingUpdate": {
            "rollingUpdateType": "Surging", "maxSurge": "50%"}}});
        assert_eq!(
            defaulted(spec2, Served::V1alpha1)["updateStrategy"]["rollingUpdate"],
            json!({"rollingUpdateType": "Standard", "maxUnavailable": 0, "maxSurge": "50%"})
        );
        // v1beta1 has no Surging: it is left for validation to reject.
        assert_eq!(
            defaulted(spec, Served::V1beta1)["updateStrategy"]["rollingUpdate"]["rollingUpdateType"],
            "Surging"
        );
    }
}
