//! The shell of the PUB admission decision ([`crate::plan::decision`]): find the pod's
//! budget, decide, and make the grant one optimistic-concurrency step — the status the
//! decision computed is written with `replace_status`, conditioned on the resourceVersion
//! the decision read (`kruise_common::pub_budget::check`, which CloneSet's pre-check takes
//! too). A conflict (another webhook replica, or the controller, wrote first) reads the
//! budget again and decides again, 4 times in all, then refuses with the timeout message. A
//! budget deleted meanwhile lets the operation through (K#1567). A refusal records the
//! event `PubPreventPodDeletion` on the pod.

use std::sync::Arc;

use futures::StreamExt as _;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_common::admission::pod_chain::{
    PodOperation, PodScope, PodValidationRequest, PodValidator, PodVerdict,
};
use kruise_common::admission::{FailurePolicy, HandlerError};
use kruise_common::family::StepContext;
use kruise_common::pub_budget::check::check_pod;
use kruise_common::runtime::Metrics;
use kruise_common::runtime::events::{EventQueue, EventRecord, Recorder, pod_reference};
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, ResourceExt as _};

use crate::api::v1beta1::{PodUnavailableBudget, PubOperation};
use crate::plan::budget::has_unavailable_label;
use crate::plan::decision::Gates;

pub use kruise_common::pub_budget::check::Verdict;

/// Decides pod operations against their budgets, writing each grant before answering.
#[derive(Clone)]
pub struct PubAdmission {
    client: Client,
    gates: Gates,
    events: Option<EventQueue>,
}

impl PubAdmission {
    /// Admission through `client` under `gates`; refusals are recorded through `events`.
    pub fn new(client: Client, gates: Gates, events: Option<EventQueue>) -> Self {
        Self {
            client,
            gates,
            events,
        }
    }

    /// Decides on `operation` on `pod` (for an UPDATE, the pod before it): the grant as
    /// `kruise_common::pub_budget::check::check_pod` makes it, a refusal recorded as an event.
    pub async fn admit(
        &self,
        pod: &Pod,
        operation: &PubOperation,
        dry_run: bool,
    ) -> Result<Verdict, kube::Error> {
        let verdict = check_pod(&self.client, pod, operation, dry_run, self.gates).await?;
        if matches!(verdict, Verdict::Denied(_)) {
            self.record_refusal(pod);
        }
        Ok(verdict)
    }

    fn record_refusal(&self, pod: &Pod) {
        if let Some(events) = &self.events {
            Recorder::new(
                events,
                pod_reference(pod.namespace().as_deref(), &pod.name_any()),
            )
            .record(EventRecord::warning(
                "PubPreventPodDeletion",
                "openkruise pub prevents pod deletion",
            ));
        }
    }
}

/// The PUB step of kruise-webhook's validating pod chain (`/validate-pod`): pod DELETE and
/// eviction under `PodUnavailableBudgetDeleteGate`, pod UPDATE under
/// `PodUnavailableBudgetUpdateGate`, decided by [`PubAdmission`]. Scoped to the pods the
/// budgets of the cluster select (a targetRef budget: its namespace), so a stopped webhook
/// never blocks a pod no budget covers.
pub struct PubPodValidator {
    admission: Option<PubAdmission>,
    budgets: Option<Store<PodUnavailableBudget>>,
}

/// Builds the step for kruise-webhook: a watch of the budgets for its scopes, and the
/// admission, when it serves a cluster.
pub fn pub_validator_step(ctx: &StepContext) -> Arc<dyn PodValidator> {
    let gates = Gates {
        delete: ctx.gates.enabled(crate::admission::DELETE_GATE),
        update: ctx.gates.enabled(crate::admission::UPDATE_GATE),
        in_place_vertical_scaling: ctx.gates.enabled("InPlacePodVerticalScaling"),
    };
    let Some(live) = &ctx.live else {
        return Arc::new(PubPodValidator {
            admission: None,
            budgets: None,
        });
    };
    let events = EventQueue::for_controller(live.client.clone(), WEBHOOK_REPORTER, &Metrics::new());
    let (store, writer) = reflector::store::<PodUnavailableBudget>();
    let stream = reflector::reflector(
        writer,
        // Backed off, so a cluster without the CRD (or an API server away) is retried
        // calmly rather than in a tight loop.
        watcher::watcher(Api::all(live.client.clone()), watcher::Config::default())
            .default_backoff(),
    );
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
    Arc::new(PubPodValidator {
        admission: Some(PubAdmission::new(live.client.clone(), gates, Some(events))),
        budgets: Some(store),
    })
}

/// The reporter of the events the webhook records.
const WEBHOOK_REPORTER: &str = "kruise-webhook";

impl PodValidator for PubPodValidator {
    fn name(&self) -> &'static str {
        crate::binary::NAME
    }

    fn order(&self) -> u32 {
        50
    }

    fn scopes(&self) -> Vec<PodScope> {
        let Some(store) = &self.budgets else {
            return Vec::new();
        };
        store
            .state()
            .iter()
            .map(|budget| PodScope {
                namespace_selector: Some(LabelSelector {
                    match_labels: Some(
                        [(
                            "kubernetes.io/metadata.name".to_string(),
                            budget.namespace().unwrap_or_default(),
                        )]
                        .into(),
                    ),
                    ..Default::default()
                }),
                object_selector: match &budget.spec.target_reference {
                    Some(_) => None,
                    None => budget.spec.selector.clone(),
                },
            })
            .collect()
    }

    fn failure_policy(&self) -> FailurePolicy {
        FailurePolicy::Fail
    }

    fn validate<'a>(
        &'a self,
        request: &'a PodValidationRequest,
    ) -> BoxFuture<'a, Result<PodVerdict, HandlerError>> {
        Box::pin(async move {
            let Some(admission) = &self.admission else {
                return Ok(PodVerdict::Allow);
            };
            let operation = match request.operation {
                PodOperation::Delete => PubOperation::Delete,
                PodOperation::Evict => PubOperation::Evict,
                PodOperation::Update => {
                    let (Some(old), Some(new)) = (&request.pod, &request.new_pod) else {
                        return Ok(PodVerdict::Allow);
                    };
                    if !may_make_unavailable(old, new) {
                        return Ok(PodVerdict::Allow);
                    }
                    PubOperation::Update
                }
            };
            let pod = match &request.pod {
                Some(pod) => pod.clone(),
                None => {
                    let pods = Api::<Pod>::namespaced(admission.client.clone(), &request.namespace);
                    match pods.get_opt(&request.name).await {
                        Ok(Some(pod)) => pod,
                        Ok(None) => return Ok(PodVerdict::Allow),
                        Err(e) => {
                            return Err(HandlerError::Internal(format!("reading the pod: {e}")));
                        }
                    }
                }
            };
            match admission.admit(&pod, &operation, request.dry_run).await {
                Ok(Verdict::Allowed) => Ok(PodVerdict::Allow),
                Ok(Verdict::Denied(message)) => Ok(PodVerdict::Deny(message)),
                Err(e) => Err(HandlerError::Internal(format!("PodUnavailableBudget: {e}"))),
            }
        })
    }
}

/// OpenKruise's `IsPodUnavailableChanged`: the spec changed, or an `unavailable-pod.kruise.io/*`
/// label was added. Other changes (labels, annotations, status) never make a pod unavailable.
pub fn may_make_unavailable(old: &Pod, new: &Pod) -> bool {
    old.spec != new.spec || (!has_unavailable_label(old) && has_unavailable_label(new))
}
