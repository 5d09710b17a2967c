//! Image pre-download before in-place updates, as OpenKruise's Advanced StatefulSet decides
//! it (`doPreDownload` / `createImagePullJobsForInPlaceUpdate`, gate
//! `PreDownloadImageForInPlaceUpdate`). Unlike CloneSet, a set's settings are annotations
//! (`apps.kruise.io/image-predownload-parallelism`, `-timeout-seconds`,
//! `-min-updated-ready-pods`) and its partition is an ordinal count, never a percentage.
//!
//! [`plan`] is the decision, pure; the jobs and the shell that writes them are
//! `kruise_runtime::predownload`.

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_core::inplace::InPlaceGates;
use kruise_runtime::predownload::{
    JobOwner, PreDownloadPlan, decided, ignored_for_rollout, in_place_jobs,
    min_updated_ready_from_annotation,
};
use kube::ResourceExt as _;

use crate::api::v1beta1::StatefulSet;
use crate::api::{KIND, PodUpdatePolicy, UpdateStrategyType};
use crate::plan::PlanGates;

/// The job owner `set` is: parallelism and timeout from its annotations.
pub fn job_owner<'a>(set: &'a StatefulSet, namespace: &'a str, uid: &'a str) -> JobOwner<'a> {
    JobOwner::annotated(
        KIND,
        &set.metadata,
        namespace,
        uid,
        set.spec.selector.as_ref(),
        &set.spec.template,
    )
}

fn name_of(r: &ControllerRevision) -> &str {
    r.metadata.name.as_deref().unwrap_or("")
}

/// Decides the pre-download step of a (defaulted) set between its current and update
/// revisions.
pub fn plan(
    set: &StatefulSet,
    current: &ControllerRevision,
    update: &ControllerRevision,
    gates: PlanGates,
) -> PreDownloadPlan {
    let update_name = name_of(update);
    if name_of(current) == update_name {
        return PreDownloadPlan::DeleteJobs;
    }
    let replicas = set.spec.replicas.unwrap_or(1);
    let min_ready = min_updated_ready_from_annotation(set.metadata.annotations.as_ref(), replicas);
    // Pods ready at a revision that is no longer the update revision do not count.
    let updated_ready = match set.status.as_ref() {
        Some(s) if s.update_revision == update_name => s.updated_ready_replicas,
        _ => 0,
    };
    if updated_ready < min_ready || decided(update) {
        return PreDownloadPlan::Nothing;
    }
    let strategy = &set.spec.update_strategy;
    let rolling = match (&strategy.type_, &strategy.rolling_update) {
        (Some(UpdateStrategyType::OnDelete), _) | (_, None) => None,
        (_, Some(rolling)) => Some(rolling),
    };
    let Some(rolling) =
        rolling.filter(|r| !matches!(r.pod_update_policy, None | Some(PodUpdatePolicy::ReCreate)))
    else {
        return PreDownloadPlan::Ignore {
            why: "the update type is OnDelete or ReCreate",
        };
    };
    // OpenKruise's default is the string "1", which is no percentage: it counts as 0.
    let default_max_unavailable = IntOrString::String("1".into());
    let max_unavailable = rolling
        .max_unavailable
        .as_ref()
        .unwrap_or(&default_max_unavailable);
    if let Some(ignored) =
        ignored_for_rollout(replicas, rolling.partition.unwrap_or(0), max_unavailable)
    {
        return ignored;
    }
    let in_place_gates = InPlaceGates {
        env_from_metadata: gates.env_from_metadata,
        vertical_scaling: gates.vertical_scaling,
    };
    let grace = rolling
        .in_place_update_strategy
        .as_ref()
        .map_or(0, |s| s.grace_period_seconds);
    let (namespace, uid) = (
        set.namespace().unwrap_or_default(),
        set.uid().unwrap_or_default(),
    );
    in_place_jobs(
        &job_owner(set, &namespace, &uid),
        current,
        update,
        in_place_gates,
        grace,
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kruise_core::api::keys::{
        CONTROLLER_REVISION_HASH_LABEL_ON_CR, IMAGE_PREDOWNLOAD_CREATED_KEY,
    };
    use kruise_core::revision::{NewRevision, new_controller_revision, template_revision_data};
    use pretty_assertions::assert_eq;
    use serde_json::{Value, json};

    fn template(app: &str) -> Value {
        json!({"metadata": {"labels": {"app": "db"}},
               "spec": {"containers": [{"name": "app", "image": app}],
                        "readinessGates": [{"conditionType": "InPlaceUpdateReady"}]}})
    }

    /// A set of 5 replicas updated in place with partition 2, with `annotations`, `spec` and
    /// `rolling` (its `rollingUpdate`) merged in.
    fn set(annotations: Value, spec: Value, rolling: Value) -> StatefulSet {
        let mut rolling_update = json!({"podUpdatePolicy": "InPlaceIfPossible", "partition": 2});
        rolling_update
            .as_object_mut()
            .unwrap()
            .extend(rolling.as_object().unwrap().clone());
        let mut base = json!({
            "replicas": 5,
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": template("app:v2"),
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": rolling_update},
        });
        base.as_object_mut()
            .unwrap()
            .extend(spec.as_object().unwrap().clone());
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": "ns", "uid": "set-uid", "annotations": annotations},
            "spec": base,
        }))
        .unwrap()
    }

    fn revision(app: &str, number: i64) -> ControllerRevision {
        new_controller_revision(&NewRevision {
            parent_name: "db".into(),
            namespace: Some("ns".into()),
            data: template_revision_data(&kruise_compat::pod_defaults::go_encoded_pod_template(
                &template(app),
            )),
            revision: number,
            collision_count: Some(0),
            ..Default::default()
        })
    }

    #[test]
    fn one_job_per_changed_image_with_the_annotations_settings() {
        let (current, update) = (revision("app:v1", 1), revision("app:v2", 2));
        let s = set(
            json!({"apps.kruise.io/image-predownload-parallelism": "4",
                   "apps.kruise.io/image-predownload-timeout-seconds": "60"}),
            json!({}),
            json!({}),
        );
        let PreDownloadPlan::Create(created) = plan(&s, &current, &update, PlanGates::default())
        else {
            panic!("expected jobs");
        };
        let name = name_of(&update);
        let hash = &update.metadata.labels.as_ref().unwrap()[CONTROLLER_REVISION_HASH_LABEL_ON_CR];
        assert_eq!(created.len(), 1);
        let job = &created[0];
        assert_eq!(job["metadata"]["name"], format!("{name}-app"));
        assert_eq!(
            job["metadata"]["ownerReferences"][0],
            json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet", "name": "db",
                   "uid": "set-uid", "controller": true, "blockOwnerDeletion": true})
        );
        assert_eq!(job["spec"]["image"], "app:v2");
        assert_eq!(job["spec"]["parallelism"], 4);
        assert_eq!(job["spec"]["pullPolicy"]["timeoutSeconds"], 60);
        assert_eq!(
            job["spec"]["podSelector"]["matchExpressions"][0]["values"],
            json!([name, hash])
        );
    }

    #[test]
    fn decisions() {
        let (current, update) = (revision("app:v1", 1), revision("app:v2", 2));
        let ignore = |why| PreDownloadPlan::Ignore { why };
        let mut created = update.clone();
        created
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(IMAGE_PREDOWNLOAD_CREATED_KEY.into(), "true".into());
        let recreate_template = {
            let mut t = template("app:v2");
            t["spec"]["containers"][0]["command"] = json!(["run"]);
            t
        };
        let cannot_in_place = new_controller_revision(&NewRevision {
            parent_name: "db".into(),
            namespace: Some("ns".into()),
            data: template_revision_data(&kruise_compat::pod_defaults::go_encoded_pod_template(
                &recreate_template,
            )),
            revision: 3,
            collision_count: Some(0),
            ..Default::default()
        });
        // (what, annotations, spec, rollingUpdate, update revision, plan)
        type Case = (
            &'static str,
            Value,
            Value,
            Value,
            ControllerRevision,
            PreDownloadPlan,
        );
        let cases: Vec<Case> = vec![
            (
                "rollout done",
                json!({}),
                json!({}),
                json!({}),
                current.clone(),
                PreDownloadPlan::DeleteJobs,
            ),
            (
                "already created",
                json!({}),
                json!({}),
                json!({}),
                created,
                PreDownloadPlan::Nothing,
            ),
            (
                "OnDelete",
                json!({}),
                json!({"updateStrategy": {"type": "OnDelete"}}),
                json!({}),
                update.clone(),
                ignore("the update type is OnDelete or ReCreate"),
            ),
            (
                "ReCreate",
                json!({}),
                json!({}),
                json!({"podUpdatePolicy": "ReCreate"}),
                update.clone(),
                ignore("the update type is OnDelete or ReCreate"),
            ),
            (
                "3 replicas",
                json!({}),
                json!({"replicas": 3}),
                json!({}),
                update.clone(),
                ignore("replicas are at most the minimum to pre-download for"),
            ),
            (
                "one batch",
                json!({}),
                json!({"podManagementPolicy": "Parallel"}),
                json!({"partition": 0, "maxUnavailable": "100%"}),
                update.clone(),
                ignore("all pods update in one batch"),
            ),
            (
                "partition 0, one at a time",
                json!({}),
                json!({}),
                json!({"partition": 0}),
                update.clone(),
                PreDownloadPlan::Create(vec![]),
            ),
            (
                "not in place",
                json!({}),
                json!({}),
                json!({}),
                cannot_in_place,
                ignore("the revision cannot update in place"),
            ),
            (
                "waits for updated ready pods (40% of 5 = 2)",
                json!({"apps.kruise.io/image-predownload-min-updated-ready-pods": "40%"}),
                json!({}),
                json!({}),
                update.clone(),
                PreDownloadPlan::Nothing,
            ),
        ];
        for (what, annotations, spec, rolling, update, want) in cases {
            let got = plan(
                &set(annotations, spec, rolling),
                &current,
                &update,
                PlanGates::default(),
            );
            match (&want, &got) {
                (PreDownloadPlan::Create(_), PreDownloadPlan::Create(jobs)) => {
                    assert_eq!(jobs.len(), 1, "{what}")
                }
                _ => assert_eq!(got, want, "{what}"),
            }
        }
    }

    #[test]
    fn min_updated_ready_pods_counts_pods_of_this_update_revision_only() {
        let (current, update) = (revision("app:v1", 1), revision("app:v2", 2));
        let mut s = set(
            json!({"apps.kruise.io/image-predownload-min-updated-ready-pods": "1"}),
            json!({}),
            json!({}),
        );
        let status = s.status.get_or_insert_with(Default::default);
        status.updated_ready_replicas = 1;
        status.update_revision = "db-older".into();
        assert_eq!(
            plan(&s, &current, &update, PlanGates::default()),
            PreDownloadPlan::Nothing
        );
        if let Some(st) = s.status.as_mut() {
            st.update_revision = name_of(&update).into();
        }
        assert!(matches!(
            plan(&s, &current, &update, PlanGates::default()),
            PreDownloadPlan::Create(jobs) if jobs.len() == 1
        ));
    }
}
