//! The cluster-side controller's shell (`kruise-crr run`, on the leader): it watches every
//! ContainerRecreateRequest, reads the request's pod on each reconcile (no pod cache: the
//! family owns no pods, so it keeps none in memory) and carries out what
//! [`crate::plan::controller`] decides. While a request is `Recreating` it is looked at every
//! second (OpenKruise: every 3 s, and on pod events).

pub mod launch_priority;

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kruise_core::pods::readiness::{add_not_ready_key, remove_not_ready_key};
use kruise_runtime::ReconcileError;
use kruise_runtime::errors::is_not_found;
use kruise_runtime::watch::Watch;
use kruise_runtime::{RunOptions, run_controller, warm_until_leading};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};

use crate::api::v1beta1::ContainerRecreateRequest;
use crate::api::{ACTIVE_KEY, PRE_RECREATE_GRACE, UNREADY_ACQUIRED_KEY};
use crate::conversion::{PRE_RECREATE_GRACE_MESSAGE, PRE_RECREATE_GRACE_REASON, rfc3339_seconds};
use crate::plan::controller::{Action, plan, readiness_message};

/// The controller's name (metrics, readiness `controller/containerrecreaterequest`).
pub const CONTROLLER_NAME: &str = "containerrecreaterequest";

/// A reconcile that failed: which write, on what.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the request's pod.
    #[error("reading pod {pod}: {source}")]
    ReadPod {
        /// `namespace/name`.
        pod: String,
        /// The API's error.
        source: kube::Error,
    },
    /// A write to the request or its pod.
    #[error("{what} of {object}: {source}")]
    Write {
        /// Which write.
        what: &'static str,
        /// `namespace/name`.
        object: String,
        /// The API's error.
        source: kube::Error,
    },
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::ReadPod { .. } => "read_pod",
            Error::Write { what, .. } => what,
        }
    }

    fn is_conflict(&self) -> bool {
        matches!(self, Error::Write { source: kube::Error::Api(s), .. } if s.code == 409)
    }
}

struct Shared {
    client: Client,
}

/// Runs the controller until `opts.shutdown` fires.
pub async fn run(client: Client, namespace: Option<String>, opts: RunOptions) {
    let (requests, mut stream) =
        Watch::<ContainerRecreateRequest>::new(client.clone(), namespace.as_deref()).reflect();
    if !warm_until_leading(&opts, &mut [&mut stream]).await {
        return;
    }
    let controller = Controller::for_stream(stream, requests);
    run_controller(controller, reconcile, Arc::new(Shared { client }), opts).await;
}

async fn reconcile(
    crr: Arc<ContainerRecreateRequest>,
    shared: Arc<Shared>,
) -> Result<Requeue, Error> {
    let namespace = crr.namespace().unwrap_or_default();
    let name = crr.name_any();
    let pods: Api<Pod> = Api::namespaced(shared.client.clone(), &namespace);
    let pod = pods
        .get_opt(&crr.spec.pod_name)
        .await
        .map_err(|source| Error::ReadPod {
            pod: format!("{namespace}/{}", crr.spec.pod_name),
            source,
        })?;
    let now = Timestamp::now();
    let planned = plan(&crr, pod.as_ref(), now);
    let requests: Api<ContainerRecreateRequest> =
        Api::namespaced(shared.client.clone(), &namespace);
    let object = format!("{namespace}/{name}");
    let write = |what: &'static str| {
        let object = object.clone();
        move |source| Error::Write {
            what,
            object,
            source,
        }
    };
    let params = PatchParams::default();
    for action in planned.actions {
        match action {
            Action::ReleasePodNotReady | Action::AcquirePodNotReady => {
                let Some(pod) = &pod else { continue };
                let message = readiness_message(&crr);
                let status = if action == Action::AcquirePodNotReady {
                    add_not_ready_key(pod, &message, now)
                } else {
                    remove_not_ready_key(pod, &message, now)
                };
                if let Some(status) = status {
                    let body = json!({"status": {"conditions": status.conditions}});
                    pods.patch_status(&crr.spec.pod_name, &params, &Patch::Strategic(body))
                        .await
                        .map_err(write("pod_readiness"))?;
                }
            }
            Action::AddFinalizer | Action::RemoveFinalizer => {
                let mut finalizers: Vec<String> = crr.finalizers().to_vec();
                finalizers.retain(|f| f != UNREADY_ACQUIRED_KEY);
                if action == Action::AddFinalizer {
                    finalizers.push(UNREADY_ACQUIRED_KEY.to_string());
                }
                let body = json!({"metadata": {
                    "finalizers": finalizers,
                    "resourceVersion": crr.resource_version(),
                }});
                requests
                    .patch(&name, &params, &Patch::Merge(body))
                    .await
                    .map_err(write("finalizer"))?;
            }
            Action::RemoveActiveLabel => {
                let body = json!({"metadata": {"labels": {ACTIVE_KEY: Value::Null}}});
                requests
                    .patch(&name, &params, &Patch::Merge(body))
                    .await
                    .map_err(write("active_label"))?;
            }
            Action::Delete => match requests.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(write("delete")(e)),
            },
            Action::Complete(message) => {
                let body = json!({"status": {
                    "phase": "Completed",
                    "completionTime": rfc3339_seconds(now),
                    "message": message,
                }});
                requests
                    .patch_status(&name, &params, &Patch::Merge(body))
                    .await
                    .map_err(write("complete"))?;
            }
            Action::WriteSnapshot(snapshot) => {
                let body = json!({"status": {"containerStatusSnapshot": snapshot}});
                requests
                    .patch_status(&name, &params, &Patch::Merge(body))
                    .await
                    .map_err(write("snapshot"))?;
            }
            Action::SetPreRecreateGrace => {
                let mut conditions: Vec<Value> = crr
                    .status
                    .iter()
                    .flat_map(|s| s.conditions.iter())
                    .filter(|c| c.type_ != PRE_RECREATE_GRACE)
                    .filter_map(|c| serde_json::to_value(c).ok())
                    .collect();
                conditions.push(json!({
                    "type": PRE_RECREATE_GRACE,
                    "status": "True",
                    "lastTransitionTime": rfc3339_seconds(now),
                    "reason": PRE_RECREATE_GRACE_REASON,
                    "message": PRE_RECREATE_GRACE_MESSAGE,
                }));
                let body = json!({"status": {"conditions": conditions}});
                requests
                    .patch_status(&name, &params, &Patch::Merge(body))
                    .await
                    .map_err(write("pre_recreate_grace"))?;
            }
        }
    }
    Ok(match planned.requeue_after {
        Some(after) => Requeue::requeue(after.max(Duration::from_millis(100))),
        None => Requeue::await_change(),
    })
}
