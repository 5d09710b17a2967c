//! `up`: a simulated cluster served until interrupted, with a kubeconfig written for
//! kubectl. The flags and the start-up are shared by `kruise-sim up` (the bare cluster) and
//! `kruise-playground up` (the cluster with the kruise-rs families running in-process).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;

use crate::{ImagePull, ImagePulls, KubeletTimings, Sim, SimConfig};

/// The simulated cluster's flags.
#[derive(clap::Args, Debug, Clone)]
pub struct UpFlags {
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Address to bind (default 127.0.0.1).
    #[arg(long, default_value = "127.0.0.1")]
    pub address: std::net::IpAddr,
    /// Where to write the kubeconfig.
    #[arg(long, default_value = "./kruise-sim.kubeconfig")]
    pub kubeconfig: PathBuf,
    /// Watch history retained for resuming watches (events).
    #[arg(long, default_value_t = 10_000)]
    pub watch_history: usize,
    /// Simulated nodes (sim-node-0..N-1) with a scheduler and kubelet; 0 for a
    /// bare API server.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Kubelet image pull delay (e.g. 50ms, 1s).
    #[arg(long, default_value = "50ms", value_parser = duration)]
    pub pull_delay: Duration,
    /// One image's pull latency or failure, repeatable: `IMAGE=DURATION` (`nginx:1.25=2s`)
    /// or `IMAGE=fail:MESSAGE`; for the kubelet and the fake CRI.
    #[arg(long = "image-pull", value_name = "IMAGE=DURATION|IMAGE=fail:MESSAGE", value_parser = ImagePull::parse_flag)]
    pub image_pulls: Vec<(String, ImagePull)>,
    /// Kubelet delay from pulled to running.
    #[arg(long, default_value = "50ms", value_parser = duration)]
    pub start_delay: Duration,
    /// Kubelet delay from running to ready.
    #[arg(long, default_value = "100ms", value_parser = duration)]
    pub ready_delay: Duration,
    /// Serve a fake CRI runtime (containerd's RuntimeService/ImageService subset)
    /// for each node on `<DIR>/<node>.sock`, for node agents.
    #[arg(long)]
    pub cri_dir: Option<PathBuf>,
    /// How long an Event lives after its last write (kube-apiserver's --event-ttl).
    #[arg(long, default_value = "1h", value_parser = duration)]
    pub event_ttl: Duration,
    /// Authorize requests with a bearer token by the stored Roles, ClusterRoles and
    /// bindings, answering 403 as kube-apiserver does; the token is the user's name
    /// (`system:serviceaccount:<ns>:<name>` for a ServiceAccount). Requests without a
    /// token (the written kubeconfig's) are allowed.
    #[arg(long)]
    pub authorize: bool,
}

pub(crate) fn duration(s: &str) -> Result<Duration, String> {
    crate::cluster::parse_duration(s)
        .ok_or_else(|| format!("invalid duration {s:?} (e.g. 50ms, 2s)"))
}

/// A started cluster and where its kubeconfig is.
pub struct Up {
    /// The simulator.
    pub sim: Sim,
    /// The kubeconfig written for it (absolute).
    pub kubeconfig: PathBuf,
}

/// The pull latencies and failures `--image-pull` flags name.
pub fn image_pulls(flags: &[(String, ImagePull)]) -> ImagePulls {
    flags
        .iter()
        .fold(ImagePulls::default(), |pulls, (image, pull)| {
            pulls.with(image, pull.clone())
        })
}

impl UpFlags {
    /// The simulator these flags describe.
    pub fn config(&self) -> SimConfig {
        let image_pulls = image_pulls(&self.image_pulls);
        SimConfig {
            bind: SocketAddr::new(self.address, self.port),
            watch_history: self.watch_history,
            nodes: self.nodes,
            kubelet: KubeletTimings {
                pull_delay: self.pull_delay,
                start_delay: self.start_delay,
                ready_delay: self.ready_delay,
            },
            image_pulls,
            cri_dir: self.cri_dir.clone(),
            event_ttl: self.event_ttl,
            authorize: self.authorize,
            ..Default::default()
        }
    }

    /// Starts the simulator and writes its kubeconfig.
    pub async fn start(&self) -> anyhow::Result<Up> {
        let sim = Sim::start(self.config()).await?;
        let kubeconfig = if self.kubeconfig.is_absolute() {
            self.kubeconfig.clone()
        } else {
            std::env::current_dir()
                .context("reading the current directory")?
                .join(&self.kubeconfig)
        };
        sim.write_kubeconfig(&kubeconfig)?;
        Ok(Up { sim, kubeconfig })
    }
}

impl Up {
    /// Where the API server listens (printed first).
    pub fn listening_line(&self) -> String {
        format!("kruise-sim API server listening on {}", self.sim.url())
    }

    /// Where the fake CRI sockets are, and how to reach the cluster with kubectl (printed
    /// last: scenarios wait for the `export KUBECONFIG=` line).
    pub fn usage_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(dir) = &self.sim.shared().config.cri_dir {
            lines.push(format!(
                "fake CRI sockets: {}",
                crate::cluster::cri::socket_path(dir, "<node>").display()
            ));
        }
        lines.push(format!(
            "export KUBECONFIG={}; kubectl get ns",
            self.kubeconfig.display()
        ));
        lines
    }
}

/// Logs to stderr, at `info` unless `RUST_LOG` says otherwise.
pub fn init_logging() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
}

/// Returns on Ctrl-C or SIGTERM.
pub async fn wait_for_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C")?,
        _ = term.recv() => {}
    }
    Ok(())
}
