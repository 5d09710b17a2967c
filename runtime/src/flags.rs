//! The flags every binary takes (each also an env var), and its subcommands.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::telemetry::LogFormat;

/// Exit code for bad flags or feature gates (as clap uses for usage errors).
pub const EXIT_USAGE: u8 = 2;
/// Exit code for a runtime failure, including loss of leadership (the pod restarts cleanly).
pub const EXIT_FAILURE: u8 = 1;

/// Flags shared by every binary. Each can also be set through the env var named beside it.
#[derive(Args, Clone, Debug)]
pub struct Flags {
    /// Path to a kubeconfig; in-cluster config (or ~/.kube/config) when unset.
    #[arg(long, env = "KUBECONFIG", global = true)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Watch only this namespace; all namespaces when unset.
    #[arg(long, env = "WATCH_NAMESPACE", global = true)]
    pub namespace: Option<String>,
    /// Feature gates, `Name=true,Other=false` (OpenKruise's names; also AllAlpha=, AllBeta=).
    #[arg(long, env = "FEATURE_GATES", default_value = "", global = true)]
    pub feature_gates: String,
    /// Run controllers only while holding the leader lease.
    #[arg(long, env = "LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true", global = true)]
    pub leader_elect: bool,
    /// Namespace of the leader Lease.
    #[arg(
        long,
        env = "LEADER_ELECT_NAMESPACE",
        default_value = "kruise-system",
        global = true
    )]
    pub leader_elect_namespace: String,
    /// Lease name; the binary's name when unset.
    #[arg(long, env = "LEADER_ELECT_ID", global = true)]
    pub leader_elect_id: Option<String>,
    /// How long a lease lasts without renewal (client-go default 15s).
    #[arg(long, env = "LEADER_ELECT_LEASE_DURATION", default_value = "15s", value_parser = parse_duration, global = true)]
    pub leader_elect_lease_duration: Duration,
    /// How long the leader keeps trying to renew before giving up (default 10s).
    #[arg(long, env = "LEADER_ELECT_RENEW_DEADLINE", default_value = "10s", value_parser = parse_duration, global = true)]
    pub leader_elect_renew_deadline: Duration,
    /// Interval between acquire/renew attempts (default 2s).
    #[arg(long, env = "LEADER_ELECT_RETRY_PERIOD", default_value = "2s", value_parser = parse_duration, global = true)]
    pub leader_elect_retry_period: Duration,
    /// Address of the Prometheus `/metrics` endpoint (`:8080` means all interfaces).
    #[arg(long, env = "METRICS_ADDR", default_value = ":8080", value_parser = parse_addr, global = true)]
    pub metrics_addr: SocketAddr,
    /// Address of `/healthz` and `/readyz`.
    #[arg(long, env = "HEALTH_ADDR", default_value = ":8081", value_parser = parse_addr, global = true)]
    pub health_addr: SocketAddr,
    /// Reconciles of different objects run at once, per controller.
    #[arg(long, env = "CONCURRENCY", default_value_t = 3, global = true)]
    pub concurrency: u16,
    /// Log format.
    #[arg(
        long,
        env = "LOG_FORMAT",
        value_enum,
        default_value = "text",
        global = true
    )]
    pub log_format: LogFormat,
    /// Log level or `EnvFilter` directives (`RUST_LOG` overrides).
    #[arg(long, env = "LOG_LEVEL", default_value = "info", global = true)]
    pub log_level: String,
    /// How long in-flight reconciles may take to finish after SIGTERM.
    #[arg(long, env = "SHUTDOWN_TIMEOUT", default_value = "30s", value_parser = parse_duration, global = true)]
    pub shutdown_timeout: Duration,
}

/// Family-specific flags; `NoArgs` when a family has none.
#[derive(Args, Clone, Debug, Default)]
pub struct NoArgs {}

/// The command line of every binary: a subcommand, the shared flags, the family's own.
#[derive(Parser, Debug)]
pub(crate) struct Cli<A: Args> {
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
    #[command(flatten)]
    pub(crate) flags: Flags,
    #[command(flatten)]
    pub(crate) family: A,
}

/// What the binary was asked to do.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    /// Run the controllers (the default).
    Run,
    /// Print this binary's CustomResourceDefinitions as YAML (for the chart or `kubectl apply -f -`).
    Crd,
    /// Print the webhook configurations this binary publishes, without caBundle (for the chart).
    Manifests,
}

/// Parses `150ms`, `2s`, `5m`, `1h`, or a sum such as `1m30s`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .ok_or_else(|| format!("duration {s:?} lacks a unit (ms, s, m, h)"))?;
        let (num, tail) = rest.split_at(digits);
        let value: f64 = num
            .parse()
            .map_err(|_| format!("invalid number in duration {s:?}"))?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_len);
        let secs = match unit {
            "ms" => value / 1000.0,
            "s" => value,
            "m" => value * 60.0,
            "h" => value * 3600.0,
            _ => return Err(format!("unknown unit {unit:?} in duration {s:?}")),
        };
        total += Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())?;
        rest = next;
    }
    Ok(total)
}

/// Parses `host:port`, or `:port` meaning every interface (Go's convention, used by Kruise's flags).
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    let full = if s.starts_with(':') {
        format!("0.0.0.0{s}")
    } else {
        s.to_string()
    };
    full.parse()
        .map_err(|e| format!("invalid address {s:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("150ms"), Ok(Duration::from_millis(150)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0.5s"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("15").is_err());
        assert!(parse_duration("5d").is_err());
    }

    #[test]
    fn addresses() {
        assert_eq!(parse_addr(":8080"), Ok("0.0.0.0:8080".parse().unwrap()));
        assert_eq!(
            parse_addr("127.0.0.1:0"),
            Ok("127.0.0.1:0".parse().unwrap())
        );
        assert!(parse_addr("nope").is_err());
    }

    #[test]
    fn flags_defaults_and_env_style_bools() {
        let cli = Cli::<NoArgs>::try_parse_from(["x"]).unwrap();
        assert!(cli.flags.leader_elect);
        assert_eq!(cli.flags.metrics_addr.port(), 8080);
        assert_eq!(cli.flags.health_addr.port(), 8081);
        assert_eq!(
            cli.flags.leader_elect_lease_duration,
            Duration::from_secs(15)
        );
        assert_eq!(cli.command, None);
        let cli = Cli::<NoArgs>::try_parse_from([
            "x",
            "run",
            "--leader-elect=false",
            "--concurrency",
            "7",
        ])
        .unwrap();
        assert!(!cli.flags.leader_elect);
        assert_eq!(cli.flags.concurrency, 7);
        assert_eq!(cli.command, Some(Command::Run));
    }
}
