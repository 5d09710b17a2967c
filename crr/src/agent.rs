//! The node agent's shell (`kruise-crr agent`, and one per simulated node in
//! `kruise-playground up`): it watches only the active requests of its node
//! (`crr.apps.kruise.io/node-name=<node>,crr.apps.kruise.io/active=true`), handles one pod at
//! a time (every request event, deletions included, wakes the request's pod, so a second
//! request proceeds as soon as the first is gone: K#1058), asks the runtime through CRI for
//! the pod's containers, and carries out what [`crate::plan::agent`] decides: status writes,
//! preStop hooks (CRI ExecSync, httpGet, tcpSocket) and CRI StopContainer. The kubelet
//! restarts what it stopped; the agent never creates a container. Beside that it writes
//! `apps.kruise.io/runtime-containers-meta` where only the runtime can tell an in-place
//! update is done ([`crate::containers_meta`]).
//!
//! A node without a usable CRI socket keeps the agent up: the reason is logged once and
//! written as the completion message of every request it cannot carry out.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerPort, Pod};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_cri::RuntimeServiceClient;
use kruise_cri::v1 as cri;
use kruise_runtime::Metrics;
use kruise_runtime::events::{EventQueue, EventRecord, Recorder, pod_reference};
use kruise_runtime::family::AgentContext;
use kruise_runtime::watch::{DecodeGuard, Watch};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

use crate::api::v1beta1::ContainerRecreateRequest;
use crate::api::{ACTIVE_KEY, ContainerRecreateState, NODE_NAME_KEY, POD_UID_KEY, ProbeHandler};
use crate::plan::agent::{
    AgentInput, Kill, RequestView, Step, before_runtime, kill_failed, pick, plan, runtime_name,
    stop_timeout,
};
use crate::runtime_containers::pod_containers;
pub use crate::runtime_containers::{CONTAINER_HASH_ANNOTATION, RESTART_COUNT_ANNOTATION};
use kruise_cri::socket::{Endpoint, agent_endpoint};

/// The field manager and user agent of the agent's writes (OpenKruise's daemon name).
pub const FIELD_MANAGER: &str = "kruise-daemon-crr";
/// Event reason of a container stopped for a request (the kubelet's, as OpenKruise records it).
pub const REASON_KILLING: &str = "Killing";
/// Event reason of a preStop hook that failed (the kubelet's).
pub const REASON_FAILED_PRESTOP: &str = "FailedPreStopHook";
/// Pods handled at once.
const WORKERS: usize = 8;
/// How long a request whose own write is not yet in the cache is waited for.
const MAX_EXPECTATION_WAIT: Duration = Duration::from_secs(10);
/// How soon a request whose own write is not yet in the cache is looked at again.
const EXPECTATION_REQUEUE: Duration = Duration::from_millis(200);
/// First and longest retry delay after an error (OpenKruise's 500 ms .. ~55 s).
const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(50);

/// `namespace/podName`: the agent's unit of work.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PodKey {
    namespace: String,
    pod: String,
}

impl PodKey {
    fn of(crr: &ContainerRecreateRequest) -> Self {
        PodKey {
            namespace: crr.namespace().unwrap_or_default(),
            pod: crr.spec.pod_name.clone(),
        }
    }
}

/// Why a sync did not finish; the pod is retried with backoff.
#[derive(Debug, thiserror::Error)]
enum AgentError {
    #[error("writing the status of {namespace}/{name}: {source}")]
    Write {
        namespace: String,
        name: String,
        source: kube::Error,
    },
    #[error("asking the runtime for the containers of pod {pod}: {source}")]
    Runtime { pod: String, source: tonic::Status },
}

/// The runtime an agent talks to, or why it has none.
#[derive(Clone)]
enum Runtime {
    Cri(RuntimeServiceClient<Channel>),
    Disabled(String),
}

fn connect(endpoint: Endpoint) -> Runtime {
    match endpoint {
        Endpoint::Socket(path) => match kruise_cri::connect(&path) {
            Ok(channel) => Runtime::Cri(RuntimeServiceClient::new(channel)),
            Err(e) => Runtime::Disabled(format!("connecting to {}: {e}", path.display())),
        },
        Endpoint::Disabled(reason) => Runtime::Disabled(reason),
    }
}

struct Agent {
    client: Client,
    requests: Store<ContainerRecreateRequest>,
    runtime: Runtime,
    /// Events on the pods whose containers it stops.
    events: EventQueue,
    /// Resource versions of the agent's own writes not yet seen in the cache.
    expected: Mutex<HashMap<(String, String), (String, Instant)>>,
}

/// Runs the agent for `ctx.node` until `ctx.shutdown` fires.
pub async fn run(ctx: AgentContext) -> anyhow::Result<()> {
    let endpoint = agent_endpoint(&ctx.cri_socket);
    let runtime = connect(endpoint);
    match &runtime {
        Runtime::Cri(_) => {
            tracing::info!(node = %ctx.node, socket = %ctx.cri_socket.display(), "crr agent started")
        }
        Runtime::Disabled(reason) => tracing::error!(
            node = %ctx.node,
            %reason,
            "no CRI runtime: containers cannot be recreated on this node; requests complete with this reason"
        ),
    }
    let selector = format!("{NODE_NAME_KEY}={},{ACTIVE_KEY}=true", ctx.node);
    let (requests, events) = Watch::<ContainerRecreateRequest>::new(ctx.client.clone(), None)
        .labels(&selector)
        .guarded(DecodeGuard::logging_only())
        .reflect_events();
    let agent = Arc::new(Agent {
        client: ctx.client.clone(),
        requests,
        runtime,
        events: EventQueue::for_controller(ctx.client.clone(), FIELD_MANAGER, &Metrics::new()),
        expected: Mutex::default(),
    });
    let containers_meta = match &agent.runtime {
        Runtime::Cri(cri) => Some(tokio::spawn(crate::containers_meta::run(
            ctx.client.clone(),
            ctx.node.clone(),
            cri.clone(),
            ctx.shutdown.clone(),
        ))),
        Runtime::Disabled(_) => None,
    };
    let (keys, queue) = mpsc::unbounded_channel();
    let feed = tokio::spawn(feed(events, keys.clone(), ctx.shutdown.clone()));
    work(agent, keys, queue, ctx.shutdown.clone()).await;
    feed.abort();
    if let Some(task) = containers_meta {
        task.abort();
    }
    Ok(())
}

/// Turns request events into pod keys; the keys seen while listing are sent once the
/// listing is complete (the store is then whole).
async fn feed(
    mut events: kruise_runtime::watch::EventStream<ContainerRecreateRequest>,
    keys: mpsc::UnboundedSender<PodKey>,
    shutdown: CancellationToken,
) {
    let mut listed = Vec::new();
    loop {
        let event = tokio::select! {
            _ = shutdown.cancelled() => return,
            event = events.next() => event,
        };
        match event {
            None => return,
            Some(Err(e)) => tracing::warn!(error = %e, "watching ContainerRecreateRequests"),
            Some(Ok(watcher::Event::Apply(crr) | watcher::Event::Delete(crr))) => {
                let _ = keys.send(PodKey::of(&crr));
            }
            Some(Ok(watcher::Event::InitApply(crr))) => listed.push(PodKey::of(&crr)),
            Some(Ok(watcher::Event::Init)) => listed.clear(),
            Some(Ok(watcher::Event::InitDone)) => {
                for key in listed.drain(..) {
                    let _ = keys.send(key);
                }
            }
        }
    }
}

/// The work loop: each pod key handled by one task at a time, up to [`WORKERS`] pods at
/// once; a key that arrives while its pod is handled runs again after.
async fn work(
    agent: Arc<Agent>,
    keys: mpsc::UnboundedSender<PodKey>,
    mut queue: mpsc::UnboundedReceiver<PodKey>,
    shutdown: CancellationToken,
) {
    let mut waiting: Vec<PodKey> = Vec::new();
    let mut in_flight: HashSet<PodKey> = HashSet::new();
    let mut again: HashSet<PodKey> = HashSet::new();
    let mut failures: HashMap<PodKey, u32> = HashMap::new();
    let mut tasks: JoinSet<(PodKey, Result<Option<Duration>, AgentError>)> = JoinSet::new();
    loop {
        while in_flight.len() < WORKERS && !waiting.is_empty() {
            let key = waiting.remove(0);
            in_flight.insert(key.clone());
            let agent = agent.clone();
            tasks.spawn(async move {
                let result = agent.sync(&key).await;
                (key, result)
            });
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            key = queue.recv() => {
                let Some(key) = key else { break };
                if in_flight.contains(&key) {
                    again.insert(key);
                } else if !waiting.contains(&key) {
                    waiting.push(key);
                }
            }
            Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                let Ok((key, result)) = done else { continue };
                in_flight.remove(&key);
                let delay = match result {
                    Ok(requeue) => {
                        failures.remove(&key);
                        requeue
                    }
                    Err(e) => {
                        let n = failures.entry(key.clone()).or_default();
                        *n += 1;
                        tracing::warn!(namespace = %key.namespace, pod = %key.pod, error = %e, "crr sync failed");
                        Some(backoff(*n))
                    }
                };
                if again.remove(&key) && !waiting.contains(&key) {
                    waiting.push(key.clone());
                }
                if let Some(delay) = delay {
                    let keys = keys.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        let _ = keys.send(key);
                    });
                }
            }
        }
    }
    tasks.shutdown().await;
}

fn backoff(failures: u32) -> Duration {
    let factor = 2u32.saturating_pow(failures.saturating_sub(1).min(16));
    RETRY_FIRST.saturating_mul(factor).min(RETRY_MAX)
}

impl Agent {
    /// One sync of the pod `key`: its requests are ordered, the first is carried one step
    /// further. The result is when to look again.
    async fn sync(&self, key: &PodKey) -> Result<Option<Duration>, AgentError> {
        let requests: Vec<Arc<ContainerRecreateRequest>> = self
            .requests
            .state()
            .into_iter()
            .filter(|c| {
                c.namespace().as_deref() == Some(&key.namespace) && c.spec.pod_name == key.pod
            })
            .collect();
        let views: Vec<RequestView> = requests.iter().map(|c| RequestView::of(c)).collect();
        let picked = pick(&views);
        let find = |name: &str| requests.iter().find(|c| c.name_any() == name);
        for name in &picked.to_pending {
            if let Some(crr) = find(name) {
                self.patch_status(crr, json!({"phase": "Pending"})).await?;
            }
        }
        let Some(crr) = picked.picked.as_deref().and_then(find) else {
            return Ok(None);
        };
        if !self.seen_own_write(crr) {
            return Ok(Some(EXPECTATION_REQUEUE));
        }
        let now = Timestamp::now();
        match before_runtime(crr, now) {
            Some(Step::StartRecreating) => {
                self.patch_status(crr, json!({"phase": "Recreating"}))
                    .await?;
                return Ok(None);
            }
            Some(Step::Wait { requeue_after }) => return Ok(requeue_after),
            _ => {}
        }
        let runtime = match (&self.runtime, runtime_name(crr)) {
            (Runtime::Disabled(reason), _) => Err(reason.clone()),
            (_, Err(reason)) => Err(reason),
            (Runtime::Cri(cri), Ok(name)) => Ok((cri.clone(), name)),
        };
        let (mut cri, runtime_name) = match runtime {
            Ok(found) => found,
            Err(reason) => {
                let message = format!("failed to find runtime service: {reason}");
                self.complete(crr, None, &message).await?;
                return Ok(None);
            }
        };
        let pod_uid = crr.labels().get(POD_UID_KEY).cloned().unwrap_or_default();
        let containers = pod_containers(&mut cri, &pod_uid, &runtime_name)
            .await
            .map_err(|source| AgentError::Runtime {
                pod: format!("{}/{}", key.namespace, key.pod),
                source,
            })?;
        let step = plan(&AgentInput {
            crr,
            containers: &containers,
            now: Timestamp::now(),
        });
        let Step::Sync {
            states,
            write_states,
            kill,
            complete,
            requeue_after,
        } = step
        else {
            return Ok(None);
        };
        if let Some(message) = complete {
            self.complete(crr, Some(&states), &message).await?;
            return Ok(None);
        }
        let Some(kill) = kill else {
            if write_states {
                self.patch_status(crr, json!({"containerRecreateStates": states}))
                    .await?;
            }
            return Ok(requeue_after);
        };
        tracing::info!(
            namespace = %key.namespace, pod = %key.pod, container = %kill.container,
            request = %crr.name_any(), "stopping container by ContainerRecreateRequest"
        );
        let pod = self.pod_recorder(crr, key);
        pod.record(EventRecord::normal(
            REASON_KILLING,
            format!(
                "Stopping container {} by ContainerRecreateRequest {}",
                kill.container,
                crr.name_any()
            ),
        ));
        let started = Instant::now();
        self.run_pre_stop(&mut cri, key, &kill, &pod).await;
        // The mark (`Recreating`, `isKilled`) after the hook and before the stop: while the
        // hook runs the states read as OpenKruise's daemon leaves them (a request whose
        // deadline passed meanwhile completes with them), and an agent restarted after the
        // stop finds the mark and kills no second time (K#1182).
        if write_states {
            self.patch_status(crr, json!({"containerRecreateStates": states}))
                .await?;
        }
        if let Err(error) = self.stop(&mut cri, &kill, started).await {
            let (states, complete) = kill_failed(crr, states, &kill.container, &error);
            if complete {
                self.complete(crr, Some(&states), "").await?;
            } else {
                self.patch_status(crr, json!({"containerRecreateStates": states}))
                    .await?;
            }
            return Ok(None);
        }
        // Look again at once: the kubelet restarts it, and the next container may go.
        Ok(Some(Duration::from_millis(500)))
    }

    /// Events about the request's pod.
    fn pod_recorder(&self, crr: &ContainerRecreateRequest, key: &PodKey) -> Recorder {
        let mut pod = pod_reference(Some(&key.namespace), &key.pod);
        pod.uid = crr.labels().get(POD_UID_KEY).cloned();
        Recorder::new(&self.events, pod)
    }

    /// Whether the cache holds the agent's own last write to `crr` (or it waited long enough).
    fn seen_own_write(&self, crr: &ContainerRecreateRequest) -> bool {
        let key = (crr.namespace().unwrap_or_default(), crr.name_any());
        let cached = crr.resource_version().unwrap_or_default();
        let Ok(mut expected) = self.expected.lock() else {
            return false;
        };
        // Past the wait an expectation is moot; dropping it here also forgets deleted requests.
        expected.retain(|_, (_, since)| since.elapsed() <= MAX_EXPECTATION_WAIT);
        let Some((rv, _)) = expected.get(&key) else {
            return true;
        };
        let newer = match (cached.parse::<u64>(), rv.parse::<u64>()) {
            (Ok(c), Ok(e)) => c >= e,
            _ => cached == *rv,
        };
        if newer {
            expected.remove(&key);
        }
        newer
    }

    async fn patch_status(
        &self,
        crr: &ContainerRecreateRequest,
        status: Value,
    ) -> Result<(), AgentError> {
        let namespace = crr.namespace().unwrap_or_default();
        let name = crr.name_any();
        let api: Api<ContainerRecreateRequest> = Api::namespaced(self.client.clone(), &namespace);
        let written = api
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
            .map_err(|source| AgentError::Write {
                namespace: namespace.clone(),
                name: name.clone(),
                source,
            })?;
        if let (Some(rv), Ok(mut expected)) = (written.resource_version(), self.expected.lock()) {
            expected.insert((namespace, name), (rv, Instant::now()));
        }
        Ok(())
    }

    async fn complete(
        &self,
        crr: &ContainerRecreateRequest,
        states: Option<&[ContainerRecreateState]>,
        message: &str,
    ) -> Result<(), AgentError> {
        let mut status = json!({
            "phase": "Completed",
            "completionTime": Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            "message": message,
        });
        if let Some(states) = states {
            status["containerRecreateStates"] = json!(states);
        }
        self.patch_status(crr, status).await
    }

    /// The preStop hook (its failure is logged, as the kubelet does), then StopContainer with
    /// what is left of the grace period.
    /// Runs the container's preStop hook, if any, within the grace period; a hook that
    /// fails or overruns is a Warning event, and the stop goes ahead (as the kubelet does).
    async fn run_pre_stop(
        &self,
        cri: &mut RuntimeServiceClient<Channel>,
        key: &PodKey,
        kill: &Kill,
        pod: &Recorder,
    ) {
        if let Some(hook) = &kill.pre_stop {
            let grace = Duration::from_secs(u64::try_from(kill.grace_seconds).unwrap_or(0));
            let ran = tokio::time::timeout(grace, self.pre_stop(cri, key, kill, hook)).await;
            match ran {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(
                        namespace = %key.namespace, pod = %key.pod, container = %kill.container,
                        error = %e, "preStop hook failed"
                    );
                    pod.record(EventRecord::warning(
                        REASON_FAILED_PRESTOP,
                        format!("PreStopHook failed for container {}: {e}", kill.container),
                    ));
                }
                Err(_) => {
                    tracing::warn!(
                        namespace = %key.namespace, pod = %key.pod, container = %kill.container,
                        "preStop hook did not finish within the grace period"
                    );
                    pod.record(EventRecord::warning(
                        REASON_FAILED_PRESTOP,
                        format!(
                            "PreStopHook for container {} did not finish within {}s",
                            kill.container, kill.grace_seconds
                        ),
                    ));
                }
            }
        }
    }

    /// CRI StopContainer with what the grace period has left since `started`.
    async fn stop(
        &self,
        cri: &mut RuntimeServiceClient<Channel>,
        kill: &Kill,
        started: Instant,
    ) -> Result<(), String> {
        let timeout = stop_timeout(kill.grace_seconds, started.elapsed());
        cri.stop_container(cri::StopContainerRequest {
            container_id: kill.runtime_id.clone(),
            timeout,
        })
        .await
        .map(|_| ())
        .map_err(|status| status.message().to_string())
    }

    async fn pre_stop(
        &self,
        cri: &mut RuntimeServiceClient<Channel>,
        key: &PodKey,
        kill: &Kill,
        hook: &ProbeHandler,
    ) -> Result<(), String> {
        if let Some(exec) = &hook.exec {
            let reply = cri
                .exec_sync(cri::ExecSyncRequest {
                    container_id: kill.runtime_id.clone(),
                    cmd: exec.command.clone().unwrap_or_default(),
                    timeout: kill.grace_seconds,
                })
                .await
                .map_err(|s| s.message().to_string())?
                .into_inner();
            return match reply.exit_code {
                0 => Ok(()),
                code => Err(format!(
                    "command exited with {code}: {}",
                    String::from_utf8_lossy(&reply.stderr)
                )),
            };
        }
        if let Some(get) = &hook.http_get {
            let host = match get.host.clone().filter(|h| !h.is_empty()) {
                Some(host) => host,
                None => self.pod_ip(key).await?,
            };
            let port = resolve_port(&get.port, &kill.ports)?;
            if get
                .scheme
                .as_deref()
                .is_some_and(|s| s.eq_ignore_ascii_case("HTTPS"))
            {
                return Err("an HTTPS preStop hook is not supported by kruise-crr".into());
            }
            let path = get
                .path
                .clone()
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| "/".into());
            let headers: Vec<(String, String)> = get
                .http_headers
                .iter()
                .flatten()
                .map(|h| (h.name.clone(), h.value.clone()))
                .collect();
            return http_get(&host, port, &path, &headers).await;
        }
        if let Some(tcp) = &hook.tcp_socket {
            let host = match tcp.host.clone().filter(|h| !h.is_empty()) {
                Some(host) => host,
                None => self.pod_ip(key).await?,
            };
            let port = resolve_port(&tcp.port, &kill.ports)?;
            tokio::net::TcpStream::connect((host.as_str(), port))
                .await
                .map_err(|e| format!("connecting to {host}:{port}: {e}"))?;
        }
        Ok(())
    }

    async fn pod_ip(&self, key: &PodKey) -> Result<String, String> {
        let pod = Api::<Pod>::namespaced(self.client.clone(), &key.namespace)
            .get(&key.pod)
            .await
            .map_err(|e| format!("reading pod {}/{}: {e}", key.namespace, key.pod))?;
        pod.status
            .and_then(|s| s.pod_ip)
            .filter(|ip| !ip.is_empty())
            .ok_or_else(|| format!("pod {}/{} has no IP", key.namespace, key.pod))
    }
}

/// A hook's port: a number, or the name of one of the container's ports.
fn resolve_port(port: &IntOrString, ports: &[ContainerPort]) -> Result<u16, String> {
    let number = match port {
        IntOrString::Int(n) => *n,
        IntOrString::String(name) => ports
            .iter()
            .find(|p| p.name.as_deref() == Some(name))
            .map(|p| p.container_port)
            .ok_or_else(|| format!("no port named {name:?} in the container"))?,
    };
    u16::try_from(number).map_err(|_| format!("invalid port {number}"))
}

/// A plain HTTP/1.1 GET; any status below 400 is success (the kubelet's rule).
async fn http_get(
    host: &str,
    port: u16,
    path: &str,
    headers: &[(String, String)],
) -> Result<(), String> {
    let mut stream = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("connecting to {host}:{port}: {e}"))?;
    let mut request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: kruise-crr\r\nConnection: close\r\n"
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("sending the preStop request: {e}"))?;
    let mut head = [0u8; 64];
    let n = stream
        .read(&mut head)
        .await
        .map_err(|e| format!("reading the preStop response: {e}"))?;
    let line = String::from_utf8_lossy(&head[..n]);
    let code: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("not an HTTP response: {line:?}"))?;
    if code < 400 {
        Ok(())
    } else {
        Err(format!("HTTP {code}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_and_numbered_hook_ports_resolve() {
        let ports: Vec<ContainerPort> =
            serde_json::from_value(json!([{"name": "http", "containerPort": 8080}])).unwrap();
        assert_eq!(
            resolve_port(&IntOrString::String("http".into()), &ports),
            Ok(8080)
        );
        assert_eq!(resolve_port(&IntOrString::Int(81), &ports), Ok(81));
        assert!(resolve_port(&IntOrString::String("grpc".into()), &ports).is_err());
        assert!(resolve_port(&IntOrString::Int(70000), &ports).is_err());
    }

    #[test]
    fn retries_back_off_from_half_a_second_to_fifty() {
        assert_eq!(backoff(1), Duration::from_millis(500));
        assert_eq!(backoff(2), Duration::from_secs(1));
        assert_eq!(backoff(30), RETRY_MAX);
    }

    #[tokio::test]
    async fn an_http_hook_succeeds_below_400_and_fails_from_400() {
        for (answer, ok) in [
            ("HTTP/1.1 200 OK\r\n\r\n", true),
            ("HTTP/1.1 503 Busy\r\n\r\n", false),
        ] {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let server = tokio::spawn(async move {
                let (mut conn, _) = listener.accept().await.unwrap();
                let mut buf = [0u8; 1024];
                let n = conn.read(&mut buf).await.unwrap();
                conn.write_all(answer.as_bytes()).await.unwrap();
                String::from_utf8_lossy(&buf[..n]).to_string()
            });
            let result = http_get("127.0.0.1", port, "/quit", &[("X-A".into(), "b".into())]).await;
            assert_eq!(result.is_ok(), ok, "{result:?}");
            let request = server.await.unwrap();
            assert!(request.starts_with("GET /quit HTTP/1.1\r\n"), "{request}");
            assert!(request.contains("X-A: b\r\n"), "{request}");
        }
    }
}
