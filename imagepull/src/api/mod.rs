//! ImagePullJob, ImageListPullJob and NodeImage API: the `apps.kruise.io` `v1alpha1` and
//! `v1beta1` types (field for field as OpenKruise defines them), the three CRDs, defaulting
//! and validation.
//!
//! Both versions carry the same fields, so the types below are shared and [`v1alpha1`] and
//! [`v1beta1`] only declare the kinds (`v1beta1` stored, the one the controllers reconcile).
//!
//! * [`crd`]: the three `CustomResourceDefinition`s with OpenKruise's printer columns;
//! * [`defaults`]: OpenKruise's `SetDefaultsImagePullJob`, `…ImageListPullJob`, `…NodeImage`;
//! * [`validation`]: the validating webhooks' checks, as a list of field errors;
//! * [`image`]: image references as the agent and the checks read them.

pub mod crd;
pub mod defaults;
pub mod image;
pub mod v1alpha1;
pub mod v1beta1;
pub mod validation;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use kruise_core::api::image_pull::{
    DEFAULT_BACKOFF_LIMIT, DEFAULT_TIMEOUT_SECONDS, ImagePullJobNodeSelector,
    ImagePullJobPodSelector, ImagePullJobTemplate, ImagePullPolicy, PullPolicy, SandboxConfig,
};
pub use kruise_core::api::job::{CompletionPolicy, CompletionPolicyType};

pub(crate) use kruise_core::api::serde_helpers::{is_zero_i32, is_zero_i64};
pub(crate) use kruise_core::string_enum;

/// API group of the three kinds.
pub const GROUP: &str = kruise_core::api::version::APPS_GROUP;
/// ImagePullJob's kind name.
pub const IMAGEPULLJOB_KIND: &str = "ImagePullJob";
/// ImageListPullJob's kind name.
pub const IMAGELISTPULLJOB_KIND: &str = "ImageListPullJob";
/// NodeImage's kind name.
pub const NODEIMAGE_KIND: &str = "NodeImage";
/// ImagePullJob's CRD name.
pub const IMAGEPULLJOB_CRD: &str = "imagepulljobs.apps.kruise.io";
/// ImageListPullJob's CRD name.
pub const IMAGELISTPULLJOB_CRD: &str = "imagelistpulljobs.apps.kruise.io";
/// NodeImage's CRD name.
pub const NODEIMAGE_CRD: &str = "nodeimages.apps.kruise.io";

/// Finalizer the controller keeps on an ImagePullJob until its secrets and tags are released.
pub const PROTECTION_FINALIZER: &str = "apps.kruise.io/deletion-protection";
/// NodeImage label: the NodeImage is tied to no Node (kept when no Node has its name).
pub const FAKE_NODEIMAGE_LABEL: &str = "apps.kruise.io/fake-nodeimage";
/// Synced-secret label: the source secret's UID, as OpenKruise v1.8.3 labels its copies (its
/// clients and e2e suite find a job's copy by it).
pub const SOURCE_SECRET_UID_LABEL: &str = "imagepulljobs.kruise.io/source-uid";
/// Synced-secret annotation: the source secret, `<namespace>/<name>`.
pub const SOURCE_SECRET_KEY_ANNOTATION: &str = "imagepulljobs.kruise.io/source-key";
/// Synced-secret annotation: the jobs referring to it, `<namespace>/<name>` sorted, comma separated.
pub const SECRET_REFERENCES_ANNOTATION: &str = "imagepulljobs.kruise.io/references";
/// Synced-secret annotation: `batch`, the one-copy-per-source mode.
pub const SECRET_MODE_ANNOTATION: &str = "imagepulljobs.kruise.io/mode";
/// `ReferenceObject.mode` (and [`SECRET_MODE_ANNOTATION`]) of secrets synced once per source.
pub const REFERENCE_MODE_BATCH: &str = "batch";
/// ImageListPullJob child label: the template hash it was created from.
pub const TEMPLATE_HASH_LABEL: &str = "controller-revision-hash";

/// Most images one NodeImage may carry.
pub const MAX_NODEIMAGE_IMAGES: usize = 256;
/// Most images one ImageListPullJob may list.
pub const MAX_IMAGELIST_IMAGES: usize = 255;

string_enum! {
    /// `phase` of a NodeImage tag's status.
    ImagePullPhase {
        /// The agent has not started the pull.
        Waiting = "Waiting",
        /// The pull runs.
        Pulling = "Pulling",
        /// The image is on the node.
        Succeeded = "Succeeded",
        /// The pull failed (after its retries) or timed out.
        Failed = "Failed",
    }
}

/// Observed state of an ImagePullJob; identical in both versions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImagePullJobStatus {
    /// When the controller first saw the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the job finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Nodes the job pulls on.
    #[serde(default)]
    pub desired: i32,
    /// Nodes pulling now.
    #[serde(default)]
    pub active: i32,
    /// Nodes that have the image.
    #[serde(default)]
    pub succeeded: i32,
    /// Nodes whose pull failed.
    #[serde(default)]
    pub failed: i32,
    /// Progress in words (`job is running, progress 40.0%`, `job has completed` …).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The nodes whose pull failed, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_nodes: Vec<String>,
}

/// Observed state of an ImageListPullJob; identical in both versions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageListPullJobStatus {
    /// When the controller first saw the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When every child finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Images to pull (one child ImagePullJob each).
    #[serde(default)]
    pub desired: i32,
    /// Children still running.
    #[serde(default)]
    pub active: i32,
    /// Children finished.
    #[serde(default)]
    pub completed: i32,
    /// Children finished with every node succeeded.
    #[serde(default)]
    pub succeeded: i32,
    /// The children with failed nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_image_statuses: Vec<FailedImageStatus>,
}

/// One child of an ImageListPullJob with failed nodes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailedImageStatus {
    /// The child ImagePullJob's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_pull_job: String,
    /// The image.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The child's message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// One image of a NodeImage's spec: its tags to pull and the secrets to pull with.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageSpec {
    /// Secrets to pull with (`namespace/name`; `mode: batch` for the one-copy-per-source secrets).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pull_secrets: Vec<ReferenceObject>,
    /// The tags to pull.
    #[serde(default)]
    pub tags: Vec<ImageTagSpec>,
    /// Metadata passed to CRI `PullImage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_config: Option<SandboxConfig>,
}

/// A secret by namespace and name.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceObject {
    /// Its namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Its name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `batch`: synced once per source, removed with the image's last tag.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mode: String,
}

/// One tag of an image a NodeImage pulls.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageTagSpec {
    /// The tag (or digest).
    pub tag: String,
    /// When the tag was (re)requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Time>,
    /// The pull task's limits and lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_policy: Option<ImageTagPullPolicy>,
    /// The jobs that want the tag.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owner_references: Vec<ObjectReference>,
    /// Bumped whenever the tag is requested anew: the agent pulls each version once.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub version: i64,
    /// `Always` or `IfNotPresent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<ImagePullPolicy>,
}

/// A NodeImage tag's pull task: limits and lifetime.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageTagPullPolicy {
    /// Seconds one pull may take (default 600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    /// Retries before the task fails (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,
    /// Seconds after the task finished the tag is pruned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
    /// Seconds after the tag's creation the task may run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
}

/// Observed state of a NodeImage; identical in both versions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeImageStatus {
    /// Tags in the spec.
    #[serde(default)]
    pub desired: i32,
    /// Tags pulled.
    #[serde(default)]
    pub succeeded: i32,
    /// Tags failed.
    #[serde(default)]
    pub failed: i32,
    /// Tags pulling.
    #[serde(default)]
    pub pulling: i32,
    /// Tags waiting.
    #[serde(default)]
    pub waiting: i32,
    /// Per image, the agent's answer per tag.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub image_statuses: BTreeMap<String, ImageStatus>,
    /// Declared by OpenKruise, not written (kept as read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_sync_status: Option<SyncStatus>,
}

/// The tags' statuses of one image.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageStatus {
    /// One per tag the agent answered.
    #[serde(default)]
    pub tags: Vec<ImageTagStatus>,
}

/// The agent's answer for one tag version.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageTagStatus {
    /// The tag.
    pub tag: String,
    /// `Waiting`, `Pulling`, `Succeeded` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ImagePullPhase>,
    /// 0–100.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub progress: i32,
    /// When the agent took the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the task finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// The tag version the answer is for.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub version: i64,
    /// The pulled image's id (`name@sha256:…`).
    #[serde(rename = "imageID", default, skip_serializing_if = "String::is_empty")]
    pub image_id: String,
    /// Why it failed, or a progress note.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// `status.firstSyncStatus` (declared by OpenKruise, never written).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncStatus {
    /// When.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_at: Option<Time>,
    /// `Succeeded` or `Failed`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// Details.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// Declares the three kinds of one served version, over the shared types above.
macro_rules! kinds {
    ($version:literal, $storage:literal) => {
        use std::collections::BTreeMap;

        use kube::CustomResource;
        use schemars::JsonSchema;
        use serde::{Deserialize, Serialize};

        pub use crate::api::{
            ImageListPullJobStatus, ImagePullJobStatus, ImagePullJobTemplate, ImageSpec,
            NodeImageStatus,
        };

        /// Desired state of an ImagePullJob: one image, pulled on the selected nodes.
        #[derive(
            CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema,
        )]
        #[kube(
                            group = "apps.kruise.io",
                            version = $version,
                            kind = "ImagePullJob",
                            plural = "imagepulljobs",
                            singular = "imagepulljob",
                            namespaced,
                            derive = "PartialEq",
                            status = "ImagePullJobStatus",
                            storage = $storage,
                            served = true,
                            doc = "ImagePullJob is the Schema for the imagepulljobs API"
                        )]
        #[serde(rename_all = "camelCase")]
        pub struct ImagePullJobSpec {
            /// The image to pull.
            #[serde(default)]
            pub image: String,
            /// Where, how and for how long (inline).
            #[serde(flatten)]
            pub template: ImagePullJobTemplate,
        }

        /// Desired state of an ImageListPullJob: one child ImagePullJob per image.
        #[derive(
            CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema,
        )]
        #[kube(
                            group = "apps.kruise.io",
                            version = $version,
                            kind = "ImageListPullJob",
                            plural = "imagelistpulljobs",
                            singular = "imagelistpulljob",
                            namespaced,
                            derive = "PartialEq",
                            status = "ImageListPullJobStatus",
                            storage = $storage,
                            served = true,
                            doc = "ImageListPullJob is the Schema for the imagelistpulljobs API"
                        )]
        #[serde(rename_all = "camelCase")]
        pub struct ImageListPullJobSpec {
            /// The images, unique, at most 255.
            #[serde(default)]
            pub images: Vec<String>,
            /// Every child's template (inline).
            #[serde(flatten)]
            pub template: ImagePullJobTemplate,
        }

        /// Desired state of a NodeImage: the images its node's agent pulls.
        #[derive(
            CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema,
        )]
        #[kube(
                            group = "apps.kruise.io",
                            version = $version,
                            kind = "NodeImage",
                            plural = "nodeimages",
                            singular = "nodeimage",
                            derive = "PartialEq",
                            status = "NodeImageStatus",
                            storage = $storage,
                            served = true,
                            doc = "NodeImage is the Schema for the nodeimages API"
                        )]
        #[serde(rename_all = "camelCase")]
        pub struct NodeImageSpec {
            /// Image name -> its tags and secrets; at most 256 images.
            #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
            pub images: BTreeMap<String, ImageSpec>,
        }
    };
}
pub(crate) use kinds;
