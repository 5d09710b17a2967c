//! `apps.kruise.io/v1beta1` BroadcastJob and AdvancedCronJob: the storage version.

use k8s_openapi::api::batch::v1::JobTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

super::job_specs!("v1beta1", true);

/// `spec.template` of an AdvancedCronJob (`v1beta1`).
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
    /// An ImageListPullJob per run (v1beta1 only). Kept as JSON for the defaulting to
    /// edit; its schema is the ImageListPullJob's ([`ImageListPullJobTemplateSchema`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "image_list_pull_job_template_schema")]
    pub image_list_pull_job_template: Option<serde_json::Value>,
}

/// The schema of `imageListPullJobTemplate`: the metadata and spec of the ImageListPullJob
/// each run creates, typed as the image family's CRD types that spec.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageListPullJobTemplateSchema {
    /// Labels and annotations of the ImageListPullJobs.
    #[serde(default)]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub metadata: Option<ObjectMeta>,
    /// Their spec.
    pub spec: Option<ImageListPullJobTemplateSpec>,
}

/// An ImageListPullJob's spec, in [`ImageListPullJobTemplateSchema`].
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageListPullJobTemplateSpec {
    /// The images, unique, at most 255.
    pub images: Vec<String>,
    /// Every child's template (inline).
    #[serde(flatten)]
    pub template: kruise_core::api::image_pull::ImagePullJobTemplate,
}

fn image_list_pull_job_template_schema(
    generator: &mut schemars::SchemaGenerator,
) -> schemars::Schema {
    generator.subschema_for::<Option<ImageListPullJobTemplateSchema>>()
}

/// The BroadcastJob an AdvancedCronJob creates per run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BroadcastJobTemplateSpec {
    /// Labels and annotations of the BroadcastJobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub metadata: Option<ObjectMeta>,
    /// Their spec.
    #[serde(default)]
    pub spec: BroadcastJobSpec,
}

impl AdvancedCronJob {
    /// `spec.paused`, false when unset.
    pub fn is_paused(&self) -> bool {
        self.spec.paused.unwrap_or(false)
    }
}
