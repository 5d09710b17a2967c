//! The multi-writer `KruisePodReady` readiness gate (OpenKruise `pkg/util/podreadiness`).
//!
//! Writers (lifecycle `markPodNotReady`, ContainerRecreateRequest) add and remove
//! `{userAgent, key}` messages; the condition's message is the JSON list of them sorted by
//! user agent then key; the status is False while the list is non-empty and True once emptied.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};

use super::PodView;
use crate::api::keys::KRUISE_POD_READY;

/// One not-ready reason.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotReadyMessage {
    /// Who holds the pod not-ready (e.g. `Lifecycle`).
    pub user_agent: String,
    /// Why (e.g. `preDeleteHook`).
    pub key: String,
}

fn has_gate<P: PodView + ?Sized>(pod: &P) -> bool {
    pod.has_readiness_gate(KRUISE_POD_READY)
}

fn parse(msg: Option<&str>) -> Vec<NotReadyMessage> {
    msg.filter(|m| !m.is_empty())
        .and_then(|m| serde_json::from_str(m).ok())
        .unwrap_or_default()
}

fn dump(mut list: Vec<NotReadyMessage>) -> String {
    list.sort();
    serde_json::to_string(&list).unwrap_or_else(|_| "[]".into())
}

/// The not-ready messages currently on the pod.
pub fn not_ready_messages<P: PodView + ?Sized>(pod: &P) -> Vec<NotReadyMessage> {
    parse(pod.condition(KRUISE_POD_READY).and_then(|c| c.message))
}

/// The status to write to add `msg` (condition False; `Ready` False when containers are
/// ready), or `None` when the pod has no `KruisePodReady` gate or already carries `msg`.
///
/// Deliberate difference: when the condition is absent OpenKruise appends it without a
/// status; kruise-rs appends it with status `False`.
pub fn add_not_ready_key<P: PodView + ?Sized>(
    pod: &P,
    msg: &NotReadyMessage,
    now: Timestamp,
) -> Option<PodStatus> {
    if !has_gate(pod) {
        return None;
    }
    let mut list = not_ready_messages(pod);
    if list.contains(msg) {
        return None;
    }
    list.push(msg.clone());
    let mut status = pod.status_copy();
    let conds = status.conditions.get_or_insert_with(Vec::new);
    let cond = PodCondition {
        type_: KRUISE_POD_READY.into(),
        status: "False".into(),
        message: Some(dump(list)),
        last_transition_time: Some(Time(now)),
        ..Default::default()
    };
    match conds.iter_mut().find(|c| c.type_ == KRUISE_POD_READY) {
        Some(c) => {
            c.status = cond.status;
            c.message = cond.message;
            c.last_transition_time = cond.last_transition_time;
        }
        None => conds.push(cond),
    }
    super::recompute_ready_condition(pod, &mut status, now);
    Some(status)
}

/// The status to write to remove `msg` (condition True once no message is left), or `None`
/// when there is nothing to remove.
pub fn remove_not_ready_key<P: PodView + ?Sized>(
    pod: &P,
    msg: &NotReadyMessage,
    now: Timestamp,
) -> Option<PodStatus> {
    if !has_gate(pod) {
        return None;
    }
    let mut status = pod.status_copy();
    let c = status
        .conditions
        .as_mut()?
        .iter_mut()
        .find(|c| c.type_ == KRUISE_POD_READY)?;
    let mut list = parse(c.message.as_deref());
    let before = list.len();
    list.retain(|m| m != msg);
    if list.len() == before {
        return None;
    }
    if list.is_empty() {
        c.status = "True".into();
    }
    c.message = Some(dump(list));
    c.last_transition_time = Some(Time(now));
    Some(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [], "readinessGates": [{"conditionType": "KruisePodReady"}]},
            "status": {"conditions": [
                {"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"},
                {"type": "KruisePodReady", "status": "True"}]}
        }))
        .unwrap()
    }

    fn msg(ua: &str, key: &str) -> NotReadyMessage {
        NotReadyMessage {
            user_agent: ua.into(),
            key: key.into(),
        }
    }

    #[test]
    fn add_and_remove_keys() {
        let now = Timestamp::from_second(0).unwrap();
        let mut p = pod();
        let s = add_not_ready_key(&p, &msg("Lifecycle", "preDeleteHook"), now).unwrap();
        p.status = Some(s);
        let s = add_not_ready_key(&p, &msg("CRR", "x"), now).unwrap();
        p.status = Some(s.clone());
        let c = s
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == "KruisePodReady")
            .unwrap();
        assert_eq!(c.status, "False");
        assert_eq!(
            c.message.as_deref(),
            Some(
                r#"[{"userAgent":"CRR","key":"x"},{"userAgent":"Lifecycle","key":"preDeleteHook"}]"#
            )
        );
        let ready = s
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(ready.status, "False");
        assert!(
            add_not_ready_key(&p, &msg("CRR", "x"), now).is_none(),
            "already present"
        );
        p.status = remove_not_ready_key(&p, &msg("CRR", "x"), now);
        assert!(remove_not_ready_key(&p, &msg("CRR", "x"), now).is_none());
        let s = remove_not_ready_key(&p, &msg("Lifecycle", "preDeleteHook"), now).unwrap();
        let c = s
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == "KruisePodReady")
            .unwrap();
        assert_eq!(
            (c.status.as_str(), c.message.as_deref()),
            ("True", Some("[]"))
        );
        let mut no_gate = pod();
        no_gate.spec.as_mut().unwrap().readiness_gates = None;
        assert!(add_not_ready_key(&no_gate, &msg("a", "b"), now).is_none());
    }
}
