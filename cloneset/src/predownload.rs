//! Image pre-download before in-place updates, as OpenKruise's CloneSet controller does it
//! (`createImagePullJobsForInPlaceUpdate`, gate `PreDownloadImageForInPlaceUpdate`): when a
//! rollout changes images, one ImagePullJob per changed container pulls the new image on
//! the nodes of the pods not yet updated, so their in-place update does not wait on the pull.
//!
//! The decision is [`plan`], pure; `PreDownload::step` is the shell. Families never
//! depend on each other: the job is written as JSON of `apps.kruise.io/v1beta1`
//! ImagePullJob, and only once discovery shows that kind served (a cluster without the
//! imagepull family is unaffected). Failures are logged and never fail the reconcile, as
//! in OpenKruise.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_common::api::intstr::{scaled_value_from_int_or_percent, value_from_int_or_percent};
use kruise_common::api::keys::{
    CONTROLLER_REVISION_HASH_KEY, CONTROLLER_REVISION_HASH_LABEL_ON_CR,
    IMAGE_PREDOWNLOAD_CREATED_KEY, IMAGE_PREDOWNLOAD_IGNORED_KEY,
};
use kruise_common::api::version::APPS_V1BETA1;
use kruise_common::inplace::{InPlaceGates, calculate_update_spec_for_revisions};
use kruise_common::runtime::events::{EventRecord, Recorder};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};

use crate::api::v1beta1::{CloneSet, CloneSetPodUpdatePolicy};
use crate::api::{DEFAULT_MAX_UNAVAILABLE, KIND};
use crate::plan::PlanGates;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// OpenKruise's `minimumReplicasToPreDownloadImage`: a CloneSet of at most this many
/// replicas is not worth pre-downloading for.
pub const MINIMUM_REPLICAS: i32 = 3;
/// Pull timeout of a pre-download job without `imagePreDownloadTimeoutSeconds`.
pub const DEFAULT_TIMEOUT_SECONDS: i32 = 300;
/// A pre-download job is deleted this long after it completed.
pub const JOB_TTL_SECONDS: i32 = 600;
/// Event reason: a pre-download job was created.
pub const REASON_CREATED: &str = "CreatedImagePullJob";
/// Event reason (Normal, as OpenKruise records it): creating a pre-download job failed.
pub const REASON_FAILED_CREATE: &str = "FailedCreateImagePullJob";
/// How long a "not installed" discovery answer is trusted before asking again.
const DISCOVERY_RECHECK: Duration = Duration::from_secs(30);

/// What the pre-download step does in one reconcile.
#[derive(Debug, Clone, PartialEq)]
pub enum PreDownloadPlan {
    /// Nothing now: no rollout, already decided for this revision, or too few updated
    /// pods ready yet.
    Nothing,
    /// The rollout is done (current = update revision): the CloneSet's jobs are removed.
    DeleteJobs,
    /// The update revision is labelled `apps.kruise.io/image-predownload-ignored`.
    Ignore {
        /// Why (logged).
        why: &'static str,
    },
    /// These ImagePullJobs are created, then the update revision is labelled
    /// `apps.kruise.io/pre-predownload-created`.
    Create(Vec<Value>),
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
    if updated_ready < min_ready {
        return PreDownloadPlan::Nothing;
    }
    let labels = update.metadata.labels.as_ref();
    if labels.is_some_and(|l| {
        l.contains_key(IMAGE_PREDOWNLOAD_CREATED_KEY)
            || l.contains_key(IMAGE_PREDOWNLOAD_IGNORED_KEY)
    }) {
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
    if replicas <= MINIMUM_REPLICAS {
        return PreDownloadPlan::Ignore {
            why: "replicas are at most the minimum to pre-download for",
        };
    }
    let partition = kruise_common::api::intstr::calculate_partition_replicas(
        rolling.partition.as_ref(),
        Some(replicas),
    )
    .unwrap_or(0);
    let max_unavailable = value_from_int_or_percent(
        rolling
            .max_unavailable
            .as_ref()
            .unwrap_or(&IntOrString::String(DEFAULT_MAX_UNAVAILABLE.into())),
        replicas,
        false,
    )
    .unwrap_or(0);
    if partition == 0 && max_unavailable >= replicas {
        return PreDownloadPlan::Ignore {
            why: "all pods update in one batch",
        };
    }
    let in_place_gates = InPlaceGates {
        env_from_metadata: gates.env_from_metadata,
        vertical_scaling: gates.vertical_scaling,
    };
    let grace = in_place.map_or(0, |s| s.grace_period_seconds);
    let recreate_on_vct = gates.recreate_on_vct_change
        && rolling.pod_update_policy != Some(CloneSetPodUpdatePolicy::InPlaceOnly);
    if calculate_update_spec_for_revisions(
        Some(current),
        Some(update),
        in_place_gates,
        grace,
        recreate_on_vct,
    )
    .is_err()
    {
        return PreDownloadPlan::Ignore {
            why: "the revision cannot update in place",
        };
    }
    PreDownloadPlan::Create(
        changed_images(current, update)
            .into_iter()
            .map(|(container, image)| job(cs, update, &container, &image))
            .collect(),
    )
}

fn name_of(r: &ControllerRevision) -> &str {
    r.metadata.name.as_deref().unwrap_or("")
}

/// `(name, image)` of the update revision's containers whose image differs from the
/// current revision's (or that it lacks), in the template's order.
fn changed_images(
    current: &ControllerRevision,
    update: &ControllerRevision,
) -> Vec<(String, String)> {
    let containers = |r: &ControllerRevision| -> Vec<(String, String)> {
        r.data
            .as_ref()
            .and_then(|d| d.0.pointer("/spec/template/spec/containers"))
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .map(|c| {
                        let field =
                            |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                        (field("name"), field("image"))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let old = containers(current);
    containers(update)
        .into_iter()
        .filter(|(name, image)| !old.iter().any(|(n, i)| n == name && i == image))
        .collect()
}

/// The ImagePullJob `<update revision>-<container>` for `image`, as OpenKruise's
/// `CreateJobForWorkloadWithStrategy` writes it.
fn job(cs: &CloneSet, update: &ControllerRevision, container: &str, image: &str) -> Value {
    let template_meta = cs.spec.template.metadata.as_ref();
    let hash = update
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(CONTROLLER_REVISION_HASH_LABEL_ON_CR))
        .cloned()
        .unwrap_or_default();
    let mut labels: BTreeMap<String, String> = template_meta
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(CONTROLLER_REVISION_HASH_LABEL_ON_CR.into(), hash.clone());
    let annotations = template_meta
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    let mut selector = serde_json::to_value(cs.spec.selector.clone().unwrap_or_default())
        .unwrap_or_else(|_| json!({}));
    let not_updated = json!({"key": CONTROLLER_REVISION_HASH_KEY, "operator": "NotIn",
                             "values": [name_of(update), hash]});
    match selector
        .get_mut("matchExpressions")
        .and_then(Value::as_array_mut)
    {
        Some(exprs) => exprs.push(not_updated),
        None => selector["matchExpressions"] = json!([not_updated]),
    }
    let in_place = cs
        .spec
        .update_strategy
        .rolling_update
        .as_ref()
        .and_then(|r| r.in_place_update_strategy.as_ref());
    let parallelism = in_place
        .and_then(|s| s.image_pre_download_parallelism.clone())
        .unwrap_or(IntOrString::Int(1));
    let timeout = in_place
        .and_then(|s| s.image_pre_download_timeout_seconds)
        .unwrap_or(DEFAULT_TIMEOUT_SECONDS);
    let pull_secrets: Vec<&str> = cs
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.image_pull_secrets.as_ref())
        .map(|s| s.iter().map(|r| r.name.as_str()).collect())
        .unwrap_or_default();
    let mut sandbox = json!({});
    if !annotations.is_empty() {
        sandbox["annotations"] = json!(annotations);
    }
    if !labels.is_empty() {
        sandbox["labels"] = json!(labels);
    }
    let mut spec = json!({
        "image": image,
        "podSelector": selector,
        "parallelism": parallelism,
        "pullPolicy": {"backoffLimit": 1, "timeoutSeconds": timeout},
        "completionPolicy": {"type": "Always", "ttlSecondsAfterFinished": JOB_TTL_SECONDS},
        "sandboxConfig": sandbox,
    });
    if !pull_secrets.is_empty() {
        spec["pullSecrets"] = json!(pull_secrets);
    }
    json!({
        "apiVersion": APPS_V1BETA1,
        "kind": "ImagePullJob",
        "metadata": {
            "name": format!("{}-{container}", name_of(update)),
            "namespace": cs.namespace().unwrap_or_default(),
            "labels": labels,
            "ownerReferences": [{
                "apiVersion": APPS_V1BETA1, "kind": KIND, "name": cs.name_any(),
                "uid": cs.uid().unwrap_or_default(), "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": spec,
    })
}

/// Whether the ImagePullJob kind is served, asked again while it is not.
#[derive(Debug, Default)]
enum Discovered {
    #[default]
    Unknown,
    Absent(Instant),
    Served,
}

/// The pre-download step's state across reconciles.
#[derive(Debug, Default)]
pub(crate) struct PreDownload {
    /// The gate `PreDownloadImageForInPlaceUpdate` (with `KruiseDaemon`).
    enabled: bool,
    discovered: Mutex<Discovered>,
    /// CloneSets (`namespace/name`) known to have no ImagePullJob left, so a finished
    /// rollout costs one list per CloneSet and process, not one per reconcile.
    without_jobs: Mutex<HashSet<String>>,
}

fn job_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apps.kruise.io", "v1beta1", "ImagePullJob"),
        "imagepulljobs",
    )
}

impl PreDownload {
    pub(crate) fn new(enabled: bool) -> Self {
        Self {
            enabled,
            ..Self::default()
        }
    }

    /// Whether `apps.kruise.io/v1beta1` serves ImagePullJobs (discovery, cached).
    async fn served(&self, client: &Client) -> bool {
        if let Ok(d) = self.discovered.lock() {
            match *d {
                Discovered::Served => return true,
                Discovered::Absent(at) if at.elapsed() < DISCOVERY_RECHECK => return false,
                _ => {}
            }
        }
        let served = match client.list_api_group_resources(APPS_V1BETA1).await {
            Ok(list) => list.resources.iter().any(|r| r.name == "imagepulljobs"),
            Err(e) => {
                tracing::debug!(error = %e, "discovering ImagePullJob");
                false
            }
        };
        if let Ok(mut d) = self.discovered.lock() {
            *d = if served {
                Discovered::Served
            } else {
                Discovered::Absent(Instant::now())
            };
        }
        served
    }

    fn set_without_jobs(&self, key: &str, without: bool) {
        if let Ok(mut set) = self.without_jobs.lock() {
            if without {
                set.insert(key.to_string());
            } else {
                set.remove(key);
            }
        }
    }

    /// Runs the step for `cs` (defaulted) between its revisions; errors are logged.
    pub(crate) async fn step(
        &self,
        client: &Client,
        cs: &CloneSet,
        current: &ControllerRevision,
        update: &ControllerRevision,
        gates: PlanGates,
        recorder: &Recorder,
    ) {
        if !self.enabled {
            return;
        }
        let key = format!("{}/{}", cs.namespace().unwrap_or_default(), cs.name_any());
        let decision = plan(cs, current, update, gates);
        let known_clean = self.without_jobs.lock().is_ok_and(|s| s.contains(&key));
        if matches!(decision, PreDownloadPlan::Nothing)
            || (decision == PreDownloadPlan::DeleteJobs && known_clean)
            || !self.served(client).await
        {
            return;
        }
        let ns = cs.namespace().unwrap_or_default();
        let jobs: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &job_resource());
        let result = match decision {
            PreDownloadPlan::Nothing => Ok(()),
            PreDownloadPlan::DeleteJobs => match delete_jobs(&jobs, cs).await {
                Ok(()) => {
                    self.set_without_jobs(&key, true);
                    Ok(())
                }
                Err(e) => Err(e),
            },
            PreDownloadPlan::Ignore { why } => {
                tracing::debug!(cloneset = %key, why, "no image pre-download for this revision");
                label_revision(client, &ns, update, IMAGE_PREDOWNLOAD_IGNORED_KEY).await
            }
            PreDownloadPlan::Create(new_jobs) => {
                self.set_without_jobs(&key, false);
                create_jobs(&jobs, new_jobs, recorder).await;
                label_revision(client, &ns, update, IMAGE_PREDOWNLOAD_CREATED_KEY).await
            }
        };
        if let Err(e) = result {
            tracing::warn!(cloneset = %key, error = %e, "image pre-download step failed");
        }
    }
}

async fn create_jobs(jobs: &Api<DynamicObject>, new_jobs: Vec<Value>, recorder: &Recorder) {
    for job in new_jobs {
        let name = job
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let image = job
            .pointer("/spec/image")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let object: DynamicObject = match serde_json::from_value(job) {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(job = %name, error = %e, "encoding an ImagePullJob");
                continue;
            }
        };
        match jobs.create(&PostParams::default(), &object).await {
            Ok(_) => recorder.record(EventRecord::normal(
                REASON_CREATED,
                format!("created ImagePullJob {name} for image: {image}"),
            )),
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => recorder.record(EventRecord::normal(
                REASON_FAILED_CREATE,
                format!("failed to create ImagePullJob {name}: {e}"),
            )),
        }
    }
}

/// Deletes the ImagePullJobs `cs` controls.
async fn delete_jobs(jobs: &Api<DynamicObject>, cs: &CloneSet) -> Result<(), kube::Error> {
    let uid = cs.uid().unwrap_or_default();
    // Every object a CloneSet owns carries its template's labels, so its selector's
    // labels narrow the list.
    let selector = cs
        .spec
        .selector
        .as_ref()
        .and_then(|s| s.match_labels.as_ref())
        .map(|l| {
            l.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    let listed = jobs.list(&ListParams::default().labels(&selector)).await?;
    for job in listed {
        let controlled = job
            .owner_references()
            .iter()
            .any(|o| o.controller == Some(true) && o.uid == uid);
        if controlled {
            match jobs.delete(&job.name_any(), &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// Labels the revision `key: "true"`.
async fn label_revision(
    client: &Client,
    namespace: &str,
    revision: &ControllerRevision,
    key: &str,
) -> Result<(), kube::Error> {
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), namespace);
    let patch = json!({"metadata": {"labels": {key: "true"}}});
    api.patch(
        name_of(revision),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::defaults::default_v1beta1;
    use kruise_common::revision::{NewRevision, new_controller_revision, template_revision_data};
    use pretty_assertions::assert_eq;

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
            data: template_revision_data(
                &kruise_common::api::pod_defaults::go_encoded_pod_template(template),
            ),
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

    fn jobs(p: &PreDownloadPlan) -> Vec<Value> {
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
        let created = jobs(&plan(&cs, &current, &update, PlanGates::default()));
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
            changed_images(&current, &update),
            [
                ("sidecar".to_string(), "side:v2".to_string()),
                ("extra".to_string(), "extra:v1".to_string())
            ]
        );
        let (current, update) = revisions();
        let job = &jobs(&plan(
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
            jobs(&plan(&cs, &current, &update, PlanGates::default())).len(),
            1
        );
    }
}
