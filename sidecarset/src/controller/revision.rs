//! The revision step: register the ControllerRevision of the current spec.

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_core::revision::{
    UpdateRevisionDecision, decide_update_revision, owned_or_orphan, sort_revisions,
};
use kruise_runtime::errors::{ShellError, WriteError};
use kruise_runtime::is_not_found;
use kruise_runtime::revisions::{Registered, register_revision};
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::{Error, Shared, compute_error};
use crate::api::v1beta1::SidecarSet;
use crate::api::{SIDECARSET_CUSTOM_VERSION_LABEL, SIDECARSET_NAME_LABEL};
use crate::plan::revision::{new_revision, revision_data, revisions_in_use, revisions_to_delete};

/// What registering the latest revision found.
pub(super) enum Latest {
    /// The latest revision's name and the collision count it was named with.
    Registered { name: String, collisions: i32 },
    /// A true name collision: the collision count must become this value.
    Collision(i32),
}

/// Registers the ControllerRevision of the current spec (`registerLatestRevision`): reuse the
/// newest when equal, renumber an older equal one, or create one; label the custom version;
/// truncate history.
pub(super) async fn register_latest(shared: &Shared, set: &SidecarSet) -> Result<Latest, Error> {
    let name = set.name_any();
    let uid = set.uid().unwrap_or_default();
    let namespace = &shared.settings.revision_namespace;
    let cached: Vec<ControllerRevision> = shared
        .revisions
        .state()
        .iter()
        .filter(|r| r.labels().get(SIDECARSET_NAME_LABEL) == Some(&name))
        .map(|r| (**r).clone())
        .collect();
    let mut history: Vec<ControllerRevision> = owned_or_orphan(&cached, &uid)
        .into_iter()
        .cloned()
        .collect();
    sort_revisions(&mut history);
    let collisions = set
        .status
        .as_ref()
        .and_then(|s| s.collision_count)
        .unwrap_or(0);
    let data = revision_data(set).map_err(|e| compute_error(set, e))?;
    let api: Api<ControllerRevision> = Api::namespaced(shared.client.clone(), namespace);
    let revision_error = |name: &str| {
        let name = name.to_string();
        move |source| Error::from(ShellError::Revision(WriteError { name, source }))
    };
    let latest = match decide_update_revision(&history, &data) {
        UpdateRevisionDecision::ReuseNewest { name } => history
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name.as_str()))
            .cloned()
            .ok_or_else(|| compute_error(set, format!("revision {name} vanished")))?,
        UpdateRevisionDecision::BumpRevision { name, revision } => {
            let body = json!({"revision": revision});
            let stored = api
                .patch(&name, &PatchParams::default(), &Patch::Merge(body))
                .await
                .map_err(revision_error(&name))?;
            history.retain(|r| r.metadata.name.as_deref() != Some(name.as_str()));
            history.push(stored.clone());
            stored
        }
        UpdateRevisionDecision::Create { revision } => {
            let candidate = new_revision(set, namespace, revision, Some(collisions))
                .map_err(|e| compute_error(set, e))?;
            match register_revision(&api, &candidate, collisions)
                .await
                .map_err(revision_error(&candidate.name_any()))?
            {
                Registered::Stored(stored) => {
                    history.push((*stored).clone());
                    *stored
                }
                Registered::Collision { collision_count } => {
                    return Ok(Latest::Collision(collision_count));
                }
            }
        }
    };
    let latest_name = latest.name_any();
    let custom = &set.spec.custom_version;
    if !custom.is_empty() && latest.labels().get(SIDECARSET_CUSTOM_VERSION_LABEL) != Some(custom) {
        let body = json!({"metadata": {"labels": {SIDECARSET_CUSTOM_VERSION_LABEL: custom}}});
        api.patch(&latest_name, &PatchParams::default(), &Patch::Merge(body))
            .await
            .map_err(revision_error(&latest_name))?;
    }
    sort_revisions(&mut history);
    let in_use = revisions_in_use(shared.pods.state().iter().map(|p| &**p), &name);
    for stale in revisions_to_delete(set, &history, &in_use) {
        match api.delete(&stale, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(source) => {
                return Err(ShellError::Revision(WriteError {
                    name: stale,
                    source,
                })
                .into());
            }
        }
    }
    Ok(Latest::Registered {
        name: latest_name,
        collisions,
    })
}
