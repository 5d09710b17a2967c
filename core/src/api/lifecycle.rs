//! Pod lifecycle hooks (`apps.kruise.io` `pub.Lifecycle`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Hooks a workload places on its pods' lifecycle.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Lifecycle {
    /// Hook before a pod is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_delete: Option<LifecycleHook>,
    /// Hook before a pod is updated in place and after it has been updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_update: Option<LifecycleHook>,
    /// Hook after a pod is created and before it becomes `Normal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_normal: Option<LifecycleHook>,
}

/// One lifecycle hook: labels and/or finalizers whose presence on a pod holds it in a state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleHook {
    /// Labels (key = value) that hook the pod.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels_handler: BTreeMap<String, String>,
    /// Finalizers that hook the pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalizers_handler: Vec<String>,
    /// Mark the pod not-ready (`KruisePodReady`) while `PreparingDelete` / `PreparingUpdate`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mark_pod_not_ready: bool,
}

/// Values of the `lifecycle.apps.kruise.io/state` pod label.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum LifecycleState {
    /// Created but not yet available; waits for scheduling or the `preNormal` hook.
    PreparingNormal,
    /// The only state in which a pod counts as available.
    Normal,
    /// The `inPlaceUpdate` hook matched; waits until the user removes the hook.
    PreparingUpdate,
    /// In-place update in progress.
    Updating,
    /// Updated, but the `inPlaceUpdate` hook is not yet fully re-added.
    Updated,
    /// The `preDelete` hook matched; deleted once the hook is removed.
    PreparingDelete,
}

impl LifecycleState {
    /// The exact label value.
    pub fn as_str(self) -> &'static str {
        match self {
            LifecycleState::PreparingNormal => "PreparingNormal",
            LifecycleState::Normal => "Normal",
            LifecycleState::PreparingUpdate => "PreparingUpdate",
            LifecycleState::Updating => "Updating",
            LifecycleState::Updated => "Updated",
            LifecycleState::PreparingDelete => "PreparingDelete",
        }
    }

    /// Parse a label value; unknown values give `None`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "PreparingNormal" => LifecycleState::PreparingNormal,
            "Normal" => LifecycleState::Normal,
            "PreparingUpdate" => LifecycleState::PreparingUpdate,
            "Updating" => LifecycleState::Updating,
            "Updated" => LifecycleState::Updated,
            "PreparingDelete" => LifecycleState::PreparingDelete,
            _ => return None,
        })
    }
}

impl std::fmt::Display for LifecycleState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycle_wire_names() {
        let v = serde_json::json!({
            "preDelete": {"labelsHandler": {"a": "b"}, "finalizersHandler": ["f"], "markPodNotReady": true},
            "inPlaceUpdate": {"labelsHandler": {"x": "y"}},
            "preNormal": {"finalizersHandler": ["n"]}
        });
        let l: Lifecycle = serde_json::from_value(v.clone()).unwrap();
        assert!(l.pre_delete.as_ref().unwrap().mark_pod_not_ready);
        assert_eq!(serde_json::to_value(&l).unwrap(), v);
    }

    #[test]
    fn state_round_trip() {
        for s in [
            LifecycleState::PreparingNormal,
            LifecycleState::Normal,
            LifecycleState::PreparingUpdate,
            LifecycleState::Updating,
            LifecycleState::Updated,
            LifecycleState::PreparingDelete,
        ] {
            assert_eq!(LifecycleState::parse(s.as_str()), Some(s));
            assert_eq!(
                serde_json::to_value(s).unwrap(),
                serde_json::json!(s.as_str())
            );
        }
        assert_eq!(LifecycleState::parse("Bogus"), None);
    }
}
