//! Admission webhooks, called as kube-apiserver calls them: the Mutating then Validating
//! webhook configurations stored in the simulator are matched against each write (rules,
//! scope, namespaceSelector, objectSelector), and each matching webhook gets a real
//! `admission.k8s.io/v1` AdmissionReview over HTTPS, verified with its caBundle. Mutating
//! webhooks run one after another in configuration-name order and their JSONPatches are
//! applied; a denial or, under `failurePolicy: Fail`, a failure to call rejects the write
//! with the status kube-apiserver returns.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use futures::future::BoxFuture;
use http_body_util::{BodyExt as _, Full};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::registry::GroupResource;
use crate::selector::LabelSelector;
use crate::{AdmissionAttributes, AdmissionHook, SimShared, meta};

/// Maps a webhook's `service` reference to an address, since the simulator has no
/// cluster network: `(namespace, name, port)` -> `host:port`.
pub type ServiceResolver = Arc<dyn Fn(&str, &str, i32) -> Option<String> + Send + Sync>;

/// The admission hook that calls the stored webhook configurations.
pub struct WebhookDispatcher {
    shared: std::sync::Weak<SimShared>,
    resolver: Option<ServiceResolver>,
}

impl WebhookDispatcher {
    /// A dispatcher reading configurations from `shared`'s store.
    pub fn new(shared: &Arc<SimShared>, resolver: Option<ServiceResolver>) -> Self {
        WebhookDispatcher {
            shared: Arc::downgrade(shared),
            resolver,
        }
    }
}

/// One webhook entry with what is needed to call it.
#[derive(Debug, Clone)]
struct Entry {
    config: String,
    hook: Value,
    mutating: bool,
}

fn entries(shared: &SimShared, mutating: bool) -> Vec<Entry> {
    let resource = if mutating {
        "mutatingwebhookconfigurations"
    } else {
        "validatingwebhookconfigurations"
    };
    let (mut configs, _) = shared.store.list(
        &GroupResource::new("admissionregistration.k8s.io", resource),
        None,
    );
    // kube-apiserver orders configurations by name.
    configs.sort_by(|a, b| meta::name_of(a).cmp(meta::name_of(b)));
    configs
        .iter()
        .flat_map(|c| {
            let config = meta::name_of(c).to_string();
            c.get("webhooks")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |hook| Entry {
                    config: config.clone(),
                    hook,
                    mutating,
                })
        })
        .collect()
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn any_or(list: &[String], want: &str) -> bool {
    list.iter().any(|s| s == "*" || s == want)
}

/// Whether a rule list covers this request (operation, group, version, resource with
/// subresource, scope).
fn rules_match(hook: &Value, attrs: &AdmissionAttributes, version: &str, namespaced: bool) -> bool {
    let Some(rules) = hook.get("rules").and_then(Value::as_array) else {
        return false;
    };
    rules.iter().any(|r| {
        let ops = strings(r.get("operations"));
        let groups = strings(r.get("apiGroups"));
        let versions = strings(r.get("apiVersions"));
        let resources = strings(r.get("resources"));
        let scope = r.get("scope").and_then(Value::as_str).unwrap_or("*");
        let full = if attrs.subresource.is_empty() {
            attrs.resource.clone()
        } else {
            format!("{}/{}", attrs.resource, attrs.subresource)
        };
        let resource_ok = resources.iter().any(|res| {
            res == "*/*"
                || *res == full
                || (attrs.subresource.is_empty() && res == "*")
                || res.strip_suffix("/*") == Some(attrs.resource.as_str())
                || (res.strip_prefix("*/") == Some(attrs.subresource.as_str())
                    && !attrs.subresource.is_empty())
        });
        let scope_ok = match scope {
            "Cluster" => !namespaced,
            "Namespaced" => namespaced,
            _ => true,
        };
        any_or(&ops, &attrs.operation)
            && any_or(&groups, &attrs.group)
            && any_or(&versions, version)
            && resource_ok
            && scope_ok
    })
}

fn selector_matches(
    sel: Option<&Value>,
    labels: Option<&serde_json::Map<String, Value>>,
) -> Result<bool, String> {
    match sel {
        None | Some(Value::Null) => Ok(true),
        Some(s) => Ok(LabelSelector::from_json(s)?.matches(labels)),
    }
}

impl WebhookDispatcher {
    /// Whether `entry` must see this request, as kube-apiserver decides it.
    fn should_call(
        &self,
        shared: &SimShared,
        entry: &Entry,
        attrs: &AdmissionAttributes,
        object: &Value,
    ) -> Result<bool, String> {
        // kube-apiserver never sends webhook configurations to webhooks.
        if attrs.group == "admissionregistration.k8s.io" {
            return Ok(false);
        }
        let version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .map(|v| v.rsplit('/').next().unwrap_or(v))
            .unwrap_or("v1");
        let namespaced = !attrs.namespace.is_empty();
        if !rules_match(&entry.hook, attrs, version, namespaced) {
            return Ok(false);
        }
        let ns_selector = entry.hook.get("namespaceSelector");
        let ns_ok = if attrs.group.is_empty() && attrs.resource == "namespaces" {
            // A Namespace is judged by its own labels.
            selector_matches(ns_selector, meta::labels_of(object))?
        } else if namespaced {
            let ns = shared
                .store
                .get(&GroupResource::new("", "namespaces"), "", &attrs.namespace);
            selector_matches(ns_selector, ns.as_deref().and_then(meta::labels_of))?
        } else {
            true
        };
        if !ns_ok {
            return Ok(false);
        }
        let obj_selector = entry.hook.get("objectSelector");
        let new_ok = selector_matches(obj_selector, meta::labels_of(object))?;
        let old_ok = match &attrs.old_object {
            Some(old) => selector_matches(obj_selector, meta::labels_of(old))?,
            None => false,
        };
        Ok(new_ok || old_ok)
    }

    fn target(&self, entry: &Entry) -> Result<String, String> {
        let cc = entry
            .hook
            .get("clientConfig")
            .cloned()
            .unwrap_or(Value::Null);
        if let Some(url) = cc.get("url").and_then(Value::as_str) {
            return Ok(url.to_string());
        }
        let svc = cc
            .get("service")
            .ok_or("clientConfig has neither url nor service")?;
        let ns = svc.get("namespace").and_then(Value::as_str).unwrap_or("");
        let name = svc.get("name").and_then(Value::as_str).unwrap_or("");
        let port = svc.get("port").and_then(Value::as_i64).unwrap_or(443) as i32;
        let path = svc.get("path").and_then(Value::as_str).unwrap_or("");
        let host = self
            .resolver
            .as_ref()
            .and_then(|r| r(ns, name, port))
            .ok_or_else(|| {
                format!(
                    "service \"{name}\" in namespace \"{ns}\" is not reachable from the simulator"
                )
            })?;
        Ok(format!("https://{host}{path}"))
    }

    async fn call(&self, entry: &Entry, review: &Value) -> Result<Value, String> {
        let url = self.target(entry)?;
        let cc = entry
            .hook
            .get("clientConfig")
            .cloned()
            .unwrap_or(Value::Null);
        let ca = ca_bundle(&cc)?;
        let timeout = entry
            .hook
            .get("timeoutSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(10);
        let body = serde_json::to_vec(review).map_err(|e| e.to_string())?;
        let exchange = post_https(&url, &ca, body);
        match tokio::time::timeout(Duration::from_secs(timeout), exchange).await {
            Ok(result) => {
                result.map_err(|e| format!("failed to call webhook: Post \"{url}\": {e}"))
            }
            Err(_) => Err(format!(
                "failed to call webhook: Post \"{url}\": context deadline exceeded"
            )),
        }
    }
}

/// The PEM bytes of a webhook `clientConfig`'s base64 `caBundle` (empty when unset).
pub(crate) fn ca_bundle(client_config: &Value) -> Result<Vec<u8>, String> {
    client_config
        .get("caBundle")
        .and_then(Value::as_str)
        .map(|b| base64::engine::general_purpose::STANDARD.decode(b))
        .transpose()
        .map_err(|e| format!("invalid caBundle: {e}"))
        .map(Option::unwrap_or_default)
}

/// One HTTP/1.1 connection to a webhook, ready for a request.
type Connection = hyper::client::conn::http1::SendRequest<Full<bytes::Bytes>>;

/// Where a webhook is and the CA it is trusted with: connections are kept per peer.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Peer {
    host: String,
    port: u16,
    ca_pem: Vec<u8>,
}

/// Idle connections kept per peer. kube-apiserver's webhook clients keep theirs alive
/// through Go's transport, with Kubernetes' `SetTransportDefaults` of 25 idle connections
/// per host; a peer gets one connection per request in flight, and this many stay open.
const MAX_IDLE_PER_PEER: usize = 25;

/// The kept-alive connections to webhooks, shared by every simulated API server of the
/// process (a peer is its address and CA, so two servers never mix theirs up).
static IDLE: std::sync::LazyLock<std::sync::Mutex<HashMap<Peer, Vec<Connection>>>> =
    std::sync::LazyLock::new(Default::default);

fn take_idle(peer: &Peer) -> Option<Connection> {
    let mut idle = IDLE.lock().unwrap_or_else(|e| e.into_inner());
    let kept = idle.get_mut(peer)?;
    while let Some(connection) = kept.pop() {
        if !connection.is_closed() {
            return Some(connection);
        }
    }
    None
}

fn put_back(peer: Peer, connection: Connection) {
    if connection.is_closed() {
        return;
    }
    let mut idle = IDLE.lock().unwrap_or_else(|e| e.into_inner());
    let kept = idle.entry(peer).or_default();
    if kept.len() < MAX_IDLE_PER_PEER {
        kept.push(connection);
    }
}

/// A new TLS connection to `peer`, verified against its CA only.
async fn dial(peer: &Peer) -> Result<Connection, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&peer.ca_pem) {
        let cert = cert.map_err(|e| format!("invalid caBundle: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("invalid caBundle: {e}"))?;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let (host, port) = (peer.host.as_str(), peer.port);
    let tcp = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("dial tcp {host}:{port}: {e}"))?;
    let name = ServerName::try_from(host.to_string()).map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("tls: {e}"))?;
    let (sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// Sends one POST on `connection` and reads the whole response.
async fn exchange(
    connection: &mut Connection,
    request: http::Request<Full<bytes::Bytes>>,
) -> Result<(http::StatusCode, bytes::Bytes), String> {
    connection.ready().await.map_err(|e| e.to_string())?;
    let response = connection
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((status, body))
}

/// POSTs JSON over HTTPS trusting only `ca_pem`; the decoded JSON response. Connections
/// are kept alive and reused, as kube-apiserver reuses its connections to webhooks; a
/// kept connection the webhook closed meanwhile is replaced by a new one.
pub(crate) async fn post_https(url: &str, ca_pem: &[u8], body: Vec<u8>) -> Result<Value, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("invalid url: {e}"))?;
    if uri.scheme_str() != Some("https") {
        return Err("webhook url must use https".into());
    }
    let host = uri
        .host()
        .ok_or("url has no host")?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(443);
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let body = bytes::Bytes::from(body);
    let request = || {
        http::Request::post(path)
            .header(http::header::HOST, format!("{host}:{port}"))
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(body.clone()))
            .map_err(|e| e.to_string())
    };
    let peer = Peer {
        host: host.clone(),
        port,
        ca_pem: ca_pem.to_vec(),
    };
    let mut answered = None;
    if let Some(mut kept) = take_idle(&peer)
        && let Ok(answer) = exchange(&mut kept, request()?).await
    {
        put_back(peer.clone(), kept);
        answered = Some(answer);
    }
    let (status, bytes) = match answered {
        Some(answer) => answer,
        None => {
            let mut fresh = dial(&peer).await?;
            let answer = exchange(&mut fresh, request()?).await?;
            put_back(peer, fresh);
            answer
        }
    };
    if !status.is_success() {
        return Err(format!(
            "expected response code 200, got {}: {}",
            status.as_u16(),
            String::from_utf8_lossy(&bytes)
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("decoding AdmissionReview: {e}"))
}

/// The AdmissionReview kube-apiserver sends for this request.
fn review_for(attrs: &AdmissionAttributes, object: &Value, uid: &str) -> Value {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("v1");
    let version = api_version.rsplit('/').next().unwrap_or(api_version);
    let kind = json!({"group": attrs.group, "version": version, "kind": attrs.kind});
    let resource = json!({"group": attrs.group, "version": version, "resource": attrs.resource});
    let is_delete = attrs.operation == "DELETE";
    let mut request = json!({
        "uid": uid,
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": attrs.name,
        "operation": attrs.operation,
        "userInfo": match &attrs.user {
            Some(user) => json!({"username": user.name, "groups": user.groups}),
            None => json!({"username": "system:admin", "groups": ["system:masters", "system:authenticated"]}),
        },
        "options": attrs.options,
        "object": if is_delete { Value::Null } else { object.clone() },
        "oldObject": attrs.old_object.as_deref().cloned().unwrap_or(Value::Null),
        "dryRun": attrs.dry_run,
    });
    if !attrs.subresource.is_empty() {
        request["subResource"] = json!(attrs.subresource);
        request["requestSubResource"] = json!(attrs.subresource);
    }
    if !attrs.namespace.is_empty() {
        request["namespace"] = json!(attrs.namespace);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

/// The error kube-apiserver returns for a denial (`ToStatusErr`).
fn denial(name: &str, result: Option<&Value>) -> ApiError {
    let denied_by = format!("admission webhook \"{name}\" denied the request");
    let message = result
        .and_then(|r| r.get("message"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let reason = result
        .and_then(|r| r.get("reason"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let code = result
        .and_then(|r| r.get("code"))
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    let text = if !message.is_empty() {
        format!("{denied_by}: {message}")
    } else if !reason.is_empty() {
        format!("{denied_by}: {reason}")
    } else {
        format!("{denied_by} without explanation")
    };
    ApiError::new(code, reason, text)
}

fn decode_patch(response: &Value) -> Result<Option<json_patch::Patch>, String> {
    let Some(patch) = response.get("patch").filter(|p| !p.is_null()) else {
        return Ok(None);
    };
    if let Some(t) = response.get("patchType").and_then(Value::as_str)
        && t != "JSONPatch"
    {
        return Err(format!("unsupported patchType {t}"));
    }
    let raw = match patch {
        // Go webhooks send []byte as base64; kube-rs ones as an array of numbers.
        Value::String(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| format!("patch is not base64: {e}"))?,
        Value::Array(items) => items
            .iter()
            .map(|b| {
                b.as_u64()
                    .and_then(|b| u8::try_from(b).ok())
                    .ok_or("patch bytes out of range")
            })
            .collect::<Result<Vec<u8>, _>>()?,
        _ => return Err("patch must be base64 or bytes".into()),
    };
    serde_json::from_slice(&raw)
        .map(Some)
        .map_err(|e| format!("patch is not a JSONPatch: {e}"))
}

impl AdmissionHook for WebhookDispatcher {
    fn admit<'a>(
        &'a self,
        attrs: &'a AdmissionAttributes,
        object: &'a mut Value,
    ) -> BoxFuture<'a, ApiResult<()>> {
        self.call_phase(true, attrs, object)
    }

    fn validate<'a>(
        &'a self,
        attrs: &'a AdmissionAttributes,
        object: &'a Value,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            let Some(shared) = self.shared.upgrade() else {
                return Ok(());
            };
            if entries(&shared, false).is_empty() {
                return Ok(());
            }
            // Validating webhooks never patch; the copy only satisfies the shared loop.
            let mut copy = object.clone();
            self.call_phase(false, attrs, &mut copy).await
        })
    }
}

impl WebhookDispatcher {
    /// Calls the mutating (`mutating`) or the validating webhooks matching the write.
    fn call_phase<'a>(
        &'a self,
        mutating: bool,
        attrs: &'a AdmissionAttributes,
        object: &'a mut Value,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            let Some(shared) = self.shared.upgrade() else {
                return Ok(());
            };
            {
                for entry in entries(&shared, mutating) {
                    let name = entry
                        .hook
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let should = self
                        .should_call(&shared, &entry, attrs, object)
                        .map_err(|e| {
                            ApiError::internal(format!("webhook {name:?}: invalid selector: {e}"))
                        })?;
                    if !should {
                        continue;
                    }
                    let fail_closed =
                        entry.hook.get("failurePolicy").and_then(Value::as_str) != Some("Ignore");
                    let uid = meta::new_uid();
                    let review = review_for(attrs, object, &uid);
                    let outcome = self.call(&entry, &review).await.and_then(|reply| {
                        let response = reply
                            .get("response")
                            .cloned()
                            .ok_or("AdmissionReview has no response")?;
                        if response.get("uid").and_then(Value::as_str) != Some(uid.as_str()) {
                            return Err(format!("expected response.uid={uid:?}"));
                        }
                        Ok(response)
                    });
                    let response = match outcome {
                        Ok(r) => r,
                        Err(e) if fail_closed => {
                            return Err(ApiError::internal(format!(
                                "Internal error occurred: failed calling webhook \"{name}\": {e}"
                            )));
                        }
                        Err(e) => {
                            tracing::warn!(webhook = %name, config = %entry.config, error = %e, "failed calling webhook, failing open");
                            continue;
                        }
                    };
                    if response.get("allowed").and_then(Value::as_bool) != Some(true) {
                        return Err(denial(&name, response.get("status")));
                    }
                    if entry.mutating {
                        match decode_patch(&response) {
                            Ok(Some(patch)) => {
                                if let Err(e) = json_patch::patch(object, &patch) {
                                    return Err(ApiError::internal(format!(
                                        "Internal error occurred: webhook \"{name}\" returned a patch that does not apply: {e}"
                                    )));
                                }
                            }
                            Ok(None) => {}
                            Err(e) => {
                                return Err(ApiError::internal(format!(
                                    "Internal error occurred: webhook \"{name}\": {e}"
                                )));
                            }
                        }
                    }
                }
            }
            Ok(())
        })
    }
}
