//! Registering a ControllerRevision the way Kubernetes' `CreateControllerRevision` does,
//! shared by every workload family: create it; when its name is taken, reuse the existing
//! revision if its data is equal, otherwise report a true hash collision so the caller
//! raises `status.collisionCount` (which renames the next candidate).

use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, ResourceExt as _};

use super::errors::{ShellError, WriteError, is_already_exists, is_not_found};
use kruise_core::revision::{
    CollisionDecision, RevisionPlan, RevisionWrite, on_name_collision, sort_revisions,
};

/// What registering a candidate revision left behind.
#[derive(Debug, Clone, PartialEq)]
pub enum Registered {
    /// The revision as stored: the one created, or an existing one with equal data.
    Stored(Box<ControllerRevision>),
    /// Another revision with different data holds the name: write this collision count
    /// to the owner's status and try again with the renamed candidate.
    Collision {
        /// The new `status.collisionCount`.
        collision_count: i32,
    },
}

/// Creates `candidate`, resolving a name collision as described above. `collision_count`
/// is the owner's current `status.collisionCount`.
pub async fn register_revision(
    api: &Api<ControllerRevision>,
    candidate: &ControllerRevision,
    collision_count: i32,
) -> Result<Registered, kube::Error> {
    match api.create(&PostParams::default(), candidate).await {
        Ok(created) => Ok(Registered::Stored(Box::new(created))),
        Err(e) if is_already_exists(&e) => {
            let existing = api.get(&candidate.name_any()).await?;
            let data = candidate
                .data
                .as_ref()
                .map(|d| d.0.clone())
                .unwrap_or_default();
            Ok(match on_name_collision(&existing, &data, collision_count) {
                CollisionDecision::Reuse => Registered::Stored(Box::new(existing)),
                CollisionDecision::Retry { collision_count } => {
                    Registered::Collision { collision_count }
                }
            })
        }
        Err(e) => Err(e),
    }
}

/// The revisions a reconcile plans with, after their writes.
#[derive(Debug, Clone, PartialEq)]
pub struct ActiveRevisions {
    /// The current revision (`status.currentRevision`, else the update revision).
    pub current: ControllerRevision,
    /// The update revision, as stored.
    pub update: ControllerRevision,
    /// Every revision of the workload, oldest first.
    pub all: Vec<ControllerRevision>,
}

/// What the revision step of a reconcile found.
#[derive(Debug, Clone, PartialEq)]
pub enum RevisionStep {
    /// The revisions to plan with.
    Ready(Box<ActiveRevisions>),
    /// A true hash collision: the owner's `status.collisionCount` must become this value,
    /// and the next reconcile renames (Kubernetes' `CreateControllerRevision` loop, one step
    /// per reconcile).
    Collision(i32),
}

/// The revision step of a workload in `namespace`: [`write_planned_revisions`], its failure
/// the shell's `revision` step.
pub async fn write_revisions(
    client: &Client,
    namespace: &str,
    planned: RevisionPlan,
    collision_count: i32,
    history: Vec<ControllerRevision>,
) -> Result<RevisionStep, ShellError> {
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), namespace);
    write_planned_revisions(&api, planned, collision_count, history)
        .await
        .map_err(ShellError::Revision)
}

/// Deletes the revision `name` in `namespace` (the history limit's clean-up); one already
/// gone counts as deleted.
pub async fn delete_revision(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<(), ShellError> {
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), namespace);
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(source) => Err(ShellError::Revision(WriteError {
            name: name.to_string(),
            source,
        })),
    }
}

/// The revision step every workload family's shell runs before planning pods, since pods
/// may carry the update revision's name only once it exists: performs `planned.write`
/// (a rollback's replace, or a create through [`register_revision`] with the owner's
/// `collision_count`) and returns the revisions to plan with, `history` updated.
pub async fn write_planned_revisions(
    api: &Api<ControllerRevision>,
    planned: RevisionPlan,
    collision_count: i32,
    history: Vec<ControllerRevision>,
) -> Result<RevisionStep, WriteError> {
    let revision_error = |name: &str| {
        let name = name.to_string();
        move |source| WriteError { name, source }
    };
    let mut all = history;
    let update = match &planned.write {
        RevisionWrite::None => planned.update.clone(),
        RevisionWrite::Update(rev) => {
            let name = rev.name_any();
            let stored = api
                .replace(&name, &PostParams::default(), rev)
                .await
                .map_err(revision_error(&name))?;
            all.retain(|r| r.name_any() != name);
            all.push(stored.clone());
            stored
        }
        RevisionWrite::Create(rev) => {
            let name = rev.name_any();
            let stored = match register_revision(api, rev, collision_count)
                .await
                .map_err(revision_error(&name))?
            {
                Registered::Stored(stored) => *stored,
                Registered::Collision { collision_count } => {
                    return Ok(RevisionStep::Collision(collision_count));
                }
            };
            if all.iter().all(|r| r.name_any() != name) {
                all.push(stored.clone());
            }
            stored
        }
    };
    let current = if planned.current.name_any() == planned.update.name_any() {
        update.clone()
    } else {
        planned.current
    };
    sort_revisions(&mut all);
    Ok(RevisionStep::Ready(Box::new(ActiveRevisions {
        current,
        update,
        all,
    })))
}
