//! Lifecycle hooks around deletion and creation (`lifecycle.preDelete`, `preNormal`), and
//! `markPodNotReady`, through `kruise_core::pods::lifecycle`'s state machine as CloneSet's.

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kruise_core::api::LifecycleState;
use kruise_core::api::keys::LIFECYCLE_STATE_KEY;
use kruise_core::pods::lifecycle::{
    Intent, NotReadyChange, PodHookView, decide, is_all_hooked, state_patch,
};
use kruise_core::pods::{CachedPod, PodView as _};

use super::{Action, DeleteReason, Planner};

impl Planner<'_> {
    /// A lifecycle state change: the state patch, sent with the `KruisePodReady` change in
    /// one status write when the hook marks pods not ready (and the pod has that gate).
    pub(super) fn lifecycle_write(
        &self,
        pod: &CachedPod,
        patch: serde_json::Value,
        not_ready: Option<&NotReadyChange>,
    ) -> Action {
        let name = pod.name().to_string();
        match not_ready.and_then(|c| c.apply_to(pod, self.input.now)) {
            Some(status) => Action::UpdatePodStatus {
                name,
                status: Box::new(PodStatus {
                    conditions: Some(
                        kruise_core::pods::changed_conditions(pod, &status)
                            .cloned()
                            .collect(),
                    ),
                    ..Default::default()
                }),
                metadata: Some(patch),
            },
            None => Action::PatchPod { name, patch },
        }
    }

    /// `deletePod`: the pod's delete, or, while a `preDelete` hook holds it, its move to
    /// `PreparingDelete` (`None` once it waits there).
    pub(super) fn delete_action(&self, pod: &CachedPod, reason: DeleteReason) -> Option<Action> {
        let state = kruise_core::pods::lifecycle_state(pod);
        let view: PodHookView<'_> = pod;
        let decision = decide(
            state,
            self.input.set.spec.lifecycle.as_ref(),
            view,
            Intent::Delete,
        )
        .ok()?;
        if decision.proceed {
            return Some(Action::DeletePod {
                name: pod.name().to_string(),
                reason,
            });
        }
        match decision.next {
            Some(next) if state != Some(next) => Some(self.lifecycle_write(
                pod,
                state_patch(next, self.input.now, None),
                decision.not_ready.as_ref(),
            )),
            _ => None,
        }
    }

    /// A new pod starts `PreparingNormal` while the `preNormal` hook's labels and
    /// finalizers are not all on it (`Normal` otherwise).
    pub(super) fn set_initial_lifecycle(&self, pod: &mut Pod) {
        let pre_normal = self
            .input
            .set
            .spec
            .lifecycle
            .as_ref()
            .and_then(|l| l.pre_normal.as_ref());
        let Some(hook) = pre_normal else {
            return;
        };
        if is_all_hooked(Some(hook), &*pod) {
            return;
        }
        pod.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(
                LIFECYCLE_STATE_KEY.into(),
                LifecycleState::PreparingNormal.as_str().into(),
            );
    }
}
