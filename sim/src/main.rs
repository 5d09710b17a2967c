//! `kruise-sim up`: run the simulated API server until interrupted.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};

mod families;

/// The families' allocator, which also spends a third less CPU than glibc's on the
/// simulator's churn of JSON values (`cargo bench -p kruise-cloneset`).
#[global_allocator]
static ALLOCATOR: kruise_common::runtime::Allocator = kruise_common::runtime::Allocator;

#[derive(Parser)]
#[command(
    name = "kruise-sim",
    about = "An in-memory Kubernetes API server for kruise-rs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the API server, write a kubeconfig and serve until Ctrl-C / SIGTERM.
    Up {
        /// Port on 127.0.0.1 (0 picks a free one).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Address to bind (default 127.0.0.1).
        #[arg(long, default_value = "127.0.0.1")]
        address: std::net::IpAddr,
        /// Where to write the kubeconfig.
        #[arg(long, default_value = "./kruise-sim.kubeconfig")]
        kubeconfig: PathBuf,
        /// Watch history retained for resuming watches (events).
        #[arg(long, default_value_t = 10_000)]
        watch_history: usize,
        /// Simulated nodes (sim-node-0..N-1) with a scheduler and kubelet; 0 for a
        /// bare API server.
        #[arg(long, default_value_t = 3)]
        nodes: usize,
        /// Kubelet image pull delay (e.g. 50ms, 1s).
        #[arg(long, default_value = "50ms", value_parser = duration)]
        pull_delay: Duration,
        /// Kubelet delay from pulled to running.
        #[arg(long, default_value = "50ms", value_parser = duration)]
        start_delay: Duration,
        /// Kubelet delay from running to ready.
        #[arg(long, default_value = "100ms", value_parser = duration)]
        ready_delay: Duration,
        /// Families to run in-process with their CRDs and webhooks: `all`, `none` or a
        /// comma-separated list (available: cloneset, sidecarset, webhook).
        #[arg(long, default_value = "all")]
        controllers: String,
        /// Serve a fake CRI runtime (containerd's RuntimeService/ImageService subset)
        /// for each node on `<DIR>/<node>.sock`, for node agents.
        #[arg(long)]
        cri_dir: Option<PathBuf>,
    },
}

fn duration(s: &str) -> Result<Duration, String> {
    kruise_sim::cluster::parse_duration(s)
        .ok_or_else(|| format!("invalid duration {s:?} (e.g. 50ms, 2s)"))
}

async fn wait_for_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C")?,
        _ = term.recv() => {}
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Up {
            port,
            address,
            kubeconfig,
            watch_history,
            nodes,
            pull_delay,
            start_delay,
            ready_delay,
            controllers,
            cri_dir,
        } => {
            let families = families::parse(&controllers)?;
            let config = kruise_sim::SimConfig {
                bind: SocketAddr::new(address, port),
                watch_history,
                nodes,
                kubelet: kruise_sim::KubeletTimings {
                    pull_delay,
                    start_delay,
                    ready_delay,
                },
                cri_dir: cri_dir.clone(),
                ..Default::default()
            };
            let sim = kruise_sim::Sim::start(config).await?;
            let path = if kubeconfig.is_absolute() {
                kubeconfig
            } else {
                std::env::current_dir()
                    .context("reading the current directory")?
                    .join(kubeconfig)
            };
            sim.write_kubeconfig(&path)?;
            let shutdown = tokio_util::sync::CancellationToken::new();
            let running = families::start(&sim, &path, &families, &shutdown).await?;
            println!("kruise-sim API server listening on {}", sim.url());
            if !families.is_empty() {
                println!("controllers running in-process: {}", families.join(", "));
            }
            if let Some(dir) = &cri_dir {
                println!(
                    "fake CRI sockets: {}",
                    kruise_sim::cluster::cri::socket_path(dir, "<node>").display()
                );
            }
            println!("export KUBECONFIG={}; kubectl get ns", path.display());
            wait_for_signal().await?;
            eprintln!("kruise-sim: shutting down");
            shutdown.cancel();
            for task in running {
                let _ = task.await;
            }
            sim.shutdown().await;
            Ok(())
        }
    }
}
