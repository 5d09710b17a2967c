//! Revision selection for a reconcile (OpenKruise `getActiveRevisions`): reuse the newest equal
//! revision, bump an older equal one, or create a new one; the current revision is the one
//! `status.currentRevision` names if it still exists, else the update revision.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_common::api::keys::CLONESET_VCT_HASH_KEY;
use kruise_common::revision::{
    NewRevision, UpdateRevisionDecision, controller_owner_ref, decide_update_revision, fnv1a_32,
    new_controller_revision, sort_revisions, template_revision_data, to_go_json,
};
use serde_json::Value;

use crate::api::KIND;
use crate::api::v1beta1::CloneSet;
use kruise_common::api::version::APPS_V1BETA1;

/// What to write before planning pods.
#[derive(Debug, Clone, PartialEq)]
pub enum RevisionWrite {
    /// Nothing: the newest revision already matches the template.
    None,
    /// Update this existing revision (`.revision` bumped, VCT hash annotation refreshed).
    Update(Box<ControllerRevision>),
    /// Create this revision (on `AlreadyExists` use `common::revision::on_name_collision`).
    Create(Box<ControllerRevision>),
}

/// The revisions of one reconcile.
#[derive(Debug, Clone, PartialEq)]
pub struct RevisionPlan {
    /// The update revision as it will be after [`RevisionPlan::write`].
    pub update: ControllerRevision,
    /// The current revision.
    pub current: ControllerRevision,
    /// The write to perform first.
    pub write: RevisionWrite,
}

/// `kruise.io/cloneset-volumeclaimtemplate-hash`: `""` without claim templates, else the
/// decimal FNV-1a of the Go-style JSON of the templates reduced to `{name, spec}` and sorted by
/// name. (OpenKruise hashes a Go `spew` dump instead, which cannot be reproduced outside Go;
/// the values therefore differ from OpenKruise's, see the crate report.)
pub fn vct_hash(cs: &CloneSet) -> String {
    if cs.spec.volume_claim_templates.is_empty() {
        return String::new();
    }
    let mut reduced: Vec<(String, Value)> = cs
        .spec
        .volume_claim_templates
        .iter()
        .map(|v| {
            let name = v.metadata.name.clone().unwrap_or_default();
            let spec = serde_json::to_value(&v.spec).unwrap_or(Value::Null);
            (
                name.clone(),
                serde_json::json!({"name": name, "spec": spec}),
            )
        })
        .collect();
    reduced.sort_by(|a, b| a.0.cmp(&b.0));
    let list = Value::Array(reduced.into_iter().map(|(_, v)| v).collect());
    fnv1a_32(to_go_json(&list).as_bytes()).to_string()
}

/// Chooses the update and current revisions from the CloneSet's history (owned or orphaned
/// revisions matching its selector).
pub fn plan_revisions(cs: &CloneSet, history: &[ControllerRevision]) -> RevisionPlan {
    let mut sorted = history.to_vec();
    sort_revisions(&mut sorted);
    let template = serde_json::to_value(&cs.spec.template).unwrap_or(Value::Null);
    let data = template_revision_data(&template);
    let vct = vct_hash(cs);
    let (update, write) = match decide_update_revision(&sorted, &data) {
        UpdateRevisionDecision::ReuseNewest { name } => {
            let found = sorted
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(name.as_str()))
                .cloned()
                .unwrap_or_default();
            (found, RevisionWrite::None)
        }
        UpdateRevisionDecision::BumpRevision { name, revision } => {
            let mut found = sorted
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(name.as_str()))
                .cloned()
                .unwrap_or_default();
            found.revision = revision;
            found
                .metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(CLONESET_VCT_HASH_KEY.into(), vct);
            (found.clone(), RevisionWrite::Update(Box::new(found)))
        }
        UpdateRevisionDecision::Create { revision } => {
            let mut annotations = cs.metadata.annotations.clone().unwrap_or_default();
            annotations.insert(CLONESET_VCT_HASH_KEY.into(), vct);
            let name = cs.metadata.name.clone().unwrap_or_default();
            let created = new_controller_revision(&NewRevision {
                parent_name: name.clone(),
                namespace: cs.metadata.namespace.clone(),
                owner: Some(controller_owner_ref(
                    APPS_V1BETA1,
                    KIND,
                    &name,
                    cs.metadata.uid.as_deref().unwrap_or_default(),
                )),
                labels: cs
                    .spec
                    .template
                    .metadata
                    .as_ref()
                    .and_then(|m| m.labels.clone())
                    .unwrap_or_default(),
                annotations,
                data,
                revision,
                collision_count: Some(
                    cs.status
                        .as_ref()
                        .and_then(|s| s.collision_count)
                        .unwrap_or(0),
                ),
                hash_override: None,
                hash_label: None,
            });
            (created.clone(), RevisionWrite::Create(Box::new(created)))
        }
    };
    let current_name = cs
        .status
        .as_ref()
        .map(|s| s.current_revision.as_str())
        .unwrap_or_default();
    let current = sorted
        .iter()
        .find(|r| !current_name.is_empty() && r.metadata.name.as_deref() == Some(current_name))
        .cloned()
        .unwrap_or_else(|| update.clone());
    RevisionPlan {
        update,
        current,
        write,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::tests::{cloneset, revision_for};
    use serde_json::json;

    #[test]
    fn create_reuse_bump_and_current() {
        let cs = cloneset("nginx:1", json!({}));
        let first = plan_revisions(&cs, &[]);
        let RevisionWrite::Create(created) = &first.write else {
            panic!("{:?}", first.write)
        };
        assert_eq!(created.revision, 1);
        assert_eq!(first.current, first.update);
        let owner = &created.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("CloneSet", "cs-uid")
        );
        assert_eq!(
            created.metadata.annotations.as_ref().unwrap()[CLONESET_VCT_HASH_KEY],
            ""
        );
        // Same name as the test helper (same data, same hash).
        assert_eq!(created.metadata.name, revision_for(&cs, 1).metadata.name);

        let v1 = (**created).clone();
        let again = plan_revisions(&cs, std::slice::from_ref(&v1));
        assert_eq!(again.write, RevisionWrite::None);
        assert_eq!(again.update.metadata.name, v1.metadata.name);

        let mut cs2 = cloneset("nginx:2", json!({}));
        cs2.status = Some(crate::api::CloneSetStatus {
            current_revision: v1.metadata.name.clone().unwrap(),
            ..Default::default()
        });
        let p2 = plan_revisions(&cs2, std::slice::from_ref(&v1));
        let RevisionWrite::Create(v2) = &p2.write else {
            panic!()
        };
        assert_eq!(v2.revision, 2);
        assert_eq!(p2.current.metadata.name, v1.metadata.name);

        // Rolling back to nginx:1 bumps v1 instead of creating a copy.
        let back = plan_revisions(&cs, &[v1.clone(), (**v2).clone()]);
        let RevisionWrite::Update(bumped) = &back.write else {
            panic!("{:?}", back.write)
        };
        assert_eq!(bumped.metadata.name, v1.metadata.name);
        assert_eq!(bumped.revision, 3);
    }

    #[test]
    fn vct_hash_is_stable_under_order() {
        let a = cloneset(
            "x",
            json!({"volumeClaimTemplates": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]}),
        );
        let b = cloneset(
            "x",
            json!({"volumeClaimTemplates": [{"metadata": {"name": "b"}, "spec": {"accessModes": ["ReadWriteOnce"]}}, {"metadata": {"name": "a"}}]}),
        );
        assert_eq!(vct_hash(&a), vct_hash(&b));
        assert!(!vct_hash(&a).is_empty());
    }
}
