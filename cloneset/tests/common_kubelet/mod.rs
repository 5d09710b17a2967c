//! Test fixtures for the CloneSet controller against kruise-sim: CRD install, an in-process
//! controller that can be stopped and restarted, and a fake kubelet (the simulator has none
//! yet) that runs the pods of the `default` namespace the way a kubelet reports them.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition, PodStatus};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_cloneset::api::v1beta1::CloneSet;
use kruise_cloneset::controller::{self, Settings};
use kruise_common::runtime::{Metrics, Readiness, RunOptions};
use kruise_sim::{Sim, SimConfig};
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Polls `check` every 50 ms until it returns Some, or panics after `deadline`.
pub async fn eventually<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = std::time::Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            start.elapsed() <= deadline,
            "timed out after {deadline:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The default deadline of a wait.
pub const WAIT: Duration = Duration::from_secs(20);

/// A simulator with the CloneSet CRD installed.
pub async fn sim_with_crd() -> (Sim, Client) {
    let sim = Sim::start(SimConfig::default()).await.unwrap();
    let client = sim.client().unwrap();
    let crd = kruise_cloneset::api::crd::crd().unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let api: Api<CloneSet> = Api::namespaced(client.clone(), "default");
    eventually("the CloneSet API", WAIT, || {
        let api = api.clone();
        async move { api.list(&ListParams::default()).await.ok() }
    })
    .await;
    (sim, client)
}

/// An in-process controller; [`RunningController::stop`] waits for in-flight reconciles.
pub struct RunningController {
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    /// Its metrics registry.
    pub metrics: Metrics,
}

impl RunningController {
    /// Starts a controller for the `default` namespace.
    pub fn start(client: &Client) -> Self {
        Self::start_with(
            client,
            Settings {
                namespace: Some("default".into()),
                ..Settings::default()
            },
        )
    }

    /// Starts a controller with these settings.
    pub fn start_with(client: &Client, settings: Settings) -> Self {
        let shutdown = CancellationToken::new();
        let metrics = Metrics::new();
        let opts = RunOptions {
            name: controller::CONTROLLER_NAME.into(),
            concurrency: 3,
            metrics: metrics.clone(),
            readiness: Readiness::default(),
            shutdown: shutdown.clone(),
        };
        let client = client.clone();
        let m = metrics.clone();
        let task = tokio::spawn(async move { controller::run(client, settings, &m, opts).await });
        Self {
            shutdown,
            task,
            metrics,
        }
    }

    /// Stops it and waits until it has.
    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .unwrap()
            .unwrap();
    }
}

/// A CloneSet `name` in `default` with `replicas` pods running `image`, selected by `app: name`.
pub fn cloneset(name: &str, replicas: i32, image: &str, extra_spec: serde_json::Value) -> CloneSet {
    let mut spec = json!({
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "main", "image": image}]}
        }
    });
    merge(&mut spec, &extra_spec);
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "CloneSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }))
    .unwrap()
}

fn merge(into: &mut serde_json::Value, from: &serde_json::Value) {
    match (into.as_object_mut(), from.as_object()) {
        (Some(a), Some(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(slot) if slot.is_object() && v.is_object() => merge(slot, v),
                    _ => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        _ => *into = from.clone(),
    }
}

/// The pods of `default` whose name starts with `<name>-`, sorted by name.
pub async fn pods_of(client: &Client, name: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut pods: Vec<Pod> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.name_any().starts_with(&format!("{name}-")))
        .collect();
    pods.sort_by_key(|p| p.name_any());
    pods
}

/// A fake kubelet for the `default` namespace: every 50 ms, each pod whose reported status
/// differs from what a kubelet would report gets one status patch: phase Running, one
/// running container status per container (image, an imageID derived from the image, a
/// restartCount raised by one each time the image changes, as an in-place update restarts
/// the container), `ContainersReady`, and `Ready` = containers ready and every readiness
/// gate's condition True. Conditions written by others are kept. Pause with [`Kubelet::set_running`].
pub struct Kubelet {
    running: Arc<AtomicBool>,
    stop: CancellationToken,
}

impl Kubelet {
    /// Starts it (running).
    pub fn start(client: &Client) -> Self {
        let running = Arc::new(AtomicBool::new(true));
        let stop = CancellationToken::new();
        let api: Api<Pod> = Api::namespaced(client.clone(), "default");
        let (r, s) = (running.clone(), stop.clone());
        tokio::spawn(async move {
            while !s.is_cancelled() {
                if r.load(Ordering::SeqCst)
                    && let Ok(list) = api.list(&ListParams::default()).await
                {
                    for pod in list.items {
                        if pod.metadata.deletion_timestamp.is_some() {
                            continue;
                        }
                        if let Some(status) = kubelet_status(&pod) {
                            // A PUT with the listed resourceVersion, so the controller's
                            // own status writes (patches) stay countable apart.
                            let mut next = pod.clone();
                            next.status = Some(status);
                            let _ = api
                                .replace_status(&pod.name_any(), &PostParams::default(), &next)
                                .await;
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Self { running, stop }
    }

    /// Pauses (`false`) or resumes (`true`) reporting.
    pub fn set_running(&self, on: bool) {
        self.running.store(on, Ordering::SeqCst);
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The image digest the fake runtime reports for an image.
pub fn image_id(image: &str) -> String {
    let digest = kruise_common::revision::fnv1a_32(image.as_bytes());
    format!("docker.io/library/{image}@sha256:{digest:064x}")
}

fn condition(type_: &str, ok: bool, since: &Time) -> PodCondition {
    PodCondition {
        type_: type_.into(),
        status: if ok { "True" } else { "False" }.into(),
        last_transition_time: Some(since.clone()),
        ..Default::default()
    }
}

/// The status a kubelet would report now, or None when the reported one already matches.
fn kubelet_status(pod: &Pod) -> Option<PodStatus> {
    let spec = pod.spec.as_ref()?;
    let old = pod.status.clone().unwrap_or_default();
    let old_containers: BTreeMap<String, ContainerStatus> = old
        .container_statuses
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.name.clone(), c))
        .collect();
    let now = Time(jiff::Timestamp::now());
    let containers: Vec<ContainerStatus> = spec
        .containers
        .iter()
        .map(|c| {
            let image = c.image.clone().unwrap_or_default();
            let prev = old_containers.get(&c.name);
            let restarts = match prev {
                Some(p) if p.image != image => p.restart_count + 1,
                Some(p) => p.restart_count,
                None => 0,
            };
            ContainerStatus {
                name: c.name.clone(),
                image: image.clone(),
                image_id: image_id(&image),
                container_id: Some(format!("containerd://{}-{restarts}", c.name)),
                ready: true,
                started: Some(true),
                restart_count: restarts,
                state: Some(k8s_openapi::api::core::v1::ContainerState {
                    running: Some(k8s_openapi::api::core::v1::ContainerStateRunning {
                        started_at: Some(now.clone()),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }
        })
        .collect();
    let conditions_now = old.conditions.clone().unwrap_or_default();
    let gates_ok = spec.readiness_gates.iter().flatten().all(|g| {
        conditions_now
            .iter()
            .any(|c| c.type_ == g.condition_type && c.status == "True")
    });
    let mut conditions: Vec<PodCondition> = conditions_now
        .iter()
        .filter(|c| {
            !["Ready", "ContainersReady", "PodScheduled", "Initialized"].contains(&c.type_.as_str())
        })
        .cloned()
        .collect();
    let keep = |t: &str, ok: bool| -> PodCondition {
        match conditions_now.iter().find(|c| c.type_ == t) {
            Some(c) if (c.status == "True") == ok => c.clone(),
            _ => condition(t, ok, &now),
        }
    };
    conditions.push(keep("PodScheduled", true));
    conditions.push(keep("Initialized", true));
    conditions.push(keep("ContainersReady", true));
    conditions.push(keep("Ready", gates_ok));
    let same_containers = old.container_statuses.as_ref().is_some_and(|cs| {
        cs.len() == containers.len()
            && cs.iter().zip(&containers).all(|(a, b)| {
                a.image == b.image && a.image_id == b.image_id && a.restart_count == b.restart_count
            })
    });
    let same_conditions = {
        let mut a: Vec<(String, String)> = conditions_now
            .iter()
            .map(|c| (c.type_.clone(), c.status.clone()))
            .collect();
        let mut b: Vec<(String, String)> = conditions
            .iter()
            .map(|c| (c.type_.clone(), c.status.clone()))
            .collect();
        a.sort();
        b.sort();
        a == b
    };
    if old.phase.as_deref() == Some("Running") && same_containers && same_conditions {
        return None;
    }
    Some(PodStatus {
        phase: Some("Running".into()),
        host_ip: Some("10.0.0.1".into()),
        pod_ip: Some("10.1.0.1".into()),
        start_time: old.start_time.clone().or(Some(now)),
        container_statuses: Some(containers),
        conditions: Some(conditions),
        ..Default::default()
    })
}
