//! Pod creates and deletes under scale expectations, as every family that owns pods sends
//! them: each expectation is recorded before its write and forgotten when the API refused
//! the write (or a delete found the pod gone), so the next pass waits until the cache shows
//! every write ([`ScaleExpectations::settle`]) and a stale cache never creates or deletes a
//! pod twice.

use k8s_openapi::api::core::v1::Pod;
use kruise_core::expectations::{
    PoisonedExpectations, ScaleAction, ScaleExpectations, SharedExpectations,
};
use kube::Client;
use kube::api::{DeleteParams, PostParams};

use crate::errors::{ShellError, WriteError, is_not_found};
use crate::events::{EventRecord, Recorder, pod_reference};
use crate::writes::{Writer, Written};

/// Event reason of a pod created, as Kubernetes' pod-owning controllers record it.
pub const REASON_SUCCESSFUL_CREATE: &str = "SuccessfulCreate";
/// Event reason (Warning) of a pod create the API server refused.
pub const REASON_FAILED_CREATE: &str = "FailedCreate";

/// One owner's pod creates and deletes.
pub struct ScaleWrites<'a> {
    pods: Writer<Pod>,
    namespace: String,
    expectations: &'a SharedExpectations<ScaleExpectations>,
    owner: &'a str,
}

/// A create or delete that was not sent, or that the API server refused.
#[derive(Debug, thiserror::Error)]
pub enum ScaleWriteError {
    /// The expectation could not be recorded, so nothing was sent.
    #[error(transparent)]
    Expectations(#[from] PoisonedExpectations),
    /// The API server refused the write.
    #[error(transparent)]
    Api(kube::Error),
}

impl ScaleWriteError {
    /// The family's error: a shell error for the expectations, `api` for a refused write.
    pub fn into_family<E: From<ShellError>>(self, api: impl FnOnce(kube::Error) -> E) -> E {
        match self {
            ScaleWriteError::Expectations(e) => ShellError::from(e).into(),
            ScaleWriteError::Api(e) => api(e),
        }
    }
}

impl<'a> ScaleWrites<'a> {
    /// The creates and deletes of the pods in `namespace` of the owner whose expectations
    /// key (`namespace/name`) is `owner`, under the family's `expectations`.
    pub fn new(
        client: Client,
        namespace: &str,
        expectations: &'a SharedExpectations<ScaleExpectations>,
        owner: &'a str,
    ) -> Self {
        ScaleWrites {
            pods: Writer::namespaced(client, namespace),
            namespace: namespace.to_string(),
            expectations,
            owner,
        }
    }

    fn expect(&self, action: ScaleAction, name: &str) -> Result<(), PoisonedExpectations> {
        self.expectations
            .with(|e| e.expect(self.owner, action, name))
    }

    fn forget(&self, action: ScaleAction, name: &str) {
        // A poisoned lock keeps it: the next pass fails on the lock anyway.
        let _ = self
            .expectations
            .with(|e| e.observe(self.owner, action, name));
    }

    /// Creates `pod`, expected under `expected_as`: its name, or what the observe step finds
    /// it by (e.g. its node).
    pub async fn create(&self, pod: &Pod, expected_as: &str) -> Result<Written, ScaleWriteError> {
        self.expect(ScaleAction::Create, expected_as)?;
        self.pods
            .create(&PostParams::default(), pod)
            .await
            .map_err(|e| {
                self.forget(ScaleAction::Create, expected_as);
                ScaleWriteError::Api(e)
            })
    }

    /// Creates a pod whose name the server generates; it is expected under the name it got
    /// (so another pod found under the same key, e.g. on the same node, never counts as it).
    pub async fn create_generated(&self, pod: &Pod) -> Result<Written, ScaleWriteError> {
        let written = self
            .pods
            .create(&PostParams::default(), pod)
            .await
            .map_err(ScaleWriteError::Api)?;
        if let Some(name) = written.name() {
            self.expect(ScaleAction::Create, name)?;
        }
        Ok(written)
    }

    /// Creates `pod` as [`ScaleWrites::create`] does (`expected_as` given) or as
    /// [`ScaleWrites::create_generated`] does (`None`), and records the event Kubernetes'
    /// pod-owning controllers record: `SuccessfulCreate` "Created pod: NAME" about the pod,
    /// or Warning `FailedCreate` "Error creating: ERROR". A refused create is the shell's
    /// `create` error naming the pod as `what`.
    pub async fn create_recorded(
        &self,
        pod: &Pod,
        expected_as: Option<&str>,
        recorder: &Recorder,
        what: &str,
    ) -> Result<Written, ShellError> {
        let created = match expected_as {
            Some(key) => self.create(pod, key).await,
            None => self.create_generated(pod).await,
        };
        match created {
            Ok(created) => {
                let name = created.name().unwrap_or_default();
                recorder.record(
                    EventRecord::normal(REASON_SUCCESSFUL_CREATE, format!("Created pod: {name}"))
                        .related_to(Some(pod_reference(Some(&self.namespace), name))),
                );
                Ok(created)
            }
            Err(e) => {
                recorder.record(EventRecord::warning(
                    REASON_FAILED_CREATE,
                    format!("Error creating: {e}"),
                ));
                Err(e.into_family(|source| ShellError::Create(WriteError::on(what)(source))))
            }
        }
    }

    /// Deletes the pod `name`: true when this deleted it, false when it was already gone.
    pub async fn delete(&self, name: &str) -> Result<bool, ScaleWriteError> {
        self.expect(ScaleAction::Delete, name)?;
        match self.pods.delete(name, &DeleteParams::default()).await {
            Ok(()) => Ok(true),
            Err(e) => {
                self.forget(ScaleAction::Delete, name);
                if is_not_found(&e) {
                    Ok(false)
                } else {
                    Err(ScaleWriteError::Api(e))
                }
            }
        }
    }
}
