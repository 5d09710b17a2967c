//! The DaemonSet's ControllerRevisions, as upstream's `constructHistory`: the update
//! revision is named `<daemonset>-<hash>` after the template hash the pods carry (with
//! `status.collisionCount`), labelled `controller-revision-hash: <hash>`; an older revision
//! with equal data is reused with its `.revision` bumped (a rollback), otherwise one is
//! created. History beyond `revisionHistoryLimit` is pruned, never a revision a pod uses.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_core::api::keys::CONTROLLER_REVISION_HASH_KEY;
use kruise_core::api::version::APPS_V1BETA1;
use kruise_core::revision::{
    NewRevision, controller_owner_ref, plan_template_revisions, revisions_to_truncate,
    sort_revisions, template_labels,
};
use serde_json::Value;

use crate::api::v1beta1::DaemonSet;
use crate::api::{DEFAULT_REVISION_HISTORY_LIMIT, KIND};

pub use kruise_core::revision::{RevisionPlan, RevisionWrite};

/// Chooses the update revision (`hash` is the template hash pods get) from the history.
/// A DaemonSet has no separate current revision: both are the update revision.
pub fn plan_revisions(ds: &DaemonSet, hash: &str, history: &[ControllerRevision]) -> RevisionPlan {
    let name = ds.metadata.name.clone().unwrap_or_default();
    let template = serde_json::to_value(&ds.spec.template).unwrap_or(Value::Null);
    plan_template_revisions(
        history,
        &template,
        NewRevision {
            parent_name: name.clone(),
            namespace: ds.metadata.namespace.clone(),
            owner: Some(controller_owner_ref(
                APPS_V1BETA1,
                KIND,
                &name,
                ds.metadata.uid.as_deref().unwrap_or_default(),
            )),
            labels: template_labels(&ds.spec.template),
            annotations: ds.metadata.annotations.clone().unwrap_or_default(),
            collision_count: ds.status.as_ref().and_then(|s| s.collision_count),
            hash_override: Some(hash.to_string()),
            hash_label: Some(CONTROLLER_REVISION_HASH_KEY.to_string()),
            ..NewRevision::default()
        },
        &BTreeMap::new(),
        // No current revision of its own: the update revision.
        "",
    )
}

/// The hash pods of `revision` carry: its `controller-revision-hash` label. Upstream takes
/// the hash from the revision it found rather than recomputing it, which is what lets a
/// revision another controller named (OpenKruise, with Kubernetes' `ComputeHash`) stay the
/// update revision, its pods untouched.
pub fn revision_hash(revision: &ControllerRevision) -> Option<String> {
    revision
        .metadata
        .labels
        .as_ref()?
        .get(CONTROLLER_REVISION_HASH_KEY)
        .filter(|hash| !hash.is_empty())
        .cloned()
}

/// The revisions to delete: the oldest beyond `revisionHistoryLimit` (default 10) of those
/// neither the update revision nor named by a pod's `controller-revision-hash`.
pub fn revisions_to_prune(
    ds: &DaemonSet,
    history: &[ControllerRevision],
    update: &str,
    pod_hashes: &BTreeSet<String>,
) -> Vec<String> {
    let mut sorted = history.to_vec();
    sort_revisions(&mut sorted);
    let limit = ds
        .spec
        .revision_history_limit
        .unwrap_or(DEFAULT_REVISION_HISTORY_LIMIT);
    revisions_to_truncate(&sorted, limit, update, update, pod_hashes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kruise_core::revision::template_revision_data;
    use serde_json::json;

    fn daemonset(image: &str, limit: Option<i32>) -> DaemonSet {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "ns", "uid": "u1"},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "revisionHistoryLimit": limit,
                "template": {"metadata": {"labels": {"app": "agent"}},
                    "spec": {"containers": [{"name": "c", "image": image}]}}
            }
        }))
        .unwrap()
    }

    fn stored(ds: &DaemonSet, hash: &str, revision: i64) -> ControllerRevision {
        let mut rev = plan_revisions(ds, hash, &[]).update;
        rev.revision = revision;
        rev
    }

    #[test]
    fn a_new_template_creates_a_revision_named_after_the_pod_hash() {
        let ds = daemonset("a:1", None);
        let plan = plan_revisions(&ds, "h1", &[]);
        let RevisionWrite::Create(rev) = &plan.write else {
            panic!("expected a create, got {:?}", plan.write);
        };
        assert_eq!(rev.metadata.name.as_deref(), Some("agent-h1"));
        assert_eq!(rev.revision, 1);
        let labels = rev.metadata.labels.clone().unwrap();
        assert_eq!(labels["controller-revision-hash"], "h1");
        assert_eq!(labels["app"], "agent");
        let owner = &rev.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("DaemonSet", "u1")
        );
        assert_eq!(owner.controller, Some(true));
        assert_eq!(plan.current, plan.update);
    }

    #[test]
    fn an_unchanged_template_reuses_the_newest_revision() {
        let ds = daemonset("a:1", None);
        let history = vec![stored(&ds, "h1", 1)];
        let plan = plan_revisions(&ds, "h1", &history);
        assert_eq!(plan.write, RevisionWrite::None);
        assert_eq!(plan.update.metadata.name.as_deref(), Some("agent-h1"));
    }

    #[test]
    fn an_equal_revision_under_another_name_is_the_update_revision_with_its_hash() {
        // As OpenKruise leaves it: its own hash names the revision, data as its getPatch.
        let ds = daemonset("a:1", None);
        let mut openkruise = stored(&ds, "7989c9cddf", 1);
        openkruise.data = Some(k8s_openapi::apimachinery::pkg::runtime::RawExtension(
            json!({
                "spec": {"template": {"$patch": "replace",
                    "metadata": {"creationTimestamp": null, "labels": {"app": "agent"}},
                    "spec": {"containers": [{"image": "a:1", "name": "c", "resources": {}}]}}}
            }),
        ));
        let plan = plan_revisions(&ds, "ours", &[openkruise]);
        assert_eq!(plan.write, RevisionWrite::None);
        assert_eq!(
            plan.update.metadata.name.as_deref(),
            Some("agent-7989c9cddf")
        );
        assert_eq!(revision_hash(&plan.update).as_deref(), Some("7989c9cddf"));
    }

    /// A revision an earlier kruise-rs stored has the same name (the pod hash did not
    /// change) but the template as the user wrote it (`cpu: "0.5"`, a probe's 0 numbers).
    /// After the upgrade it is still the update revision: no create, so no name collision, no
    /// `collisionCount` bump and no new pod hash — nothing rolls.
    #[test]
    fn a_revision_stored_before_go_encoding_stays_the_update_revision_after_an_upgrade() {
        let ds: DaemonSet = serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "ns", "uid": "u1"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "c", "image": "a:1",
                    "resources": {"requests": {"cpu": "0.5", "memory": "1024Mi"}},
                    "readinessProbe": {"tcpSocket": {"port": 80}, "initialDelaySeconds": 0}}]}}}
        }))
        .unwrap();
        let mut stored = stored(&ds, "h1", 1);
        let template = serde_json::to_value(&ds.spec.template).unwrap();
        stored.data = Some(k8s_openapi::apimachinery::pkg::runtime::RawExtension(
            template_revision_data(&template),
        ));
        let today = plan_revisions(&ds, "h1", &[]).update.data;
        assert_ne!(
            today, stored.data,
            "the stored revision must carry the earlier encoding"
        );
        let plan = plan_revisions(&ds, "h1", std::slice::from_ref(&stored));
        assert_eq!(plan.write, RevisionWrite::None);
        assert_eq!(plan.update.metadata.name.as_deref(), Some("agent-h1"));
        assert_eq!(revision_hash(&plan.update).as_deref(), Some("h1"));
        assert_eq!(
            plan.update.data, stored.data,
            "stored data is never rewritten"
        );
    }

    /// Found by the differential test against OpenKruise (`tests/openkruise_oracle.rs`):
    /// its controller's `getPatch` writes the template as Go encodes it.
    #[test]
    fn revision_data_is_the_template_as_go_encodes_it() {
        let ds: DaemonSet = serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "ns", "uid": "u1"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "c", "image": "a:1", "args": [],
                    "resources": {"requests": {"cpu": "0.5", "memory": "1.5Gi"}, "limits": {}},
                    "readinessProbe": {"tcpSocket": {"port": 80}, "failureThreshold": 0}}]}}}
        }))
        .unwrap();
        let data = plan_revisions(&ds, "h1", &[]).update.data.unwrap().0;
        assert_eq!(
            data["spec"]["template"]["spec"]["containers"][0],
            json!({"name": "c", "image": "a:1",
                   "resources": {"requests": {"cpu": "500m", "memory": "1536Mi"}},
                   "readinessProbe": {"tcpSocket": {"port": 80}}})
        );
    }

    #[test]
    fn a_revision_without_the_hash_label_has_no_hash() {
        let mut rev = stored(&daemonset("a:1", None), "h1", 1);
        rev.metadata.labels = None;
        assert_eq!(revision_hash(&rev), None);
    }

    #[test]
    fn a_rollback_bumps_the_older_equal_revision() {
        let old = daemonset("a:1", None);
        let new = daemonset("a:2", None);
        let history = vec![stored(&old, "h1", 1), stored(&new, "h2", 2)];
        let plan = plan_revisions(&old, "h1", &history);
        let RevisionWrite::Update(rev) = &plan.write else {
            panic!("expected an update, got {:?}", plan.write);
        };
        assert_eq!(rev.metadata.name.as_deref(), Some("agent-h1"));
        assert_eq!(rev.revision, 3);
    }

    #[test]
    fn pruning_keeps_the_limit_the_update_revision_and_revisions_pods_use() {
        let ds = daemonset("a:0", Some(1));
        let history: Vec<_> = (1..=5)
            .map(|i| stored(&daemonset(&format!("a:{i}"), None), &format!("h{i}"), i))
            .collect();
        let in_use = BTreeSet::from(["h1".to_string()]);
        // h5 is the update revision, h1 a pod's; of h2..h4 only the newest (h4) stays.
        assert_eq!(
            revisions_to_prune(&ds, &history, "agent-h5", &in_use),
            vec!["agent-h2".to_string(), "agent-h3".to_string()]
        );
        let unlimited = daemonset("a:0", None);
        assert!(revisions_to_prune(&unlimited, &history, "agent-h5", &in_use).is_empty());
    }

    proptest::proptest! {
        /// Whatever the history, limit and pods: the update revision and every revision a
        /// pod uses survive, and at most `limit` others do, the newest ones.
        #[test]
        fn pruning_never_touches_live_revisions(
            count in 1i64..12,
            limit in 0i32..5,
            update in 1i64..12,
            used in proptest::collection::btree_set(1i64..12, 0..4),
        ) {
            let ds = daemonset("a:0", Some(limit));
            let history: Vec<_> = (1..=count)
                .map(|i| stored(&daemonset(&format!("a:{i}"), None), &format!("h{i}"), i))
                .collect();
            let update_name = format!("agent-h{update}");
            let in_use: BTreeSet<String> = used.iter().map(|i| format!("h{i}")).collect();
            let pruned = revisions_to_prune(&ds, &history, &update_name, &in_use);
            let live = |i: i64| i == update || used.contains(&i);
            for name in &pruned {
                let i: i64 = name.trim_start_matches("agent-h").parse().unwrap();
                proptest::prop_assert!(!live(i), "{name} is live");
            }
            let kept_others: Vec<i64> = (1..=count)
                .filter(|i| !live(*i) && !pruned.contains(&format!("agent-h{i}")))
                .collect();
            let others = (1..=count).filter(|i| !live(*i)).count();
            proptest::prop_assert_eq!(kept_others.len(), others.min(limit as usize));
            let newest: Vec<i64> = (1..=count)
                .filter(|i| !live(*i))
                .rev()
                .take(limit as usize)
                .collect();
            proptest::prop_assert!(kept_others.iter().all(|i| newest.contains(i)));
        }
    }
}
