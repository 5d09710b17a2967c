//! The PUB step of kruise-webhook's mutating pod chain (`/mutate-pod`, OpenKruise's
//! `pubMutatingPod`): a pod created under a PodUnavailableBudget gets the related-pub
//! annotations (`pub.kruise.io/related-pub` and the legacy `kruise.io/related-pub`) naming
//! it, so admission finds its budget by name from the first disruption on, before the
//! controller's own pass has annotated it.
//!
//! The budget, as OpenKruise's `GetPubForPod`: the first of the pod's namespace whose
//! targetRef is the pod's workload (its controller; a ReplicaSet's Deployment when it has
//! one), or, for a budget with a selector, whose non-empty selector matches the pod's labels.

use std::sync::Arc;

use futures::StreamExt as _;
use futures::future::BoxFuture;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kruise_admission::pod_chain::{PodMutator, PodRequest, PodScope};
use kruise_admission::{FailurePolicy, HandlerError};
use kruise_core::pods::selector::selector_matches;
use kruise_runtime::family::StepContext;
use kruise_runtime::watch::Loaded;
use kube::api::Api;
use kube::core::admission::Operation;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, ResourceExt as _};

use kruise_core::pub_budget::{LEGACY_RELATED_PUB_ANNOTATION, RELATED_PUB_ANNOTATION};

use crate::api::v1beta1::{PodUnavailableBudget, TargetReference};
use crate::pod_admission::{budget_scopes, budgets_loaded};

/// The step: a watch of the budgets (its scopes and the budgets it picks from) and a client
/// to find a ReplicaSet's Deployment.
pub struct RelatedPubStep {
    live: Option<(Client, Store<PodUnavailableBudget>)>,
    /// Set once the budgets have loaded (or the CRD is not installed).
    loaded: Option<Loaded>,
}

/// Builds the step for kruise-webhook: with `PodUnavailableBudgetDeleteGate` or
/// `PodUnavailableBudgetUpdateGate` on and a cluster to watch, a watch of the budgets; else
/// a step that covers no pod.
pub fn related_pub_step(ctx: &StepContext) -> Arc<dyn PodMutator> {
    let enabled = ctx.gates.enabled(crate::admission::DELETE_GATE)
        || ctx.gates.enabled(crate::admission::UPDATE_GATE);
    let live = match &ctx.live {
        Some(live) if enabled => live,
        _ => {
            return Arc::new(RelatedPubStep {
                live: None,
                loaded: None,
            });
        }
    };
    let (budgets, writer) = reflector::store::<PodUnavailableBudget>();
    let stream = reflector::reflector(
        writer,
        // Backed off, so a cluster without the CRD is retried calmly.
        watcher::watcher(Api::all(live.client.clone()), watcher::Config::default())
            .default_backoff(),
    );
    let loaded = budgets_loaded(live, &budgets);
    let refresh = live.refresh.clone();
    let shutdown = live.shutdown.clone();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                event = stream.next() => match event {
                    // A budget came, went or changed its selector: the entries follow.
                    Some(Ok(_)) => refresh.notify_one(),
                    Some(Err(e)) => tracing::warn!(error = %e, "watching PodUnavailableBudgets"),
                    None => return,
                },
            }
        }
    });
    Arc::new(RelatedPubStep {
        live: Some((live.client.clone(), budgets)),
        loaded: Some(loaded),
    })
}

impl PodMutator for RelatedPubStep {
    fn name(&self) -> &'static str {
        "protection"
    }

    fn order(&self) -> u32 {
        50
    }

    fn scopes(&self) -> Vec<PodScope> {
        match &self.live {
            Some((_, budgets)) => budget_scopes(budgets),
            None => Vec::new(),
        }
    }

    fn scopes_known(&self) -> bool {
        self.loaded.as_ref().is_none_or(Loaded::get)
    }

    /// The annotation only saves the admission a search (the controller sets it too, and
    /// admission falls back to the budgets' selectors), so a webhook that cannot be reached
    /// never holds up a pod.
    fn failure_policy(&self) -> FailurePolicy {
        FailurePolicy::Ignore
    }

    fn mutate<'a>(
        &'a self,
        request: &'a PodRequest,
        pod: &'a mut Pod,
    ) -> BoxFuture<'a, Result<(), HandlerError>> {
        Box::pin(async move {
            let Some((client, budgets)) = &self.live else {
                return Ok(());
            };
            if request.operation != Operation::Create {
                return Ok(());
            }
            let namespace = match pod.namespace() {
                Some(namespace) if !namespace.is_empty() => namespace,
                _ => request.namespace.clone(),
            };
            let in_namespace: Vec<Arc<PodUnavailableBudget>> = budgets
                .state()
                .into_iter()
                .filter(|b| b.namespace().as_deref() == Some(namespace.as_str()))
                .collect();
            if in_namespace.is_empty() {
                return Ok(());
            }
            let workload = if in_namespace
                .iter()
                .any(|b| b.spec.target_reference.is_some())
            {
                workload_of(client, &namespace, pod).await
            } else {
                None
            };
            let Some(name) = related_budget(&in_namespace, pod, workload.as_ref()) else {
                return Ok(());
            };
            let annotations = pod.annotations_mut();
            annotations.insert(RELATED_PUB_ANNOTATION.into(), name.clone());
            annotations.insert(LEGACY_RELATED_PUB_ANNOTATION.into(), name);
            Ok(())
        })
    }
}

/// The workload the pod belongs to: its controller, or the Deployment of its ReplicaSet.
/// A ReplicaSet that cannot be read is taken as the workload (logged): the annotation is
/// then left to the controller, as OpenKruise leaves it.
async fn workload_of(client: &Client, namespace: &str, pod: &Pod) -> Option<TargetReference> {
    let owner = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))?;
    let controller = TargetReference {
        api_version: owner.api_version.clone(),
        kind: owner.kind.clone(),
        name: owner.name.clone(),
    };
    if controller.kind != "ReplicaSet" || controller.group() != "apps" {
        return Some(controller);
    }
    let replica_sets = Api::<ReplicaSet>::namespaced(client.clone(), namespace);
    match replica_sets.get_opt(&controller.name).await {
        Ok(Some(replica_set)) => Some(
            replica_set
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|r| r.controller == Some(true) && r.kind == "Deployment")
                .map(|d| TargetReference {
                    api_version: d.api_version.clone(),
                    kind: d.kind.clone(),
                    name: d.name.clone(),
                })
                .unwrap_or(controller),
        ),
        Ok(None) => Some(controller),
        Err(e) => {
            tracing::warn!(error = %e, replica_set = %controller.name,
                "reading a pod's ReplicaSet for its PodUnavailableBudget");
            Some(controller)
        }
    }
}

/// OpenKruise's `GetPubForPod` over the budgets of the pod's namespace: the first whose
/// targetRef is `workload`, or, for one without a targetRef (or a pod without a workload),
/// whose non-empty selector matches the pod.
pub fn related_budget(
    budgets: &[Arc<PodUnavailableBudget>],
    pod: &Pod,
    workload: Option<&TargetReference>,
) -> Option<String> {
    let labels = pod.labels();
    budgets
        .iter()
        .find(|budget| match (&budget.spec.target_reference, workload) {
            (Some(target), Some(workload)) => target.same_target(workload),
            _ => budget.spec.selector.as_ref().is_some_and(|selector| {
                let empty = selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
                    && selector
                        .match_expressions
                        .as_ref()
                        .is_none_or(|e| e.is_empty());
                !empty && selector_matches(selector, labels).unwrap_or(false)
            }),
        })
        .map(|budget| budget.name_any())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn budget(name: &str, spec: serde_json::Value) -> Arc<PodUnavailableBudget> {
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "policy.kruise.io/v1beta1", "kind": "PodUnavailableBudget",
                "metadata": {"name": name, "namespace": "default"}, "spec": spec
            }))
            .unwrap(),
        )
    }

    fn workload(api_version: &str, kind: &str, name: &str) -> TargetReference {
        TargetReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
        }
    }

    #[test]
    fn the_budget_of_a_pod_is_its_workloads_or_the_first_whose_selector_matches() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web-0", "labels": {"app": "web"}}
        }))
        .unwrap();
        let by_ref = budget(
            "by-ref",
            json!({"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}}),
        );
        let by_selector = budget(
            "by-selector",
            json!({"selector": {"matchLabels": {"app": "web"}}}),
        );
        let other = budget("other", json!({"selector": {"matchLabels": {"app": "db"}}}));
        let empty = budget("empty", json!({"selector": {}}));
        let deployment = workload("apps/v1beta1", "Deployment", "web");
        let stateful_set = workload("apps/v1", "StatefulSet", "web");
        type Case<'a> = (
            &'a str,
            Vec<Arc<PodUnavailableBudget>>,
            Option<&'a TargetReference>,
            Option<&'a str>,
        );
        let cases: Vec<Case> = vec![
            ("no budget", vec![], Some(&deployment), None),
            // The version of the reference may differ; group, kind and name may not.
            (
                "its workload's",
                vec![other.clone(), by_ref.clone()],
                Some(&deployment),
                Some("by-ref"),
            ),
            (
                "the first in order",
                vec![by_selector.clone(), by_ref.clone()],
                Some(&deployment),
                Some("by-selector"),
            ),
            (
                "another workload's",
                vec![by_ref.clone()],
                Some(&stateful_set),
                None,
            ),
            (
                "a selector that matches",
                vec![other.clone(), by_selector.clone()],
                None,
                Some("by-selector"),
            ),
            (
                "a targetRef budget and no workload",
                vec![by_ref.clone()],
                None,
                None,
            ),
            ("an empty selector matches nothing", vec![empty], None, None),
        ];
        for (name, budgets, workload, expected) in cases {
            assert_eq!(
                related_budget(&budgets, &pod, workload).as_deref(),
                expected,
                "{name}"
            );
        }
    }
}
