//! The Kubernetes Container Runtime Interface (runtime.v1) as kruise-rs's node agents
//! use it: generated gRPC clients and servers for the RPCs in
//! `proto/runtime_v1.proto`, a connector for a runtime's unix socket (containerd's
//! `/run/containerd/containerd.sock` or a kruise-sim node's), and a unix-socket server
//! helper for fake runtimes.

pub mod socket;

use std::future::Future;
use std::path::{Path, PathBuf};

use hyper_util::rt::TokioIo;
use tokio::net::{UnixListener, UnixStream};
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::{Channel, Endpoint, Server, Uri};

/// Generated messages, clients (`runtime_service_client`, `image_service_client`) and
/// servers (`runtime_service_server`, `image_service_server`).
#[allow(clippy::all, clippy::unwrap_used, clippy::expect_used)]
pub mod v1 {
    tonic::include_proto!("runtime.v1");
}

pub use v1::image_service_client::ImageServiceClient;
pub use v1::image_service_server::{ImageService, ImageServiceServer};
pub use v1::runtime_service_client::RuntimeServiceClient;
pub use v1::runtime_service_server::{RuntimeService, RuntimeServiceServer};

/// Labels the kubelet puts on every CRI container; agents find a pod's containers by
/// them (`ListContainers` with a label selector on the pod uid).
pub const LABEL_POD_NAME: &str = "io.kubernetes.pod.name";
pub const LABEL_POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";
pub const LABEL_POD_UID: &str = "io.kubernetes.pod.uid";
pub const LABEL_CONTAINER_NAME: &str = "io.kubernetes.container.name";

/// The CRI API version a runtime reports in `VersionResponse.runtime_api_version`.
pub const API_VERSION: &str = "v1";

/// A gRPC channel to the runtime listening on the unix socket `socket`. The connection
/// is made lazily and re-made after a failure, as tonic channels do.
pub fn connect(socket: impl AsRef<Path>) -> Result<Channel, tonic::transport::Error> {
    let socket: PathBuf = socket.as_ref().to_path_buf();
    // The URI is required by the HTTP/2 layer but never resolved: the connector
    // below dials the socket.
    let endpoint = Endpoint::try_from("http://localhost")?;
    Ok(
        endpoint.connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(socket).await?)) }
        })),
    )
}

/// Listens on the unix socket `socket`, replacing a stale socket file and creating
/// parent directories. Needs a tokio runtime.
pub fn bind_unix(socket: impl AsRef<Path>) -> std::io::Result<UnixListener> {
    let socket = socket.as_ref();
    if let Some(dir) = socket.parent() {
        std::fs::create_dir_all(dir)?;
    }
    match std::fs::remove_file(socket) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    UnixListener::bind(socket)
}

/// Serves `runtime` and `image` on `listener` until `shutdown` completes.
pub async fn serve<R, I>(
    listener: UnixListener,
    runtime: R,
    image: I,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error>
where
    R: RuntimeService,
    I: ImageService,
{
    Server::builder()
        .add_service(RuntimeServiceServer::new(runtime))
        .add_service(ImageServiceServer::new(image))
        .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown)
        .await
}
