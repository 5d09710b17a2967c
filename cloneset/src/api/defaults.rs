//! Defaulting, as OpenKruise's mutating webhook does it (`SetDefaultsCloneSet` for
//! `v1alpha1`, `SetDefaultsCloneSetV1beta1` for `v1beta1`).
//!
//! The pod and claim template defaults OpenKruise's webhook also injects (unless
//! `TemplateNoDefaults`) depend on the request (CREATE, or an UPDATE changing the template)
//! and are applied by [`crate::admission::MutateCloneSet`] with
//! `kruise_compat::pod_defaults`.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_core::api::InPlaceUpdateStrategy;

use super::{DEFAULT_MAX_UNAVAILABLE, DEFAULT_REVISION_HISTORY_LIMIT, v1alpha1, v1beta1};

/// `v1alpha1` defaults: replicas 1, revisionHistoryLimit 10, type `ReCreate`, an empty
/// `inPlaceUpdateStrategy` for the in-place types, partition 0, maxUnavailable `20%`,
/// maxSurge 0.
pub fn default_v1alpha1(spec: &mut v1alpha1::CloneSetSpec) {
    use v1alpha1::CloneSetUpdateStrategyType as T;
    spec.replicas.get_or_insert(1);
    spec.revision_history_limit
        .get_or_insert(DEFAULT_REVISION_HISTORY_LIMIT);
    let strategy = &mut spec.update_strategy;
    match &strategy.type_ {
        None => strategy.type_ = Some(T::ReCreate),
        Some(T::Unknown(s)) if s.is_empty() => strategy.type_ = Some(T::ReCreate),
        Some(T::InPlaceIfPossible | T::InPlaceOnly) => {
            strategy
                .in_place_update_strategy
                .get_or_insert_with(InPlaceUpdateStrategy::default);
        }
        _ => {}
    }
    strategy.partition.get_or_insert(IntOrString::Int(0));
    strategy
        .max_unavailable
        .get_or_insert_with(|| IntOrString::String(DEFAULT_MAX_UNAVAILABLE.into()));
    strategy.max_surge.get_or_insert(IntOrString::Int(0));
}

/// `v1beta1` defaults: replicas 1, revisionHistoryLimit 10, type `RollingUpdate`; for
/// `RollingUpdate` a `rollingUpdate` with podUpdatePolicy `ReCreate`, an empty
/// `inPlaceUpdateStrategy` for the in-place policies, partition 0, maxUnavailable `20%`,
/// maxSurge 0. (`enablePVCReuse` defaults to false through the CRD schema.)
pub fn default_v1beta1(spec: &mut v1beta1::CloneSetSpec) {
    use v1beta1::CloneSetPodUpdatePolicy as P;
    use v1beta1::CloneSetUpdateStrategyType as T;
    spec.replicas.get_or_insert(1);
    spec.revision_history_limit
        .get_or_insert(DEFAULT_REVISION_HISTORY_LIMIT);
    let strategy = &mut spec.update_strategy;
    if strategy.type_.is_none() || matches!(&strategy.type_, Some(T::Unknown(s)) if s.is_empty()) {
        strategy.type_ = Some(T::RollingUpdate);
    }
    if strategy.type_ != Some(T::RollingUpdate) {
        return;
    }
    let rolling = strategy
        .rolling_update
        .get_or_insert_with(v1beta1::RollingUpdateCloneSetStrategy::default);
    if rolling.pod_update_policy.is_none()
        || matches!(&rolling.pod_update_policy, Some(P::Unknown(s)) if s.is_empty())
    {
        rolling.pod_update_policy = Some(P::ReCreate);
    }
    if matches!(
        rolling.pod_update_policy,
        Some(P::InPlaceIfPossible | P::InPlaceOnly)
    ) {
        rolling
            .in_place_update_strategy
            .get_or_insert_with(InPlaceUpdateStrategy::default);
    }
    rolling.partition.get_or_insert(IntOrString::Int(0));
    rolling
        .max_unavailable
        .get_or_insert_with(|| IntOrString::String(DEFAULT_MAX_UNAVAILABLE.into()));
    rolling.max_surge.get_or_insert(IntOrString::Int(0));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn v1alpha1_defaults() {
        let mut spec: v1alpha1::CloneSetSpec = serde_json::from_value(
            json!({"selector": {"matchLabels": {"a": "b"}}, "template": {}}),
        )
        .unwrap();
        default_v1alpha1(&mut spec);
        let v = serde_json::to_value(&spec).unwrap();
        assert_eq!(v["replicas"], 1);
        assert_eq!(v["revisionHistoryLimit"], 10);
        assert_eq!(
            v["updateStrategy"],
            json!({"type": "ReCreate", "partition": 0, "maxUnavailable": "20%", "maxSurge": 0})
        );
        let mut inplace: v1alpha1::CloneSetSpec = serde_json::from_value(json!({
            "replicas": 5, "updateStrategy": {"type": "InPlaceIfPossible", "maxUnavailable": 2}
        }))
        .unwrap();
        default_v1alpha1(&mut inplace);
        let v = serde_json::to_value(&inplace).unwrap();
        assert_eq!(v["replicas"], 5);
        assert_eq!(
            v["updateStrategy"],
            json!({"type": "InPlaceIfPossible", "partition": 0, "maxUnavailable": 2, "maxSurge": 0, "inPlaceUpdateStrategy": {}})
        );
    }

    #[test]
    fn v1beta1_defaults() {
        let mut spec = v1beta1::CloneSetSpec::default();
        default_v1beta1(&mut spec);
        let v = serde_json::to_value(&spec).unwrap();
        assert_eq!(
            v["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {
                "podUpdatePolicy": "ReCreate", "partition": 0, "maxUnavailable": "20%", "maxSurge": 0}})
        );
        let mut on_delete: v1beta1::CloneSetSpec =
            serde_json::from_value(json!({"updateStrategy": {"type": "OnDelete"}})).unwrap();
        default_v1beta1(&mut on_delete);
        assert_eq!(
            serde_json::to_value(&on_delete.update_strategy).unwrap(),
            json!({"type": "OnDelete"})
        );
        let mut inplace: v1beta1::CloneSetSpec = serde_json::from_value(
            json!({"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceOnly"}}}),
        )
        .unwrap();
        default_v1beta1(&mut inplace);
        let ru = inplace.update_strategy.rolling_update.unwrap();
        assert_eq!(
            ru.in_place_update_strategy,
            Some(InPlaceUpdateStrategy::default())
        );
    }
}
