//! `apps.kruise.io/v1alpha1` BroadcastJob and AdvancedCronJob: served, not stored. The same
//! fields as `v1beta1`, except that an AdvancedCronJob has no `imageListPullJobTemplate`.
//! Only the CRD's schema is generated from these types: the webhooks and the controllers
//! work on `v1beta1`, which `/convert` turns a `v1alpha1` object into.

use k8s_openapi::api::batch::v1::JobTemplateSpec;

use super::v1beta1::BroadcastJobTemplateSpec;

super::job_specs!("v1alpha1", false);

/// `spec.template` of an AdvancedCronJob (`v1alpha1`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CronJobTemplate {
    /// A batch/v1 Job per run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub job_template: Option<JobTemplateSpec>,
    /// A BroadcastJob per run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broadcast_job_template: Option<BroadcastJobTemplateSpec>,
}
