//! The revision step: the update revision must exist before pods carry its name, so it is
//! written before the planner runs.

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_common::runtime::errors::{ShellError, WriteError};
use kruise_common::runtime::revisions::{Registered, register_revision};
use kube::ResourceExt as _;
use kube::api::{Api, PostParams};

use super::{Error, Shared};
use crate::api::v1beta1::StatefulSet;
use crate::plan::{self, RevisionWrite};

/// The revisions a reconcile plans with, after their writes.
pub(super) struct ActiveRevisions {
    pub current: ControllerRevision,
    pub update: ControllerRevision,
    /// Every revision of the set, oldest first.
    pub all: Vec<ControllerRevision>,
}

/// What the revision step found.
pub(super) enum RevisionStep {
    Ready(Box<ActiveRevisions>),
    /// A true hash collision: `status.collisionCount` must become this value, and the next
    /// reconcile renames.
    Collision(i32),
}

/// Creates or bumps the update revision as [`plan::plan_revisions`] decides.
pub(super) async fn write_revisions(
    shared: &Shared,
    set: &StatefulSet,
    namespace: &str,
    history: Vec<ControllerRevision>,
) -> Result<RevisionStep, Error> {
    let planned = plan::plan_revisions(set, &history);
    let api: Api<ControllerRevision> = Api::namespaced(shared.client.clone(), namespace);
    let revision_error = |name: &str| {
        let name = name.to_string();
        move |source| Error::from(ShellError::Revision(WriteError { name, source }))
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
            let collisions = set
                .status
                .as_ref()
                .and_then(|s| s.collision_count)
                .unwrap_or(0);
            let stored = match register_revision(&api, rev, collisions)
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
    kruise_common::revision::sort_revisions(&mut all);
    Ok(RevisionStep::Ready(Box::new(ActiveRevisions {
        current,
        update,
        all,
    })))
}
