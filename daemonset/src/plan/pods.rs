//! What the shell needs around the planner, still pure: the pod a DaemonSet creates on a
//! node, the node a pod is aimed at, the planner's view of a node, a pod (any
//! [`PodView`]: the cached pod in the controller, a whole pod in tests) and the strategy.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    PodReadinessGate,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_core::api::keys::{CONTROLLER_REVISION_HASH_KEY, INPLACE_UPDATE_READY};
use kruise_core::api::lifecycle::{LifecycleHook, LifecycleState};
use kruise_core::api::version::APPS_V1BETA1;
use kruise_core::pods::lifecycle::is_hooked;
use kruise_core::pods::selector::selector_matches;
use kruise_core::pods::view::NODE_NAME_FIELD;
use kruise_core::pods::{PodView, lifecycle_state, pod_phase, ready_since};

use super::eligibility::{NodeView, daemon_tolerations, eligibility};
use super::{PlanNode, PlanPod, PlanStrategy};
use crate::api::v1beta1::{DaemonSet, DaemonSetSpec, RollingUpdateType, UpdateStrategyType};
use crate::api::{DEFAULT_BURST_REPLICAS, KIND};

/// The scheduler name of pods placed by the controller itself (`--assign-pods-by-scheduler=false`).
pub const DAEMONSET_SCHEDULER_NAME: &str = "kubernetes.io/daemonset-controller";

/// How a new pod reaches its node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Through the scheduler: required node affinity `metadata.name In [node]` (the default).
    Scheduler,
    /// Bound by the controller: `nodeName` and the DaemonSet scheduler name.
    NodeName,
}

/// The required node affinity term pinning a pod to `node`, replacing the template's
/// required terms (the node was found to match them), as upstream's
/// `ReplaceDaemonSetPodNodeNameNodeAffinity` does.
pub fn pin_to_node(affinity: Option<Affinity>, node: &str) -> Affinity {
    let term = NodeSelectorTerm {
        match_fields: Some(vec![NodeSelectorRequirement {
            key: NODE_NAME_FIELD.into(),
            operator: "In".into(),
            values: Some(vec![node.to_string()]),
        }]),
        ..NodeSelectorTerm::default()
    };
    let mut affinity = affinity.unwrap_or_default();
    let node_affinity = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    node_affinity.required_during_scheduling_ignored_during_execution = Some(NodeSelector {
        node_selector_terms: vec![term],
    });
    affinity
}

/// The pod `ds` runs on `node` at revision `hash`: the template with the
/// `controller-revision-hash` label, the daemon tolerations, the `InPlaceUpdateReady` gate
/// under `InPlaceIfPossible`, the DaemonSet as controller, and the placement.
pub fn new_pod(ds: &DaemonSet, node: &str, hash: &str, placement: Placement) -> Pod {
    let template = &ds.spec.template;
    let template_meta = template.metadata.clone().unwrap_or_default();
    let mut labels = template_meta.labels.unwrap_or_default();
    labels.insert(CONTROLLER_REVISION_HASH_KEY.into(), hash.into());
    let name = ds.metadata.name.clone().unwrap_or_default();
    let metadata = ObjectMeta {
        generate_name: Some(format!("{name}-")),
        namespace: ds.metadata.namespace.clone(),
        labels: Some(labels),
        annotations: template_meta.annotations,
        finalizers: template_meta.finalizers,
        owner_references: Some(vec![OwnerReference {
            api_version: APPS_V1BETA1.into(),
            kind: KIND.into(),
            name,
            uid: ds.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]),
        ..ObjectMeta::default()
    };
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.tolerations = Some(daemon_tolerations(&spec));
    if rolling_type(&ds.spec) == Some(&RollingUpdateType::InPlaceIfPossible) {
        let gates = spec.readiness_gates.get_or_insert_with(Vec::new);
        if !gates
            .iter()
            .any(|g| g.condition_type == INPLACE_UPDATE_READY)
        {
            gates.push(PodReadinessGate {
                condition_type: INPLACE_UPDATE_READY.into(),
            });
        }
    }
    match placement {
        Placement::Scheduler => spec.affinity = Some(pin_to_node(spec.affinity.take(), node)),
        Placement::NodeName => {
            spec.node_name = Some(node.into());
            spec.scheduler_name = Some(DAEMONSET_SCHEDULER_NAME.into());
        }
    }
    Pod {
        metadata,
        spec: Some(spec),
        status: None,
    }
}

fn rolling_type(spec: &DaemonSetSpec) -> Option<&RollingUpdateType> {
    (spec.update_strategy.type_ == Some(UpdateStrategyType::RollingUpdate))
        .then_some(spec.update_strategy.rolling_update.as_ref())
        .flatten()
        .and_then(|r| r.type_.as_ref())
}

/// The node a pod runs on or is aimed at: `spec.nodeName`, else the single node its
/// required affinity names by `metadata.name`.
pub fn target_node<P: PodView + ?Sized>(pod: &P) -> Option<&str> {
    pod.node_name()
        .filter(|n| !n.is_empty())
        .or_else(|| pod.pinned_node())
}

/// The planner's view of `node` for `ds`.
pub fn plan_node(ds: &DaemonSetSpec, node: &NodeView) -> PlanNode {
    let template = ds.template.spec.clone().unwrap_or_default();
    let selector = ds
        .update_strategy
        .rolling_update
        .as_ref()
        .and_then(|r| r.selector.as_ref());
    PlanNode {
        name: node.name.clone(),
        eligibility: eligibility(&template, node),
        selected: selector.is_none_or(|s| selector_matches(s, &node.labels).unwrap_or(false)),
    }
}

fn seconds(t: Timestamp) -> i64 {
    t.as_second()
}

/// The planner's view of `pod` at update revision `hash`; `None` for a pod aimed at no node.
/// (`pre_delete`: the DaemonSet's `lifecycle.preDelete` hook).
pub fn plan_pod<P: PodView>(
    pod: &P,
    hash: &str,
    in_place_possible: bool,
    pre_delete: Option<&LifecycleHook>,
) -> Option<PlanPod> {
    let node = target_node(pod)?.to_string();
    let meta = pod.meta();
    Some(PlanPod {
        name: pod.name().to_string(),
        node,
        bound: pod.node_name().is_some_and(|n| !n.is_empty()),
        created: meta.creation_timestamp.as_ref().map_or(0, |t| seconds(t.0)),
        terminating: meta.deletion_timestamp.is_some(),
        failed: pod_phase(pod) == "Failed",
        preparing_delete: lifecycle_state(pod) == Some(LifecycleState::PreparingDelete),
        updated: pod.label(CONTROLLER_REVISION_HASH_KEY) == Some(hash),
        ready_since: ready_since(pod).map(seconds),
        in_place_possible,
        held_by_pre_delete: is_hooked(pre_delete, pod),
    })
}

/// The strategy of a defaulted spec, as the planner takes it.
pub fn plan_strategy(spec: &DaemonSetSpec) -> PlanStrategy {
    let rolling = spec
        .update_strategy
        .rolling_update
        .clone()
        .unwrap_or_default();
    PlanStrategy {
        on_delete: spec.is_on_delete(),
        paused: rolling.paused == Some(true),
        in_place: rolling_type(spec) == Some(&RollingUpdateType::InPlaceIfPossible),
        max_unavailable: rolling.max_unavailable,
        max_surge: rolling.max_surge,
        partition: rolling.partition,
        partitioned_scaling: spec.partitioned_scaling(),
        burst_replicas: spec
            .burst_replicas
            .clone()
            .unwrap_or(IntOrString::Int(DEFAULT_BURST_REPLICAS)),
        min_ready_seconds: i64::from(spec.min_ready_seconds.max(0)),
        prune_ineligible_nodes: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kruise_core::pods::CachedPod;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn daemonset(rolling_type: &str) -> DaemonSet {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "ops", "uid": "ds-uid"},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                    "rollingUpdateType": rolling_type, "maxUnavailable": 1,
                    "selector": {"matchLabels": {"zone": "a"}}}},
                "template": {
                    "metadata": {"labels": {"app": "agent"}, "annotations": {"note": "x"}},
                    "spec": {
                        "containers": [{"name": "main", "image": "nginx"}],
                        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": [
                                {"key": "color", "operator": "In", "values": ["blue"]}]}]}}}
                    }
                }
            }
        }))
        .unwrap()
    }

    #[test]
    fn a_new_pod_is_pinned_by_affinity_labelled_owned_and_tolerant() {
        let pod = new_pod(
            &daemonset("InPlaceIfPossible"),
            "n1",
            "abc123",
            Placement::Scheduler,
        );
        let v = serde_json::to_value(&pod).unwrap();
        assert_eq!(v["metadata"]["generateName"], "agent-");
        assert_eq!(v["metadata"]["namespace"], "ops");
        assert_eq!(
            v["metadata"]["labels"],
            json!({"app": "agent", "controller-revision-hash": "abc123"})
        );
        assert_eq!(v["metadata"]["annotations"], json!({"note": "x"}));
        assert_eq!(
            v["metadata"]["ownerReferences"],
            json!([{"apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet", "name": "agent",
                    "uid": "ds-uid", "controller": true, "blockOwnerDeletion": true}])
        );
        assert_eq!(
            v["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"],
            json!({"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]})
        );
        assert!(v["spec"].get("nodeName").is_none());
        assert_eq!(
            v["spec"]["readinessGates"],
            json!([{"conditionType": "InPlaceUpdateReady"}])
        );
        assert_eq!(v["spec"]["tolerations"].as_array().unwrap().len(), 6);
        assert_eq!(target_node(&pod), Some("n1"));
        // The cache keeps the pinning term: an unbound pod is still aimed at its node.
        let cached: CachedPod = serde_json::from_value(v).unwrap();
        assert_eq!(target_node(&cached), Some("n1"));
    }

    #[test]
    fn without_the_scheduler_the_pod_is_bound_and_standard_gets_no_gate() {
        let pod = new_pod(&daemonset("Standard"), "n2", "abc123", Placement::NodeName);
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("n2"));
        assert_eq!(
            spec.scheduler_name.as_deref(),
            Some(DAEMONSET_SCHEDULER_NAME)
        );
        assert!(spec.readiness_gates.is_none());
        assert_eq!(target_node(&pod), Some("n2"));
    }

    #[test]
    fn the_planner_view_of_a_pod_and_a_node() {
        let ds = daemonset("Standard");
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "agent-x", "labels": {"controller-revision-hash": "abc123",
                "lifecycle.apps.kruise.io/state": "PreparingDelete"},
                "creationTimestamp": "2026-01-01T00:00:10Z"},
            "spec": {"nodeName": "n1", "containers": []},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:20Z"}]}
        }))
        .unwrap();
        let view = plan_pod(&pod, "abc123", false, None).unwrap();
        let cached = CachedPod::from_pod(pod.clone());
        assert_eq!(
            plan_pod(&cached, "abc123", false, None).as_ref(),
            Some(&view)
        );
        assert_eq!(view.node, "n1");
        assert!(view.bound && view.updated && view.preparing_delete && !view.failed);
        assert_eq!(view.ready_since.unwrap() - view.created, 10);
        assert!(!plan_pod(&pod, "other", false, None).unwrap().updated);
        pod.spec = None;
        assert_eq!(plan_pod(&pod, "abc123", false, None), None);

        let node = NodeView {
            name: "n1".into(),
            labels: [("color".to_string(), "blue".to_string())].into(),
            taints: vec![],
        };
        let planned = plan_node(&ds.spec, &node);
        assert!(planned.eligibility.should_run);
        assert!(!planned.selected, "zone=a selector");
        let strategy = plan_strategy(&ds.spec);
        assert_eq!(strategy.max_unavailable, Some(IntOrString::Int(1)));
        assert_eq!(strategy.burst_replicas, IntOrString::Int(250));
        assert!(!strategy.in_place && !strategy.on_delete && !strategy.paused);
    }
}
