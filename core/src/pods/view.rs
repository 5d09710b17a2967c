//! [`PodView`]: what planners and the in-place engine read of a pod, implemented by the full
//! `k8s_openapi` [`Pod`] (webhooks, tests) and by the compact [`CachedPod`] a controller keeps
//! in its cache. Code that only reads a pod takes `impl PodView`; code that builds a write
//! from a copy of the pod asks for [`PodView::to_pod`].
//!
//! [`CachedPod`]: super::cached::CachedPod

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    Affinity, ContainerResizePolicy, EnvVar, NodeAffinity, NodeSelector, NodeSelectorRequirement,
    NodeSelectorTerm, Pod, PodStatus, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A pod condition, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConditionRef<'a> {
    /// `type`.
    pub type_: &'a str,
    /// `True`, `False` or `Unknown`.
    pub status: &'a str,
    /// `reason`.
    pub reason: Option<&'a str>,
    /// `message`.
    pub message: Option<&'a str>,
    /// `lastTransitionTime`.
    pub last_transition_time: Option<Timestamp>,
}

/// A container of the pod spec, borrowed (the fields planners read).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContainerRef<'a> {
    /// Container name.
    pub name: &'a str,
    /// Image.
    pub image: Option<&'a str>,
    /// Environment (launch priority, env from metadata).
    pub env: &'a [EnvVar],
    /// Resources (in-place resize).
    pub resources: Option<&'a ResourceRequirements>,
    /// Resize policy (whether a resize restarts the container).
    pub resize_policy: &'a [ContainerResizePolicy],
}

/// A container status, borrowed (the fields the in-place engine reads).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContainerStatusRef<'a> {
    /// Container name.
    pub name: &'a str,
    /// Image as the runtime reports it.
    pub image: &'a str,
    /// Image digest.
    pub image_id: &'a str,
    /// `<runtime>://<id>`.
    pub container_id: Option<&'a str>,
    /// Readiness.
    pub ready: bool,
    /// Restarts.
    pub restart_count: i32,
    /// Allocated resources (in-place resize).
    pub resources: Option<&'a ResourceRequirements>,
}

/// Label and finalizer lookups (the lifecycle-hook state machine's view of a pod); object-safe.
pub trait LabelsAndFinalizers {
    /// The value of label `key`.
    fn label(&self, key: &str) -> Option<&str>;
    /// Whether the finalizer is present.
    fn has_finalizer(&self, finalizer: &str) -> bool;
}

/// What planners and the in-place engine read of a pod.
pub trait PodView: LabelsAndFinalizers {
    /// Name, namespace, uid, resourceVersion, owner references, creation and deletion times
    /// (labels, annotations and finalizers are read through their own methods).
    fn meta(&self) -> &ObjectMeta;
    /// The value of annotation `key`.
    fn annotation(&self, key: &str) -> Option<&str>;
    /// `spec.nodeName`.
    fn node_name(&self) -> Option<&str>;
    /// The node a required node affinity term names alone (`metadata.name In [node]`): how
    /// a DaemonSet aims a pod at its node before the scheduler binds it.
    fn pinned_node(&self) -> Option<&str>;
    /// The condition types of `spec.readinessGates`.
    fn readiness_gates(&self) -> impl Iterator<Item = &str>;
    /// `status.phase` (`""` when unset).
    fn phase(&self) -> &str;
    /// `status.reason`.
    fn status_reason(&self) -> Option<&str>;
    /// The status conditions.
    fn conditions(&self) -> impl Iterator<Item = ConditionRef<'_>>;
    /// The spec's containers (not init containers).
    fn containers(&self) -> impl Iterator<Item = ContainerRef<'_>>;
    /// The status's container statuses.
    fn container_statuses(&self) -> impl Iterator<Item = ContainerStatusRef<'_>>;
    /// The pod as a `k8s_openapi` object holding what this view holds, for building a write
    /// from a modified copy (a cached pod's copy has only the cached fields, so only patches
    /// naming the fields they change may be derived from it).
    fn to_pod(&self) -> Pod;
    /// A copy of the pod's status as this view holds it, to build a status write from.
    fn status_copy(&self) -> PodStatus;

    /// The pod's name (`""` when unset).
    fn name(&self) -> &str {
        self.meta().name.as_deref().unwrap_or_default()
    }
    /// The pod's namespace (`""` when unset).
    fn namespace(&self) -> &str {
        self.meta().namespace.as_deref().unwrap_or_default()
    }
    /// The condition of type `ty`.
    fn condition(&self, ty: &str) -> Option<ConditionRef<'_>> {
        self.conditions().find(|c| c.type_ == ty)
    }
    /// Whether `spec.readinessGates` names `condition_type`.
    fn has_readiness_gate(&self, condition_type: &str) -> bool {
        self.readiness_gates().any(|g| g == condition_type)
    }
}

/// The field a required node affinity names a node by.
pub const NODE_NAME_FIELD: &str = "metadata.name";

/// The node the first required node affinity term naming exactly one node by
/// [`NODE_NAME_FIELD`] with `In` names.
pub fn pinned_node(affinity: &Affinity) -> Option<&str> {
    let terms = &affinity
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    terms.iter().find_map(|term| {
        term.match_fields.iter().flatten().find_map(|r| {
            match (r.key.as_str(), r.operator.as_str(), r.values.as_deref()) {
                (NODE_NAME_FIELD, "In", Some([node])) => Some(node.as_str()),
                _ => None,
            }
        })
    })
}

/// The affinity whose only required term pins a pod to `node` (what [`pinned_node`] reads).
pub fn pinning_affinity(node: &str) -> Affinity {
    Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_fields: Some(vec![NodeSelectorRequirement {
                        key: NODE_NAME_FIELD.into(),
                        operator: "In".into(),
                        values: Some(vec![node.to_string()]),
                    }]),
                    ..NodeSelectorTerm::default()
                }],
            }),
            ..NodeAffinity::default()
        }),
        ..Affinity::default()
    }
}

fn condition_ref(c: &k8s_openapi::api::core::v1::PodCondition) -> ConditionRef<'_> {
    ConditionRef {
        type_: &c.type_,
        status: &c.status,
        reason: c.reason.as_deref(),
        message: c.message.as_deref(),
        last_transition_time: c.last_transition_time.as_ref().map(|t| t.0),
    }
}

impl LabelsAndFinalizers for Pod {
    fn label(&self, key: &str) -> Option<&str> {
        self.metadata.labels.as_ref()?.get(key).map(String::as_str)
    }
    fn has_finalizer(&self, finalizer: &str) -> bool {
        self.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == finalizer)
    }
}

impl PodView for Pod {
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }
    fn node_name(&self) -> Option<&str> {
        self.spec.as_ref()?.node_name.as_deref()
    }
    fn pinned_node(&self) -> Option<&str> {
        pinned_node(self.spec.as_ref()?.affinity.as_ref()?)
    }
    fn readiness_gates(&self) -> impl Iterator<Item = &str> {
        self.spec
            .as_ref()
            .and_then(|s| s.readiness_gates.as_ref())
            .into_iter()
            .flatten()
            .map(|g| g.condition_type.as_str())
    }
    fn phase(&self) -> &str {
        self.status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or_default()
    }
    fn status_reason(&self) -> Option<&str> {
        self.status.as_ref()?.reason.as_deref()
    }
    fn conditions(&self) -> impl Iterator<Item = ConditionRef<'_>> {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .map(condition_ref)
    }
    fn containers(&self) -> impl Iterator<Item = ContainerRef<'_>> {
        self.spec
            .as_ref()
            .into_iter()
            .flat_map(|s| s.containers.iter())
            .map(|c| ContainerRef {
                name: &c.name,
                image: c.image.as_deref(),
                env: c.env.as_deref().unwrap_or_default(),
                resources: c.resources.as_ref(),
                resize_policy: c.resize_policy.as_deref().unwrap_or_default(),
            })
    }
    fn container_statuses(&self) -> impl Iterator<Item = ContainerStatusRef<'_>> {
        self.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .into_iter()
            .flatten()
            .map(|c| ContainerStatusRef {
                name: &c.name,
                image: &c.image,
                image_id: &c.image_id,
                container_id: c.container_id.as_deref(),
                ready: c.ready,
                restart_count: c.restart_count,
                resources: c.resources.as_ref(),
            })
    }
    fn to_pod(&self) -> Pod {
        self.clone()
    }
    fn status_copy(&self) -> PodStatus {
        self.status.clone().unwrap_or_default()
    }
}

macro_rules! forward_pod_view {
    ($($ptr:ty),*) => {$(
        impl<T: PodView + ?Sized> LabelsAndFinalizers for $ptr {
            fn label(&self, key: &str) -> Option<&str> {
                (**self).label(key)
            }
            fn has_finalizer(&self, finalizer: &str) -> bool {
                (**self).has_finalizer(finalizer)
            }
        }
        impl<T: PodView + ?Sized> PodView for $ptr {
            fn meta(&self) -> &ObjectMeta {
                (**self).meta()
            }
            fn annotation(&self, key: &str) -> Option<&str> {
                (**self).annotation(key)
            }
            fn node_name(&self) -> Option<&str> {
                (**self).node_name()
            }
            fn pinned_node(&self) -> Option<&str> {
                (**self).pinned_node()
            }
            fn readiness_gates(&self) -> impl Iterator<Item = &str> {
                (**self).readiness_gates()
            }
            fn phase(&self) -> &str {
                (**self).phase()
            }
            fn status_reason(&self) -> Option<&str> {
                (**self).status_reason()
            }
            fn conditions(&self) -> impl Iterator<Item = ConditionRef<'_>> {
                (**self).conditions()
            }
            fn containers(&self) -> impl Iterator<Item = ContainerRef<'_>> {
                (**self).containers()
            }
            fn container_statuses(&self) -> impl Iterator<Item = ContainerStatusRef<'_>> {
                (**self).container_statuses()
            }
            fn to_pod(&self) -> Pod {
                (**self).to_pod()
            }
            fn status_copy(&self) -> PodStatus {
                (**self).status_copy()
            }
            fn condition(&self, ty: &str) -> Option<ConditionRef<'_>> {
                (**self).condition(ty)
            }
        }
    )*};
}

forward_pod_view!(&T, Arc<T>, Box<T>);
