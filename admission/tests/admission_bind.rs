//! Where the admission server listens (`--webhook-bind-address`): every interface by
//! default, as a pod needs; only loopback when asked, so a webhook registered by a
//! `127.0.0.1` URL is not reachable from the rest of the network.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use clap::Parser;
use kruise_admission::AdmissionRoutes;
use kruise_admission::publish::Owned;
use kruise_admission::runner::{self, AdmissionFlags};
use kruise_runtime::Readiness;
use kruise_sim::{Sim, SimConfig};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    admission: AdmissionFlags,
}

#[test]
fn bind_address_flag_defaults_to_every_interface() {
    let default = Cli::try_parse_from(["kruise-test"]).unwrap();
    assert_eq!(
        default.admission.webhook_bind_address,
        "0.0.0.0".parse::<IpAddr>().unwrap()
    );
    let loopback =
        Cli::try_parse_from(["kruise-test", "--webhook-bind-address", "127.0.0.1"]).unwrap();
    assert_eq!(
        loopback.admission.webhook_bind_address,
        "127.0.0.1".parse::<IpAddr>().unwrap()
    );
    let v6 = Cli::try_parse_from(["kruise-test", "--webhook-bind-address", "::1"]).unwrap();
    assert_eq!(
        v6.admission.webhook_bind_address,
        "::1".parse::<IpAddr>().unwrap()
    );
    let err = Cli::try_parse_from(["kruise-test", "--webhook-bind-address", "localhost"])
        .err()
        .unwrap();
    assert!(err.to_string().contains("webhook-bind-address"), "{err}");
}

/// A non-loopback IPv4 address of this machine (`hostname -I`), if it has one.
fn other_local_address() -> Option<IpAddr> {
    let out = std::process::Command::new("hostname")
        .arg("-I")
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|a| a.parse::<IpAddr>().ok())
        .find(|a| a.is_ipv4() && !a.is_loopback())
}

/// Certificates for `127.0.0.1` in a cert-manager style directory.
struct Running {
    port: u16,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

/// Runs the admission runner as a binary does, on `bind` (None: the flag's default).
async fn run(client: &kube::Client, dir: &std::path::Path, bind: Option<&str>) -> Running {
    let port = support::free_port();
    let mut argv = vec![
        "kruise-test".to_string(),
        "--webhook-port".into(),
        port.to_string(),
        "--webhook-cert-dir".into(),
        dir.display().to_string(),
        "--webhook-host".into(),
        "127.0.0.1".into(),
        "--webhook-namespace".into(),
        "default".into(),
    ];
    if let Some(bind) = bind {
        argv.extend(["--webhook-bind-address".to_string(), bind.to_string()]);
    }
    let flags = Cli::try_parse_from(argv).unwrap().admission;
    let stop = CancellationToken::new();
    let task = tokio::spawn(runner::run(
        client.clone(),
        "kruise-bind-test",
        flags,
        AdmissionRoutes::new().handler(support::AllowAll("mpod.bind.test.kruise.io")),
        Owned {
            mutating: Some(format!("bind-test-{port}")),
            validating: None,
            crds: Vec::new(),
        },
        Readiness::default(),
        stop.clone(),
    ));
    Running { port, stop, task }
}

async fn connects(addr: SocketAddr) -> bool {
    matches!(
        tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(addr)).await,
        Ok(Ok(_))
    )
}

#[tokio::test]
async fn a_loopback_bind_is_not_reachable_on_other_addresses() {
    let sim = Sim::start(SimConfig::default()).await.unwrap();
    let client = sim.client().unwrap();
    let dir = std::env::temp_dir().join(format!("kruise-bind-certs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = support::write_certs(&dir, "bind-test");
    let review = support::review("", "v1", "Pod", "pods", json!({"metadata": {"name": "p"}}));
    let other = other_local_address();

    // The default listens everywhere: on loopback and, when the machine has one, on its
    // other address (so the refusal below is the bind address at work, not a firewall).
    let everywhere = run(&client, &dir, None).await;
    let loopback: SocketAddr = ([127, 0, 0, 1], everywhere.port).into();
    support::wait_serving(
        "the default bind serving on loopback",
        loopback,
        &ca.cert_pem,
        &review,
    )
    .await;
    if let Some(ip) = other {
        assert!(
            connects(SocketAddr::new(ip, everywhere.port)).await,
            "the default bind is reachable on {ip}"
        );
    }
    everywhere.stop.cancel();
    everywhere.task.await.unwrap().unwrap();

    let local = run(&client, &dir, Some("127.0.0.1")).await;
    let loopback: SocketAddr = ([127, 0, 0, 1], local.port).into();
    support::wait_serving(
        "the loopback bind serving on 127.0.0.1",
        loopback,
        &ca.cert_pem,
        &review,
    )
    .await;
    match other {
        Some(ip) => assert!(
            !connects(SocketAddr::new(ip, local.port)).await,
            "a server bound to 127.0.0.1 must not accept connections on {ip}"
        ),
        None => eprintln!(
            "skipping the negative check: this machine has no non-loopback IPv4 address (hostname -I)"
        ),
    }
    local.stop.cancel();
    local.task.await.unwrap().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    sim.shutdown().await;
}
