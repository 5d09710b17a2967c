//! Admission for SidecarSet:
//!
//! * [`SidecarSetMutatingHandler`] / [`SidecarSetValidatingHandler`]: the SidecarSet CRD's own
//!   webhooks (`/mutate-apps-kruise-io-sidecarset`, `/validate-apps-kruise-io-sidecarset`),
//!   served by `kruise-sidecarset`, in the shape of `kruise_admission::crd_webhooks`
//!   (defaults as a patch of only the defaulted fields, field errors as a 422 denial);
//! * [`SidecarSetInjectionStep`]: the pod-chain step kruise-webhook borrows, reading the
//!   SidecarSets from a [`SidecarSetSnapshot`].

pub mod live;

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use kruise_admission::crd_webhooks::{
    Defaulting, defaults_patch, deny_invalid, object_json, validating_webhook,
};
use kruise_admission::{AdmissionHandler, FailurePolicy, HandlerError, WebhookSpec};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use serde_json::Value;

use crate::api::v1beta1::SidecarSet;
use crate::api::validation::{
    ErrorList, patch_metadata_whitelist_error, validate_sidecar_set_admission,
};
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
    /// The cluster, when the snapshot is live: the validating webhook then makes sure a
    /// SidecarSet it admits is enforced at pod creation ([`ensure_pod_entry`]).
    fn cluster(&self) -> Option<kube::Client> {
        None
    }
    /// The data of the `kruise-configuration` ConfigMap in the kruise namespace (empty when
    /// there is none), read when a SidecarSet with patchPodMetadata is validated.
    fn kruise_configuration(&self) -> BoxFuture<'_, Result<BTreeMap<String, String>, String>> {
        Box::pin(async { Ok(BTreeMap::new()) })
    }
    /// Feature gate `SidecarSetPatchPodMetadataDefaultsAllowed`.
    fn patch_metadata_defaults_allowed(&self) -> bool {
        false
    }
    /// Whether the snapshot has loaded the cluster's SidecarSets (or found their CRD not
    /// installed): until then the injection step's scopes are not known.
    fn loaded(&self) -> bool {
        true
    }
    /// Waits (briefly) until the snapshot holds every SidecarSet and namespace of the
    /// cluster; an error says it does not yet (a replica just started). A decision on a
    /// partial snapshot would let a pod through without its sidecar, or a conflicting
    /// SidecarSet in. A fixed snapshot is complete.
    fn synced(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async { Ok(()) })
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
    pub history: crate::plan::revision::ControllerRevisionHistory,
    /// The `kruise-configuration` ConfigMap's data (empty: no ConfigMap).
    pub kruise_configuration: BTreeMap<String, String>,
    /// Feature gate `SidecarSetPatchPodMetadataDefaultsAllowed`.
    pub patch_metadata_defaults_allowed: bool,
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

    fn kruise_configuration(&self) -> BoxFuture<'_, Result<BTreeMap<String, String>, String>> {
        let data = self.kruise_configuration.clone();
        Box::pin(async move { Ok(data) })
    }

    fn patch_metadata_defaults_allowed(&self) -> bool {
        self.patch_metadata_defaults_allowed
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

    fn cluster(&self) -> Option<kube::Client> {
        (**self).cluster()
    }

    fn kruise_configuration(&self) -> BoxFuture<'_, Result<BTreeMap<String, String>, String>> {
        (**self).kruise_configuration()
    }

    fn patch_metadata_defaults_allowed(&self) -> bool {
        (**self).patch_metadata_defaults_allowed()
    }

    fn loaded(&self) -> bool {
        (**self).loaded()
    }

    fn synced(&self) -> BoxFuture<'_, Result<(), String>> {
        (**self).synced()
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

    fn patch(
        &self,
        version: &str,
        object: &Value,
        _old: Option<&DynamicObject>,
    ) -> Result<json_patch::Patch, HandlerError> {
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
    pub async fn errors(
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
        let whitelist_error = if new.spec.patch_pod_metadata.is_empty() {
            None
        } else {
            // Read at each validation, as OpenKruise reads it; a failed read is reported
            // where a refusal by the whitelist would be.
            match self.snapshot.kruise_configuration().await {
                Ok(data) => patch_metadata_whitelist_error(
                    &new,
                    &data,
                    self.snapshot.patch_metadata_defaults_allowed(),
                ),
                Err(e) => Some(e),
            }
        };
        // The conflict check reads every other SidecarSet.
        self.snapshot
            .synced()
            .await
            .map_err(HandlerError::Internal)?;
        Ok(validate_sidecar_set_admission(
            &new,
            old.as_ref(),
            &self.snapshot.sidecar_sets(),
            whitelist_error,
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
        Box::pin(async move {
            let errors = self.errors(request).await?;
            if errors.is_empty()
                && !request.dry_run
                && let Some(client) = self.snapshot.cluster()
                && let Some(scope) = admitted_scope(request)?
                && let Err(reason) = ensure_pod_entry(&client, &scope).await
            {
                // Fail closed: a SidecarSet stored without its entry would let the pods it
                // selects start without the sidecar while kruise-webhook is down.
                return Ok(AdmissionResponse::from(request).deny(format!(
                    "cannot make sure the pods this SidecarSet selects get its sidecar: {reason}"
                )));
            }
            Ok(deny_invalid(request, &errors))
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
pub fn sidecar_set_scope(set: &SidecarSet) -> Option<kruise_admission::pod_chain::PodScope> {
    if set.spec.injection_strategy.paused {
        return None;
    }
    let selector = set.spec.selector.clone().filter(|s| {
        s.match_labels.as_ref().is_some_and(|m| !m.is_empty())
            || s.match_expressions.as_ref().is_some_and(|e| !e.is_empty())
    })?;
    // v1beta1 carries v1alpha1's `namespace` as a namespaceSelector already.
    let namespace_selector = set.spec.namespace_selector.clone();
    Some(kruise_admission::pod_chain::PodScope {
        namespace_selector,
        object_selector: Some(selector),
    })
}

impl<S: SidecarSetSnapshot> kruise_admission::pod_chain::PodMutator for SidecarSetInjectionStep<S> {
    fn name(&self) -> &'static str {
        "sidecarset"
    }

    fn order(&self) -> u32 {
        30
    }

    fn scopes(&self) -> Vec<kruise_admission::pod_chain::PodScope> {
        let mut scopes: Vec<_> = self
            .snapshot
            .sidecar_sets()
            .iter()
            .filter_map(sidecar_set_scope)
            .collect();
        scopes.dedup();
        scopes
    }

    fn scopes_known(&self) -> bool {
        self.snapshot.loaded()
    }

    fn failure_policy(&self) -> FailurePolicy {
        // A pod that should carry a sidecar must not start without it (as OpenKruise); the
        // scopes keep every other pod out of the webhook's path.
        FailurePolicy::Fail
    }

    fn mutate<'a>(
        &'a self,
        request: &'a kruise_admission::pod_chain::PodRequest,
        pod: &'a mut Pod,
    ) -> BoxFuture<'a, Result<(), HandlerError>> {
        Box::pin(async move {
            self.snapshot
                .synced()
                .await
                .map_err(HandlerError::Internal)?;
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

/// kruise-webhook's pod configuration (OpenKruise's name), holding the pod chain's entries.
pub const POD_WEBHOOK_CONFIGURATION: &str = "kruise-mutating-webhook-configuration";

/// The pod scope of the SidecarSet a CREATE or UPDATE would store (`None` for other
/// operations and for a SidecarSet that injects nothing).
fn admitted_scope(
    request: &AdmissionRequest<DynamicObject>,
) -> Result<Option<kruise_admission::pod_chain::PodScope>, HandlerError> {
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return Ok(None);
    }
    let Some(object) = request.object.as_ref() else {
        return Ok(None);
    };
    let set = crate::conversion::decode_as_v1beta1(&object_json(object)?).map_err(|reason| {
        HandlerError::Decode {
            kind: KIND.into(),
            reason,
        }
    })?;
    Ok(sidecar_set_scope(&set))
}

/// A pod-chain step that only declares a scope, to have the chain build that scope's entry.
struct ScopeOnly(kruise_admission::pod_chain::PodScope);

impl kruise_admission::pod_chain::PodMutator for ScopeOnly {
    fn name(&self) -> &'static str {
        "sidecarset"
    }
    fn order(&self) -> u32 {
        30
    }
    fn scopes(&self) -> Vec<kruise_admission::pod_chain::PodScope> {
        vec![self.0.clone()]
    }
    fn failure_policy(&self) -> FailurePolicy {
        FailurePolicy::Fail
    }
    fn mutate<'a>(
        &'a self,
        _request: &'a kruise_admission::pod_chain::PodRequest,
        _pod: &'a mut Pod,
    ) -> BoxFuture<'a, Result<(), HandlerError>> {
        Box::pin(async { Ok(()) })
    }
}

/// FNV-1a of the entry's selectors: the same scope gets the same entry name from every
/// replica.
fn scope_hash(spec: &WebhookSpec) -> String {
    let key = serde_json::to_string(&(&spec.namespace_selector, &spec.object_selector))
        .unwrap_or_default();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

fn calls_pod_chain(
    config: &k8s_openapi::api::admissionregistration::v1::WebhookClientConfig,
) -> bool {
    let path = kruise_admission::pod_chain::MUTATE_POD_PATH;
    config.url.as_deref().is_some_and(|u| u.ends_with(path))
        || config
            .service
            .as_ref()
            .is_some_and(|s| s.path.as_deref() == Some(path))
}

/// Makes sure kruise-webhook's pod configuration holds a `Fail` entry for `scope` before a
/// SidecarSet with that scope is admitted, so a pod it selects is refused rather than
/// created without the sidecar while kruise-webhook is down (kruise-webhook adds its own
/// entry once it sees the SidecarSet, and removes this one). The entry calls kruise-webhook
/// with the clientConfig of the configuration's existing pod entries. Without that
/// configuration (no kruise-webhook installed) there is nothing to call and nothing is
/// written.
pub async fn ensure_pod_entry(
    client: &kube::Client,
    scope: &kruise_admission::pod_chain::PodScope,
) -> Result<(), String> {
    use k8s_openapi::api::admissionregistration::v1::{
        MutatingWebhook, MutatingWebhookConfiguration,
    };
    let chain =
        kruise_admission::pod_chain::PodChain::new(vec![Arc::new(ScopeOnly(scope.clone()))]);
    let Some(want) = chain.webhook_specs().into_iter().next() else {
        return Ok(());
    };
    let api: kube::Api<MutatingWebhookConfiguration> = kube::Api::all(client.clone());
    for _ in 0..5 {
        let Some(mut config) = api
            .get_opt(POD_WEBHOOK_CONFIGURATION)
            .await
            .map_err(|e| format!("reading {POD_WEBHOOK_CONFIGURATION}: {e}"))?
        else {
            return Ok(());
        };
        let entries = config.webhooks.get_or_insert_default();
        let Some(client_config) = entries
            .iter()
            .find(|w| calls_pod_chain(&w.client_config))
            .map(|w| w.client_config.clone())
        else {
            return Ok(());
        };
        let covered = entries.iter().any(|w| {
            calls_pod_chain(&w.client_config)
                && w.failure_policy.as_deref() == Some("Fail")
                && w.namespace_selector == want.namespace_selector
                && w.object_selector == want.object_selector
        });
        if covered {
            return Ok(());
        }
        entries.push(MutatingWebhook {
            name: format!("mpod-{}.kb.io", scope_hash(&want)),
            failure_policy: Some(FailurePolicy::Fail.as_str().into()),
            ..kruise_admission::publish::mutating_webhook(&want, client_config)
        });
        match api
            .replace(
                POD_WEBHOOK_CONFIGURATION,
                &kube::api::PostParams::default(),
                &config,
            )
            .await
        {
            Ok(_) => {
                tracing::info!(
                    configuration = POD_WEBHOOK_CONFIGURATION,
                    "added a fail-closed pod entry for a SidecarSet's scope"
                );
                return Ok(());
            }
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(e) => return Err(format!("writing {POD_WEBHOOK_CONFIGURATION}: {e}")),
        }
    }
    Err(format!(
        "{POD_WEBHOOK_CONFIGURATION} kept changing while adding the entry"
    ))
}
