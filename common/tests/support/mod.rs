//! Test helpers: an HTTPS client that trusts only a given caBundle.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// POSTs `body` to `https://{server_name}{path}` at `addr`, trusting only `ca_bundle`.
/// Returns (status code, body). Err if TLS verification fails.
pub async fn post_tls(
    addr: SocketAddr,
    server_name: &str,
    ca_bundle: &str,
    path: &str,
    body: &[u8],
) -> Result<(u16, String), String> {
    kruise_common::runtime::install_crypto_provider();
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_bundle.as_bytes()) {
        roots
            .add(cert.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from(server_name.to_string()).map_err(|e| e.to_string())?;
    let mut tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {server_name}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    tls.write_all(body).await.map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    // A peer that closes without close_notify is fine here: the response is complete.
    let _ = tls.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw).to_string();
    let status: u16 = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no HTTP status in {text:?}"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, dechunk(&body)))
}

/// Undoes HTTP/1.1 chunked encoding when present.
fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    loop {
        let Some((size, tail)) = rest.split_once("\r\n") else {
            return body.to_string();
        };
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            return body.to_string();
        };
        if n == 0 {
            return out;
        }
        if tail.len() < n {
            return body.to_string();
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
}

/// An AdmissionReview for `object` (CREATE of `kind` in `group/version`).
pub fn review(
    group: &str,
    version: &str,
    kind: &str,
    resource: &str,
    object: serde_json::Value,
) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "name": object["metadata"]["name"].clone(),
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "admin"},
            "object": object,
            "dryRun": false
        }
    }))
    .unwrap()
}

/// A plain HTTP GET; (status, body).
pub async fn http_get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    let mut tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    tcp.write_all(req.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    tcp.read_to_end(&mut raw).await.map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&raw).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no HTTP status in {text:?}"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, dechunk(&body)))
}

/// A free loopback port (bound then released), never one this process was given before:
/// a released port can come back from the very next bind, and two servers of one test
/// handed the same port would fail to start.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if GIVEN.lock().unwrap().insert(port) {
            return port;
        }
    }
}

/// Polls `check` every 50 ms until it returns Some, or fails after `deadline`.
pub async fn eventually<T, F, Fut>(what: &str, deadline: std::time::Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = std::time::Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if start.elapsed() > deadline {
            panic!("timed out after {deadline:?} waiting for {what}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Applies the CRDs `bin crd` prints and returns an Api for the example binary's
/// `Greeting` objects in `default`.
pub async fn install_greetings(
    bin: &str,
    client: &kube::Client,
) -> kube::Api<kube::api::DynamicObject> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let out = std::process::Command::new(bin).arg("crd").output().unwrap();
    assert!(out.status.success());
    let yaml = String::from_utf8(out.stdout).unwrap();
    let crd: CustomResourceDefinition =
        serde_saphyr::from_str(yaml.trim_start_matches("---\n")).unwrap();
    kube::Api::<CustomResourceDefinition>::all(client.clone())
        .create(&Default::default(), &crd)
        .await
        .unwrap();
    let resource = kube::api::ApiResource {
        group: "example.kruise.io".into(),
        version: "v1alpha1".into(),
        api_version: "example.kruise.io/v1alpha1".into(),
        kind: "Greeting".into(),
        plural: "greetings".into(),
    };
    kube::Api::namespaced_with(client.clone(), "default", &resource)
}

/// A replica started by [`spawn_replica`], killed when dropped so a failing test leaves
/// nothing running.
pub struct Replica {
    /// The process.
    pub child: std::process::Child,
    /// Where its `/healthz` and `/readyz` answer (127.0.0.1).
    pub health_port: u16,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
    let health_port = free_port();
    let mut cmd = std::process::Command::new(bin);
    cmd.args([
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--leader-elect=false",
    ])
    .args(["--metrics-addr", &format!("127.0.0.1:{}", free_port())])
    .args(["--health-addr", &format!("127.0.0.1:{health_port}")])
    .args([
        "--webhook-port",
        &webhook_port.to_string(),
        "--webhook-host",
        "127.0.0.1",
    ])
    .args(["--webhook-namespace", "default"])
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
