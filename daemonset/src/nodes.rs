//! [`CachedNode`]: a node as the controller caches it, decoded straight from the watch
//! stream with only what eligibility reads — its name, labels and taints. A cordoned or
//! NotReady node is judged by the taints those states bring (see
//! [`crate::plan::eligibility`]), so neither `spec.unschedulable` nor the Ready condition is
//! kept; nor is the status (capacity, images, conditions, addresses), which the decoder
//! skips without allocating. Label and taint strings are interned once per process
//! (`kruise_core::pods::cached::intern`): nodes share most of them.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash as _, Hasher as _};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kruise_core::pods::cached::intern;
use serde::Deserialize;

use crate::plan::NodeView;

/// The compact cached node; see the module documentation. A clone shares the decoded data.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedNode(Arc<NodeData>);

#[derive(Debug, Clone, PartialEq)]
struct NodeData {
    /// name, uid and resourceVersion; nothing else.
    metadata: ObjectMeta,
    /// Sorted by key.
    labels: Box<[(Arc<str>, Arc<str>)]>,
    taints: Box<[CachedTaint]>,
}

#[derive(Debug, Clone, PartialEq, Hash)]
struct CachedTaint {
    key: Arc<str>,
    value: Option<Arc<str>>,
    effect: Arc<str>,
}

impl CachedNode {
    /// The cached form of a whole node.
    pub fn from_node(node: Node) -> Self {
        let Node { metadata, spec, .. } = node;
        CachedNode(Arc::new(NodeData {
            // BTreeMap iterates in key order: the slice is sorted.
            labels: metadata
                .labels
                .iter()
                .flatten()
                .map(|(k, v)| (intern(k), intern(v)))
                .collect(),
            taints: spec
                .and_then(|s| s.taints)
                .into_iter()
                .flatten()
                .map(|t| CachedTaint {
                    key: intern(&t.key),
                    value: t.value.as_deref().map(intern),
                    effect: intern(&t.effect),
                })
                .collect(),
            metadata: ObjectMeta {
                name: metadata.name,
                uid: metadata.uid,
                resource_version: metadata.resource_version,
                ..ObjectMeta::default()
            },
        }))
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        self.0.metadata.name.as_deref().unwrap_or_default()
    }

    /// What eligibility reads, as the planner takes it.
    pub fn view(&self) -> NodeView {
        NodeView {
            name: self.name().to_string(),
            labels: self
                .0
                .labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            taints: self
                .0
                .taints
                .iter()
                .map(|t| Taint {
                    key: t.key.to_string(),
                    value: t.value.as_deref().map(str::to_string),
                    effect: t.effect.to_string(),
                    time_added: None,
                })
                .collect(),
        }
    }

    /// A hash of the labels and taints: what can change a node's eligibility.
    pub fn fingerprint(&self) -> u64 {
        let mut h = DefaultHasher::new();
        self.0.labels.hash(&mut h);
        self.0.taints.hash(&mut h);
        h.finish()
    }
}

/// What is decoded of a node's JSON; every other field is skipped by the decoder.
#[derive(Deserialize)]
struct WireNode {
    #[serde(default)]
    metadata: WireMeta,
    #[serde(default)]
    spec: Option<WireSpec>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    name: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    labels: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct WireSpec {
    taints: Option<Vec<Taint>>,
}

impl<'de> Deserialize<'de> for CachedNode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let WireNode { metadata: m, spec } = WireNode::deserialize(d)?;
        Ok(CachedNode::from_node(Node {
            metadata: ObjectMeta {
                name: m.name,
                uid: m.uid,
                resource_version: m.resource_version,
                labels: m.labels,
                ..ObjectMeta::default()
            },
            spec: spec.map(|s| k8s_openapi::api::core::v1::NodeSpec {
                taints: s.taints,
                ..Default::default()
            }),
            status: None,
        }))
    }
}

impl kube::Resource for CachedNode {
    type DynamicType = ();
    type Scope = k8s_openapi::ClusterResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "Node".into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "nodes".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut Arc::make_mut(&mut self.0).metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn node(labels: serde_json::Value, taints: serde_json::Value) -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "uid": "u1", "resourceVersion": "7", "labels": labels,
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
                         "managedFields": [{"manager": "kubelet"}]},
            "spec": {"unschedulable": true, "podCIDR": "10.0.0.0/24", "taints": taints},
            "status": {
                "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
                "images": [{"names": ["nginx:1.25"], "sizeBytes": 1}]
            }
        })
    }

    #[test]
    fn keeps_what_eligibility_reads_as_the_whole_node_says() {
        let value = node(
            json!({"color": "blue", "kubernetes.io/hostname": "n1"}),
            json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
                    "timeAdded": "2026-01-01T00:00:00Z"},
                   {"key": "dedicated", "value": "infra", "effect": "NoExecute"}]),
        );
        let cached: CachedNode = serde_json::from_value(value.clone()).unwrap();
        let full: Node = serde_json::from_value(value).unwrap();
        assert_eq!(cached.name(), "n1");
        let view = cached.view();
        assert_eq!(Some(&view.labels), full.metadata.labels.as_ref());
        let without_time = |t: &Taint| Taint {
            time_added: None,
            ..t.clone()
        };
        let full_taints: Vec<Taint> = full.spec.unwrap().taints.unwrap();
        assert_eq!(
            view.taints,
            full_taints.iter().map(without_time).collect::<Vec<_>>()
        );
        assert_eq!(
            CachedNode::from_node(
                serde_json::from_value(node(
                    json!({"color": "blue", "kubernetes.io/hostname": "n1"}),
                    json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                   {"key": "dedicated", "value": "infra", "effect": "NoExecute"}]),
                ))
                .unwrap()
            ),
            cached
        );
        let meta = kube::Resource::meta(&cached);
        assert_eq!(meta.resource_version.as_deref(), Some("7"));
        assert_eq!(
            (meta.annotations.as_ref(), meta.managed_fields.as_ref()),
            (None, None)
        );
    }

    #[test]
    fn the_fingerprint_follows_labels_and_taints_only() {
        let print = |labels, taints| {
            serde_json::from_value::<CachedNode>(node(labels, taints))
                .unwrap()
                .fingerprint()
        };
        let base = print(json!({"color": "blue"}), json!([]));
        assert_eq!(base, print(json!({"color": "blue"}), json!([])));
        assert_ne!(base, print(json!({"color": "green"}), json!([])));
        assert_ne!(
            base,
            print(
                json!({"color": "blue"}),
                json!([{"key": "k", "effect": "NoSchedule"}])
            )
        );
        assert_ne!(
            print(json!({}), json!([{"key": "k", "effect": "NoSchedule"}])),
            print(json!({}), json!([{"key": "k", "effect": "NoExecute"}]))
        );
    }

    #[test]
    fn a_node_without_labels_spec_or_status_decodes() {
        let cached: CachedNode =
            serde_json::from_value(json!({"metadata": {"name": "bare"}})).unwrap();
        assert_eq!(
            cached.view(),
            NodeView {
                name: "bare".into(),
                ..NodeView::default()
            }
        );
    }
}
