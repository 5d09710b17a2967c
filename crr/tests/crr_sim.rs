//! The controller and a node agent against kruise-sim, or the real API server of
//! `KRUISE_TEST_KUBECONFIG` with kruise-sim's nodes: the simulated kubelet restarts the
//! containers the agent stops through the node's fake CRI socket (new containerID,
//! restartCount+1).
//! Requests are created as the webhook would fill them (`admission::inject_pod` on the live
//! pod and node).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_crr::admission::{AdmittedCrr, check_create, inject_pod};
use kruise_crr::api::v1beta1::ContainerRecreateRequest;
use kruise_crr::{agent, controller};
use kruise_runtime::family::AgentContext;
use kruise_runtime::{Metrics, Readiness, RunOptions};
use kruise_testkit::{ClusterOptions, TestCluster, WAIT, eventually};
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const NODE: &str = "sim-node-0";

struct Cluster {
    cluster: TestCluster,
    client: Client,
    shutdown: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    _dir: TempDir,
}

/// A directory removed on drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Cluster {
    async fn start() -> Cluster {
        Self::start_with_socket(None).await
    }

    /// The cluster, its agent given `socket` instead of the node's fake CRI socket.
    async fn start_with_socket(socket: Option<PathBuf>) -> Cluster {
        let dir = std::env::temp_dir().join(format!(
            "kruise-crr-sim-{}-{}",
            std::process::id(),
            rand_suffix()
        ));
        let (cluster, client) = kruise_testkit::cluster_with(
            ClusterOptions {
                nodes: 1,
                cri_dir: Some(dir.clone()),
                ..ClusterOptions::default()
            },
            &[kruise_crr::api::crd::crd().unwrap()],
        )
        .await;
        let shutdown = CancellationToken::new();
        let opts = RunOptions {
            name: controller::CONTROLLER_NAME.into(),
            concurrency: 4,
            metrics: Metrics::new(),
            readiness: Readiness::default(),
            shutdown: shutdown.clone(),
            leadership: Default::default(),
        };
        let controller = {
            let client = kruise_testkit::controller_client(&client, "crr");
            tokio::spawn(async move { controller::run(client, None, opts).await })
        };
        let ctx = AgentContext {
            client: kruise_testkit::agent_client(&client, "crr"),
            node: NODE.into(),
            cri_socket: socket.unwrap_or_else(|| cluster.cri_socket(NODE).unwrap()),
            shutdown: shutdown.clone(),
        };
        let agent = tokio::spawn(async move { agent::run(ctx).await.unwrap() });
        Cluster {
            cluster,
            client,
            shutdown,
            tasks: vec![controller, agent],
            _dir: TempDir(dir),
        }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        for task in self.tasks {
            tokio::time::timeout(Duration::from_secs(30), task)
                .await
                .unwrap()
                .unwrap();
        }
        self.cluster.shutdown().await;
    }

    fn pods(&self) -> Api<Pod> {
        Api::default_namespaced(self.client.clone())
    }

    fn requests(&self) -> Api<ContainerRecreateRequest> {
        Api::default_namespaced(self.client.clone())
    }

    /// A pod with `app` and `sidecar`, running with both containers started.
    async fn running_pod(&self, name: &str, annotations: Value, gate: bool) -> Pod {
        let pre_stop = json!({"exec": {"command": ["sh", "-c", "echo bye"]}});
        self.running_pod_with(name, annotations, gate, json!({"preStop": pre_stop}))
            .await
    }

    /// [`Cluster::running_pod`] with `lifecycle` as app's hooks.
    async fn running_pod_with(
        &self,
        name: &str,
        annotations: Value,
        gate: bool,
        lifecycle: Value,
    ) -> Pod {
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"containers": [
                {"name": "app", "image": "nginx:1.27", "lifecycle": lifecycle},
                {"name": "sidecar", "image": "busybox:1.36"},
            ]},
        });
        if gate {
            pod["spec"]["readinessGates"] = json!([{"conditionType": "KruisePodReady"}]);
        }
        self.pods()
            .create(
                &PostParams::default(),
                &serde_json::from_value(pod).unwrap(),
            )
            .await
            .unwrap();
        let pods = self.pods();
        let name = name.to_string();
        eventually("the pod's containers start", WAIT, || {
            let (pods, name) = (pods.clone(), name.clone());
            async move {
                let pod = pods.get(&name).await.ok()?;
                let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
                (statuses.len() == 2
                    && statuses
                        .iter()
                        .all(|s| s.started == Some(true) && s.container_id.is_some()))
                .then_some(pod)
            }
        })
        .await
    }

    /// Creates the request as the webhook would fill it.
    async fn create_request(
        &self,
        name: &str,
        pod: &Pod,
        mut spec: Value,
    ) -> ContainerRecreateRequest {
        spec["podName"] = json!(pod.name_any());
        let mut crr: AdmittedCrr = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": self.client.default_namespace()},
            "spec": spec,
        }))
        .unwrap();
        check_create(&mut crr).unwrap();
        let node = Api::<Node>::all(self.client.clone())
            .get(NODE)
            .await
            .unwrap();
        inject_pod(&mut crr, pod, &node).unwrap();
        let mut object = serde_json::to_value(&crr).unwrap();
        object["apiVersion"] = json!("apps.kruise.io/v1beta1");
        object["kind"] = json!("ContainerRecreateRequest");
        self.requests()
            .create(
                &PostParams::default(),
                &serde_json::from_value(object).unwrap(),
            )
            .await
            .unwrap()
    }

    async fn wait_completed(&self, name: &str) -> ContainerRecreateRequest {
        let requests = self.requests();
        let name = name.to_string();
        eventually(
            &format!("{name} completes"),
            Duration::from_secs(60),
            || {
                let (requests, name) = (requests.clone(), name.clone());
                async move {
                    requests
                        .get(&name)
                        .await
                        .ok()
                        .filter(|c| c.status.as_ref().is_some_and(|s| s.phase == "Completed"))
                }
            },
        )
        .await
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn status_of<'a>(pod: &'a Pod, container: &str) -> &'a k8s_openapi::api::core::v1::ContainerStatus {
    pod.status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()
        .iter()
        .find(|s| s.name == container)
        .unwrap()
}

fn started_at(pod: &Pod, container: &str) -> jiff::Timestamp {
    status_of(pod, container)
        .state
        .as_ref()
        .unwrap()
        .running
        .as_ref()
        .unwrap()
        .started_at
        .as_ref()
        .unwrap()
        .0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_then_sidecar_are_recreated_in_order_and_the_ttl_removes_the_request() {
    let cluster = Cluster::start().await;
    // The new app container turns ready 2 s after it starts: an ordered sidecar waits for it.
    let before = cluster
        .running_pod("pod-0", json!({"sim.kruise.io/ready-delay": "2s"}), false)
        .await;
    let crr = cluster
        .create_request(
            "recreate",
            &before,
            json!({"containers": [{"name": "app"}, {"name": "sidecar"}],
                   "strategy": {"orderedRecreate": true}, "ttlSecondsAfterFinished": 2}),
        )
        .await;
    assert_eq!(crr.labels()["crr.apps.kruise.io/active"], "true");
    let done = cluster.wait_completed("recreate").await;
    let status = done.status.clone().unwrap();
    assert_eq!(status.message, "");
    let states: Vec<(&str, &str, bool)> = status
        .container_recreate_states
        .iter()
        .map(|s| (s.name.as_str(), s.phase.as_str(), s.is_killed))
        .collect();
    assert_eq!(
        states,
        [("app", "Succeeded", true), ("sidecar", "Succeeded", true)]
    );
    let after = cluster.pods().get("pod-0").await.unwrap();
    assert_eq!(after.uid(), before.uid(), "the pod is the same pod");
    for container in ["app", "sidecar"] {
        let (old, new) = (status_of(&before, container), status_of(&after, container));
        assert_eq!(new.restart_count, old.restart_count + 1, "{container}");
        assert_ne!(new.container_id, old.container_id, "{container}");
    }
    // Ordered: the sidecar was stopped only once the new app was ready (2 s after its start).
    let gap = started_at(&after, "sidecar").duration_since(started_at(&after, "app"));
    assert!(
        gap.as_secs_f64() >= 2.0,
        "sidecar started {gap:?} after app"
    );
    // A stop is a Killing event on the pod, as the kubelet's (the second one continues its
    // series: events that differ only in their note are one event).
    let client = cluster.client.clone();
    eventually("the Killing event", WAIT, || {
        let client = client.clone();
        async move {
            kruise_testkit::events_about(&client, client.default_namespace(), "pod-0")
                .await
                .into_iter()
                .any(|e| {
                    e.reason.as_deref() == Some("Killing")
                        && e.message.as_deref()
                            == Some("Stopping container app by ContainerRecreateRequest recreate")
                })
                .then_some(())
        }
    })
    .await;
    // Done: not active any more, then deleted by its TTL.
    let requests = cluster.requests();
    eventually("the TTL deletes the request", WAIT, || {
        let requests = requests.clone();
        async move {
            requests
                .get_opt("recreate")
                .await
                .ok()?
                .is_none()
                .then_some(())
        }
    })
    .await;
    cluster.stop().await;
}

/// OpenKruise's e2e "recreates containers with postStartHook" (ordered): app's new container
/// runs only once its 5 s postStart hook is done, and the sidecar is stopped after that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordered_sidecar_waits_for_the_new_app_past_its_post_start_hook() {
    let cluster = Cluster::start().await;
    let before = cluster
        .running_pod_with(
            "pod-4",
            json!({}),
            false,
            json!({"postStart": {"exec": {"command": ["sleep", "5"]}}}),
        )
        .await;
    cluster
        .create_request(
            "poststart",
            &before,
            json!({"containers": [{"name": "app"}, {"name": "sidecar"}],
                   "strategy": {"orderedRecreate": true}}),
        )
        .await;
    let done = cluster.wait_completed("poststart").await;
    let states: Vec<(String, String, bool)> = done
        .status
        .unwrap()
        .container_recreate_states
        .into_iter()
        .map(|s| (s.name, s.phase, s.is_killed))
        .collect();
    assert_eq!(
        states,
        [
            ("app".to_string(), "Succeeded".to_string(), true),
            ("sidecar".to_string(), "Succeeded".to_string(), true)
        ]
    );
    let after = cluster.pods().get("pod-4").await.unwrap();
    let finished = |container: &str| {
        status_of(&after, container)
            .last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .and_then(|t| t.finished_at.as_ref())
            .unwrap()
            .0
    };
    // The spec's check: the old sidecar stopped at least the hook's 5 s after the old app.
    let gap = finished("sidecar").duration_since(finished("app"));
    assert!(
        gap.as_secs_f64() >= 5.0,
        "sidecar stopped {gap:?} after app"
    );
    for container in ["app", "sidecar"] {
        assert_eq!(
            status_of(&after, container).restart_count,
            status_of(&before, container).restart_count + 1,
            "{container}"
        );
    }
    cluster.stop().await;
}

/// OpenKruise's e2e "recreates containers with preStopHook": app's exec preStop hook (a
/// `sleep`, run through the runtime) holds its stop, and the sidecar's after it, so the
/// sidecar stops no sooner than the hook's seconds after the request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_pre_stop_hook_that_sleeps_holds_the_stops_for_its_seconds() {
    let cluster = Cluster::start().await;
    let before = cluster
        .running_pod_with(
            "pod-5",
            json!({}),
            false,
            json!({"preStop": {"exec": {"command": ["sleep", "3"]}}}),
        )
        .await;
    let crr = cluster
        .create_request(
            "prestop",
            &before,
            json!({"containers": [{"name": "app"}, {"name": "sidecar"}]}),
        )
        .await;
    cluster.wait_completed("prestop").await;
    let after = cluster.pods().get("pod-5").await.unwrap();
    let sidecar_stopped = status_of(&after, "sidecar")
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .and_then(|t| t.finished_at.as_ref())
        .unwrap()
        .0;
    let created = crr.metadata.creation_timestamp.unwrap().0;
    let waited = sidecar_stopped.duration_since(created);
    assert!(
        waited.as_secs_f64() >= 2.0,
        "the sidecar stopped {waited:?} after the request"
    );
    cluster.stop().await;
}

/// The same spec's second request: its deadline passes while app's preStop hook runs; it
/// completes with both states still Pending (they are written once the stop returns), and
/// app is recreated all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_during_a_pre_stop_hook_completes_with_the_states_as_they_were() {
    let cluster = Cluster::start().await;
    let before = cluster
        .running_pod_with(
            "pod-6",
            json!({}),
            false,
            json!({"preStop": {"exec": {"command": ["sleep", "6"]}}}),
        )
        .await;
    cluster
        .create_request(
            "deadline",
            &before,
            json!({"containers": [{"name": "app"}, {"name": "sidecar"}],
                   "activeDeadlineSeconds": 3}),
        )
        .await;
    let done = cluster.wait_completed("deadline").await;
    let states: Vec<(String, String, bool)> = done
        .status
        .unwrap()
        .container_recreate_states
        .into_iter()
        .map(|s| (s.name, s.phase, s.is_killed))
        .collect();
    assert_eq!(
        states,
        [
            ("app".to_string(), "Pending".to_string(), false),
            ("sidecar".to_string(), "Pending".to_string(), false)
        ]
    );
    let pods = cluster.pods();
    let restarts = status_of(&before, "app").restart_count;
    eventually("app is recreated after its hook", WAIT, || {
        let pods = pods.clone();
        async move {
            let pod = pods.get("pod-6").await.ok()?;
            (status_of(&pod, "app").restart_count == restarts + 1).then_some(())
        }
    })
    .await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unready_grace_shows_on_the_pod_and_the_active_deadline_completes_the_request() {
    let cluster = Cluster::start().await;
    let pod = cluster.running_pod("pod-1", json!({}), true).await;
    cluster
        .create_request(
            "graceful",
            &pod,
            json!({"containers": [{"name": "app"}],
                   "strategy": {"unreadyGracePeriodSeconds": 30}, "activeDeadlineSeconds": 4}),
        )
        .await;
    // The pod is made not-ready by this request (keyed `<namespace>/<name>`) before
    // anything is stopped.
    let pods = cluster.pods();
    let key = format!(r#""key":"{}/graceful""#, cluster.client.default_namespace());
    eventually("the pod is held not-ready by the request", WAIT, || {
        let (pods, key) = (pods.clone(), key.clone());
        async move {
            let pod = pods.get("pod-1").await.ok()?;
            let cond = pod
                .status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "KruisePodReady")?;
            (cond.status == "False" && cond.message.as_deref()?.contains(&key)).then_some(())
        }
    })
    .await;
    // The request records the hold (its finalizer, the grace's start) in writes of its own,
    // after the pod's.
    let requests = cluster.requests();
    eventually("the request records the hold", WAIT, || {
        let requests = requests.clone();
        async move {
            let held = requests.get("graceful").await.ok()?;
            (held
                .finalizers()
                .iter()
                .any(|f| f == "crr.apps.kruise.io/unready-acquired")
                && held.status?.pre_recreate_grace().is_some())
            .then_some(())
        }
    })
    .await;
    // The deadline (4 s) passes inside the grace period (30 s): completed, nothing stopped.
    let done = cluster.wait_completed("graceful").await;
    assert_eq!(
        done.status.unwrap().message,
        "recreating has exceeded the activeDeadlineSeconds"
    );
    let after = cluster.pods().get("pod-1").await.unwrap();
    assert_eq!(
        status_of(&after, "app").restart_count,
        status_of(&pod, "app").restart_count
    );
    // Completion releases the pod and the finalizer, and drops the active label.
    eventually("the request lets go of the pod", WAIT, || {
        let (requests, pods) = (requests.clone(), pods.clone());
        async move {
            let crr = requests.get("graceful").await.ok()?;
            let pod = pods.get("pod-1").await.ok()?;
            let cond = pod
                .status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "KruisePodReady")?;
            (crr.finalizers().is_empty()
                && !crr.labels().contains_key("crr.apps.kruise.io/active")
                && cond.status == "True")
                .then_some(())
        }
    })
    .await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_request_proceeds_as_soon_as_the_first_is_deleted() {
    // K#1058: nothing but the deletion of the first wakes the second.
    let cluster = Cluster::start().await;
    let pod = cluster.running_pod("pod-2", json!({}), false).await;
    cluster
        .create_request(
            "first",
            &pod,
            json!({"containers": [{"name": "app"}], "strategy": {"unreadyGracePeriodSeconds": 600}}),
        )
        .await;
    let requests = cluster.requests();
    eventually("the first is taken", WAIT, || {
        let requests = requests.clone();
        async move {
            let c = requests.get("first").await.ok()?;
            (c.status?.phase == "Recreating").then_some(())
        }
    })
    .await;
    cluster
        .create_request("second", &pod, json!({"containers": [{"name": "sidecar"}]}))
        .await;
    eventually("the second waits its turn", WAIT, || {
        let requests = requests.clone();
        async move {
            let c = requests.get("second").await.ok()?;
            (c.status?.phase == "Pending").then_some(())
        }
    })
    .await;
    requests
        .delete("first", &DeleteParams::default())
        .await
        .unwrap();
    let done = cluster.wait_completed("second").await;
    assert_eq!(
        done.status.unwrap().container_recreate_states[0].phase,
        "Succeeded"
    );
    let after = cluster.pods().get("pod-2").await.unwrap();
    assert_eq!(
        status_of(&after, "sidecar").restart_count,
        status_of(&pod, "sidecar").restart_count + 1
    );
    assert_eq!(
        status_of(&after, "app").restart_count,
        status_of(&pod, "app").restart_count
    );
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prestop_hook_runs_before_the_container_is_stopped() {
    let cluster = Cluster::start().await;
    // The hook is an httpGet to this test: when it arrives, app must still be the old one.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let before = cluster
        .running_pod_with(
            "pod-3",
            json!({}),
            false,
            json!({"preStop": {"httpGet": {"host": "127.0.0.1", "port": port, "path": "/quit"}}}),
        )
        .await;
    let pods = cluster.pods();
    let hook = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let (mut conn, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 1024];
        let n = conn.read(&mut buf).await.unwrap();
        let pod = pods.get("pod-3").await.unwrap();
        let app = status_of(&pod, "app").container_id.clone();
        conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            .await
            .unwrap();
        (String::from_utf8_lossy(&buf[..n]).to_string(), app)
    });
    cluster
        .create_request("hooked", &before, json!({"containers": [{"name": "app"}]}))
        .await;
    cluster.wait_completed("hooked").await;
    let (request, app_during_hook) = hook.await.unwrap();
    assert!(request.starts_with("GET /quit HTTP/1.1"), "{request}");
    assert_eq!(
        app_during_hook,
        status_of(&before, "app").container_id,
        "the hook ran while the old app still ran"
    );
    let after = cluster.pods().get("pod-3").await.unwrap();
    assert_eq!(
        status_of(&after, "app").restart_count,
        status_of(&before, "app").restart_count + 1
    );
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_without_a_runtime_socket_completes_requests_with_the_reason() {
    let missing = std::env::temp_dir().join("kruise-crr-no-such-dir/containerd.sock");
    let cluster = Cluster::start_with_socket(Some(missing.clone())).await;
    let pod = cluster.running_pod("pod-4", json!({}), false).await;
    cluster
        .create_request("nowhere", &pod, json!({"containers": [{"name": "app"}]}))
        .await;
    let done = cluster.wait_completed("nowhere").await;
    assert_eq!(
        done.status.unwrap().message,
        format!(
            "failed to find runtime service: CRI socket {} does not exist",
            missing.display()
        )
    );
    let after = cluster.pods().get("pod-4").await.unwrap();
    assert_eq!(
        status_of(&after, "app").restart_count,
        status_of(&pod, "app").restart_count
    );
    cluster.stop().await;
}
