//! Well-known label, annotation, finalizer and condition-type keys (exact strings, reference §10.1).
//!
//! Families share these so every controller writes the same bytes OpenKruise writes.

/// Pod readiness-gate / condition type owned by the in-place update engine.
pub const INPLACE_UPDATE_READY: &str = "InPlaceUpdateReady";
/// Multi-writer pod readiness-gate / condition type (CRR, lifecycle `markPodNotReady`).
pub const KRUISE_POD_READY: &str = "KruisePodReady";
/// Pod condition type set by SidecarSet.
pub const SIDECARSET_UPGRADABLE: &str = "SidecarSetUpgradable";
/// Reason written on `InPlaceUpdateReady=False` when an in-place update starts.
pub const REASON_START_INPLACE_UPDATE: &str = "StartInPlaceUpdate";

/// Annotation holding the JSON `InPlaceUpdateState` of a pod.
pub const INPLACE_UPDATE_STATE_KEY: &str = "apps.kruise.io/inplace-update-state";
/// Legacy spelling of [`INPLACE_UPDATE_STATE_KEY`] (read, then removed on the next write).
pub const INPLACE_UPDATE_STATE_KEY_OLD: &str = "inplace-update-state";
/// Annotation holding the pending `UpdateSpec` JSON while the grace period runs.
pub const INPLACE_UPDATE_GRACE_KEY: &str = "apps.kruise.io/inplace-update-grace";
/// Legacy spelling of [`INPLACE_UPDATE_GRACE_KEY`].
pub const INPLACE_UPDATE_GRACE_KEY_OLD: &str = "inplace-update-grace";
/// Annotation written by kruise-daemon with per-container runtime hashes.
pub const RUNTIME_CONTAINERS_META_KEY: &str = "apps.kruise.io/runtime-containers-meta";

/// Pod lifecycle state label.
pub const LIFECYCLE_STATE_KEY: &str = "lifecycle.apps.kruise.io/state";
/// Pod lifecycle state timestamp annotation (RFC 3339, second precision).
pub const LIFECYCLE_TIMESTAMP_KEY: &str = "lifecycle.apps.kruise.io/timestamp";

/// Label requesting that a pod be deleted by its workload (any value; controllers write `"true"`).
pub const SPECIFIED_DELETE_KEY: &str = "apps.kruise.io/specified-delete";
/// CloneSet pod / PVC instance id label.
pub const CLONESET_INSTANCE_ID_KEY: &str = "apps.kruise.io/cloneset-instance-id";
/// CloneSet label for v1alpha1 `scaleStrategy.excludePreparingDelete`.
pub const CLONESET_SCALING_EXCLUDE_PREPARING_DELETE_KEY: &str =
    "apps.kruise.io/cloneset-scaling-exclude-preparing-delete";
/// Kruise-prefixed revision label constant (UnitedDeployment; unused by in-scope controllers).
pub const KRUISE_CONTROLLER_REVISION_HASH_KEY: &str = "apps.kruise.io/controller-revision-hash";
/// Kubernetes' pod / ControllerRevision revision label.
pub const CONTROLLER_REVISION_HASH_KEY: &str = "controller-revision-hash";
/// CloneSet short-hash pod label.
pub const POD_TEMPLATE_HASH_KEY: &str = "pod-template-hash";
/// Hash label on ControllerRevisions (and ImagePullJobs).
pub const CONTROLLER_REVISION_HASH_LABEL_ON_CR: &str = "controller.kubernetes.io/hash";
/// Pod annotation: scale-in preference (lower is deleted first).
pub const POD_DELETION_COST_KEY: &str = "controller.kubernetes.io/pod-deletion-cost";
/// StatefulSet pod name label.
pub const STATEFULSET_POD_NAME_KEY: &str = "statefulset.kubernetes.io/pod-name";
/// StatefulSet pod index label.
pub const POD_INDEX_KEY: &str = "apps.kubernetes.io/pod-index";
/// DaemonSet legacy template generation label.
pub const POD_TEMPLATE_GENERATION_KEY: &str = "pod-template-generation";
/// Container launch priority annotation (value `Ordered`).
pub const CONTAINER_LAUNCH_PRIORITY_KEY: &str = "apps.kruise.io/container-launch-priority";
/// Container launch priority barrier finished annotation.
pub const CONTAINER_LAUNCH_PRIORITY_COMPLETED_KEY: &str =
    "apps.kruise.io/container-launch-priority-completed";
/// Env var carrying a container's launch priority.
pub const ENV_CONTAINER_PRIORITY: &str = "KRUISE_CONTAINER_PRIORITY";
/// Env var carrying a container's launch barrier (`valueFrom.configMapKeyRef.key` = `p_<n>`).
pub const ENV_CONTAINER_BARRIER: &str = "KRUISE_CONTAINER_BARRIER";
/// Image pre-download parallelism annotation on workloads.
pub const IMAGE_PREDOWNLOAD_PARALLELISM_KEY: &str = "apps.kruise.io/image-predownload-parallelism";
/// Image pre-download timeout annotation on workloads.
pub const IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_KEY: &str =
    "apps.kruise.io/image-predownload-timeout-seconds";
/// Image pre-download minimum updated-ready pods annotation on workloads.
pub const IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS_KEY: &str =
    "apps.kruise.io/image-predownload-min-updated-ready-pods";
/// Revision label: ImagePullJobs were created (sic: `pre-predownload`).
pub const IMAGE_PREDOWNLOAD_CREATED_KEY: &str = "apps.kruise.io/pre-predownload-created";
/// Revision label: pre-download skipped.
pub const IMAGE_PREDOWNLOAD_IGNORED_KEY: &str = "apps.kruise.io/image-predownload-ignored";
/// CloneSet volumeClaimTemplates hash annotation on ControllerRevisions.
pub const CLONESET_VCT_HASH_KEY: &str = "kruise.io/cloneset-volumeclaimtemplate-hash";
/// Deletion protection label (`Always` / `Cascading`).
pub const DELETION_PROTECTION_KEY: &str = "policy.kruise.io/delete-protection";
/// Finalizer used by ImagePullJob deletion protection.
pub const DELETION_PROTECTION_FINALIZER: &str = "apps.kruise.io/deletion-protection";
/// Prefix of labels marking a pod unavailable for PodUnavailableBudget.
pub const POD_UNAVAILABLE_LABEL_PREFIX: &str = "unavailable-pod.kruise.io/";
/// Annotation on pods naming their PodUnavailableBudget.
pub const PUB_RELATED_KEY: &str = "kruise.io/related-pub";
/// Annotation on pods bypassing PodUnavailableBudget protection.
pub const PUB_NO_PROTECT_KEY: &str = "pub.kruise.io/no-protect";
/// User agent recorded in `KruisePodReady` messages written by lifecycle hooks.
pub const LIFECYCLE_READINESS_USER_AGENT: &str = "Lifecycle";
/// `KruisePodReady` key used while a pod is `PreparingDelete` with `markPodNotReady`.
pub const PRE_DELETE_HOOK_READINESS_KEY: &str = "preDeleteHook";
/// `KruisePodReady` key used while a pod is `PreparingUpdate` with `markPodNotReady`.
pub const PRE_UPDATE_HOOK_READINESS_KEY: &str = "preUpdateHook";
