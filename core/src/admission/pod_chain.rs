//! The pod mutating chain: steps lent by the enabled families run in OpenKruise's order on
//! one copy of the pod, and the webhook answers with a single JSONPatch from the original
//! to the result. Steps must be idempotent (a pod may pass the chain more than once when
//! several scoped webhook entries match it), and each declares the pods it can act on so
//! the webhook configuration only sends those (a stopped webhook then cannot block pods no
//! enabled family cares about).
//!
//! The validating chain ([`ValidatingPodChain`], `/validate-pod`) is its counterpart for pod
//! updates, deletions and evictions: steps lent by the families ([`PodValidator`]) each
//! answer for the pods they scope; the first refusal answers, an eviction refused with 429
//! as kube-apiserver refuses one a PodDisruptionBudget forbids.

use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube_core::DynamicObject;
use kube_core::admission::{AdmissionRequest, AdmissionResponse, Operation};

use super::raw_patch::patch_against_raw;
use super::{AdmissionHandler, FailurePolicy, HandlerError, Rule, WebhookKind, WebhookSpec};

/// Which pods a step may act on: the pods in namespaces matching `namespace_selector` whose
/// labels match `object_selector` (`None` = any).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodScope {
    /// Namespaces (by their labels; `kubernetes.io/metadata.name` names one).
    pub namespace_selector: Option<LabelSelector>,
    /// Pods (by their labels).
    pub object_selector: Option<LabelSelector>,
}

/// What a step learns about the request besides the pod.
#[derive(Clone, Debug)]
pub struct PodRequest {
    /// CREATE or UPDATE.
    pub operation: Operation,
    /// The request namespace (a pod being created may not carry it yet).
    pub namespace: String,
    /// True for dry-run requests: steps must not write anything elsewhere.
    pub dry_run: bool,
}

/// One step of the chain.
pub trait PodMutator: Send + Sync + 'static {
    /// Short name, used in logs, metrics and error messages (`sidecarset`, `readiness-gate`).
    fn name(&self) -> &'static str;
    /// Where OpenKruise runs this step (lower first): readiness gate 10, SidecarSet 30,
    /// container launch priority 40, PodUnavailableBudget 50.
    fn order(&self) -> u32;
    /// The pods this step can change now. An empty list means none, so the webhook need
    /// not see any pod on this step's behalf.
    fn scopes(&self) -> Vec<PodScope>;
    /// Whether [`scopes`](Self::scopes) is complete: false while the step's view of the
    /// cluster is still loading. Until every step's is, kruise-webhook keeps the entries
    /// already published (see [`AdmissionHandler::webhooks_known`]).
    fn scopes_known(&self) -> bool {
        true
    }
    /// Whether a failure to reach the webhook should reject pods in this step's scopes.
    fn failure_policy(&self) -> FailurePolicy;
    /// Changes the pod in place; an error rejects the pod with the message.
    fn mutate<'a>(
        &'a self,
        request: &'a PodRequest,
        pod: &'a mut Pod,
    ) -> BoxFuture<'a, Result<(), HandlerError>>;
}

/// The chain, served at `/mutate-pod` as OpenKruise's `mpod.kb.io`.
#[derive(Clone, Default)]
pub struct PodChain {
    steps: Vec<Arc<dyn PodMutator>>,
}

/// The path the chain is served at.
pub const MUTATE_POD_PATH: &str = "/mutate-pod";

impl PodChain {
    /// A chain of `steps`, run in their declared order.
    pub fn new(mut steps: Vec<Arc<dyn PodMutator>>) -> Self {
        steps.sort_by_key(|s| s.order());
        PodChain { steps }
    }

    /// The step names, in order.
    pub fn step_names(&self) -> Vec<&'static str> {
        self.steps.iter().map(|s| s.name()).collect()
    }

    /// One webhook entry per distinct scope of every step (entries after the first are
    /// named `mpod-<n>.kb.io`). A selector can express one conjunction, not a union, so the
    /// union of the steps' scopes becomes several entries; a pod matching more than one is
    /// sent more than once, which idempotent steps make harmless. The failure policy of an
    /// entry is the strictest of the steps sharing it.
    pub fn webhook_specs(&self) -> Vec<WebhookSpec> {
        let mut entries: Vec<(PodScope, FailurePolicy)> = Vec::new();
        for step in &self.steps {
            for scope in step.scopes() {
                match entries.iter_mut().find(|(s, _)| *s == scope) {
                    Some((_, policy)) => {
                        if step.failure_policy() == FailurePolicy::Fail {
                            *policy = FailurePolicy::Fail;
                        }
                    }
                    None => entries.push((scope, step.failure_policy())),
                }
            }
        }
        entries
            .into_iter()
            .enumerate()
            .map(|(i, (scope, policy))| WebhookSpec {
                name: if i == 0 {
                    "mpod.kb.io".to_string()
                } else {
                    format!("mpod-{i}.kb.io")
                },
                kind: WebhookKind::Mutating,
                rules: vec![Rule::new(&["CREATE"], "", &["v1"], &["pods"])],
                failure_policy: policy,
                namespace_selector: Some(without_control_plane(scope.namespace_selector)),
                object_selector: scope.object_selector,
                timeout_seconds: 10,
            })
            .collect()
    }

    /// Runs every step on the decoded pod; the patch from `original` (the pod as sent) to
    /// the result, built on `original` so fields our types do not know stay with their
    /// owner (see [`patch_against_raw`]).
    pub async fn run(
        &self,
        request: &PodRequest,
        original: &serde_json::Value,
    ) -> Result<Option<json_patch::Patch>, HandlerError> {
        let mut pod: Pod =
            serde_json::from_value(original.clone()).map_err(|e| HandlerError::Decode {
                kind: "Pod".into(),
                reason: e.to_string(),
            })?;
        if pod.metadata.namespace.as_deref().unwrap_or("").is_empty() {
            pod.metadata.namespace = Some(request.namespace.clone());
        }
        let decoded = pod.clone();
        for step in &self.steps {
            step.mutate(request, &mut pod)
                .await
                .map_err(|e| HandlerError::Internal(format!("{}: {e}", step.name())))?;
        }
        let patch = patch_against_raw(original, &decoded, &pod)
            .map_err(|e| HandlerError::Internal(format!("encoding the pod: {e}")))?;
        Ok((!patch.0.is_empty()).then_some(patch))
    }
}

/// The distinct scopes, each with the strictest failure policy of the steps sharing it.
fn distinct(
    scopes: impl IntoIterator<Item = (PodScope, FailurePolicy)>,
) -> Vec<(PodScope, FailurePolicy)> {
    let mut entries: Vec<(PodScope, FailurePolicy)> = Vec::new();
    for (scope, policy) in scopes {
        match entries.iter_mut().find(|(s, _)| *s == scope) {
            Some((_, strictest)) => {
                if policy == FailurePolicy::Fail {
                    *strictest = FailurePolicy::Fail;
                }
            }
            None => entries.push((scope, policy)),
        }
    }
    entries
}

/// OpenKruise never mutates pods in namespaces labelled `control-plane` (its own namespace
/// among them), so a broken webhook cannot stop its own pods from starting.
fn without_control_plane(selector: Option<LabelSelector>) -> LabelSelector {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    let mut s = selector.unwrap_or_default();
    let mut exprs = s.match_expressions.take().unwrap_or_default();
    exprs.push(LabelSelectorRequirement {
        key: "control-plane".into(),
        operator: "DoesNotExist".into(),
        values: None,
    });
    s.match_expressions = Some(exprs);
    s
}

impl AdmissionHandler for PodChain {
    fn path(&self) -> &str {
        MUTATE_POD_PATH
    }

    fn webhook(&self) -> WebhookSpec {
        // The first entry; `webhook_specs` has all of them.
        self.webhook_specs()
            .into_iter()
            .next()
            .unwrap_or(WebhookSpec {
                name: "mpod.kb.io".into(),
                kind: WebhookKind::Mutating,
                rules: vec![Rule::new(&["CREATE"], "", &["v1"], &["pods"])],
                failure_policy: FailurePolicy::Ignore,
                namespace_selector: Some(without_control_plane(None)),
                object_selector: None,
                timeout_seconds: 10,
            })
    }

    fn webhooks(&self) -> Vec<WebhookSpec> {
        self.webhook_specs()
    }

    fn webhooks_known(&self) -> bool {
        self.steps.iter().all(|s| s.scopes_known())
    }

    fn handle<'a>(
        &'a self,
        req: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(async move {
            if req.operation != Operation::Create {
                return Ok(AdmissionResponse::from(req));
            }
            let Some(obj) = &req.object else {
                return Ok(AdmissionResponse::from(req));
            };
            let original =
                serde_json::to_value(obj).map_err(|e| HandlerError::Internal(e.to_string()))?;
            let request = PodRequest {
                operation: req.operation.clone(),
                namespace: req.namespace.clone().unwrap_or_default(),
                dry_run: req.dry_run,
            };
            match self.run(&request, &original).await? {
                None => Ok(AdmissionResponse::from(req)),
                Some(patch) => AdmissionResponse::from(req)
                    .with_patch(patch)
                    .map_err(|e| HandlerError::Internal(e.to_string())),
            }
        })
    }
}

/// A pod operation the validating chain sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PodOperation {
    /// A change of the pod (`UPDATE pods`, no subresource).
    Update,
    /// A deletion of the pod (`DELETE pods`, no subresource).
    Delete,
    /// An eviction (`CREATE pods/eviction`).
    Evict,
}

/// What a validating step is asked about.
#[derive(Clone, Debug)]
pub struct PodValidationRequest {
    /// The operation.
    pub operation: PodOperation,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// The pod as it is: the old pod of an UPDATE or a DELETE; `None` for an eviction,
    /// whose request carries only the Eviction (a step that needs the pod reads it).
    pub pod: Option<Pod>,
    /// The pod as it would become (UPDATE only).
    pub new_pod: Option<Pod>,
    /// True for dry-run requests: steps must not write anything.
    pub dry_run: bool,
    /// Who asked.
    pub username: String,
}

/// A validating step's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodVerdict {
    /// Let it through.
    Allow,
    /// Refuse it with this message.
    Deny(String),
}

/// One step of the validating chain (a family's check of pod updates, deletions and
/// evictions, such as PodUnavailableBudget's).
pub trait PodValidator: Send + Sync + 'static {
    /// Short name, used in logs and error messages (`protection`).
    fn name(&self) -> &'static str;
    /// Where it runs (lower first); the first refusal answers.
    fn order(&self) -> u32;
    /// The pods this step may refuse operations on now. An empty list means none, so the
    /// webhook need not see any pod on this step's behalf.
    fn scopes(&self) -> Vec<PodScope>;
    /// Whether [`scopes`](Self::scopes) is complete (see [`PodMutator::scopes_known`]).
    fn scopes_known(&self) -> bool {
        true
    }
    /// Whether a failure to reach the webhook should refuse operations in its scopes.
    fn failure_policy(&self) -> FailurePolicy;
    /// Decides on one operation; an error refuses it with the message.
    fn validate<'a>(
        &'a self,
        request: &'a PodValidationRequest,
    ) -> BoxFuture<'a, Result<PodVerdict, HandlerError>>;
}

/// The validating chain, served at `/validate-pod` as OpenKruise's `vpod.kb.io` (pod UPDATE
/// and DELETE) and `vpodeviction.kb.io` (`pods/eviction` CREATE).
#[derive(Clone, Default)]
pub struct ValidatingPodChain {
    steps: Vec<Arc<dyn PodValidator>>,
}

/// The path the validating chain is served at.
pub const VALIDATE_POD_PATH: &str = "/validate-pod";
/// HTTP 429: how kube-apiserver refuses an eviction a PodDisruptionBudget forbids, so
/// `kubectl drain` waits and retries instead of giving up.
const TOO_MANY_REQUESTS: u16 = 429;

impl ValidatingPodChain {
    /// A chain of `steps`, run in their declared order.
    pub fn new(mut steps: Vec<Arc<dyn PodValidator>>) -> Self {
        steps.sort_by_key(|s| s.order());
        ValidatingPodChain { steps }
    }

    /// Whether no step is in the chain.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The step names, in order.
    pub fn step_names(&self) -> Vec<&'static str> {
        self.steps.iter().map(|s| s.name()).collect()
    }

    /// The entries of every step's scopes: `vpod[-n].kb.io` for pod UPDATE and DELETE, one
    /// per distinct scope; `vpodeviction[-n].kb.io` for evictions, one per distinct
    /// namespace selector and without an object selector — the object of an eviction is the
    /// Eviction, whose labels are not the pod's, so kube-apiserver would match an object
    /// selector against nothing. Never in `control-plane` namespaces.
    pub fn webhook_specs(&self) -> Vec<WebhookSpec> {
        let scopes: Vec<(PodScope, FailurePolicy)> = self
            .steps
            .iter()
            .flat_map(|step| {
                let policy = step.failure_policy();
                step.scopes().into_iter().map(move |scope| (scope, policy))
            })
            .collect();
        let pods = distinct(scopes.iter().cloned());
        let evictions = distinct(scopes.into_iter().map(|(scope, policy)| {
            (
                PodScope {
                    namespace_selector: scope.namespace_selector,
                    object_selector: None,
                },
                policy,
            )
        }));
        let entries = |name: &str, rule: Rule, scopes: Vec<(PodScope, FailurePolicy)>| {
            scopes
                .into_iter()
                .enumerate()
                .map(|(i, (scope, policy))| WebhookSpec {
                    name: if i == 0 {
                        format!("{name}.kb.io")
                    } else {
                        format!("{name}-{i}.kb.io")
                    },
                    kind: WebhookKind::Validating,
                    rules: vec![rule.clone()],
                    failure_policy: policy,
                    namespace_selector: Some(without_control_plane(scope.namespace_selector)),
                    object_selector: scope.object_selector,
                    timeout_seconds: 10,
                })
                .collect::<Vec<_>>()
        };
        let mut specs = entries(
            "vpod",
            Rule::new(&["UPDATE", "DELETE"], "", &["v1"], &["pods"]),
            pods,
        );
        specs.extend(entries(
            "vpodeviction",
            Rule::new(&["CREATE"], "", &["v1"], &["pods/eviction"]),
            evictions,
        ));
        specs
    }

    /// Runs every step on `request` until one refuses.
    pub async fn run(&self, request: &PodValidationRequest) -> Result<PodVerdict, HandlerError> {
        for step in &self.steps {
            let verdict = step
                .validate(request)
                .await
                .map_err(|e| HandlerError::Internal(format!("{}: {e}", step.name())))?;
            if verdict != PodVerdict::Allow {
                return Ok(verdict);
            }
        }
        Ok(PodVerdict::Allow)
    }

    /// The request as the steps see it; `None` for what the chain lets through unasked
    /// (subresources other than eviction, other operations).
    fn request_of(
        req: &AdmissionRequest<DynamicObject>,
    ) -> Result<Option<PodValidationRequest>, HandlerError> {
        let decode = |obj: &Option<DynamicObject>| -> Result<Option<Pod>, HandlerError> {
            obj.as_ref()
                .map(|o| {
                    serde_json::to_value(o)
                        .and_then(serde_json::from_value::<Pod>)
                        .map_err(|e| HandlerError::Decode {
                            kind: "Pod".into(),
                            reason: e.to_string(),
                        })
                })
                .transpose()
        };
        let sub_resource = req.sub_resource.as_deref().unwrap_or("");
        let (operation, pod, new_pod) = match (&req.operation, sub_resource) {
            (Operation::Update, "") => (
                PodOperation::Update,
                decode(&req.old_object)?,
                decode(&req.object)?,
            ),
            (Operation::Delete, "") => (PodOperation::Delete, decode(&req.old_object)?, None),
            (Operation::Create, "eviction") => (PodOperation::Evict, None, None),
            _ => return Ok(None),
        };
        Ok(Some(PodValidationRequest {
            operation,
            namespace: req.namespace.clone().unwrap_or_default(),
            name: req.name.clone(),
            pod,
            new_pod,
            dry_run: req.dry_run,
            username: req.user_info.username.clone().unwrap_or_default(),
        }))
    }
}

impl AdmissionHandler for ValidatingPodChain {
    fn path(&self) -> &str {
        VALIDATE_POD_PATH
    }

    fn webhook(&self) -> WebhookSpec {
        // The first entry; `webhook_specs` has all of them.
        self.webhook_specs()
            .into_iter()
            .next()
            .unwrap_or(WebhookSpec {
                name: "vpod.kb.io".into(),
                kind: WebhookKind::Validating,
                rules: vec![Rule::new(&["UPDATE", "DELETE"], "", &["v1"], &["pods"])],
                failure_policy: FailurePolicy::Ignore,
                namespace_selector: Some(without_control_plane(None)),
                object_selector: None,
                timeout_seconds: 10,
            })
    }

    fn webhooks(&self) -> Vec<WebhookSpec> {
        self.webhook_specs()
    }

    fn webhooks_known(&self) -> bool {
        self.steps.iter().all(|s| s.scopes_known())
    }

    fn handle<'a>(
        &'a self,
        req: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(async move {
            let Some(request) = Self::request_of(req)? else {
                return Ok(AdmissionResponse::from(req));
            };
            match self.run(&request).await? {
                PodVerdict::Allow => Ok(AdmissionResponse::from(req)),
                PodVerdict::Deny(message) if request.operation == PodOperation::Evict => {
                    let mut response = AdmissionResponse::from(req).deny(message);
                    response.result.code = TOO_MANY_REQUESTS;
                    response.result.reason = "TooManyRequests".into();
                    Ok(response)
                }
                PodVerdict::Deny(message) => Ok(super::denied(req, 403, message)),
            }
        })
    }
}

/// Step 1 of OpenKruise's chain: pods controlled by an `apps.kruise.io` workload (or every
/// pod, with the `KruisePodReadinessGate` gate) get the `KruisePodReady` readiness gate, so
/// Kruise can hold them not-ready (e.g. before a deletion or an in-place update).
pub struct KruisePodReadyGate {
    /// The `KruisePodReadinessGate` feature gate: every pod, not only Kruise workloads'.
    pub all_pods: bool,
}

/// The readiness gate condition type.
pub const KRUISE_POD_READY: &str = "KruisePodReady";

impl PodMutator for KruisePodReadyGate {
    fn name(&self) -> &'static str {
        "readiness-gate"
    }
    fn order(&self) -> u32 {
        10
    }
    fn scopes(&self) -> Vec<PodScope> {
        // Pods of Kruise workloads cannot be told apart by labels alone, so the step needs
        // every pod; it is best-effort (Ignore), so a down webhook blocks nothing.
        vec![PodScope::default()]
    }
    fn failure_policy(&self) -> FailurePolicy {
        FailurePolicy::Ignore
    }
    fn mutate<'a>(
        &'a self,
        _request: &'a PodRequest,
        pod: &'a mut Pod,
    ) -> BoxFuture<'a, Result<(), HandlerError>> {
        Box::pin(async move {
            let kruise_owned = pod
                .metadata
                .owner_references
                .as_deref()
                .unwrap_or_default()
                .iter()
                .any(|o| {
                    o.controller == Some(true)
                        && o.api_version.split('/').next() == Some("apps.kruise.io")
                });
            if !(kruise_owned || self.all_pods) {
                return Ok(());
            }
            let spec = pod.spec.get_or_insert_with(Default::default);
            let gates = spec.readiness_gates.get_or_insert_with(Vec::new);
            if !gates.iter().any(|g| g.condition_type == KRUISE_POD_READY) {
                gates.push(k8s_openapi::api::core::v1::PodReadinessGate {
                    condition_type: KRUISE_POD_READY.into(),
                });
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(owner: Option<&str>) -> serde_json::Value {
        let mut p = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "main", "image": "nginx"}]}
        });
        if let Some(api) = owner {
            p["metadata"]["ownerReferences"] = json!([{
                "apiVersion": api, "kind": "CloneSet", "name": "web", "uid": "u1", "controller": true
            }]);
        }
        p
    }

    fn request() -> PodRequest {
        PodRequest {
            operation: Operation::Create,
            namespace: "default".into(),
            dry_run: false,
        }
    }

    #[tokio::test]
    async fn readiness_gate_for_kruise_workload_pods_only() {
        let chain = PodChain::new(vec![Arc::new(KruisePodReadyGate { all_pods: false })]);
        let patch = chain
            .run(&request(), &pod(Some("apps.kruise.io/v1beta1")))
            .await
            .unwrap()
            .unwrap();
        let v = serde_json::to_value(&patch).unwrap();
        assert_eq!(
            v,
            json!([
                {"op": "add", "path": "/spec/readinessGates", "value": [{"conditionType": "KruisePodReady"}]}
            ])
        );
        // A Deployment's pod is left alone: no patch at all.
        assert_eq!(
            chain.run(&request(), &pod(Some("apps/v1"))).await.unwrap(),
            None
        );
    }

    #[tokio::test]
    async fn steps_are_idempotent_through_the_chain() {
        let chain = PodChain::new(vec![Arc::new(KruisePodReadyGate { all_pods: true })]);
        let mut once = pod(None);
        let patch = chain.run(&request(), &once).await.unwrap().unwrap();
        json_patch::patch(&mut once, &patch).unwrap();
        assert_eq!(chain.run(&request(), &once).await.unwrap(), None);
    }

    /// Inserts a sidecar before every other container, as a BeforeAppContainer SidecarSet.
    struct SidecarFirst;

    impl PodMutator for SidecarFirst {
        fn name(&self) -> &'static str {
            "sidecar-first"
        }
        fn order(&self) -> u32 {
            30
        }
        fn scopes(&self) -> Vec<PodScope> {
            vec![PodScope::default()]
        }
        fn failure_policy(&self) -> FailurePolicy {
            FailurePolicy::Fail
        }
        fn mutate<'a>(
            &'a self,
            _request: &'a PodRequest,
            pod: &'a mut Pod,
        ) -> BoxFuture<'a, Result<(), HandlerError>> {
            Box::pin(async move {
                let spec = pod.spec.get_or_insert_with(Default::default);
                if spec.containers.first().map(|c| c.name.as_str()) != Some("sidecar") {
                    spec.containers.insert(
                        0,
                        k8s_openapi::api::core::v1::Container {
                            name: "sidecar".into(),
                            image: Some("envoy".into()),
                            ..Default::default()
                        },
                    );
                }
                Ok(())
            })
        }
    }

    #[tokio::test]
    async fn fields_newer_than_the_compiled_api_stay_on_the_app_container() {
        let chain = PodChain::new(vec![
            Arc::new(SidecarFirst),
            Arc::new(KruisePodReadyGate { all_pods: true }),
        ]);
        let mut original = pod(None);
        // Not a field of Kubernetes 1.33's Container, the API version compiled in.
        let rules = json!([{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]);
        original["spec"]["containers"][0]["restartPolicyRules"] = rules.clone();
        let patch = chain.run(&request(), &original).await.unwrap().unwrap();
        let mut patched = original.clone();
        json_patch::patch(&mut patched, &patch).unwrap();
        let containers = patched["spec"]["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 2);
        assert_eq!(containers[0]["name"], "sidecar");
        assert!(containers[0].get("restartPolicyRules").is_none());
        assert_eq!(containers[1]["name"], "main");
        assert_eq!(containers[1]["restartPolicyRules"], rules);
        // The namespace the chain fills in for its steps is not written.
        assert!(patched["metadata"].get("namespace").is_none());
        assert_eq!(chain.run(&request(), &patched).await.unwrap(), None);
    }

    /// Refuses every operation on pods labelled `protected=true`.
    struct Protected;

    impl PodValidator for Protected {
        fn name(&self) -> &'static str {
            "protected"
        }
        fn order(&self) -> u32 {
            50
        }
        fn scopes(&self) -> Vec<PodScope> {
            vec![PodScope {
                namespace_selector: None,
                object_selector: Some(LabelSelector {
                    match_labels: Some([("protected".to_string(), "true".to_string())].into()),
                    ..Default::default()
                }),
            }]
        }
        fn failure_policy(&self) -> FailurePolicy {
            FailurePolicy::Fail
        }
        fn validate<'a>(
            &'a self,
            request: &'a PodValidationRequest,
        ) -> BoxFuture<'a, Result<PodVerdict, HandlerError>> {
            Box::pin(async move {
                Ok(PodVerdict::Deny(format!(
                    "{:?} of {}/{} refused",
                    request.operation, request.namespace, request.name
                )))
            })
        }
    }

    fn validation_review(
        operation: &str,
        sub_resource: Option<&str>,
    ) -> AdmissionRequest<DynamicObject> {
        let pod = pod(None);
        let review = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "subResource": sub_resource, "name": "p", "namespace": "default",
                "operation": operation, "userInfo": {"username": "admin"},
                "object": if operation == "UPDATE" { pod.clone() } else { json!(null) },
                "oldObject": if operation == "CREATE" { json!(null) } else { pod },
                "dryRun": false
            }
        });
        let review: kube_core::admission::AdmissionReview<DynamicObject> =
            serde_json::from_value(review).unwrap();
        review.try_into().unwrap()
    }

    #[tokio::test]
    async fn the_validating_chain_refuses_evictions_with_429_and_the_rest_with_403() {
        let chain = ValidatingPodChain::new(vec![Arc::new(Protected)]);
        let evict = chain
            .handle(&validation_review("CREATE", Some("eviction")))
            .await
            .unwrap();
        assert!(!evict.allowed);
        assert_eq!(evict.result.code, 429);
        assert_eq!(evict.result.reason, "TooManyRequests");
        assert_eq!(evict.result.message, "Evict of default/p refused");
        let delete = chain
            .handle(&validation_review("DELETE", None))
            .await
            .unwrap();
        assert_eq!((delete.allowed, delete.result.code), (false, 403));
        assert_eq!(delete.result.message, "Delete of default/p refused");
        let update = chain
            .handle(&validation_review("UPDATE", None))
            .await
            .unwrap();
        assert_eq!(update.result.message, "Update of default/p refused");
        // Status updates and other subresources are not the chain's.
        let status = chain
            .handle(&validation_review("UPDATE", Some("status")))
            .await
            .unwrap();
        assert!(status.allowed);
    }

    #[test]
    fn validating_entries_per_scope_for_pods_and_evictions() {
        let chain = ValidatingPodChain::new(vec![Arc::new(Protected)]);
        let specs = chain.webhook_specs();
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["vpod.kb.io", "vpodeviction.kb.io"]);
        assert_eq!(specs[1].rules[0].resources, ["pods/eviction"]);
        assert_eq!(specs[1].rules[0].operations, ["CREATE"]);
        assert_eq!(specs[0].rules[0].operations, ["UPDATE", "DELETE"]);
        assert!(specs[0].object_selector.is_some());
        assert_eq!(specs[1].object_selector, None);
        for spec in &specs {
            assert_eq!(spec.failure_policy, FailurePolicy::Fail);
            let ns = spec.namespace_selector.clone().unwrap();
            assert_eq!(ns.match_expressions.unwrap()[0].key, "control-plane");
        }
        // No step in scope: no entry, so a stopped webhook blocks no pod.
        assert!(
            ValidatingPodChain::new(Vec::new())
                .webhook_specs()
                .is_empty()
        );
    }

    #[test]
    fn entries_per_scope_never_select_control_plane_namespaces() {
        let chain = PodChain::new(vec![Arc::new(KruisePodReadyGate { all_pods: false })]);
        let specs = chain.webhook_specs();
        assert_eq!(specs.len(), 1);
        assert_eq!(specs[0].name, "mpod.kb.io");
        assert_eq!(specs[0].failure_policy, FailurePolicy::Ignore);
        let ns = specs[0].namespace_selector.clone().unwrap();
        assert_eq!(ns.match_expressions.unwrap()[0].key, "control-plane");
    }
}
