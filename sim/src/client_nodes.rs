//! `kruise-sim nodes`: kruise-sim's simulated nodes as a client of any API server (the
//! way kwok does): each node registers its Node object and keeps its Lease renewed, and
//! the same kubelet as in the in-process cluster (`cluster::kubelet`, behind
//! [`KubeletApi`]) starts the pods the scheduler binds to them, restarts a container
//! whose spec changed, runs job pods to completion and finishes deletions, all through
//! a kube client. With `--cri-dir` each node serves its fake CRI runtime for node agents.
//! Beside them runs a volume provisioner for claims (`client_volumes`).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::Context as _;
use futures::StreamExt;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
    PostParams, Preconditions,
};
use kube::runtime::watcher;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::cluster::kubelet_api::{KubeletApi, PodChange, PodKey, WriteError};
use crate::cluster::{EventSource, KubeletTimings, cri, event_object, kubelet, nodes};
use crate::{ApiResult, client_volumes, meta};

/// The taint kube-apiserver's TaintNodesByCondition admission plugin puts on every Node
/// at creation; the node lifecycle controller takes it off once the node reports Ready.
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// Where node Leases live.
const LEASE_NAMESPACE: &str = "kube-node-lease";

/// `kruise-sim nodes`' flags: the in-process cluster's node knobs, plus the API server.
#[derive(clap::Args, Debug, Clone)]
pub struct NodesFlags {
    /// The API server's kubeconfig (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// How many nodes: `<prefix>-0` .. `<prefix>-(N-1)`.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// The node names' prefix.
    #[arg(long, default_value = "sim-node")]
    pub node_prefix: String,
    /// Each node's cpu capacity (and allocatable).
    #[arg(long, default_value = "8")]
    pub cpu: String,
    /// Each node's memory capacity (and allocatable).
    #[arg(long, default_value = "32Gi")]
    pub memory: String,
    /// How many pods each node takes.
    #[arg(long, default_value_t = 110)]
    pub max_pods: u32,
    /// Kubelet image pull delay (e.g. 50ms, 1s).
    #[arg(long, default_value = "50ms", value_parser = crate::up::duration)]
    pub pull_delay: Duration,
    /// One image's pull latency or failure, repeatable, as `kruise-sim up --image-pull`.
    #[arg(long = "image-pull", value_name = "IMAGE=DURATION|IMAGE=fail:MESSAGE", value_parser = crate::ImagePull::parse_flag)]
    pub image_pulls: Vec<(String, crate::ImagePull)>,
    /// Kubelet delay from pulled to running.
    #[arg(long, default_value = "50ms", value_parser = crate::up::duration)]
    pub start_delay: Duration,
    /// Kubelet delay from running to ready.
    #[arg(long, default_value = "100ms", value_parser = crate::up::duration)]
    pub ready_delay: Duration,
    /// Serve a fake CRI runtime for each node on `<DIR>/<node>.sock`, for node agents.
    #[arg(long)]
    pub cri_dir: Option<PathBuf>,
    /// How often each node renews its Lease in kube-node-lease (the kubelet's 10 s; the
    /// Lease lasts 4 times as long).
    #[arg(long, default_value = "10s", value_parser = crate::up::duration)]
    pub lease_renew_interval: Duration,
    /// Run no volume provisioner (`client_volumes`): claims wait for volumes made by
    /// something else.
    #[arg(long)]
    pub no_volume_provisioner: bool,
}

impl NodesFlags {
    /// The node names, in order.
    pub fn node_names(&self) -> Vec<String> {
        (0..self.nodes)
            .map(|i| format!("{}-{i}", self.node_prefix))
            .collect()
    }

    fn capacity(&self) -> Value {
        let mut resources = nodes::default_capacity();
        resources["cpu"] = json!(self.cpu);
        resources["memory"] = json!(self.memory);
        resources["pods"] = json!(self.max_pods.to_string());
        resources
    }

    fn timings(&self) -> KubeletTimings {
        KubeletTimings {
            pull_delay: self.pull_delay,
            start_delay: self.start_delay,
            ready_delay: self.ready_delay,
        }
    }

    async fn client(&self) -> anyhow::Result<kube::Client> {
        let config = match &self.kubeconfig {
            Some(path) => {
                let kubeconfig = kube::config::Kubeconfig::read_from(path)
                    .with_context(|| format!("reading kubeconfig {}", path.display()))?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                    .await
                    .with_context(|| format!("loading kubeconfig {}", path.display()))?
            }
            None => kube::Config::infer()
                .await
                .context("finding a kubeconfig ($KUBECONFIG or ~/.kube/config)")?,
        };
        kube::Client::try_from(config).context("building the kube client")
    }
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

fn pods_resource() -> ApiResource {
    resource("", "v1", "Pod", "pods")
}

fn to_object(v: Value) -> anyhow::Result<DynamicObject> {
    serde_json::from_value(v).context("building an object")
}

fn write_error(e: kube::Error) -> WriteError {
    match e {
        kube::Error::Api(s) => WriteError {
            code: s.code,
            message: s.message,
        },
        other => WriteError {
            code: 0,
            message: other.to_string(),
        },
    }
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// Registers node `name` as a kubelet does: the Node, then its status (Ready, capacity,
/// addresses). The not-ready taint admission put on it comes off once Ready is posted:
/// the node lifecycle controller would do the same on seeing Ready, and a cluster may run
/// without it. Returns the Node's uid (the Lease's owner).
async fn register_node(
    client: &kube::Client,
    name: &str,
    i: usize,
    capacity: &Value,
) -> anyhow::Result<String> {
    let api: Api<DynamicObject> =
        Api::all_with(client.clone(), &resource("", "v1", "Node", "nodes"));
    match api
        .create(
            &PostParams::default(),
            &to_object(nodes::node_object(name, i))?,
        )
        .await
    {
        Ok(_) => {}
        Err(e) if is_status(&e, 409) => {}
        Err(e) => return Err(e).with_context(|| format!("creating node {name}")),
    }
    let status = json!({"status": nodes::node_status(name, i, capacity)});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .with_context(|| format!("posting the status of node {name}"))?;
    // The node lifecycle controller may write the Node at the same time (labels,
    // annotations): the removal is a compare-and-swap, tried again on a conflict, so a
    // taint added meanwhile is never dropped.
    let mut attempts = 0;
    let node = loop {
        let node = api
            .get(name)
            .await
            .with_context(|| format!("reading node {name}"))?;
        let node = serde_json::to_value(&node).context("encoding a node")?;
        let taints: Vec<Value> = node
            .pointer("/spec/taints")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let kept: Vec<Value> = taints
            .iter()
            .filter(|t| t.get("key").and_then(Value::as_str) != Some(NOT_READY_TAINT))
            .cloned()
            .collect();
        if kept.len() == taints.len() {
            break node;
        }
        let patch = json!({
            "metadata": {"resourceVersion": meta::meta_str(&node, "resourceVersion")},
            "spec": {"taints": kept},
        });
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => break node,
            Err(e) if is_status(&e, 409) && attempts < 10 => attempts += 1,
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("removing the {NOT_READY_TAINT} taint of node {name}")
                });
            }
        }
    };
    Ok(meta::meta_str(&node, "uid").to_string())
}

/// The kubelet's Lease: created once, renewed every `interval`, so a node lifecycle
/// controller keeps the node Ready.
async fn renew_leases(client: kube::Client, owners: Vec<(String, String)>, interval: Duration) {
    let api: Api<DynamicObject> = Api::namespaced_with(
        client,
        LEASE_NAMESPACE,
        &resource("coordination.k8s.io", "v1", "Lease", "leases"),
    );
    let mut tick = tokio::time::interval(interval);
    loop {
        tick.tick().await;
        let renew_time = micro_time(jiff::Timestamp::now());
        for (name, uid) in &owners {
            let patch = json!({"spec": {"renewTime": renew_time}});
            let renewed = api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
            let result = match renewed {
                Err(e) if is_status(&e, 404) => {
                    let lease = json!({
                        "apiVersion": "coordination.k8s.io/v1",
                        "kind": "Lease",
                        "metadata": {
                            "name": name,
                            "namespace": LEASE_NAMESPACE,
                            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}],
                        },
                        "spec": {
                            "holderIdentity": name,
                            "leaseDurationSeconds": (interval.as_secs() * 4).max(1),
                            "renewTime": renew_time,
                        },
                    });
                    match to_object(lease) {
                        Ok(lease) => api.create(&PostParams::default(), &lease).await.map(|_| ()),
                        Err(e) => {
                            tracing::warn!(error = %e, node = %name, "building the node lease");
                            continue;
                        }
                    }
                }
                other => other.map(|_| ()),
            };
            if let Err(e) = result {
                tracing::warn!(error = %e, node = %name, "renewing the node lease failed");
            }
        }
    }
}

/// A MicroTime as the API server writes it: RFC 3339 with exactly six fractional digits.
fn micro_time(t: jiff::Timestamp) -> String {
    format!(
        "{}.{:06}Z",
        t.strftime("%Y-%m-%dT%H:%M:%S"),
        t.subsec_microsecond()
    )
}

/// The pods bound to this process's nodes, as the last watch event showed them.
type PodCache = Arc<RwLock<HashMap<PodKey, Arc<Value>>>>;

fn key_of(pod: &Value) -> PodKey {
    (
        meta::meta_str(pod, "namespace").to_string(),
        meta::name_of(pod).to_string(),
    )
}

/// Watches the bound pods, keeps `cache` to those on `names`, and reports each change
/// (after a relist: every pod that was or is cached).
async fn watch_pods(
    client: kube::Client,
    names: HashSet<String>,
    cache: PodCache,
    tx: mpsc::UnboundedSender<PodChange>,
) {
    let api: Api<DynamicObject> = Api::all_with(client, &pods_resource());
    let config = watcher::Config::default().fields("spec.nodeName!=");
    let mut events = watcher::watcher(api, config).boxed();
    let ours = |pod: &Value| {
        pod.pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| names.contains(n))
    };
    let mut relisted: HashMap<PodKey, Arc<Value>> = HashMap::new();
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                // The watcher starts over on the next poll; the pause keeps a failing
                // API server from being asked again at once.
                tracing::warn!(error = %e, "watching pods");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let mut changed = Vec::new();
        {
            let mut cached = cache.write().unwrap_or_else(|e| e.into_inner());
            match event {
                watcher::Event::Apply(obj) => {
                    let Ok(pod) = serde_json::to_value(&obj) else {
                        continue;
                    };
                    let key = key_of(&pod);
                    if ours(&pod) {
                        cached.insert(key.clone(), Arc::new(pod));
                    } else {
                        cached.remove(&key);
                    }
                    changed.push(key);
                }
                watcher::Event::Delete(obj) => {
                    let Ok(pod) = serde_json::to_value(&obj) else {
                        continue;
                    };
                    let key = key_of(&pod);
                    cached.remove(&key);
                    changed.push(key);
                }
                watcher::Event::Init => relisted.clear(),
                watcher::Event::InitApply(obj) => {
                    if let Ok(pod) = serde_json::to_value(&obj)
                        && ours(&pod)
                    {
                        relisted.insert(key_of(&pod), Arc::new(pod));
                    }
                }
                watcher::Event::InitDone => {
                    changed.extend(cached.keys().cloned());
                    changed.extend(relisted.keys().cloned());
                    *cached = std::mem::take(&mut relisted);
                }
            }
        }
        for key in changed {
            if tx.send(PodChange::Pod(key)).is_err() {
                return;
            }
        }
    }
}

/// The ConfigMaps' `data` by (namespace, name), kept by [`watch_config_maps`]; `None` until
/// its first list is done (the kubelet then cannot tell whether a key exists).
type ConfigMapCache = Arc<RwLock<Option<HashMap<(String, String), Value>>>>;

/// Watches every ConfigMap into `cache`, for the env `configMapKeyRef`s the kubelet waits on
/// (container launch priority's barrier).
async fn watch_config_maps(client: kube::Client, cache: ConfigMapCache) {
    let ar = resource("", "v1", "ConfigMap", "configmaps");
    let api: Api<DynamicObject> = Api::all_with(client, &ar);
    let mut events = watcher::watcher(api, watcher::Config::default()).boxed();
    let mut relisted = HashMap::new();
    let key = |obj: &DynamicObject| {
        (
            obj.metadata.namespace.clone().unwrap_or_default(),
            obj.metadata.name.clone().unwrap_or_default(),
        )
    };
    let data = |obj: &DynamicObject| obj.data.get("data").cloned().unwrap_or(Value::Null);
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!(error = %e, "watching config maps");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let mut cached = cache.write().unwrap_or_else(|e| e.into_inner());
        match event {
            watcher::Event::Apply(obj) => {
                if let Some(cached) = cached.as_mut() {
                    cached.insert(key(&obj), data(&obj));
                }
            }
            watcher::Event::Delete(obj) => {
                if let Some(cached) = cached.as_mut() {
                    cached.remove(&key(&obj));
                }
            }
            watcher::Event::Init => relisted.clear(),
            watcher::Event::InitApply(obj) => {
                relisted.insert(key(&obj), data(&obj));
            }
            watcher::Event::InitDone => *cached = Some(std::mem::take(&mut relisted)),
        }
    }
}

/// The kubelet's reads (the watch caches) and writes (a kube client).
struct ClientApi {
    client: kube::Client,
    cache: PodCache,
    config_maps: ConfigMapCache,
}

impl ClientApi {
    fn pods(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &pods_resource())
    }
}

impl KubeletApi for ClientApi {
    fn config_map_data(&self, namespace: &str, name: &str) -> Option<Option<Value>> {
        let cached = self.config_maps.read().unwrap_or_else(|e| e.into_inner());
        let key = (namespace.to_string(), name.to_string());
        cached.as_ref().map(|maps| maps.get(&key).cloned())
    }

    fn pod(&self, key: &PodKey) -> Option<Arc<Value>> {
        self.cache
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
    }

    fn pod_keys(&self) -> Vec<PodKey> {
        self.cache
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    async fn write_status<F>(
        &self,
        key: &PodKey,
        _node: &str,
        mut render: F,
    ) -> Result<(), WriteError>
    where
        F: FnMut(&Value) -> ApiResult<Value> + Send,
    {
        let api = self.pods(&key.0);
        let mut current = self.pod(key).ok_or(WriteError {
            code: 404,
            message: format!("pod {}/{} is not cached", key.0, key.1),
        })?;
        // A conflict means the cache was behind: render again on the newer pod.
        for _ in 0..3 {
            let mut body = (*current).clone();
            body["status"] = render(&current)?;
            body["apiVersion"] = json!("v1");
            body["kind"] = json!("Pod");
            let data: DynamicObject = serde_json::from_value(body).map_err(|e| WriteError {
                code: 0,
                message: e.to_string(),
            })?;
            match api
                .replace_status(&key.1, &PostParams::default(), &data)
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) if is_status(&e, 409) => {
                    let fresh = api.get(&key.1).await.map_err(write_error)?;
                    current = Arc::new(serde_json::to_value(&fresh).map_err(|e| WriteError {
                        code: 0,
                        message: e.to_string(),
                    })?);
                }
                Err(e) => return Err(write_error(e)),
            }
        }
        Err(WriteError {
            code: 409,
            message: format!("pod {}/{} kept changing", key.0, key.1),
        })
    }

    async fn delete_pod(&self, key: &PodKey, uid: &str, _node: &str) -> Result<(), WriteError> {
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..Default::default()
        };
        self.pods(&key.0)
            .delete(&key.1, &params)
            .await
            .map(|_| ())
            .map_err(write_error)
    }

    async fn record_event(
        &self,
        node: &str,
        object: &Value,
        type_: &str,
        reason: &str,
        message: &str,
    ) {
        let source = EventSource {
            component: "kubelet",
            host: Some(node),
        };
        let (namespace, event) = event_object(source, object, type_, reason, message);
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &namespace,
            &resource("", "v1", "Event", "events"),
        );
        let created = match to_object(event) {
            Ok(event) => api
                .create(&PostParams::default(), &event)
                .await
                .map(|_| ())
                .map_err(anyhow::Error::from),
            Err(e) => Err(e),
        };
        if let Err(e) = created {
            tracing::debug!(error = %e, reason, "recording an event failed");
        }
    }
}

/// Running simulated nodes.
pub struct Nodes {
    /// Their names, in order.
    pub names: Vec<String>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    stop: tokio::sync::watch::Sender<bool>,
}

impl Nodes {
    /// Stops the kubelet, the Lease renewals and the fake CRI servers. The Node objects
    /// stay, as a stopped kubelet's do.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for task in &self.tasks {
            task.abort();
        }
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// Registers the nodes (Ready, not-ready taint off, Leases), then starts their kubelet
/// and, with `--cri-dir`, their fake CRI sockets; returns once the nodes are Ready.
pub async fn start(flags: &NodesFlags) -> anyhow::Result<Nodes> {
    let client = flags.client().await?;
    let names = flags.node_names();
    let capacity = flags.capacity();
    let mut owners = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let uid = register_node(&client, name, i, &capacity).await?;
        owners.push((name.clone(), uid));
    }
    let mut tasks = vec![tokio::spawn(renew_leases(
        client.clone(),
        owners,
        flags.lease_renew_interval,
    ))];
    let cache = PodCache::default();
    let (change_tx, change_rx) = mpsc::unbounded_channel();
    tasks.push(tokio::spawn(watch_pods(
        client.clone(),
        names.iter().cloned().collect(),
        cache.clone(),
        change_tx,
    )));
    if !flags.no_volume_provisioner {
        tasks.push(tokio::spawn(client_volumes::provision(client.clone())));
        tasks.push(tokio::spawn(client_volumes::reclaim(client.clone())));
    }
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let (cri_tx, cri_rx) = mpsc::channel(64);
    let image_pulls = crate::up::image_pulls(&flags.image_pulls);
    if let Some(dir) = &flags.cri_dir {
        tasks.extend(cri::serve_sockets(
            dir,
            &names,
            &cri_tx,
            flags.pull_delay,
            &image_pulls,
            &stop_rx,
        )?);
    }
    let config_maps = ConfigMapCache::default();
    tasks.push(tokio::spawn(watch_config_maps(
        client.clone(),
        config_maps.clone(),
    )));
    let api = ClientApi {
        client,
        cache,
        config_maps,
    };
    tasks.push(tokio::spawn(kubelet::run_with(
        api,
        change_rx,
        names.clone(),
        flags.timings(),
        image_pulls,
        cri_rx,
    )));
    Ok(Nodes { names, tasks, stop })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micro_time_has_six_fractional_digits() {
        let t: jiff::Timestamp = "2026-11-25T19:20:03.0405Z".parse().unwrap();
        assert_eq!(micro_time(t), "2026-11-25T19:20:03.040500Z");
    }

    #[test]
    fn node_names_and_capacity_follow_the_flags() {
        let flags = NodesFlags {
            kubeconfig: None,
            nodes: 2,
            node_prefix: "kwok".into(),
            cpu: "4".into(),
            memory: "8Gi".into(),
            max_pods: 20,
            pull_delay: Duration::ZERO,
            image_pulls: Vec::new(),
            start_delay: Duration::ZERO,
            ready_delay: Duration::ZERO,
            cri_dir: None,
            lease_renew_interval: Duration::from_secs(10),
            no_volume_provisioner: false,
        };
        assert_eq!(flags.node_names(), ["kwok-0", "kwok-1"]);
        let capacity = flags.capacity();
        assert_eq!(capacity["cpu"], "4");
        assert_eq!(capacity["memory"], "8Gi");
        assert_eq!(capacity["pods"], "20");
    }
}
