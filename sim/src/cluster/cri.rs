//! A fake CRI runtime per simulated node: the RuntimeService and ImageService RPCs
//! node agents use (`kruise_cri`'s subset), served on a unix socket per node and
//! answered from the simulated kubelet's container state, so an agent sees the
//! containers the pod statuses describe, and a container it stops is restarted by
//! the kubelet (restartCount+1, new containerID) as on a real node.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kruise_cri::v1;
use tokio::sync::{mpsc, oneshot};
use tonic::{Request, Response, Status};

use super::images::{ImagePulls, NodeImage};

/// What the kubelet knows about one container, in CRI terms.
#[derive(Debug, Clone)]
pub(crate) struct CriContainer {
    /// 64 hex characters (the pod status's containerID without `containerd://`).
    pub id: String,
    pub sandbox_id: String,
    pub name: String,
    pub attempt: u32,
    pub image: String,
    /// The repo digest, as the pod status's imageID.
    pub image_ref: String,
    pub state: v1::ContainerState,
    /// Nanoseconds since the Unix epoch; 0 when not (yet) reached.
    pub created_at: i64,
    pub started_at: i64,
    pub finished_at: i64,
    pub exit_code: i32,
    pub labels: HashMap<String, String>,
}

/// Requests the CRI server sends to the kubelet loop, which owns the runtime state.
pub(crate) enum CriRequest {
    Containers {
        node: String,
        reply: oneshot::Sender<Vec<CriContainer>>,
    },
    /// Stops a running container; the reply is false when no container has the id.
    Stop {
        node: String,
        id: String,
        timeout: i64,
        reply: oneshot::Sender<bool>,
    },
    Images {
        node: String,
        reply: oneshot::Sender<Vec<NodeImage>>,
    },
    AddImage {
        node: String,
        image: String,
        reply: oneshot::Sender<NodeImage>,
    },
    RemoveImage {
        node: String,
        image: String,
        reply: oneshot::Sender<()>,
    },
}

/// The socket of node `node` under `dir`.
pub fn socket_path(dir: &Path, node: &str) -> PathBuf {
    dir.join(format!("{node}.sock"))
}

/// Binds `<dir>/<node>.sock` for each of `nodes` (before returning, so the sockets exist
/// once it does) and serves each node's fake CRI runtime there, answered by the kubelet
/// behind `tx`, until `stop` turns true.
pub(crate) fn serve_sockets(
    dir: &Path,
    nodes: &[String],
    tx: &mpsc::Sender<CriRequest>,
    pull_delay: Duration,
    pulls: &ImagePulls,
    stop: &tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    use anyhow::Context as _;
    let mut tasks = Vec::new();
    for node in nodes {
        let socket = socket_path(dir, node);
        let runtime = NodeRuntime {
            node: node.clone(),
            tx: tx.clone(),
            pull_delay,
            pulls: pulls.clone(),
        };
        let mut stop = stop.clone();
        let shutdown = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        let listener = kruise_cri::bind_unix(&socket)
            .with_context(|| format!("binding the fake CRI socket {}", socket.display()))?;
        tasks.push(tokio::spawn(async move {
            let serve = kruise_cri::serve(listener, runtime.clone(), runtime, shutdown);
            if let Err(e) = serve.await {
                tracing::warn!(error = %e, socket = %socket.display(), "fake CRI server stopped");
            }
        }));
    }
    Ok(tasks)
}

/// The RuntimeService and ImageService of one simulated node.
#[derive(Clone)]
pub(crate) struct NodeRuntime {
    pub node: String,
    pub tx: mpsc::Sender<CriRequest>,
    pub pull_delay: Duration,
    /// Per-image latencies and failures, over `pull_delay`.
    pub pulls: ImagePulls,
}

impl NodeRuntime {
    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> CriRequest,
    ) -> Result<T, Status> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(make(reply))
            .await
            .map_err(|_| Status::unavailable("the simulated kubelet has stopped"))?;
        rx.await
            .map_err(|_| Status::unavailable("the simulated kubelet has stopped"))
    }

    async fn containers(&self) -> Result<Vec<CriContainer>, Status> {
        let node = self.node.clone();
        self.ask(|reply| CriRequest::Containers { node, reply })
            .await
    }

    async fn container(&self, id: &str) -> Result<CriContainer, Status> {
        if id.is_empty() {
            return Err(Status::invalid_argument("ContainerId should not be empty"));
        }
        // containerd accepts any unique prefix of an id.
        let mut found: Vec<CriContainer> = self
            .containers()
            .await?
            .into_iter()
            .filter(|c| c.id.starts_with(id))
            .collect();
        match found.len() {
            1 => Ok(found.remove(0)),
            0 => Err(Status::not_found(format!(
                "an error occurred when try to find container \"{id}\": not found"
            ))),
            _ => Err(Status::invalid_argument(format!(
                "container id \"{id}\" is ambiguous"
            ))),
        }
    }

    async fn images(&self) -> Result<Vec<NodeImage>, Status> {
        let node = self.node.clone();
        self.ask(|reply| CriRequest::Images { node, reply }).await
    }
}

fn image_spec(image: &str) -> v1::ImageSpec {
    v1::ImageSpec {
        image: image.to_string(),
        ..Default::default()
    }
}

fn to_cri_image(i: &NodeImage) -> v1::Image {
    v1::Image {
        id: i.id.clone(),
        repo_tags: vec![i.repo_tag.clone()],
        repo_digests: vec![i.repo_digest.clone()],
        size: i.size,
        spec: Some(image_spec(&i.id)),
        ..Default::default()
    }
}

fn to_cri_container(c: &CriContainer) -> v1::Container {
    v1::Container {
        id: c.id.clone(),
        pod_sandbox_id: c.sandbox_id.clone(),
        metadata: Some(v1::ContainerMetadata {
            name: c.name.clone(),
            attempt: c.attempt,
        }),
        image: Some(image_spec(&c.image)),
        image_ref: c.image_ref.clone(),
        state: c.state as i32,
        created_at: c.created_at,
        labels: c.labels.clone(),
        annotations: HashMap::new(),
        image_id: c.image_ref.clone(),
    }
}

/// The output of a command "run" in a simulated container: `true`, `false`,
/// `exit N`, `echo ...` and `sh -c '<one of those>'` behave as in a shell (`sleep N` takes
/// its time, in `exec_sync`); anything else succeeds with no output.
fn fake_exec(cmd: &[String]) -> (Vec<u8>, i32) {
    let line = match cmd {
        [sh, flag, script, ..] if (sh.ends_with("sh")) && flag == "-c" => script.clone(),
        _ => cmd.join(" "),
    };
    let mut words = line.split_whitespace();
    match words.next() {
        Some("false") => (Vec::new(), 1),
        Some("exit") => (
            Vec::new(),
            words.next().and_then(|n| n.parse().ok()).unwrap_or(0),
        ),
        Some("echo") => {
            let mut out = words.collect::<Vec<_>>().join(" ").into_bytes();
            out.push(b'\n');
            (out, 0)
        }
        _ => (Vec::new(), 0),
    }
}

#[tonic::async_trait]
impl kruise_cri::RuntimeService for NodeRuntime {
    async fn version(
        &self,
        _req: Request<v1::VersionRequest>,
    ) -> Result<Response<v1::VersionResponse>, Status> {
        Ok(Response::new(v1::VersionResponse {
            version: "0.1.0".into(),
            runtime_name: "kruise-sim".into(),
            runtime_version: env!("CARGO_PKG_VERSION").into(),
            runtime_api_version: kruise_cri::API_VERSION.into(),
        }))
    }

    async fn stop_container(
        &self,
        req: Request<v1::StopContainerRequest>,
    ) -> Result<Response<v1::StopContainerResponse>, Status> {
        let req = req.into_inner();
        let c = self.container(&req.container_id).await?;
        if c.state == v1::ContainerState::ContainerRunning {
            let (node, id) = (self.node.clone(), c.id.clone());
            let timeout = req.timeout;
            self.ask(|reply| CriRequest::Stop {
                node,
                id,
                timeout,
                reply,
            })
            .await?;
        }
        Ok(Response::new(v1::StopContainerResponse {}))
    }

    async fn list_containers(
        &self,
        req: Request<v1::ListContainersRequest>,
    ) -> Result<Response<v1::ListContainersResponse>, Status> {
        let filter = req.into_inner().filter.unwrap_or_default();
        let containers = self
            .containers()
            .await?
            .iter()
            .filter(|c| filter.id.is_empty() || c.id.starts_with(&filter.id))
            .filter(|c| filter.pod_sandbox_id.is_empty() || c.sandbox_id == filter.pod_sandbox_id)
            .filter(|c| filter.state.is_none_or(|s| s.state == c.state as i32))
            .filter(|c| {
                filter
                    .label_selector
                    .iter()
                    .all(|(k, v)| c.labels.get(k) == Some(v))
            })
            .map(to_cri_container)
            .collect();
        Ok(Response::new(v1::ListContainersResponse { containers }))
    }

    async fn container_status(
        &self,
        req: Request<v1::ContainerStatusRequest>,
    ) -> Result<Response<v1::ContainerStatusResponse>, Status> {
        let c = self.container(&req.into_inner().container_id).await?;
        let reason = match c.state {
            v1::ContainerState::ContainerExited if c.exit_code == 0 => "Completed",
            v1::ContainerState::ContainerExited => "Error",
            _ => "",
        };
        let status = v1::ContainerStatus {
            id: c.id.clone(),
            metadata: Some(v1::ContainerMetadata {
                name: c.name.clone(),
                attempt: c.attempt,
            }),
            state: c.state as i32,
            created_at: c.created_at,
            started_at: c.started_at,
            finished_at: c.finished_at,
            exit_code: c.exit_code,
            image: Some(image_spec(&c.image)),
            image_ref: c.image_ref.clone(),
            reason: reason.into(),
            labels: c.labels.clone(),
            image_id: c.image_ref.clone(),
            ..Default::default()
        };
        Ok(Response::new(v1::ContainerStatusResponse {
            status: Some(status),
            info: HashMap::new(),
        }))
    }

    async fn exec_sync(
        &self,
        req: Request<v1::ExecSyncRequest>,
    ) -> Result<Response<v1::ExecSyncResponse>, Status> {
        let req = req.into_inner();
        let c = self.container(&req.container_id).await?;
        if c.state != v1::ContainerState::ContainerRunning {
            return Err(Status::failed_precondition(format!(
                "container {} is not running",
                c.id
            )));
        }
        // A command that only sleeps takes its time, as a preStop hook run through the
        // runtime does; past the request's timeout the runtime gives up, as containerd does.
        if let Some(runs) = super::sleeps_for(&req.cmd) {
            let timeout = u64::try_from(req.timeout)
                .ok()
                .filter(|t| *t > 0)
                .map(Duration::from_secs);
            match timeout {
                Some(timeout) if runs > timeout => {
                    tokio::time::sleep(timeout).await;
                    return Err(Status::deadline_exceeded(format!(
                        "failed to exec in container: timeout {}s exceeded: context deadline exceeded",
                        timeout.as_secs()
                    )));
                }
                _ => tokio::time::sleep(runs).await,
            }
        }
        let (stdout, exit_code) = fake_exec(&req.cmd);
        Ok(Response::new(v1::ExecSyncResponse {
            stdout,
            stderr: Vec::new(),
            exit_code,
        }))
    }
}

#[tonic::async_trait]
impl kruise_cri::ImageService for NodeRuntime {
    async fn list_images(
        &self,
        req: Request<v1::ListImagesRequest>,
    ) -> Result<Response<v1::ListImagesResponse>, Status> {
        let wanted = req
            .into_inner()
            .filter
            .and_then(|f| f.image)
            .map(|i| i.image)
            .filter(|i| !i.is_empty());
        let images = self
            .images()
            .await?
            .iter()
            .filter(|i| wanted.as_deref().is_none_or(|w| i.matches(w)))
            .map(to_cri_image)
            .collect();
        Ok(Response::new(v1::ListImagesResponse { images }))
    }

    async fn image_status(
        &self,
        req: Request<v1::ImageStatusRequest>,
    ) -> Result<Response<v1::ImageStatusResponse>, Status> {
        let wanted = req.into_inner().image.map(|i| i.image).unwrap_or_default();
        // An absent image is not an error: the response's image is unset.
        let image = self
            .images()
            .await?
            .iter()
            .find(|i| i.matches(&wanted))
            .map(to_cri_image);
        Ok(Response::new(v1::ImageStatusResponse {
            image,
            info: HashMap::new(),
        }))
    }

    async fn pull_image(
        &self,
        req: Request<v1::PullImageRequest>,
    ) -> Result<Response<v1::PullImageResponse>, Status> {
        let image = req.into_inner().image.map(|i| i.image).unwrap_or_default();
        if image.trim().is_empty() {
            return Err(Status::invalid_argument(
                "image reference must not be empty",
            ));
        }
        let how = self.pulls.of(&image);
        tokio::time::sleep(how.delay.unwrap_or(self.pull_delay)).await;
        if let Some(message) = how.failure {
            // containerd's wording; nothing is added to the node.
            return Err(Status::unknown(format!(
                "failed to pull and unpack image \"{}\": {message}",
                NodeImage::of(&image).repo_tag
            )));
        }
        let node = self.node.clone();
        let pulled = self
            .ask(|reply| CriRequest::AddImage { node, image, reply })
            .await?;
        Ok(Response::new(v1::PullImageResponse {
            image_ref: pulled.id,
        }))
    }

    async fn remove_image(
        &self,
        req: Request<v1::RemoveImageRequest>,
    ) -> Result<Response<v1::RemoveImageResponse>, Status> {
        let image = req.into_inner().image.map(|i| i.image).unwrap_or_default();
        // Idempotent: removing an absent image succeeds, as the CRI requires.
        let node = self.node.clone();
        self.ask(|reply| CriRequest::RemoveImage { node, image, reply })
            .await?;
        Ok(Response::new(v1::RemoveImageResponse {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn exec_commands() {
        assert_eq!(
            fake_exec(&cmd(&["echo", "hi", "there"])),
            (b"hi there\n".to_vec(), 0)
        );
        assert_eq!(fake_exec(&cmd(&["false"])).1, 1);
        assert_eq!(fake_exec(&cmd(&["sh", "-c", "exit 3"])).1, 3);
        assert_eq!(fake_exec(&cmd(&["/bin/sh", "-c", "true"])).1, 0);
        assert_eq!(fake_exec(&cmd(&["cat", "/etc/hostname"])), (Vec::new(), 0));
    }
}
