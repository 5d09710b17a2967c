//! Image pre-download before in-place updates, as OpenKruise's CloneSet controller decides it
//! (`createImagePullJobsForInPlaceUpdate`, gate `PreDownloadImageForInPlaceUpdate`): when a
//! rollout changes images, one ImagePullJob per changed container pulls the new image on
//! the nodes of the pods not yet updated, so their in-place update does not wait on the pull.
//!
//! [`plan`] is CloneSet's decision, pure; the jobs and the shell that writes them are
//! `kruise_runtime::predownload`, shared with the other workload families.

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_core::api::intstr::scaled_value_from_int_or_percent;
use kruise_core::inplace::InPlaceGates;
pub use kruise_runtime::predownload::PreDownloadPlan;
use kruise_runtime::predownload::{
    DEFAULT_TIMEOUT_SECONDS, JobOwner, decided, ignored_for_rollout, in_place_jobs,
};
use kube::ResourceExt as _;

use crate::api::v1beta1::{CloneSet, CloneSetPodUpdatePolicy};
use crate::api::{DEFAULT_MAX_UNAVAILABLE, KIND};
use crate::plan::PlanGates;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The job owner `cs` is: its parallelism and timeout from `inPlaceUpdateStrategy`.
pub fn job_owner<'a>(cs: &'a CloneSet, namespace: &'a str, uid: &'a str) -> JobOwner<'a> {
    let in_place = cs
        .spec
        .update_strategy
        .rolling_update
        .as_ref()
        .and_then(|r| r.in_place_update_strategy.as_ref());
    JobOwner {
        kind: KIND,
        name: cs.metadata.name.as_deref().unwrap_or(""),
        namespace,
        uid,
        selector: cs.spec.selector.as_ref(),
        template: &cs.spec.template,
        parallelism: in_place
            .and_then(|s| s.image_pre_download_parallelism.clone())
            .unwrap_or(IntOrString::Int(1)),
        timeout_seconds: in_place
            .and_then(|s| s.image_pre_download_timeout_seconds)
            .unwrap_or(DEFAULT_TIMEOUT_SECONDS),
    }
}

/// Decides the pre-download step of a (defaulted) CloneSet whose current and update
/// revisions are given.
pub fn plan(
    cs: &CloneSet,
    current: &ControllerRevision,
    update: &ControllerRevision,
    gates: PlanGates,
) -> PreDownloadPlan {
    let (current_name, update_name) = (name_of(current), name_of(update));
    if current_name == update_name {
        return PreDownloadPlan::DeleteJobs;
    }
    let replicas = cs.spec.replicas.unwrap_or(1);
    let rolling = cs.spec.update_strategy.rolling_update.as_ref();
    let in_place = rolling.and_then(|r| r.in_place_update_strategy.as_ref());
    let min_ready = in_place
        .and_then(|s| s.image_pre_download_min_updated_ready_pods)
        .map(|n| scaled_value_from_int_or_percent(Some(&IntOrString::Int(n)), replicas, true))
        .and_then(Result::ok)
        .unwrap_or(0);
    let status = cs.status.as_ref();
    // Pods ready at a revision that is no longer the update revision do not count.
    let updated_ready = match status {
        Some(s) if s.update_revision == update_name => s.updated_ready_replicas,
        _ => 0,
    };
    if updated_ready < min_ready || decided(update) {
        return PreDownloadPlan::Nothing;
    }
    let Some(rolling) = rolling else {
        return PreDownloadPlan::Ignore {
            why: "the update type is ReCreate",
        };
    };
    if matches!(
        rolling.pod_update_policy,
        None | Some(CloneSetPodUpdatePolicy::ReCreate)
    ) {
        return PreDownloadPlan::Ignore {
            why: "the update type is ReCreate",
        };
    }
    let partition = kruise_core::api::intstr::calculate_partition_replicas(
        rolling.partition.as_ref(),
        Some(replicas),
    )
    .unwrap_or(0);
    let default_max_unavailable = IntOrString::String(DEFAULT_MAX_UNAVAILABLE.into());
    let max_unavailable = rolling
        .max_unavailable
        .as_ref()
        .unwrap_or(&default_max_unavailable);
    if let Some(ignored) = ignored_for_rollout(replicas, partition, max_unavailable) {
        return ignored;
    }
    let in_place_gates = InPlaceGates {
        env_from_metadata: gates.env_from_metadata,
        vertical_scaling: gates.vertical_scaling,
    };
    let grace = in_place.map_or(0, |s| s.grace_period_seconds);
    let recreate_on_vct = gates.recreate_on_vct_change
        && rolling.pod_update_policy != Some(CloneSetPodUpdatePolicy::InPlaceOnly);
    let (namespace, uid) = (
        cs.namespace().unwrap_or_default(),
        cs.uid().unwrap_or_default(),
    );
    in_place_jobs(
        &job_owner(cs, &namespace, &uid),
        current,
        update,
        in_place_gates,
        grace,
        recreate_on_vct,
    )
}

fn name_of(r: &ControllerRevision) -> &str {
    r.metadata.name.as_deref().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::defaults::default_v1beta1;
    use kruise_core::api::keys::{
        CONTROLLER_REVISION_HASH_LABEL_ON_CR, IMAGE_PREDOWNLOAD_CREATED_KEY,
        IMAGE_PREDOWNLOAD_IGNORED_KEY,
    };
    use kruise_core::revision::{NewRevision, new_controller_revision, template_revision_data};
    use kruise_runtime::predownload::changed_images;
    use pretty_assertions::assert_eq;
    use serde_json::{Value, json};

    fn template(app: &str, sidecar: &str) -> Value {
        json!({"metadata": {"labels": {"app": "demo"}, "annotations": {"team": "a"}},
               "spec": {"containers": [{"name": "app", "image": app},
                                       {"name": "sidecar", "image": sidecar}],
                        "imagePullSecrets": [{"name": "regcred"}]}})
    }

    fn extend(base: &mut Value, extra: Value) {
        if let (Some(b), Value::Object(e)) = (base.as_object_mut(), extra) {
            b.extend(e);
        }
    }

    /// A defaulted CloneSet of 5 replicas updated in place with partition 2, with `spec`
    /// and `rolling` (its `rollingUpdate`) merged in.
    fn cloneset(spec: Value, rolling: Value) -> CloneSet {
        let mut rolling_update = json!({"podUpdatePolicy": "InPlaceIfPossible", "partition": 2});
        extend(&mut rolling_update, rolling);
        let mut base = json!({
            "replicas": 5,
            "selector": {"matchLabels": {"app": "demo"}},
            "template": template("app:v2", "side:v1"),
            "updateStrategy": {"rollingUpdate": rolling_update},
        });
        extend(&mut base, spec);
        let mut cs: CloneSet = serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
            "metadata": {"name": "demo", "namespace": "ns", "uid": "cs-uid"},
            "spec": base,
        }))
        .unwrap();
        default_v1beta1(&mut cs.spec);
        cs
    }

    fn revision(template: &Value, number: i64) -> ControllerRevision {
        new_controller_revision(&NewRevision {
            parent_name: "demo".into(),
            namespace: Some("ns".into()),
            data: template_revision_data(&kruise_compat::pod_defaults::go_encoded_pod_template(
                template,
            )),
            revision: number,
            collision_count: Some(0),
            ..Default::default()
        })
    }

    fn revisions() -> (ControllerRevision, ControllerRevision) {
        (
            revision(&template("app:v1", "side:v1"), 1),
            revision(&template("app:v2", "side:v1"), 2),
        )
    }

    fn labelled(mut r: ControllerRevision, key: &str) -> ControllerRevision {
        r.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(key.into(), "true".into());
        r
    }

    fn created_jobs(p: &PreDownloadPlan) -> Vec<Value> {
        match p {
            PreDownloadPlan::Create(jobs) => jobs.clone(),
            other => panic!("expected jobs, got {other:?}"),
        }
    }

    #[test]
    fn one_job_per_changed_image_as_openkruise_writes_it() {
        let (current, update) = revisions();
        let cs = cloneset(
            json!({}),
            json!({"inPlaceUpdateStrategy": {"imagePreDownloadParallelism": 3,
                                             "imagePreDownloadTimeoutSeconds": 120}}),
        );
        let created = created_jobs(&plan(&cs, &current, &update, PlanGates::default()));
        let name = name_of(&update);
        let hash = &update.metadata.labels.as_ref().unwrap()[CONTROLLER_REVISION_HASH_LABEL_ON_CR];
        assert_eq!(
            created,
            vec![json!({
                "apiVersion": "apps.kruise.io/v1beta1", "kind": "ImagePullJob",
                "metadata": {
                    "name": format!("{name}-app"), "namespace": "ns",
                    "labels": {"app": "demo", "controller.kubernetes.io/hash": hash},
                    "ownerReferences": [{"apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
                        "name": "demo", "uid": "cs-uid", "controller": true, "blockOwnerDeletion": true}],
                },
                "spec": {
                    "image": "app:v2",
                    "pullSecrets": ["regcred"],
                    "podSelector": {"matchLabels": {"app": "demo"}, "matchExpressions": [
                        {"key": "controller-revision-hash", "operator": "NotIn", "values": [name, hash]}]},
                    "parallelism": 3,
                    "pullPolicy": {"backoffLimit": 1, "timeoutSeconds": 120},
                    "completionPolicy": {"type": "Always", "ttlSecondsAfterFinished": 600},
                    "sandboxConfig": {"annotations": {"team": "a"},
                                      "labels": {"app": "demo", "controller.kubernetes.io/hash": hash}},
                },
            })]
        );
    }

    #[test]
    fn defaults_parallelism_one_and_timeout_300_and_new_containers_count_as_changed() {
        let current = revision(&template("app:v1", "side:v1"), 1);
        let mut tpl = template("app:v1", "side:v2");
        tpl["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "extra", "image": "extra:v1"}));
        let update = revision(&tpl, 2);
        // Adding a container cannot update in place: ignored.
        assert_eq!(
            plan(
                &cloneset(json!({}), json!({})),
                &current,
                &update,
                PlanGates::default()
            ),
            PreDownloadPlan::Ignore {
                why: "the revision cannot update in place"
            }
        );
        assert_eq!(
            changed_images(&[&current], &update),
            [
                ("sidecar".to_string(), "side:v2".to_string()),
                ("extra".to_string(), "extra:v1".to_string())
            ]
        );
        let (current, update) = revisions();
        let job = &created_jobs(&plan(
            &cloneset(json!({}), json!({})),
            &current,
            &update,
            PlanGates::default(),
        ))[0];
        assert_eq!(job["spec"]["parallelism"], 1);
        assert_eq!(job["spec"]["pullPolicy"]["timeoutSeconds"], 300);
    }

    #[test]
    fn decisions() {
        let (current, update) = revisions();
        let ignore = |why| PreDownloadPlan::Ignore { why };
        // (what, spec, rollingUpdate, update revision instead of the plain one, plan)
        type Case = (
            &'static str,
            Value,
            Value,
            Option<ControllerRevision>,
            PreDownloadPlan,
        );
        let cases: Vec<Case> = vec![
            (
                "rollout done: the jobs go",
                json!({}),
                json!({}),
                Some(current.clone()),
                PreDownloadPlan::DeleteJobs,
            ),
            (
                "already created",
                json!({}),
                json!({}),
                Some(labelled(update.clone(), IMAGE_PREDOWNLOAD_CREATED_KEY)),
                PreDownloadPlan::Nothing,
            ),
            (
                "already ignored",
                json!({}),
                json!({}),
                Some(labelled(update.clone(), IMAGE_PREDOWNLOAD_IGNORED_KEY)),
                PreDownloadPlan::Nothing,
            ),
            (
                "ReCreate",
                json!({}),
                json!({"podUpdatePolicy": "ReCreate"}),
                None,
                ignore("the update type is ReCreate"),
            ),
            (
                "3 replicas",
                json!({"replicas": 3}),
                json!({}),
                None,
                ignore("replicas are at most the minimum to pre-download for"),
            ),
            (
                "one batch",
                json!({}),
                json!({"partition": 0, "maxUnavailable": "100%"}),
                None,
                ignore("all pods update in one batch"),
            ),
            (
                "one batch by count",
                json!({}),
                json!({"partition": 0, "maxUnavailable": 5}),
                None,
                ignore("all pods update in one batch"),
            ),
            (
                "partition 0, batches of 4",
                json!({}),
                json!({"partition": 0, "maxUnavailable": 4}),
                None,
                PreDownloadPlan::Create(vec![]),
            ),
            (
                "waits for updated ready pods",
                json!({}),
                json!({"inPlaceUpdateStrategy": {"imagePreDownloadMinUpdatedReadyPods": 1}}),
                None,
                PreDownloadPlan::Nothing,
            ),
        ];
        for (what, spec, rolling, update_override, want) in cases {
            let cs = cloneset(spec, rolling);
            let update = update_override.unwrap_or_else(|| update.clone());
            let got = plan(&cs, &current, &update, PlanGates::default());
            match (&want, &got) {
                (PreDownloadPlan::Create(_), PreDownloadPlan::Create(jobs)) => {
                    assert_eq!(jobs.len(), 1, "{what}")
                }
                _ => assert_eq!(got, want, "{what}"),
            }
        }
    }

    #[test]
    fn min_updated_ready_pods_counts_only_pods_of_this_update_revision() {
        let (current, update) = revisions();
        let mut cs = cloneset(
            json!({}),
            json!({"inPlaceUpdateStrategy": {"imagePreDownloadMinUpdatedReadyPods": 1}}),
        );
        let status = cs.status.get_or_insert_with(Default::default);
        status.updated_ready_replicas = 1;
        status.update_revision = "demo-older".into();
        assert_eq!(
            plan(&cs, &current, &update, PlanGates::default()),
            PreDownloadPlan::Nothing
        );
        if let Some(s) = cs.status.as_mut() {
            s.update_revision = name_of(&update).into();
        }
        assert_eq!(
            created_jobs(&plan(&cs, &current, &update, PlanGates::default())).len(),
            1
        );
    }
}
