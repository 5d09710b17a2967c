//! The execute step: each planned [`Action`] as its API writes, run by the shared executor
//! (`kruise_runtime::execute`: slow-start creations, per-pod write groups, bounded
//! concurrency, first-error stop). Nothing is decided here and no clock is read.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodStatus};
use kruise_core::pods::CachedPod;
use kruise_runtime::errors::ShellError;
use kruise_runtime::events::{EventRecord, pod_reference};
use kruise_runtime::execute::{Lane, Outcomes, Scheduled, WRITE_CONCURRENCY, execute};
use kruise_runtime::revisions::delete_revision;
use kruise_runtime::scale_writes::ScaleWrites;
use kruise_runtime::writes::{Writer, Written};
use kube::ResourceExt as _;
use kube::api::{Patch, PatchParams};

use super::{Error, Shared};
use crate::plan::{Action, Plan};

impl Scheduled for Action {
    fn lane(&self) -> Lane<'_> {
        match self {
            Action::CreatePod { .. } => Lane::SlowStart,
            other => other.ordered_with().map_or(Lane::Alone, Lane::Group),
        }
    }
}

/// What executing one plan needs.
pub(super) struct Exec<'a> {
    pub shared: &'a Shared,
    /// `namespace/name` of the set (expectations key).
    pub key: &'a str,
    pub set_name: &'a str,
    pub namespace: &'a str,
    /// The cached pods the plan acts on, by name.
    pub pods: HashMap<&'a str, &'a CachedPod>,
}

/// OpenKruise's events for what ran (`SuccessfulCreate` …), and the first error.
pub(super) async fn execute_plan(
    exec: &Exec<'_>,
    plan: &Plan,
) -> (Vec<EventRecord>, Result<(), Error>) {
    let outcomes = execute(&plan.actions, WRITE_CONCURRENCY, |action| {
        tracing::debug!(statefulset = exec.key, ?action, "performing");
        exec.perform(action)
    })
    .await;
    events_and_first_error(exec, outcomes)
}

fn events_and_first_error(
    exec: &Exec<'_>,
    outcomes: Outcomes<'_, Action, Error>,
) -> (Vec<EventRecord>, Result<(), Error>) {
    let set = exec.set_name;
    let mut events = Vec::new();
    let mut first_error = None;
    for (action, result) in outcomes {
        // A claim's write names the pod the claim belongs to but is related to none (as
        // OpenKruise's claim events), so it is not folded into that pod's event series.
        let related = action
            .pod_name()
            .map(|n| pod_reference(Some(exec.namespace), n));
        let pod = action.ordered_with().unwrap_or_default();
        let record = match (action, &result) {
            (Action::CreatePod { .. }, Ok(())) => Some(EventRecord::normal(
                "SuccessfulCreate",
                format!("create Pod {pod} in StatefulSet {set} successful"),
            )),
            (Action::CreatePod { .. }, Err(e)) => Some(EventRecord::warning(
                "FailedCreate",
                format!("create Pod {pod} in StatefulSet {set} failed error: {e}"),
            )),
            (Action::DeletePod { .. }, Ok(())) => Some(EventRecord::normal(
                "SuccessfulDelete",
                format!("delete Pod {pod} in StatefulSet {set} successful"),
            )),
            (Action::DeletePod { .. }, Err(e)) => Some(EventRecord::warning(
                "FailedDelete",
                format!("failed to delete pod {pod}: {e}"),
            )),
            (Action::UpdateInPlace { revision, .. }, Ok(())) => Some(EventRecord::normal(
                "SuccessfulUpdatePodInPlace",
                format!("successfully update pod {pod} in-place(revision {revision})"),
            )),
            (Action::UpdateInPlace { revision, .. }, Err(e)) => Some(EventRecord::warning(
                "FailedUpdatePodInPlace",
                format!("failed to update pod {pod} in-place(revision {revision}): {e}"),
            )),
            (Action::CreateClaims { claims, .. }, Ok(())) => {
                let names: Vec<&str> = claims
                    .iter()
                    .filter_map(|c| c.metadata.name.as_deref())
                    .collect();
                Some(EventRecord::normal(
                    "SuccessfulCreate",
                    format!(
                        "create Claim {} Pod {pod} in StatefulSet {set} success",
                        names.join(",")
                    ),
                ))
            }
            (Action::ExpandClaim { name, .. }, Ok(())) => Some(EventRecord::normal(
                "SuccessfulResize",
                format!("resize Claim {name} Pod {pod} in StatefulSet {set} success"),
            )),
            (Action::ExpandClaim { name, .. }, Err(e)) => Some(EventRecord::warning(
                "FailedResize",
                format!("resize Claim {name} for Pod {pod} in StatefulSet {set} failed error: {e}"),
            )),
            (_, Err(e)) => Some(EventRecord::warning(
                "FailedUpdate",
                format!("update Pod {pod} in StatefulSet {set} failed error: {e}"),
            )),
            (_, Ok(())) => None,
        };
        events.extend(record.map(|r| r.related_to(related)));
        if let Err(e) = result {
            first_error.get_or_insert(e);
        }
    }
    (events, first_error.map_or(Ok(()), Err))
}

impl Exec<'_> {
    fn pod_api(&self) -> Writer<Pod> {
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

    fn record_version(&self, written: &Written) {
        super::record_pod_version(self.shared, written);
    }

    fn claim_api(&self) -> Writer<PersistentVolumeClaim> {
        Writer::namespaced(self.shared.client.clone(), self.namespace)
    }

    /// Creates the claims; one that exists is kept.
    async fn create_claims(&self, claims: &[PersistentVolumeClaim]) -> Result<(), Error> {
        for claim in claims {
            self.claim_api()
                .create_if_absent(claim)
                .await
                .map_err(|e| ShellError::create_pod(&format!("claim {}", claim.name_any()), e))?;
        }
        Ok(())
    }

    /// Creates the claims (one that exists is kept), then the pod.
    async fn create(&self, pod: &Pod, claims: &[PersistentVolumeClaim]) -> Result<(), Error> {
        self.create_claims(claims).await?;
        let name = pod.name_any();
        self.scale_writes()
            .create(pod, &name)
            .await
            .map(drop)
            .map_err(|e| {
                e.into_family(|source| ShellError::create_pod(&format!("pod {name}"), source))
            })
    }

    async fn delete(&self, name: &str) -> Result<(), Error> {
        self.scale_writes()
            .delete(name)
            .await
            .map(drop)
            .map_err(|e| {
                e.into_family(|source| ShellError::delete_pod(&format!("pod {name}"), source))
            })
    }

    /// Writes `status`'s changed conditions as one strategic-merge patch of the status
    /// subresource; nothing when nothing changes.
    async fn patch_pod_status(
        &self,
        name: &str,
        status: &PodStatus,
        metadata: &serde_json::Value,
    ) -> Result<(), Error> {
        let written = self
            .pod_api()
            .patch_pod_status(name, self.pods.get(name).copied(), status, metadata)
            .await?;
        if let Some(written) = written {
            self.record_version(&written);
        }
        Ok(())
    }

    /// Resizes `name`'s containers through the `resize` subresource.
    async fn resize_pod(&self, name: &str, resize: &serde_json::Value) -> Result<(), Error> {
        let written = self
            .pod_api()
            .patch_subresource_strategic("resize", name, resize)
            .await
            .map_err(|e| ShellError::update_pod(name, e))?;
        self.record_version(&written);
        Ok(())
    }

    async fn patch_pod(&self, name: &str, patch: &serde_json::Value) -> Result<(), Error> {
        let written = self
            .pod_api()
            .patch_strategic(name, patch)
            .await
            .map_err(|e| ShellError::update_pod(name, e))?;
        self.record_version(&written);
        Ok(())
    }

    async fn perform(&self, action: &Action) -> Result<(), Error> {
        match action {
            Action::CreatePod { pod, claims } => self.create(pod, claims).await,
            Action::DeletePod { name, .. } => self.delete(name).await,
            Action::PatchPod { name, patch } => self.patch_pod(name, patch).await,
            Action::UpdatePodStatus {
                name,
                status,
                metadata,
            } => {
                let metadata = metadata.clone().unwrap_or_default();
                self.patch_pod_status(name, status, &metadata).await
            }
            Action::UpdateInPlace {
                name,
                revision,
                update,
            } => {
                if let Some(status) = &update.unready_conditions {
                    self.patch_pod_status(name, status, &serde_json::Value::Null)
                        .await?;
                }
                // The resize before the patch: were the patch to land and the resize then
                // fail, the pod would carry the new revision and an update state its
                // unchanged resources satisfy, and the resize would never be sent again.
                if let Some(resize) = &update.resize_patch {
                    self.resize_pod(name, resize).await?;
                }
                if let Some(patch) = &update.patch {
                    self.patch_pod(name, patch).await?;
                    // The rolling update waits until the cache shows this revision (K#844).
                    let _ = self.shared.update_expectations.with(|e| {
                        e.entry(self.key.to_string())
                            .or_default()
                            .insert(name.clone(), revision.clone())
                    });
                }
                Ok(())
            }
            Action::ResizePod { name, resize } => self.resize_pod(name, resize).await,
            Action::SetPodOwners {
                name,
                owner_references,
                resource_version,
            } => {
                let patch = serde_json::json!({"metadata": {
                    "resourceVersion": resource_version,
                    "ownerReferences": owner_references,
                }});
                let result = self
                    .pod_api()
                    .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
                // A pod released after it left the pod watch is forgotten, released or not:
                // once it changed or went, nothing more is known of it (its name stays
                // taken, as in OpenKruise, until it goes).
                let key = super::departed_key(self.namespace, name);
                let _ = self.shared.departed.with(|d| d.remove(&key));
                let written = result.map_err(|e| ShellError::update_pod(name, e))?;
                self.record_version(&written);
                Ok(())
            }
            Action::CreateClaims { claims, .. } => self.create_claims(claims).await,
            Action::SetClaimOwners {
                name,
                owner_references,
                resource_version,
                ..
            } => {
                let patch = serde_json::json!({"metadata": {
                    "resourceVersion": resource_version,
                    "ownerReferences": owner_references,
                }});
                self.claim_api()
                    .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(|e| ShellError::update_pod(&format!("claim {name}"), e))?;
                Ok(())
            }
            Action::ExpandClaim { name, patch, .. } => {
                self.claim_api()
                    .patch(name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .map_err(|e| ShellError::update_pod(&format!("claim {name}"), e))?;
                Ok(())
            }
            Action::DeleteRevision { name } => {
                Ok(delete_revision(&self.shared.client, self.namespace, name).await?)
            }
        }
    }
}
