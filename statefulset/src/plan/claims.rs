//! Claims beyond their creation: `persistentVolumeClaimRetentionPolicy` (gate
//! `StatefulSetAutoDeletePVC`) as owner references the garbage collector acts on, and the
//! claims a pending pod lost.
//!
//! OpenKruise's `updateClaimOwnerRefForSetAndPod`: Retain/Retain leaves a claim without
//! the set's or the pod's reference; `whenDeleted: Delete` puts the set's reference on
//! claims of ordinals in the window; `whenScaled: Delete` puts the pod's reference on
//! claims of condemned ordinals (and takes the set's off), so the claim goes with its pod.
//! "In the window" honours `reserveOrdinals` and `ordinals.start` (K#1530, K#746).

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kruise_core::pods::{CachedPod, PodView as _};

use super::{Action, Planner, new_claims, pod_name};
use crate::api::RetentionPolicyType;
use crate::api::v1beta1::StatefulSet;

/// `persistentVolumeClaimRetentionPolicy` as two flags (unset or unknown is Retain).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Retention {
    /// `whenDeleted: Delete`.
    pub delete_with_set: bool,
    /// `whenScaled: Delete`.
    pub delete_when_scaled: bool,
}

impl Retention {
    /// The set's policy.
    pub fn of(set: &StatefulSet) -> Self {
        let policy = set.spec.persistent_volume_claim_retention_policy.as_ref();
        let is_delete = |p: Option<&RetentionPolicyType>| p == Some(&RetentionPolicyType::Delete);
        Self {
            delete_with_set: is_delete(policy.and_then(|p| p.when_deleted.as_ref())),
            delete_when_scaled: is_delete(policy.and_then(|p| p.when_scaled.as_ref())),
        }
    }
}

/// The (non-controller) reference to the set a claim carries with `whenDeleted: Delete`.
pub fn set_claim_ref(set: &StatefulSet) -> OwnerReference {
    OwnerReference {
        api_version: kruise_core::api::version::APPS_V1BETA1.into(),
        kind: crate::api::KIND.into(),
        name: set.metadata.name.clone().unwrap_or_default(),
        uid: set.metadata.uid.clone().unwrap_or_default(),
        controller: None,
        block_owner_deletion: None,
    }
}

/// The (non-controller) reference to its pod a claim of a condemned ordinal carries with
/// `whenScaled: Delete`.
pub fn pod_claim_ref(pod: &CachedPod) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: pod.name().to_string(),
        uid: pod.meta().uid.clone().unwrap_or_default(),
        controller: None,
        block_owner_deletion: None,
    }
}

/// The owner references a claim should carry: `current` with the set's and the pod's
/// references added or removed as the policy says (others kept, in order). Matching is by
/// uid, as OpenKruise's `hasOwnerRef`.
pub fn retained_owners(
    current: &[OwnerReference],
    retention: Retention,
    in_window: bool,
    set_ref: &OwnerReference,
    pod_ref: &OwnerReference,
) -> Vec<OwnerReference> {
    let want_set = retention.delete_with_set && (in_window || !retention.delete_when_scaled);
    let want_pod = retention.delete_when_scaled && !in_window;
    let mut owners: Vec<OwnerReference> = current
        .iter()
        .filter(|o| (o.uid != set_ref.uid || want_set) && (o.uid != pod_ref.uid || want_pod))
        .cloned()
        .collect();
    for (wanted, reference) in [(want_set, set_ref), (want_pod, pod_ref)] {
        if wanted && !owners.iter().any(|o| o.uid == reference.uid) {
            owners.push(reference.clone());
        }
    }
    owners
}

/// Whether a claim holds a reference named like the pod about to be created (a pod of
/// that name scaled away earlier; OpenKruise's `hasStaleOwnerRef` against a pod without a
/// uid): the garbage collector is about to delete it, so the pod must wait.
fn is_stale_for_new_pod(claim: &PersistentVolumeClaim, pod: &str) -> bool {
    claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.name == pod)
}

impl<'a> Planner<'a> {
    pub(super) fn claim(&self, name: &str) -> Option<&'a PersistentVolumeClaim> {
        self.claims.get(name).copied()
    }

    fn claim_names(&self, ordinal: i64) -> Vec<String> {
        new_claims(self.input.set, ordinal)
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect()
    }

    /// The claims a new pod at `ordinal` is created with: with `whenDeleted: Delete` they
    /// carry the set's reference from the start (one write fewer than OpenKruise, which
    /// adds it after the pod's creation).
    pub(super) fn claims_for_new_pod(&self, ordinal: i64) -> Vec<PersistentVolumeClaim> {
        let mut claims = new_claims(self.input.set, ordinal);
        if self.input.gates.auto_delete_pvc && Retention::of(self.input.set).delete_with_set {
            let set_ref = set_claim_ref(self.input.set);
            for claim in &mut claims {
                claim.metadata.owner_references = Some(vec![set_ref.clone()]);
            }
        }
        claims
    }

    /// Whether the pod at `ordinal` must wait before its creation for a claim the garbage
    /// collector is about to delete (`whenScaled: Delete` only).
    pub(super) fn has_stale_claim(&self, ordinal: i64) -> bool {
        if !self.input.gates.auto_delete_pvc || !Retention::of(self.input.set).delete_when_scaled {
            return false;
        }
        let pod = pod_name(&self.set_name, ordinal);
        self.claim_names(ordinal)
            .iter()
            .filter_map(|n| self.claim(n))
            .any(|c| is_stale_for_new_pod(c, &pod))
    }

    /// A pending pod's claims that are gone are created again
    /// (`createMissingPersistentVolumeClaims`).
    pub(super) fn recreate_missing_claims(&mut self, ordinal: i64, pod: &CachedPod) {
        if pod.phase() != "Pending" || kruise_core::pods::is_terminating(pod) {
            return;
        }
        let missing: Vec<PersistentVolumeClaim> = self
            .claims_for_new_pod(ordinal)
            .into_iter()
            .filter(|c| {
                c.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| self.claim(n).is_none())
            })
            .collect();
        if !missing.is_empty() {
            self.push(Action::CreateClaims {
                pod: pod.name().to_string(),
                claims: missing,
            });
        }
    }

    /// Sets the owner references of `pod`'s claims as the retention policy says.
    pub(super) fn retain_claims(&mut self, ordinal: i64, pod: &CachedPod, in_window: bool) {
        if !self.input.gates.auto_delete_pvc {
            return;
        }
        let retention = Retention::of(self.input.set);
        let set_ref = set_claim_ref(self.input.set);
        let pod_ref = pod_claim_ref(pod);
        for name in self.claim_names(ordinal) {
            let Some(claim) = self.claim(&name) else {
                continue;
            };
            if claim.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let current = claim.metadata.owner_references.clone().unwrap_or_default();
            let wanted = retained_owners(&current, retention, in_window, &set_ref, &pod_ref);
            if wanted != current {
                self.push(Action::SetClaimOwners {
                    pod: pod.name().to_string(),
                    name,
                    owner_references: wanted,
                    resource_version: claim.metadata.resource_version.clone(),
                });
            }
        }
    }
}
