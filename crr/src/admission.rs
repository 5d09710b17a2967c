//! The ContainerRecreateRequest webhook, served by `kruise-crr` through `kruise_admission`
//! with OpenKruise's path and entry name: `/mutate-apps-kruise-io-containerrecreaterequest`
//! (`mcontainerrecreaterequest.kb.io`, mutating only, CREATE and UPDATE, both versions), and
//! `/convert` ([`crate::conversion`]).
//!
//! * UPDATE: the spec is immutable, so are the `pod-uid` and `node-name` labels (and, in
//!   v1alpha1, the `unready-acquired` annotation once set) — 403 otherwise;
//! * CREATE: the request is checked and defaulted ([`check_create`]), then filled from its
//!   pod ([`inject_pod`]): the labels `crr.apps.kruise.io/pod-uid`, `…/node-name` and
//!   `…/active`, the grace period, and each container's preStop, ports and statusContext.
//!   Every refusal is HTTP 400 with OpenKruise's message.
//!
//! The spec is the same in both versions, so the object is read alike in either.

pub mod launch_priority;

use std::collections::HashSet;
use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kruise_admission::crd_webhooks::{decode, defaults_patch, object_json, served_version};
use kruise_admission::{
    AdmissionHandler, AdmissionRoutes, HandlerError, WebhookKind, WebhookSpec, denied,
};
use kruise_core::api::version::{APPS_GROUP, V1ALPHA1, V1BETA1};
use kruise_core::pods::is_pod_active;
use kube::Api;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use serde::{Deserialize, Serialize};

use crate::api::v1beta1::ContainerRecreateRequestSpec;
use crate::api::{
    ACTIVE_KEY, ContainerContext, FailurePolicy, KIND, NODE_NAME_KEY, POD_UID_KEY, ProbeHandler,
    RESOURCE, Strategy, UNREADY_ACQUIRED_KEY, VIRTUAL_KUBELET_KEY, VIRTUAL_KUBELET_VALUE,
};
use crate::conversion::CrrConverter;

/// URL path of the webhook (OpenKruise's).
pub const MUTATE_PATH: &str = "/mutate-apps-kruise-io-containerrecreaterequest";
/// Webhook entry name (OpenKruise's).
pub const MUTATE_WEBHOOK: &str = "mcontainerrecreaterequest.kb.io";
/// Lowest `activeDeadlineSeconds` accepted.
pub const MIN_DEADLINE_SECONDS: i64 = 3;
/// The feature gate without which requests are refused (no agent would act on them).
pub const KRUISE_DAEMON_GATE: &str = "KruiseDaemon";
/// Pod condition the sidecar terminator sets; such a pod still takes requests.
const SIDECAR_TERMINATED: &str = "SidecarTerminated";
/// Seconds the API server waits for the webhook.
const TIMEOUT_SECONDS: i32 = 30;

/// Where the webhook looks up the request's pod and its node.
pub trait PodSource: Send + Sync + 'static {
    /// The pod `namespace/name`, `None` when it does not exist.
    fn pod<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Pod>, String>>;
    /// The node `name`, `None` when it does not exist.
    fn node<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Node>, String>>;
}

/// The cluster, through the API server.
#[derive(Clone)]
pub struct LivePods(pub kube::Client);

impl PodSource for LivePods {
    fn pod<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Pod>, String>> {
        Box::pin(async move {
            Api::<Pod>::namespaced(self.0.clone(), namespace)
                .get_opt(name)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn node<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Node>, String>> {
        Box::pin(async move {
            Api::<Node>::all(self.0.clone())
                .get_opt(name)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

/// The routes `kruise-crr` serves: the mutating webhook and `/convert`. `pods` is `None`
/// where no cluster is at hand (`kruise-crr manifests`); a CREATE is then refused with 500.
pub fn routes(pods: Option<Arc<dyn PodSource>>, daemon_enabled: bool) -> AdmissionRoutes {
    AdmissionRoutes::new()
        .handler(MutateCrr {
            pods,
            daemon_enabled,
        })
        .converter(CrrConverter)
}

/// Why a request is refused, with the HTTP code OpenKruise answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denial {
    /// 400: the request cannot be carried out as written.
    BadRequest(String),
    /// 403: a change the API does not allow.
    Forbidden(String),
    /// 500: the pod or node could not be read.
    Internal(String),
}

impl Denial {
    fn code(&self) -> u16 {
        match self {
            Denial::BadRequest(_) => 400,
            Denial::Forbidden(_) => 403,
            Denial::Internal(_) => 500,
        }
    }

    fn message(&self) -> &str {
        match self {
            Denial::BadRequest(m) | Denial::Forbidden(m) | Denial::Internal(m) => m,
        }
    }
}

/// The part of a request the webhook reads and writes (both versions alike).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AdmittedCrr {
    /// Its metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Its spec.
    #[serde(default)]
    pub spec: ContainerRecreateRequestSpec,
}

/// UPDATE: what may not change.
pub fn check_update(version: &str, old: &AdmittedCrr, new: &AdmittedCrr) -> Result<(), Denial> {
    if old.spec != new.spec {
        return Err(Denial::Forbidden(
            "spec of ContainerRecreateRequest is immutable".into(),
        ));
    }
    let label = |crr: &AdmittedCrr, key: &str| -> Option<String> {
        crr.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(key))
            .cloned()
    };
    for key in [POD_UID_KEY, NODE_NAME_KEY] {
        if label(old, key) != label(new, key) {
            return Err(Denial::Forbidden(format!(
                "not allowed to update immutable label {key}"
            )));
        }
    }
    if version == V1ALPHA1 {
        let annotation = |crr: &AdmittedCrr| -> String {
            crr.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(UNREADY_ACQUIRED_KEY))
                .cloned()
                .unwrap_or_default()
        };
        if !annotation(old).is_empty() && annotation(old) != annotation(new) {
            return Err(Denial::Forbidden(format!(
                "not allowed to update immutable annotation {UNREADY_ACQUIRED_KEY}"
            )));
        }
    }
    Ok(())
}

/// CREATE, before the pod is read: the checks of the request alone and its defaults
/// (`strategy: {}`, `failurePolicy: Fail`, the `active` label).
pub fn check_create(crr: &mut AdmittedCrr) -> Result<(), Denial> {
    let bad = |m: String| Err(Denial::BadRequest(m));
    if crr.spec.pod_name.is_empty() {
        return bad("podName can not be empty".into());
    }
    crr.metadata
        .labels
        .get_or_insert_default()
        .insert(ACTIVE_KEY.into(), "true".into());
    let strategy = crr.spec.strategy.get_or_insert_with(Strategy::default);
    if crr.spec.containers.is_empty() {
        return bad("containers list can not be null".into());
    }
    if crr
        .spec
        .active_deadline_seconds
        .is_some_and(|s| s < MIN_DEADLINE_SECONDS)
    {
        return bad(format!(
            "activeDeadlineSeconds can not be less than {MIN_DEADLINE_SECONDS}s"
        ));
    }
    if strategy
        .termination_grace_period_seconds
        .is_some_and(|s| s < 0)
    {
        return bad("terminationGracePeriodSeconds must be non-negative integer".into());
    }
    if strategy.unready_grace_period_seconds.is_some_and(|s| s < 0) {
        return bad("unreadyGracePeriodSeconds must be non-negative integer".into());
    }
    match &strategy.failure_policy {
        None => strategy.failure_policy = Some(FailurePolicy::Fail),
        Some(FailurePolicy::Unknown(p)) if p.is_empty() => {
            strategy.failure_policy = Some(FailurePolicy::Fail)
        }
        Some(FailurePolicy::Unknown(p)) => return bad(format!("unknown failurePolicy {p}")),
        Some(FailurePolicy::Fail | FailurePolicy::Ignore) => {}
    }
    Ok(())
}

/// Whether the pod may take a request: active (or stopped by the sidecar terminator) and
/// scheduled.
pub fn check_pod(pod: &Pod) -> Result<&str, Denial> {
    let terminated_by_sidecar_terminator = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == SIDECAR_TERMINATED));
    if !is_pod_active(pod) && !terminated_by_sidecar_terminator {
        return Err(Denial::BadRequest(
            "not allowed to recreate containers in an inactive Pod".into(),
        ));
    }
    match pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
        Some(node) if !node.is_empty() => Ok(node),
        _ => Err(Denial::BadRequest(
            "not allowed to recreate containers in a pending Pod".into(),
        )),
    }
}

/// CREATE, once the pod and its node are read: fills the labels, the grace period and each
/// container's preStop, ports and statusContext from the pod; refuses duplicate, unknown and
/// not-yet-started containers and user-set read-only fields.
pub fn inject_pod(crr: &mut AdmittedCrr, pod: &Pod, node: &Node) -> Result<(), Denial> {
    let bad = |m: String| Err(Denial::BadRequest(m));
    let node_name = check_pod(pod)?.to_string();
    let labels = crr.metadata.labels.get_or_insert_default();
    labels.insert(NODE_NAME_KEY.into(), node_name);
    labels.insert(
        POD_UID_KEY.into(),
        pod.metadata.uid.clone().unwrap_or_default(),
    );
    let virtual_kubelet = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(VIRTUAL_KUBELET_KEY))
        .is_some_and(|v| v == VIRTUAL_KUBELET_VALUE);
    if virtual_kubelet {
        labels.insert(VIRTUAL_KUBELET_KEY.into(), VIRTUAL_KUBELET_VALUE.into());
    }
    let pod_spec = pod.spec.as_ref();
    let strategy = crr.spec.strategy.get_or_insert_with(Strategy::default);
    if strategy.termination_grace_period_seconds.is_none() {
        strategy.termination_grace_period_seconds =
            pod_spec.and_then(|s| s.termination_grace_period_seconds);
    }
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    let mut seen = HashSet::new();
    for c in &mut crr.spec.containers {
        if seen.contains(&c.name) {
            return bad(format!("can not recreate {} multi times", c.name));
        }
        if c.pre_stop.is_some() || c.ports.is_some() || c.status_context.is_some() {
            return bad("preStop, ports, statusContext in container are ready-only fields".into());
        }
        let Some(pod_container) = pod_spec
            .into_iter()
            .flat_map(|s| s.containers.iter())
            .find(|pc| pc.name == c.name)
        else {
            return bad(format!("container {} not found in Pod", c.name));
        };
        let Some(status) = statuses.iter().find(|s| s.name == c.name) else {
            return bad(format!(
                "not found {} containerStatus in Pod Status",
                c.name
            ));
        };
        let container_id = status.container_id.clone().unwrap_or_default();
        if container_id.is_empty() {
            return bad(format!(
                "no containerID in {} containerStatus, maybe the container has not been initialized",
                c.name
            ));
        }
        if let Some(hook) = pod_container
            .lifecycle
            .as_ref()
            .and_then(|l| l.pre_stop.as_ref())
        {
            c.pre_stop = Some(ProbeHandler {
                exec: hook.exec.clone(),
                http_get: hook.http_get.clone(),
                tcp_socket: hook.tcp_socket.clone(),
            });
        }
        if c.pre_stop.as_ref().is_some_and(|p| p.http_get.is_some()) {
            c.ports = pod_container.ports.clone();
        }
        c.status_context = Some(ContainerContext {
            container_id,
            restart_count: status.restart_count,
        });
        seen.insert(c.name.clone());
    }
    Ok(())
}

/// OpenKruise's `ContainerRecreateRequestHandler`.
pub struct MutateCrr {
    pods: Option<Arc<dyn PodSource>>,
    daemon_enabled: bool,
}

impl MutateCrr {
    async fn decide(
        &self,
        request: &AdmissionRequest<DynamicObject>,
    ) -> Result<Result<AdmissionResponse, Denial>, HandlerError> {
        let allowed = AdmissionResponse::from(request);
        let version = request.kind.version.as_str();
        served_version(version, KIND)?;
        let Some(object) = &request.object else {
            return Ok(Ok(allowed));
        };
        let object = object_json(object)?;
        let mut crr: AdmittedCrr = decode(&object, KIND)?;
        match request.operation {
            Operation::Update => {
                let Some(old) = &request.old_object else {
                    return Ok(Ok(allowed));
                };
                let old: AdmittedCrr = decode(&object_json(old)?, KIND)?;
                Ok(check_update(version, &old, &crr).map(|()| allowed))
            }
            Operation::Create => {
                if let Err(denial) = check_create(&mut crr) {
                    return Ok(Err(denial));
                }
                if let Err(denial) = self.fill_from_pod(&mut crr, request).await {
                    return Ok(Err(denial));
                }
                let patch = defaults_patch(&object, "", KIND, |typed: &mut AdmittedCrr| {
                    *typed = crr;
                    Ok(())
                })?;
                if patch.0.is_empty() {
                    return Ok(Ok(allowed));
                }
                allowed
                    .with_patch(patch)
                    .map(Ok)
                    .map_err(|e| HandlerError::Internal(format!("encoding patch: {e}")))
            }
            _ => Ok(Ok(allowed)),
        }
    }

    async fn fill_from_pod(
        &self,
        crr: &mut AdmittedCrr,
        request: &AdmissionRequest<DynamicObject>,
    ) -> Result<(), Denial> {
        let Some(pods) = &self.pods else {
            return Err(Denial::Internal("no cluster to read the Pod from".into()));
        };
        let namespace = crr
            .metadata
            .namespace
            .clone()
            .or_else(|| request.namespace.clone())
            .unwrap_or_default();
        let pod_name = crr.spec.pod_name.clone();
        let pod = match pods.pod(&namespace, &pod_name).await {
            Ok(Some(pod)) => pod,
            Ok(None) => return Err(Denial::BadRequest(format!("no found Pod named {pod_name}"))),
            Err(e) => {
                return Err(Denial::Internal(format!(
                    "failed to find Pod {pod_name}: {e}"
                )));
            }
        };
        let node_name = check_pod(&pod)?.to_string();
        let node = match pods.node(&node_name).await {
            Ok(Some(node)) => node,
            Ok(None) => {
                return Err(Denial::BadRequest(format!(
                    "failed to get Node {node_name}: nodes \"{node_name}\" not found"
                )));
            }
            Err(e) => {
                return Err(Denial::Internal(format!(
                    "failed to get Node {node_name}: {e}"
                )));
            }
        };
        inject_pod(crr, &pod, &node)
    }
}

impl AdmissionHandler for MutateCrr {
    fn path(&self) -> &str {
        MUTATE_PATH
    }

    fn webhook(&self) -> WebhookSpec {
        WebhookSpec {
            timeout_seconds: TIMEOUT_SECONDS,
            ..WebhookSpec::crd(
                MUTATE_WEBHOOK,
                WebhookKind::Mutating,
                &["CREATE", "UPDATE"],
                APPS_GROUP,
                &[V1ALPHA1, V1BETA1],
                &[RESOURCE],
            )
        }
    }

    fn handle<'a>(
        &'a self,
        request: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(async move {
            if !self.daemon_enabled {
                return Ok(denied(
                    request,
                    403,
                    format!("feature-gate {KRUISE_DAEMON_GATE} is not enabled"),
                ));
            }
            Ok(match self.decide(request).await? {
                Ok(response) => response,
                Err(denial) => denied(request, denial.code(), denial.message()),
            })
        })
    }
}
