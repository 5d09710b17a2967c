//! The `KruisePodReady` condition for pods the `workloads` step gave the gate (OpenKruise's
//! `podreadiness` controller): a pod carrying the gate without the condition gets it `True`,
//! so it can become Ready; writers such as lifecycle hooks then add and remove not-ready
//! keys. It runs wherever the gate is injected, so the two never come apart.

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kruise_core::api::keys::KRUISE_POD_READY;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, ResourceExt as _};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Whether the pod has the `KruisePodReady` gate but not the condition (and is not terminating).
pub fn needs_condition(pod: &Pod) -> bool {
    let gated = pod
        .spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.condition_type == KRUISE_POD_READY));
    let has = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == KRUISE_POD_READY));
    gated && !has && pod.metadata.deletion_timestamp.is_none()
}

/// Watches pods until `shutdown`, adding the condition where [`needs_condition`].
pub async fn run(client: Client, shutdown: CancellationToken) {
    let stream = watcher(Api::<Pod>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .applied_objects();
    tokio::pin!(stream);
    loop {
        let pod = tokio::select! {
            _ = shutdown.cancelled() => return,
            next = stream.next() => match next {
                None => return,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "pod watch");
                    continue;
                }
                Some(Ok(pod)) => pod,
            },
        };
        if !needs_condition(&pod) {
            continue;
        }
        let namespace = pod.namespace().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now());
        let body = json!({"status": {"conditions": [
            {"type": KRUISE_POD_READY, "status": "True", "lastTransitionTime": now}
        ]}});
        if let Err(e) = api
            .patch_status(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(body),
            )
            .await
        {
            tracing::warn!(pod = %format!("{namespace}/{}", pod.name_any()), error = %e, "setting KruisePodReady");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn only_gated_pods_without_the_condition() {
        let gated = json!({"spec": {"containers": [], "readinessGates": [{"conditionType": "KruisePodReady"}]}});
        assert!(needs_condition(&pod(gated.clone())));
        let mut with = gated.clone();
        with["status"] = json!({"conditions": [{"type": "KruisePodReady", "status": "False"}]});
        assert!(!needs_condition(&pod(with)), "a writer's False is kept");
        assert!(!needs_condition(&pod(json!({"spec": {"containers": []}}))));
        let mut deleting = gated;
        deleting["metadata"] = json!({"deletionTimestamp": "2026-11-24T00:00:00Z"});
        assert!(!needs_condition(&pod(deleting)));
    }
}
