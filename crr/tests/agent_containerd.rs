//! The node agent against a real containerd (`../shared/recipes/containerd-cri.sh`: Debian's
//! containerd with its CRI plugin on a socket in a temporary directory, a locally built
//! busybox image). The test plays the kubelet: it creates a pod sandbox and a container
//! through CRI, the agent stops the container for a request through that socket, and the
//! test starts the next attempt, as the kubelet would. Skipped, with the reason printed,
//! where the recipe cannot run (not root, or the recipe reports a failure to start).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kruise_cri::v1 as cri;
use kruise_cri::{ImageServiceClient, RuntimeServiceClient};
use kruise_crr::agent;
use kruise_crr::api::v1beta1::ContainerRecreateRequest;
use kruise_runtime::family::AgentContext;
use kruise_sim::{Sim, SimConfig};
use kruise_testkit::eventually;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

const NODE: &str = "containerd-node";
const POD_UID: &str = "6f1f4a52-crr-containerd-test";
/// The grace period of the request; the container ignores SIGTERM, so its stop lasts it.
const GRACE_SECONDS: i64 = 3;
/// CRI `NamespaceMode.NODE`: the recipe has no CNI, so pods use the host's network.
const NAMESPACE_NODE: i32 = 2;

// The CRI messages for creating sandboxes and containers, which kruise-cri (an agent never
// creates them) does not carry: only the fields this test sets, with runtime.v1's tags.
#[derive(Clone, PartialEq, prost::Message)]
struct NamespaceOption {
    #[prost(int32, tag = "1")]
    network: i32,
}
#[derive(Clone, PartialEq, prost::Message)]
struct LinuxSandboxSecurityContext {
    #[prost(message, optional, tag = "1")]
    namespace_options: Option<NamespaceOption>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct LinuxPodSandboxConfig {
    #[prost(message, optional, tag = "2")]
    security_context: Option<LinuxSandboxSecurityContext>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct PodSandboxMetadata {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    uid: String,
    #[prost(string, tag = "3")]
    namespace: String,
    #[prost(uint32, tag = "4")]
    attempt: u32,
}
#[derive(Clone, PartialEq, prost::Message)]
struct PodSandboxConfig {
    #[prost(message, optional, tag = "1")]
    metadata: Option<PodSandboxMetadata>,
    #[prost(map = "string, string", tag = "6")]
    labels: HashMap<String, String>,
    #[prost(message, optional, tag = "8")]
    linux: Option<LinuxPodSandboxConfig>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct RunPodSandboxRequest {
    #[prost(message, optional, tag = "1")]
    config: Option<PodSandboxConfig>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct PodSandboxIdResponse {
    #[prost(string, tag = "1")]
    pod_sandbox_id: String,
}
#[derive(Clone, PartialEq, prost::Message)]
struct PodSandboxIdRequest {
    #[prost(string, tag = "1")]
    pod_sandbox_id: String,
}
#[derive(Clone, PartialEq, prost::Message)]
struct LinuxContainerSecurityContext {
    #[prost(message, optional, tag = "3")]
    namespace_options: Option<NamespaceOption>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct LinuxContainerConfig {
    #[prost(message, optional, tag = "2")]
    security_context: Option<LinuxContainerSecurityContext>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct ContainerConfig {
    #[prost(message, optional, tag = "1")]
    metadata: Option<cri::ContainerMetadata>,
    #[prost(message, optional, tag = "2")]
    image: Option<cri::ImageSpec>,
    #[prost(string, repeated, tag = "3")]
    command: Vec<String>,
    #[prost(map = "string, string", tag = "9")]
    labels: HashMap<String, String>,
    #[prost(map = "string, string", tag = "10")]
    annotations: HashMap<String, String>,
    #[prost(message, optional, tag = "15")]
    linux: Option<LinuxContainerConfig>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct CreateContainerRequest {
    #[prost(string, tag = "1")]
    pod_sandbox_id: String,
    #[prost(message, optional, tag = "2")]
    config: Option<ContainerConfig>,
    #[prost(message, optional, tag = "3")]
    sandbox_config: Option<PodSandboxConfig>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct ContainerIdMessage {
    #[prost(string, tag = "1")]
    container_id: String,
}
#[derive(Clone, PartialEq, prost::Message)]
struct Empty {}

async fn call<Req, Resp>(channel: &Channel, method: &'static str, request: Req) -> Resp
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.unwrap();
    let path = http::uri::PathAndQuery::from_static(method);
    grpc.unary(
        tonic::Request::new(request),
        path,
        tonic_prost::ProstCodec::<Req, Resp>::default(),
    )
    .await
    .unwrap_or_else(|s| panic!("{method}: {s}"))
    .into_inner()
}

fn host_network() -> Option<NamespaceOption> {
    Some(NamespaceOption {
        network: NAMESPACE_NODE,
    })
}

fn sandbox_config() -> PodSandboxConfig {
    PodSandboxConfig {
        metadata: Some(PodSandboxMetadata {
            name: "pod-c".into(),
            uid: POD_UID.into(),
            namespace: "default".into(),
            attempt: 0,
        }),
        labels: HashMap::from([(kruise_cri::LABEL_POD_UID.into(), POD_UID.into())]),
        linux: Some(LinuxPodSandboxConfig {
            security_context: Some(LinuxSandboxSecurityContext {
                namespace_options: host_network(),
            }),
        }),
    }
}

/// Creates and starts attempt `attempt` of container `app`, as the kubelet would.
async fn start_app(channel: &Channel, sandbox: &str, image: &str, attempt: u32) -> String {
    let config = ContainerConfig {
        metadata: Some(cri::ContainerMetadata {
            name: "app".into(),
            attempt,
        }),
        image: Some(cri::ImageSpec {
            image: image.into(),
            ..Default::default()
        }),
        // Ignores SIGTERM: only the end of the grace period (SIGKILL) stops it.
        command: vec![
            "/bin/sh".into(),
            "-c".into(),
            "trap '' TERM; while true; do sleep 1; done".into(),
        ],
        labels: HashMap::from([
            (kruise_cri::LABEL_POD_UID.into(), POD_UID.into()),
            (kruise_cri::LABEL_POD_NAME.into(), "pod-c".into()),
            (kruise_cri::LABEL_POD_NAMESPACE.into(), "default".into()),
            (kruise_cri::LABEL_CONTAINER_NAME.into(), "app".into()),
        ]),
        annotations: HashMap::from([(agent::RESTART_COUNT_ANNOTATION.into(), attempt.to_string())]),
        linux: Some(LinuxContainerConfig {
            security_context: Some(LinuxContainerSecurityContext {
                namespace_options: host_network(),
            }),
        }),
    };
    let created: ContainerIdMessage = call(
        channel,
        "/runtime.v1.RuntimeService/CreateContainer",
        CreateContainerRequest {
            pod_sandbox_id: sandbox.into(),
            config: Some(config),
            sandbox_config: Some(sandbox_config()),
        },
    )
    .await;
    let _: Empty = call(
        channel,
        "/runtime.v1.RuntimeService/StartContainer",
        ContainerIdMessage {
            container_id: created.container_id.clone(),
        },
    )
    .await;
    created.container_id
}

async fn status(runtime: &mut RuntimeServiceClient<Channel>, id: &str) -> cri::ContainerStatus {
    runtime
        .container_status(cri::ContainerStatusRequest {
            container_id: id.into(),
            verbose: false,
        })
        .await
        .unwrap()
        .into_inner()
        .status
        .unwrap()
}

/// The recipe, and why the test cannot run here when it cannot.
fn recipe() -> Result<PathBuf, String> {
    let recipe = std::env::var_os("CONTAINERD_RECIPE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/recipes/containerd-cri.sh")
        });
    if !recipe.is_file() {
        return Err(format!("no containerd recipe at {}", recipe.display()));
    }
    Ok(recipe)
}

/// containerd, started by the recipe under `dir`; stopped on drop.
struct Containerd {
    recipe: PathBuf,
    dir: PathBuf,
    env: HashMap<String, String>,
}

impl Containerd {
    fn start(recipe: PathBuf, dir: PathBuf) -> Result<Containerd, String> {
        let out = std::process::Command::new("bash")
            .arg(&recipe)
            .arg("start")
            .arg(&dir)
            .output()
            .map_err(|e| format!("running {}: {e}", recipe.display()))?;
        if !out.status.success() {
            return Err(format!(
                "the recipe could not start containerd: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let env = std::fs::read_to_string(dir.join("env"))
            .map_err(|e| format!("reading the recipe's env: {e}"))?
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Ok(Containerd { recipe, dir, env })
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .arg(&self.recipe)
            .arg("stop")
            .arg(&self.dir)
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_stops_a_containerd_container_with_the_grace_period_and_the_next_attempt_runs() {
    let recipe = match recipe() {
        Ok(r) => r,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    // The recipe needs root.
    let uid = std::process::Command::new("id").arg("-u").output().unwrap();
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        eprintln!("skipped: the containerd recipe needs root");
        return;
    }
    let dir = std::env::temp_dir().join(format!("crr-containerd-{}", std::process::id()));
    let containerd = match Containerd::start(recipe, dir) {
        Ok(c) => c,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let socket = PathBuf::from(&containerd.env["CRI_SOCK"]);
    let image = containerd.env["IMAGE"].clone();
    let channel = kruise_cri::connect(&socket).unwrap();
    let mut images = ImageServiceClient::new(channel.clone());
    images
        .pull_image(cri::PullImageRequest {
            image: Some(cri::ImageSpec {
                image: image.clone(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    let sandbox: PodSandboxIdResponse = call(
        &channel,
        "/runtime.v1.RuntimeService/RunPodSandbox",
        RunPodSandboxRequest {
            config: Some(sandbox_config()),
        },
    )
    .await;
    let sandbox = sandbox.pod_sandbox_id;
    let first = start_app(&channel, &sandbox, &image, 0).await;
    let mut runtime = RuntimeServiceClient::new(channel.clone());
    assert_eq!(
        status(&mut runtime, &first).await.state,
        cri::ContainerState::ContainerRunning as i32
    );

    // The API side: kruise-sim with the CRD, and the request as the webhook fills it.
    let sim = Sim::start(SimConfig::default()).await.unwrap();
    let client = sim.client().unwrap();
    kruise_testkit::sim::install_crds(&client, &[kruise_crr::api::crd::crd().unwrap()]).await;
    let requests: Api<ContainerRecreateRequest> = Api::namespaced(client.clone(), "default");
    let crr = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "ContainerRecreateRequest",
        "metadata": {"name": "recreate-app", "labels": {
            "crr.apps.kruise.io/node-name": NODE, "crr.apps.kruise.io/active": "true",
            "crr.apps.kruise.io/pod-uid": POD_UID}},
        "spec": {"podName": "pod-c",
                 "containers": [{"name": "app", "statusContext": {"containerID": format!("containerd://{first}"), "restartCount": 0}}],
                 "strategy": {"failurePolicy": "Fail", "terminationGracePeriodSeconds": GRACE_SECONDS}},
    }))
    .unwrap();
    let shutdown = CancellationToken::new();
    let agent = tokio::spawn(agent::run(AgentContext {
        client: client.clone(),
        node: NODE.into(),
        cri_socket: socket.clone(),
        shutdown: shutdown.clone(),
    }));
    let asked = Instant::now();
    requests.create(&PostParams::default(), &crr).await.unwrap();

    // Stopped through CRI: SIGTERM ignored, so it exits by SIGKILL at the grace period's end.
    let stopped = eventually("the agent stops app", Duration::from_secs(30), || {
        let mut runtime = runtime.clone();
        let first = first.clone();
        async move {
            let s = status(&mut runtime, &first).await;
            (s.state == cri::ContainerState::ContainerExited as i32).then_some(s)
        }
    })
    .await;
    let took = asked.elapsed();
    assert_eq!(
        stopped.exit_code, 137,
        "killed at the end of the grace period"
    );
    let ran_after_stop = Duration::from_nanos(
        u64::try_from(stopped.finished_at).unwrap() - u64::try_from(stopped.started_at).unwrap(),
    );
    assert!(
        took >= Duration::from_secs(GRACE_SECONDS as u64),
        "stopped after {took:?}"
    );
    assert!(
        ran_after_stop >= Duration::from_secs(GRACE_SECONDS as u64),
        "{ran_after_stop:?}"
    );
    let crr = requests.get("recreate-app").await.unwrap();
    let state = &crr.status.as_ref().unwrap().container_recreate_states[0];
    assert_eq!(
        (state.phase.as_str(), state.is_killed),
        ("Recreating", true)
    );

    // The kubelet's part: the next attempt. Then the controller's: the pod reports it ready.
    let second = start_app(&channel, &sandbox, &image, 1).await;
    let listed = runtime
        .list_containers(cri::ListContainersRequest {
            filter: Some(cri::ContainerFilter {
                label_selector: HashMap::from([(kruise_cri::LABEL_POD_UID.into(), POD_UID.into())]),
                ..Default::default()
            }),
        })
        .await
        .unwrap()
        .into_inner()
        .containers;
    let attempts: Vec<(u32, i32)> = {
        let mut a: Vec<(u32, i32)> = listed
            .iter()
            .map(|c| (c.metadata.as_ref().unwrap().attempt, c.state))
            .collect();
        a.sort();
        a
    };
    assert_eq!(
        attempts,
        [
            (0, cri::ContainerState::ContainerExited as i32),
            (1, cri::ContainerState::ContainerRunning as i32)
        ]
    );
    requests
        .patch_status(
            "recreate-app",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"containerStatusSnapshot": [
                {"name": "app", "ready": true, "restartCount": 1, "containerID": format!("containerd://{second}")}]}})),
        )
        .await
        .unwrap();
    let done = eventually("the request completes", Duration::from_secs(30), || {
        let requests = requests.clone();
        async move {
            requests
                .get("recreate-app")
                .await
                .ok()
                .filter(|c| c.status.as_ref().is_some_and(|s| s.phase == "Completed"))
        }
    })
    .await;
    assert_eq!(
        done.status.unwrap().container_recreate_states[0].phase,
        "Succeeded"
    );
    // The new attempt was left running: the agent killed once.
    assert_eq!(
        status(&mut runtime, &second).await.state,
        cri::ContainerState::ContainerRunning as i32
    );

    shutdown.cancel();
    agent.await.unwrap().unwrap();
    let _: Empty = call(
        &channel,
        "/runtime.v1.RuntimeService/StopPodSandbox",
        PodSandboxIdRequest {
            pod_sandbox_id: sandbox.clone(),
        },
    )
    .await;
    let _: Empty = call(
        &channel,
        "/runtime.v1.RuntimeService/RemovePodSandbox",
        PodSandboxIdRequest {
            pod_sandbox_id: sandbox,
        },
    )
    .await;
    drop(containerd);
}
