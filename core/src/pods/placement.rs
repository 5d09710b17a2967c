//! Where a pod may run, as the scheduler decides it from the pod alone: `nodeSelector`, the
//! required node affinity and tolerations. BroadcastJob (which nodes its pods fit) and
//! Advanced DaemonSet (which nodes should run a daemon pod) both ask it, as their OpenKruise
//! counterparts call Kubernetes' own helpers.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Taint, Toleration,
};

/// Kubernetes' `Toleration.ToleratesTaint`: the effect (when set) and the key (when set)
/// match, and `Exists` tolerates any value while `Equal` (the default) needs the same one.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or("");
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or("");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("") {
        "Exists" => true,
        "Equal" | "" => {
            toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        _ => false,
    }
}

/// A node selector requirement against the node's value for its key (`None`: the node has
/// no such label). `Gt`/`Lt` compare integers and need exactly one.
pub fn requirement_matches(req: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = req.values.as_deref().unwrap_or_default();
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        op @ ("Gt" | "Lt") => {
            let (Some(v), [bound]) = (value.and_then(|v| v.parse::<i64>().ok()), values) else {
                return false;
            };
            let Ok(bound) = bound.parse::<i64>() else {
                return false;
            };
            if op == "Gt" { v > bound } else { v < bound }
        }
        _ => false,
    }
}

/// A node selector term: all its label expressions and field expressions (`metadata.name`
/// only) match the node `name` with `labels`; an empty term matches nothing.
pub fn term_matches(
    term: &NodeSelectorTerm,
    labels: &BTreeMap<String, String>,
    name: &str,
) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    expressions
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields
            .iter()
            .all(|r| r.key == "metadata.name" && requirement_matches(r, Some(name)))
}

/// The pod's `nodeSelector` and its required node affinity (any term) match the node `name`
/// with `labels`.
pub fn node_affinity_matches(
    spec: &PodSpec,
    labels: &BTreeMap<String, String>,
    name: &str,
) -> bool {
    let selector_matches = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    selector_matches
        && required.is_none_or(|r| {
            r.node_selector_terms
                .iter()
                .any(|t| term_matches(t, labels, name))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn tolerations_follow_kubernetes() {
        let taint = |key: &str, value: &str, effect: &str| Taint {
            key: key.into(),
            value: Some(value.into()).filter(|v: &String| !v.is_empty()),
            effect: effect.into(),
            ..Taint::default()
        };
        let tol = |v: serde_json::Value| -> Toleration { serde_json::from_value(v).unwrap() };
        let gpu = taint("gpu", "true", "NoSchedule");
        assert!(tolerates(
            &tol(json!({"key": "gpu", "value": "true"})),
            &gpu
        ));
        assert!(!tolerates(
            &tol(json!({"key": "gpu", "value": "false"})),
            &gpu
        ));
        assert!(tolerates(
            &tol(json!({"key": "gpu", "operator": "Exists"})),
            &gpu
        ));
        assert!(tolerates(&tol(json!({"operator": "Exists"})), &gpu));
        assert!(!tolerates(
            &tol(json!({"operator": "Exists", "effect": "NoExecute"})),
            &gpu
        ));
        assert!(!tolerates(
            &tol(json!({"key": "gpu", "operator": "Lt"})),
            &gpu
        ));
    }

    #[test]
    fn selector_and_required_affinity_both_match() {
        let spec = |v: serde_json::Value| -> PodSpec { serde_json::from_value(v).unwrap() };
        let zone_a = labels(&[("zone", "a"), ("cores", "8")]);
        let pod = spec(json!({"containers": [], "nodeSelector": {"zone": "a"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["4"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In",
                                      "values": ["n9"]}]}]}}}}));
        assert!(node_affinity_matches(&pod, &zone_a, "n1"));
        assert!(node_affinity_matches(&pod, &labels(&[("zone", "a")]), "n9"));
        assert!(!node_affinity_matches(
            &pod,
            &labels(&[("zone", "a")]),
            "n1"
        ));
        assert!(!node_affinity_matches(
            &pod,
            &labels(&[("zone", "b"), ("cores", "8")]),
            "n1"
        ));
        let empty_term = spec(json!({"containers": [],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{}]}}}}));
        assert!(!node_affinity_matches(&empty_term, &zone_a, "n1"));
        assert!(node_affinity_matches(
            &spec(json!({"containers": []})),
            &zone_a,
            "n1"
        ));
    }
}
