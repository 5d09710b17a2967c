//! The BroadcastJob and AdvancedCronJob webhooks, served by `kruise-broadcastjob` through
//! `common::admission`, with OpenKruise's paths and entry names:
//!
//! * `/mutate-apps-kruise-io-broadcastjob` (`mbroadcastjob.kb.io`) and
//!   `/mutate-apps-kruise-io-advancedcronjob` (`madvancedcronjob.kb.io`): the defaults of
//!   [`crate::api::defaults`] and, on CREATE and on an UPDATE that changes `spec.template`,
//!   Kubernetes' pod defaults in the pod templates ([`TemplateDefaults`]), as a JSONPatch of
//!   only the defaulted fields;
//! * `/validate-apps-kruise-io-broadcastjob` (`vbroadcastjob.kb.io`) and
//!   `/validate-apps-kruise-io-advancedcronjob` (`vadvancedcronjob.kb.io`): the checks of
//!   [`crate::api::validation`] on CREATE and UPDATE, denied with HTTP 422 and the field
//!   errors (OpenKruise answers 500 for these);
//! * `/convert` for both kinds ([`crate::conversion`]).
//!
//! Both versions carry the same fields, so a `v1alpha1` object is read as `v1beta1`.

use futures::future::BoxFuture;
use kruise_common::admission::crd_webhooks::{
    decode, defaults_patch, deny_invalid, object_json, validating_webhook,
};
use kruise_common::admission::{
    AdmissionHandler, AdmissionRoutes, HandlerError, WebhookKind, WebhookSpec,
};
use kruise_common::api::field::FieldError;
use kruise_common::api::pod_defaults::{
    PodDefaultsOptions, default_pod_template, go_encoded_pod_template,
};
use kruise_common::api::version::{APPS_GROUP, V1ALPHA1, V1BETA1};
use kruise_common::featuregate::FeatureGates;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::v1beta1::{AdvancedCronJob, AdvancedCronJobSpec, BroadcastJob, BroadcastJobSpec};
use crate::api::{ADVANCEDCRONJOB_KIND, BROADCASTJOB_KIND, defaults, validation};
use crate::conversion::{AdvancedCronJobConverter, BROADCASTJOB_CONVERTER};

/// Seconds the API server waits for a webhook.
const TIMEOUT_SECONDS: i32 = 30;

/// The routes `kruise-broadcastjob` serves with the default feature gates (see [`routes_for`]).
pub fn routes() -> AdmissionRoutes {
    routes_for(&FeatureGates::default())
}

/// The routes `kruise-broadcastjob` serves: both kinds' defaulting (as `gates` ask),
/// validation and conversion.
pub fn routes_for(gates: &FeatureGates) -> AdmissionRoutes {
    let template_defaults = TemplateDefaults::from_gates(gates);
    AdmissionRoutes::new()
        .handler(MutateBroadcastJob { template_defaults })
        .handler(Validate::<BroadcastJob>::new(
            "/validate-apps-kruise-io-broadcastjob",
            "vbroadcastjob.kb.io",
            "broadcastjobs",
            BROADCASTJOB_KIND,
            validation::validate_broadcastjob,
        ))
        .handler(MutateAdvancedCronJob { template_defaults })
        .handler(Validate::<AdvancedCronJob>::new(
            "/validate-apps-kruise-io-advancedcronjob",
            "vadvancedcronjob.kb.io",
            "advancedcronjobs",
            ADVANCEDCRONJOB_KIND,
            validation::validate_advancedcronjob,
        ))
        .converter(BROADCASTJOB_CONVERTER)
        .converter(AdvancedCronJobConverter)
}

fn check_version(version: &str, kind: &str) -> Result<(), HandlerError> {
    if version == V1ALPHA1 || version == V1BETA1 {
        return Ok(());
    }
    Err(HandlerError::Decode {
        kind: kind.into(),
        reason: format!("unsupported version {version:?} (served: v1alpha1, v1beta1)"),
    })
}

/// Whether the defaulting webhooks write Kubernetes' pod defaults into the pod templates
/// (`kruise_common::api::pod_defaults`), from OpenKruise's feature gates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TemplateDefaults {
    /// Inject them (`TemplateNoDefaults` off, OpenKruise's default).
    pub enabled: bool,
    /// `DefaultHostNetworkHostPortsInPodTemplates`.
    pub pod: PodDefaultsOptions,
}

impl Default for TemplateDefaults {
    fn default() -> Self {
        Self::from_gates(&FeatureGates::default())
    }
}

impl TemplateDefaults {
    /// What the binary's `--feature-gates` ask for.
    pub fn from_gates(gates: &FeatureGates) -> Self {
        TemplateDefaults {
            enabled: !gates.enabled("TemplateNoDefaults"),
            pod: PodDefaultsOptions {
                host_network_host_ports: gates.enabled("DefaultHostNetworkHostPortsInPodTemplates"),
            },
        }
    }

    /// The pod options when a request's templates get the defaults: on CREATE, and on an
    /// UPDATE whose `spec.template` differs from the old object's (as OpenKruise compares
    /// them), so an unchanged template is never rewritten.
    fn for_request(
        &self,
        request: &AdmissionRequest<DynamicObject>,
        object: &Value,
    ) -> Result<Option<PodDefaultsOptions>, HandlerError> {
        if !self.enabled {
            return Ok(None);
        }
        if let (Operation::Update, Some(old)) = (&request.operation, &request.old_object) {
            let old = object_json(old)?;
            if old.pointer("/spec/template") == object.pointer("/spec/template") {
                return Ok(None);
            }
        }
        Ok(Some(self.pod))
    }
}

/// Writes the pod defaults into the pod template at `pointer` of `object`, if there is
/// one, and writes it back as Go encodes it (as OpenKruise's webhook stores it).
fn default_template_at(object: &mut Value, pointer: &str, options: PodDefaultsOptions) {
    if let Some(template) = object.pointer_mut(pointer)
        && template.is_object()
    {
        default_pod_template(template, options);
        *template = go_encoded_pod_template(template);
    }
}

/// `spec_patch` applied to `object`, then the pod defaults at `templates` (when
/// `pod_defaults` is set): the patch from `object` to the result.
fn with_template_defaults(
    object: &Value,
    spec_patch: &json_patch::Patch,
    templates: &[&str],
    pod_defaults: Option<PodDefaultsOptions>,
) -> Result<json_patch::Patch, HandlerError> {
    let mut defaulted = object.clone();
    json_patch::patch(&mut defaulted, spec_patch)
        .map_err(|e| HandlerError::Internal(format!("applying the spec defaults: {e}")))?;
    if let Some(options) = pod_defaults {
        for pointer in templates {
            default_template_at(&mut defaulted, pointer, options);
        }
    }
    Ok(json_patch::diff(object, &defaulted))
}

/// A defaulting webhook's answer: CREATE and UPDATE get `patch(version, object, pod
/// defaults)` when it changes anything; everything else is allowed unchanged.
fn defaulting_response(
    request: &AdmissionRequest<DynamicObject>,
    template_defaults: TemplateDefaults,
    patch: impl FnOnce(
        &str,
        &Value,
        Option<PodDefaultsOptions>,
    ) -> Result<json_patch::Patch, HandlerError>,
) -> Result<AdmissionResponse, HandlerError> {
    let allowed = AdmissionResponse::from(request);
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return Ok(allowed);
    }
    let Some(object) = &request.object else {
        return Ok(allowed);
    };
    let object = object_json(object)?;
    let pod_defaults = template_defaults.for_request(request, &object)?;
    let patch = patch(&request.kind.version, &object, pod_defaults)?;
    if patch.0.is_empty() {
        return Ok(allowed);
    }
    allowed
        .with_patch(patch)
        .map_err(|e| HandlerError::Internal(format!("encoding patch: {e}")))
}

/// The mutating webhook entry of one kind (both versions, CREATE and UPDATE).
fn mutating_webhook(name: &str, resource: &str) -> WebhookSpec {
    WebhookSpec {
        timeout_seconds: TIMEOUT_SECONDS,
        ..WebhookSpec::crd(
            name,
            WebhookKind::Mutating,
            &["CREATE", "UPDATE"],
            APPS_GROUP,
            &[V1ALPHA1, V1BETA1],
            &[resource],
        )
    }
}

/// OpenKruise's `SetDefaultsBroadcastJob` as a JSONPatch: the spec's defaults and the pod
/// template's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MutateBroadcastJob {
    /// Whether and how the pod template is defaulted.
    pub template_defaults: TemplateDefaults,
}

impl MutateBroadcastJob {
    /// The path it is served at.
    pub const PATH: &'static str = "/mutate-apps-kruise-io-broadcastjob";

    /// The patch that defaults `object` at `version`; `pod_defaults` set: the pod template
    /// too.
    pub fn patch(
        &self,
        version: &str,
        object: &Value,
        pod_defaults: Option<PodDefaultsOptions>,
    ) -> Result<json_patch::Patch, HandlerError> {
        check_version(version, BROADCASTJOB_KIND)?;
        let spec_patch = defaults_patch(
            object,
            "/spec",
            BROADCASTJOB_KIND,
            |spec: &mut BroadcastJobSpec| {
                defaults::default_broadcastjob(spec);
                Ok(())
            },
        )?;
        with_template_defaults(object, &spec_patch, &["/spec/template"], pod_defaults)
    }
}

impl AdmissionHandler for MutateBroadcastJob {
    fn path(&self) -> &str {
        Self::PATH
    }

    fn webhook(&self) -> WebhookSpec {
        mutating_webhook("mbroadcastjob.kb.io", "broadcastjobs")
    }

    fn handle<'a>(
        &'a self,
        request: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(async move {
            defaulting_response(request, self.template_defaults, |version, object, pod| {
                self.patch(version, object, pod)
            })
        })
    }
}

/// OpenKruise's `SetDefaultsAdvancedCronJob` as a JSONPatch: the spec's defaults (an
/// ImageListPullJob template's included) and the pod templates of a `jobTemplate` or a
/// `broadcastJobTemplate`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MutateAdvancedCronJob {
    /// Whether and how the pod templates are defaulted.
    pub template_defaults: TemplateDefaults,
}

impl MutateAdvancedCronJob {
    /// The path it is served at.
    pub const PATH: &'static str = "/mutate-apps-kruise-io-advancedcronjob";

    /// The patch that defaults `object` at `version`; `pod_defaults` set: the pod templates
    /// too.
    pub fn patch(
        &self,
        version: &str,
        object: &Value,
        pod_defaults: Option<PodDefaultsOptions>,
    ) -> Result<json_patch::Patch, HandlerError> {
        check_version(version, ADVANCEDCRONJOB_KIND)?;
        let spec_patch = defaults_patch(
            object,
            "/spec",
            ADVANCEDCRONJOB_KIND,
            |spec: &mut AdvancedCronJobSpec| {
                defaults::default_advancedcronjob(spec);
                Ok(())
            },
        )?;
        with_template_defaults(
            object,
            &spec_patch,
            &[
                "/spec/template/jobTemplate/spec/template",
                "/spec/template/broadcastJobTemplate/spec/template",
            ],
            pod_defaults,
        )
    }
}

impl AdmissionHandler for MutateAdvancedCronJob {
    fn path(&self) -> &str {
        Self::PATH
    }

    fn webhook(&self) -> WebhookSpec {
        mutating_webhook("madvancedcronjob.kb.io", "advancedcronjobs")
    }

    fn handle<'a>(
        &'a self,
        request: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(async move {
            defaulting_response(request, self.template_defaults, |version, object, pod| {
                self.patch(version, object, pod)
            })
        })
    }
}

/// A validating webhook of one kind: CREATE and UPDATE checked on the `v1beta1` form.
pub struct Validate<K> {
    path: &'static str,
    webhook: &'static str,
    resource: &'static str,
    kind: &'static str,
    check: fn(&K) -> Vec<FieldError>,
}

impl<K> Validate<K> {
    fn new(
        path: &'static str,
        webhook: &'static str,
        resource: &'static str,
        kind: &'static str,
        check: fn(&K) -> Vec<FieldError>,
    ) -> Self {
        Self {
            path,
            webhook,
            resource,
            kind,
            check,
        }
    }

    fn validate(
        &self,
        request: &AdmissionRequest<DynamicObject>,
    ) -> Result<AdmissionResponse, HandlerError>
    where
        K: DeserializeOwned,
    {
        let allowed = AdmissionResponse::from(request);
        if !matches!(request.operation, Operation::Create | Operation::Update) {
            return Ok(allowed);
        }
        let Some(object) = &request.object else {
            return Ok(allowed);
        };
        check_version(&request.kind.version, self.kind)?;
        let typed: K = decode(&object_json(object)?, self.kind)?;
        Ok(deny_invalid(request, &(self.check)(&typed)))
    }
}

impl<K: DeserializeOwned + Send + Sync + 'static> AdmissionHandler for Validate<K> {
    fn path(&self) -> &str {
        self.path
    }

    fn webhook(&self) -> WebhookSpec {
        WebhookSpec {
            timeout_seconds: TIMEOUT_SECONDS,
            ..validating_webhook(self.webhook, self.resource, &["CREATE", "UPDATE"])
        }
    }

    fn handle<'a>(
        &'a self,
        request: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(async move { self.validate(request) })
    }
}
