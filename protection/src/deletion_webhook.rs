//! The deletion-protection webhooks of built-in kinds the protection family lends
//! kruise-webhook (gate `ResourcesDeletionProtection`): Namespace, CustomResourceDefinition,
//! apps/v1 Deployment, ReplicaSet and StatefulSet, Service and networking.k8s.io Ingress, at
//! OpenKruise's paths and entry names. Each entry sees only DELETEs of objects carrying the
//! label `policy.kruise.io/delete-protection` (objectSelector) outside `kube-system`, so a
//! stopped webhook never blocks the deletion of anything unlabelled. The decisions are
//! [`crate::deletion`]'s; this shell reads what a `Cascading` check counts (paged lists) and
//! answers 403 with OpenKruise's message.

use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kruise_admission::crd_webhooks::deny_forbidden;
use kruise_admission::protection_log;
use kruise_admission::{
    AdmissionHandler, FailurePolicy, HandlerError, Rule, WebhookKind, WebhookSpec,
};
use kruise_core::api::keys::DELETION_PROTECTION_KEY;
use kruise_runtime::Metrics;
use kruise_runtime::family::StepContext;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde_json::Value;

use crate::deletion::{
    CRD_CASCADING_GATE, Deleted, KUBE_SYSTEM, Protected, Step, crd_verdict, decide, is_claim_bound,
    is_pod_active, namespace_verdict,
};

/// The gate that switches deletion protection on (off by default, as in OpenKruise).
pub const GATE: &str = "ResourcesDeletionProtection";
/// Objects per page when a `Cascading` check counts.
const PAGE: u32 = 500;

/// The built-in kinds protected, and how each is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `/validate-namespace`.
    Namespace,
    /// `/validate-customresourcedefinition`.
    CustomResourceDefinition,
    /// `/validate-apps-deployment`, `/validate-apps-replicaset`, `/validate-apps-statefulset`.
    Workload,
    /// `/validate-service`, `/validate-ingress`: `Always` only.
    AlwaysOnly,
}

/// One protected kind's webhook: where it is served and what its entry matches.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// URL path (OpenKruise's).
    pub path: &'static str,
    /// Webhook entry name (OpenKruise's).
    pub webhook: &'static str,
    /// API group of the kind.
    pub group: &'static str,
    /// Versions the entry matches.
    pub versions: &'static [&'static str],
    /// The kind's resource.
    pub resource: &'static str,
    /// How it is checked.
    pub kind: Kind,
}

/// Every protected built-in kind, as OpenKruise registers them.
pub const TARGETS: [Target; 7] = [
    Target {
        path: "/validate-namespace",
        webhook: "vnamespace.kb.io",
        group: "",
        versions: &["v1"],
        resource: "namespaces",
        kind: Kind::Namespace,
    },
    Target {
        path: "/validate-customresourcedefinition",
        webhook: "vcustomresourcedefinition.kb.io",
        group: "apiextensions.k8s.io",
        versions: &["v1", "v1beta1"],
        resource: "customresourcedefinitions",
        kind: Kind::CustomResourceDefinition,
    },
    Target {
        path: "/validate-apps-deployment",
        webhook: "vbuiltindeployment.kb.io",
        group: "apps",
        versions: &["v1"],
        resource: "deployments",
        kind: Kind::Workload,
    },
    Target {
        path: "/validate-apps-replicaset",
        webhook: "vbuiltinreplicaset.kb.io",
        group: "apps",
        versions: &["v1"],
        resource: "replicasets",
        kind: Kind::Workload,
    },
    Target {
        path: "/validate-apps-statefulset",
        webhook: "vbuiltinstatefulset.kb.io",
        group: "apps",
        versions: &["v1"],
        resource: "statefulsets",
        kind: Kind::Workload,
    },
    Target {
        path: "/validate-service",
        webhook: "vservice.kb.io",
        group: "",
        versions: &["v1"],
        resource: "services",
        kind: Kind::AlwaysOnly,
    },
    Target {
        path: "/validate-ingress",
        webhook: "vingress.kb.io",
        group: "networking.k8s.io",
        versions: &["v1", "v1beta1"],
        resource: "ingresses",
        kind: Kind::AlwaysOnly,
    },
];

/// What a `Cascading` check counts, from the cluster (or a test's fixture). An error is
/// the reason the list failed.
pub trait Inventory: Send + Sync + 'static {
    /// Active pods in `namespace` ([`is_pod_active`]).
    fn active_pods<'a>(&'a self, namespace: &'a str) -> BoxFuture<'a, Result<usize, String>>;
    /// Bound claims not being deleted in `namespace` ([`is_claim_bound`]).
    fn bound_claims<'a>(&'a self, namespace: &'a str) -> BoxFuture<'a, Result<usize, String>>;
    /// Objects of `resource`, in every namespace, not being deleted.
    fn active_objects<'a>(
        &'a self,
        resource: &'a ApiResource,
    ) -> BoxFuture<'a, Result<usize, String>>;
}

/// The cluster's inventory, read through kruise-webhook's client a page at a time.
pub struct LiveInventory(pub kube::Client);

/// Counts the objects of `api` for which `counts` holds, [`PAGE`] at a time.
async fn count_paged<K>(api: Api<K>, counts: impl Fn(&K) -> bool) -> Result<usize, String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut total = 0;
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = api.list(&params).await.map_err(|e| e.to_string())?;
        total += page.items.iter().filter(|item| counts(item)).count();
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(total),
        }
    }
}

impl Inventory for LiveInventory {
    fn active_pods<'a>(&'a self, namespace: &'a str) -> BoxFuture<'a, Result<usize, String>> {
        let api = Api::<Pod>::namespaced(self.0.clone(), namespace);
        Box::pin(count_paged(api, is_pod_active))
    }

    fn bound_claims<'a>(&'a self, namespace: &'a str) -> BoxFuture<'a, Result<usize, String>> {
        let api = Api::<PersistentVolumeClaim>::namespaced(self.0.clone(), namespace);
        Box::pin(count_paged(api, is_claim_bound))
    }

    fn active_objects<'a>(
        &'a self,
        resource: &'a ApiResource,
    ) -> BoxFuture<'a, Result<usize, String>> {
        let api = Api::<DynamicObject>::all_with(self.0.clone(), resource);
        Box::pin(count_paged(api, |o| {
            o.metadata.deletion_timestamp.is_none()
        }))
    }
}

/// No cluster (`kruise-webhook manifests`): every count fails, so nothing is let through
/// that a count would have to allow.
pub struct NoInventory;

impl Inventory for NoInventory {
    fn active_pods<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<usize, String>> {
        Box::pin(async { Err("no cluster to list from".to_string()) })
    }

    fn bound_claims<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<usize, String>> {
        Box::pin(async { Err("no cluster to list from".to_string()) })
    }

    fn active_objects<'a>(&'a self, _: &'a ApiResource) -> BoxFuture<'a, Result<usize, String>> {
        Box::pin(async { Err("no cluster to list from".to_string()) })
    }
}

/// `{name, username}` of OpenKruise's namespace and CRD counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NameLabels {
    /// The object's name.
    pub name: String,
    /// Who asked for the deletion.
    pub username: String,
}

/// `{kind_namespace_name, username}` of OpenKruise's workload counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WorkloadLabels {
    /// `<Kind>_<namespace>_<name>`.
    pub kind_namespace_name: String,
    /// Who asked for the deletion.
    pub username: String,
}

/// OpenKruise's refusal counters: `namespace_deletion_protection`,
/// `crd_deletion_protection`, `workload_deletion_protection` (Service and Ingress refusals
/// are not counted, as in OpenKruise).
#[derive(Clone, Default)]
pub struct DeletionMetrics {
    /// Refused namespace deletions.
    pub namespace: Family<NameLabels, Counter>,
    /// Refused CRD deletions.
    pub crd: Family<NameLabels, Counter>,
    /// Refused Deployment, ReplicaSet and StatefulSet deletions.
    pub workload: Family<WorkloadLabels, Counter>,
}

impl DeletionMetrics {
    /// The counters, registered in `metrics`.
    pub fn register(metrics: &Metrics) -> Self {
        let counters = DeletionMetrics::default();
        metrics.register(
            "namespace_deletion_protection",
            "Namespace Deletion Protection",
            counters.namespace.clone(),
        );
        metrics.register(
            "crd_deletion_protection",
            "CustomResourceDefinition Deletion Protection",
            counters.crd.clone(),
        );
        metrics.register(
            "workload_deletion_protection",
            "Workload Deletion Protection",
            counters.workload.clone(),
        );
        counters
    }

    fn count(&self, kind: Kind, request: &AdmissionRequest<DynamicObject>, name: &str) {
        let username = request.user_info.username.clone().unwrap_or_default();
        match kind {
            Kind::Namespace => self.namespace.get_or_create(&NameLabels {
                name: name.to_string(),
                username,
            }),
            Kind::CustomResourceDefinition => self.crd.get_or_create(&NameLabels {
                name: name.to_string(),
                username,
            }),
            Kind::Workload => self.workload.get_or_create(&WorkloadLabels {
                kind_namespace_name: format!(
                    "{}_{}_{name}",
                    request.kind.kind,
                    request.namespace.as_deref().unwrap_or_default()
                ),
                username,
            }),
            Kind::AlwaysOnly => return,
        }
        .inc();
    }
}

/// One protected kind's validating webhook.
pub struct DeletionProtection {
    /// The kind.
    pub target: Target,
    /// Whether `DeletionProtectionForCRDCascadingGate` is on.
    pub crd_cascading_gate: bool,
    /// What `Cascading` counts.
    pub inventory: Arc<dyn Inventory>,
    /// The refusal counters.
    pub metrics: DeletionMetrics,
}

/// Objects labelled `policy.kruise.io/delete-protection` (any value).
fn labelled() -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: DELETION_PROTECTION_KEY.into(),
            operator: "Exists".into(),
            values: None,
        }]),
        match_labels: None,
    }
}

/// Every namespace but `kube-system` (and, for the Namespace kind, every namespace object
/// but `kube-system` itself).
fn not_kube_system() -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "kubernetes.io/metadata.name".into(),
            operator: "NotIn".into(),
            values: Some(vec![KUBE_SYSTEM.into()]),
        }]),
        match_labels: None,
    }
}

/// The resource whose objects a CRD (the old object of the request, as JSON) defines, at
/// its storage version.
fn defined_resource(crd: &Value) -> Option<ApiResource> {
    let text = |pointer: &str| crd.pointer(pointer).and_then(Value::as_str);
    let group = text("/spec/group")?;
    let version = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|versions| {
            versions
                .iter()
                .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        })
        .and_then(|v| v.get("name").and_then(Value::as_str))
        .or_else(|| text("/spec/version"))?;
    Some(ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: text("/spec/names/kind")?.into(),
        plural: text("/spec/names/plural")?.into(),
    })
}

impl DeletionProtection {
    async fn validate(
        &self,
        request: &AdmissionRequest<DynamicObject>,
    ) -> Result<AdmissionResponse, HandlerError> {
        let allowed = AdmissionResponse::from(request);
        if request.operation != Operation::Delete || request.sub_resource.is_some() {
            return Ok(allowed);
        }
        // kube-apiserver before 1.16 sent no old object on DELETE; OpenKruise lets it by.
        let Some(old) = &request.old_object else {
            return Ok(allowed);
        };
        let name = old.metadata.name.clone().unwrap_or_default();
        let json = serde_json::to_value(old)
            .map_err(|e| HandlerError::Internal(format!("encoding the old object: {e}")))?;
        let protected = match self.target.kind {
            Kind::Namespace => Protected::Namespace,
            Kind::CustomResourceDefinition => Protected::CustomResourceDefinition {
                cascading_gate: self.crd_cascading_gate,
            },
            Kind::Workload => Protected::Workload {
                replicas: json
                    .pointer("/spec/replicas")
                    .and_then(Value::as_i64)
                    .unwrap_or(1),
            },
            Kind::AlwaysOnly => Protected::AlwaysOnly,
        };
        let namespace = match self.target.kind {
            Kind::Namespace => Some(name.as_str()),
            _ => request.namespace.as_deref(),
        };
        let deleted = Deleted {
            labels: old.metadata.labels.as_ref(),
            namespace,
            deleting: old.metadata.deletion_timestamp.is_some(),
        };
        let refusal = match decide(protected, deleted) {
            Step::Allow => None,
            Step::Deny(message) => Some(message),
            Step::CountNamespace => self.namespace_refusal(&name).await,
            Step::CountObjects => Some(match defined_resource(&json) {
                Some(resource) => match self.inventory.active_objects(&resource).await {
                    Ok(count) => match crd_verdict(count) {
                        Some(message) => message,
                        None => return Ok(allowed),
                    },
                    Err(e) => format!(
                        "failed to list CRs of {}, Kind={}: {e}",
                        resource.api_version, resource.kind
                    ),
                },
                None => "failed to list CRs: the CRD names no group, kind or storage version"
                    .to_string(),
            }),
        };
        let Some(message) = refusal else {
            return Ok(allowed);
        };
        self.metrics.count(self.target.kind, request, &name);
        // OpenKruise logs a namespace or CRD with no namespace.
        let logged_namespace = match self.target.kind {
            Kind::Namespace | Kind::CustomResourceDefinition => "",
            _ => request.namespace.as_deref().unwrap_or_default(),
        };
        protection_log::record(
            protection_log::EVENT_DELETION_PROTECTION,
            &request.kind.kind,
            logged_namespace,
            &name,
            request.user_info.username.as_deref().unwrap_or_default(),
        );
        tracing::info!(
            kind = %request.kind.kind,
            namespace = request.namespace.as_deref().unwrap_or_default(),
            name,
            username = request.user_info.username.as_deref().unwrap_or_default(),
            "deletion protection refused a DELETE"
        );
        Ok(deny_forbidden(request, message))
    }

    /// Why a `Cascading` namespace may not go: its active pods, else its Bound claims.
    async fn namespace_refusal(&self, namespace: &str) -> Option<String> {
        let pods = match self.inventory.active_pods(namespace).await {
            Ok(pods) => pods,
            Err(e) => {
                return Some(format!(
                    "forbidden by ResourcesProtectionDeletion for list pods error: {e}"
                ));
            }
        };
        if let Some(message) = namespace_verdict(pods, 0) {
            return Some(message);
        }
        match self.inventory.bound_claims(namespace).await {
            Ok(claims) => namespace_verdict(0, claims),
            Err(e) => Some(format!(
                "forbidden by ResourcesProtectionDeletion for list pvc error: {e}"
            )),
        }
    }
}

impl AdmissionHandler for DeletionProtection {
    fn path(&self) -> &str {
        self.target.path
    }

    fn webhook(&self) -> WebhookSpec {
        let target = self.target;
        WebhookSpec {
            name: target.webhook.into(),
            kind: WebhookKind::Validating,
            rules: vec![Rule::new(
                &["DELETE"],
                target.group,
                target.versions,
                &[target.resource],
            )],
            failure_policy: FailurePolicy::Fail,
            // A CRD is cluster-scoped: no namespace to select by.
            namespace_selector: (target.kind != Kind::CustomResourceDefinition)
                .then(not_kube_system),
            object_selector: Some(labelled()),
            timeout_seconds: 10,
        }
    }

    fn handle<'a>(
        &'a self,
        request: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(self.validate(request))
    }
}

/// Every protected kind's webhook, counting refusals in `metrics` and reading through
/// `inventory`.
pub fn handlers(
    crd_cascading_gate: bool,
    inventory: Arc<dyn Inventory>,
    metrics: &Metrics,
) -> Vec<Arc<dyn AdmissionHandler>> {
    let counters = DeletionMetrics::register(metrics);
    TARGETS
        .iter()
        .map(|target| -> Arc<dyn AdmissionHandler> {
            Arc::new(DeletionProtection {
                target: *target,
                crd_cascading_gate,
                inventory: inventory.clone(),
                metrics: counters.clone(),
            })
        })
        .collect()
}

/// What the protection family lends kruise-webhook: the webhooks of every protected
/// built-in kind while `ResourcesDeletionProtection` is on, none while it is off (so
/// nothing is published that could block a deletion).
pub fn lent_webhooks(ctx: &StepContext) -> Vec<Arc<dyn AdmissionHandler>> {
    if !ctx.gates.enabled(GATE) {
        return Vec::new();
    }
    let inventory: Arc<dyn Inventory> = match &ctx.live {
        Some(live) => Arc::new(LiveInventory(live.client.clone())),
        None => Arc::new(NoInventory),
    };
    handlers(
        ctx.gates.enabled(CRD_CASCADING_GATE),
        inventory,
        &ctx.metrics,
    )
}
