//! The shell of the PUB admission decision ([`crate::plan::decision`]): find the pod's
//! budget, decide, and make the grant one optimistic-concurrency step — the status the
//! decision computed is written with `replace_status`, conditioned on the resourceVersion
//! the decision read. A conflict (another webhook replica, or the controller, wrote first)
//! reads the budget again and decides again, [`MAX_ATTEMPTS`] times in all, then refuses
//! with [`conflicts_message`]. A budget deleted meanwhile lets the operation through
//! (K#1567). A refusal records the event `PubPreventPodDeletion` on the pod.

use std::sync::Arc;

use futures::StreamExt as _;
use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_common::admission::pod_chain::{
    PodOperation, PodScope, PodValidationRequest, PodValidator, PodVerdict,
};
use kruise_common::admission::{FailurePolicy, HandlerError};
use kruise_common::family::StepContext;
use kruise_common::pods::selector::selector_matches;
use kruise_common::runtime::Metrics;
use kruise_common::runtime::errors::{is_conflict, is_not_found};
use kruise_common::runtime::events::{EventQueue, EventRecord, Recorder, pod_reference};
use kube::api::{Api, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, ResourceExt as _};

use crate::api::v1beta1::{PodUnavailableBudget, PubOperation};
use crate::api::{LEGACY_RELATED_PUB_ANNOTATION, RELATED_PUB_ANNOTATION};
use crate::plan::budget::has_unavailable_label;
use crate::plan::decision::{Decision, Gates, MAX_ATTEMPTS, Request, conflicts_message, decide};

/// The answer to one pod operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Let it through.
    Allowed,
    /// Refuse it with this message.
    Denied(String),
}

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

    /// Decides on `operation` on `pod` (for an UPDATE, the pod before it).
    pub async fn admit(
        &self,
        pod: &Pod,
        operation: &PubOperation,
        dry_run: bool,
    ) -> Result<Verdict, kube::Error> {
        let namespace = pod.namespace().unwrap_or_default();
        let api = Api::<PodUnavailableBudget>::namespaced(self.client.clone(), &namespace);
        let mut budget = self.budget_of(&api, pod).await?;
        let budget_name = budget.as_ref().map(|b| b.name_any()).unwrap_or_default();
        for _ in 0..MAX_ATTEMPTS {
            let request = Request {
                pod,
                operation,
                dry_run,
                now: Timestamp::now(),
            };
            let status = match decide(budget.as_ref(), &request, self.gates) {
                Decision::Allow(_) => return Ok(Verdict::Allowed),
                Decision::Deny(message) => {
                    self.record_refusal(pod);
                    return Ok(Verdict::Denied(message));
                }
                Decision::Consume(status) => status,
            };
            // `decide` consumes only with a budget.
            let Some(mut granted) = budget.take() else {
                return Ok(Verdict::Allowed);
            };
            let name = granted.name_any();
            granted.status = Some(status);
            match api
                .replace_status(&name, &PostParams::default(), &granted)
                .await
            {
                Ok(_) => return Ok(Verdict::Allowed),
                Err(e) if is_not_found(&e) => return Ok(Verdict::Allowed),
                Err(e) if is_conflict(&e) => budget = api.get_opt(&name).await?,
                Err(e) => return Err(e),
            }
        }
        self.record_refusal(pod);
        Ok(Verdict::Denied(conflicts_message(&budget_name)))
    }

    /// The pod's budget: the one its related-pub annotation names, else the first of its
    /// namespace whose selector matches it.
    async fn budget_of(
        &self,
        api: &Api<PodUnavailableBudget>,
        pod: &Pod,
    ) -> Result<Option<PodUnavailableBudget>, kube::Error> {
        let annotations = pod.annotations();
        let named = annotations
            .get(RELATED_PUB_ANNOTATION)
            .or_else(|| annotations.get(LEGACY_RELATED_PUB_ANNOTATION))
            .filter(|n| !n.is_empty());
        if let Some(name) = named {
            return api.get_opt(name).await;
        }
        let labels = pod.labels();
        Ok(api
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .find(|b| {
                b.spec
                    .selector
                    .as_ref()
                    .is_some_and(|s| selector_matches(s, labels).unwrap_or(false))
            }))
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
