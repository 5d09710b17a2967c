//! `volumeClaimUpdateStrategy: OnPodRollingUpdate` (gate `StatefulSetAutoResizePVCGate`):
//! a raised storage request in a claim template reaches each pod's claims in the rolling
//! update, before the pod's own update, and the pod waits until the expansion completed.
//! Also `status.volumeClaims`, counted whatever the strategy.
//!
//! As OpenKruise's `pkg/util/pvc`: a claim is *compatible without size* when its storage
//! class (both set) and access modes equal the template's; *compatible* when its request is
//! also at least the template's; *ready* when its capacity is at least its request;
//! *completed* when compatible and ready, or compatible with `FileSystemResizePending`.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kruise_compat::quantity::{Nanos, parse_nanos};

use super::{Action, EventRecord, Planner, claim_name};
use crate::api::VolumeClaimStatus;
use crate::api::VolumeClaimUpdateStrategyType;

/// The annotation a resized claim carries: the name of the set that resized it.
pub const OWNED_BY_ASTS_KEY: &str = "apps.kruise.io/owned-by-asts";

fn storage(q: Option<&Quantity>) -> Option<Nanos> {
    q.and_then(|q| parse_nanos(&q.0))
}

fn requested(claim: &PersistentVolumeClaim) -> Option<Nanos> {
    let spec = claim.spec.as_ref()?;
    storage(spec.resources.as_ref()?.requests.as_ref()?.get("storage"))
}

/// A claim's (or template's) storage request and limit, an absent one as zero (Go's
/// `ResourceList.Storage()`): two claims of the same size have equal values.
pub fn storage_size(claim: &PersistentVolumeClaim) -> (Nanos, Nanos) {
    let resources = claim.spec.as_ref().and_then(|s| s.resources.as_ref());
    let of = |list: Option<&std::collections::BTreeMap<String, Quantity>>| {
        storage(list.and_then(|l| l.get("storage"))).unwrap_or(0)
    };
    (
        of(resources.and_then(|r| r.requests.as_ref())),
        of(resources.and_then(|r| r.limits.as_ref())),
    )
}

fn capacity(claim: &PersistentVolumeClaim) -> Option<Nanos> {
    storage(claim.status.as_ref()?.capacity.as_ref()?.get("storage"))
}

/// Same storage class (when both name one) and the same access modes.
pub fn compatible_without_size(
    claim: &PersistentVolumeClaim,
    template: &PersistentVolumeClaim,
) -> bool {
    let (Some(spec), Some(wanted)) = (claim.spec.as_ref(), template.spec.as_ref()) else {
        return claim.spec.is_none() && template.spec.is_none();
    };
    if let (Some(a), Some(b)) = (&spec.storage_class_name, &wanted.storage_class_name)
        && a != b
    {
        return false;
    }
    spec.access_modes.clone().unwrap_or_default() == wanted.access_modes.clone().unwrap_or_default()
}

/// The claim asks for less storage than the template.
pub fn needs_expansion(claim: &PersistentVolumeClaim, template: &PersistentVolumeClaim) -> bool {
    matches!((requested(claim), requested(template)), (Some(have), Some(want)) if have < want)
}

/// (compatible, ready) as `IsPVCCompatibleAndReady`.
pub fn compatible_and_ready(
    claim: &PersistentVolumeClaim,
    template: &PersistentVolumeClaim,
) -> (bool, bool) {
    if !compatible_without_size(claim, template) {
        return (false, false);
    }
    let compatible =
        matches!((requested(claim), requested(template)), (Some(have), Some(want)) if have >= want);
    let ready = matches!((capacity(claim), requested(claim)), (Some(cap), Some(req)) if cap >= req);
    (compatible, ready)
}

/// The expansion is done (or only the file system's resize on the node is left).
pub fn expansion_completed(
    claim: &PersistentVolumeClaim,
    template: &PersistentVolumeClaim,
) -> bool {
    match compatible_and_ready(claim, template) {
        (true, true) => true,
        (true, false) => claim
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "FileSystemResizePending" && c.status == "True")
            }),
        _ => false,
    }
}

impl<'a> Planner<'a> {
    /// Whether claims are resized in the rolling update.
    pub(super) fn resizes_claims(&self) -> bool {
        self.input.gates.auto_resize_pvc
            && self.input.set.spec.volume_claim_update_strategy.type_
                == Some(VolumeClaimUpdateStrategyType::OnPodRollingUpdate)
    }

    /// The existing, non-terminating claims of `ordinal` with their templates.
    fn claims_with_templates(
        &self,
        ordinal: i64,
    ) -> Vec<(&'a PersistentVolumeClaim, &'a PersistentVolumeClaim)> {
        let set = self.input.set;
        set.spec
            .volume_claim_templates
            .iter()
            .filter_map(|template| {
                let name = claim_name(template.metadata.name.as_deref()?, &self.set_name, ordinal);
                let claim = self.claim(&name)?;
                claim
                    .metadata
                    .deletion_timestamp
                    .is_none()
                    .then_some((claim, template))
            })
            .collect()
    }

    /// Every claim of `ordinal` has the capacity it asks for (`IsOwnedPVCsReady`).
    pub(super) fn claims_ready(&self, ordinal: i64) -> bool {
        self.claims_with_templates(ordinal)
            .into_iter()
            .all(|(claim, template)| compatible_and_ready(claim, template).1)
    }

    /// No claim of `ordinal` needs a change (`IsClaimsCompatible`).
    pub(super) fn claims_compatible(&self, ordinal: i64) -> bool {
        self.claims_with_templates(ordinal)
            .into_iter()
            .all(|(claim, template)| {
                compatible_without_size(claim, template) && !needs_expansion(claim, template)
            })
    }

    /// Every claim of `ordinal` finished expanding (`IsOwnedPVCsCompleted`).
    pub(super) fn claims_expanded(&self, ordinal: i64) -> bool {
        self.claims_with_templates(ordinal)
            .into_iter()
            .all(|(claim, template)| expansion_completed(claim, template))
    }

    /// The raises of `ordinal`'s claims to their templates' requests (`TryPatchPVC`), or
    /// the `FailedUpdatePVC` event that stops the rolling update: a claim that differs in
    /// more than its size, or whose StorageClass does not allow expansion, waits to be
    /// deleted.
    pub(super) fn expand_claims(
        &self,
        ordinal: i64,
        pod: &str,
    ) -> Result<Vec<Action>, EventRecord> {
        let failed = |message: String| EventRecord::warning("FailedUpdatePVC", message);
        let mut actions = Vec::new();
        for (claim, template) in self.claims_with_templates(ordinal) {
            let name = claim.metadata.name.clone().unwrap_or_default();
            if !compatible_without_size(claim, template) {
                return Err(failed(format!(
                    "failed to update pvc {name}: contains diff other than spec resource, wait pvc to be deleted"
                )));
            }
            if !needs_expansion(claim, template) {
                continue;
            }
            let class = claim
                .spec
                .as_ref()
                .and_then(|s| s.storage_class_name.clone())
                .unwrap_or_default();
            if !self.input.expandable_classes.contains(&class) {
                return Err(failed(format!(
                    "failed to update pvc {name}: storage class {class:?} for {pod} does not support volume expansion, wait pvc to be deleted"
                )));
            }
            let resources = template
                .spec
                .as_ref()
                .and_then(|s| s.resources.clone())
                .unwrap_or_default();
            actions.push(Action::ExpandClaim {
                pod: pod.to_string(),
                patch: serde_json::json!({
                    "metadata": {
                        "resourceVersion": claim.metadata.resource_version,
                        "annotations": {OWNED_BY_ASTS_KEY: self.set_name},
                    },
                    "spec": {"resources": resources},
                }),
                name,
            });
        }
        Ok(actions)
    }

    /// `status.volumeClaims`: per template, the window's pods whose claim is compatible,
    /// and of those the ready ones.
    pub(super) fn volume_claim_status(&self) -> Vec<VolumeClaimStatus> {
        let set = self.input.set;
        set.spec
            .volume_claim_templates
            .iter()
            .map(|template| {
                let template_name = template.metadata.name.clone().unwrap_or_default();
                let mut status = VolumeClaimStatus {
                    volume_claim_name: template_name.clone(),
                    ..Default::default()
                };
                for ordinal in &self.ordinals {
                    if !self.by_ordinal.contains_key(ordinal) {
                        continue;
                    }
                    let found = self
                        .claims_with_templates(*ordinal)
                        .into_iter()
                        .find(|(_, t)| t.metadata.name.as_deref() == Some(template_name.as_str()));
                    if let Some((claim, template)) = found {
                        let (compatible, ready) = compatible_and_ready(claim, template);
                        status.compatible_replicas += i32::from(compatible);
                        status.compatible_ready_replicas += i32::from(compatible && ready);
                    }
                }
                status
            })
            .collect()
    }
}
