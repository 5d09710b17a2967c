//! The cluster an integration test runs against: kruise-sim in-process (the default), or
//! the API server of `KRUISE_TEST_KUBECONFIG` (the real control plane of
//! `e2e/realcluster/up.sh`, docs/real-control-plane.md).
//!
//! On a real API server each test gets what the simulator gives it, so the test bodies are
//! the same on both:
//! - its own namespace `kt-<test name>-<suffix>`, the default namespace of the client it is
//!   handed (`Api::default_namespaced`, `client.default_namespace()`), created with its
//!   `default` ServiceAccount (without it no pod is admitted) and deleted at the end;
//! - the simulated nodes `sim-node-0..N-1`, in-process (`kruise_sim::client_nodes`), with
//!   the in-process simulator's names, labels, capacity and kubelet timings; they are
//!   cluster-wide, so the tests of a process take the cluster one at a time (a lock);
//! - the request counters: on kruise-sim the server's; on a real API server those of the
//!   clients handed out here (the test's and the controllers built from it), counted as the
//!   simulator counts them (verb, resource, subresource, response code). The simulated
//!   kubelet's writes are not counted on either.
//!
//! The CRDs are applied (server-side, so a second test or run finds them in place) and
//! waited for until Established and listable; the objects of their cluster-scoped kinds
//! (NodeImage, SidecarSet, …) that an earlier test left are deleted first.

use std::path::PathBuf;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_sim::client_nodes::{Nodes, NodesFlags};
use kruise_sim::{Counters, ImagePull, Sim, SimConfig};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::client::ClientBuilder;
use kube::{Client, Config, ResourceExt as _};
use serde_json::json;
use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::{WAIT, eventually};

/// The environment variable naming the kubeconfig of a real API server to test against.
pub const KUBECONFIG_ENV: &str = "KRUISE_TEST_KUBECONFIG";

/// The label on the namespaces made here, so a script can remove what a failed test left.
pub const NAMESPACE_LABEL: &str = "kruise.io/testkit";

/// How long the end of a test waits for its namespace's pods to go on a real API server.
const CLEANUP_DEADLINE: Duration = Duration::from_secs(60);

/// A file each real-API-server test appends one line of timings to (setup and clean-up
/// phases, and the test body), so the harness's own share of a suite's time is seen:
/// `test<TAB>phase=seconds ...`.
pub const TIMINGS_ENV: &str = "KRUISE_TEST_TIMINGS";

/// The phases of one real-API-server test, timed (see [`TIMINGS_ENV`]).
struct Phases {
    started: std::time::Instant,
    last: std::time::Instant,
    done: Vec<(&'static str, Duration)>,
}

impl Phases {
    fn start() -> Self {
        let now = std::time::Instant::now();
        Phases {
            started: now,
            last: now,
            done: Vec::new(),
        }
    }

    /// Ends the phase `name` now.
    fn end(&mut self, name: &'static str) {
        let now = std::time::Instant::now();
        self.done.push((name, now - self.last));
        self.last = now;
    }

    /// Appends the line of `test` to the [`TIMINGS_ENV`] file, when one is named.
    fn write(mut self, test: &str) {
        let Some(path) = std::env::var_os(TIMINGS_ENV) else {
            return;
        };
        self.done.push(("total", self.last - self.started));
        let mut line = test.to_string();
        for (name, took) in &self.done {
            line.push_str(&format!("\t{name}={:.2}", took.as_secs_f64()));
        }
        line.push('\n');
        use std::io::Write as _;
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            eprintln!("{TIMINGS_ENV}: writing {}: {e}", path.to_string_lossy());
        }
    }
}

/// The kubeconfig of the real API server the tests run against, when one is set.
pub fn real_kubeconfig() -> Option<PathBuf> {
    std::env::var_os(KUBECONFIG_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The cluster of one test. End it with [`TestCluster::shutdown`].
pub struct TestCluster {
    client: Client,
    cri_dir: Option<PathBuf>,
    backend: Backend,
}

enum Backend {
    Sim(Sim),
    Real(Box<RealParts>),
}

struct RealParts {
    /// An uncounted admin client, for the harness's own requests.
    admin: Client,
    /// The admin's connection, for the clients made later.
    admin_config: Box<Config>,
    /// The requests of the clients handed out (see the module docs).
    counters: Arc<Counters>,
    /// What processes under test connect to: their requests are counted too.
    proxy: crate::proxy::CountingProxy,
    nodes: Nodes,
    /// The webhook configurations there were before the test (the ones it adds go).
    webhooks_before: Vec<String>,
    /// The test's CRDs, whose conversion a binary under test may point at itself.
    crd_names: Vec<String>,
    // Held until the end: the simulated nodes are cluster-wide.
    _turn: OwnedMutexGuard<()>,
    phases: Phases,
}

/// One test at a time per process on a real API server (nodes and cordons are shared).
static REAL_CLUSTER_TURN: LazyLock<Arc<Mutex<()>>> = LazyLock::new(|| Arc::new(Mutex::new(())));

/// A cluster with `nodes` simulated nodes and `crds` installed: kruise-sim, or the API
/// server of [`KUBECONFIG_ENV`] when set (see the module docs). The client's default
/// namespace is the test's.
pub async fn cluster_with_crds(
    nodes: usize,
    crds: &[CustomResourceDefinition],
) -> (TestCluster, Client) {
    cluster_with(
        ClusterOptions {
            nodes,
            ..ClusterOptions::default()
        },
        crds,
    )
    .await
}

/// What a test's cluster has besides its CRDs.
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    /// Simulated nodes `sim-node-0..N-1`.
    pub nodes: usize,
    /// Where each node serves its fake CRI runtime (`<dir>/<node>.sock`), for node agents.
    pub cri_dir: Option<PathBuf>,
    /// Per-image pull latencies and failures on every node (`kruise-sim up --image-pull`).
    pub image_pulls: Vec<(String, ImagePull)>,
}

/// [`cluster_with_crds`] with these options.
pub async fn cluster_with(
    options: ClusterOptions,
    crds: &[CustomResourceDefinition],
) -> (TestCluster, Client) {
    let cluster = match real_kubeconfig() {
        Some(kubeconfig) => TestCluster::real(&kubeconfig, &options, crds).await,
        None => {
            let (sim, client) = crate::sim::start(SimConfig {
                nodes: options.nodes,
                cri_dir: options.cri_dir.clone(),
                image_pulls: kruise_sim::up::image_pulls(&options.image_pulls),
                ..Default::default()
            })
            .await;
            crate::sim::install_crds(&client, crds).await;
            TestCluster {
                client,
                cri_dir: options.cri_dir,
                backend: Backend::Sim(sim),
            }
        }
    };
    let client = cluster.client();
    (cluster, client)
}

impl TestCluster {
    async fn real(
        kubeconfig: &std::path::Path,
        options: &ClusterOptions,
        crds: &[CustomResourceDefinition],
    ) -> Self {
        let nodes = options.nodes;
        let turn = REAL_CLUSTER_TURN.clone().lock_owned().await;
        let mut phases = Phases::start();
        let config = config_from(kubeconfig).await;
        let admin = Client::try_from(config.clone()).unwrap();
        remove_stale_webhooks(&admin, crds).await;
        apply_crds(&admin, crds).await;
        phases.end("crds");
        let webhooks_before = webhook_configurations(&admin)
            .await
            .into_iter()
            .map(|c| c.key)
            .collect();
        let namespace = create_namespace(&admin).await;
        phases.end("namespace");
        let node_names: Vec<String> = (0..nodes).map(|i| format!("sim-node-{i}")).collect();
        remove_nodes(&admin, &node_names).await;
        let capacity = kruise_sim::cluster::nodes::default_capacity();
        let timings = kruise_sim::KubeletTimings::default();
        let flags = NodesFlags {
            kubeconfig: Some(kubeconfig.to_path_buf()),
            nodes,
            node_prefix: "sim-node".into(),
            cpu: capacity["cpu"].as_str().unwrap_or("8").into(),
            memory: capacity["memory"].as_str().unwrap_or("32Gi").into(),
            max_pods: capacity["pods"]
                .as_str()
                .and_then(|p| p.parse().ok())
                .unwrap_or(110),
            pull_delay: timings.pull_delay,
            image_pulls: options.image_pulls.clone(),
            start_delay: timings.start_delay,
            ready_delay: timings.ready_delay,
            cri_dir: options.cri_dir.clone(),
            lease_renew_interval: Duration::from_secs(10),
            no_volume_provisioner: false,
        };
        let nodes = kruise_sim::client_nodes::start(&flags)
            .await
            .unwrap_or_else(|e| panic!("starting {nodes} simulated nodes: {e:#}"));
        wait_nodes_ready(&admin, &nodes.names).await;
        phases.end("nodes");
        let counters = Arc::new(Counters::default());
        if crate::rbac::enforced() {
            crate::rbac::use_real_server(&admin, &config, counters.clone()).await;
        }
        let admin_config = Box::new(config.clone());
        let mut counted = config;
        counted.default_namespace = namespace;
        let client = ClientBuilder::try_from(counted)
            .unwrap()
            .with_layer(&crate::counting::CountingLayer(counters.clone()))
            .build();
        let proxy =
            crate::proxy::CountingProxy::start(client.clone(), client.default_namespace()).await;
        TestCluster {
            client,
            cri_dir: options.cri_dir.clone(),
            backend: Backend::Real(Box::new(RealParts {
                admin,
                admin_config,
                counters,
                proxy,
                nodes,
                webhooks_before,
                crd_names: crds
                    .iter()
                    .filter_map(|c| c.metadata.name.clone())
                    .collect(),
                _turn: turn,
                phases: {
                    phases.end("rbac+proxy");
                    phases
                },
            })),
        }
    }

    /// The admin client, whose default namespace is the test's.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The test's namespace (`default` on kruise-sim).
    pub fn namespace(&self) -> &str {
        self.client.default_namespace()
    }

    /// The requests counted so far (see the module docs for whose).
    pub fn counters(&self) -> &Counters {
        match &self.backend {
            Backend::Sim(sim) => sim.counters(),
            Backend::Real(real) => &real.counters,
        }
    }

    /// The fake CRI socket of simulated node `node`, when the cluster was started with a
    /// [`ClusterOptions::cri_dir`].
    pub fn cri_socket(&self, node: &str) -> Option<PathBuf> {
        self.cri_dir
            .as_deref()
            .map(|dir| kruise_sim::cluster::cri::socket_path(dir, node))
    }

    /// A kubeconfig for processes under test (a family binary), pointing at this cluster;
    /// on a real API server at a [counting proxy](crate::proxy) in front of it, so the
    /// processes' requests are in [`TestCluster::counters`] as on kruise-sim.
    pub fn kubeconfig_path(&self) -> PathBuf {
        match &self.backend {
            Backend::Sim(sim) => sim.kubeconfig_path().unwrap(),
            Backend::Real(real) => real.proxy.kubeconfig().to_path_buf(),
        }
    }

    /// An admin client in the test's namespace that hands every answer to the caller
    /// (kube's client retries 429, 503 and 504 by default); uncounted on a real API server.
    pub async fn client_without_retries(&self) -> Client {
        match &self.backend {
            Backend::Sim(sim) => sim.client_without_retries().unwrap(),
            Backend::Real(real) => {
                let mut config = (*real.admin_config).clone();
                config.default_retry = false;
                config.default_namespace = self.namespace().into();
                Client::try_from(config).unwrap()
            }
        }
    }

    /// The in-process simulator, when the test runs on one.
    pub fn sim(&self) -> Option<&Sim> {
        match &self.backend {
            Backend::Sim(sim) => Some(sim),
            Backend::Real(_) => None,
        }
    }

    /// Stops the simulator; on a real API server removes the webhook configurations the
    /// test added, deletes the test's namespace and its pods, waits (boundedly) for the
    /// pods to go while the kubelet still runs, stops the nodes and removes their Node
    /// objects.
    pub async fn shutdown(self) {
        match self.backend {
            Backend::Sim(sim) => sim.shutdown().await,
            Backend::Real(real) => {
                let mut real = *real;
                real.phases.end("test");
                crate::rbac::forget_real_server();
                // The test's webhooks go first: one refusing pod deletions (a budget's)
                // would keep the namespace's pods, and its server may be gone.
                remove_webhooks_since(&real.admin, &real.webhooks_before, &real.crd_names).await;
                webhooks_settled(&real.admin).await;
                real.phases.end("webhooks");
                let namespace = self.client.default_namespace().to_string();
                let namespaces: Api<Namespace> = Api::all(real.admin.clone());
                if let Err(e) = namespaces
                    .delete(&namespace, &DeleteParams::default())
                    .await
                {
                    eprintln!("cleanup: deleting namespace {namespace}: {e}");
                }
                // The pods are deleted here as well (gracefully, as the namespace
                // controller would): that controller starts on a namespace 5 s after its
                // deletion (its grace for other API servers to see it Terminating), which
                // was most of a short test's time. Creates in the namespace are refused
                // from its deletion on, so a controller still running cannot outpace this;
                // one that slipped in before is deleted on the next pass.
                // A pod whose node the test removed has no kubelet to finish its deletion
                // (the pod garbage collector would, after 40 s): after a grace of its own
                // the clean-up deletes what is left at once.
                let pods: Api<Pod> = Api::namespaced(real.admin.clone(), &namespace);
                let graceful_until = std::time::Instant::now() + Duration::from_secs(5);
                let gone = tokio::time::timeout(CLEANUP_DEADLINE, async {
                    loop {
                        let force = std::time::Instant::now() > graceful_until;
                        match pods.list(&ListParams::default()).await {
                            Ok(list) if list.items.is_empty() => break,
                            Ok(list)
                                if force
                                    || list
                                        .items
                                        .iter()
                                        .any(|p| p.metadata.deletion_timestamp.is_none()) =>
                            {
                                let params = if force {
                                    DeleteParams::default().grace_period(0)
                                } else {
                                    DeleteParams::default()
                                };
                                let _ = pods
                                    .delete_collection(&params, &ListParams::default())
                                    .await;
                            }
                            _ => {}
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                })
                .await;
                if gone.is_err() {
                    eprintln!(
                        "cleanup: pods of {namespace} still there after {CLEANUP_DEADLINE:?}"
                    );
                }
                real.phases.end("namespace-pods");
                let names = real.nodes.names.clone();
                real.nodes.shutdown().await;
                remove_nodes(&real.admin, &names).await;
                real.phases.end("nodes-gone");
                real.phases.write(&namespace);
            }
        }
    }
}

async fn config_from(kubeconfig: &std::path::Path) -> Config {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig)
        .unwrap_or_else(|e| panic!("reading {}: {e}", kubeconfig.display()));
    Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap()
}

/// Applies `crds` (server-side, forced: the test's version wins) and waits until each is
/// Established and its kind listable.
async fn apply_crds(client: &Client, crds: &[CustomResourceDefinition]) {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let params = PatchParams::apply("kruise-testkit").force();
    for crd in crds {
        let mut crd = crd.clone();
        crd.metadata.managed_fields = None;
        crd.metadata.resource_version = None;
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .unwrap_or_else(|e| panic!("applying CRD {name}: {e}"));
        eventually(&format!("CRD {name} Established"), WAIT, || async {
            let crd = api.get(&name).await.ok()?;
            crd.status?
                .conditions?
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
                .then_some(())
        })
        .await;
    }
    crate::sim::wait_listable(client, crds).await;
    for crd in crds.iter().filter(|c| c.spec.scope == "Cluster") {
        clear_cluster_scoped(client, crd).await;
    }
}

/// Deletes every object of the cluster-scoped kind of `crd` that an earlier test left, so
/// the test starts as on a fresh simulator (its namespaced kinds start empty in its own
/// namespace).
async fn clear_cluster_scoped(client: &Client, crd: &CustomResourceDefinition) {
    let kind = crd.spec.names.kind.clone();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &crate::sim::stored_resource(crd));
    api.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("deleting the {kind} objects left: {e}"));
    eventually(&format!("no {kind} object left"), WAIT, || async {
        api.list(&ListParams::default())
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await;
}

/// A fresh namespace named after the running test, once its `default` ServiceAccount exists.
async fn create_namespace(client: &Client) -> String {
    let name = namespace_name(
        std::thread::current().name().unwrap_or("test"),
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default(),
    );
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {
        "name": name, "labels": {NAMESPACE_LABEL: "true"}}}))
    .unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
    eventually(
        &format!("the default ServiceAccount of {name}"),
        WAIT,
        || async { accounts.get_opt("default").await.ok().flatten().map(|_| ()) },
    )
    .await;
    name
}

/// `kt-<test>-<suffix>`: a DNS label (at most 63 characters) from the test's name, so
/// `kubectl get ns` tells whose it is.
fn namespace_name(test: &str, pid: u32, nanos: u32) -> String {
    let test = test.rsplit("::").next().unwrap_or(test);
    let mut slug: String = test
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    slug.truncate(44);
    let slug = slug.trim_matches('-');
    format!("kt-{slug}-{:x}", (pid ^ nanos) & 0xff_ffff)
}

/// A mutating or validating webhook configuration: `mutating/<name>` or
/// `validating/<name>`, and the URLs its entries call.
struct WebhookConfiguration {
    key: String,
    urls: Vec<Option<String>>,
}

impl WebhookConfiguration {
    /// `kind` is `mutating` or `validating`; `urls` those of its entries.
    fn new(kind: &str, name: String, urls: impl Iterator<Item = Option<String>>) -> Self {
        WebhookConfiguration {
            key: format!("{kind}/{name}"),
            urls: urls.collect(),
        }
    }
}

/// Every mutating and validating webhook configuration.
async fn webhook_configurations(client: &Client) -> Vec<WebhookConfiguration> {
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating = mutating.list(&ListParams::default()).await.unwrap().items;
    let validating = validating.list(&ListParams::default()).await.unwrap().items;
    let mutating = mutating.into_iter().map(|c| {
        let urls = c
            .webhooks
            .iter()
            .flatten()
            .map(|w| w.client_config.url.clone());
        WebhookConfiguration::new("mutating", c.name_any(), urls)
    });
    let validating = validating.into_iter().map(|c| {
        let urls = c
            .webhooks
            .iter()
            .flatten()
            .map(|w| w.client_config.url.clone());
        WebhookConfiguration::new("validating", c.name_any(), urls)
    });
    mutating.chain(validating).collect()
}

/// Deletes the webhook configuration `key` (`mutating/<name>` or `validating/<name>`).
async fn delete_webhook_configuration(client: &Client, key: &str) -> Result<(), kube::Error> {
    match key.split_once('/') {
        Some(("mutating", name)) => Api::<MutatingWebhookConfiguration>::all(client.clone())
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ()),
        Some((_, name)) => Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ()),
        None => Ok(()),
    }
}

/// Sets the CRD `name`'s conversion back to `None` (no webhook).
async fn reset_conversion(client: &Client, name: &str) -> Result<(), kube::Error> {
    let no_conversion = json!({"spec": {"conversion": {"strategy": "None", "webhook": null}}});
    Api::<CustomResourceDefinition>::all(client.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(&no_conversion))
        .await
        .map(|_| ())
}

/// SidecarSets (`apps.kruise.io/v1beta1`), for clients that do not link the SidecarSet
/// family's types.
pub fn sidecarset_resource() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: "apps.kruise.io".into(),
        version: "v1beta1".into(),
        api_version: "apps.kruise.io/v1beta1".into(),
        kind: "SidecarSet".into(),
        plural: "sidecarsets".into(),
    }
}

/// Waits (boundedly) until kube-apiserver no longer calls a webhook the test removed: it
/// applies configuration changes a moment after they are written (an informer), and a
/// removed entry whose process is gone would fail the next test's first pod or
/// SidecarSet. Dry-run creates show it: answered without "failed calling webhook".
async fn webhooks_settled(admin: &Client) {
    let pods: Api<DynamicObject> = Api::namespaced_with(
        admin.clone(),
        "default",
        &kube::api::ApiResource::erase::<Pod>(&()),
    );
    let pod: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "kruise-testkit-webhook-probe", "labels": {"app": "probe"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]}
    }))
    .unwrap();
    let sidecarsets: Api<DynamicObject> = Api::all_with(admin.clone(), &sidecarset_resource());
    let sidecarset: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "kruise-testkit-webhook-probe"},
        "spec": {"selector": {"matchLabels": {"app": "probe"}},
                 "containers": [{"name": "probe", "image": "busybox"}]}
    }))
    .unwrap();
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let stale = |result: Result<DynamicObject, kube::Error>| matches!(result, Err(e) if e.to_string().contains("failed calling webhook"));
    let settled = tokio::time::timeout(Duration::from_secs(30), async {
        while stale(pods.create(&dry_run, &pod).await)
            || stale(sidecarsets.create(&dry_run, &sidecarset).await)
        {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    if settled.is_err() {
        eprintln!("cleanup: kube-apiserver still calls a removed webhook after 30 s");
    }
}

/// Removes what an earlier test's process left pointing at itself after it was gone: a
/// webhook configuration, or the conversion webhook of one of `crds`, whose URL is a
/// loopback port nothing listens on (every webhook a test publishes is served there). Its
/// clean-up removes them, but a process that outlived it could publish them again, and
/// kube-apiserver would refuse this test's first request of their kinds.
async fn remove_stale_webhooks(admin: &Client, crds: &[CustomResourceDefinition]) {
    let mut removed = Vec::new();
    for configuration in webhook_configurations(admin).await {
        if any_unanswered(&configuration.urls).await {
            let _ = delete_webhook_configuration(admin, &configuration.key).await;
            removed.push(configuration.key);
        }
    }
    let definitions: Api<CustomResourceDefinition> = Api::all(admin.clone());
    for name in crds.iter().filter_map(|c| c.metadata.name.as_deref()) {
        let Ok(Some(stored)) = definitions.get_opt(name).await else {
            continue;
        };
        let url = stored
            .spec
            .conversion
            .and_then(|c| c.webhook)
            .and_then(|w| w.client_config)
            .and_then(|c| c.url);
        if any_unanswered(&[url]).await {
            let _ = reset_conversion(admin, name).await;
            removed.push(format!("the conversion webhook of CRD {name}"));
        }
    }
    if !removed.is_empty() {
        eprintln!(
            "setup: removed what an earlier test left calling a port nothing serves: {}",
            removed.join(", ")
        );
        webhooks_settled(admin).await;
    }
}

/// Whether one of these webhook URLs is a loopback port that refuses connections.
async fn any_unanswered(urls: &[Option<String>]) -> bool {
    for url in urls.iter().flatten() {
        if let Some(port) = loopback_port(url)
            && tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_err()
        {
            return true;
        }
    }
    false
}

/// The port of an `https://127.0.0.1:PORT/…` (or `localhost`) URL.
fn loopback_port(url: &str) -> Option<u16> {
    let authority = url.strip_prefix("https://")?.split('/').next()?;
    let (host, port) = authority.rsplit_once(':')?;
    matches!(host, "127.0.0.1" | "localhost")
        .then(|| port.parse().ok())
        .flatten()
}

/// Undoes what a family binary under test published on the shared API server, so no later
/// test calls a webhook whose process is gone: the webhook configurations that were not
/// there before the test, and a conversion webhook on the test's CRDs.
async fn remove_webhooks_since(client: &Client, before: &[String], crd_names: &[String]) {
    for added in webhook_configurations(client).await {
        if before.contains(&added.key) {
            continue;
        }
        if let Err(e) = delete_webhook_configuration(client, &added.key).await {
            eprintln!("cleanup: deleting webhook configuration {}: {e}", added.key);
        }
    }
    for name in crd_names {
        if let Err(e) = reset_conversion(client, name).await {
            eprintln!("cleanup: resetting the conversion of CRD {name}: {e}");
        }
    }
}

/// Deletes these Node objects (left by an earlier test) and waits until they are gone.
async fn remove_nodes(client: &Client, names: &[String]) {
    let nodes: Api<Node> = Api::all(client.clone());
    for name in names {
        match nodes.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => panic!("deleting node {name}: {e}"),
        }
    }
    for name in names {
        eventually(&format!("node {name} gone"), WAIT, || async {
            nodes.get_opt(name).await.ok()?.is_none().then_some(())
        })
        .await;
    }
}

async fn wait_nodes_ready(client: &Client, names: &[String]) {
    let nodes: Api<Node> = Api::all(client.clone());
    for name in names {
        eventually(
            &format!("node {name} Ready and untainted"),
            WAIT,
            || async {
                let node = nodes.get_opt(name).await.ok()??;
                let ready = node
                    .status?
                    .conditions?
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True");
                let tainted = node
                    .spec
                    .and_then(|s| s.taints)
                    .is_some_and(|t| !t.is_empty());
                (ready && !tainted).then_some(())
            },
        )
        .await;
    }
}

#[cfg(test)]
mod tests;
