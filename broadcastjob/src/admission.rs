//! The BroadcastJob and AdvancedCronJob webhooks, served by `kruise-broadcastjob` through
//! `kruise_admission`, with OpenKruise's paths and entry names:
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

use kruise_admission::crd_webhooks::{
    Defaulting, ValidateKind, spec_defaults_patch, with_template_defaults,
};
use kruise_admission::{AdmissionRoutes, HandlerError};
use kruise_compat::pod_defaults::{
    PodDefaultsOptions, TemplateDefaults, default_pod_template, go_encoded_pod_template,
};
use kruise_core::featuregate::FeatureGates;
use kube::core::DynamicObject;
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
    let template_defaults = gates.template_defaults();
    AdmissionRoutes::new()
        .handler(MutateBroadcastJob { template_defaults })
        .handler(ValidateKind::<BroadcastJob> {
            path: "/validate-apps-kruise-io-broadcastjob",
            webhook: "vbroadcastjob.kb.io",
            resource: "broadcastjobs",
            kind: BROADCASTJOB_KIND,
            timeout_seconds: TIMEOUT_SECONDS,
            check: |job, _| validation::validate_broadcastjob(job),
        })
        .handler(MutateAdvancedCronJob { template_defaults })
        .handler(ValidateKind::<AdvancedCronJob> {
            path: "/validate-apps-kruise-io-advancedcronjob",
            webhook: "vadvancedcronjob.kb.io",
            resource: "advancedcronjobs",
            kind: ADVANCEDCRONJOB_KIND,
            timeout_seconds: TIMEOUT_SECONDS,
            check: |job, _| validation::validate_advancedcronjob(job),
        })
        .converter(BROADCASTJOB_CONVERTER)
        .converter(AdvancedCronJobConverter)
}

/// Writes the pod defaults into the pod template at each of `pointers` of `object` that has
/// one, written back as Go encodes it (as OpenKruise's webhook stores it).
fn default_templates_at(object: &mut Value, pointers: &[&str], options: PodDefaultsOptions) {
    for pointer in pointers {
        if let Some(template) = object.pointer_mut(pointer)
            && template.is_object()
        {
            default_pod_template(template, options);
            *template = go_encoded_pod_template(template);
        }
    }
}

/// OpenKruise's `SetDefaultsBroadcastJob` as a JSONPatch: the spec's defaults and the pod
/// template's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MutateBroadcastJob {
    /// Whether and how the pod template is defaulted.
    pub template_defaults: TemplateDefaults,
}

impl Defaulting for MutateBroadcastJob {
    const PATH: &'static str = "/mutate-apps-kruise-io-broadcastjob";
    const WEBHOOK: &'static str = "mbroadcastjob.kb.io";
    const RESOURCE: &'static str = "broadcastjobs";
    const TIMEOUT_SECONDS: i32 = TIMEOUT_SECONDS;

    fn patch(
        &self,
        version: &str,
        object: &Value,
        old: Option<&DynamicObject>,
    ) -> Result<json_patch::Patch, HandlerError> {
        let spec_patch = spec_defaults_patch(
            version,
            object,
            BROADCASTJOB_KIND,
            |spec: &mut BroadcastJobSpec, _| {
                defaults::default_broadcastjob(spec);
            },
        )?;
        with_template_defaults(object, spec_patch, self.template_defaults, old, |o, pod| {
            default_templates_at(o, &["/spec/template"], pod)
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

impl Defaulting for MutateAdvancedCronJob {
    const PATH: &'static str = "/mutate-apps-kruise-io-advancedcronjob";
    const WEBHOOK: &'static str = "madvancedcronjob.kb.io";
    const RESOURCE: &'static str = "advancedcronjobs";
    const TIMEOUT_SECONDS: i32 = TIMEOUT_SECONDS;

    fn patch(
        &self,
        version: &str,
        object: &Value,
        old: Option<&DynamicObject>,
    ) -> Result<json_patch::Patch, HandlerError> {
        let spec_patch = spec_defaults_patch(
            version,
            object,
            ADVANCEDCRONJOB_KIND,
            |spec: &mut AdvancedCronJobSpec, _| {
                defaults::default_advancedcronjob(spec);
            },
        )?;
        with_template_defaults(object, spec_patch, self.template_defaults, old, |o, pod| {
            default_templates_at(
                o,
                &[
                    "/spec/template/jobTemplate/spec/template",
                    "/spec/template/broadcastJobTemplate/spec/template",
                ],
                pod,
            )
        })
    }
}
