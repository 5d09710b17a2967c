//! Registering a ControllerRevision the way Kubernetes' `CreateControllerRevision` does,
//! shared by every workload family: create it; when its name is taken, reuse the existing
//! revision if its data is equal, otherwise report a true hash collision so the caller
//! raises `status.collisionCount` (which renames the next candidate).

use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::ResourceExt as _;
use kube::api::{Api, PostParams};

use super::errors::is_already_exists;
use crate::revision::{CollisionDecision, on_name_collision};

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
