//! Whether a node should run the daemon pod, as OpenKruise's `nodeShouldRunDaemonPod` (the
//! upstream DaemonSet predicates) decides: the template's `nodeName`, `nodeSelector` and
//! required node affinity must match the node, and its taints must be tolerated by the
//! template's tolerations plus the ones every daemon pod gets. An untolerated `NoSchedule`
//! taint keeps a new pod off the node but lets a running one stay; an untolerated
//! `NoExecute` taint removes it. A cordoned (unschedulable) or NotReady node is judged by its
//! taints alone, so without a `NoExecute` taint it keeps its pod (deckhouse#8645).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodSpec, Taint, Toleration};
use kruise_core::pods::placement::{node_affinity_matches, tolerates};

/// What of a node eligibility reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeView {
    /// The node's name.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its taints.
    pub taints: Vec<Taint>,
}

/// A node's verdict for one DaemonSet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Eligibility {
    /// A daemon pod should be created on it.
    pub should_run: bool,
    /// A daemon pod already on it may stay.
    pub should_continue_running: bool,
}

/// `(key, effect)` of the tolerations every daemon pod gets (upstream
/// `AddOrUpdateDaemonPodTolerations`), all with operator `Exists`.
const DAEMON_TOLERATIONS: [(&str, &str); 6] = [
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
];
/// Added for a `hostNetwork` pod.
const NETWORK_UNAVAILABLE: (&str, &str) = ("node.kubernetes.io/network-unavailable", "NoSchedule");

/// The tolerations a daemon pod of `spec` carries: its own plus the daemon ones.
pub fn daemon_tolerations(spec: &PodSpec) -> Vec<Toleration> {
    let mut tolerations = spec.tolerations.clone().unwrap_or_default();
    let host_network = spec.host_network == Some(true);
    let extra = DAEMON_TOLERATIONS
        .iter()
        .chain(host_network.then_some(&NETWORK_UNAVAILABLE));
    for (key, effect) in extra {
        let present = tolerations
            .iter()
            .any(|t| t.key.as_deref() == Some(*key) && t.effect.as_deref() == Some(*effect));
        if !present {
            tolerations.push(Toleration {
                key: Some((*key).to_string()),
                operator: Some("Exists".into()),
                effect: Some((*effect).to_string()),
                ..Toleration::default()
            });
        }
    }
    tolerations
}

/// Whether a taint of one of `effects` is tolerated by none of `tolerations`.
fn untolerated(taints: &[Taint], tolerations: &[Toleration], effects: &[&str]) -> bool {
    taints
        .iter()
        .filter(|t| effects.contains(&t.effect.as_str()))
        .any(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
}

/// The verdict for `node` of a DaemonSet whose pod template spec is `spec`.
pub fn eligibility(spec: &PodSpec, node: &NodeView) -> Eligibility {
    let name_matches = spec
        .node_name
        .as_deref()
        .is_none_or(|n| n.is_empty() || n == node.name);
    if !name_matches || !node_affinity_matches(spec, &node.labels, &node.name) {
        return Eligibility::default();
    }
    let tolerations = daemon_tolerations(spec);
    Eligibility {
        should_run: !untolerated(&node.taints, &tolerations, &["NoSchedule", "NoExecute"]),
        should_continue_running: !untolerated(&node.taints, &tolerations, &["NoExecute"]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, labels: &[(&str, &str)], taints: &[(&str, &str, &str)]) -> NodeView {
        NodeView {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            taints: taints
                .iter()
                .map(|(k, v, e)| Taint {
                    key: k.to_string(),
                    value: (!v.is_empty()).then(|| v.to_string()),
                    effect: e.to_string(),
                    ..Taint::default()
                })
                .collect(),
        }
    }

    fn spec(value: serde_json::Value) -> PodSpec {
        serde_json::from_value(value).unwrap()
    }

    const RUN: Eligibility = Eligibility {
        should_run: true,
        should_continue_running: true,
    };
    const STAY: Eligibility = Eligibility {
        should_run: false,
        should_continue_running: true,
    };
    const NONE: Eligibility = Eligibility {
        should_run: false,
        should_continue_running: false,
    };

    #[test]
    fn eligibility_table() {
        let plain = spec(json!({"containers": []}));
        let blue = spec(json!({"containers": [], "nodeSelector": {"color": "blue"}}));
        let affinity = spec(json!({"containers": [], "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]}
        ]}}}}));
        let tolerant = spec(json!({"containers": [], "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"},
            {"key": "gpu", "operator": "Exists"}]}));
        let pinned = spec(json!({"containers": [], "nodeName": "n1"}));
        let host = spec(json!({"containers": [], "hostNetwork": true}));
        let table: Vec<(&str, &PodSpec, NodeView, Eligibility)> = vec![
            ("plain node", &plain, node("n1", &[], &[]), RUN),
            (
                "nodeSelector miss",
                &blue,
                node("n1", &[("color", "green")], &[]),
                NONE,
            ),
            (
                "nodeSelector hit",
                &blue,
                node("n1", &[("color", "blue")], &[]),
                RUN,
            ),
            (
                "affinity expression",
                &affinity,
                node("n1", &[("zone", "b")], &[]),
                RUN,
            ),
            (
                "affinity miss",
                &affinity,
                node("n1", &[("zone", "c")], &[]),
                NONE,
            ),
            ("affinity field term", &affinity, node("n9", &[], &[]), RUN),
            ("nodeName other", &pinned, node("n2", &[], &[]), NONE),
            ("nodeName same", &pinned, node("n1", &[], &[]), RUN),
            (
                "NoSchedule taint",
                &plain,
                node("n1", &[], &[("dedicated", "infra", "NoSchedule")]),
                STAY,
            ),
            (
                "NoExecute taint",
                &plain,
                node("n1", &[], &[("dedicated", "infra", "NoExecute")]),
                NONE,
            ),
            (
                "PreferNoSchedule ignored",
                &plain,
                node("n1", &[], &[("x", "", "PreferNoSchedule")]),
                RUN,
            ),
            (
                "tolerated by value",
                &tolerant,
                node("n1", &[], &[("dedicated", "infra", "NoSchedule")]),
                RUN,
            ),
            (
                "wrong value",
                &tolerant,
                node("n1", &[], &[("dedicated", "web", "NoSchedule")]),
                STAY,
            ),
            (
                "Exists any effect",
                &tolerant,
                node("n1", &[], &[("gpu", "1", "NoExecute")]),
                RUN,
            ),
            // Cordoned and NotReady nodes carry these taints; daemon pods tolerate them.
            (
                "cordoned",
                &plain,
                node(
                    "n1",
                    &[],
                    &[("node.kubernetes.io/unschedulable", "", "NoSchedule")],
                ),
                RUN,
            ),
            (
                "not ready",
                &plain,
                node(
                    "n1",
                    &[],
                    &[("node.kubernetes.io/not-ready", "", "NoExecute")],
                ),
                RUN,
            ),
            (
                "unreachable",
                &plain,
                node(
                    "n1",
                    &[],
                    &[("node.kubernetes.io/unreachable", "", "NoExecute")],
                ),
                RUN,
            ),
            (
                "network unavailable",
                &plain,
                node(
                    "n1",
                    &[],
                    &[("node.kubernetes.io/network-unavailable", "", "NoSchedule")],
                ),
                STAY,
            ),
            (
                "network unavailable, hostNetwork",
                &host,
                node(
                    "n1",
                    &[],
                    &[("node.kubernetes.io/network-unavailable", "", "NoSchedule")],
                ),
                RUN,
            ),
        ];
        for (what, spec, node, want) in table {
            assert_eq!(eligibility(spec, &node), want, "{what}");
        }
    }

    #[test]
    fn daemon_tolerations_are_added_once() {
        let spec = spec(json!({"containers": [], "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}]}));
        let tolerations = daemon_tolerations(&spec);
        assert_eq!(tolerations.len(), 6);
        assert_eq!(
            tolerations[0].key.as_deref(),
            Some("node.kubernetes.io/not-ready")
        );
    }
}
