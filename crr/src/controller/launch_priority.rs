//! Container launch priority's controller in `kruise-crr run`: it keeps each prioritized
//! pod's `<pod>-barrier` ConfigMap ([`crate::plan::launch_priority::plan_barrier`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kruise_runtime::ReconcileError;
use kruise_runtime::errors::is_already_exists;
use kruise_runtime::watch::Watch;
use kruise_runtime::{RunOptions, run_controller, warm_until_leading};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt as _};
use serde_json::json;

use crate::plan::launch_priority::{COMPLETED_KEY, barrier_name, plan_barrier, reads_barrier};

/// The controller's name (metrics, readiness `controller/containerlaunchpriority`).
pub const CONTROLLER_NAME: &str = "containerlaunchpriority";

/// A reconcile that failed: which write, on what.
#[derive(Debug, thiserror::Error)]
#[error("{what} of {object}: {source}")]
pub struct Error {
    /// Which write.
    what: &'static str,
    /// `namespace/name`.
    object: String,
    /// The API's error.
    source: kube::Error,
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        self.what
    }

    fn is_conflict(&self) -> bool {
        matches!(&self.source, kube::Error::Api(s) if s.code == 409)
    }
}

struct Shared {
    client: Client,
    barriers: Store<ConfigMap>,
}

/// Runs the controller until `opts.shutdown` fires: it caches only pods that read a barrier
/// and ConfigMaps named `*-barrier`, and a barrier's events wake its pod.
pub async fn run(client: Client, namespace: Option<String>, opts: RunOptions) {
    let (pods, mut pod_stream) = Watch::<Pod>::new(client.clone(), namespace.as_deref())
        .keep_only(reads_barrier)
        .reflect();
    let (barriers, mut barrier_stream) =
        Watch::<ConfigMap>::new(client.clone(), namespace.as_deref())
            .keep_only(|cm: &ConfigMap| cm.name_any().ends_with("-barrier"))
            .reflect();
    if !warm_until_leading(&opts, &mut [&mut pod_stream, &mut barrier_stream]).await {
        return;
    }
    let controller =
        Controller::for_stream(pod_stream, pods).watches_stream(barrier_stream, |cm: ConfigMap| {
            let name = cm.name_any();
            let pod = name.strip_suffix("-barrier")?;
            Some(ObjectRef::<Pod>::new(pod).within(&cm.namespace().unwrap_or_default()))
        });
    run_controller(
        controller,
        reconcile,
        Arc::new(Shared { client, barriers }),
        opts,
    )
    .await;
}

async fn reconcile(pod: Arc<Pod>, shared: Arc<Shared>) -> Result<Requeue, Error> {
    let namespace = pod.namespace().unwrap_or_default();
    let pod_name = pod.name_any();
    let name = barrier_name(&pod_name);
    let barrier = shared
        .barriers
        .get(&ObjectRef::<ConfigMap>::new(&name).within(&namespace));
    let empty = BTreeMap::new();
    let data = barrier
        .as_ref()
        .map(|cm| cm.data.as_ref().unwrap_or(&empty));
    let plan = plan_barrier(&pod, data);
    let configmaps: Api<ConfigMap> = Api::namespaced(shared.client.clone(), &namespace);
    let write = |what: &'static str, object: &str| {
        let object = format!("{namespace}/{object}");
        move |source| Error {
            what,
            object,
            source,
        }
    };
    if let Some(keys) = plan.create {
        let barrier = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                // As OpenKruise: owned by the pod (not as its controller), so it goes with it.
                owner_references: Some(vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Pod".into(),
                    name: pod_name.clone(),
                    uid: pod.uid().unwrap_or_default(),
                    ..OwnerReference::default()
                }]),
                ..ObjectMeta::default()
            },
            data: Some(keys.into_iter().map(|k| (k, "true".to_string())).collect()),
            ..ConfigMap::default()
        };
        match configmaps.create(&PostParams::default(), &barrier).await {
            Ok(_) => {}
            // The cache lags our own create; the next event brings it.
            Err(e) if is_already_exists(&e) => {}
            Err(e) => return Err(write("create_barrier", &name)(e)),
        }
    }
    if !plan.open.is_empty() {
        let data: BTreeMap<&str, &str> = plan.open.iter().map(|k| (k.as_str(), "true")).collect();
        configmaps
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"data": data})),
            )
            .await
            .map_err(write("open_barrier", &name))?;
    }
    if plan.complete {
        let pods: Api<Pod> = Api::namespaced(shared.client.clone(), &namespace);
        pods.patch(
            &pod_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {COMPLETED_KEY: "true"}}})),
        )
        .await
        .map_err(write("complete", &pod_name))?;
    }
    Ok(Requeue::await_change())
}
