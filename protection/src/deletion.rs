//! Deletion protection of built-in kinds (OpenKruise's `pkg/webhook/util/deletionprotection`),
//! the pure part: what the label `policy.kruise.io/delete-protection` on the object being
//! deleted asks for, and, for `Cascading`, whether what the object still holds forbids it.
//! The rule for kruise-rs's own workloads is `kruise_admission::crd_webhooks::
//! deletion_protection`; the webhooks that ask these questions are
//! [`crate::deletion_webhook`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kruise_admission::crd_webhooks::{ProtectionLevel, deletion_protection, protection_level};

/// The namespace whose objects, and which itself, are never protected (K#1526: a label
/// there must not be able to wedge the control plane's own housekeeping).
pub const KUBE_SYSTEM: &str = "kube-system";

/// The kind of the object a DELETE targets, with what its check needs from the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protected {
    /// A Namespace: `Cascading` counts its active pods and Bound claims.
    Namespace,
    /// A CustomResourceDefinition: `Cascading` (only with `DeletionProtectionForCRDCascadingGate`)
    /// counts the objects of its kind.
    CustomResourceDefinition {
        /// Whether `DeletionProtectionForCRDCascadingGate` is on.
        cascading_gate: bool,
    },
    /// An apps/v1 Deployment, ReplicaSet or StatefulSet with `spec.replicas` (absent: the
    /// API default, 1).
    Workload {
        /// `spec.replicas` of the object being deleted.
        replicas: i64,
    },
    /// A Service or an Ingress: only `Always` protects (OpenKruise has no `Cascading` for
    /// them).
    AlwaysOnly,
}

/// The object being deleted, as the decision reads it.
#[derive(Clone, Copy, Debug)]
pub struct Deleted<'a> {
    /// Its labels.
    pub labels: Option<&'a BTreeMap<String, String>>,
    /// Its namespace (for a Namespace, its own name).
    pub namespace: Option<&'a str>,
    /// Whether it already has a deletionTimestamp.
    pub deleting: bool,
}

/// What the webhook does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Let the DELETE through.
    Allow,
    /// Refuse it with this message (HTTP 403).
    Deny(String),
    /// `Cascading` on a Namespace: count its active pods and Bound claims, then
    /// [`namespace_verdict`].
    CountNamespace,
    /// `Cascading` on a CRD: count its objects not being deleted, then [`crd_verdict`].
    CountObjects,
}

/// The first step of the decision on deleting `object` of kind `kind`.
pub fn decide(kind: Protected, object: Deleted<'_>) -> Step {
    if object.deleting || object.namespace == Some(KUBE_SYSTEM) {
        return Step::Allow;
    }
    let Some(level) = protection_level(object.labels) else {
        return Step::Allow;
    };
    match (kind, level) {
        (Protected::Workload { replicas }, _) => match deletion_protection(object.labels, replicas)
        {
            Some(message) => Step::Deny(message),
            None => Step::Allow,
        },
        (_, ProtectionLevel::Always) => Step::Deny(ProtectionLevel::Always.refusal("")),
        (Protected::Namespace, ProtectionLevel::Cascading) => Step::CountNamespace,
        (Protected::CustomResourceDefinition { cascading_gate }, ProtectionLevel::Cascading) => {
            if cascading_gate {
                Step::CountObjects
            } else {
                Step::Deny(format!("feature-gate {CRD_CASCADING_GATE} is not enabled"))
            }
        }
        (Protected::AlwaysOnly, ProtectionLevel::Cascading) => Step::Allow,
    }
}

/// The gate `Cascading` on a CRD needs.
pub const CRD_CASCADING_GATE: &str = "DeletionProtectionForCRDCascadingGate";

/// A `Cascading` namespace with `active_pods` active pods and `bound_claims` Bound claims
/// not being deleted: refused while either is above 0 (pods first, as OpenKruise checks).
pub fn namespace_verdict(active_pods: usize, bound_claims: usize) -> Option<String> {
    let cascading = ProtectionLevel::Cascading;
    if active_pods > 0 {
        return Some(cascading.refusal(&format!(" and active pods {active_pods}>0")));
    }
    if bound_claims > 0 {
        return Some(cascading.refusal(&format!(" and \"Bound\" status pvc {bound_claims}>0")));
    }
    None
}

/// A `Cascading` CRD with `active_objects` objects of its kind not being deleted.
pub fn crd_verdict(active_objects: usize) -> Option<String> {
    (active_objects > 0)
        .then(|| ProtectionLevel::Cascading.refusal(&format!(" and active CRs {active_objects}>0")))
}

/// Whether `pod` counts for a `Cascading` namespace: not finished (phase neither Succeeded
/// nor Failed) and not being deleted (Kubernetes' `IsPodActive`).
pub fn is_pod_active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    pod.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded" | "Failed"))
}

/// Whether `claim` counts for a `Cascading` namespace: Bound and not being deleted (K#1223).
pub fn is_claim_bound(claim: &PersistentVolumeClaim) -> bool {
    claim.metadata.deletion_timestamp.is_none()
        && claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimStatus, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    const ALWAYS: &str =
        "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Always";

    fn labels(value: Option<&str>) -> BTreeMap<String, String> {
        value
            .map(|v| {
                BTreeMap::from([(
                    "policy.kruise.io/delete-protection".to_string(),
                    v.to_string(),
                )])
            })
            .unwrap_or_default()
    }

    fn step(kind: Protected, value: Option<&str>, namespace: &str, deleting: bool) -> Step {
        let labels = labels(value);
        decide(
            kind,
            Deleted {
                labels: Some(&labels),
                namespace: Some(namespace),
                deleting,
            },
        )
    }

    fn deny(detail: &str) -> Step {
        Step::Deny(format!(
            "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection={detail}"
        ))
    }

    #[test]
    fn first_step_for_every_kind_and_label() {
        let crd_on = Protected::CustomResourceDefinition {
            cascading_gate: true,
        };
        let crd_off = Protected::CustomResourceDefinition {
            cascading_gate: false,
        };
        let gate_off =
            Step::Deny("feature-gate DeletionProtectionForCRDCascadingGate is not enabled".into());
        let cases = [
            // kind, label, namespace, deleting => step
            (
                Protected::Namespace,
                Some("Always"),
                "team",
                false,
                deny("Always"),
            ),
            (
                Protected::Namespace,
                Some("Cascading"),
                "team",
                false,
                Step::CountNamespace,
            ),
            (
                Protected::Namespace,
                Some("Never"),
                "team",
                false,
                Step::Allow,
            ),
            (Protected::Namespace, None, "team", false, Step::Allow),
            (
                Protected::Namespace,
                Some("Always"),
                "team",
                true,
                Step::Allow,
            ),
            (
                Protected::Namespace,
                Some("Always"),
                KUBE_SYSTEM,
                false,
                Step::Allow,
            ),
            (crd_on, Some("Always"), "", false, deny("Always")),
            (crd_off, Some("Always"), "", false, deny("Always")),
            (crd_on, Some("Cascading"), "", false, Step::CountObjects),
            (crd_off, Some("Cascading"), "", false, gate_off),
            (crd_on, Some("cascading"), "", false, Step::Allow),
            (
                Protected::Workload { replicas: 2 },
                Some("Always"),
                "team",
                false,
                deny("Always"),
            ),
            (
                Protected::Workload { replicas: 0 },
                Some("Always"),
                "team",
                false,
                deny("Always"),
            ),
            (
                Protected::Workload { replicas: 2 },
                Some("Cascading"),
                "team",
                false,
                deny("Cascading and replicas 2>0"),
            ),
            (
                Protected::Workload { replicas: 0 },
                Some("Cascading"),
                "team",
                false,
                Step::Allow,
            ),
            (
                Protected::Workload { replicas: 2 },
                Some("Always"),
                KUBE_SYSTEM,
                false,
                Step::Allow,
            ),
            (
                Protected::Workload { replicas: 2 },
                Some("Always"),
                "team",
                true,
                Step::Allow,
            ),
            (
                Protected::AlwaysOnly,
                Some("Always"),
                "team",
                false,
                deny("Always"),
            ),
            (
                Protected::AlwaysOnly,
                Some("Cascading"),
                "team",
                false,
                Step::Allow,
            ),
            (Protected::AlwaysOnly, None, "team", false, Step::Allow),
        ];
        for (kind, value, namespace, deleting, want) in cases {
            assert_eq!(
                step(kind, value, namespace, deleting),
                want,
                "{kind:?} {value:?} in {namespace} deleting={deleting}"
            );
        }
        let unlabelled = Deleted {
            labels: None,
            namespace: None,
            deleting: false,
        };
        assert_eq!(decide(Protected::Namespace, unlabelled), Step::Allow);
        assert_eq!(deny("Always"), Step::Deny(ALWAYS.into()));
    }

    #[test]
    fn cascading_namespace_counts_pods_then_bound_claims() {
        let cases = [
            (0, 0, None),
            (
                2,
                0,
                Some(
                    "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Cascading and active pods 2>0",
                ),
            ),
            // Pods are reported first, as OpenKruise checks them first.
            (
                1,
                3,
                Some(
                    "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Cascading and active pods 1>0",
                ),
            ),
            // K#1223: a Bound claim protects a namespace with no pods.
            (
                0,
                1,
                Some(
                    "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Cascading and \"Bound\" status pvc 1>0",
                ),
            ),
        ];
        for (pods, claims, want) in cases {
            assert_eq!(
                namespace_verdict(pods, claims).as_deref(),
                want,
                "{pods} {claims}"
            );
        }
    }

    #[test]
    fn cascading_crd_counts_objects() {
        assert_eq!(crd_verdict(0), None);
        assert_eq!(
            crd_verdict(4).as_deref(),
            Some(
                "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Cascading and active CRs 4>0"
            )
        );
    }

    #[test]
    fn what_a_cascading_namespace_counts() {
        let pod = |phase: Option<&str>, deleting: bool| {
            let mut pod = Pod {
                status: Some(PodStatus {
                    phase: phase.map(str::to_string),
                    ..Default::default()
                }),
                ..Default::default()
            };
            if deleting {
                pod.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
            }
            pod
        };
        assert!(is_pod_active(&pod(Some("Running"), false)));
        assert!(is_pod_active(&pod(Some("Pending"), false)));
        assert!(is_pod_active(&pod(None, false)));
        assert!(!is_pod_active(&pod(Some("Succeeded"), false)));
        assert!(!is_pod_active(&pod(Some("Failed"), false)));
        assert!(!is_pod_active(&pod(Some("Running"), true)));

        let claim = |phase: &str, deleting: bool| {
            let mut claim = PersistentVolumeClaim {
                status: Some(PersistentVolumeClaimStatus {
                    phase: Some(phase.into()),
                    ..Default::default()
                }),
                ..Default::default()
            };
            if deleting {
                claim.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
            }
            claim
        };
        assert!(is_claim_bound(&claim("Bound", false)));
        assert!(!is_claim_bound(&claim("Pending", false)));
        assert!(!is_claim_bound(&claim("Lost", false)));
        assert!(!is_claim_bound(&claim("Bound", true)));
    }
}
