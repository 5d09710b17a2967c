//! [`CachedPod`]: the compact pod a workload controller keeps in its cache, decoded straight
//! from the watch stream (`kube`'s reflector stores it like any resource).
//!
//! A `k8s_openapi` `Pod` is over 4 KB inline before any string is set (its spec, one
//! container and one container status are each 0.75–2.2 KB of `Option` fields), and every
//! label map, condition and quantity allocates on top; a 10,000-pod cache of them took
//! 120–170 MB. A `CachedPod` holds only what [`PodView`] exposes, in boxed slices instead of
//! maps, with every string that pods of one workload share (label and annotation keys and
//! values, images, condition types and reasons, resource requirements) interned once per
//! process: about 2 KB per pod.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::{Arc, LazyLock, Mutex};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerResizePolicy, ContainerStatus, EnvVar, NodeAffinity,
    NodeSelector, Pod, PodCondition, PodReadinessGate, PodSpec, PodStatus, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::Deserialize;

use super::view::{
    ConditionRef, ContainerRef, ContainerStatusRef, LabelsAndFinalizers, PodView, pinned_node,
    pinning_affinity,
};

/// A value shared by every holder that interned an equal one. Entries no holder uses any more
/// are dropped when the table has doubled since the last sweep.
struct Interner<K, V> {
    table: HashMap<K, Arc<V>>,
    swept_at: usize,
}

impl<K: Eq + Hash, V> Interner<K, V> {
    fn new() -> Self {
        Interner {
            table: HashMap::new(),
            swept_at: 1024,
        }
    }

    fn get_or_insert(&mut self, key: K, make: impl FnOnce(&K) -> Arc<V>) -> Arc<V> {
        if self.table.len() >= self.swept_at * 2 {
            self.table.retain(|_, v| Arc::strong_count(v) > 1);
            self.swept_at = self.table.len().max(1024);
        }
        self.table
            .entry(key)
            .or_insert_with_key(|k| make(k))
            .clone()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned interner only means a panic mid-insert; the table is still valid.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Interned strings; a set of `Arc<str>` looked up by `&str`, so each string is stored once.
struct StringSet {
    set: std::collections::HashSet<Arc<str>>,
    swept_at: usize,
}

static STRINGS: LazyLock<Mutex<StringSet>> = LazyLock::new(|| {
    Mutex::new(StringSet {
        set: std::collections::HashSet::new(),
        swept_at: 1024,
    })
});

/// The process-wide shared copy of `s`.
pub fn intern(s: &str) -> Arc<str> {
    let mut t = lock(&STRINGS);
    if let Some(v) = t.set.get(s) {
        return v.clone();
    }
    if t.set.len() >= t.swept_at * 2 {
        t.set.retain(|v| Arc::strong_count(v) > 1);
        t.swept_at = t.set.len().max(1024);
    }
    let v: Arc<str> = Arc::from(s);
    t.set.insert(v.clone());
    v
}

/// Interns a JSON-serializable value by its serialization (resources, env lists, conditions).
fn intern_json<V: serde::Serialize>(
    table: &'static LazyLock<Mutex<Interner<String, V>>>,
    value: V,
) -> Arc<V> {
    let key = serde_json::to_string(&value).unwrap_or_default();
    lock(table).get_or_insert(key, |_| Arc::new(value))
}

static RESOURCES: LazyLock<Mutex<Interner<String, ResourceRequirements>>> =
    LazyLock::new(|| Mutex::new(Interner::new()));
static ENVS: LazyLock<Mutex<Interner<String, Vec<EnvVar>>>> =
    LazyLock::new(|| Mutex::new(Interner::new()));
static RESIZE_POLICIES: LazyLock<Mutex<Interner<String, Vec<ContainerResizePolicy>>>> =
    LazyLock::new(|| Mutex::new(Interner::new()));
static CONDITIONS: LazyLock<Mutex<Interner<String, ConditionShape>>> =
    LazyLock::new(|| Mutex::new(Interner::new()));

/// A condition without its transition time: the part pods share.
#[derive(Debug, serde::Serialize, PartialEq, Eq)]
struct ConditionShape {
    type_: Box<str>,
    status: Box<str>,
    reason: Option<Box<str>>,
    message: Option<Box<str>>,
}

#[derive(Debug, Clone, PartialEq)]
struct CachedCondition {
    shape: Arc<ConditionShape>,
    last_transition_time: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq)]
struct CachedContainer {
    name: Arc<str>,
    image: Option<Arc<str>>,
    env: Option<Arc<Vec<EnvVar>>>,
    resources: Option<Arc<ResourceRequirements>>,
    resize_policy: Option<Arc<Vec<ContainerResizePolicy>>>,
}

#[derive(Debug, Clone, PartialEq)]
struct CachedContainerStatus {
    name: Arc<str>,
    image: Arc<str>,
    image_id: Arc<str>,
    container_id: Option<Arc<str>>,
    ready: bool,
    restart_count: i32,
    resources: Option<Arc<ResourceRequirements>>,
}

/// The compact cached pod; see the module documentation. Decoded from a pod's JSON (a watch
/// event, a list page) or made from a `Pod` with [`CachedPod::from_pod`]. A clone shares the
/// decoded data (kube's reflector clones each object it stores), so a watch event's pod is
/// allocated once.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedPod(Arc<PodData>);

#[derive(Debug, Clone, PartialEq)]
struct PodData {
    /// name, namespace, uid, resourceVersion, generation, ownerReferences, creation and
    /// deletion timestamps, deletionGracePeriodSeconds; nothing else.
    metadata: ObjectMeta,
    /// Sorted by key.
    labels: Box<[(Arc<str>, Arc<str>)]>,
    /// Sorted by key.
    annotations: Box<[(Arc<str>, Arc<str>)]>,
    finalizers: Box<[Arc<str>]>,
    node_name: Option<Arc<str>>,
    /// The node the required node affinity names alone ([`PodView::pinned_node`]).
    pinned_node: Option<Arc<str>>,
    readiness_gates: Box<[Arc<str>]>,
    containers: Box<[CachedContainer]>,
    phase: Option<Arc<str>>,
    reason: Option<Arc<str>>,
    conditions: Box<[CachedCondition]>,
    container_statuses: Box<[CachedContainerStatus]>,
}

fn interned_map(m: Option<BTreeMap<String, String>>) -> Box<[(Arc<str>, Arc<str>)]> {
    // BTreeMap iterates in key order, so the slice is sorted for binary search.
    m.into_iter()
        .flatten()
        .map(|(k, v)| (intern(&k), intern(&v)))
        .collect()
}

fn lookup<'a>(sorted: &'a [(Arc<str>, Arc<str>)], key: &str) -> Option<&'a str> {
    sorted
        .binary_search_by(|(k, _)| (**k).cmp(key))
        .ok()
        .map(|i| &*sorted[i].1)
}

fn to_map(sorted: &[(Arc<str>, Arc<str>)]) -> Option<BTreeMap<String, String>> {
    (!sorted.is_empty()).then(|| {
        sorted
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    })
}

impl CachedPod {
    /// The cached form of a full pod.
    pub fn from_pod(pod: Pod) -> Self {
        let Pod {
            metadata,
            spec,
            status,
        } = pod;
        let spec = spec.unwrap_or_default();
        let status = status.unwrap_or_default();
        CachedPod(Arc::new(PodData {
            labels: interned_map(metadata.labels),
            annotations: interned_map(metadata.annotations),
            finalizers: metadata
                .finalizers
                .iter()
                .flatten()
                .map(|f| intern(f))
                .collect(),
            metadata: ObjectMeta {
                name: metadata.name,
                namespace: metadata.namespace,
                uid: metadata.uid,
                resource_version: metadata.resource_version,
                generation: metadata.generation,
                owner_references: metadata.owner_references,
                creation_timestamp: metadata.creation_timestamp,
                deletion_timestamp: metadata.deletion_timestamp,
                deletion_grace_period_seconds: metadata.deletion_grace_period_seconds,
                ..Default::default()
            },
            node_name: spec.node_name.as_deref().map(intern),
            pinned_node: spec.affinity.as_ref().and_then(pinned_node).map(intern),
            readiness_gates: spec
                .readiness_gates
                .iter()
                .flatten()
                .map(|g| intern(&g.condition_type))
                .collect(),
            containers: spec
                .containers
                .into_iter()
                .map(|c| CachedContainer {
                    name: intern(&c.name),
                    image: c.image.as_deref().map(intern),
                    env: c.env.map(|e| intern_json(&ENVS, e)),
                    resources: c.resources.map(|r| intern_json(&RESOURCES, r)),
                    resize_policy: c.resize_policy.map(|r| intern_json(&RESIZE_POLICIES, r)),
                })
                .collect(),
            phase: status.phase.as_deref().map(intern),
            reason: status.reason.as_deref().map(intern),
            conditions: status
                .conditions
                .into_iter()
                .flatten()
                .map(|c| CachedCondition {
                    last_transition_time: c.last_transition_time.map(|t| t.0),
                    shape: intern_json(
                        &CONDITIONS,
                        ConditionShape {
                            type_: c.type_.into(),
                            status: c.status.into(),
                            reason: c.reason.map(Into::into),
                            message: c.message.map(Into::into),
                        },
                    ),
                })
                .collect(),
            container_statuses: status
                .container_statuses
                .into_iter()
                .flatten()
                .map(|c| CachedContainerStatus {
                    name: intern(&c.name),
                    image: intern(&c.image),
                    image_id: intern(&c.image_id),
                    container_id: c.container_id.as_deref().map(intern),
                    ready: c.ready,
                    restart_count: c.restart_count,
                    resources: c.resources.map(|r| intern_json(&RESOURCES, r)),
                })
                .collect(),
        }))
    }
}

/// What is decoded of a pod's JSON: [`CachedPod`]'s fields, with every other field skipped
/// by the decoder (no allocation for probes, volumes, mounts, tolerations, …).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePod {
    #[serde(default)]
    metadata: WireMeta,
    #[serde(default)]
    spec: Option<WireSpec>,
    #[serde(default)]
    status: Option<WireStatus>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    finalizers: Option<Vec<String>>,
    owner_references: Option<Vec<OwnerReference>>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireSpec {
    #[serde(default)]
    containers: Vec<WireContainer>,
    node_name: Option<String>,
    readiness_gates: Option<Vec<PodReadinessGate>>,
    affinity: Option<WireAffinity>,
}

/// Of the affinity, only the required node affinity (where a pod may be pinned to a node).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireAffinity {
    node_affinity: Option<WireNodeAffinity>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireNodeAffinity {
    required_during_scheduling_ignored_during_execution: Option<NodeSelector>,
}

#[derive(Deserialize)]
struct WireContainer {
    name: String,
    image: Option<String>,
    env: Option<Vec<EnvVar>>,
    resources: Option<ResourceRequirements>,
    #[serde(rename = "resizePolicy")]
    resize_policy: Option<Vec<ContainerResizePolicy>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireStatus {
    phase: Option<String>,
    reason: Option<String>,
    conditions: Option<Vec<PodCondition>>,
    container_statuses: Option<Vec<WireContainerStatus>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireContainerStatus {
    name: String,
    #[serde(default)]
    image: String,
    #[serde(default, rename = "imageID")]
    image_id: String,
    #[serde(rename = "containerID")]
    container_id: Option<String>,
    #[serde(default)]
    ready: bool,
    #[serde(default)]
    restart_count: i32,
    resources: Option<ResourceRequirements>,
}

impl From<WirePod> for Pod {
    fn from(w: WirePod) -> Pod {
        let m = w.metadata;
        Pod {
            metadata: ObjectMeta {
                name: m.name,
                namespace: m.namespace,
                uid: m.uid,
                resource_version: m.resource_version,
                generation: m.generation,
                labels: m.labels,
                annotations: m.annotations,
                finalizers: m.finalizers,
                owner_references: m.owner_references,
                creation_timestamp: m.creation_timestamp,
                deletion_timestamp: m.deletion_timestamp,
                deletion_grace_period_seconds: m.deletion_grace_period_seconds,
                ..Default::default()
            },
            spec: w.spec.map(|s| PodSpec {
                containers: s
                    .containers
                    .into_iter()
                    .map(|c| Container {
                        name: c.name,
                        image: c.image,
                        env: c.env,
                        resources: c.resources,
                        resize_policy: c.resize_policy,
                        ..Default::default()
                    })
                    .collect(),
                node_name: s.node_name,
                readiness_gates: s.readiness_gates,
                affinity: s.affinity.and_then(|a| a.node_affinity).map(|a| Affinity {
                    node_affinity: Some(NodeAffinity {
                        required_during_scheduling_ignored_during_execution: a
                            .required_during_scheduling_ignored_during_execution,
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: w.status.map(|s| PodStatus {
                phase: s.phase,
                reason: s.reason,
                conditions: s.conditions,
                container_statuses: s.container_statuses.map(|v| {
                    v.into_iter()
                        .map(|c| ContainerStatus {
                            name: c.name,
                            image: c.image,
                            image_id: c.image_id,
                            container_id: c.container_id,
                            ready: c.ready,
                            restart_count: c.restart_count,
                            resources: c.resources,
                            ..Default::default()
                        })
                        .collect()
                }),
                ..Default::default()
            }),
        }
    }
}

impl<'de> Deserialize<'de> for CachedPod {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Through a `Pod` holding only the kept fields: small and short-lived.
        WirePod::deserialize(d).map(|w| CachedPod::from_pod(w.into()))
    }
}

impl kube_core::Resource for CachedPod {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "Pod".into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "pods".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut Arc::make_mut(&mut self.0).metadata
    }
}

impl LabelsAndFinalizers for CachedPod {
    fn label(&self, key: &str) -> Option<&str> {
        lookup(&self.0.labels, key)
    }
    fn has_finalizer(&self, finalizer: &str) -> bool {
        self.0.finalizers.iter().any(|f| &**f == finalizer)
    }
}

impl PodView for CachedPod {
    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }
    fn annotation(&self, key: &str) -> Option<&str> {
        lookup(&self.0.annotations, key)
    }
    fn node_name(&self) -> Option<&str> {
        self.0.node_name.as_deref()
    }
    fn pinned_node(&self) -> Option<&str> {
        self.0.pinned_node.as_deref()
    }
    fn readiness_gates(&self) -> impl Iterator<Item = &str> {
        self.0.readiness_gates.iter().map(|g| &**g)
    }
    fn phase(&self) -> &str {
        self.0.phase.as_deref().unwrap_or_default()
    }
    fn status_reason(&self) -> Option<&str> {
        self.0.reason.as_deref()
    }
    fn conditions(&self) -> impl Iterator<Item = ConditionRef<'_>> {
        self.0.conditions.iter().map(|c| ConditionRef {
            type_: &c.shape.type_,
            status: &c.shape.status,
            reason: c.shape.reason.as_deref(),
            message: c.shape.message.as_deref(),
            last_transition_time: c.last_transition_time,
        })
    }
    fn containers(&self) -> impl Iterator<Item = ContainerRef<'_>> {
        self.0.containers.iter().map(|c| ContainerRef {
            name: &c.name,
            image: c.image.as_deref(),
            env: c.env.as_deref().map(Vec::as_slice).unwrap_or_default(),
            resources: c.resources.as_deref(),
            resize_policy: c
                .resize_policy
                .as_deref()
                .map(Vec::as_slice)
                .unwrap_or_default(),
        })
    }
    fn container_statuses(&self) -> impl Iterator<Item = ContainerStatusRef<'_>> {
        self.0
            .container_statuses
            .iter()
            .map(|c| ContainerStatusRef {
                name: &c.name,
                image: &c.image,
                image_id: &c.image_id,
                container_id: c.container_id.as_deref(),
                ready: c.ready,
                restart_count: c.restart_count,
                resources: c.resources.as_deref(),
            })
    }
    fn to_pod(&self) -> Pod {
        let m = &self.0.metadata;
        let finalizers: Vec<String> = self.0.finalizers.iter().map(|f| f.to_string()).collect();
        Pod {
            metadata: ObjectMeta {
                labels: to_map(&self.0.labels),
                annotations: to_map(&self.0.annotations),
                finalizers: (!finalizers.is_empty()).then_some(finalizers),
                ..m.clone()
            },
            spec: Some(PodSpec {
                containers: self
                    .0
                    .containers
                    .iter()
                    .map(|c| Container {
                        name: c.name.to_string(),
                        image: c.image.as_deref().map(str::to_string),
                        env: c.env.as_deref().cloned(),
                        resources: c.resources.as_deref().cloned(),
                        resize_policy: c.resize_policy.as_deref().cloned(),
                        ..Default::default()
                    })
                    .collect(),
                node_name: self.0.node_name.as_deref().map(str::to_string),
                affinity: self.0.pinned_node.as_deref().map(pinning_affinity),
                readiness_gates: (!self.0.readiness_gates.is_empty()).then(|| {
                    self.0
                        .readiness_gates
                        .iter()
                        .map(|g| PodReadinessGate {
                            condition_type: g.to_string(),
                        })
                        .collect()
                }),
                ..Default::default()
            }),
            status: Some(self.status_copy()),
        }
    }

    fn status_copy(&self) -> PodStatus {
        PodStatus {
            phase: self.0.phase.as_deref().map(str::to_string),
            reason: self.0.reason.as_deref().map(str::to_string),
            conditions: (!self.0.conditions.is_empty()).then(|| {
                self.conditions()
                    .map(|c| PodCondition {
                        type_: c.type_.to_string(),
                        status: c.status.to_string(),
                        reason: c.reason.map(str::to_string),
                        message: c.message.map(str::to_string),
                        last_transition_time: c.last_transition_time.map(Time),
                        ..Default::default()
                    })
                    .collect()
            }),
            container_statuses: (!self.0.container_statuses.is_empty()).then(|| {
                self.container_statuses()
                    .map(|c| ContainerStatus {
                        name: c.name.to_string(),
                        image: c.image.to_string(),
                        image_id: c.image_id.to_string(),
                        container_id: c.container_id.map(str::to_string),
                        ready: c.ready,
                        restart_count: c.restart_count,
                        resources: c.resources.cloned(),
                        ..Default::default()
                    })
                    .collect()
            }),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "web-abcde", "namespace": "ns", "uid": "u-1", "resourceVersion": "42",
                "generateName": "web-",
                "labels": {"app": "web", "apps.kruise.io/cloneset-instance-id": "abcde",
                           "controller-revision-hash": "web-6c5b"},
                "annotations": {"apps.kruise.io/inplace-update-state": "{\"revision\":\"web-6c5b\"}",
                                "kubectl.kubernetes.io/restartedAt": "x"},
                "finalizers": ["example.com/hook"],
                "ownerReferences": [{"apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
                                     "name": "web", "uid": "cs-1", "controller": true,
                                     "blockOwnerDeletion": true}],
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}]
            },
            "spec": {
                "nodeName": "node-1",
                "readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
                "containers": [{"name": "app", "image": "nginx:1.25",
                                "env": [{"name": "A", "value": "1"}],
                                "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}},
                                "livenessProbe": {"httpGet": {"path": "/", "port": 80}},
                                "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
                "volumes": [{"name": "v", "emptyDir": {}}],
                "affinity": {
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}},
                    "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}},
                "tolerations": [{"key": "k", "operator": "Exists"}]
            },
            "status": {
                "phase": "Running", "podIP": "10.0.0.1",
                "conditions": [
                    {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"},
                    {"type": "InPlaceUpdateReady", "status": "False", "reason": "StartInPlaceUpdate"}
                ],
                "containerStatuses": [{"name": "app", "image": "nginx:1.25",
                                       "imageID": "docker.io/library/nginx@sha256:1",
                                       "containerID": "containerd://c1", "ready": true,
                                       "restartCount": 2, "started": true,
                                       "state": {"running": {"startedAt": "2026-01-01T00:00:04Z"}}}]
            }
        })
    }

    #[test]
    fn reads_what_the_full_pod_says() {
        let full: Pod = serde_json::from_value(sample()).unwrap();
        let cached: CachedPod = serde_json::from_value(sample()).unwrap();
        assert_eq!(cached.name(), "web-abcde");
        assert_eq!(cached.label("app"), full.label("app"));
        assert_eq!(cached.label("missing"), None);
        assert_eq!(
            cached.annotation("kubectl.kubernetes.io/restartedAt"),
            Some("x")
        );
        assert!(cached.has_finalizer("example.com/hook"));
        assert_eq!(cached.node_name(), Some("node-1"));
        assert_eq!(cached.pinned_node(), Some("node-1"));
        assert_eq!(cached.pinned_node(), full.pinned_node());
        assert!(cached.has_readiness_gate("InPlaceUpdateReady"));
        assert_eq!(cached.phase(), "Running");
        assert_eq!(
            cached.conditions().collect::<Vec<_>>(),
            full.conditions().collect::<Vec<_>>()
        );
        assert_eq!(
            cached.containers().collect::<Vec<_>>(),
            full.containers().collect::<Vec<_>>()
        );
        assert_eq!(
            cached.container_statuses().collect::<Vec<_>>(),
            full.container_statuses().collect::<Vec<_>>()
        );
        assert_eq!(
            cached.meta().owner_references,
            full.metadata.owner_references
        );
        assert_eq!(cached.meta().managed_fields, None);
    }

    #[test]
    fn to_pod_is_the_trimmed_pod_and_round_trips() {
        let cached: CachedPod = serde_json::from_value(sample()).unwrap();
        let pod = cached.to_pod();
        assert_eq!(pod.metadata.generate_name, None);
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.volumes, None);
        assert_eq!(
            spec.affinity,
            Some(pinning_affinity("node-1")),
            "only the pinning term is kept"
        );
        assert_eq!(spec.containers[0].liveness_probe, None);
        assert_eq!(
            pod.status
                .as_ref()
                .unwrap()
                .container_statuses
                .as_ref()
                .unwrap()[0]
                .restart_count,
            2
        );
        assert_eq!(CachedPod::from_pod(pod), cached);
    }

    #[test]
    fn only_a_term_naming_one_node_pins_the_pod() {
        let pinned = |node_affinity: serde_json::Value| {
            let mut pod = sample();
            pod["spec"]["affinity"] = json!({"nodeAffinity": node_affinity});
            let full: Pod = serde_json::from_value(pod.clone()).unwrap();
            let cached: CachedPod = serde_json::from_value(pod).unwrap();
            assert_eq!(cached.pinned_node(), full.pinned_node());
            cached.pinned_node().map(str::to_string)
        };
        let required = |terms: serde_json::Value| json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}});
        assert_eq!(
            pinned(required(json!([
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
            ]))),
            Some("n2".into())
        );
        assert_eq!(
            pinned(required(json!([{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}]}]))),
            None
        );
        assert_eq!(
            pinned(required(json!([{"matchFields": [
                {"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}]))),
            None
        );
        assert_eq!(
            pinned(json!({"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}}]})),
            None
        );
    }

    #[test]
    fn pods_share_interned_values() {
        let a: CachedPod = serde_json::from_value(sample()).unwrap();
        let b: CachedPod = serde_json::from_value(sample()).unwrap();
        assert!(Arc::ptr_eq(
            &a.0.containers[0].name,
            &b.0.containers[0].name
        ));
        assert!(Arc::ptr_eq(
            a.0.containers[0].resources.as_ref().unwrap(),
            b.0.containers[0].resources.as_ref().unwrap()
        ));
        assert!(Arc::ptr_eq(
            &a.0.conditions[1].shape,
            &b.0.conditions[1].shape
        ));
    }

    #[test]
    fn a_clone_shares_the_decoded_pod() {
        let a: CachedPod = serde_json::from_value(sample()).unwrap();
        let b = a.clone();
        assert!(Arc::ptr_eq(&a.0, &b.0));
    }
}
