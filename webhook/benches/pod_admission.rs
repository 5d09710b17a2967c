//! Pod admission latency and throughput of kruise-webhook's pod chain with 10 SidecarSets
//! installed (2 of them match the pod), served over HTTPS exactly as in production and
//! driven from a load generator on loopback over keep-alive connections, as the API server
//! calls webhooks.
//!
//! 1. a fixed rate (`BENCH_RPS`, default 500/s) for `BENCH_SECS` (default 10 s): p50, p99 and
//!    max latency, measured from the moment each request is issued, waiting for a free
//!    connection included;
//! 2. saturation: as many requests as 4 connections can push for 5 s: requests per second.
//!
//! `cargo bench -p kruise-webhook --bench pod_admission`. Target: p99 < 5 ms at 500/s.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use kruise_admission::AdmissionRoutes;
use kruise_admission::certs::{generate_ca, issue_serving};
use kruise_admission::pod_chain::{KruisePodReadyGate, PodChain, PodMutator};
use kruise_sidecarset::admission::{SidecarSetInjectionStep, StaticSnapshot};
use kruise_sidecarset::api::defaults::default_v1beta1;
use kruise_sidecarset::api::v1beta1::SidecarSet;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn sidecar_sets() -> Vec<SidecarSet> {
    (0..10)
        .map(|i| {
            // Sets 0 and 1 select the benchmark's pods; the other 8 select other apps.
            let app = if i < 2 {
                "nginx".to_string()
            } else {
                format!("app-{i}")
            };
            let mut set: SidecarSet = serde_json::from_value(json!({
                "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
                "metadata": {"name": format!("sidecarset-{i}")},
                "spec": {
                    "selector": {"matchLabels": {"app": app}},
                    "containers": [{"name": format!("sidecar-{i}"), "image": "busybox:1.36",
                        "command": ["sleep", "999d"],
                        "volumeMounts": [{"name": format!("log-{i}"), "mountPath": "/var/log"}]}],
                    "volumes": [{"name": format!("log-{i}"), "emptyDir": {}}]
                }
            }))
            .unwrap();
            default_v1beta1(&mut set).unwrap();
            set
        })
        .collect()
}

fn review(n: usize) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": format!("00000000-0000-0000-0000-{n:012}"),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "default", "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            "object": {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"generateName": "nginx-", "namespace": "default",
                             "labels": {"app": "nginx", "pod-template-hash": "abc"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25",
                    "ports": [{"containerPort": 80}],
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}},
            "dryRun": false
        }
    }))
    .unwrap()
}

struct Server {
    addr: SocketAddr,
    ca: String,
    shutdown: CancellationToken,
}

async fn start_server() -> Server {
    kruise_runtime::install_crypto_provider();
    let now = jiff::Timestamp::now();
    let ca = generate_ca("bench-ca", now, Duration::from_secs(3600)).unwrap();
    let (cert, key) = issue_serving(
        &ca,
        &["localhost".to_string()],
        now,
        Duration::from_secs(3600),
    )
    .unwrap();
    let tls = axum_server::tls_rustls::RustlsConfig::from_pem(cert.into_bytes(), key.into_bytes())
        .await
        .unwrap();
    let snapshot = StaticSnapshot {
        sidecar_sets: sidecar_sets().into(),
        ..StaticSnapshot::default()
    };
    let chain = PodChain::new(vec![
        Arc::new(KruisePodReadyGate { all_pods: false }) as Arc<dyn PodMutator>,
        Arc::new(SidecarSetInjectionStep::new(snapshot)),
    ]);
    let shutdown = CancellationToken::new();
    let server = kruise_admission::serve(
        "127.0.0.1:0".parse().unwrap(),
        AdmissionRoutes::new().handler(chain),
        tls,
        shutdown.clone(),
    )
    .await
    .unwrap();
    Server {
        addr: server.addr,
        ca: ca.cert_pem,
        shutdown,
    }
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

async fn connect(server: &Server) -> Sender {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(server.ca.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    sender
}

/// One admission request; panics unless the pod was patched.
async fn admit(sender: &mut Sender, body: Vec<u8>) {
    sender.ready().await.unwrap();
    let req = hyper::Request::post("/mutate-pod")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["response"]["allowed"], true);
    assert!(v["response"]["patch"].is_string(), "the pod was mutated");
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[tokio::main]
async fn main() {
    let rps: u64 = std::env::var("BENCH_RPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let secs: u64 = std::env::var("BENCH_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let server = start_server().await;
    let bodies: Arc<Vec<Vec<u8>>> = Arc::new((0..64).map(review).collect());
    // Warm up (connections, allocator, caches).
    let mut warm = connect(&server).await;
    for i in 0..200 {
        admit(&mut warm, bodies[i % bodies.len()].clone()).await;
    }

    // 1. Open loop at a fixed rate over a pool of keep-alive connections.
    let total = rps * secs;
    let interval = Duration::from_secs_f64(1.0 / rps as f64);
    let pool = 16usize;
    let (tx, rx) = async_channel::<(usize, Instant)>(pool);
    let mut workers = Vec::new();
    for _ in 0..pool {
        let mut sender = connect(&server).await;
        let rx = rx.clone();
        let bodies = bodies.clone();
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while let Ok((n, issued)) = rx.recv().await {
                admit(&mut sender, bodies[n % bodies.len()].clone()).await;
                latencies.push(issued.elapsed());
            }
            latencies
        }));
    }
    drop(rx);
    let start = Instant::now();
    for n in 0..total {
        let scheduled = start + interval.mul_f64(n as f64);
        tokio::time::sleep_until(scheduled.into()).await;
        // Timed from the moment it is issued (the timer may wake late; the wait for a free
        // connection counts).
        tx.send((n as usize, Instant::now())).await.unwrap();
    }
    drop(tx);
    let mut latencies = Vec::new();
    for w in workers {
        latencies.extend(w.await.unwrap());
    }
    let elapsed = start.elapsed();
    latencies.sort();
    let p50 = percentile(&latencies, 0.50);
    let p99 = percentile(&latencies, 0.99);
    let max = *latencies.last().unwrap();
    println!(
        "pod admission, 10 SidecarSets (2 match), HTTPS keep-alive on loopback, {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "  {rps}/s for {secs}s: {} requests in {:.1}s ({:.0}/s), p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        latencies.len(),
        elapsed.as_secs_f64(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        ms(p50),
        ms(p99),
        ms(max)
    );
    println!(
        "  target p99 < 5 ms at 500/s: {}",
        if ms(p99) < 5.0 { "met" } else { "NOT met" }
    );

    // 2. Saturation: 4 connections, back to back.
    let window = Duration::from_secs(5);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let mut sender = connect(&server).await;
        let bodies: Arc<Vec<Vec<u8>>> = bodies.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0usize;
            while start.elapsed() < window {
                admit(&mut sender, bodies[n % bodies.len()].clone()).await;
                n += 1;
            }
            n
        }));
    }
    let mut done = 0usize;
    for t in tasks {
        done += t.await.unwrap();
    }
    println!(
        "  saturation (4 connections, 5s): {:.0} requests/s",
        done as f64 / start.elapsed().as_secs_f64()
    );
    server.shutdown.cancel();
}

/// A bounded multi-consumer channel from tokio's primitives: the rate loop hands each
/// request to whichever connection is free.
fn async_channel<T: Send + 'static>(
    cap: usize,
) -> (tokio::sync::mpsc::Sender<T>, SharedReceiver<T>) {
    let (tx, rx) = tokio::sync::mpsc::channel(cap);
    (tx, SharedReceiver(Arc::new(tokio::sync::Mutex::new(rx))))
}

struct SharedReceiver<T>(Arc<tokio::sync::Mutex<tokio::sync::mpsc::Receiver<T>>>);

impl<T> Clone for SharedReceiver<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T> SharedReceiver<T> {
    async fn recv(&self) -> Result<T, ()> {
        self.0.lock().await.recv().await.ok_or(())
    }
}
