//! How many matched pods an in-place sidecar rollout may touch: `updateStrategy`'s
//! `partition` and `maxUnavailable` resolved against the matched pods, rounded so that a
//! rollout always progresses.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_core::api::intstr::{
    IntOrPercentError, calculate_partition_replicas, scaled_value_from_int_or_percent,
};

/// Why a rollout budget could not be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// partition or maxUnavailable is not an int or percent.
    #[error("invalid int-or-percent: {0}")]
    IntOrPercent(#[from] IntOrPercentError),
}

/// How many matched pods an in-place sidecar rollout may touch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RolloutBudget {
    /// Pods kept at the old version.
    pub partition: i32,
    /// Pods that may be unavailable (upgrading or not ready after an upgrade) at once.
    pub max_unavailable: i32,
}

/// Resolves `partition` and `maxUnavailable` against the number of matched pods so that an
/// update always progresses: percent `maxUnavailable` rounds up and is at least 1 (5% of 5
/// pods is 1, not 0; a literal 0 would stall the rollout forever, so it counts as 1 too);
/// percent `partition` rounds up but, below 100%, always leaves at least one pod to update
/// (Kruise's `CalculatePartitionReplicas`). `None` means partition 0 and maxUnavailable 1.
pub fn rollout_budget(
    partition: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    matched_pods: i32,
) -> Result<RolloutBudget, BudgetError> {
    let total = matched_pods.max(0);
    let partition = calculate_partition_replicas(partition, Some(total))?;
    let max_unavailable = match max_unavailable {
        None => 1,
        Some(v) => scaled_value_from_int_or_percent(Some(v), total, true)?,
    };
    Ok(RolloutBudget {
        partition,
        max_unavailable: max_unavailable.max(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rollout_budget_always_progresses() {
        let pct = |s: &str| IntOrString::String(s.into());
        // 5% of 5 pods is 1, not 0.
        assert_eq!(
            rollout_budget(Some(&pct("0%")), Some(&pct("5%")), 5),
            Ok(RolloutBudget {
                partition: 0,
                max_unavailable: 1
            })
        );
        assert_eq!(
            rollout_budget(None, None, 5),
            Ok(RolloutBudget {
                partition: 0,
                max_unavailable: 1
            })
        );
        assert_eq!(
            rollout_budget(None, Some(&pct("50%")), 5)
                .unwrap()
                .max_unavailable,
            3
        );
        assert_eq!(
            rollout_budget(None, Some(&IntOrString::Int(0)), 5)
                .unwrap()
                .max_unavailable,
            1
        );
        // 95% of 5 rounds up to 5 but still leaves one pod to update.
        assert_eq!(
            rollout_budget(Some(&pct("95%")), None, 5)
                .unwrap()
                .partition,
            4
        );
        assert_eq!(
            rollout_budget(Some(&pct("100%")), None, 5)
                .unwrap()
                .partition,
            5
        );
        assert_eq!(
            rollout_budget(Some(&IntOrString::Int(9)), None, 5)
                .unwrap()
                .partition,
            5
        );
        assert!(rollout_budget(Some(&pct("x")), None, 5).is_err());
    }

    proptest! {
        #[test]
        fn budget_leaves_room_to_progress(p in 0i32..100, u in 0i32..=100, pods in 1i32..500) {
            let b = rollout_budget(Some(&IntOrString::String(format!("{p}%"))), Some(&IntOrString::String(format!("{u}%"))), pods).unwrap();
            prop_assert!(b.max_unavailable >= 1);
            prop_assert!(b.partition < pods || pods == 1);
            prop_assert!(b.partition >= 0);
        }
    }
}
