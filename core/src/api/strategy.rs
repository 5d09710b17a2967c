//! Update strategies shared by CloneSet, Advanced StatefulSet, Advanced DaemonSet and SidecarSet.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Priority for pods update. Only one of `orderPriority` and `weightPriority` may be set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdatePriorityStrategy {
    /// Order terms: pods are sorted by the trailing integer of the value of the first key they carry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order_priority: Vec<UpdatePriorityOrderTerm>,
    /// Weight terms: pods are sorted by the sum of the weights of the selectors they match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub weight_priority: Vec<UpdatePriorityWeightTerm>,
}

/// One order-priority term.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdatePriorityOrderTerm {
    /// Label key whose value's trailing integer orders pods (`sts-10` -> 10).
    pub ordered_key: String,
}

/// One weight-priority term.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdatePriorityWeightTerm {
    /// Weight (0..=100) added when the selector matches.
    pub weight: i32,
    /// Selector over pod labels.
    pub match_selector: LabelSelector,
}

/// Errors from [`UpdatePriorityStrategy::validate`] and [`validate_scatter`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StrategyError {
    /// Both kinds of priority terms were given.
    #[error("only one of weightPriority and orderPriority can be used")]
    BothPriorities,
    /// A weight outside 0..=100.
    #[error("weight must be valid number in the range 1-100")]
    BadWeight,
    /// A weight term with an empty selector.
    #[error("selector can not be empty")]
    EmptySelector,
    /// An order term with an empty key.
    #[error("order key can not be empty")]
    EmptyOrderKey,
    /// A scatter term with an empty key.
    #[error("key should not be empty")]
    EmptyScatterKey,
    /// A duplicated scatter term.
    #[error("duplicated key={key} value={value}")]
    DuplicatedScatterTerm {
        /// Term key.
        key: String,
        /// Term value.
        value: String,
    },
}

impl UpdatePriorityStrategy {
    /// OpenKruise's `FieldsValidation` (selector syntax is checked by the matcher, not here).
    pub fn validate(&self) -> Result<(), StrategyError> {
        if !self.weight_priority.is_empty() && !self.order_priority.is_empty() {
            return Err(StrategyError::BothPriorities);
        }
        for w in &self.weight_priority {
            if !(0..=100).contains(&w.weight) {
                return Err(StrategyError::BadWeight);
            }
            let empty = w
                .match_selector
                .match_labels
                .as_ref()
                .is_none_or(|m| m.is_empty())
                && w.match_selector
                    .match_expressions
                    .as_ref()
                    .is_none_or(|e| e.is_empty());
            if empty {
                return Err(StrategyError::EmptySelector);
            }
        }
        if self.order_priority.iter().any(|o| o.ordered_key.is_empty()) {
            return Err(StrategyError::EmptyOrderKey);
        }
        Ok(())
    }
}

/// Label key/value terms whose pods are scattered across the update order.
pub type UpdateScatterStrategy = Vec<UpdateScatterTerm>;

/// One scatter term.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateScatterTerm {
    /// Label key.
    pub key: String,
    /// Label value.
    pub value: String,
}

/// OpenKruise's scatter `FieldsValidation`: non-empty keys, no duplicated key/value.
pub fn validate_scatter(strategy: &[UpdateScatterTerm]) -> Result<(), StrategyError> {
    let mut seen = std::collections::BTreeSet::new();
    for t in strategy {
        if t.key.is_empty() {
            return Err(StrategyError::EmptyScatterKey);
        }
        if !seen.insert((t.key.as_str(), t.value.as_str())) {
            return Err(StrategyError::DuplicatedScatterTerm {
                key: t.key.clone(),
                value: t.value.clone(),
            });
        }
    }
    Ok(())
}

/// In-place update strategy (`pub.InPlaceUpdateStrategy`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdateStrategy {
    /// Seconds between marking the pod not-ready and changing its spec.
    #[serde(default, skip_serializing_if = "super::serde_helpers::is_zero_i32")]
    pub grace_period_seconds: i32,
    /// Parallelism of image pre-download jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pre_download_parallelism: Option<IntOrString>,
    /// Timeout of image pre-download jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pre_download_timeout_seconds: Option<i32>,
    /// Updated-ready pods needed before pre-download starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pre_download_min_updated_ready_pods: Option<i32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn priority_wire_names_and_validation() {
        let v = json!({"weightPriority": [{"weight": 50, "matchSelector": {"matchLabels": {"a": "b"}}}]});
        let s: UpdatePriorityStrategy = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(serde_json::to_value(&s).unwrap(), v);
        assert_eq!(s.validate(), Ok(()));
        let both = UpdatePriorityStrategy {
            order_priority: vec![UpdatePriorityOrderTerm {
                ordered_key: "k".into(),
            }],
            ..s.clone()
        };
        assert_eq!(both.validate(), Err(StrategyError::BothPriorities));
        let mut bad = s.clone();
        bad.weight_priority[0].weight = 101;
        assert_eq!(bad.validate(), Err(StrategyError::BadWeight));
        let mut empty = s;
        empty.weight_priority[0].match_selector = LabelSelector::default();
        assert_eq!(empty.validate(), Err(StrategyError::EmptySelector));
        let o: UpdatePriorityStrategy =
            serde_json::from_value(json!({"orderPriority": [{"orderedKey": ""}]})).unwrap();
        assert_eq!(o.validate(), Err(StrategyError::EmptyOrderKey));
    }

    #[test]
    fn scatter_and_inplace_wire_names() {
        let v = json!([{"key": "zone", "value": "a"}]);
        let s: UpdateScatterStrategy = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(serde_json::to_value(&s).unwrap(), v);
        assert_eq!(validate_scatter(&s), Ok(()));
        let dup = vec![s[0].clone(), s[0].clone()];
        assert!(matches!(
            validate_scatter(&dup),
            Err(StrategyError::DuplicatedScatterTerm { .. })
        ));
        let i: InPlaceUpdateStrategy =
            serde_json::from_value(json!({"gracePeriodSeconds": 10})).unwrap();
        assert_eq!(i.grace_period_seconds, 10);
        assert_eq!(
            serde_json::to_value(InPlaceUpdateStrategy::default()).unwrap(),
            json!({})
        );
    }
}
