//! Which pods an in-place update can carry to the update revision, and the request for each:
//! a pod's revision (its `controller-revision-hash`) against the update revision, as
//! OpenKruise's DaemonSet compares them (`InPlaceIfPossible` only).

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_core::api::keys::CONTROLLER_REVISION_HASH_KEY;
use kruise_core::inplace::{InPlaceGates, UpdateRequest, calculate_update_spec};
use serde_json::Value;
use std::collections::BTreeMap;

/// The update revision an in-place update goes to.
#[derive(Debug, Clone, Copy)]
pub struct InPlaceTarget<'a> {
    /// Whether the strategy updates in place at all (`InPlaceIfPossible`).
    pub enabled: bool,
    /// The update revision's hash.
    pub hash: &'a str,
    /// The update revision's data (its patch of the template).
    pub data: Option<&'a Value>,
    /// The DaemonSet's revisions, where a pod's revision is looked up by its hash.
    pub history: &'a [ControllerRevision],
    /// The in-place gates the update is made with.
    pub gates: InPlaceGates,
}

impl InPlaceTarget<'_> {
    /// The request that updates a pod at revision `pod_hash` in place: None when updates are
    /// not in place, the pod is at the update revision, or either revision is unknown.
    pub fn request(&self, pod_hash: Option<&str>) -> Option<UpdateRequest> {
        let pod_hash = pod_hash?;
        if !self.enabled || pod_hash == self.hash {
            return None;
        }
        let old = self.history.iter().find(|r| {
            r.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(CONTROLLER_REVISION_HASH_KEY))
                .map(String::as_str)
                == Some(pod_hash)
        })?;
        Some(UpdateRequest {
            old_revision_data: old.data.as_ref()?.0.clone(),
            new_revision_data: self.data?.clone(),
            revision: self.hash.into(),
            revision_labels: BTreeMap::from([(
                CONTROLLER_REVISION_HASH_KEY.to_string(),
                self.hash.into(),
            )]),
            gates: self.gates,
            ..UpdateRequest::default()
        })
    }

    /// Whether a pod at revision `pod_hash` can be updated in place: the two revisions
    /// differ only in what an in-place update may change.
    pub fn possible(&self, pod_hash: Option<&str>) -> bool {
        self.request(pod_hash).is_some_and(|r| {
            calculate_update_spec(
                &r.old_revision_data,
                &r.new_revision_data,
                &r.revision,
                r.gates,
                r.grace_period_seconds,
            )
            .is_ok()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
    use serde_json::json;

    fn revision(hash: &str, image: &str, port: i32) -> ControllerRevision {
        ControllerRevision {
            metadata: ObjectMeta {
                name: Some(format!("ds-{hash}")),
                labels: Some(BTreeMap::from([(
                    CONTROLLER_REVISION_HASH_KEY.to_string(),
                    hash.to_string(),
                )])),
                ..ObjectMeta::default()
            },
            data: Some(RawExtension(json!({"spec": {"template": {
                "$patch": "replace",
                "metadata": {"labels": {"app": "a"}},
                "spec": {"containers": [{"name": "c", "image": image,
                                         "ports": [{"containerPort": port}]}]}
            }}}))),
            revision: 1,
        }
    }

    #[test]
    fn an_image_change_is_in_place_and_a_port_change_is_not() {
        let history = [
            revision("old", "nginx:1", 80),
            revision("port", "nginx:1", 81),
            revision("new", "nginx:2", 80),
        ];
        let target = InPlaceTarget {
            enabled: true,
            hash: "new",
            data: history[2].data.as_ref().map(|d| &d.0),
            history: &history,
            gates: InPlaceGates::default(),
        };
        let request = target.request(Some("old")).unwrap();
        assert_eq!(request.revision, "new");
        assert_eq!(request.revision_labels[CONTROLLER_REVISION_HASH_KEY], "new");
        assert!(target.possible(Some("old")));
        assert!(!target.possible(Some("port")));
        // Updated, unknown or unlabelled pods get no request.
        assert!(target.request(Some("new")).is_none());
        assert!(target.request(Some("gone")).is_none());
        assert!(target.request(None).is_none());
        let recreate = InPlaceTarget {
            enabled: false,
            ..target
        };
        assert!(recreate.request(Some("old")).is_none());
    }
}
