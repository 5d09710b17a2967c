//! The fake CRI runtime per simulated node: a node agent talking to
//! `<cri_dir>/<node>.sock` sees the containers the pod statuses describe, and a
//! container it stops is restarted by the kubelet, as on a real node.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;
use kruise_cri::v1::{self, ContainerState};
use kruise_cri::{ImageServiceClient, RuntimeServiceClient};
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::common::{eventually, sim_with};

fn container_status(p: &Pod, name: &str) -> Option<(String, i32, bool)> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == name)
        .map(|c| {
            (
                c.container_id.clone().unwrap_or_default(),
                c.restart_count,
                c.ready,
            )
        })
}

fn image(name: &str) -> Option<v1::ImageSpec> {
    Some(v1::ImageSpec {
        image: name.into(),
        ..Default::default()
    })
}

#[tokio::test]
async fn stop_container_is_restarted_by_the_kubelet() {
    let dir = std::env::temp_dir().join(format!("kruise-sim-cri-{}", std::process::id()));
    let sim = sim_with(kruise_sim::SimConfig {
        nodes: 1,
        cri_dir: Some(dir.clone()),
        ..Default::default()
    })
    .await;
    let socket = sim.cri_socket("sim-node-0").unwrap();
    assert!(
        socket.exists(),
        "{} exists once the sim has started",
        socket.display()
    );
    let pods: Api<Pod> = Api::namespaced(sim.client().unwrap(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"containers": [
            {"name": "app", "image": "nginx:1.25"},
            {"name": "sidecar", "image": "busybox:1.36"},
        ]},
    }))
    .unwrap();
    let uid = pods
        .create(&PostParams::default(), &pod)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let before = eventually(5, "web Ready", || async {
        let p = pods.get("web").await.ok()?;
        let ready = container_status(&p, "app")?.2 && container_status(&p, "sidecar")?.2;
        ready.then_some(p)
    })
    .await;
    let (app_id, _, _) = container_status(&before, "app").unwrap();
    let (sidecar_id, _, _) = container_status(&before, "sidecar").unwrap();

    let channel = kruise_cri::connect(&socket).unwrap();
    let mut runtime = RuntimeServiceClient::new(channel.clone());
    let mut images = ImageServiceClient::new(channel);
    let version = runtime
        .version(v1::VersionRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(version.runtime_api_version, "v1");

    // The pod's containers, found as agents find them: by the pod-uid label.
    let by_pod = v1::ListContainersRequest {
        filter: Some(v1::ContainerFilter {
            label_selector: HashMap::from([(kruise_cri::LABEL_POD_UID.to_string(), uid.clone())]),
            ..Default::default()
        }),
    };
    let listed = runtime
        .list_containers(by_pod.clone())
        .await
        .unwrap()
        .into_inner()
        .containers;
    assert_eq!(listed.len(), 2);
    let app = listed
        .iter()
        .find(|c| c.metadata.as_ref().unwrap().name == "app")
        .unwrap();
    assert_eq!(format!("containerd://{}", app.id), app_id);
    assert_eq!(app.state, ContainerState::ContainerRunning as i32);
    assert_eq!(app.labels[kruise_cri::LABEL_POD_NAME], "web");
    assert_eq!(app.labels[kruise_cri::LABEL_CONTAINER_NAME], "app");
    assert!(app.image_ref.starts_with("docker.io/library/nginx@sha256:"));

    let out = runtime
        .exec_sync(v1::ExecSyncRequest {
            container_id: app.id.clone(),
            cmd: vec!["echo".into(), "hello".into()],
            timeout: 5,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((out.stdout.as_slice(), out.exit_code), (&b"hello\n"[..], 0));

    // Stopping the app container: the kubelet restarts it alone.
    runtime
        .stop_container(v1::StopContainerRequest {
            container_id: app.id.clone(),
            timeout: 30,
        })
        .await
        .unwrap();
    let after = eventually(5, "app restarted and Ready", || async {
        let p = pods.get("web").await.ok()?;
        let (_, restarts, ready) = container_status(&p, "app")?;
        (restarts == 1 && ready).then_some(p)
    })
    .await;
    let (new_app_id, _, _) = container_status(&after, "app").unwrap();
    assert_ne!(new_app_id, app_id, "the restarted container has a new id");
    assert_eq!(
        container_status(&after, "sidecar").unwrap(),
        (sidecar_id, 0, true)
    );
    assert_eq!(after.metadata.uid.as_deref(), Some(uid.as_str()));
    let terminated = after
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0]
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .unwrap();
    assert_eq!(terminated.container_id.as_deref(), Some(app_id.as_str()));

    // The runtime keeps the stopped container as exited.
    let old = runtime
        .container_status(v1::ContainerStatusRequest {
            container_id: app.id.clone(),
            verbose: false,
        })
        .await
        .unwrap()
        .into_inner()
        .status
        .unwrap();
    assert_eq!(old.state, ContainerState::ContainerExited as i32);
    assert!(old.finished_at >= old.started_at && old.started_at > 0);
    let missing = runtime
        .container_status(v1::ContainerStatusRequest {
            container_id: "f".repeat(64),
            verbose: false,
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound);

    // Images: what the kubelet pulled, plus PullImage / RemoveImage.
    let listed = images
        .list_images(v1::ListImagesRequest::default())
        .await
        .unwrap()
        .into_inner()
        .images;
    let tags: Vec<&str> = listed
        .iter()
        .flat_map(|i| i.repo_tags.iter().map(String::as_str))
        .collect();
    assert!(tags.contains(&"docker.io/library/nginx:1.25"), "{tags:?}");
    assert!(tags.contains(&"docker.io/library/busybox:1.36"), "{tags:?}");
    let pulled = images
        .pull_image(v1::PullImageRequest {
            image: image("redis:7"),
            auth: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(pulled.image_ref.starts_with("sha256:"));
    let status = images
        .image_status(v1::ImageStatusRequest {
            image: image("docker.io/library/redis:7"),
            verbose: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.image.unwrap().id, pulled.image_ref);
    images
        .remove_image(v1::RemoveImageRequest {
            image: image(&pulled.image_ref),
        })
        .await
        .unwrap();
    let gone = images
        .image_status(v1::ImageStatusRequest {
            image: image("redis:7"),
            verbose: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(gone.image.is_none(), "a removed image has no status");
    // Removing it again is not an error.
    images
        .remove_image(v1::RemoveImageRequest {
            image: image("redis:7"),
        })
        .await
        .unwrap();
    sim.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// Seconds from now until pod `name` has every container running.
/// Seconds from creating a pod of `image` on `node` (with `imagePullPolicy` `policy`, if
/// any) to its container running.
async fn seconds_until_running(
    pods: &Api<Pod>,
    name: &str,
    node: &str,
    image: &str,
    policy: Option<&str>,
) -> f64 {
    let mut container = json!({"name": "app", "image": image});
    if let Some(policy) = policy {
        container["imagePullPolicy"] = json!(policy);
    }
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"nodeName": node, "containers": [container]},
    }))
    .unwrap();
    let started = std::time::Instant::now();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    eventually(20, "the pod running", || async {
        let p = pods.get(name).await.ok()?;
        let running = p
            .status?
            .container_statuses?
            .iter()
            .all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()));
        running.then_some(())
    })
    .await;
    started.elapsed().as_secs_f64()
}

#[tokio::test]
async fn per_image_pull_latency_and_failures() {
    let dir = std::env::temp_dir().join(format!("kruise-sim-pulls-{}", std::process::id()));
    let slow = std::time::Duration::from_secs(3);
    let sim = sim_with(kruise_sim::SimConfig {
        nodes: 2,
        cri_dir: Some(dir.clone()),
        image_pulls: kruise_sim::ImagePulls::default()
            .delay("registry.local/app:v2", slow)
            .fail("registry.local/app:missing", "not found"),
        ..Default::default()
    })
    .await;
    let channel = kruise_cri::connect(sim.cri_socket("sim-node-0").unwrap()).unwrap();
    let mut images = ImageServiceClient::new(channel);

    // An agent's pull of the slow image takes its latency.
    let started = std::time::Instant::now();
    images
        .pull_image(v1::PullImageRequest {
            image: image("registry.local/app:v2"),
            auth: None,
        })
        .await
        .unwrap();
    assert!(started.elapsed() >= slow, "took {:?}", started.elapsed());

    // A failing image fails with containerd's wording and is not on the node after.
    let failed = images
        .pull_image(v1::PullImageRequest {
            image: image("registry.local/app:missing"),
            auth: None,
        })
        .await
        .unwrap_err();
    assert_eq!(failed.code(), tonic::Code::Unknown);
    assert_eq!(
        failed.message(),
        "failed to pull and unpack image \"registry.local/app:missing\": not found"
    );
    let missing = images
        .image_status(v1::ImageStatusRequest {
            image: image("registry.local/app:missing"),
            verbose: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(missing.image.is_none());

    // A pod of the pre-pulled image starts without the pull; on the other node it pays it.
    let pods: Api<Pod> = Api::namespaced(sim.client().unwrap(), "default");
    let app = "registry.local/app:v2";
    let warm = seconds_until_running(&pods, "warm", "sim-node-0", app, None).await;
    let cold = seconds_until_running(&pods, "cold", "sim-node-1", app, None).await;
    assert!(cold >= slow.as_secs_f64(), "cold start {cold:.2}s");
    assert!(warm < 2.0, "warm start {warm:.2}s, the 3s pull skipped");
    // `Always` pulls, but an image already there costs the manifest round trip only.
    let always = seconds_until_running(&pods, "always", "sim-node-0", app, Some("Always")).await;
    assert!(always < 2.0, "Always on a present image {always:.2}s");
    sim.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}
