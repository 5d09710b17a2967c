//! What an admission step is, independent of the server that serves it: a handler declares
//! its path and the webhook it needs ([`WebhookSpec`]: rules, failurePolicy, selectors) and
//! decides on one `admission.k8s.io/v1` request ([`AdmissionHandler`]); every denial carries
//! the code and reason controller-runtime's helpers give it ([`complete_denial`]). The pod
//! chain ([`pod_chain`]) composes the steps families lend kruise-webhook; a mutating step
//! that changes a decoded copy answers with a patch built on the object as sent
//! ([`raw_patch`]), so fields its types do not know are kept; [`conversion`] is the
//! ConversionReview and the converter a CRD's `/convert` runs. The HTTPS server, its
//! certificates and the webhook configurations are `kruise-admission`.

pub mod conversion;
pub mod crd_webhooks;
pub mod pod_chain;
pub mod raw_patch;

use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube_core::DynamicObject;
use kube_core::admission::{AdmissionRequest, AdmissionResponse};

pub use conversion::{ConversionReview, Converter};

/// Whether a webhook may change the object or only judge it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum WebhookKind {
    /// A MutatingWebhookConfiguration entry.
    Mutating,
    /// A ValidatingWebhookConfiguration entry.
    Validating,
}

/// What the API server does when the webhook cannot be reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Reject the request (for checks that guard invariants).
    Fail,
    /// Let the request through (for best-effort mutation of objects we may not own).
    Ignore,
}

impl FailurePolicy {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        }
    }
}

/// One rule: which operations on which resources the webhook sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// CREATE, UPDATE, DELETE, CONNECT or `*`.
    pub operations: Vec<String>,
    /// API groups (`""` for core).
    pub api_groups: Vec<String>,
    /// API versions.
    pub api_versions: Vec<String>,
    /// Resources, optionally with a subresource (`pods/eviction`).
    pub resources: Vec<String>,
    /// `Namespaced`, `Cluster` or `*`.
    pub scope: Option<String>,
}

impl Rule {
    /// A rule for `operations` on `resources` in `group` at every listed version.
    pub fn new(operations: &[&str], group: &str, versions: &[&str], resources: &[&str]) -> Self {
        let own = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        Rule {
            operations: own(operations),
            api_groups: vec![group.to_string()],
            api_versions: own(versions),
            resources: own(resources),
            scope: None,
        }
    }
}

/// Everything the webhook configuration entry for one handler needs, besides where the
/// server is and its caBundle.
#[derive(Clone, Debug, PartialEq)]
pub struct WebhookSpec {
    /// Entry name, e.g. `vcloneset.kb.io` (OpenKruise's names where it has them).
    pub name: String,
    /// Mutating or validating.
    pub kind: WebhookKind,
    /// Requests it sees.
    pub rules: Vec<Rule>,
    /// Declared explicitly by every handler.
    pub failure_policy: FailurePolicy,
    /// Restricts the namespaces it sees.
    pub namespace_selector: Option<LabelSelector>,
    /// Restricts the objects it sees.
    pub object_selector: Option<LabelSelector>,
    /// Seconds the API server waits (1-30).
    pub timeout_seconds: i32,
}

impl WebhookSpec {
    /// A family's own CRD webhook: `operations` on `resources` of `group` at `versions`,
    /// every object (no selectors), failing closed as OpenKruise's CRD webhooks do,
    /// 10 s timeout (override with struct update syntax).
    pub fn crd(
        name: &str,
        kind: WebhookKind,
        operations: &[&str],
        group: &str,
        versions: &[&str],
        resources: &[&str],
    ) -> Self {
        WebhookSpec {
            name: name.to_string(),
            kind,
            rules: vec![Rule::new(operations, group, versions, resources)],
            failure_policy: FailurePolicy::Fail,
            namespace_selector: None,
            object_selector: None,
            timeout_seconds: 10,
        }
    }
}

/// Why a handler could not decide. The server turns it into a denial with the message.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    /// The object could not be read as the handler's kind.
    #[error("cannot decode {kind}: {reason}")]
    Decode {
        /// Kind expected.
        kind: String,
        /// Why not.
        reason: String,
    },
    /// Anything else, with context.
    #[error("{0}")]
    Internal(String),
}

impl HandlerError {
    /// The HTTP code of the denial it becomes, as OpenKruise answers: 400 for an object that
    /// does not decode (a malformed request), 500 for a failure of the handler itself.
    pub fn code(&self) -> u16 {
        match self {
            HandlerError::Decode { .. } => 400,
            HandlerError::Internal(_) => 500,
        }
    }
}

/// Gives a denial the code and reason kube-apiserver passes on to the client, as
/// controller-runtime's helpers do: a denial without a code is a policy decision
/// (`admission.Denied`: 403 `Forbidden`); a code without a reason gets the reason
/// kube-apiserver pairs with it (400 `BadRequest`, 403 `Forbidden`, 500 `InternalError`),
/// so kubectl prints `Error from server (Forbidden): …`. 422 keeps OpenKruise's empty reason
/// (its `admission.Errored(422, …)`), so an invalid object reads as it does with OpenKruise.
/// An allowed response is left as it is.
pub fn complete_denial(response: &mut AdmissionResponse) {
    if response.allowed {
        return;
    }
    let status = &mut response.result;
    if status.code == 0 {
        status.code = 403;
    }
    if status.reason.is_empty() {
        let reason = match status.code {
            400 => "BadRequest",
            403 => "Forbidden",
            500 => "InternalError",
            _ => "",
        };
        status.reason = reason.to_string();
    }
}

/// Denies `request` with `message` and HTTP `code` (reason as [`complete_denial`] gives it).
pub fn denied(
    request: &AdmissionRequest<DynamicObject>,
    code: u16,
    message: impl ToString,
) -> AdmissionResponse {
    let mut response = AdmissionResponse::from(request).deny(message);
    response.result.code = code;
    complete_denial(&mut response);
    response
}

/// One admission handler, served at [`AdmissionHandler::path`].
pub trait AdmissionHandler: Send + Sync + 'static {
    /// URL path, e.g. `/validate-apps-kruise-io-v1beta1-cloneset`.
    fn path(&self) -> &str;
    /// The webhook configuration entry it needs.
    fn webhook(&self) -> WebhookSpec;
    /// Every webhook entry it needs now (several when one conjunction of selectors cannot
    /// express its scope). Re-read whenever `kruise_admission::AdmissionRoutes::refresh` is notified.
    fn webhooks(&self) -> Vec<WebhookSpec> {
        vec![self.webhook()]
    }
    /// Whether [`webhooks`](Self::webhooks) is complete. False while the handler's view of
    /// the cluster is still loading (a replica just started): the runner then publishes
    /// nothing, rather than drop the entries of objects it does not know of yet.
    fn webhooks_known(&self) -> bool {
        true
    }
    /// Decides on one request. A mutating handler returns a response carrying a JSONPatch.
    fn handle<'a>(
        &'a self,
        request: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>>;
}
