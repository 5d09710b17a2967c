//! SidecarSet API types (`apps.kruise.io` `v1alpha1` and `v1beta1`), field for field as
//! OpenKruise's `apis/apps/{v1alpha1,v1beta1}/sidecarset_types.go` define them.
//!
//! The two versions differ only in their spec's top level (`v1alpha1` has `namespace`,
//! `v1beta1` has `customVersion`), so the nested types are shared here.
//!
//! * [`v1alpha1`] / [`v1beta1`]: the two `SidecarSet` kinds (cluster-scoped, status subresource);
//! * [`crd`]: the merged CRD (`v1beta1` stored, both served);
//! * [`defaults`]: OpenKruise's defaulting (SidecarSet mutating webhook), including the
//!   hash annotations;
//! * [`validation`]: the validating webhook's checks, as a list of field errors;
//! * [`rollout`]: `partition` / `maxUnavailable` resolved against the matched pods.

pub mod crd;
pub mod defaults;
pub mod hash;
pub mod rollout;
pub mod v1alpha1;
pub mod v1beta1;
pub mod validation;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ObjectFieldSelector};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_core::api::{UpdatePriorityStrategy, UpdateScatterTerm};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group.
pub const GROUP: &str = kruise_core::api::version::APPS_GROUP;
/// Kind.
pub const KIND: &str = "SidecarSet";
pub use kruise_core::api::version::{V1ALPHA1, V1BETA1};

/// SidecarSet and pod annotation: the SidecarSet content hash (see [`crate::api::hash`]); on pods a
/// JSON map SidecarSet name -> [`crate::inject::SidecarSetUpgradeSpec`].
pub const SIDECARSET_HASH_ANNOTATION: &str = "kruise.io/sidecarset-hash";
/// Same as [`SIDECARSET_HASH_ANNOTATION`] with every image blanked.
pub const SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION: &str =
    "kruise.io/sidecarset-hash-without-image";
/// Pod annotation: comma-joined sorted names of the SidecarSets injected into the pod.
pub const SIDECARSET_INJECTED_LIST_ANNOTATION: &str = "kruise.io/sidecarset-injected-list";
/// Pod annotation: JSON map SidecarSet name -> in-place update state.
pub const SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION: &str =
    "kruise.io/sidecarset-inplace-update-state";
/// Pod annotation: JSON map sidecar name -> working hot-upgrade container (`<n>-1` / `<n>-2`).
pub const SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION: &str =
    "kruise.io/sidecarset-working-hotupgrade-container";
/// ControllerRevision label naming the SidecarSet.
pub const SIDECARSET_NAME_LABEL: &str = "kruise.io/sidecarset-name";
/// ControllerRevision (and `v1alpha1` SidecarSet) label carrying the custom version.
pub const SIDECARSET_CUSTOM_VERSION_LABEL: &str = "apps.kruise.io/sidecarset-custom-version";
/// SidecarSet annotation: `"true"` marks a canary SidecarSet.
pub const SIDECARSET_CANARY_ANNOTATION: &str = "apps.kruise.io/sidecarset-canary";
/// SidecarSet annotation: the base SidecarSet a canary overrides.
pub const SIDECARSET_BASE_ANNOTATION: &str = "apps.kruise.io/sidecarset-base";
/// Env var set to `"true"` in every injected container.
pub const SIDECAR_ENV_KEY: &str = "IS_INJECTED";
/// Env var (downward API) exposing a hot-upgrade container's version annotation.
pub const SIDECARSET_VERSION_ENV_KEY: &str = "SIDECARSET_VERSION";
/// Env var (downward API) exposing a hot-upgrade container's alternate version annotation.
pub const SIDECARSET_VERSION_ALT_ENV_KEY: &str = "SIDECARSET_VERSION_ALT";
/// Namespace label the API server sets to the namespace's own name.
pub const LABEL_METADATA_NAME: &str = "kubernetes.io/metadata.name";

/// `version.sidecarset.kruise.io/<container>`: the hot-upgrade version annotation.
pub fn version_annotation(container: &str) -> String {
    format!("version.sidecarset.kruise.io/{container}")
}

/// `versionalt.sidecarset.kruise.io/<container>`: the hot-upgrade alternate version annotation.
pub fn version_alt_annotation(container: &str) -> String {
    format!("versionalt.sidecarset.kruise.io/{container}")
}

/// `(<name>-1, <name>-2)`: the two containers a hot-upgrade sidecar becomes.
pub fn hot_upgrade_container_names(name: &str) -> (String, String) {
    (format!("{name}-1"), format!("{name}-2"))
}

pub(crate) use kruise_core::string_enum;

string_enum! {
    /// Where an injected container goes in `spec.containers`.
    PodInjectPolicy {
        /// In front of the pod's own containers (default for containers).
        BeforeAppContainer = "BeforeAppContainer",
        /// After the pod's own containers (default for init containers).
        AfterAppContainer = "AfterAppContainer",
    }
}

string_enum! {
    /// How a sidecar container is upgraded.
    SidecarContainerUpgradeType {
        /// Replace the image of the one container (default).
        ColdUpgrade = "ColdUpgrade",
        /// Two containers (`-1`, `-2`) alternate, one running the empty image.
        HotUpgrade = "HotUpgrade",
    }
}

string_enum! {
    /// Whether a sidecar shares the app containers' volume mounts / devices.
    ShareVolumePolicyType {
        /// Share.
        Enabled = "enabled",
        /// Do not share (default).
        Disabled = "disabled",
    }
}

string_enum! {
    /// How resourcesPolicy aggregates the target containers' resources.
    TargetContainersMode {
        /// Sum of the targets.
        Sum = "sum",
        /// Maximum of the targets.
        Max = "max",
    }
}

string_enum! {
    /// How a `patchPodMetadata` entry meets existing pod annotations.
    SidecarSetPatchPolicy {
        /// Keep existing values (default).
        Retain = "Retain",
        /// Overwrite existing values.
        Overwrite = "Overwrite",
        /// RFC 7386 merge of the patch into the existing JSON value.
        MergePatchJson = "MergePatchJson",
    }
}

string_enum! {
    /// Which revision an `injectionStrategy.revision` injects.
    SidecarSetInjectRevisionPolicy {
        /// Always the given revision (default when `revision` is set).
        Always = "Always",
        /// The given revision for pods outside `updateStrategy.selector`, otherwise by partition.
        Partial = "Partial",
    }
}

string_enum! {
    /// Whether injected pods are upgraded.
    SidecarSetUpdateStrategyType {
        /// Inject only.
        NotUpdate = "NotUpdate",
        /// Upgrade injected pods in place (default).
        RollingUpdate = "RollingUpdate",
    }
}

/// A sidecar: a core `Container` plus how to inject and upgrade it.
///
/// The CRD schema of the container part is schemaless (as OpenKruise's); the extra fields
/// are typed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct SidecarContainer {
    /// The container (inline).
    #[serde(flatten)]
    #[schemars(skip)]
    pub container: Container,
    /// Where the container goes in `spec.containers` (not used for init containers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_inject_policy: Option<PodInjectPolicy>,
    /// Cold or hot upgrade.
    #[serde(default, skip_serializing_if = "is_default")]
    pub upgrade_strategy: SidecarContainerUpgradeStrategy,
    /// Share the app containers' volume mounts.
    #[serde(default, skip_serializing_if = "is_default")]
    pub share_volume_policy: ShareVolumePolicy,
    /// Share the app containers' volume devices (a pointer in Go so the hash of old objects
    /// does not change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_volume_device_policy: Option<ShareVolumePolicy>,
    /// Env vars copied from app containers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transfer_env: Vec<TransferEnvVar>,
    /// Resources computed from the pod's containers at creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources_policy: Option<ResourcesPolicy>,
}

impl SidecarContainer {
    /// The container name.
    pub fn name(&self) -> &str {
        &self.container.name
    }

    /// Whether this is a hot-upgrade sidecar.
    pub fn is_hot_upgrade(&self) -> bool {
        self.upgrade_strategy.upgrade_type == Some(SidecarContainerUpgradeType::HotUpgrade)
    }

    /// Whether `shareVolumePolicy.type` is `enabled`.
    pub fn shares_volume_mounts(&self) -> bool {
        self.share_volume_policy.type_ == Some(ShareVolumePolicyType::Enabled)
    }

    /// Whether `shareVolumeDevicePolicy.type` is `enabled`.
    pub fn shares_volume_devices(&self) -> bool {
        self.share_volume_device_policy
            .as_ref()
            .is_some_and(|p| p.type_ == Some(ShareVolumePolicyType::Enabled))
    }
}

/// Whether a container is a Kubernetes native sidecar (`restartPolicy: Always`).
pub fn is_native_sidecar(container: &Container) -> bool {
    container.restart_policy.as_deref() == Some("Always")
}

/// `shareVolumePolicy` / `shareVolumeDevicePolicy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ShareVolumePolicy {
    /// `enabled` or `disabled`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<ShareVolumePolicyType>,
}

/// Env vars to copy from another container of the pod.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TransferEnvVar {
    /// The source container.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source_container_name: String,
    /// The source container's name read from the pod's metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_container_name_from: Option<SourceContainerNameSource>,
    /// One env var name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub env_name: String,
    /// More env var names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_names: Vec<String>,
}

/// Where a transferEnv source container name comes from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceContainerNameSource {
    /// `metadata.name`, `metadata.labels['<k>']` or `metadata.annotations['<k>']`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_ref: Option<ObjectFieldSelector>,
}

/// Resources of a sidecar computed from the pod's other containers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourcesPolicy {
    /// `sum` or `max`.
    pub target_containers_mode: TargetContainersMode,
    /// Regex over target container names (default `.*`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target_containers_name_regex: String,
    /// Expressions.
    #[serde(default)]
    pub resources_expr: ResourcesExpr,
}

impl Default for TargetContainersMode {
    fn default() -> Self {
        TargetContainersMode::Unknown(String::new())
    }
}

/// Expressions of limits and requests.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResourcesExpr {
    /// Limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ResourceExprs>,
    /// Requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<ResourceExprs>,
}

/// cpu / memory expressions (`+ - * /`, `max()`, `min()`, variables `cpu` / `memory`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceExprs {
    /// CPU expression.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cpu: String,
    /// Memory expression.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub memory: String,
}

/// Per-container upgrade strategy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarContainerUpgradeStrategy {
    /// ColdUpgrade (default) or HotUpgrade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade_type: Option<SidecarContainerUpgradeType>,
    /// Image of the idle hot-upgrade container.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hot_upgrade_empty_image: String,
}

/// Pod annotations to patch at injection (and in-place upgrade).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetPatchPodMetadata {
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Retain (default), Overwrite or MergePatchJson.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_policy: Option<SidecarSetPatchPolicy>,
}

/// `injectionStrategy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetInjectionStrategy {
    /// Stop injecting into new pods.
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
    /// Inject a historical revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<SidecarSetInjectRevision>,
}

/// `injectionStrategy.revision`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetInjectRevision {
    /// Selects the newest ControllerRevision with this custom version label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_version: Option<String>,
    /// Selects a ControllerRevision by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_name: Option<String>,
    /// Always (default) or Partial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<SidecarSetInjectRevisionPolicy>,
}

/// `updateStrategy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetUpdateStrategy {
    /// RollingUpdate (default) or NotUpdate.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<SidecarSetUpdateStrategyType>,
    /// Stop upgrading injected pods.
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
    /// Only pods matching it are upgraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Pods kept at old revisions (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<IntOrString>,
    /// Pods that may be unavailable during the upgrade (default 1; percent rounds up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Update priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_strategy: Option<UpdatePriorityStrategy>,
    /// Scatter terms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scatter_strategy: Vec<UpdateScatterTerm>,
}

/// Observed state (same in both versions).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetStatus {
    /// Most recent generation observed.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
    /// Pods matched (and injected).
    #[serde(default)]
    pub matched_pods: i32,
    /// Matched pods at the latest SidecarSet hash.
    #[serde(default)]
    pub updated_pods: i32,
    /// Matched pods that are ready.
    #[serde(default)]
    pub ready_pods: i32,
    /// Matched pods updated and ready.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub updated_ready_pods: i32,
    /// Name of the latest ControllerRevision.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub latest_revision: String,
    /// Hash collision count for revision names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
}

pub(crate) use kruise_core::api::serde_helpers::{
    is_default, is_false, is_zero_i32, is_zero_i64, preserve_unknown_fields,
};
