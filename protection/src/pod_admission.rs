//! The shell of the PUB admission decision ([`crate::plan::decision`]): find the pod's
//! budget, decide, and make the grant one optimistic-concurrency step — the status the
//! decision computed is written with `replace_status`, conditioned on the resourceVersion
//! the decision read. A conflict (another webhook replica, or the controller, wrote first)
//! reads the budget again and decides again, [`MAX_ATTEMPTS`] times in all, then refuses
//! with [`conflicts_message`]. A budget deleted meanwhile lets the operation through
//! (K#1567). A refusal records the event `PubPreventPodDeletion` on the pod.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kruise_common::pods::selector::selector_matches;
use kruise_common::runtime::errors::{is_conflict, is_not_found};
use kruise_common::runtime::events::{EventQueue, EventRecord, Recorder, pod_reference};
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt as _};

use crate::api::v1beta1::{PodUnavailableBudget, PubOperation};
use crate::api::{LEGACY_RELATED_PUB_ANNOTATION, RELATED_PUB_ANNOTATION};
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
