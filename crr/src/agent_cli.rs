//! `kruise-crr agent`: the node agent as a process (the DaemonSet's command), with the
//! node's name from the downward API (`NODE_NAME`) and the runtime socket found under the
//! host's `/var/run` mounted at `/hostvarrun`, or given.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use kruise_common::family::AgentContext;
use kruise_common::runtime::LogFormat;
use kruise_common::runtime::telemetry::Telemetry;
use tokio_util::sync::CancellationToken;

/// kruise-crr agent: recreates the containers of this node's ContainerRecreateRequests through CRI
#[derive(Parser, Debug)]
#[command(name = "kruise-crr agent")]
pub struct AgentArgs {
    /// The node this agent acts on.
    #[arg(long, env = "NODE_NAME")]
    pub node_name: String,
    /// The CRI socket: absolute, or relative to the host's /var/run mounted at /hostvarrun;
    /// empty: the first runtime socket found there.
    #[arg(long, env = "CRI_SOCKET")]
    pub cri_socket: Option<PathBuf>,
    /// Log line format.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Log level (an EnvFilter directive; RUST_LOG overrides it).
    #[arg(long, default_value = "info")]
    pub log_level: String,
}

/// Runs the agent from `argv` (`argv[0]` the program, `argv[1]` `agent`) until SIGTERM or
/// SIGINT.
pub fn main(argv: Vec<String>) -> ExitCode {
    let args = match AgentArgs::try_parse_from(argv.into_iter().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(async move {
        let telemetry = match Telemetry::init("kruise-crr-agent", args.log_format, &args.log_level)
        {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: {e:#}");
                return ExitCode::from(2);
            }
        };
        let code = match run(args).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!(error = format!("{e:#}"), "exiting");
                ExitCode::FAILURE
            }
        };
        telemetry.shutdown();
        code
    })
}

async fn run(args: AgentArgs) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let client = kube::Client::try_default()
        .await
        .context("building the Kubernetes client")?;
    let shutdown = CancellationToken::new();
    {
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
            match term {
                Ok(mut term) => {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = tokio::signal::ctrl_c() => {}
                    }
                }
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
            shutdown.cancel();
        });
    }
    crate::agent::run(AgentContext {
        client,
        node: args.node_name,
        cri_socket: args.cri_socket.unwrap_or_default(),
        shutdown,
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_comes_from_the_flag_and_the_socket_defaults_to_looking() {
        let args = AgentArgs::try_parse_from(["agent", "--node-name", "n1"]).unwrap();
        assert_eq!(args.node_name, "n1");
        assert_eq!(args.cri_socket, None);
        let args =
            AgentArgs::try_parse_from(["agent", "--node-name", "n1", "--cri-socket", "crio.sock"])
                .unwrap();
        assert_eq!(args.cri_socket, Some(PathBuf::from("crio.sock")));
    }
}
