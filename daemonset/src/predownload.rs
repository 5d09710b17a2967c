//! Image pre-download before a rollout, as OpenKruise's Advanced DaemonSet decides it
//! (`createImagePullJobsForInPlaceUpdate`, gate `PreDownloadImageForDaemonSetUpdate`): while
//! the DaemonSet is rolling out (`updatedNumberScheduled` short of `desiredNumberScheduled`,
//! or the status still naming another revision), one ImagePullJob per image the update
//! revision changes against any older revision; once the rollout is done, its jobs go.
//!
//! As upstream: the settings are the DaemonSet's annotations; partition and maxUnavailable
//! are scaled against `desiredNumberScheduled`; the update type is not checked (a Standard
//! rollout pre-downloads too); `image-predownload-min-updated-ready-pods` is read by
//! upstream but not applied, so it is not here either.
//!
//! [`plan`] is the decision, pure; the jobs and the shell that writes them are
//! `kruise_runtime::predownload`.

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_core::api::intstr::scaled_value_from_int_or_percent;
use kruise_runtime::predownload::{JobOwner, PreDownloadPlan, decided, jobs};
use kube::ResourceExt as _;

use crate::api::KIND;
use crate::api::v1beta1::DaemonSet;

/// The job owner `ds` is: parallelism and timeout from its annotations.
pub fn job_owner<'a>(ds: &'a DaemonSet, namespace: &'a str, uid: &'a str) -> JobOwner<'a> {
    JobOwner::annotated(
        KIND,
        &ds.metadata,
        namespace,
        uid,
        ds.spec.selector.as_ref(),
        &ds.spec.template,
    )
}

/// Decides the pre-download step of a (defaulted) DaemonSet whose update revision is
/// `update` (its pods' hash `hash`) and whose other revisions are `olds`.
pub fn plan(
    ds: &DaemonSet,
    olds: &[&ControllerRevision],
    update: &ControllerRevision,
    hash: &str,
) -> PreDownloadPlan {
    let status = ds.status.clone().unwrap_or_default();
    let desired = status.desired_number_scheduled;
    if status.updated_number_scheduled == desired && status.update_revision == hash {
        return PreDownloadPlan::DeleteJobs;
    }
    if decided(update) {
        return PreDownloadPlan::Nothing;
    }
    let rolling = ds.spec.update_strategy.rolling_update.as_ref();
    let partition = match rolling.and_then(|r| r.partition.as_ref()) {
        None => 0,
        Some(p) => match scaled_value_from_int_or_percent(Some(p), desired, false) {
            Ok(p) => p,
            // Upstream returns the error: no job, no label, tried again next pass.
            Err(_) => return PreDownloadPlan::Nothing,
        },
    };
    let max_unavailable = scaled_value_from_int_or_percent(
        Some(
            rolling
                .and_then(|r| r.max_unavailable.as_ref())
                .unwrap_or(&IntOrString::Int(1)),
        ),
        desired,
        true,
    )
    .unwrap_or(0);
    if partition == 0 && max_unavailable >= desired {
        return PreDownloadPlan::Ignore {
            why: "all pods update in one batch",
        };
    }
    let (namespace, uid) = (
        ds.namespace().unwrap_or_default(),
        ds.uid().unwrap_or_default(),
    );
    PreDownloadPlan::Create(jobs(&job_owner(ds, &namespace, &uid), olds, update))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::revisions::{plan_revisions, revision_hash};
    use kruise_core::api::keys::IMAGE_PREDOWNLOAD_IGNORED_KEY;
    use pretty_assertions::assert_eq;
    use serde_json::{Value, json};

    /// A DaemonSet on `desired` nodes, `updated` of them updated, with `rolling` (its
    /// `rollingUpdate`) and `annotations`.
    fn daemonset(image: &str, rolling: Value, annotations: Value) -> DaemonSet {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "ns", "uid": "ds-uid",
                         "annotations": annotations},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {"metadata": {"labels": {"app": "agent"}},
                             "spec": {"containers": [{"name": "main", "image": image}]}},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": rolling},
            },
        }))
        .unwrap()
    }

    fn with_status(mut ds: DaemonSet, desired: i32, updated: i32, hash: &str) -> DaemonSet {
        let status = ds.status.get_or_insert_with(Default::default);
        status.desired_number_scheduled = desired;
        status.updated_number_scheduled = updated;
        status.update_revision = hash.into();
        ds
    }

    /// The revision the DaemonSet's own planner writes for `ds`'s template.
    fn revision_of(ds: &DaemonSet, hash: &str) -> ControllerRevision {
        plan_revisions(ds, hash, &[]).update
    }

    #[test]
    fn rolling_out_creates_one_job_per_changed_image_then_done_deletes_them() {
        let old = revision_of(&daemonset("agent:v1", json!({}), json!({})), "h1");
        let ds = daemonset(
            "agent:v2",
            json!({"rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": 2}),
            json!({"apps.kruise.io/image-predownload-parallelism": "10"}),
        );
        let update = revision_of(&ds, "h2");
        assert_eq!(revision_hash(&update).as_deref(), Some("h2"));
        // 10 nodes, none updated yet, status still at the old hash.
        let rolling_out = with_status(ds.clone(), 10, 0, "h1");
        let PreDownloadPlan::Create(created) = plan(&rolling_out, &[&old], &update, "h2") else {
            panic!("expected jobs");
        };
        assert_eq!(created.len(), 1);
        let job = &created[0];
        assert_eq!(job["metadata"]["name"], "agent-h2-main");
        assert_eq!(job["metadata"]["ownerReferences"][0]["kind"], "DaemonSet");
        assert_eq!(job["spec"]["image"], "agent:v2");
        assert_eq!(job["spec"]["parallelism"], 10);
        // Upstream reads the hash from `controller.kubernetes.io/hash`, which a DaemonSet's
        // revisions lack: the value is empty in the label and in the selector.
        assert_eq!(
            job["spec"]["podSelector"]["matchExpressions"][0]["values"],
            json!(["agent-h2", ""])
        );
        // Done: every node updated and the status at this hash.
        let done = with_status(ds, 10, 10, "h2");
        assert_eq!(
            plan(&done, &[&old], &update, "h2"),
            PreDownloadPlan::DeleteJobs
        );
    }

    #[test]
    fn decisions() {
        let old = revision_of(&daemonset("agent:v1", json!({}), json!({})), "h1");
        let case = |rolling: Value, desired: i32, update_labels: &[&str]| {
            let ds = with_status(daemonset("agent:v2", rolling, json!({})), desired, 0, "h1");
            let mut update = revision_of(&ds, "h2");
            for key in update_labels {
                update
                    .metadata
                    .labels
                    .get_or_insert_with(Default::default)
                    .insert(key.to_string(), "true".into());
            }
            plan(&ds, &[&old], &update, "h2")
        };
        let one_batch = PreDownloadPlan::Ignore {
            why: "all pods update in one batch",
        };
        assert_eq!(case(json!({"maxUnavailable": "100%"}), 10, &[]), one_batch);
        assert_eq!(
            case(json!({}), 1, &[]),
            one_batch,
            "default maxUnavailable 1 on one node"
        );
        assert!(matches!(
            case(json!({"maxUnavailable": "100%", "partition": "20%"}), 10, &[]),
            PreDownloadPlan::Create(jobs) if jobs.len() == 1
        ));
        assert_eq!(
            case(json!({}), 10, &[IMAGE_PREDOWNLOAD_IGNORED_KEY]),
            PreDownloadPlan::Nothing
        );
        assert_eq!(
            case(json!({"partition": "lots"}), 10, &[]),
            PreDownloadPlan::Nothing
        );
    }
}
