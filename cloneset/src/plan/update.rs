//! The Update step (OpenKruise `sync/cloneset_update.go`): refresh every pod (in-place
//! refresh, lifecycle transitions, `pod-template-hash` back-fill); if nothing was written,
//! pick pods to move towards the target revision within `maxUnavailable` and update them in
//! place or mark them for recreation.

use kruise_core::pods::{CachedPod, LabelsAndFinalizers as _, PodView as _};
use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodStatus;
use kruise_core::api::LifecycleState;
use kruise_core::api::keys::{
    INPLACE_UPDATE_GRACE_KEY, INPLACE_UPDATE_GRACE_KEY_OLD, POD_TEMPLATE_HASH_KEY,
};
use kruise_core::inplace::{
    CompletionCheck, InPlaceGates, RefreshAction, UpdateRequest, begin_update,
    calculate_update_spec_for_revisions, check_update_completed, refresh,
};
use kruise_core::pods::lifecycle::{Intent, PodHookView, decide, state_patch};
use kruise_core::pods::{has_pod_scheduled_condition, lifecycle_state, order::update_order};
use kruise_core::revision::{pod_revision_labels, short_hash};
use serde_json::json;

use super::diffs::{at_revision, calculate_diffs, is_available, is_specified_delete};
use super::pods::{name_of, name_of_revision};
use super::{Action, MAX_POD_WRITES_PER_PLAN, Plan, PlanError, PlanInput};
use crate::api::v1beta1::CloneSetPodUpdatePolicy;

/// Only the conditions of `status` that change the pod's (what the status write patches):
/// a plan for thousands of new pods would otherwise hold a copy of each pod's whole status.
fn changed_conditions(pod: &CachedPod, status: &PodStatus) -> PodStatus {
    PodStatus {
        conditions: Some(
            kruise_core::pods::changed_conditions(pod, status)
                .cloned()
                .collect(),
        ),
        ..Default::default()
    }
}

/// Runs Update over the active pods.
pub fn update(
    input: &PlanInput<'_>,
    pods: &[&CachedPod],
    out: &mut Plan,
    errors: &mut Vec<PlanError>,
) {
    let cs = input.cloneset;
    let now = input.now;
    let update_rev = name_of_revision(input.update_revision);
    let current_rev = name_of_revision(input.current_revision);
    let check = CompletionCheck {
        vertical_scaling: input.gates.vertical_scaling,
        ..Default::default()
    };

    // 1. Refresh. In-place refresh writes (grace end, next batch, InPlaceUpdateReady=True)
    //    do not stop the update in OpenKruise; lifecycle and hash patches do. A pod written
    //    here is not also updated in this plan (one write per pod and plan).
    let mut touched: BTreeSet<String> = BTreeSet::new();
    let mut modified = false;
    let mut written = 0usize;
    for pod in pods {
        if written >= MAX_POD_WRITES_PER_PLAN {
            // The rest are refreshed by the next reconciles; nothing is updated before.
            modified = true;
            break;
        }
        let actions_before = out.actions.len();
        let name = name_of(pod).to_string();
        match refresh(pod, now, &check) {
            RefreshAction::Nothing => {}
            RefreshAction::WaitGrace { requeue_after } => {
                out.requeue_within(requeue_after);
            }
            RefreshAction::Write(w) => {
                if let Some(resize) = w.resize_patch {
                    out.actions.push(Action::ResizePod {
                        name: name.clone(),
                        resize,
                    });
                }
                if let Some(patch) = w.patch {
                    out.actions.push(Action::PatchPod {
                        name: name.clone(),
                        patch,
                    });
                    touched.insert(name.clone());
                }
            }
            // A new pod's InPlaceUpdateReady=True waits until it is scheduled (it cannot be
            // Ready before), so it travels with the PreparingNormal → Normal change.
            RefreshAction::SetReady(_)
                if lifecycle_state(pod) == Some(LifecycleState::PreparingNormal)
                    && !has_pod_scheduled_condition(pod) => {}
            RefreshAction::SetReady(status) => {
                out.actions.push(Action::UpdatePodStatus {
                    name: name.clone(),
                    status: Box::new(changed_conditions(pod, &status)),
                });
                touched.insert(name.clone());
            }
            RefreshAction::Invalid(message) => errors.push(PlanError::InvalidPodAnnotation {
                pod: name.clone(),
                message,
            }),
        }
        let patched = touched.contains(&name)
            && out
                .actions
                .iter()
                .any(|a| matches!(a, Action::PatchPod { name: n, .. } if *n == name));
        if patched {
            // One metadata/spec write per pod and plan: the lifecycle step waits a round.
            written += 1;
            continue;
        }
        if let Some(action) = lifecycle_refresh(input, pod, update_rev, &check) {
            out.actions.push(action);
            modified = true;
        } else if pod.label(POD_TEMPLATE_HASH_KEY).is_none() {
            let rev = kruise_core::pods::pod_revision(pod).unwrap_or_default();
            out.actions.push(Action::PatchPod {
                name: name.clone(),
                patch: json!({"metadata": {"labels": {POD_TEMPLATE_HASH_KEY: short_hash(rev)}}}),
            });
            modified = true;
        }
        if out.actions.len() > actions_before {
            written += 1;
        }
    }
    if modified {
        return;
    }

    // 2. OnDelete and paused never update.
    let strategy = &cs.spec.update_strategy;
    if strategy.is_on_delete() {
        return;
    }
    // Not defaulted yet (no rollingUpdate): OpenKruise updates with the defaults.
    let default_rolling = crate::api::v1beta1::RollingUpdateCloneSetStrategy::default();
    let rolling = strategy.rolling_update.as_ref().unwrap_or(&default_rolling);
    if rolling.paused {
        return;
    }
    let plain_new = |p: &CachedPod| at_revision(p, update_rev);
    let diffs = calculate_diffs(
        cs,
        pods,
        current_rev,
        update_rev,
        &plain_new,
        input.gates.partition_rollback,
        input.gates.exclude_preparing_delete,
        now,
    );
    if diffs.update_num == 0 {
        return;
    }
    let target = if diffs.update_num > 0 {
        input.update_revision
    } else {
        input.current_revision
    };
    let target_name = name_of_revision(target);

    // 3. Candidates. Deliberate difference from OpenKruise: a pod waiting for the target
    //    that is already specified for deletion (a ReCreate update marked it, or the user
    //    did) is on its way out and its replacement is created at the revision the
    //    partition asks for, so it counts as an update in flight rather than leaving room
    //    for one more. OpenKruise picks another pod as well, and once both deletions go
    //    through the old revision drops below the partition.
    let waits_for_target = |p: &CachedPod| {
        if diffs.update_num > 0 {
            !at_revision(p, update_rev)
        } else {
            at_revision(p, update_rev)
        }
    };
    let leaving = pods
        .iter()
        .filter(|p| {
            waits_for_target(p)
                && is_specified_delete(cs, *p)
                && lifecycle_state(*p) != Some(LifecycleState::PreparingDelete)
        })
        .count();
    let update_count = usize::try_from(diffs.update_num.unsigned_abs())
        .unwrap_or(usize::MAX)
        .saturating_sub(leaving);
    if update_count == 0 {
        return;
    }
    let candidates: Vec<usize> = pods
        .iter()
        .enumerate()
        .filter(|(_, p)| {
            if !waits_for_target(p) || is_specified_delete(cs, *p) || touched.contains(name_of(p)) {
                return false;
            }
            match lifecycle_state(p) {
                Some(LifecycleState::PreparingDelete) => false,
                Some(LifecycleState::Updated) => true,
                _ => !has_grace(p),
            }
        })
        .map(|(i, _)| i)
        .collect();
    let ordered = update_order(
        pods,
        &candidates,
        rolling.priority_strategy.as_ref(),
        &rolling.scatter_strategy,
    );

    // 4. Limit by |updateNum| and the unavailable budget.
    let mut chosen: Vec<usize> = ordered.into_iter().take(update_count).collect();
    let min_ready = cs.spec.min_ready_seconds;
    let mut unavailable = 0;
    let mut target_unavailable = 0;
    for p in pods {
        if !is_available(p, min_ready, now) {
            unavailable += 1;
            if at_revision(p, target_name) {
                target_unavailable += 1;
            }
        }
    }
    let mut can_update = 0usize;
    for &i in &chosen {
        if target_unavailable + i32::try_from(can_update).unwrap_or(i32::MAX)
            >= diffs.update_max_unavailable
        {
            break;
        }
        if is_available(pods[i], min_ready, now) {
            if unavailable >= diffs.update_max_unavailable {
                break;
            }
            unavailable += 1;
        }
        can_update += 1;
    }
    chosen.truncate(can_update.min(MAX_POD_WRITES_PER_PLAN));

    // 5. Update each.
    let policy = rolling.policy();
    let grace = rolling
        .in_place_update_strategy
        .as_ref()
        .map_or(0, |s| s.grace_period_seconds);
    for i in chosen {
        let pod = &pods[i];
        match update_pod(input, pod, target, &policy, grace) {
            Ok(Some(action)) => {
                if let Action::UpdateInPlace { update, .. } = &action
                    && let Some(d) = update.requeue_after
                {
                    out.requeue_within(d);
                }
                out.actions.push(action);
            }
            Ok(None) => {}
            Err(e) => {
                errors.push(e);
                return;
            }
        }
    }
}

fn has_grace(pod: &CachedPod) -> bool {
    pod.annotation(INPLACE_UPDATE_GRACE_KEY)
        .or_else(|| pod.annotation(INPLACE_UPDATE_GRACE_KEY_OLD))
        .is_some_and(|v| !v.is_empty())
}

/// `refreshPodState`'s lifecycle part.
fn lifecycle_refresh(
    input: &PlanInput<'_>,
    pod: &CachedPod,
    update_rev: &str,
    check: &CompletionCheck<'_>,
) -> Option<Action> {
    let state = lifecycle_state(pod)?;
    let view: PodHookView<'_> = pod;
    let intent = Intent::Refresh {
        scheduled: has_pod_scheduled_condition(pod),
        at_update_revision: at_revision(pod, update_rev),
        update_completed: state == LifecycleState::Updating
            && check_update_completed(pod, check).is_ok(),
    };
    let decision = decide(
        Some(state),
        input.cloneset.spec.lifecycle.as_ref(),
        view,
        intent,
    )
    .ok()?;
    let next = decision.next?;
    if next == state {
        return None;
    }
    Some(Action::SetLifecycleState {
        name: name_of(pod).to_string(),
        patch: state_patch(next, input.now, None),
        not_ready: decision.not_ready,
        status: None,
    })
}

/// `updatePod`: in place when the policy allows and the diff is in-place-able (honouring the
/// inPlaceUpdate hook), else — unless InPlaceOnly — mark for recreation.
fn update_pod(
    input: &PlanInput<'_>,
    pod: &CachedPod,
    target: &ControllerRevision,
    policy: &CloneSetPodUpdatePolicy,
    grace: i32,
) -> Result<Option<Action>, PlanError> {
    let name = name_of(pod).to_string();
    let target_name = name_of_revision(target).to_string();
    let in_place_policy = matches!(
        policy,
        CloneSetPodUpdatePolicy::InPlaceIfPossible | CloneSetPodUpdatePolicy::InPlaceOnly
    );
    if in_place_policy {
        let old = input
            .revisions
            .iter()
            .chain([input.current_revision, input.update_revision])
            .find(|r| at_revision(pod, name_of_revision(r)));
        let gates = InPlaceGates {
            env_from_metadata: input.gates.env_from_metadata,
            vertical_scaling: input.gates.vertical_scaling,
        };
        let recreate_on_vct =
            input.gates.recreate_on_vct_change && *policy != CloneSetPodUpdatePolicy::InPlaceOnly;
        let can =
            calculate_update_spec_for_revisions(old, Some(target), gates, grace, recreate_on_vct);
        if let (Ok(_), Some(old)) = (can, old) {
            let view: PodHookView<'_> = pod;
            let state = lifecycle_state(pod);
            let lifecycle = input.cloneset.spec.lifecycle.as_ref();
            let decision = decide(state, lifecycle, view, Intent::InPlaceUpdate).map_err(|_| {
                PlanError::NotAllowedState {
                    pod: name.clone(),
                    state: state.map(|s| s.as_str().to_string()).unwrap_or_default(),
                }
            })?;
            if !decision.proceed {
                return Ok(decision.next.map(|next| Action::SetLifecycleState {
                    name: name.clone(),
                    patch: state_patch(
                        next,
                        input.now,
                        if decision.readd_in_place_update_hooks {
                            lifecycle.and_then(|l| l.in_place_update.as_ref())
                        } else {
                            None
                        },
                    ),
                    not_ready: decision.not_ready,
                    status: None,
                }));
            }
            let mut request = UpdateRequest {
                gates,
                grace_period_seconds: grace,
                revision_labels: pod_revision_labels(&target_name, input.gates.short_hash),
                ..UpdateRequest::between(old, target)
            };
            request.mark_updating(input.now);
            if let Ok(update) = begin_update(pod, &request, input.now) {
                return Ok(Some(Action::UpdateInPlace {
                    name,
                    revision: target_name,
                    update: Box::new(update.into_writes(pod)),
                }));
            }
        }
        if *policy == CloneSetPodUpdatePolicy::InPlaceOnly {
            return Err(PlanError::InPlaceOnlyCannotUpdate(name));
        }
    }
    // Specified-delete pods are never candidates (step 3), so this is a fresh mark.
    Ok(Some(Action::MarkSpecifiedDelete {
        name,
        revision: target_name,
    }))
}
