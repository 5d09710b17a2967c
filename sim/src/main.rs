//! `kruise-sim up`: the bare simulated cluster (API server, scheduler, kubelets), served until
//! interrupted. `kruise-playground up` is the same cluster with the kruise-rs families
//! running in-process.

use clap::{Parser, Subcommand};
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
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    up::init_logging();
    let Command::Up(flags) = Cli::parse().command;
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
