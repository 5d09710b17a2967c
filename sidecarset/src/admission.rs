//! Admission for SidecarSet:
//!
//! * [`PodInjectionHandler`]: the pod-chain step kruise-webhook borrows (`/mutate-pod`-style):
//!   decodes the pod, runs [`crate::inject::inject`] against a caller-provided
//!   [`SidecarSetSnapshot`], answers with the JSONPatch. Its [`WebhookSpec`] is scoped by
//!   [`pod_webhook_scope`] to the pods current SidecarSets can match.
//! * [`SidecarSetMutatingHandler`] / [`SidecarSetValidatingHandler`]: the SidecarSet CRD's own
//!   webhooks (`/mutate-apps-kruise-io-sidecarset`, `/validate-apps-kruise-io-sidecarset`),
//!   served by `kruise-sidecarset`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kruise_common::admission::{
    AdmissionHandler, FailurePolicy, HandlerError, Rule, WebhookKind, WebhookSpec,
};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};

use crate::api::v1beta1::SidecarSet;
use crate::api::{GROUP, V1ALPHA1, V1BETA1, defaults, v1alpha1};
use crate::inject::{InjectInput, RevisionHistory, inject};

/// What the pod injection handler reads at each request. kruise-webhook implements it over
/// its informer caches (SidecarSets, Namespaces, ControllerRevisions).
pub trait SidecarSetSnapshot: Send + Sync + 'static {
    /// Every SidecarSet, as `v1beta1`.
    fn sidecar_sets(&self) -> Arc<[SidecarSet]>;
    /// The labels of a namespace, `None` when it is not known.
    fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>>;
    /// Historical revisions for `injectionStrategy.revision` (default: none, inject latest).
    fn history(&self) -> &dyn RevisionHistory {
        &crate::inject::NoHistory
    }
    /// Feature gate `EnableSortSidecarContainerByName`.
    fn sort_sidecar_containers_by_name(&self) -> bool {
        false
    }
}

/// A fixed snapshot (tests, benchmarks, or a caller that swaps whole snapshots).
#[derive(Clone, Debug, Default)]
pub struct StaticSnapshot {
    /// The SidecarSets.
    pub sidecar_sets: Arc<[SidecarSet]>,
    /// Labels by namespace name.
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// ControllerRevisions for `injectionStrategy.revision`.
    pub history: crate::revision::ControllerRevisionHistory,
}

impl SidecarSetSnapshot for StaticSnapshot {
    fn sidecar_sets(&self) -> Arc<[SidecarSet]> {
        self.sidecar_sets.clone()
    }

    fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.namespaces.get(namespace).cloned()
    }

    fn history(&self) -> &dyn RevisionHistory {
        &self.history
    }
}

/// A shared snapshot is a snapshot (kruise-webhook keeps one `Arc` and swaps its contents).
impl<S: SidecarSetSnapshot + ?Sized> SidecarSetSnapshot for Arc<S> {
    fn sidecar_sets(&self) -> Arc<[SidecarSet]> {
        (**self).sidecar_sets()
    }

    fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        (**self).namespace_labels(namespace)
    }

    fn history(&self) -> &dyn RevisionHistory {
        (**self).history()
    }

    fn sort_sidecar_containers_by_name(&self) -> bool {
        (**self).sort_sidecar_containers_by_name()
    }
}

/// The pod webhook step that injects SidecarSets at pod creation.
pub struct PodInjectionHandler<S> {
    snapshot: S,
    path: String,
}

impl<S: SidecarSetSnapshot> PodInjectionHandler<S> {
    /// Served at `/mutate-pod` (OpenKruise's path for the pod chain).
    pub fn new(snapshot: S) -> Self {
        Self::with_path(snapshot, "/mutate-pod")
    }

    /// Served at `path`.
    pub fn with_path(snapshot: S, path: impl Into<String>) -> Self {
        PodInjectionHandler {
            snapshot,
            path: path.into(),
        }
    }

    /// Injects into a decoded pod: `Ok(None)` when the request is not one injection acts on.
    pub fn decide(
        &self,
        request: &AdmissionRequest<DynamicObject>,
        now: jiff::Timestamp,
        random: f64,
    ) -> Result<Option<json_patch::Patch>, HandlerError> {
        if request.operation != Operation::Create
            || request
                .sub_resource
                .as_deref()
                .is_some_and(|s| !s.is_empty())
            || request.resource.resource != "pods"
        {
            return Ok(None);
        }
        let Some(object) = request.object.as_ref() else {
            return Ok(None);
        };
        let mut pod: Pod = serde_json::to_value(object)
            .and_then(serde_json::from_value)
            .map_err(|e| HandlerError::Decode {
                kind: "Pod".into(),
                reason: e.to_string(),
            })?;
        // The API server has not filled the namespace yet on CREATE.
        if pod.metadata.namespace.as_deref().unwrap_or("").is_empty()
            && let Some(ns) = request.namespace.as_ref()
        {
            pod.metadata.namespace = Some(ns.clone());
        }
        let namespace = pod
            .metadata
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into());
        let sets = self.snapshot.sidecar_sets();
        let ns_labels = self.snapshot.namespace_labels(&namespace);
        let out = inject(&InjectInput {
            pod: &pod,
            namespace_labels: ns_labels.as_ref(),
            sidecar_sets: &sets,
            now,
            random,
            history: self.snapshot.history(),
            sort_sidecar_containers_by_name: self.snapshot.sort_sidecar_containers_by_name(),
        })
        .map_err(|e| HandlerError::Internal(e.to_string()))?;
        if out.pod == pod {
            return Ok(None);
        }
        // The patch applies to the object as sent: our namespace fill-in is not part of it,
        // and fields our types do not know stay where they are.
        let raw =
            serde_json::to_value(object).map_err(|e| HandlerError::Internal(e.to_string()))?;
        let patch = kruise_common::admission::raw_patch::patch_against_raw(&raw, &pod, &out.pod)
            .map_err(|e| HandlerError::Internal(e.to_string()))?;
        Ok(Some(patch))
    }

    /// The webhook entry, scoped to what the current SidecarSets can match.
    pub fn webhook_spec(&self) -> WebhookSpec {
        let scope = pod_webhook_scope(&self.snapshot.sidecar_sets());
        WebhookSpec {
            name: "msidecarset-pod.kruise.io".into(),
            kind: WebhookKind::Mutating,
            rules: vec![Rule::new(&["CREATE"], "", &["v1"], &["pods"])],
            // Fail closed as OpenKruise does (a pod that should carry a sidecar must not start
            // without it); the selectors below keep every other pod out of the webhook's path.
            failure_policy: FailurePolicy::Fail,
            namespace_selector: Some(scope.namespace_selector),
            object_selector: scope.object_selector,
            timeout_seconds: 10,
        }
    }
}

/// A uniform sample in `[0, 1)` without a random-number crate: the std hasher is randomly
/// keyed per process, and the clock makes successive samples differ.
fn random_sample() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

impl<S: SidecarSetSnapshot> AdmissionHandler for PodInjectionHandler<S> {
    fn path(&self) -> &str {
        &self.path
    }

    fn webhook(&self) -> WebhookSpec {
        self.webhook_spec()
    }

    fn handle<'a>(
        &'a self,
        request: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(async move {
            let response = AdmissionResponse::from(request);
            match self.decide(request, jiff::Timestamp::now(), random_sample())? {
                None => Ok(response),
                Some(patch) => response
                    .with_patch(patch)
                    .map_err(|e| HandlerError::Internal(e.to_string())),
            }
        })
    }
}

/// Namespace and object selectors for the pod webhook.
#[derive(Clone, Debug, PartialEq)]
pub struct PodWebhookScope {
    /// Always excludes `control-plane` namespaces (as OpenKruise), plus what every
    /// SidecarSet's `namespaceSelector` requires, where they all require something.
    pub namespace_selector: LabelSelector,
    /// What every active SidecarSet's `selector` requires; `None` when they share no
    /// requirement (the union of selectors is not one LabelSelector).
    pub object_selector: Option<LabelSelector>,
}

/// Label key used in the match-nothing object selector when no SidecarSet can inject.
pub const NO_SIDECARSET_KEY: &str = "sidecarset.kruise.io/none";

fn req(key: &str, operator: &str, values: Option<Vec<String>>) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.into(),
        operator: operator.into(),
        values,
    }
}

/// The positive constraints of a selector: key -> allowed values (`None` = any value).
fn positive_requirements(sel: &LabelSelector) -> BTreeMap<String, Option<BTreeSet<String>>> {
    let mut out: BTreeMap<String, Option<BTreeSet<String>>> = BTreeMap::new();
    for (k, v) in sel.match_labels.iter().flatten() {
        out.insert(k.clone(), Some(BTreeSet::from([v.clone()])));
    }
    for e in sel.match_expressions.iter().flatten() {
        match e.operator.as_str() {
            "In" => {
                let values: BTreeSet<String> = e.values.iter().flatten().cloned().collect();
                // A key constrained twice: either constraint alone is a sound bound.
                out.entry(e.key.clone()).or_insert(Some(values));
            }
            "Exists" => {
                out.entry(e.key.clone()).or_insert(None);
            }
            _ => {}
        }
    }
    out
}

/// The requirements every selector implies (an over-approximation of their union: a pod any
/// selector matches satisfies all of them).
fn common_requirements(selectors: &[&LabelSelector]) -> Vec<LabelSelectorRequirement> {
    let Some((first, rest)) = selectors.split_first() else {
        return Vec::new();
    };
    let mut common = positive_requirements(first);
    for sel in rest {
        let reqs = positive_requirements(sel);
        common = common
            .into_iter()
            .filter_map(|(k, values)| {
                let other = reqs.get(&k)?;
                let merged = match (values, other) {
                    (Some(mut a), Some(b)) => {
                        a.extend(b.iter().cloned());
                        Some(a)
                    }
                    _ => None,
                };
                Some((k, merged))
            })
            .collect();
    }
    common
        .into_iter()
        .map(|(k, values)| match values {
            Some(v) => req(&k, "In", Some(v.into_iter().collect())),
            None => req(&k, "Exists", None),
        })
        .collect()
}

/// Narrows the pod webhook to the pods the given SidecarSets can inject: paused SidecarSets
/// and those without a non-empty selector are ignored; with none left the object selector
/// matches nothing, so no pod waits on (or is blocked by) the webhook.
pub fn pod_webhook_scope(sets: &[SidecarSet]) -> PodWebhookScope {
    let active: Vec<&SidecarSet> = sets
        .iter()
        .filter(|s| !s.spec.injection_strategy.paused)
        .filter(|s| {
            s.spec.selector.as_ref().is_some_and(|sel| {
                sel.match_labels.as_ref().is_some_and(|m| !m.is_empty())
                    || sel
                        .match_expressions
                        .as_ref()
                        .is_some_and(|e| !e.is_empty())
            })
        })
        .collect();
    let mut ns_reqs = vec![req("control-plane", "DoesNotExist", None)];
    if active.is_empty() {
        return PodWebhookScope {
            namespace_selector: LabelSelector {
                match_labels: None,
                match_expressions: Some(ns_reqs),
            },
            object_selector: Some(LabelSelector {
                match_labels: None,
                match_expressions: Some(vec![
                    req(NO_SIDECARSET_KEY, "Exists", None),
                    req(NO_SIDECARSET_KEY, "DoesNotExist", None),
                ]),
            }),
        };
    }
    let object_selectors: Vec<&LabelSelector> = active
        .iter()
        .filter_map(|s| s.spec.selector.as_ref())
        .collect();
    let object = common_requirements(&object_selectors);
    if active.iter().all(|s| s.spec.namespace_selector.is_some()) {
        let ns_selectors: Vec<&LabelSelector> = active
            .iter()
            .filter_map(|s| s.spec.namespace_selector.as_ref())
            .collect();
        ns_reqs.extend(common_requirements(&ns_selectors));
    }
    PodWebhookScope {
        namespace_selector: LabelSelector {
            match_labels: None,
            match_expressions: Some(ns_reqs),
        },
        object_selector: (!object.is_empty()).then_some(LabelSelector {
            match_labels: None,
            match_expressions: Some(object),
        }),
    }
}

/// The SidecarSet defaulting webhook (`/mutate-apps-kruise-io-sidecarset`): defaults and
/// hash annotations on CREATE and UPDATE, for both versions.
#[derive(Clone, Copy, Debug, Default)]
pub struct SidecarSetMutatingHandler;

impl SidecarSetMutatingHandler {
    /// The patch for one request (`None` when nothing changes).
    pub fn decide(
        request: &AdmissionRequest<DynamicObject>,
    ) -> Result<Option<json_patch::Patch>, HandlerError> {
        if !matches!(request.operation, Operation::Create | Operation::Update) {
            return Ok(None);
        }
        let Some(object) = request.object.as_ref() else {
            return Ok(None);
        };
        let original =
            serde_json::to_value(object).map_err(|e| HandlerError::Internal(e.to_string()))?;
        let decode = |e: serde_json::Error| HandlerError::Decode {
            kind: "SidecarSet".into(),
            reason: e.to_string(),
        };
        let internal = |e: String| HandlerError::Internal(e);
        let defaulted = match request.resource.version.as_str() {
            V1BETA1 => {
                let mut set: SidecarSet =
                    serde_json::from_value(original.clone()).map_err(decode)?;
                defaults::default_v1beta1(&mut set).map_err(|e| internal(e.to_string()))?;
                serde_json::to_value(set).map_err(|e| internal(e.to_string()))?
            }
            V1ALPHA1 => {
                let mut set: v1alpha1::SidecarSet =
                    serde_json::from_value(original.clone()).map_err(decode)?;
                defaults::default_v1alpha1(&mut set).map_err(|e| internal(e.to_string()))?;
                serde_json::to_value(set).map_err(|e| internal(e.to_string()))?
            }
            other => return Err(internal(format!("unsupported version: {other}"))),
        };
        let patch = json_patch::diff(&original, &defaulted);
        Ok((!patch.0.is_empty()).then_some(patch))
    }
}

impl AdmissionHandler for SidecarSetMutatingHandler {
    fn path(&self) -> &str {
        "/mutate-apps-kruise-io-sidecarset"
    }

    fn webhook(&self) -> WebhookSpec {
        WebhookSpec::crd(
            "msidecarset.kb.io",
            WebhookKind::Mutating,
            &["CREATE", "UPDATE"],
            GROUP,
            &[V1ALPHA1, V1BETA1],
            &["sidecarsets"],
        )
    }

    fn handle<'a>(
        &'a self,
        request: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(async move {
            let response = AdmissionResponse::from(request);
            match Self::decide(request)? {
                None => Ok(response),
                Some(patch) => response
                    .with_patch(patch)
                    .map_err(|e| HandlerError::Internal(e.to_string())),
            }
        })
    }
}

/// The SidecarSet validating webhook (`/validate-apps-kruise-io-sidecarset`), checking
/// against the other SidecarSets of a snapshot.
pub struct SidecarSetValidatingHandler<S> {
    snapshot: S,
}

impl<S: SidecarSetSnapshot> SidecarSetValidatingHandler<S> {
    /// Validates against `snapshot`'s SidecarSets.
    pub fn new(snapshot: S) -> Self {
        SidecarSetValidatingHandler { snapshot }
    }

    /// `Ok(None)` to allow, `Ok(Some(message))` to deny.
    pub fn decide(
        &self,
        request: &AdmissionRequest<DynamicObject>,
    ) -> Result<Option<String>, HandlerError> {
        if !matches!(request.operation, Operation::Create | Operation::Update) {
            return Ok(None);
        }
        let Some(object) = request.object.as_ref() else {
            return Ok(None);
        };
        let to_beta = |o: &DynamicObject| -> Result<SidecarSet, HandlerError> {
            let v = serde_json::to_value(o).map_err(|e| HandlerError::Internal(e.to_string()))?;
            crate::conversion::decode_as_v1beta1(&v).map_err(|e| HandlerError::Decode {
                kind: "SidecarSet".into(),
                reason: e.to_string(),
            })
        };
        let new = to_beta(object)?;
        let old = match (&request.operation, request.old_object.as_ref()) {
            (Operation::Update, Some(o)) => Some(to_beta(o)?),
            _ => None,
        };
        let others = self.snapshot.sidecar_sets();
        let errors = crate::validate::validate_sidecar_set(&new, old.as_ref(), &others);
        if errors.is_empty() {
            Ok(None)
        } else {
            Ok(Some(crate::validate::aggregate(&errors)))
        }
    }
}

impl<S: SidecarSetSnapshot> AdmissionHandler for SidecarSetValidatingHandler<S> {
    fn path(&self) -> &str {
        "/validate-apps-kruise-io-sidecarset"
    }

    fn webhook(&self) -> WebhookSpec {
        WebhookSpec::crd(
            "vsidecarset.kb.io",
            WebhookKind::Validating,
            &["CREATE", "UPDATE"],
            GROUP,
            &[V1ALPHA1, V1BETA1],
            &["sidecarsets"],
        )
    }

    fn handle<'a>(
        &'a self,
        request: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(async move {
            let response = AdmissionResponse::from(request);
            Ok(match self.decide(request)? {
                None => response,
                Some(message) => response.deny(message),
            })
        })
    }
}

#[cfg(test)]
mod tests;

/// SidecarSet injection as a step of kruise-webhook's pod chain (order 30, after the
/// readiness gate, before container launch priority, as OpenKruise runs it). Its scopes
/// are the active SidecarSets' own selectors and namespaces, one per SidecarSet, so the
/// webhook sees exactly the pods a SidecarSet can inject and no others.
pub struct SidecarSetInjectionStep<S> {
    snapshot: S,
}

impl<S: SidecarSetSnapshot> SidecarSetInjectionStep<S> {
    /// A step reading SidecarSets and namespaces from `snapshot`.
    pub fn new(snapshot: S) -> Self {
        SidecarSetInjectionStep { snapshot }
    }
}

/// The pods one SidecarSet can inject: its namespace (or namespaceSelector) and selector.
/// `None` for a paused SidecarSet or one without a selector (it injects nothing).
pub fn sidecar_set_scope(
    set: &SidecarSet,
) -> Option<kruise_common::admission::pod_chain::PodScope> {
    if set.spec.injection_strategy.paused {
        return None;
    }
    let selector = set.spec.selector.clone().filter(|s| {
        s.match_labels.as_ref().is_some_and(|m| !m.is_empty())
            || s.match_expressions.as_ref().is_some_and(|e| !e.is_empty())
    })?;
    // v1beta1 carries v1alpha1's `namespace` as a namespaceSelector already.
    let namespace_selector = set.spec.namespace_selector.clone();
    Some(kruise_common::admission::pod_chain::PodScope {
        namespace_selector,
        object_selector: Some(selector),
    })
}

impl<S: SidecarSetSnapshot> kruise_common::admission::pod_chain::PodMutator
    for SidecarSetInjectionStep<S>
{
    fn name(&self) -> &'static str {
        "sidecarset"
    }

    fn order(&self) -> u32 {
        30
    }

    fn scopes(&self) -> Vec<kruise_common::admission::pod_chain::PodScope> {
        let mut scopes: Vec<_> = self
            .snapshot
            .sidecar_sets()
            .iter()
            .filter_map(sidecar_set_scope)
            .collect();
        scopes.dedup();
        scopes
    }

    fn failure_policy(&self) -> FailurePolicy {
        // A pod that should carry a sidecar must not start without it (as OpenKruise); the
        // scopes keep every other pod out of the webhook's path.
        FailurePolicy::Fail
    }

    fn mutate<'a>(
        &'a self,
        request: &'a kruise_common::admission::pod_chain::PodRequest,
        pod: &'a mut Pod,
    ) -> BoxFuture<'a, Result<(), HandlerError>> {
        Box::pin(async move {
            let namespace = pod
                .metadata
                .namespace
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| request.namespace.clone());
            let sets = self.snapshot.sidecar_sets();
            let ns_labels = self.snapshot.namespace_labels(&namespace);
            let out = inject(&InjectInput {
                pod,
                namespace_labels: ns_labels.as_ref(),
                sidecar_sets: &sets,
                now: jiff::Timestamp::now(),
                random: random_sample(),
                history: self.snapshot.history(),
                sort_sidecar_containers_by_name: self.snapshot.sort_sidecar_containers_by_name(),
            })
            .map_err(|e| HandlerError::Internal(e.to_string()))?;
            *pod = out.pod;
            Ok(())
        })
    }
}
