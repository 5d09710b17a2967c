//! Admission for SidecarSet:
//!
//! * [`SidecarSetMutatingHandler`] / [`SidecarSetValidatingHandler`]: the SidecarSet CRD's own
//!   webhooks (`/mutate-apps-kruise-io-sidecarset`, `/validate-apps-kruise-io-sidecarset`),
//!   served by `kruise-sidecarset`, in the shape of `kruise_common::admission::crd_webhooks`
//!   (defaults as a patch of only the defaulted fields, field errors as a 422 denial);
//! * [`SidecarSetInjectionStep`]: the pod-chain step kruise-webhook borrows, reading the
//!   SidecarSets from a [`SidecarSetSnapshot`].

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use kruise_common::admission::crd_webhooks::{
    Defaulting, defaults_patch, deny_invalid, object_json, validating_webhook,
};
use kruise_common::admission::{AdmissionHandler, FailurePolicy, HandlerError, WebhookSpec};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use serde_json::Value;

use crate::api::v1beta1::SidecarSet;
use crate::api::validation::{ErrorList, validate_sidecar_set};
use crate::api::{KIND, V1ALPHA1, V1BETA1, defaults, v1alpha1};
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

/// The resource both SidecarSet webhooks see (at both versions).
const RESOURCE: &str = "sidecarsets";

/// The SidecarSet defaulting webhook (`/mutate-apps-kruise-io-sidecarset`): defaults and
/// hash annotations on CREATE and UPDATE, for both versions.
#[derive(Clone, Copy, Debug, Default)]
pub struct SidecarSetMutatingHandler;

impl Defaulting for SidecarSetMutatingHandler {
    const PATH: &'static str = "/mutate-apps-kruise-io-sidecarset";
    const WEBHOOK: &'static str = "msidecarset.kb.io";
    const RESOURCE: &'static str = RESOURCE;

    fn patch(&self, version: &str, object: &Value) -> Result<json_patch::Patch, HandlerError> {
        match version {
            V1BETA1 => defaults_patch(object, "", KIND, |set: &mut SidecarSet| {
                defaults::default_v1beta1(set).map_err(|e| e.to_string())
            }),
            V1ALPHA1 => defaults_patch(object, "", KIND, |set: &mut v1alpha1::SidecarSet| {
                defaults::default_v1alpha1(set).map_err(|e| e.to_string())
            }),
            other => Err(HandlerError::Internal(format!(
                "unsupported version: {other}"
            ))),
        }
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

    /// The field errors of the request's SidecarSet (none for what it does not check).
    pub fn errors(
        &self,
        request: &AdmissionRequest<DynamicObject>,
    ) -> Result<ErrorList, HandlerError> {
        if !matches!(request.operation, Operation::Create | Operation::Update) {
            return Ok(ErrorList::new());
        }
        let Some(object) = request.object.as_ref() else {
            return Ok(ErrorList::new());
        };
        let to_beta = |o: &DynamicObject| -> Result<SidecarSet, HandlerError> {
            crate::conversion::decode_as_v1beta1(&object_json(o)?).map_err(|reason| {
                HandlerError::Decode {
                    kind: KIND.into(),
                    reason,
                }
            })
        };
        let new = to_beta(object)?;
        let old = match (&request.operation, request.old_object.as_ref()) {
            (Operation::Update, Some(o)) => Some(to_beta(o)?),
            _ => None,
        };
        Ok(validate_sidecar_set(
            &new,
            old.as_ref(),
            &self.snapshot.sidecar_sets(),
        ))
    }
}

impl<S: SidecarSetSnapshot> AdmissionHandler for SidecarSetValidatingHandler<S> {
    fn path(&self) -> &str {
        "/validate-apps-kruise-io-sidecarset"
    }

    fn webhook(&self) -> WebhookSpec {
        validating_webhook("vsidecarset.kb.io", RESOURCE, &["CREATE", "UPDATE"])
    }

    fn handle<'a>(
        &'a self,
        request: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(async move { Ok(deny_invalid(request, &self.errors(request)?)) })
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
