//! The revision step: the update revision must exist before pods carry its name, so it is
//! written before the planner runs.

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_runtime::errors::ShellError;
pub(super) use kruise_runtime::revisions::RevisionStep;
use kruise_runtime::revisions::write_planned_revisions;
use kube::api::Api;

use super::{Error, Shared};
use crate::api::v1beta1::CloneSet;
use crate::plan;

/// Creates or bumps the update revision as [`plan::plan_revisions`] decides.
pub(super) async fn write_revisions(
    shared: &Shared,
    cs: &CloneSet,
    namespace: &str,
    history: Vec<ControllerRevision>,
) -> Result<RevisionStep, Error> {
    let planned = plan::plan_revisions(cs, &history);
    let api: Api<ControllerRevision> = Api::namespaced(shared.client.clone(), namespace);
    let collisions = cs
        .status
        .as_ref()
        .and_then(|s| s.collision_count)
        .unwrap_or(0);
    write_planned_revisions(&api, planned, collisions, history)
        .await
        .map_err(|e| Error::from(ShellError::Revision(e)))
}
