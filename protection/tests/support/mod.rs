//! Fixtures for the protection family against kruise-sim or the real API server of
//! `KRUISE_TEST_KUBECONFIG`: the PUB controller in-process,
//! a Deployment with its ReplicaSet and pods as the Deployment controller would leave them,
//! budgets, waiting on a budget's numbers, and admission routes served and published as
//! kruise-webhook publishes its validating configuration.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use std::time::Duration;

use kruise_admission::AdmissionRoutes;
use kruise_admission::certs::{generate_ca, issue_serving};
use kruise_admission::publish::{Endpoint, Owned, publish};
use kruise_protection::api::v1beta1::{PodUnavailableBudget, PodUnavailableBudgetStatus};
use kruise_protection::controller;
use kruise_runtime::{Metrics, Readiness, RunOptions};
pub use kruise_testkit::{WAIT, eventually};
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// A cluster with `nodes` nodes and the PodUnavailableBudget CRD installed: kruise-sim, or
/// the real API server of `KRUISE_TEST_KUBECONFIG` (the client's namespace is the test's).
pub async fn cluster(nodes: usize) -> (kruise_testkit::TestCluster, Client) {
    kruise_testkit::cluster_with_crds(nodes, &[kruise_protection::api::crd::crd().unwrap()]).await
}

/// A simulator with `nodes` nodes and the PodUnavailableBudget CRD installed, for the
/// `sim_only_*` tests.
pub async fn sim(nodes: usize) -> (kruise_sim::Sim, Client) {
    kruise_testkit::sim_with_crds(nodes, &[kruise_protection::api::crd::crd().unwrap()]).await
}

/// Serves `routes` over TLS as [`serve`] does and publishes them in
/// `kruise-validating-webhook-configuration`, calling that address, as kruise-webhook
/// publishes its validating pod chain.
pub async fn serve_validating(
    client: &Client,
    routes: AdmissionRoutes,
    shutdown: &CancellationToken,
) {
    let owned = Owned {
        mutating: None,
        validating: Some("kruise-validating-webhook-configuration".into()),
        crds: Vec::new(),
    };
    serve(client, routes, &owned, shutdown).await;
}

/// Serves `routes` over TLS on 127.0.0.1 (a fresh CA) until `shutdown`, and publishes them
/// in the configurations `owned` names.
pub async fn serve(
    client: &Client,
    routes: AdmissionRoutes,
    owned: &Owned,
    shutdown: &CancellationToken,
) {
    let now = jiff::Timestamp::now();
    let ca = generate_ca("test-ca", now, Duration::from_secs(3600)).unwrap();
    let (cert, key) = issue_serving(
        &ca,
        &["127.0.0.1".to_string()],
        now,
        Duration::from_secs(3600),
    )
    .unwrap();
    let tls = axum_server::tls_rustls::RustlsConfig::from_pem(cert.into_bytes(), key.into_bytes())
        .await
        .unwrap();
    let server = kruise_admission::serve(
        "127.0.0.1:0".parse().unwrap(),
        routes.clone(),
        tls,
        shutdown.clone(),
    )
    .await
    .unwrap();
    let endpoint = Endpoint::Url(format!("https://127.0.0.1:{}", server.addr.port()));
    publish(client, &routes, owned, &endpoint, &ca.cert_pem, true)
        .await
        .unwrap();
}

/// The controller in-process until dropped (told to stop) or [`Running::stop`]ped.
pub struct Running {
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Running {
    /// Stops the controller and waits until it has: a reconcile in flight when it was told
    /// to stop may still write, so a test that counts the writes after it waits here.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.await.unwrap();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

pub fn start(client: &Client) -> Running {
    let shutdown = CancellationToken::new();
    let opts = RunOptions {
        name: controller::CONTROLLER_NAME.into(),
        concurrency: 2,
        metrics: Metrics::new(),
        readiness: Readiness::default(),
        shutdown: shutdown.clone(),
        leadership: Default::default(),
    };
    let client = kruise_testkit::controller_client(client, "protection");
    let task = tokio::spawn(async move {
        let namespace = client.default_namespace().to_string();
        controller::run(client, Some(&namespace), opts).await;
    });
    Running {
        shutdown,
        task: Some(task),
    }
}

pub async fn create<K>(client: &Client, object: Value) -> K
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let object: K = serde_json::from_value(object).unwrap();
    Api::<K>::default_namespaced(client.clone())
        .create(&PostParams::default(), &object)
        .await
        .unwrap()
}

/// The ServiceAccount [`deployment`]'s templates name; none is ever created.
pub const NO_SUCH_ACCOUNT: &str = "kruise-testkit-no-such-account";

/// A Deployment of `replicas` (`app=<app>`), its ReplicaSet, and `pods` of the
/// ReplicaSet's pods, as the Deployment controller would leave them.
///
/// kube-controller-manager's Deployment and ReplicaSet controllers (and kruise-sim's) act
/// on them: the Deployment is paused (no new ReplicaSet), and the templates name
/// a ServiceAccount that does not exist, so the ServiceAccount admission plugin refuses every
/// pod the ReplicaSet controller would create (to reach `replicas`, or to replace a pod
/// evicted or deleted); the pods here are the test's, with the `default` account. Scaling
/// the Deployment still scales the ReplicaSet, whose controller then deletes pods. The
/// ReplicaSet carries the template's labels, as the Deployment controller's do: it releases
/// one its selector does not match.
pub async fn deployment(client: &Client, app: &str, replicas: i32, pods: usize) {
    let selector = json!({"matchLabels": {"app": app}});
    let pod_spec = json!({"containers": [{"name": "main", "image": "nginx:1.25"}]});
    let mut template_spec = pod_spec.clone();
    template_spec["serviceAccountName"] = json!(NO_SUCH_ACCOUNT);
    let template = json!({"metadata": {"labels": {"app": app}}, "spec": template_spec});
    let deploy: Deployment = create(
        client,
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": app},
        "spec": {"replicas": replicas, "paused": true, "selector": selector,
            "template": template}}),
    )
    .await;
    let rs: ReplicaSet = create(
        client,
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": format!("{app}-7d4b9"), "labels": {"app": app}, "ownerReferences": [{"apiVersion": "apps/v1",
            "kind": "Deployment", "name": app, "uid": deploy.uid().unwrap(), "controller": true}]},
        "spec": {"replicas": replicas, "selector": selector, "template": template}}),
    )
    .await;
    for i in 0..pods {
        let _: Pod = create(
            client,
            json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{app}-7d4b9-{i}"), "labels": {"app": app},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": rs.name_any(), "uid": rs.uid().unwrap(), "controller": true}]},
            "spec": pod_spec.clone()}),
        )
        .await;
    }
}

pub async fn budget(client: &Client, name: &str, spec: Value) {
    let _: PodUnavailableBudget = create(
        client,
        json!({"apiVersion": "policy.kruise.io/v1beta1",
        "kind": "PodUnavailableBudget", "metadata": {"name": name}, "spec": spec}),
    )
    .await;
}

/// Waits until the budget's (allowed, current, desired, total) are `want`.
pub async fn wait_for_numbers(
    client: &Client,
    name: &str,
    want: (i32, i32, i32, i32),
) -> PodUnavailableBudgetStatus {
    let api = Api::<PodUnavailableBudget>::default_namespaced(client.clone());
    eventually(&format!("{name} at {want:?}"), WAIT, || {
        let api = api.clone();
        async move {
            let status = api.get(name).await.ok()?.status?;
            let got = (
                status.unavailable_allowed,
                status.current_available,
                status.desired_available,
                status.total_replicas,
            );
            (got == want).then_some(status)
        }
    })
    .await
}
