//! The grant as one optimistic-concurrency step (OpenKruise's `PodUnavailableBudgetValidatePod`
//! with its status write): find the pod's budget, [`decide`], and write the status the
//! decision computed with `replace_status`, conditioned on the resourceVersion the decision
//! read. A conflict (a webhook replica, a workload controller or the PUB controller wrote
//! first) reads the budget again and decides again, [`MAX_ATTEMPTS`] times in all, then
//! refuses with [`conflicts_message`]. A budget deleted meanwhile, or a cluster without the
//! kind, lets the operation through (K#1567).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt as _};

use super::decision::{Decision, Gates, MAX_ATTEMPTS, Request, conflicts_message, decide};
use super::{
    LEGACY_RELATED_PUB_ANNOTATION, PodUnavailableBudget, PubOperation, RELATED_PUB_ANNOTATION,
};
use crate::pods::selector::selector_matches;
use crate::runtime::errors::{is_conflict, is_not_found};

/// The answer to one pod operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Let it through (any grant is written).
    Allowed,
    /// Refuse it with this message.
    Denied(String),
}

/// Decides on `operation` on `pod` (for an UPDATE, the pod before it) under `gates`,
/// writing a grant to the budget's status before answering.
pub async fn check_pod(
    client: &Client,
    pod: &Pod,
    operation: &PubOperation,
    dry_run: bool,
    gates: Gates,
) -> Result<Verdict, kube::Error> {
    let namespace = pod.namespace().unwrap_or_default();
    let api = Api::<PodUnavailableBudget>::namespaced(client.clone(), &namespace);
    let mut budget = budget_of(&api, pod).await?;
    let budget_name = budget.as_ref().map(|b| b.name_any()).unwrap_or_default();
    for _ in 0..MAX_ATTEMPTS {
        let request = Request {
            pod,
            operation,
            dry_run,
            now: Timestamp::now(),
        };
        let status = match decide(budget.as_ref(), &request, gates) {
            Decision::Allow(_) => return Ok(Verdict::Allowed),
            Decision::Deny(message) => return Ok(Verdict::Denied(message)),
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
    Ok(Verdict::Denied(conflicts_message(&budget_name)))
}

/// The pod's budget: the one its related-pub annotation names, else the first of its
/// namespace whose selector matches it; none where the kind is not served.
async fn budget_of(
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
    let budgets = match api.list(&Default::default()).await {
        Ok(list) => list.items,
        Err(e) if is_not_found(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let labels = pod.labels();
    Ok(budgets.into_iter().find(|b| {
        b.spec
            .selector
            .as_ref()
            .is_some_and(|s| selector_matches(s, labels).unwrap_or(false))
    }))
}
