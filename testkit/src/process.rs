//! A binary started as one replica against the simulator (a process, or in-process), and
//! what a benchmark reads of a process: its resident memory and CPU time.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// A replica started by [`spawn_replica`], killed when dropped so a failing test leaves
/// nothing running.
pub struct Replica {
    /// The process.
    pub child: std::process::Child,
    /// Where its `/healthz` and `/readyz` answer (127.0.0.1).
    pub health_port: u16,
}

impl Replica {
    /// Kills it and waits until nothing answers on `port` (its admission server's), so
    /// what follows sees it down.
    pub async fn stop(&mut self, port: u16) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        crate::eventually("the replica down", Duration::from_secs(10), || async {
            tokio::net::TcpStream::connect(addr)
                .await
                .is_err()
                .then_some(())
        })
        .await;
    }

    /// Waits until its `/readyz` answers 200 (its caches synced, its webhooks served).
    pub async fn wait_ready(&self, deadline: Duration) {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.health_port));
        crate::eventually("the replica ready", deadline, || async {
            matches!(crate::http_get(addr, "/readyz").await, Ok((200, _))).then_some(())
        })
        .await;
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A binary run in-process, as a task on the current runtime (`Binary::run_argv`), for tests
/// that need its code beside theirs. [`InProcess::stop`] cancels it and waits until it has
/// returned: a replica still running during a real API server's clean-up would publish again
/// the webhook configurations the clean-up removes, and they would outlive it.
pub struct InProcess {
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl InProcess {
    /// Spawns `run(token)`, the binary's run until `token` is cancelled.
    pub fn spawn<F, T, E>(run: impl FnOnce(CancellationToken) -> F) -> Self
    where
        F: std::future::Future<Output = Result<T, E>> + Send + 'static,
        E: std::fmt::Display,
    {
        let shutdown = CancellationToken::new();
        let running = run(shutdown.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = running.await {
                eprintln!("in-process binary: {e:#}");
            }
        });
        InProcess {
            shutdown,
            task: Some(task),
        }
    }

    /// Cancels it and waits (boundedly) until it has returned.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        let Some(task) = self.task.take() else {
            return;
        };
        if tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .is_err()
        {
            panic!("the in-process binary did not stop within 60 s of its shutdown");
        }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Starts a binary built on the harness against `kubeconfig` as a single replica (no leader
/// election), with free metrics/health ports and its admission server on `webhook_port`,
/// reached at 127.0.0.1 with certificates in the `default` namespace.
pub fn spawn_replica(
    bin: &str,
    kubeconfig: &std::path::Path,
    webhook_port: u16,
    extra: &[&str],
    env: &[(&str, String)],
) -> Replica {
    let health_port = crate::free_port();
    let mut cmd = std::process::Command::new(bin);
    cmd.args(replica_args(kubeconfig, webhook_port, health_port))
        .args(extra)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdout(std::process::Stdio::null());
    // KRUISE_TEST_LOGS=1 shows the child's logs (set RUST_LOG for more detail).
    if std::env::var_os("KRUISE_TEST_LOGS").is_none() {
        cmd.stderr(std::process::Stdio::null());
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    Replica {
        child: cmd.spawn().unwrap(),
        health_port,
    }
}

/// The flags of a single replica against `kubeconfig` (no leader election), health on
/// `health_port` and metrics on a free port, its admission server on `webhook_port`, reached
/// at 127.0.0.1 with certificates in the `default` namespace. With the binary's name
/// before them, the command line of an in-process run (`Binary::run_argv`).
pub fn replica_args(
    kubeconfig: &std::path::Path,
    webhook_port: u16,
    health_port: u16,
) -> Vec<String> {
    [
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--leader-elect=false",
        "--metrics-addr",
        &format!("127.0.0.1:{}", crate::free_port()),
        "--health-addr",
        &format!("127.0.0.1:{health_port}"),
        "--webhook-port",
        &webhook_port.to_string(),
        "--webhook-host",
        "127.0.0.1",
        "--webhook-bind-address",
        "127.0.0.1",
        "--webhook-namespace",
        "default",
    ]
    .map(String::from)
    .to_vec()
}

/// VmRSS, with its anonymous (heap, stacks) and file-backed (the binary's pages) parts.
pub fn rss(pid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let mib = |key: &str| status_kib(&status, key) as f64 / 1024.0;
    format!(
        "{:.1} MiB (anonymous {:.1}, file-backed {:.1})",
        mib("VmRSS:"),
        mib("RssAnon:"),
        mib("RssFile:")
    )
}

/// VmRSS in KiB (0 once the process is gone), for peaks sampled during a run.
pub fn vm_rss_kib(pid: u32) -> i64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status_kib(&status, "VmRSS:")
}

/// A `/proc/<pid>/status` field in KiB (0 when absent).
fn status_kib(status: &str, key: &str) -> i64 {
    status
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// [`rss`] once it has stopped moving: two samples a second apart within 256 KiB (or
/// after a minute).
pub async fn settled_rss(pid: u32) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = vm_rss_kib(pid);
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = vm_rss_kib(pid);
        if (now - last).abs() < 256 || Instant::now() > deadline {
            return rss(pid);
        }
        last = now;
    }
}

/// User + system CPU seconds of a process (`pid`, or `self`), from `/proc/<pid>/stat`
/// (clock ticks of 1/100 s).
pub fn cpu_secs(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_memory_and_cpu() {
        let pid = std::process::id();
        assert!(rss(pid).ends_with(')'), "{}", rss(pid));
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        assert!(status_kib(&status, "VmRSS:") > 0);
        // Burn a little CPU so the counter has something to show.
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!(cpu_secs("self") > 0.0);
    }
}
