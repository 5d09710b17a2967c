//! The ImageListPullJob an AdvancedCronJob creates from its `imageListPullJobTemplate`
//! (`imagelistpulljobs.apps.kruise.io/v1beta1`, owned by another family): only what the cron
//! controller reads — its status's counts and times; the spec is carried as the template
//! wrote it, for the ImageListPullJob's own webhook to default and check.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The ImageListPullJob CRD's name.
pub const IMAGELISTPULLJOB_CRD: &str = "imagelistpulljobs.apps.kruise.io";

/// The spec, as written (images, selector, policies …).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "ImageListPullJob",
    plural = "imagelistpulljobs",
    namespaced,
    derive = "PartialEq",
    status = "ImageListPullJobStatus",
    schema = "disabled"
)]
pub struct ImageListPullJobSpec {
    /// Every field of the spec.
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

/// What the cron controller reads of an ImageListPullJob's status.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageListPullJobStatus {
    /// When it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When it finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Image pulls wanted.
    #[serde(default)]
    pub desired: i32,
    /// Image pulls that succeeded.
    #[serde(default)]
    pub succeeded: i32,
}
