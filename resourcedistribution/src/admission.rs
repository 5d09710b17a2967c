//! The ResourceDistribution webhook, served by `kruise-resourcedistribution` through
//! `kruise_admission` with OpenKruise's path and entry name:
//! `/validate-apps-kruise-io-v1alpha1-resourcedistribution` (`vresourcedistribution.kb.io`,
//! CREATE and UPDATE). The checks of [`crate::api::validation`], and the resource created
//! with `dryRun` in the webhook's namespace (so a Secret the API server would refuse is
//! refused here, with its message); denied with HTTP 422 and OpenKruise's messages.

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kruise_admission::crd_webhooks::{decode_written, deny_invalid};
use kruise_admission::{AdmissionHandler, AdmissionRoutes, HandlerError, WebhookKind, WebhookSpec};
use kruise_compat::field::FieldError;
use kruise_core::api::version::{APPS_GROUP, V1ALPHA1};
use kruise_runtime::errors::{is_already_exists, is_not_found};
use kube::api::{Api, ApiResource, PostParams};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use serde_json::Value;

use crate::api::validation::{Resource, validate_resource, validate_targets};
use crate::api::{KIND, RESOURCE, ResourceDistribution};
use crate::controller::message_of;

/// URL path of the webhook (OpenKruise's).
pub const VALIDATE_PATH: &str = "/validate-apps-kruise-io-v1alpha1-resourcedistribution";
/// Webhook entry name (OpenKruise's).
pub const VALIDATE_WEBHOOK: &str = "vresourcedistribution.kb.io";
/// Seconds the API server waits for the webhook.
const TIMEOUT_SECONDS: i32 = 30;
/// Where the dry run goes when the webhook's own namespace does not exist (a binary run
/// outside a cluster install): every cluster has it.
const FALLBACK_NAMESPACE: &str = "default";

/// The routes `kruise-resourcedistribution` serves: the validating webhook, dry-running
/// through `client` in `namespace` (none for `manifests`, where nothing is served).
pub fn routes(client: Option<kube::Client>, namespace: &str) -> AdmissionRoutes {
    AdmissionRoutes::new().handler(ValidateResourceDistribution {
        client,
        namespace: namespace.to_string(),
    })
}

/// The validating webhook.
pub struct ValidateResourceDistribution {
    /// The cluster the dry run goes to.
    pub client: Option<kube::Client>,
    /// The namespace the dry run creates the resource in (OpenKruise's: its own).
    pub namespace: String,
}

impl ValidateResourceDistribution {
    async fn validate(
        &self,
        request: &AdmissionRequest<DynamicObject>,
    ) -> Result<AdmissionResponse, HandlerError> {
        let Some((new, old)) = decode_written::<ResourceDistribution>(request, KIND)? else {
            return Ok(AdmissionResponse::from(request));
        };
        let mut errors = match validate_resource(&new.spec, old.as_ref().map(|o| &o.spec)) {
            Ok(resource) => self.dry_run(&resource).await.into_iter().collect(),
            Err(errors) => errors,
        };
        errors.extend(validate_targets(&new.spec.targets));
        Ok(deny_invalid(request, &errors))
    }

    /// Creates the resource with `dryRun`, as OpenKruise's webhook does: the API server's
    /// refusal (other than a name already taken) as the error.
    async fn dry_run(&self, resource: &Resource) -> Option<FieldError> {
        let client = self.client.as_ref()?;
        let kind = if resource.is_secret() {
            ApiResource::erase::<Secret>(&())
        } else {
            ApiResource::erase::<ConfigMap>(&())
        };
        let params = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let mut outcome = Ok(());
        for namespace in [self.namespace.as_str(), FALLBACK_NAMESPACE] {
            let mut object = resource.object.clone();
            if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.insert("namespace".into(), Value::String(namespace.to_string()));
            }
            let object: DynamicObject = match serde_json::from_value(object) {
                Ok(object) => object,
                Err(e) => return Some(dry_run_error(e.to_string())),
            };
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &kind);
            outcome = api.create(&params, &object).await.map(|_| ());
            // Not found: the webhook's namespace is missing (the API server refused the
            // namespace, not the resource).
            if !matches!(&outcome, Err(e) if is_not_found(e)) {
                break;
            }
        }
        match outcome {
            Ok(()) => None,
            Err(e) if is_already_exists(&e) => None,
            Err(e) => Some(dry_run_error(message_of(&e))),
        }
    }
}

fn dry_run_error(message: String) -> FieldError {
    FieldError::internal(
        "spec.resource",
        format!("failed to dry-run to validate spec.resource, error: {message}"),
    )
}

impl AdmissionHandler for ValidateResourceDistribution {
    fn path(&self) -> &str {
        VALIDATE_PATH
    }

    fn webhook(&self) -> WebhookSpec {
        WebhookSpec {
            timeout_seconds: TIMEOUT_SECONDS,
            ..WebhookSpec::crd(
                VALIDATE_WEBHOOK,
                WebhookKind::Validating,
                &["CREATE", "UPDATE"],
                APPS_GROUP,
                &[V1ALPHA1],
                &[RESOURCE],
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
