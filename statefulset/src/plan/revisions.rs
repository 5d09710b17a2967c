//! Revision selection for a reconcile, as OpenKruise's `getStatefulSetRevisions`: reuse the
//! newest equal revision, bump an older equal one (a rollback), or create a new one; the
//! current revision is the one `status.currentRevision` names if it still exists, else the
//! update revision. The data is the template's (`kruise_core::revision`), byte for byte as
//! OpenKruise writes it, so revisions OpenKruise created are reused and no pod is rolled on
//! takeover.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_core::api::version::APPS_V1BETA1;
use kruise_core::revision::{
    NewRevision, controller_owner_ref, plan_template_revisions, template_labels,
};
use serde_json::Value;

use crate::api::KIND;
use crate::api::v1beta1::StatefulSet;

pub use kruise_core::revision::{RevisionPlan, RevisionWrite};

/// Chooses the update and current revisions from the set's history.
pub fn plan_revisions(set: &StatefulSet, history: &[ControllerRevision]) -> RevisionPlan {
    let name = set.metadata.name.clone().unwrap_or_default();
    let template = serde_json::to_value(&set.spec.template).unwrap_or(Value::Null);
    let status = set.status.as_ref();
    plan_template_revisions(
        history,
        &template,
        NewRevision {
            parent_name: name.clone(),
            namespace: set.metadata.namespace.clone(),
            owner: Some(controller_owner_ref(
                APPS_V1BETA1,
                KIND,
                &name,
                set.metadata.uid.as_deref().unwrap_or_default(),
            )),
            labels: template_labels(&set.spec.template),
            annotations: set.metadata.annotations.clone().unwrap_or_default(),
            collision_count: Some(status.and_then(|s| s.collision_count).unwrap_or(0)),
            ..NewRevision::default()
        },
        &BTreeMap::new(),
        status
            .map(|s| s.current_revision.as_str())
            .unwrap_or_default(),
    )
}

/// The orphan revisions (no controller reference) in `revisions` whose labels the set's
/// selector matches: the set adopts them before choosing its revisions, as OpenKruise's
/// `AdoptOrphanRevisions` does (a deleting set, or an empty selector, adopts nothing).
pub fn orphans_to_adopt<'a>(
    set: &StatefulSet,
    revisions: &'a [ControllerRevision],
) -> Vec<&'a ControllerRevision> {
    let Some(selector) = set.spec.selector.as_ref() else {
        return Vec::new();
    };
    let empty = selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(|e| e.is_empty());
    if empty || set.metadata.deletion_timestamp.is_some() {
        return Vec::new();
    }
    revisions
        .iter()
        .filter(|r| {
            r.metadata
                .owner_references
                .iter()
                .flatten()
                .all(|o| o.controller != Some(true))
        })
        .filter(|r| {
            let labels = r.metadata.labels.as_ref();
            kruise_core::pods::selector::selector_matches_by(selector, |k| {
                labels.and_then(|l| l.get(k)).map(String::as_str)
            })
            .unwrap_or(false)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kruise_core::revision::{new_controller_revision, template_revision_data};
    use serde_json::json;

    /// A revision an earlier kruise-rs stored kept the typed template (an ephemeral claim
    /// template without `creationTimestamp: null`, `cpu: "0.5"`, a probe's 0 numbers), under
    /// the hash of those bytes. After the upgrade it is still the current and update
    /// revision: no new revision, so the pods' `controller-revision-hash` stays current.
    #[test]
    fn a_revision_stored_before_go_encoding_stays_current_after_an_upgrade() {
        let mut set: StatefulSet = serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
            "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "main", "image": "nginx",
                             "resources": {"requests": {"cpu": "0.5"}},
                             "livenessProbe": {"tcpSocket": {"port": 80},
                                               "initialDelaySeconds": 0}}],
                         "volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
                             "spec": {"accessModes": ["ReadWriteOnce"],
                                      "resources": {"requests": {"storage": "1Gi"}}}}}}]}}}
        }))
        .unwrap();
        let RevisionWrite::Create(today) = plan_revisions(&set, &[]).write else {
            panic!("expected a new revision");
        };
        let template = serde_json::to_value(&set.spec.template).unwrap();
        let stored = new_controller_revision(&NewRevision {
            parent_name: "web".into(),
            namespace: Some("default".into()),
            data: template_revision_data(&template),
            revision: 1,
            collision_count: Some(0),
            ..Default::default()
        });
        assert_ne!(
            stored.metadata.name, today.metadata.name,
            "the stored revision must carry the earlier encoding"
        );
        let name = stored.metadata.name.clone().unwrap();
        set.status = Some(
            serde_json::from_value(json!({"currentRevision": name, "updateRevision": name}))
                .unwrap(),
        );
        let plan = plan_revisions(&set, std::slice::from_ref(&stored));
        assert_eq!(plan.write, RevisionWrite::None);
        assert_eq!(plan.update.metadata.name, stored.metadata.name);
        assert_eq!(plan.current.metadata.name, stored.metadata.name);
        assert_eq!(
            plan.update.data, stored.data,
            "stored data is never rewritten"
        );
    }

    /// Found by the differential test against OpenKruise (`tests/openkruise_oracle.rs`):
    /// Go writes an ephemeral volume's claim template with its struct fields.
    #[test]
    fn revision_data_carries_an_ephemeral_claim_template_as_go_writes_it() {
        let set: StatefulSet = serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
            "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "main", "image": "nginx"}],
                         "volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
                             "metadata": {"creationTimestamp": null},
                             "spec": {"accessModes": ["ReadWriteOnce"],
                                      "resources": {"requests": {"storage": "1Gi"}}}}}}]}}}
        }))
        .unwrap();
        let RevisionWrite::Create(revision) = plan_revisions(&set, &[]).write else {
            panic!("expected a new revision");
        };
        let data = revision.data.unwrap().0;
        assert_eq!(
            data["spec"]["template"]["spec"]["volumes"][0]["ephemeral"]["volumeClaimTemplate"],
            json!({"metadata": {"creationTimestamp": null},
                   "spec": {"accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}}}})
        );
    }
}
