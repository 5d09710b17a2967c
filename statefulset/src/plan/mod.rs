//! The pure Advanced StatefulSet planner: (set, owned pods, revisions, now, gates,
//! expectations) -> the writes to make now and the status to write. No client, no clock.
//!
//! It follows OpenKruise's `updateStatefulSet` (`pkg/controller/statefulset`):
//!
//! 1. **Ordinals.** The window starts at `ordinals.start` (gate `StatefulSetStartOrdinal`)
//!    and holds `replicas` ordinals that are not reserved (`reserveOrdinals`); owned pods
//!    outside it are condemned.
//!    Pods named `<set>-<ordinal>` are claimed as OpenKruise's `ClaimPods` does: an orphan
//!    matching the selector is adopted, a pod that stopped matching it is released.
//! 2. **Refresh** every pod's in-place update (grace end, next batch,
//!    `InPlaceUpdateReady=True`) and its lifecycle state (`Updating` -> `Normal`).
//! 3. **Replicas**, ascending: a missing ordinal is created (its claims first) at the
//!    current or update revision as the partition says; a Failed/Succeeded pod is deleted
//!    (re-created next round). `OrderedReady` stops after each write and waits for each pod
//!    to be Running and available (`minReadySeconds`); `Parallel` goes on, creating at most
//!    `scaleStrategy.maxUnavailable` not-yet-available pods, and a pod stuck Terminating
//!    never holds back higher ordinals (K#2109).
//!    A pending pod's missing claims are created again, and each pod's claims get the
//!    owner references `persistentVolumeClaimRetentionPolicy` asks for (`claims`).
//! 4. **Condemned**, descending (their claims' owner references first): `OrderedReady` deletes one at a time, only available pods
//!    (or the first unhealthy one: the lowest ordinal of all unhealthy pods) and never while one terminates; `Parallel` deletes all.
//! 5. **Rolling update** (`RollingUpdate`, not `paused`, no in-place update of the update
//!    revision still unobserved — K#844): pods already unavailable for any reason count
//!    against `maxUnavailable` first (K#1480); `apps.kruise.io/specified-delete` pods are
//!    deleted first; then ordinals from the highest down to `partition` are updated in place
//!    (`InPlaceIfPossible`/`InPlaceOnly`, through `kruise_core::inplace`) or deleted for
//!    recreation (`ReCreate`), never more unavailable than the budget.
//!    With `volumeClaimUpdateStrategy: OnPodRollingUpdate` (`resize`) a pod's claims are
//!    expanded to their templates first and the pod waits for the expansion.
//! 6. **Status** from the observed pods and claims, and history truncation.

mod claims;
mod lifecycle;
mod pods;
mod resize;
mod revisions;
mod scale;
mod status;
mod update;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kruise_core::expectations::Satisfaction;
use kruise_core::inplace::{CompletionCheck, InPlaceGates, InPlaceWrites};
use kruise_core::pods::{CachedPod, LabelsAndFinalizers as _, PodView as _};

use crate::api::ordinals::ReservedOrdinals;
use crate::api::v1beta1::StatefulSet;

pub use claims::{Retention, pod_claim_ref, retained_owners, set_claim_ref};
pub use pods::{
    IdentityGates, claim_name, new_claims, new_pod, ordinal_of, owner_ref, pod_name, revision_name,
    template_for,
};
pub use resize::{
    OWNED_BY_ASTS_KEY, compatible_and_ready, compatible_without_size, expansion_completed,
    needs_expansion, storage_size,
};
pub use revisions::{RevisionPlan, RevisionWrite, orphans_to_adopt, plan_revisions};
pub use status::calculate_status;
pub use update::keep_unseen_updates;

/// Pods one plan creates at most; a larger `Parallel` scale-up continues in the next
/// reconciles, once the cache shows these. OpenKruise creates the whole difference in one
/// pass, but every new pod of a plan is held in memory until its write is done, and the
/// allocator keeps much of that peak afterwards (scale 1,000 -> 10,000 at once: ~28 MiB
/// more resident, settled, than the same pods after a restart).
pub const MAX_CREATIONS_PER_PLAN: usize = 500;

/// Existing pods one plan writes at most in its refresh and in its rolling update; the rest
/// follow in the next reconciles. Each planned write holds its patch until the plan is
/// done (9,000 new pods given `InPlaceUpdateReady` at once).
pub const MAX_POD_WRITES_PER_PLAN: usize = 1000;

/// Feature gates the planner reads (OpenKruise's defaults via [`Default`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanGates {
    /// `StatefulSetStartOrdinal`: honour `ordinals.start`.
    pub start_ordinal: bool,
    /// `PodIndexLabel` (default on): the `apps.kubernetes.io/pod-index` label.
    pub pod_index_label: bool,
    /// `InPlaceUpdateEnvFromMetadata` (default on).
    pub env_from_metadata: bool,
    /// `InPlaceWorkloadVerticalScaling`.
    pub vertical_scaling: bool,
    /// `StatefulSetAutoDeletePVC` (default on): act on
    /// `persistentVolumeClaimRetentionPolicy`.
    pub auto_delete_pvc: bool,
    /// `StatefulSetAutoResizePVCGate`: act on `volumeClaimUpdateStrategy: OnPodRollingUpdate`.
    pub auto_resize_pvc: bool,
}

impl Default for PlanGates {
    fn default() -> Self {
        Self {
            start_ordinal: false,
            pod_index_label: true,
            env_from_metadata: true,
            vertical_scaling: false,
            auto_delete_pvc: true,
            auto_resize_pvc: false,
        }
    }
}

/// Everything the planner reads.
#[derive(Debug, Clone, Copy)]
pub struct PlanInput<'a> {
    /// The set (storage version, defaulted), with metadata and status.
    pub set: &'a StatefulSet,
    /// Pods from the cache (those not controlled by the set are ignored).
    pub pods: &'a [Arc<CachedPod>],
    /// Claims from the cache (those of the set's ordinals are read by name).
    pub claims: &'a [Arc<PersistentVolumeClaim>],
    /// Names of the StorageClasses with `allowVolumeExpansion: true`.
    pub expandable_classes: &'a BTreeSet<String>,
    /// The current revision (`status.currentRevision` if it exists, else the update revision).
    pub current_revision: &'a ControllerRevision,
    /// The update revision (the revision of the current template).
    pub update_revision: &'a ControllerRevision,
    /// All revisions of the set (for in-place diffs and history).
    pub revisions: &'a [ControllerRevision],
    /// Now.
    pub now: Timestamp,
    /// Feature gates.
    pub gates: PlanGates,
    /// Creates and deletes sent but not yet in the cache: while `Pending`, nothing is
    /// written (a stale cache must not cause a double create or delete).
    pub scale_expectations: &'a Satisfaction,
    /// In-place updates sent: pod name -> the revision it was updated to. While a pod of
    /// the update revision does not show it in the cache, the rolling update waits (K#844).
    pub update_expectations: &'a BTreeMap<String, String>,
}

/// Why a pod is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// Its ordinal left the window (scale-in, reserveOrdinals, ordinals.start).
    Condemned,
    /// It is Failed or Succeeded; it is created again next round.
    Finished,
    /// Recreated at the update revision (ReCreate, or an in-place update impossible).
    Update,
    /// It carries `apps.kruise.io/specified-delete`.
    SpecifiedDelete,
}

/// One write the controller performs; a plan holds at most one write per pod.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create the claims (those that exist are kept), then the pod.
    CreatePod {
        /// The pod.
        pod: Box<Pod>,
        /// Its claims.
        claims: Vec<PersistentVolumeClaim>,
    },
    /// Delete a pod.
    DeletePod {
        /// Pod name.
        name: String,
        /// Why.
        reason: DeleteReason,
    },
    /// Start an in-place update (status write first when present, then the pod patch).
    UpdateInPlace {
        /// Pod name.
        name: String,
        /// Target revision name.
        revision: String,
        /// The writes.
        update: Box<InPlaceWrites>,
    },
    /// Resize a pod's containers through the `resize` subresource: the resources of an
    /// in-place update's next priority batch, sent before that batch's [`Action::PatchPod`]
    /// (were the patch first and the resize then refused, the state would show the batch
    /// done and the resources would never change).
    ResizePod {
        /// Pod name.
        name: String,
        /// Strategic-merge patch for the `resize` subresource.
        resize: serde_json::Value,
    },
    /// Strategic-merge patch of a pod (in-place refresh, lifecycle state).
    PatchPod {
        /// Pod name.
        name: String,
        /// The patch.
        patch: serde_json::Value,
    },
    /// Write a pod's status (`InPlaceUpdateReady=True`), with a lifecycle state change in
    /// the same request when there is one.
    UpdatePodStatus {
        /// Pod name.
        name: String,
        /// The conditions that change.
        status: Box<PodStatus>,
        /// A `{"metadata": ...}` strategic-merge patch sent with it (the pod status
        /// strategy keeps metadata changes).
        metadata: Option<serde_json::Value>,
    },
    /// Set a pod's owner references: adopt an orphan that matches the selector (the set's
    /// controller reference added) or release a pod that stopped matching it (removed).
    /// Sent with the cached resourceVersion, so a pod changed meanwhile is a conflict.
    SetPodOwners {
        /// Pod name.
        name: String,
        /// The owner references to write.
        owner_references: Vec<OwnerReference>,
        /// The cached resourceVersion.
        resource_version: Option<String>,
    },
    /// Create the claims of a pending pod that are gone (one that exists is kept).
    CreateClaims {
        /// The pod they belong to.
        pod: String,
        /// The claims.
        claims: Vec<PersistentVolumeClaim>,
    },
    /// Set a claim's owner references as the retention policy says. Sent with the cached
    /// resourceVersion, so a claim changed meanwhile is a conflict.
    SetClaimOwners {
        /// The pod it belongs to (its writes go in that pod's order).
        pod: String,
        /// Claim name.
        name: String,
        /// The owner references to write.
        owner_references: Vec<OwnerReference>,
        /// The cached resourceVersion.
        resource_version: Option<String>,
    },
    /// Raise a claim's storage request to its template's before its pod's update
    /// (merge patch: the resources, the `apps.kruise.io/owned-by-asts` annotation and the
    /// cached resourceVersion).
    ExpandClaim {
        /// The pod it belongs to.
        pod: String,
        /// Claim name.
        name: String,
        /// The patch.
        patch: serde_json::Value,
    },
    /// Delete an old ControllerRevision (history limit).
    DeleteRevision {
        /// Revision name.
        name: String,
    },
}

impl Action {
    /// The pod this action writes, if any.
    pub fn pod_name(&self) -> Option<&str> {
        match self {
            Action::CreatePod { pod, .. } => pod.metadata.name.as_deref(),
            Action::DeletePod { name, .. }
            | Action::UpdateInPlace { name, .. }
            | Action::ResizePod { name, .. }
            | Action::PatchPod { name, .. }
            | Action::UpdatePodStatus { name, .. }
            | Action::SetPodOwners { name, .. } => Some(name),
            Action::CreateClaims { .. }
            | Action::SetClaimOwners { .. }
            | Action::ExpandClaim { .. }
            | Action::DeleteRevision { .. } => None,
        }
    }

    /// The pod whose writes this action is ordered with: the pod it writes, or the pod a
    /// claim it writes belongs to (so a claim's owners change before its pod is deleted).
    pub fn ordered_with(&self) -> Option<&str> {
        match self {
            Action::CreateClaims { pod, .. }
            | Action::SetClaimOwners { pod, .. }
            | Action::ExpandClaim { pod, .. } => Some(pod),
            other => other.pod_name(),
        }
    }
}

pub use kruise_core::plan::EventRecord;

/// The planner's answer: the kit's plan of StatefulSet actions and status.
pub type Plan = kruise_core::plan::Plan<Action, crate::api::StatefulSetStatus>;

/// A pod's facts the planner decides on.
struct Facts<'a> {
    pod: &'a CachedPod,
    terminating: bool,
    finished: bool,
    /// Running and Ready and not terminating (`isHealthy`).
    healthy: bool,
    /// Running and available for minReadySeconds, lifecycle Normal or unset.
    available: bool,
}

/// What one reconcile decides, step by step; `stop` ends the steps after the current one.
struct Planner<'a> {
    input: &'a PlanInput<'a>,
    set_name: String,
    start: i64,
    /// The window's ordinals, ascending.
    ordinals: Vec<i64>,
    by_ordinal: BTreeMap<i64, Facts<'a>>,
    min_ready: i32,
    /// Pods written by this plan (one write per pod).
    written: BTreeSet<String>,
    /// Pods this plan creates (at most [`MAX_CREATIONS_PER_PLAN`]).
    creations: usize,
    /// Every cached pod name in the namespace: a name another pod holds (released, or
    /// someone else's) is never created over.
    occupied: BTreeSet<&'a str>,
    /// The cached claims by name.
    claims: BTreeMap<&'a str, &'a PersistentVolumeClaim>,
    plan: Plan,
}

/// Plans one reconcile.
pub fn plan(input: &PlanInput<'_>) -> Plan {
    let set = input.set;
    let mut planner = Planner::new(input);
    let status = calculate_status(
        set,
        &planner.owned_pods(),
        input.update_revision,
        input.current_revision,
        input.now,
    );
    planner.plan.status = status.status;
    planner.plan.status.volume_claims = planner.volume_claim_status();
    if let Some(d) = status.requeue_after {
        planner.plan.requeue_within(d);
    }
    if set.metadata.deletion_timestamp.is_some() {
        return planner.plan;
    }
    if let Satisfaction::Pending { remaining, .. } = input.scale_expectations {
        planner.plan.requeue_within(*remaining);
        // Nothing is written, adoptions and releases included, until the cache caught up.
        planner.plan.actions.clear();
        return planner.plan;
    }
    let update_waits = planner.refresh();
    if planner.replicas() && planner.condemned() && !update_waits {
        planner.rolling_update();
    }
    planner.truncate_history();
    planner.plan
}

impl<'a> Planner<'a> {
    fn new(input: &'a PlanInput<'a>) -> Self {
        let set = input.set;
        let set_name = set.metadata.name.clone().unwrap_or_default();
        let uid = set.metadata.uid.clone().unwrap_or_default();
        let start = if input.gates.start_ordinal {
            set.spec
                .ordinals
                .as_ref()
                .map_or(0, |o| i64::from(o.start.max(0)))
        } else {
            0
        };
        let reserved = ReservedOrdinals::from_spec(&set.spec.reserve_ordinals);
        let replicas = i64::from(set.replicas().max(0));
        let ordinals = reserved.replica_ordinals(start, replicas);
        let min_ready = set.spec.min_ready_seconds();
        let now = input.now;
        let deleting = set.metadata.deletion_timestamp.is_some();
        let selector = set.spec.selector.clone().unwrap_or_default();
        let mut ownership = Vec::new();
        let by_ordinal = input
            .pods
            .iter()
            .filter_map(|p| {
                let ordinal = ordinal_of(&set_name, p.name())?;
                let matches = !kruise_core::pods::selector::is_empty(&selector)
                    && kruise_core::pods::selector::selector_matches_by(&selector, |k| p.label(k))
                        .unwrap_or(false);
                let owners = p.meta().owner_references.clone().unwrap_or_default();
                let controlled = kruise_core::pods::is_controlled_by(p.meta(), &uid);
                if controlled && !matches && !deleting {
                    // Release: no longer ours (ClaimPods).
                    ownership.push(Action::SetPodOwners {
                        name: p.name().to_string(),
                        owner_references: owners.into_iter().filter(|o| o.uid != uid).collect(),
                        resource_version: p.meta().resource_version.clone(),
                    });
                    return None;
                }
                if !controlled {
                    let orphan = kruise_core::pods::controller_ref(p.meta()).is_none();
                    if !orphan || !matches || deleting || kruise_core::pods::is_terminating(&**p) {
                        return None;
                    }
                    // Adopt: an orphan with our name and labels (ClaimPods).
                    let mut owner_references = owners;
                    owner_references.push(owner_ref(set));
                    ownership.push(Action::SetPodOwners {
                        name: p.name().to_string(),
                        owner_references,
                        resource_version: p.meta().resource_version.clone(),
                    });
                }
                let terminating = kruise_core::pods::is_terminating(&**p);
                let phase = p.phase();
                let running_ready = phase == "Running" && kruise_core::pods::is_pod_ready(&**p);
                let available = running_ready
                    && !terminating
                    && kruise_core::pods::is_pod_available(&**p, min_ready, now)
                    && kruise_core::pods::lifecycle::is_lifecycle_available(
                        kruise_core::pods::lifecycle_state(&**p),
                    );
                Some((
                    ordinal,
                    Facts {
                        pod: p,
                        terminating,
                        finished: phase == "Failed" || phase == "Succeeded",
                        healthy: running_ready && !terminating,
                        available,
                    },
                ))
            })
            .collect();
        let mut planner = Self {
            input,
            set_name,
            start,
            ordinals,
            by_ordinal,
            min_ready,
            written: BTreeSet::new(),
            creations: 0,
            occupied: input.pods.iter().map(|p| p.name()).collect(),
            claims: input
                .claims
                .iter()
                .filter_map(|c| Some((c.metadata.name.as_deref()?, &**c)))
                .collect(),
            plan: Plan::default(),
        };
        // Adopted pods are members from now on; their one write this round is the adoption.
        for action in ownership {
            planner.push(action);
        }
        planner
    }

    fn owned_pods(&self) -> Vec<&'a CachedPod> {
        self.by_ordinal.values().map(|f| f.pod).collect()
    }

    fn is_parallel(&self) -> bool {
        self.input.set.spec.is_parallel()
    }

    fn push(&mut self, action: Action) {
        if let Some(name) = action.pod_name() {
            self.written.insert(name.to_string());
        }
        self.plan.actions.push(action);
    }

    fn update_revision_name(&self) -> &'a str {
        revision_name(self.input.update_revision)
    }

    fn check(&self) -> CompletionCheck<'static> {
        CompletionCheck {
            vertical_scaling: self.input.gates.vertical_scaling,
            ..Default::default()
        }
    }

    fn in_place_gates(&self) -> InPlaceGates {
        InPlaceGates {
            env_from_metadata: self.input.gates.env_from_metadata,
            vertical_scaling: self.input.gates.vertical_scaling,
        }
    }

    /// Step 6: delete the surplus revisions no pod uses.
    fn truncate_history(&mut self) {
        let mut history = self.input.revisions.to_vec();
        kruise_core::revision::sort_revisions(&mut history);
        let in_use: BTreeSet<String> = self
            .by_ordinal
            .values()
            .filter_map(|f| kruise_core::pods::pod_revision(f.pod))
            .map(str::to_string)
            .collect();
        let limit = self
            .input
            .set
            .spec
            .revision_history_limit
            .unwrap_or(crate::api::DEFAULT_REVISION_HISTORY_LIMIT);
        let current = self.plan.status.current_revision.clone();
        let update = self.plan.status.update_revision.clone();
        for name in kruise_core::revision::revisions_to_truncate(
            &history, limit, &current, &update, &in_use,
        ) {
            self.plan.actions.push(Action::DeleteRevision { name });
        }
    }
}
