//! The ResourceDistribution API (`apps.kruise.io/v1alpha1`, cluster-scoped), field for field
//! as OpenKruise v1.8.3 defines it, the keys its copies carry, its CRD ([`crd`]) and its
//! validation ([`validation`]).

pub mod crd;
pub mod validation;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kruise_core::api::serde_helpers::{is_default, is_false, is_zero_i32, is_zero_i64};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The kind's name.
pub const KIND: &str = "ResourceDistribution";
/// The kind's resource (plural).
pub const RESOURCE: &str = "resourcedistributions";
/// The CRD's name.
pub const CRD_NAME: &str = "resourcedistributions.apps.kruise.io";
/// The apiVersion of the kind (its only version), as its copies' owner references name it.
pub const API_VERSION: &str = kruise_core::api::version::APPS_V1ALPHA1;

/// Annotation on every copy: the SHA-256 (hex) of the distribution's `spec.resource` as the
/// API server serves it (Go's JSON), so a copy of an older resource is told apart at once.
pub const HASH_ANNOTATION: &str = "kruise.io/resourcedistribution.resource.hashcode";
/// Annotation on every copy: the name of the distribution it came from.
pub const SOURCE_ANNOTATION: &str = "kruise.io/resourcedistribution.resource.from";

/// What to distribute and where (`ResourceDistributionSpec`).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "ResourceDistribution",
    plural = "resourcedistributions",
    singular = "resourcedistribution",
    shortname = "distributor",
    derive = "PartialEq",
    derive = "Default",
    status = "ResourceDistributionStatus",
    doc = "ResourceDistribution is the Schema for the resourcedistributions API."
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionSpec {
    /// The complete Secret or ConfigMap to distribute (`apiVersion`, `kind`, `metadata.name`
    /// and its content); its namespace, if any, is replaced by each target's.
    #[schemars(schema_with = "embedded_resource")]
    pub resource: serde_json::Value,
    /// The namespaces to distribute to.
    pub targets: ResourceDistributionTargets,
}

/// The target namespaces: the union of `allNamespaces`, `includedNamespaces` and the
/// namespaces `namespaceLabelSelector` matches, less `excludedNamespaces` (which wins).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionTargets {
    /// Every namespace of the cluster.
    #[serde(default, skip_serializing_if = "is_false")]
    pub all_namespaces: bool,
    /// Never these namespaces.
    #[serde(default, skip_serializing_if = "is_default")]
    pub excluded_namespaces: ResourceDistributionTargetNamespaces,
    /// These namespaces (each counted as desired, existing or not).
    #[serde(default, skip_serializing_if = "is_default")]
    pub included_namespaces: ResourceDistributionTargetNamespaces,
    /// The namespaces whose labels match (an empty selector matches none).
    #[serde(default, skip_serializing_if = "is_default")]
    pub namespace_label_selector: LabelSelector,
}

/// A list of namespace names.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceDistributionTargetNamespaces {
    /// The namespaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub list: Vec<ResourceDistributionNamespace>,
}

impl ResourceDistributionTargetNamespaces {
    /// Whether `namespace` is listed.
    pub fn contains(&self, namespace: &str) -> bool {
        self.list.iter().any(|n| n.name == namespace)
    }
}

/// A namespace name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceDistributionNamespace {
    /// Namespace name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// What the controller last did (`ResourceDistributionStatus`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionStatus {
    /// The target namespaces.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub desired: i32,
    /// The target namespaces whose copy is current.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub succeeded: i32,
    /// `desired - succeeded`.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub failed: i32,
    /// The generation this status was computed from.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
    /// Always the six conditions of [`ConditionType::ALL`], in that order: `True` with the
    /// failed namespaces when that step failed somewhere, `False` (reason `Succeeded`) when not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ResourceDistributionCondition>,
}

/// One step's outcome over the namespaces (`ResourceDistributionCondition`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionCondition {
    /// One of [`ConditionType::ALL`].
    #[serde(rename = "type")]
    pub type_: String,
    /// `True` (the step failed in some namespace), `False` or `Unknown`.
    pub status: String,
    /// When `status` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// The last failure's message, or `Succeeded`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The namespaces where the step failed.
    #[serde(
        default,
        rename = "failedNamespace",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub failed_namespaces: Vec<String>,
}

/// The steps whose failures the conditions report, in the order the status lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConditionType {
    /// Reading a copy failed.
    GetResourceFailed,
    /// Creating a copy failed.
    CreateResourceFailed,
    /// Updating a copy failed.
    UpdateResourceFailed,
    /// Deleting a copy failed.
    DeleteResourceFailed,
    /// A same-named object the distribution does not own is in the namespace.
    ConflictOccurred,
    /// A target namespace does not exist or is being deleted.
    NamespaceNotExists,
}

impl ConditionType {
    /// Every type, in the status's order (OpenKruise's condition indexes).
    pub const ALL: [ConditionType; 6] = [
        ConditionType::GetResourceFailed,
        ConditionType::CreateResourceFailed,
        ConditionType::UpdateResourceFailed,
        ConditionType::DeleteResourceFailed,
        ConditionType::ConflictOccurred,
        ConditionType::NamespaceNotExists,
    ];

    /// The type's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionType::GetResourceFailed => "GetResourceFailed",
            ConditionType::CreateResourceFailed => "CreateResourceFailed",
            ConditionType::UpdateResourceFailed => "UpdateResourceFailed",
            ConditionType::DeleteResourceFailed => "DeleteResourceFailed",
            ConditionType::ConflictOccurred => "ConflictOccurred",
            ConditionType::NamespaceNotExists => "NamespaceNotExists",
        }
    }

    /// Whether a failure of this step is retried: a conflict or a missing namespace waits
    /// for the namespace or the object to change instead.
    pub fn is_retried(self) -> bool {
        !matches!(
            self,
            ConditionType::ConflictOccurred | ConditionType::NamespaceNotExists
        )
    }
}

/// The schema of `spec.resource`: a whole object, kept as sent, its `apiVersion`, `kind` and
/// `metadata` checked by the API server (`x-kubernetes-embedded-resource`).
fn embedded_resource(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-embedded-resource": true,
        "x-kubernetes-preserve-unknown-fields": true,
    })
}
