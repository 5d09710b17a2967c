//! `kruise-playground up`: the simulated cluster of `kruise-sim up` with the registered
//! kruise-rs families (`registry`) running in-process, each as its own
//! binary would: CRDs installed, webhooks served over HTTPS on loopback only
//! (`--webhook-bind-address 127.0.0.1`) and registered by URL, controllers without leader
//! election. `kruise-playground families` lists them.

use clap::{Parser, Subcommand};
use kruise_sim::up::{self, UpFlags};

mod registry;
mod start;
#[cfg(test)]
mod webhook_tests;

/// The families' allocator, which also spends a third less CPU than glibc's on the
/// simulator's churn of JSON values (`cargo bench -p kruise-cloneset`).
#[global_allocator]
static ALLOCATOR: kruise_runtime::Allocator = kruise_runtime::Allocator;

#[derive(Parser)]
#[command(
    name = "kruise-playground",
    about = "The simulated cluster with the kruise-rs families running in-process"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start: the variants' size difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Start the cluster and the families, write a kubeconfig and serve until Ctrl-C /
    /// SIGTERM.
    Up {
        #[command(flatten)]
        cluster: UpFlags,
        /// Families to run in-process with their CRDs and webhooks: `all`, `none` or a
        /// comma-separated list of the names `kruise-playground families` prints.
        #[arg(long, default_value = "all")]
        controllers: String,
        /// Feature gates every family runs with, as OpenKruise's `--feature-gates`
        /// (`Name=true,Other=false`, also `AllAlpha=`/`AllBeta=`).
        #[arg(long, env = "FEATURE_GATES", default_value = "")]
        feature_gates: String,
    },
    /// Print the registered families, one a line: name, binary, CRDs, pod-chain steps
    /// (tab-separated; `-` for none). CI builds each binary and runs `<name>/tests/kubectl-*.sh`.
    Families,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    up::init_logging();
    match Cli::parse().command {
        Command::Families => {
            for family in crate::registry::families()? {
                println!("{}", start::describe(&family));
            }
            Ok(())
        }
        Command::Up {
            cluster,
            controllers,
            feature_gates,
        } => {
            let families = start::choose(crate::registry::families()?, &controllers)?;
            kruise_core::featuregate::FeatureGates::parse(&feature_gates)
                .map_err(|e| anyhow::anyhow!("--feature-gates: {e}"))?;
            let running = cluster.start().await?;
            let names: Vec<&str> = families.iter().map(|f| f.name()).collect();
            let names = names.join(", ");
            let shutdown = tokio_util::sync::CancellationToken::new();
            let tasks = start::start(
                &running.sim,
                &running.kubeconfig,
                families,
                &feature_gates,
                &shutdown,
            )
            .await?;
            println!("{}", running.listening_line());
            if !names.is_empty() {
                println!("controllers running in-process: {names}");
            }
            for line in running.usage_lines() {
                println!("{line}");
            }
            up::wait_for_signal().await?;
            eprintln!("kruise-playground: shutting down");
            shutdown.cancel();
            for task in tasks {
                let _ = task.await;
            }
            running.sim.shutdown().await;
            Ok(())
        }
    }
}
