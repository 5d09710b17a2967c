//! The lifecycle-hook state machine (`lifecycle.apps.kruise.io/state`).
//!
//! [`decide`] maps (current state, the workload's [`Lifecycle`], the pod's labels and
//! finalizers, what the controller wants to do) to the state to write and whether the
//! controller may go ahead now. Hooks follow OpenKruise: a pod *enters* a hooked state when ANY
//! handler label / finalizer is present ([`is_hooked`]), and `PreparingNormal -> Normal` /
//! `Updated -> Normal` need ALL of them ([`is_all_hooked`]).

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::api::keys::{
    LIFECYCLE_READINESS_USER_AGENT, LIFECYCLE_STATE_KEY, LIFECYCLE_TIMESTAMP_KEY,
    PRE_DELETE_HOOK_READINESS_KEY, PRE_UPDATE_HOOK_READINESS_KEY,
};
use crate::api::lifecycle::{Lifecycle, LifecycleHook, LifecycleState};

/// The pod facts the state machine reads: its labels and finalizers.
pub type PodHookView<'a> = &'a dyn super::LabelsAndFinalizers;

/// `IsPodHooked`: any handler label (k = v) or any handler finalizer is present.
pub fn is_hooked(hook: Option<&LifecycleHook>, pod: PodHookView<'_>) -> bool {
    let Some(h) = hook else { return false };
    h.finalizers_handler.iter().any(|f| pod.has_finalizer(f))
        || h.labels_handler
            .iter()
            .any(|(k, v)| pod.label(k) == Some(v.as_str()))
}

/// `IsPodAllHooked`: every handler label and finalizer is present (`None` hook: false).
pub fn is_all_hooked(hook: Option<&LifecycleHook>, pod: PodHookView<'_>) -> bool {
    let Some(h) = hook else { return false };
    h.finalizers_handler.iter().all(|f| pod.has_finalizer(f))
        && h.labels_handler
            .iter()
            .all(|(k, v)| pod.label(k) == Some(v.as_str()))
}

/// A pod counts as available for workload accounting only in `Normal` or without a state.
pub fn is_lifecycle_available(state: Option<LifecycleState>) -> bool {
    matches!(state, None | Some(LifecycleState::Normal))
}

/// What the controller wants to do with the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    /// The per-reconcile refresh (CloneSet `refreshPodState`).
    Refresh {
        /// The pod has `PodScheduled=True` (PreparingNormal -> Normal without a preNormal hook).
        scheduled: bool,
        /// The pod's revision already equals the update revision (rollback while PreparingUpdate).
        at_update_revision: bool,
        /// The in-place update finished (see `inplace::check_update_completed`).
        update_completed: bool,
    },
    /// Update the pod in place.
    InPlaceUpdate,
    /// Delete the pod (scale in or recreate).
    Delete,
}

/// A change to the pod's `KruisePodReady` not-ready keys (`markPodNotReady`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotReadyChange {
    /// Add `{userAgent: "Lifecycle", key}`.
    Add(&'static str),
    /// Remove `{userAgent: "Lifecycle", key}`.
    Remove(&'static str),
}

impl NotReadyChange {
    /// The user agent written with the key.
    pub fn user_agent(&self) -> &'static str {
        LIFECYCLE_READINESS_USER_AGENT
    }

    /// The pod's status with the key added or removed; `None` when that changes nothing.
    pub fn apply_to<P: super::PodView + ?Sized>(
        &self,
        pod: &P,
        now: Timestamp,
    ) -> Option<k8s_openapi::api::core::v1::PodStatus> {
        let message = self.message();
        match self {
            NotReadyChange::Add(_) => super::readiness::add_not_ready_key(pod, &message, now),
            NotReadyChange::Remove(_) => super::readiness::remove_not_ready_key(pod, &message, now),
        }
    }

    /// The `KruisePodReady` message to add or remove (see `pods::readiness`).
    pub fn message(&self) -> super::readiness::NotReadyMessage {
        let key = match self {
            NotReadyChange::Add(k) | NotReadyChange::Remove(k) => k,
        };
        super::readiness::NotReadyMessage {
            user_agent: LIFECYCLE_READINESS_USER_AGENT.into(),
            key: (*key).into(),
        }
    }
}

/// Result of [`decide`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    /// State to write now (`None`: leave the label as it is).
    pub next: Option<LifecycleState>,
    /// The controller may perform the intended action now (in-place update: write `Updating`
    /// in the same update; delete: delete the pod). Always false for [`Intent::Refresh`].
    pub proceed: bool,
    /// The state patch must also re-add the `inPlaceUpdate` handler labels and finalizers.
    pub readd_in_place_update_hooks: bool,
    /// `KruisePodReady` change to apply with the transition.
    pub not_ready: Option<NotReadyChange>,
}

/// The state machine refuses the intent in this state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not allowed to in-place update pod in state {0:?}")]
pub struct NotAllowed(pub Option<LifecycleState>);

fn not_ready_for(state: LifecycleState, mark: bool) -> Option<NotReadyChange> {
    if !mark {
        return None;
    }
    match state {
        LifecycleState::PreparingDelete => Some(NotReadyChange::Add(PRE_DELETE_HOOK_READINESS_KEY)),
        LifecycleState::PreparingUpdate => Some(NotReadyChange::Add(PRE_UPDATE_HOOK_READINESS_KEY)),
        LifecycleState::Updated => Some(NotReadyChange::Remove(PRE_UPDATE_HOOK_READINESS_KEY)),
        _ => None,
    }
}

fn to(state: LifecycleState, mark: bool) -> Decision {
    Decision {
        next: Some(state),
        not_ready: not_ready_for(state, mark),
        ..Decision::default()
    }
}

/// Decide the next lifecycle state and whether the controller may act.
///
/// `state` is the pod's current state (`None`: no label). `lifecycle` is the workload's
/// `spec.lifecycle`.
pub fn decide(
    state: Option<LifecycleState>,
    lifecycle: Option<&Lifecycle>,
    pod: PodHookView<'_>,
    intent: Intent,
) -> Result<Decision, NotAllowed> {
    use LifecycleState as S;
    let in_place = lifecycle.and_then(|l| l.in_place_update.as_ref());
    let pre_delete = lifecycle.and_then(|l| l.pre_delete.as_ref());
    let pre_normal = lifecycle.and_then(|l| l.pre_normal.as_ref());
    let mark_update = in_place.is_some_and(|h| h.mark_pod_not_ready);
    // After an update: `Updated` while the inPlaceUpdate hook is not fully back, else `Normal`.
    let after_update = || {
        if lifecycle.is_some() && !is_all_hooked(in_place, pod) {
            to(S::Updated, mark_update)
        } else {
            to(S::Normal, mark_update)
        }
    };
    match intent {
        Intent::Refresh {
            scheduled,
            at_update_revision,
            update_completed,
        } => Ok(match state {
            Some(S::PreparingNormal) => {
                let normal = match pre_normal {
                    None => scheduled,
                    Some(h) => is_all_hooked(Some(h), pod),
                };
                if normal {
                    to(S::Normal, mark_update)
                } else {
                    Decision::default()
                }
            }
            Some(S::PreparingUpdate) if at_update_revision => after_update(),
            Some(S::Updating) if update_completed => after_update(),
            Some(S::Updated) if in_place.is_none() || is_all_hooked(in_place, pod) => {
                to(S::Normal, mark_update)
            }
            _ => Decision::default(),
        }),
        Intent::InPlaceUpdate => match state {
            None | Some(S::PreparingNormal) | Some(S::Normal) => {
                if is_hooked(in_place, pod) {
                    Ok(to(S::PreparingUpdate, mark_update))
                } else {
                    Ok(Decision {
                        next: Some(S::Updating),
                        proceed: true,
                        ..Decision::default()
                    })
                }
            }
            Some(S::Updated) => match in_place {
                Some(h) => Ok(Decision {
                    next: Some(S::PreparingUpdate),
                    readd_in_place_update_hooks: true,
                    not_ready: not_ready_for(S::PreparingUpdate, h.mark_pod_not_ready),
                    ..Decision::default()
                }),
                None => Ok(Decision::default()),
            },
            Some(S::PreparingUpdate) => {
                if is_hooked(in_place, pod) {
                    Ok(Decision::default())
                } else {
                    Ok(Decision {
                        next: Some(S::Updating),
                        proceed: true,
                        ..Decision::default()
                    })
                }
            }
            Some(S::Updating) => Ok(Decision {
                next: Some(S::Updating),
                proceed: true,
                ..Decision::default()
            }),
            Some(S::PreparingDelete) => Err(NotAllowed(state)),
        },
        Intent::Delete => Ok(match state {
            Some(S::PreparingDelete) => Decision {
                proceed: !is_hooked(pre_delete, pod),
                ..Decision::default()
            },
            _ if is_hooked(pre_delete, pod) => to(
                S::PreparingDelete,
                pre_delete.is_some_and(|h| h.mark_pod_not_ready),
            ),
            _ => Decision {
                proceed: true,
                ..Decision::default()
            },
        }),
    }
}

/// The lifecycle timestamp annotation's value: RFC 3339, second precision, UTC.
pub fn state_timestamp(now: Timestamp) -> String {
    jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%SZ", now).unwrap_or_default()
}

/// Puts `state` and its timestamp on a pod's (or a write's) labels and annotations, as
/// OpenKruise writes them on create and with an in-place update.
pub fn mark_state(
    labels: &mut BTreeMap<String, String>,
    annotations: &mut BTreeMap<String, String>,
    state: LifecycleState,
    now: Timestamp,
) {
    labels.insert(LIFECYCLE_STATE_KEY.into(), state.as_str().into());
    annotations.insert(LIFECYCLE_TIMESTAMP_KEY.into(), state_timestamp(now));
}

/// The strategic-merge patch OpenKruise sends for a state change: the state label and the
/// RFC 3339 (second precision, UTC) timestamp annotation; when re-adding the inPlaceUpdate hook,
/// its labels and finalizers too (strategic merge appends finalizers).
pub fn state_patch(state: LifecycleState, now: Timestamp, readd: Option<&LifecycleHook>) -> Value {
    let ts = state_timestamp(now);
    let mut labels = serde_json::Map::new();
    labels.insert(
        LIFECYCLE_STATE_KEY.into(),
        Value::String(state.as_str().into()),
    );
    let mut patch = json!({"metadata": {"annotations": {LIFECYCLE_TIMESTAMP_KEY: ts}}});
    if let Some(h) = readd {
        for (k, v) in &h.labels_handler {
            labels.insert(k.clone(), Value::String(v.clone()));
        }
        patch["metadata"]["finalizers"] = json!(h.finalizers_handler);
    }
    patch["metadata"]["labels"] = Value::Object(labels);
    patch
}

#[cfg(test)]
mod tests {
    use super::*;
    use LifecycleState as S;
    use std::collections::BTreeMap;

    fn hook(label: Option<(&str, &str)>, fin: Option<&str>, mark: bool) -> LifecycleHook {
        LifecycleHook {
            labels_handler: label
                .map(|(k, v)| BTreeMap::from([(k.to_string(), v.to_string())]))
                .unwrap_or_default(),
            finalizers_handler: fin.map(|f| vec![f.to_string()]).unwrap_or_default(),
            mark_pod_not_ready: mark,
        }
    }

    struct HookPod<'a> {
        labels: &'a BTreeMap<String, String>,
        finalizers: &'a [String],
    }

    impl crate::pods::LabelsAndFinalizers for HookPod<'_> {
        fn label(&self, key: &str) -> Option<&str> {
            self.labels.get(key).map(String::as_str)
        }
        fn has_finalizer(&self, finalizer: &str) -> bool {
            self.finalizers.iter().any(|f| f == finalizer)
        }
    }

    fn view<'a>(labels: &'a BTreeMap<String, String>, fins: &'a [String]) -> HookPod<'a> {
        HookPod {
            labels,
            finalizers: fins,
        }
    }

    const REFRESH: Intent = Intent::Refresh {
        scheduled: true,
        at_update_revision: false,
        update_completed: false,
    };

    #[test]
    fn hooked_any_vs_all() {
        let h = hook(Some(("k", "v")), Some("f"), false);
        let l = BTreeMap::from([("k".to_string(), "v".to_string())]);
        let none: Vec<String> = vec![];
        assert!(is_hooked(Some(&h), &view(&l, &none)));
        assert!(!is_all_hooked(Some(&h), &view(&l, &none)));
        let fins = vec!["f".to_string()];
        assert!(is_all_hooked(Some(&h), &view(&l, &fins)));
        assert!(!is_hooked(None, &view(&l, &fins)));
        assert!(is_lifecycle_available(None) && is_lifecycle_available(Some(S::Normal)));
        assert!(!is_lifecycle_available(Some(S::Updated)));
    }

    #[test]
    fn state_machine_table() {
        let empty = BTreeMap::new();
        let hooked = BTreeMap::from([("k".to_string(), "v".to_string())]);
        let nofin: Vec<String> = vec![];
        let lc_update = Lifecycle {
            in_place_update: Some(hook(Some(("k", "v")), None, true)),
            ..Default::default()
        };
        let lc_delete = Lifecycle {
            pre_delete: Some(hook(Some(("k", "v")), None, true)),
            ..Default::default()
        };
        let lc_normal = Lifecycle {
            pre_normal: Some(hook(Some(("k", "v")), None, false)),
            ..Default::default()
        };
        struct Case<'a> {
            why: &'a str,
            state: Option<S>,
            lc: Option<&'a Lifecycle>,
            labels: &'a BTreeMap<String, String>,
            intent: Intent,
            next: Option<S>,
            proceed: bool,
            not_ready: Option<NotReadyChange>,
        }
        let cases = [
            Case {
                why: "PreparingNormal waits for scheduling",
                state: Some(S::PreparingNormal),
                lc: None,
                labels: &empty,
                intent: Intent::Refresh {
                    scheduled: false,
                    at_update_revision: false,
                    update_completed: false,
                },
                next: None,
                proceed: false,
                not_ready: None,
            },
            Case {
                why: "PreparingNormal -> Normal once scheduled",
                state: Some(S::PreparingNormal),
                lc: None,
                labels: &empty,
                intent: REFRESH,
                next: Some(S::Normal),
                proceed: false,
                not_ready: None,
            },
            Case {
                why: "preNormal needs all hooks",
                state: Some(S::PreparingNormal),
                lc: Some(&lc_normal),
                labels: &empty,
                intent: REFRESH,
                next: None,
                proceed: false,
                not_ready: None,
            },
            Case {
                why: "preNormal all hooked -> Normal",
                state: Some(S::PreparingNormal),
                lc: Some(&lc_normal),
                labels: &hooked,
                intent: REFRESH,
                next: Some(S::Normal),
                proceed: false,
                not_ready: None,
            },
            Case {
                why: "Normal + hooked inPlaceUpdate -> PreparingUpdate",
                state: Some(S::Normal),
                lc: Some(&lc_update),
                labels: &hooked,
                intent: Intent::InPlaceUpdate,
                next: Some(S::PreparingUpdate),
                proceed: false,
                not_ready: Some(NotReadyChange::Add("preUpdateHook")),
            },
            Case {
                why: "Normal, no hook -> update now as Updating",
                state: Some(S::Normal),
                lc: None,
                labels: &empty,
                intent: Intent::InPlaceUpdate,
                next: Some(S::Updating),
                proceed: true,
                not_ready: None,
            },
            Case {
                why: "PreparingUpdate still hooked waits",
                state: Some(S::PreparingUpdate),
                lc: Some(&lc_update),
                labels: &hooked,
                intent: Intent::InPlaceUpdate,
                next: None,
                proceed: false,
                not_ready: None,
            },
            Case {
                why: "PreparingUpdate unhooked proceeds",
                state: Some(S::PreparingUpdate),
                lc: Some(&lc_update),
                labels: &empty,
                intent: Intent::InPlaceUpdate,
                next: Some(S::Updating),
                proceed: true,
                not_ready: None,
            },
            Case {
                why: "Updating done, hook not back -> Updated",
                state: Some(S::Updating),
                lc: Some(&lc_update),
                labels: &empty,
                intent: Intent::Refresh {
                    scheduled: true,
                    at_update_revision: true,
                    update_completed: true,
                },
                next: Some(S::Updated),
                proceed: false,
                not_ready: Some(NotReadyChange::Remove("preUpdateHook")),
            },
            Case {
                why: "Updating done, hook back -> Normal",
                state: Some(S::Updating),
                lc: Some(&lc_update),
                labels: &hooked,
                intent: Intent::Refresh {
                    scheduled: true,
                    at_update_revision: true,
                    update_completed: true,
                },
                next: Some(S::Normal),
                proceed: false,
                not_ready: None,
            },
            Case {
                why: "Updating not done stays",
                state: Some(S::Updating),
                lc: Some(&lc_update),
                labels: &hooked,
                intent: REFRESH,
                next: None,
                proceed: false,
                not_ready: None,
            },
            Case {
                why: "PreparingUpdate rolled back -> Normal",
                state: Some(S::PreparingUpdate),
                lc: None,
                labels: &empty,
                intent: Intent::Refresh {
                    scheduled: true,
                    at_update_revision: true,
                    update_completed: false,
                },
                next: Some(S::Normal),
                proceed: false,
                not_ready: None,
            },
            Case {
                why: "Updated all hooked -> Normal",
                state: Some(S::Updated),
                lc: Some(&lc_update),
                labels: &hooked,
                intent: REFRESH,
                next: Some(S::Normal),
                proceed: false,
                not_ready: None,
            },
            Case {
                why: "Updated waits for hooks",
                state: Some(S::Updated),
                lc: Some(&lc_update),
                labels: &empty,
                intent: REFRESH,
                next: None,
                proceed: false,
                not_ready: None,
            },
            Case {
                why: "delete hooked -> PreparingDelete",
                state: Some(S::Normal),
                lc: Some(&lc_delete),
                labels: &hooked,
                intent: Intent::Delete,
                next: Some(S::PreparingDelete),
                proceed: false,
                not_ready: Some(NotReadyChange::Add("preDeleteHook")),
            },
            Case {
                why: "delete unhooked proceeds",
                state: Some(S::Normal),
                lc: Some(&lc_delete),
                labels: &empty,
                intent: Intent::Delete,
                next: None,
                proceed: true,
                not_ready: None,
            },
            Case {
                why: "PreparingDelete still hooked waits",
                state: Some(S::PreparingDelete),
                lc: Some(&lc_delete),
                labels: &hooked,
                intent: Intent::Delete,
                next: None,
                proceed: false,
                not_ready: None,
            },
            Case {
                why: "PreparingDelete unhooked deleted",
                state: Some(S::PreparingDelete),
                lc: Some(&lc_delete),
                labels: &empty,
                intent: Intent::Delete,
                next: None,
                proceed: true,
                not_ready: None,
            },
        ];
        for c in cases {
            let d = decide(c.state, c.lc, &view(c.labels, &nofin), c.intent).unwrap();
            assert_eq!(d.next, c.next, "{}", c.why);
            assert_eq!(d.proceed, c.proceed, "{}", c.why);
            assert_eq!(d.not_ready, c.not_ready, "{}", c.why);
        }
    }

    #[test]
    fn updated_readds_hooks_and_preparing_delete_refuses_update() {
        let empty = BTreeMap::new();
        let nofin: Vec<String> = vec![];
        let lc = Lifecycle {
            in_place_update: Some(hook(Some(("k", "v")), Some("f"), false)),
            ..Default::default()
        };
        let d = decide(
            Some(S::Updated),
            Some(&lc),
            &view(&empty, &nofin),
            Intent::InPlaceUpdate,
        )
        .unwrap();
        assert_eq!(d.next, Some(S::PreparingUpdate));
        assert!(d.readd_in_place_update_hooks && !d.proceed);
        assert_eq!(
            decide(
                Some(S::PreparingDelete),
                Some(&lc),
                &view(&empty, &nofin),
                Intent::InPlaceUpdate
            ),
            Err(NotAllowed(Some(S::PreparingDelete)))
        );
        let p = state_patch(
            S::PreparingUpdate,
            Timestamp::from_second(0).unwrap(),
            lc.in_place_update.as_ref(),
        );
        assert_eq!(
            p,
            json!({"metadata": {
                "labels": {"lifecycle.apps.kruise.io/state": "PreparingUpdate", "k": "v"},
                "annotations": {"lifecycle.apps.kruise.io/timestamp": "1970-01-01T00:00:00Z"},
                "finalizers": ["f"]
            }})
        );
    }

    fn arb_state() -> impl proptest::strategy::Strategy<Value = Option<S>> {
        use proptest::prelude::*;
        prop_oneof![
            Just(None),
            Just(Some(S::PreparingNormal)),
            Just(Some(S::Normal)),
            Just(Some(S::PreparingUpdate)),
            Just(Some(S::Updating)),
            Just(Some(S::Updated)),
            Just(Some(S::PreparingDelete)),
        ]
    }

    proptest::proptest! {
        #[test]
        fn never_proceeds_while_hooked(
            state in arb_state(),
            has_label in proptest::bool::ANY,
            has_fin in proptest::bool::ANY,
            delete in proptest::bool::ANY,
        ) {
            let labels = if has_label { BTreeMap::from([("k".to_string(), "v".to_string())]) } else { BTreeMap::new() };
            let fins: Vec<String> = if has_fin { vec!["f".to_string()] } else { vec![] };
            let h = hook(Some(("k", "v")), Some("f"), true);
            let lc = Lifecycle { pre_delete: Some(h.clone()), in_place_update: Some(h.clone()), pre_normal: None };
            let pod = &view(&labels, &fins);
            let intent = if delete { Intent::Delete } else { Intent::InPlaceUpdate };
            if let Ok(d) = decide(state, Some(&lc), pod, intent) {
                if d.proceed && delete {
                    proptest::prop_assert!(!is_hooked(Some(&h), pod), "deleted a hooked pod");
                }
                if d.proceed && !delete {
                    // an update proceeds only unhooked, or when already Updating
                    proptest::prop_assert!(!is_hooked(Some(&h), pod) || state == Some(S::Updating));
                    proptest::prop_assert_eq!(d.next, Some(S::Updating));
                }
                if d.next == Some(S::PreparingDelete) || d.next == Some(S::PreparingUpdate) {
                    proptest::prop_assert!(!d.proceed);
                    proptest::prop_assert!(matches!(d.not_ready, Some(NotReadyChange::Add(_))));
                }
            }
        }
    }
}
