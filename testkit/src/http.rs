//! HTTP(S) for tests: a POST over TLS trusting only a given caBundle (what the API server
//! does with a webhook's caBundle), AdmissionReviews, plain GETs and free loopback ports.

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
    // The process-wide provider, as kruise-runtime installs it.
    let _ = rustls::crypto::ring::default_provider().install_default();
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
    parse_response(&raw)
}

/// An HTTP/1.1 response's status and (de-chunked) body.
fn parse_response(raw: &[u8]) -> Result<(u16, String), String> {
    let text = String::from_utf8_lossy(raw).to_string();
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
    parse_response(&raw)
}

/// The ports [`free_port`] hands out: below Linux's ephemeral range (32768–60999), so no
/// `bind(:0)` and no outgoing connection's local port takes one between its check and the
/// server's bind (a kruise-sim, a client of another test process), and below Kubernetes'
/// NodePort range (30000–32767) of the real control plane's tests.
const TEST_PORTS: std::ops::Range<u16> = 20_000..30_000;

/// A free loopback port, never one this process was given before, nor one another test
/// process holds: each port given is claimed by a file naming this process under
/// `$TMPDIR/kruise-test-ports` (a claim whose process is gone is taken over), so test
/// processes run side by side (the safety-stress runs) never get the same port.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let claims = std::env::temp_dir().join("kruise-test-ports");
    std::fs::create_dir_all(&claims).unwrap();
    let pid = std::process::id();
    let span = u64::from(TEST_PORTS.end - TEST_PORTS.start);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ (u64::from(pid) << 20);
    for attempt in 0..span {
        let offset = seed.wrapping_add(attempt.wrapping_mul(7_919)) % span;
        let port = TEST_PORTS.start + u16::try_from(offset).unwrap();
        if GIVEN.lock().unwrap().contains(&port) || !claim(&claims, port, pid) {
            continue;
        }
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            GIVEN.lock().unwrap().insert(port);
            return port;
        }
    }
    panic!("no free port in {TEST_PORTS:?}");
}

/// Claims `port` for the process `pid`: true when the claim is new, or its process is gone.
fn claim(claims: &std::path::Path, port: u16, pid: u32) -> bool {
    let path = claims.join(port.to_string());
    let create = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, pid.to_string().as_bytes()))
    };
    if create().is_ok() {
        return true;
    }
    let holder = std::fs::read_to_string(&path).unwrap_or_default();
    let alive = holder
        .trim()
        .parse::<u32>()
        .is_ok_and(|p| p == pid || std::path::Path::new(&format!("/proc/{p}")).exists());
    if alive {
        return false;
    }
    // The holder is gone: take its claim over (one process wins the new file).
    let _ = std::fs::remove_file(&path);
    create().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunked_response_reads_as_its_body() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
        assert_eq!(parse_response(raw).unwrap(), (200, "hello world".into()));
        let plain = b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nno";
        assert_eq!(parse_response(plain).unwrap(), (404, "no".into()));
        assert!(parse_response(b"").is_err());
    }
}
