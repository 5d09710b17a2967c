//! Image pre-download before in-place updates, shared by the workload families that roll pods
//! out in place (CloneSet, Advanced StatefulSet, Advanced DaemonSet), as OpenKruise's
//! controllers do it (`createImagePullJobsForInPlaceUpdate`): when a rollout changes images,
//! one ImagePullJob per changed container pulls the new image on the nodes of the pods not
//! yet updated, so their in-place update does not wait on the pull.
//!
//! Each family decides *whether* (its own rules: replicas, partition, update type) into a
//! [`PreDownloadPlan`]; the jobs themselves ([`jobs`]) and the shell that writes them
//! ([`PreDownload::step`]) are the same for all. Families never depend on the imagepull
//! family: a job is written as JSON of `apps.kruise.io/v1beta1` ImagePullJob, and only once
//! discovery shows that kind served (a cluster without the imagepull family is unaffected).
//! Failures are logged and never fail the reconcile, as in OpenKruise.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};

use crate::events::{EventRecord, Recorder};
use kruise_core::api::intstr::{scaled_value_from_int_or_percent, value_from_int_or_percent};
use kruise_core::api::keys::{
    CONTROLLER_REVISION_HASH_KEY, CONTROLLER_REVISION_HASH_LABEL_ON_CR,
    IMAGE_PREDOWNLOAD_CREATED_KEY, IMAGE_PREDOWNLOAD_IGNORED_KEY,
    IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS_KEY, IMAGE_PREDOWNLOAD_PARALLELISM_KEY,
    IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_KEY,
};
use kruise_core::api::version::APPS_V1BETA1;
use kruise_core::inplace::{InPlaceGates, calculate_update_spec_for_revisions};

/// OpenKruise's `minimumReplicasToPreDownloadImage`: a CloneSet or Advanced StatefulSet of
/// at most this many replicas is not worth pre-downloading for.
pub const MINIMUM_REPLICAS: i32 = 3;
/// Pull timeout of a pre-download job whose workload sets none.
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
    /// The rollout is done: the workload's jobs are removed.
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

/// The workload a pre-download job is for: what OpenKruise's `CreateJobForWorkload` reads.
#[derive(Debug, Clone)]
pub struct JobOwner<'a> {
    /// The workload's kind in `apps.kruise.io/v1beta1` (the job's controller reference).
    pub kind: &'static str,
    /// Its name.
    pub name: &'a str,
    /// Its namespace (the job's).
    pub namespace: &'a str,
    /// Its uid.
    pub uid: &'a str,
    /// Its selector: the job's pod selector, narrowed to pods not yet updated.
    pub selector: Option<&'a LabelSelector>,
    /// Its pod template: labels, annotations and pull secrets of the job.
    pub template: &'a PodTemplateSpec,
    /// The job's parallelism (1 unless the workload sets it).
    pub parallelism: IntOrString,
    /// The job's pull timeout.
    pub timeout_seconds: i32,
}

impl<'a> JobOwner<'a> {
    /// An Advanced StatefulSet or DaemonSet: the job's parallelism and timeout from its
    /// annotations ([`settings_from_annotations`]).
    pub fn annotated(
        kind: &'static str,
        meta: &'a ObjectMeta,
        namespace: &'a str,
        uid: &'a str,
        selector: Option<&'a LabelSelector>,
        template: &'a PodTemplateSpec,
    ) -> Self {
        let (parallelism, timeout_seconds) = settings_from_annotations(meta.annotations.as_ref());
        JobOwner {
            kind,
            name: meta.name.as_deref().unwrap_or(""),
            namespace,
            uid,
            selector,
            template,
            parallelism,
            timeout_seconds,
        }
    }
}

/// The parallelism and timeout an Advanced StatefulSet or DaemonSet sets in its annotations
/// `apps.kruise.io/image-predownload-parallelism` / `-timeout-seconds` (CloneSet has fields);
/// a value that is not an integer is ignored, as OpenKruise ignores it.
pub fn settings_from_annotations(
    annotations: Option<&BTreeMap<String, String>>,
) -> (IntOrString, i32) {
    let get = |key: &str| annotations.and_then(|a| a.get(key));
    let parallelism = get(IMAGE_PREDOWNLOAD_PARALLELISM_KEY)
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let timeout = get(IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_KEY)
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_TIMEOUT_SECONDS);
    (IntOrString::Int(parallelism), timeout)
}

/// `apps.kruise.io/image-predownload-min-updated-ready-pods` of an Advanced StatefulSet or
/// DaemonSet: an integer or a percentage of `total` (rounded up); absent or malformed is 0.
pub fn min_updated_ready_from_annotation(
    annotations: Option<&BTreeMap<String, String>>,
    total: i32,
) -> i32 {
    let Some(raw) = annotations.and_then(|a| a.get(IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS_KEY))
    else {
        return 0;
    };
    let value = match raw.parse::<i32>() {
        Ok(n) => IntOrString::Int(n),
        Err(_) => IntOrString::String(raw.clone()),
    };
    scaled_value_from_int_or_percent(Some(&value), total, true).unwrap_or(0)
}

/// Whether the pre-download of `update` was already created or ignored.
pub fn decided(update: &ControllerRevision) -> bool {
    update.metadata.labels.as_ref().is_some_and(|l| {
        l.contains_key(IMAGE_PREDOWNLOAD_CREATED_KEY)
            || l.contains_key(IMAGE_PREDOWNLOAD_IGNORED_KEY)
    })
}

fn name_of(r: &ControllerRevision) -> &str {
    r.metadata.name.as_deref().unwrap_or("")
}

/// OpenKruise's checks of a rolling update's shape before a workload's pre-download: at
/// most [`MINIMUM_REPLICAS`] replicas, or every pod in one batch (no partition and
/// `maxUnavailable` covering them all; a value that is no valid count counts as 0, as Go's
/// error leaves it). `None` when the pre-download goes on.
pub fn ignored_for_rollout(
    replicas: i32,
    partition: i32,
    max_unavailable: &IntOrString,
) -> Option<PreDownloadPlan> {
    if replicas <= MINIMUM_REPLICAS {
        return Some(PreDownloadPlan::Ignore {
            why: "replicas are at most the minimum to pre-download for",
        });
    }
    let max_unavailable = value_from_int_or_percent(max_unavailable, replicas, false).unwrap_or(0);
    (partition == 0 && max_unavailable >= replicas).then_some(PreDownloadPlan::Ignore {
        why: "all pods update in one batch",
    })
}

/// `(name, image)` of the update revision's containers whose image differs from the one a
/// container of that name has in any of `olds` (or that no old revision has), in the
/// template's order.
pub fn changed_images(
    olds: &[&ControllerRevision],
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
    let olds: Vec<Vec<(String, String)>> = olds.iter().map(|r| containers(r)).collect();
    containers(update)
        .into_iter()
        .filter(|(name, image)| {
            let mut found = false;
            for old in &olds {
                if let Some((_, old_image)) = old.iter().find(|(n, _)| n == name) {
                    found = true;
                    if old_image != image {
                        return true;
                    }
                }
            }
            !found
        })
        .collect()
}

/// The last step of CloneSet's and Advanced StatefulSet's decision: the jobs for the images
/// `update` changes against `current`, or `Ignore` when pods cannot move between the two
/// revisions in place (a pull would serve no in-place update).
pub fn in_place_jobs(
    owner: &JobOwner<'_>,
    current: &ControllerRevision,
    update: &ControllerRevision,
    gates: InPlaceGates,
    grace_period_seconds: i32,
    recreate_on_vct_change: bool,
) -> PreDownloadPlan {
    let in_place = calculate_update_spec_for_revisions(
        Some(current),
        Some(update),
        gates,
        grace_period_seconds,
        recreate_on_vct_change,
    );
    if in_place.is_err() {
        return PreDownloadPlan::Ignore {
            why: "the revision cannot update in place",
        };
    }
    PreDownloadPlan::Create(jobs(owner, &[current], update))
}

/// The ImagePullJobs `<update revision>-<container>` for the images `update` changes
/// against `olds`, as OpenKruise's `CreateJobForWorkload` writes them.
pub fn jobs(
    owner: &JobOwner<'_>,
    olds: &[&ControllerRevision],
    update: &ControllerRevision,
) -> Vec<Value> {
    changed_images(olds, update)
        .into_iter()
        .map(|(container, image)| job(owner, update, &container, &image))
        .collect()
}

fn job(owner: &JobOwner<'_>, update: &ControllerRevision, container: &str, image: &str) -> Value {
    let template_meta = owner.template.metadata.as_ref();
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
    let mut selector = serde_json::to_value(owner.selector.cloned().unwrap_or_default())
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
    let pull_secrets: Vec<&str> = owner
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
        "parallelism": owner.parallelism,
        "pullPolicy": {"backoffLimit": 1, "timeoutSeconds": owner.timeout_seconds},
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
            "namespace": owner.namespace,
            "labels": labels,
            "ownerReferences": [{
                "apiVersion": APPS_V1BETA1, "kind": owner.kind, "name": owner.name,
                "uid": owner.uid, "controller": true, "blockOwnerDeletion": true,
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

/// The pre-download step's state across reconciles, one per family controller.
#[derive(Debug, Default)]
pub struct PreDownload {
    /// The family's gate (`PreDownloadImageForInPlaceUpdate` or
    /// `PreDownloadImageForDaemonSetUpdate`, with `KruiseDaemon`).
    enabled: bool,
    discovered: Mutex<Discovered>,
    /// Workloads (`namespace/name`) known to have no ImagePullJob left, so a finished
    /// rollout costs one list per workload and process, not one per reconcile.
    without_jobs: Mutex<HashSet<String>>,
}

fn job_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apps.kruise.io", "v1beta1", "ImagePullJob"),
        "imagepulljobs",
    )
}

impl PreDownload {
    /// The step, doing nothing unless `enabled` (the family's gate).
    pub fn new(enabled: bool) -> Self {
        Self {
            enabled,
            ..Self::default()
        }
    }

    /// Whether the family's gate is on (a family skips deciding when it is not).
    pub fn enabled(&self) -> bool {
        self.enabled
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

    /// Carries out `decision` for `owner`, whose update revision is `update`; errors are
    /// logged.
    pub async fn step(
        &self,
        client: &Client,
        owner: &JobOwner<'_>,
        update: &ControllerRevision,
        decision: PreDownloadPlan,
        recorder: &Recorder,
    ) {
        if !self.enabled {
            return;
        }
        let key = format!("{}/{}", owner.namespace, owner.name);
        let known_clean = self.without_jobs.lock().is_ok_and(|s| s.contains(&key));
        if matches!(decision, PreDownloadPlan::Nothing)
            || (decision == PreDownloadPlan::DeleteJobs && known_clean)
            || !self.served(client).await
        {
            return;
        }
        let jobs: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), owner.namespace, &job_resource());
        let result = match decision {
            PreDownloadPlan::Nothing => Ok(()),
            PreDownloadPlan::DeleteJobs => delete_jobs(&jobs, owner)
                .await
                .map(|()| self.set_without_jobs(&key, true)),
            PreDownloadPlan::Ignore { why } => {
                tracing::debug!(kind = owner.kind, workload = %key, why,
                    "no image pre-download for this revision");
                label_revision(
                    client,
                    owner.namespace,
                    update,
                    IMAGE_PREDOWNLOAD_IGNORED_KEY,
                )
                .await
            }
            PreDownloadPlan::Create(new_jobs) => {
                self.set_without_jobs(&key, false);
                create_jobs(&jobs, new_jobs, recorder).await;
                label_revision(
                    client,
                    owner.namespace,
                    update,
                    IMAGE_PREDOWNLOAD_CREATED_KEY,
                )
                .await
            }
        };
        if let Err(e) = result {
            tracing::warn!(kind = owner.kind, workload = %key, error = %e,
                "image pre-download step failed");
        }
    }
}

async fn create_jobs(jobs: &Api<DynamicObject>, new_jobs: Vec<Value>, recorder: &Recorder) {
    for job in new_jobs {
        let field = |pointer: &str| {
            job.pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let (name, image) = (field("/metadata/name"), field("/spec/image"));
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

/// Deletes the ImagePullJobs `owner` controls.
async fn delete_jobs(jobs: &Api<DynamicObject>, owner: &JobOwner<'_>) -> Result<(), kube::Error> {
    // Every object a workload owns carries its template's labels, so its selector's
    // labels narrow the list.
    let selector = owner
        .selector
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
            .any(|o| o.controller == Some(true) && o.uid == owner.uid);
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
    use kruise_core::revision::{NewRevision, new_controller_revision, template_revision_data};
    use pretty_assertions::assert_eq;

    #[test]
    fn a_small_or_one_batch_rollout_is_not_pre_downloaded() {
        let ignored = |replicas, partition, max: IntOrString| match ignored_for_rollout(
            replicas, partition, &max,
        ) {
            Some(PreDownloadPlan::Ignore { why }) => Some(why),
            _ => None,
        };
        assert_eq!(
            ignored(3, 0, IntOrString::Int(1)),
            Some("replicas are at most the minimum to pre-download for")
        );
        assert_eq!(
            ignored(4, 0, IntOrString::String("100%".into())),
            Some("all pods update in one batch")
        );
        assert_eq!(ignored(4, 1, IntOrString::String("100%".into())), None);
        assert_eq!(ignored(4, 0, IntOrString::Int(1)), None);
        // "1" is no percentage: Go's error leaves 0, so not one batch.
        assert_eq!(ignored(4, 0, IntOrString::String("1".into())), None);
    }

    fn revision(app: &str, sidecar: &str, number: i64) -> ControllerRevision {
        let template = json!({"metadata": {"labels": {"app": "demo"}},
            "spec": {"containers": [{"name": "app", "image": app},
                                    {"name": "sidecar", "image": sidecar}]}});
        new_controller_revision(&NewRevision {
            parent_name: "demo".into(),
            namespace: Some("ns".into()),
            data: template_revision_data(&kruise_compat::pod_defaults::go_encoded_pod_template(
                &template,
            )),
            revision: number,
            collision_count: Some(0),
            ..Default::default()
        })
    }

    #[test]
    fn a_container_changed_against_any_old_revision_counts() {
        let update = revision("app:v3", "side:v2", 3);
        let (a, b) = (
            revision("app:v3", "side:v1", 1),
            revision("app:v2", "side:v2", 2),
        );
        // Against one old revision: only what differs from it.
        assert_eq!(
            changed_images(&[&a], &update),
            [("sidecar".to_string(), "side:v2".to_string())]
        );
        // Against several (a DaemonSet's old revisions): what differs from any of them.
        assert_eq!(
            changed_images(&[&a, &b], &update),
            [
                ("app".to_string(), "app:v3".to_string()),
                ("sidecar".to_string(), "side:v2".to_string())
            ]
        );
        // Nothing old: every container is new.
        assert_eq!(changed_images(&[], &update).len(), 2);
    }

    #[test]
    fn annotation_settings_as_openkruise_reads_them() {
        let annotations = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            settings_from_annotations(None),
            (IntOrString::Int(1), DEFAULT_TIMEOUT_SECONDS)
        );
        let set = annotations(&[
            (IMAGE_PREDOWNLOAD_PARALLELISM_KEY, "5"),
            (IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_KEY, "120"),
        ]);
        assert_eq!(
            settings_from_annotations(Some(&set)),
            (IntOrString::Int(5), 120)
        );
        // Not integers: ignored (a percentage parallelism is not read from the annotation).
        let bad = annotations(&[
            (IMAGE_PREDOWNLOAD_PARALLELISM_KEY, "50%"),
            (IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_KEY, "soon"),
        ]);
        assert_eq!(
            settings_from_annotations(Some(&bad)),
            (IntOrString::Int(1), DEFAULT_TIMEOUT_SECONDS)
        );
        let min = |v: &str, total| {
            min_updated_ready_from_annotation(
                Some(&annotations(&[(
                    IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS_KEY,
                    v,
                )])),
                total,
            )
        };
        assert_eq!(min("2", 10), 2);
        assert_eq!(min("25%", 10), 3, "percentages round up");
        assert_eq!(min("many", 10), 0);
        assert_eq!(min_updated_ready_from_annotation(None, 10), 0);
    }

    #[test]
    fn decided_once_labelled_created_or_ignored() {
        let mut update = revision("app:v2", "side:v1", 2);
        assert!(!decided(&update));
        for key in [IMAGE_PREDOWNLOAD_CREATED_KEY, IMAGE_PREDOWNLOAD_IGNORED_KEY] {
            let mut labelled = update.clone();
            labelled
                .metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert(key.into(), "true".into());
            assert!(decided(&labelled), "{key}");
        }
        update.metadata.labels = None;
        assert!(!decided(&update));
    }
}
