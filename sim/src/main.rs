//! `kruise-sim up`: the bare simulated cluster (API server, scheduler, kubelets), served until
//! interrupted. `kruise-playground up` is the same cluster with the kruise-rs families
//! running in-process.

use clap::{Parser, Subcommand};
use kruise_sim::client_nodes::{self, NodesFlags};
use kruise_sim::up::{self, UpFlags};

/// jemalloc, as the kruise-rs binaries have: it spends a third less CPU than glibc's malloc
/// on the simulator's churn of JSON values (`cargo bench -p kruise-cloneset`).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

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
    Up(UpFlags),
    /// Run simulated nodes (Node objects, Leases, kubelet, fake CRI) against an existing
    /// API server, the way kwok does, until Ctrl-C / SIGTERM.
    Nodes(NodesFlags),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    up::init_logging();
    let flags = match Cli::parse().command {
        Command::Up(flags) => flags,
        Command::Nodes(flags) => return nodes(&flags).await,
    };
    let running = flags.start().await?;
    println!("{}", running.listening_line());
    for line in running.usage_lines() {
        println!("{line}");
    }
    up::wait_for_signal().await?;
    eprintln!("kruise-sim: shutting down");
    running.sim.shutdown().await;
    Ok(())
}

async fn nodes(flags: &NodesFlags) -> anyhow::Result<()> {
    let nodes = client_nodes::start(flags).await?;
    // Printed last, once the nodes are Ready: scripts wait for this line.
    println!(
        "kruise-sim nodes: {} Ready ({} .. {})",
        nodes.names.len(),
        nodes.names.first().map_or("", String::as_str),
        nodes.names.last().map_or("", String::as_str),
    );
    up::wait_for_signal().await?;
    eprintln!("kruise-sim: stopping the nodes");
    nodes.shutdown().await;
    Ok(())
}
