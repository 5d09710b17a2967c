//! The PodUnavailableBudget webhooks, served by `kruise-protection` through
//! `kruise_admission`, with OpenKruise's paths and entry names:
//!
//! * `/validate-policy-kruise-io-podunavailablebudget` (`vpodunavailablebudget.kb.io`,
//!   CREATE and UPDATE, both versions): the checks of [`crate::api::validation`] on the
//!   v1beta1 form (a v1alpha1 object is converted first), the update rule, and the conflict
//!   with the other budgets of the namespace; denied with HTTP 400 and the field errors, as
//!   OpenKruise answers. With both PUB gates off every request is refused (400), as
//!   OpenKruise refuses it;
//! * `/convert` ([`crate::conversion`]).

use std::sync::Arc;

use futures::future::BoxFuture;
use kruise_admission::crd_webhooks::{decode, object_json};
use kruise_admission::{
    AdmissionHandler, AdmissionRoutes, HandlerError, WebhookKind, WebhookSpec, denied,
};
use kruise_compat::field::{FieldError, Path, aggregate};
use kruise_core::api::version::{V1ALPHA1, V1BETA1};
use kruise_core::featuregate::FeatureGates;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};

use crate::api::v1beta1::PodUnavailableBudget;
use crate::api::{GROUP, KIND, POLICY_V1BETA1, validation};
use crate::conversion::{PubConverter, convert};

/// The PUB validating webhook's path.
pub const VALIDATE_PATH: &str = "/validate-policy-kruise-io-podunavailablebudget";
/// Gate of the delete/evict protection.
pub const DELETE_GATE: &str = "PodUnavailableBudgetDeleteGate";
/// Gate of the update protection.
pub const UPDATE_GATE: &str = "PodUnavailableBudgetUpdateGate";
/// Seconds the API server waits for a webhook.
const TIMEOUT_SECONDS: i32 = 30;
/// HTTP 400, OpenKruise's code for an invalid PodUnavailableBudget.
const BAD_REQUEST: u16 = 400;

/// The other budgets of a namespace, for the conflict check.
pub trait NamespaceBudgets: Send + Sync + 'static {
    /// Every PodUnavailableBudget of `namespace`.
    fn list<'a>(
        &'a self,
        namespace: &'a str,
    ) -> BoxFuture<'a, Result<Vec<PodUnavailableBudget>, String>>;
}

/// The budgets as the API server has them.
pub struct LiveBudgets(pub kube::Client);

impl NamespaceBudgets for LiveBudgets {
    fn list<'a>(
        &'a self,
        namespace: &'a str,
    ) -> BoxFuture<'a, Result<Vec<PodUnavailableBudget>, String>> {
        Box::pin(async move {
            kube::Api::<PodUnavailableBudget>::namespaced(self.0.clone(), namespace)
                .list(&Default::default())
                .await
                .map(|list| list.items)
                .map_err(|e| e.to_string())
        })
    }
}

/// No other budgets: what `manifests` (no cluster) builds the routes with.
pub struct NoBudgets;

impl NamespaceBudgets for NoBudgets {
    fn list<'a>(
        &'a self,
        _namespace: &'a str,
    ) -> BoxFuture<'a, Result<Vec<PodUnavailableBudget>, String>> {
        Box::pin(async { Ok(Vec::new()) })
    }
}

/// The routes `kruise-protection` serves: PUB validation and conversion. `gates` decide
/// whether PUBs may be written at all; `budgets` lists a namespace's budgets.
pub fn routes(gates: &FeatureGates, budgets: Arc<dyn NamespaceBudgets>) -> AdmissionRoutes {
    AdmissionRoutes::new()
        .handler(ValidatePub {
            enabled: gates.enabled(DELETE_GATE) || gates.enabled(UPDATE_GATE),
            budgets,
        })
        .converter(PubConverter)
}

/// `/validate-policy-kruise-io-podunavailablebudget`.
pub struct ValidatePub {
    /// Either PUB gate is on.
    pub enabled: bool,
    /// The namespace's budgets, for the conflict check.
    pub budgets: Arc<dyn NamespaceBudgets>,
}

impl ValidatePub {
    /// The request's object (`object` or `oldObject`) as v1beta1.
    fn v1beta1(
        object: &DynamicObject,
        version: &str,
    ) -> Result<PodUnavailableBudget, HandlerError> {
        let json = object_json(object)?;
        let json = if version == V1ALPHA1 {
            convert(json, POLICY_V1BETA1).map_err(|e| HandlerError::Decode {
                kind: KIND.into(),
                reason: format!("failed to convert v1alpha1 PUB to v1beta1: {e}"),
            })?
        } else {
            json
        };
        decode::<PodUnavailableBudget>(&json, KIND)
    }

    async fn validate(
        &self,
        request: &AdmissionRequest<DynamicObject>,
    ) -> Result<AdmissionResponse, HandlerError> {
        if !self.enabled {
            return Ok(denied(
                request,
                BAD_REQUEST,
                format!(
                    "feature PodUnavailableBudget is invalid, please open via feature-gate({DELETE_GATE}, {UPDATE_GATE})"
                ),
            ));
        }
        let allowed = AdmissionResponse::from(request);
        let version = request.resource.version.as_str();
        if version != V1ALPHA1 && version != V1BETA1 {
            return Ok(denied(
                request,
                BAD_REQUEST,
                format!("unsupported version: {version}"),
            ));
        }
        if !matches!(request.operation, Operation::Create | Operation::Update) {
            return Ok(allowed);
        }
        let Some(object) = &request.object else {
            return Ok(allowed);
        };
        let pub_ = Self::v1beta1(object, version)?;
        let mut errors = validation::validate(&pub_);
        if request.operation == Operation::Update
            && let Some(old) = &request.old_object
        {
            errors.extend(validation::validate_update(
                &pub_,
                &Self::v1beta1(old, version)?,
            ));
        }
        let namespace = pub_
            .metadata
            .namespace
            .clone()
            .or_else(|| request.namespace.clone())
            .unwrap_or_default();
        match self.budgets.list(&namespace).await {
            Ok(others) => errors.extend(validation::validate_conflicts(&pub_, &others)),
            Err(e) => errors.push(FieldError::internal(
                Path::new(""),
                format!("query other podUnavailableBudget failed, err: {e}"),
            )),
        }
        if errors.is_empty() {
            return Ok(allowed);
        }
        Ok(denied(request, BAD_REQUEST, aggregate(&errors)))
    }
}

impl AdmissionHandler for ValidatePub {
    fn path(&self) -> &str {
        VALIDATE_PATH
    }

    fn webhook(&self) -> WebhookSpec {
        WebhookSpec {
            timeout_seconds: TIMEOUT_SECONDS,
            ..WebhookSpec::crd(
                "vpodunavailablebudget.kb.io",
                WebhookKind::Validating,
                &["CREATE", "UPDATE"],
                GROUP,
                &[V1ALPHA1, V1BETA1],
                &["podunavailablebudgets"],
            )
        }
    }

    fn handle<'a>(
        &'a self,
        request: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(self.validate(request))
    }
}
