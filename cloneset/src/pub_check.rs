//! CloneSet respects PodUnavailableBudgets on its own pod updates, as OpenKruise's CloneSet
//! does under `PodUnavailableBudgetUpdateGate`: before a pod is updated in place or marked
//! for a recreate, its budget is checked as an UPDATE and the disruption recorded on it
//! (`kruise_runtime::pub_client::check_pod`, the same step kruise-protection's pod
//! webhook takes). The first update a budget refuses waits, with every update planned after
//! it; the CloneSet looks again in a second. A budget that cannot be read holds the
//! updates too (logged), rather than letting them go unchecked.
//!
//! Budgets are read only where the API serves `policy.kruise.io/v1beta1`
//! PodUnavailableBudgets (discovery, asked again every [`DISCOVERY_TTL`]), so a cluster
//! without the protection family is unaffected.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kruise_core::pods::{CachedPod, PodView as _};
use kruise_core::pub_budget::PubOperation;
use kruise_core::pub_budget::decision::Gates;
use kruise_runtime::errors::is_not_found;
use kruise_runtime::pub_client::{Verdict, check_pod};
use kube::Client;

use crate::plan::Action;

/// The feature gate of OpenKruise's pre-check.
pub const UPDATE_GATE: &str = "PodUnavailableBudgetUpdateGate";
/// How long discovery's answer on the PodUnavailableBudget kind is trusted.
pub const DISCOVERY_TTL: Duration = Duration::from_secs(30);
/// When a CloneSet whose update a budget refused looks again (OpenKruise: a second).
pub const HELD_REQUEUE: Duration = Duration::from_secs(1);
/// The group version of the budgets read.
const PUB_GROUP_VERSION: &str = "policy.kruise.io/v1beta1";

/// The pre-check of one controller: off unless the gate is on.
pub struct PubCheck {
    client: Client,
    enabled: bool,
    /// Whether the kind was served when last asked, and when that was.
    served: Mutex<Option<(bool, Instant)>>,
}

impl PubCheck {
    /// The pre-check through `client`; `enabled` is `PodUnavailableBudgetUpdateGate`.
    pub fn new(client: Client, enabled: bool) -> Self {
        Self {
            client,
            enabled,
            served: Mutex::new(None),
        }
    }

    /// Keeps of the planned `actions` the pod updates the budgets allow, in plan order, each
    /// one's disruption recorded before it is sent; from the first refused, that update and
    /// every later one wait. True when some wait.
    pub async fn hold_updates(
        &self,
        namespace: &str,
        actions: &mut Vec<Action>,
        pods: &[Arc<CachedPod>],
    ) -> bool {
        if !self.enabled || !actions.iter().any(is_update) {
            return false;
        }
        let first_held = match self.first_held(namespace, actions, pods).await {
            Ok(Some(first)) => first,
            Ok(None) => return false,
            Err(e) => {
                tracing::warn!(namespace, error = %e, "reading PodUnavailableBudgets; pod updates wait");
                0
            }
        };
        hold_from(actions, first_held);
        true
    }

    /// The index of the first planned update a budget refuses, checking (and recording)
    /// each one before it; `None` when every one is allowed.
    async fn first_held(
        &self,
        namespace: &str,
        actions: &[Action],
        pods: &[Arc<CachedPod>],
    ) -> Result<Option<usize>, kube::Error> {
        if !self.budgets_served().await? {
            return Ok(None);
        }
        let gates = Gates {
            delete: true,
            update: true,
            in_place_vertical_scaling: false,
        };
        let by_name: HashMap<&str, &CachedPod> = pods.iter().map(|p| (p.name(), &**p)).collect();
        for (i, action) in actions.iter().enumerate() {
            if !is_update(action) {
                continue;
            }
            let Some(cached) = action.pod_name().and_then(|name| by_name.get(name)) else {
                continue;
            };
            let mut pod = cached.to_pod();
            pod.metadata
                .namespace
                .get_or_insert_with(|| namespace.to_string());
            // The cache's copy: an exemption it would give (a pod it shows not yet Ready) is
            // confirmed on the pod as it is.
            match check_pod(
                &self.client,
                &pod,
                true,
                &PubOperation::Update,
                false,
                gates,
            )
            .await?
            {
                Verdict::Allowed => {}
                Verdict::Denied(message) => {
                    tracing::info!(pod = cached.name(), %message, "PodUnavailableBudget holds the update");
                    return Ok(Some(i));
                }
            }
        }
        Ok(None)
    }

    /// Whether the API serves the budgets, from discovery (cached for [`DISCOVERY_TTL`]).
    async fn budgets_served(&self) -> Result<bool, kube::Error> {
        if let Ok(guard) = self.served.lock()
            && let Some((served, at)) = *guard
            && at.elapsed() < DISCOVERY_TTL
        {
            return Ok(served);
        }
        let served = match self
            .client
            .list_api_group_resources(PUB_GROUP_VERSION)
            .await
        {
            Ok(list) => list
                .resources
                .iter()
                .any(|r| r.name == "podunavailablebudgets"),
            Err(e) if is_not_found(&e) => false,
            Err(e) => return Err(e),
        };
        if let Ok(mut guard) = self.served.lock() {
            *guard = Some((served, Instant::now()));
        }
        Ok(served)
    }
}

/// Drops the pod updates from index `first` on; every other action stays, in order.
fn hold_from(actions: &mut Vec<Action>, first: usize) {
    let mut index = 0;
    actions.retain(|action| {
        let keep = index < first || !is_update(action);
        index += 1;
        keep
    });
}

/// A pod update a budget must allow: in place, or the recreate mark.
fn is_update(action: &Action) -> bool {
    matches!(
        action,
        Action::UpdateInPlace { .. } | Action::MarkSpecifiedDelete { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(name: &str) -> Action {
        Action::MarkSpecifiedDelete {
            name: name.into(),
            revision: "r2".into(),
        }
    }

    fn delete(name: &str) -> Action {
        Action::DeletePod {
            name: name.into(),
            pvcs: Vec::new(),
        }
    }

    #[test]
    fn updates_from_the_first_refused_wait_and_other_actions_go_ahead() {
        let planned = vec![mark("a"), delete("x"), mark("b"), delete("y"), mark("c")];
        let cases: [(usize, Vec<Action>); 3] = [
            (0, vec![delete("x"), delete("y")]),
            (2, vec![mark("a"), delete("x"), delete("y")]),
            (4, vec![mark("a"), delete("x"), mark("b"), delete("y")]),
        ];
        for (first, want) in cases {
            let mut actions = planned.clone();
            hold_from(&mut actions, first);
            assert_eq!(actions, want, "held from {first}");
        }
    }
}
