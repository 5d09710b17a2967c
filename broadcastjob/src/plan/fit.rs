//! Whether a BroadcastJob's pod fits a node, with the checks OpenKruise's
//! `checkNodeFitness` runs (the scheduler's filters against the node alone): `nodeName`,
//! `nodeSelector` and required node affinity, untolerated `NoSchedule`/`NoExecute` taints,
//! an unschedulable node, and requests beyond the node's allocatable cpu, memory or pods.
//! Other pods on the node are not counted, as in OpenKruise.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, PodSpec, Taint};
use kruise_compat::quantity::{Nanos, parse_nanos};
use kruise_core::pods::placement::{node_affinity_matches, tolerates};

/// The taint an unschedulable node is treated as having.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// Why a pod does not fit a node (what `kubectl describe` of a scheduler would say).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Misfit {
    /// `spec.nodeName` names another node.
    NodeName,
    /// `nodeSelector` or required node affinity does not match.
    Affinity,
    /// A `NoSchedule`/`NoExecute` taint is not tolerated.
    Taint(String),
    /// The node is cordoned and the pod does not tolerate it.
    Unschedulable,
    /// The pod requests more of a resource than the node has.
    Insufficient(String),
}

impl std::fmt::Display for Misfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Misfit::NodeName => f.write_str("node(s) didn't match the requested node name"),
            Misfit::Affinity => f.write_str("node(s) didn't match Pod's node affinity/selector"),
            Misfit::Taint(t) => write!(f, "node(s) had untolerated taint {{{t}}}"),
            Misfit::Unschedulable => f.write_str("node(s) were unschedulable"),
            Misfit::Insufficient(r) => write!(f, "Insufficient {r}"),
        }
    }
}

/// Keeps of `node` only what [`fits`] reads (and what a cache needs to key it): name, uid,
/// resourceVersion, labels and deletion timestamp; taints and unschedulable; allocatable.
/// A node's image list, conditions, addresses and annotations are dropped.
pub fn fit_view(node: &mut Node) {
    let meta = &mut node.metadata;
    meta.annotations = None;
    meta.managed_fields = None;
    meta.owner_references = None;
    meta.finalizers = None;
    if let Some(spec) = node.spec.as_mut() {
        spec.pod_cidr = None;
        spec.pod_cidrs = None;
        spec.provider_id = None;
        spec.config_source = None;
        spec.external_id = None;
    }
    if let Some(status) = node.status.as_mut() {
        *status = k8s_openapi::api::core::v1::NodeStatus {
            allocatable: status.allocatable.take(),
            ..Default::default()
        };
    }
}

/// Checks `spec` against `node`.
pub fn fits(spec: &PodSpec, node: &Node) -> Result<(), Misfit> {
    let name = node.metadata.name.as_deref().unwrap_or("");
    if spec
        .node_name
        .as_deref()
        .is_some_and(|n| !n.is_empty() && n != name)
    {
        return Err(Misfit::NodeName);
    }
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    if !node_affinity_matches(spec, labels, name) {
        return Err(Misfit::Affinity);
    }
    let tolerations = spec.tolerations.as_deref().unwrap_or(&[]);
    let node_spec = node.spec.as_ref();
    if node_spec.and_then(|s| s.unschedulable).unwrap_or(false) {
        let cordon = Taint {
            key: UNSCHEDULABLE_TAINT.into(),
            effect: "NoSchedule".into(),
            ..Taint::default()
        };
        if !tolerations.iter().any(|t| tolerates(t, &cordon)) {
            return Err(Misfit::Unschedulable);
        }
    }
    for taint in node_spec.and_then(|s| s.taints.as_deref()).unwrap_or(&[]) {
        if (taint.effect == "NoSchedule" || taint.effect == "NoExecute")
            && !tolerations.iter().any(|t| tolerates(t, taint))
        {
            let value = taint.value.as_deref().unwrap_or("");
            return Err(Misfit::Taint(format!("{}: {value}", taint.key)));
        }
    }
    fits_resources(spec, node)
}

/// Requests (the larger of the containers' sum and the largest init container) against the
/// node's allocatable cpu and memory, and one pod against its pod count.
fn fits_resources(spec: &PodSpec, node: &Node) -> Result<(), Misfit> {
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    let Some(allocatable) = allocatable else {
        return Ok(());
    };
    if allocatable
        .get("pods")
        .and_then(|q| parse_nanos(&q.0))
        .is_some_and(|pods| pods < 1_000_000_000)
    {
        return Err(Misfit::Insufficient("pods".into()));
    }
    for resource in ["cpu", "memory"] {
        let Some(available) = allocatable.get(resource).and_then(|q| parse_nanos(&q.0)) else {
            continue;
        };
        if requested(spec, resource) > available {
            return Err(Misfit::Insufficient(resource.into()));
        }
    }
    Ok(())
}

fn requested(spec: &PodSpec, resource: &str) -> Nanos {
    let of = |c: &k8s_openapi::api::core::v1::Container| -> Nanos {
        c.resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get(resource))
            .and_then(|q| parse_nanos(&q.0))
            .unwrap_or(0)
    };
    let containers: Nanos = spec.containers.iter().map(of).sum();
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .map(of)
        .max()
        .unwrap_or(0);
    containers.max(init)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_fit_view_keeps_what_fits_reads_and_nothing_heavy() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n", "uid": "u", "resourceVersion": "9", "labels": {"zone": "a"},
                         "annotations": {"big": "x"}},
            "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}], "unschedulable": true,
                     "podCIDR": "10.0.0.0/24"},
            "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
                       "capacity": {"cpu": "1"},
                       "images": [{"names": ["nginx:1"], "sizeBytes": 1}],
                       "conditions": [{"type": "Ready", "status": "True"}]},
        }))
        .unwrap();
        let mut small = node.clone();
        fit_view(&mut small);
        let v = serde_json::to_value(&small).unwrap();
        assert_eq!(
            v,
            json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "n", "uid": "u", "resourceVersion": "9", "labels": {"zone": "a"}},
                "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}], "unschedulable": true},
                "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"}},
            })
        );
        let pods: Vec<PodSpec> = vec![
            serde_json::from_value(json!({"containers": []})).unwrap(),
            serde_json::from_value(json!({"containers": [], "nodeSelector": {"zone": "a"},
                "tolerations": [{"operator": "Exists"}]}))
            .unwrap(),
            serde_json::from_value(
                json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
                "tolerations": [{"operator": "Exists"}]}),
            )
            .unwrap(),
        ];
        for pod in &pods {
            assert_eq!(fits(pod, &small), fits(pod, &node));
        }
        assert_eq!(fits(&pods[1], &small), Ok(()));
        assert_eq!(
            fits(&pods[2], &small),
            Err(Misfit::Insufficient("cpu".into()))
        );
    }
}
