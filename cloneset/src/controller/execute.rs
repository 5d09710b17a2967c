//! The execute step: each planned [`Action`] as its API writes, run by the shared executor
//! (`kruise_runtime::execute`: slow-start creations, per-pod write groups, bounded
//! concurrency, first-error stop). Nothing is decided here and no clock is read: statuses
//! and timestamps come in the plan.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_core::api::keys::SPECIFIED_DELETE_KEY;
use kruise_core::pods::{CachedPod, PodView as _};
use kruise_runtime::errors::{ShellError, WriteError};
use kruise_runtime::events::{EventRecord, pod_reference};
use kruise_runtime::execute::{Lane, Outcomes, Scheduled, WRITE_CONCURRENCY, execute};
use kruise_runtime::is_not_found;
use kruise_runtime::revisions::delete_revision;
use kruise_runtime::scale_writes::ScaleWrites;
use kruise_runtime::writes::{Writer, Written};
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::{Error, Shared};
use crate::api::v1beta1::CloneSet;
use crate::plan::{Action, Plan};

impl Scheduled for Action {
    fn lane(&self) -> Lane<'_> {
        match self {
            Action::CreatePod { .. } => Lane::SlowStart,
            other => other.pod_name().map_or(Lane::Alone, Lane::Group),
        }
    }
}

/// Runs the plan's actions; returns the events of what ran (successes and failures, in
/// order) and the first error.
pub(super) async fn execute_plan(
    shared: &Shared,
    cs: &CloneSet,
    key: &str,
    pods: Vec<Arc<CachedPod>>,
    plan: &Plan,
    probe_patches: bool,
) -> (Vec<EventRecord>, Result<(), Error>) {
    let namespace = cs.namespace().unwrap_or_default();
    // Keep only the pods the plan acts on: the writes take a while, and a snapshot of all
    // pods would pin their old versions while the cache moves on (twice the cache at 10,000).
    let acted: BTreeSet<&str> = plan.actions.iter().filter_map(Action::pod_name).collect();
    let pods: Vec<Arc<CachedPod>> = pods
        .into_iter()
        .filter(|p| acted.contains(p.name()))
        .collect();
    let exec = Exec {
        shared,
        cs,
        key,
        namespace: &namespace,
        pods: pods.iter().map(|p| (p.name(), &**p)).collect(),
        probe_patches,
    };
    let outcomes = execute(&plan.actions, WRITE_CONCURRENCY, |action| {
        tracing::debug!(cloneset = key, ?action, "performing");
        exec.perform(action)
    })
    .await;
    events_and_first_error(outcomes, &namespace)
}

/// OpenKruise's events for what ran, and the first error.
fn events_and_first_error(
    outcomes: Outcomes<'_, Action, Error>,
    namespace: &str,
) -> (Vec<EventRecord>, Result<(), Error>) {
    let mut events = Vec::new();
    let mut first_error = None;
    for (action, result) in outcomes {
        let related = action.pod_name().map(|n| pod_reference(Some(namespace), n));
        match result {
            Ok(()) => events.extend(action.success_event().map(|e| e.related_to(related))),
            Err(e) => {
                let (reason, message) = match action {
                    Action::CreatePod { .. } => {
                        ("FailedCreate", format!("failed to create pod: {e}"))
                    }
                    Action::DeletePod { .. } => ("FailedDelete", e.to_string()),
                    // OpenKruise's reason for a failed in-place update.
                    Action::UpdateInPlace { .. } => (
                        "FailedUpdatePodInPlace",
                        format!("failed to update pod in-place: {e}"),
                    ),
                    _ => ("FailedUpdate", e.to_string()),
                };
                events.push(EventRecord::warning(reason, message).related_to(related));
                first_error.get_or_insert(e);
            }
        }
    }
    (events, first_error.map_or(Ok(()), Err))
}

/// What executing one action needs.
struct Exec<'a> {
    shared: &'a Shared,
    cs: &'a CloneSet,
    key: &'a str,
    namespace: &'a str,
    /// The cached pods by name.
    pods: HashMap<&'a str, &'a CachedPod>,
    /// Whether an in-place patch is tried as a dry run before the pod is made unready: set
    /// while this CloneSet's pod writes are being refused as invalid, so a retry that is
    /// refused again costs the pod no readiness flip.
    probe_patches: bool,
}

impl Exec<'_> {
    fn pod_api(&self) -> Writer<Pod> {
        Writer::namespaced(self.shared.client.clone(), self.namespace)
    }

    fn pvc_api(&self) -> Writer<PersistentVolumeClaim> {
        Writer::namespaced(self.shared.client.clone(), self.namespace)
    }

    fn scale_writes(&self) -> ScaleWrites<'_> {
        ScaleWrites::new(
            self.shared.client.clone(),
            self.namespace,
            &self.shared.scale_expectations,
            self.key,
        )
    }

    fn cached_pod(&self, name: &str) -> Option<&CachedPod> {
        self.pods.get(name).copied()
    }

    fn record_version(&self, written: &Written) {
        super::record_pod_version(self.shared, written);
    }

    /// Creates the claims that do not exist yet, then the pod (one write each).
    async fn create(&self, pod: &Pod, pvcs: &[PersistentVolumeClaim]) -> Result<(), Error> {
        for pvc in pvcs {
            self.pvc_api()
                .create_if_absent(pvc)
                .await
                .map_err(|e| ShellError::create_pod(&format!("claim {}", pvc.name_any()), e))?;
        }
        let name = pod.name_any();
        self.scale_writes()
            .create(pod, &name)
            .await
            .map(drop)
            .map_err(|e| {
                e.into_family(|source| {
                    ShellError::create_pod(&format!("pod {name}"), source).into()
                })
            })
    }

    /// Deletes the pod, then its claims.
    async fn delete(&self, name: &str, pvcs: &[String]) -> Result<(), Error> {
        self.scale_writes()
            .delete(name)
            .await
            .map(drop)
            .map_err(|e| {
                e.into_family(|source| ShellError::delete_pod(&format!("pod {name}"), source))
            })?;
        for pvc in pvcs {
            match self.pvc_api().delete(pvc, &DeleteParams::default()).await {
                Ok(()) => {}
                Err(e) if is_not_found(&e) => {}
                Err(source) => {
                    return Err(ShellError::delete_pod(&format!("claim {pvc}"), source).into());
                }
            }
        }
        Ok(())
    }

    fn update_error(name: &str) -> impl FnOnce(kube::Error) -> Error + '_ {
        move |source| ShellError::update_pod(name, source).into()
    }

    /// Writes `status`'s changed conditions, together with `meta_patch`'s labels and
    /// annotations, as one patch of the status subresource (the kit's
    /// `Writer::patch_pod_status`). Nothing when nothing changes.
    async fn patch_pod_status(
        &self,
        name: &str,
        status: &PodStatus,
        meta_patch: &serde_json::Value,
    ) -> Result<(), Error> {
        let written = self
            .pod_api()
            .patch_pod_status(name, self.cached_pod(name), status, meta_patch)
            .await?;
        if let Some(written) = written {
            self.record_version(&written);
        }
        Ok(())
    }

    /// Writes back the cached (pre-update) value of each condition `unready` changed.
    /// Best effort: a failure is logged, the caller returns the patch's own error.
    async fn restore_conditions(&self, name: &str, unready: &PodStatus) {
        let Some(cached) = self.cached_pod(name) else {
            return;
        };
        let conditions: Vec<serde_json::Value> = unready
            .conditions
            .iter()
            .flatten()
            .filter_map(|c| cached.condition(&c.type_))
            .map(|c| {
                json!({
                    "type": c.type_,
                    "status": c.status,
                    "reason": c.reason,
                    "message": c.message,
                    "lastTransitionTime": c.last_transition_time.map(Time),
                })
            })
            .collect();
        if conditions.is_empty() {
            return;
        }
        let body = json!({"status": {"conditions": conditions}});
        match self
            .pod_api()
            .patch_subresource_strategic("status", name, &body)
            .await
        {
            Ok(written) => self.record_version(&written),
            Err(e) => tracing::warn!(pod = name, error = %e, "restoring readiness conditions"),
        }
    }

    async fn patch_pod(&self, name: &str, patch: &serde_json::Value) -> Result<Written, Error> {
        self.pod_api()
            .patch_strategic(name, patch)
            .await
            .map_err(Self::update_error(name))
    }

    /// Resizes `name`'s containers through the `resize` subresource.
    async fn resize_pod(&self, name: &str, resize: &serde_json::Value) -> Result<(), Error> {
        let resized = self
            .pod_api()
            .patch_subresource_strategic("resize", name, resize)
            .await
            .map_err(Self::update_error(name))?;
        self.record_version(&resized);
        Ok(())
    }

    async fn perform(&self, action: &Action) -> Result<(), Error> {
        match action {
            Action::CreatePod { pod, pvcs } => self.create(pod, pvcs).await,
            Action::DeletePod { name, pvcs } => self.delete(name, pvcs).await,
            Action::SetLifecycleState {
                name,
                patch,
                status,
                ..
            } => match status {
                Some(status) => self.patch_pod_status(name, status, patch).await,
                None => {
                    let patched = self.patch_pod(name, patch).await?;
                    self.record_version(&patched);
                    Ok(())
                }
            },
            Action::UpdateInPlace { name, update, .. } => {
                // A patch kube-apiserver would refuse for the pod's metadata is refused here,
                // before the pod is made unready for it (see `precheck`).
                if let (Some(patch), Some(cached)) = (&update.patch, self.cached_pod(name))
                    && let Some(refusal) = super::precheck::refusal_of_patched_metadata(
                        name,
                        &cached.to_pod().metadata,
                        patch,
                    )
                {
                    return Err(Self::update_error(name)(refusal));
                }
                if self.probe_patches
                    && update.unready_conditions.is_some()
                    && let Some(patch) = &update.patch
                {
                    self.pod_api()
                        .patch(
                            name,
                            &PatchParams::default().dry_run(),
                            &Patch::Strategic(patch),
                        )
                        .await
                        .map_err(Self::update_error(name))?;
                }
                if let Some(status) = &update.unready_conditions {
                    self.patch_pod_status(name, status, &serde_json::Value::Null)
                        .await?;
                }
                // The resize before the patch: were the patch to land and the resize then
                // fail, the pod would carry the new revision and an update state its
                // unchanged resources satisfy, and the resize would never be sent again.
                // No resourceVersion on either: the kubelet answers the status write above
                // with its own, and a precondition would turn that into a conflict every
                // time. The cache is as new as this controller's last write
                // (expectations), and the writes touch only what the plan computed.
                let sent = async {
                    if let Some(resize) = &update.resize_patch {
                        self.resize_pod(name, resize).await?;
                    }
                    if let Some(patch) = &update.patch {
                        self.record_version(&self.patch_pod(name, patch).await?);
                    }
                    Ok(())
                }
                .await;
                if sent.is_err()
                    && let Some(unready) = &update.unready_conditions
                {
                    // The update did not happen: put back the readiness conditions written
                    // for it, so a refused write never leaves the pod unready.
                    self.restore_conditions(name, unready).await;
                }
                sent
            }
            Action::ResizePod { name, resize } => self.resize_pod(name, resize).await,
            Action::MarkSpecifiedDelete { name, .. } => {
                let patch = json!({"metadata": {"labels": {SPECIFIED_DELETE_KEY: "true"}}});
                self.patch_pod(name, &patch).await.map(|_| ())
            }
            Action::PatchPod { name, patch } => {
                let patched = self.patch_pod(name, patch).await?;
                self.record_version(&patched);
                Ok(())
            }
            Action::UpdatePodStatus { name, status } => {
                self.patch_pod_status(name, status, &serde_json::Value::Null)
                    .await
            }
            Action::ReleasePod { name } => self.release(name).await,
            Action::DeletePvc { name } => {
                match self.pvc_api().delete(name, &DeleteParams::default()).await {
                    Ok(()) => Ok(()),
                    Err(e) if is_not_found(&e) => Ok(()),
                    Err(source) => Err(Error::Pvc(WriteError {
                        name: name.clone(),
                        source,
                    })),
                }
            }
            Action::ReassignPvcToPod { pvc, pod } => self.reassign(pvc, pod).await,
            Action::TruncatePodsToDelete { pods_to_delete } => {
                let api: Api<CloneSet> =
                    Api::namespaced(self.shared.client.clone(), self.namespace);
                let patch = json!({
                    "metadata": {"resourceVersion": self.cs.resource_version()},
                    "spec": {"scaleStrategy": {"podsToDelete": pods_to_delete}},
                });
                api.patch(
                    &self.cs.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .map_err(|source| {
                    Error::CloneSet(WriteError {
                        name: self.cs.name_any(),
                        source,
                    })
                })?;
                Ok(())
            }
            Action::DeleteRevision { name } => {
                Ok(delete_revision(&self.shared.client, self.namespace, name).await?)
            }
        }
    }

    /// Removes the CloneSet's owner reference from the pod.
    async fn release(&self, name: &str) -> Result<(), Error> {
        let Some(pod) = self.cached_pod(name) else {
            return Ok(());
        };
        let uid = self.cs.uid().unwrap_or_default();
        let remaining: Vec<_> = pod
            .owner_references()
            .iter()
            .filter(|o| o.uid != uid)
            .cloned()
            .collect();
        let patch = json!({"metadata": {
            "ownerReferences": remaining,
            "resourceVersion": pod.resource_version(),
        }});
        self.pod_api()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(Self::update_error(name))?;
        Ok(())
    }

    /// Moves the claim's owner reference to the pod.
    async fn reassign(&self, pvc: &str, pod: &str) -> Result<(), Error> {
        let Some(owner) = self.cached_pod(pod) else {
            return Ok(());
        };
        let reference = json!([{
            "apiVersion": "v1",
            "kind": "Pod",
            "name": pod,
            "uid": owner.uid().unwrap_or_default(),
            "controller": false,
        }]);
        let patch = json!({"metadata": {"ownerReferences": reference}});
        self.pvc_api()
            .patch(pvc, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| {
                Error::Pvc(WriteError {
                    name: pvc.to_string(),
                    source,
                })
            })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::{Caches, Settings, Shared};
    use kruise_runtime::errors::ShellError;
    use kruise_runtime::events::EventQueue;

    /// A client whose every request fails to connect: any write that went out would fail
    /// with a transport error, not the expectations error.
    fn unreachable_client() -> kube::Client {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        kube::Client::try_from(config).unwrap()
    }

    #[tokio::test]
    async fn a_poisoned_expectations_lock_lets_no_create_or_delete_through() {
        let client = unreachable_client();
        let metrics = kruise_runtime::Metrics::new();
        let caches = Caches {
            pods: kube::runtime::reflector::store().0,
            pvcs: kube::runtime::reflector::store().0,
            revisions: kube::runtime::reflector::store().0,
        };
        let recorder = EventQueue::for_controller(client.clone(), "test", &metrics);
        let shared = Arc::new(Shared::new(
            client,
            &Settings::default(),
            &metrics,
            recorder,
            caches,
        ));
        let held = shared.clone();
        let _ = std::thread::spawn(move || {
            let _ = held
                .scale_expectations
                .with(|_| panic!("a reconcile panics holding the lock"));
        })
        .join();
        let cs: CloneSet = serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
            "metadata": {"name": "web", "namespace": "default", "uid": "u"},
            "spec": {"selector": {}, "template": {}},
        }))
        .unwrap();
        let exec = Exec {
            shared: &shared,
            cs: &cs,
            key: "default/web",
            namespace: "default",
            pods: HashMap::new(),
            probe_patches: false,
        };
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "web-abcde"}})).unwrap();
        let created = exec.create(&pod, &[]).await;
        assert!(
            matches!(created, Err(Error::Shell(ShellError::Expectations(_)))),
            "{created:?}"
        );
        let deleted = exec.delete("web-abcde", &[]).await;
        assert!(
            matches!(deleted, Err(Error::Shell(ShellError::Expectations(_)))),
            "{deleted:?}"
        );
    }
}
