//! The shell of the PUB admission decision ([`crate::plan::decision`]): find the pod's
//! budget, decide, and make the grant one optimistic-concurrency step — the status the
//! decision computed is written with `replace_status`, conditioned on the resourceVersion
//! the decision read (`kruise_runtime::pub_client`, which CloneSet's pre-check takes
//! too). A conflict (another webhook replica, or the controller, wrote first) reads the
//! budget again and decides again, 4 times in all, then refuses with the timeout message. A
//! budget deleted meanwhile lets the operation through (K#1567). A refusal records the
//! event `PubPreventPodDeletion` on the pod.
//!
//! In kruise-webhook the first decision is made from the step's watches of the budgets and
//! the pods ([`BudgetCache`]), as OpenKruise's webhook decides from its informers: a refusal
//! of a DELETE or UPDATE costs no API request (an eviction's, one pod read), a grant the one
//! conditioned write.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_admission::pod_chain::{
    PodOperation, PodScope, PodValidationRequest, PodValidator, PodVerdict,
};
use kruise_admission::protection_log;
use kruise_admission::{FailurePolicy, HandlerError};
use kruise_runtime::Metrics;
use kruise_runtime::controller::trim_for_cache;
use kruise_runtime::events::{EventQueue, EventRecord, Recorder, pod_reference};
use kruise_runtime::family::{LiveCluster, StepContext};
use kruise_runtime::pub_client::{BudgetCache, check_pod};
use kruise_runtime::watch::{Loaded, loaded_flag};
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, ResourceExt as _};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::api::v1beta1::{PodUnavailableBudget, PubOperation};
use crate::deletion_webhook::WorkloadLabels;
use crate::plan::decision::Gates;
use crate::plan::pod_update::update_operation;

pub use kruise_runtime::pub_client::Verdict;

/// Decides pod operations against their budgets, writing each grant before answering.
#[derive(Clone)]
pub struct PubAdmission {
    client: Client,
    gates: Gates,
    events: Option<EventQueue>,
    /// The watches the first decision is made from; without them, the API.
    watched: Option<Arc<Watched>>,
}

/// The step's watches: the budgets (with the grants this replica wrote) and the pods.
struct Watched {
    budgets: BudgetCache,
    pods: Store<Pod>,
}

/// How long a review waits for the step's watches to list the cluster once (a replica just
/// started); after it the review fails, and the entry fails closed.
const CACHE_SYNC_TIMEOUT: Duration = Duration::from_secs(10);

impl PubAdmission {
    /// Admission through `client` under `gates`; refusals are recorded through `events`.
    pub fn new(client: Client, gates: Gates, events: Option<EventQueue>) -> Self {
        Self {
            client,
            gates,
            events,
            watched: None,
        }
    }

    /// As [`PubAdmission::new`], deciding first from the watches `budgets` and `pods`.
    pub fn watched(
        client: Client,
        gates: Gates,
        events: Option<EventQueue>,
        budgets: Store<PodUnavailableBudget>,
        pods: Store<Pod>,
    ) -> Self {
        Self {
            client,
            gates,
            events,
            watched: Some(Arc::new(Watched {
                budgets: BudgetCache::new(budgets),
                pods,
            })),
        }
    }

    /// Decides on `operation` on `pod` (for an UPDATE, the pod before it): the grant as
    /// `kruise_runtime::pub_client::check_pod` makes it, a refusal recorded as an event.
    pub async fn admit(
        &self,
        pod: &Pod,
        operation: &PubOperation,
        dry_run: bool,
    ) -> Result<Verdict, AdmitError> {
        self.wait_until_synced().await?;
        let verdict = match &self.watched {
            Some(watched) => {
                watched
                    .budgets
                    .check_pod(&self.client, pod, false, operation, dry_run, self.gates)
                    .await?
            }
            None => check_pod(&self.client, pod, false, operation, dry_run, self.gates).await?,
        };
        if matches!(verdict, Verdict::Denied(_)) {
            self.record_refusal(pod);
        }
        Ok(verdict)
    }

    /// Decides on evicting the pod `namespace/name` (the eviction does not carry the pod):
    /// from the watch's copy when it has one, confirmed on the API's where the pod's own
    /// state would exempt it or the budget would refuse; read from the API otherwise. A pod that is gone is let through.
    pub async fn admit_eviction(
        &self,
        namespace: &str,
        name: &str,
        dry_run: bool,
    ) -> Result<Verdict, AdmitError> {
        let operation = PubOperation::Evict;
        if let Some(watched) = &self.watched {
            watched.wait_until_synced().await?;
            let key = ObjectRef::new(name).within(namespace);
            if let Some(pod) = watched.pods.get(&key) {
                let verdict = watched
                    .budgets
                    .check_pod(&self.client, &pod, true, &operation, dry_run, self.gates)
                    .await?;
                if matches!(verdict, Verdict::Denied(_)) {
                    self.record_refusal(&pod);
                }
                return Ok(verdict);
            }
        }
        let pods = Api::<Pod>::namespaced(self.client.clone(), namespace);
        match pods.get_opt(name).await? {
            Some(pod) => Ok(self.admit(&pod, &operation, dry_run).await?),
            None => Ok(Verdict::Allowed),
        }
    }

    /// The pod as the watch holds it, when there is one.
    fn watched_pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        let watched = self.watched.as_ref()?;
        watched.pods.get(&ObjectRef::new(name).within(namespace))
    }

    /// Waits for the watches to have listed the cluster, when there are any.
    async fn wait_until_synced(&self) -> Result<(), AdmitError> {
        match &self.watched {
            Some(watched) => watched.wait_until_synced().await,
            None => Ok(()),
        }
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

/// Why a pod operation could not be decided.
#[derive(Debug, thiserror::Error)]
pub enum AdmitError {
    /// Reading or writing the budget or the pod failed.
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// The step's watches have not listed the cluster yet.
    #[error("the PodUnavailableBudget and pod watches have not synced within {0:?}")]
    NotSynced(Duration),
}

impl Watched {
    /// Waits (bounded) for both watches' first list: an empty cache would find no budget and
    /// let every operation through.
    async fn wait_until_synced(&self) -> Result<(), AdmitError> {
        let both = async {
            self.budgets.store().wait_until_ready().await?;
            self.pods.wait_until_ready().await
        };
        match tokio::time::timeout(CACHE_SYNC_TIMEOUT, both).await {
            Ok(Ok(())) => Ok(()),
            _ => Err(AdmitError::NotSynced(CACHE_SYNC_TIMEOUT)),
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
    /// Set once `budgets` has loaded (or the CRD is not installed); absent: no cluster.
    loaded: Option<Loaded>,
    /// OpenKruise's refusal counter, `pod_unavailable_budget{kind_namespace_name,username}`.
    refusals: Family<WorkloadLabels, Counter>,
}

/// The name and help of OpenKruise's refusal counter (`pubcontrol.PodUnavailableBudgetMetrics`);
/// the OpenMetrics encoder exposes it as `pod_unavailable_budget_total`.
const REFUSALS_METRIC: (&str, &str) = ("pod_unavailable_budget", "Pod Unavailable Budget Metrics");

/// Builds the step for kruise-webhook: a watch of the budgets for its scopes, and the
/// admission, when it serves a cluster.
pub fn pub_validator_step(ctx: &StepContext) -> Arc<dyn PodValidator> {
    let gates = Gates {
        delete: ctx.gates.enabled(crate::admission::DELETE_GATE),
        update: ctx.gates.enabled(crate::admission::UPDATE_GATE),
        in_place_vertical_scaling: ctx.gates.enabled("InPlacePodVerticalScaling"),
    };
    let refusals = Family::<WorkloadLabels, Counter>::default();
    ctx.metrics
        .register(REFUSALS_METRIC.0, REFUSALS_METRIC.1, refusals.clone());
    let Some(live) = &ctx.live else {
        return Arc::new(PubPodValidator {
            admission: None,
            budgets: None,
            loaded: None,
            refusals,
        });
    };
    let events = EventQueue::for_controller(live.client.clone(), WEBHOOK_REPORTER, &Metrics::new());
    let (budgets, budget_writer) = reflector::store::<PodUnavailableBudget>();
    let budget_stream = reflector::reflector(
        budget_writer,
        // Backed off, so a cluster without the CRD (or an API server away) is retried
        // calmly rather than in a tight loop.
        watcher::watcher(Api::all(live.client.clone()), watcher::Config::default())
            .default_backoff(),
    );
    // Every pod, for the evictions (which name a pod without carrying it): the budgets'
    // pods may be in any namespace, and a budget's selector may change.
    let (pods, pod_writer) = reflector::store::<Pod>();
    let pod_stream = reflector::reflector(
        pod_writer,
        watcher::watcher(Api::all(live.client.clone()), watcher::Config::default())
            .default_backoff()
            .map(|event| event.map(|e| e.modify(trim_for_cache))),
    );
    let loaded = budgets_loaded(live, &budgets);
    let refresh = live.refresh.clone();
    let shutdown = live.shutdown.clone();
    tokio::spawn(async move {
        let mut budget_stream = std::pin::pin!(budget_stream);
        let mut pod_stream = std::pin::pin!(pod_stream);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                event = budget_stream.next() => match event {
                    // A budget came, went or changed its selector: the entries follow.
                    Some(Ok(_)) => refresh.notify_one(),
                    Some(Err(e)) => tracing::warn!(error = %e, "watching PodUnavailableBudgets"),
                    None => return,
                },
                event = pod_stream.next() => match event {
                    Some(Ok(_)) => {}
                    Some(Err(e)) => tracing::warn!(error = %e, "watching pods"),
                    None => return,
                },
            }
        }
    });
    Arc::new(PubPodValidator {
        admission: Some(PubAdmission::watched(
            live.client.clone(),
            gates,
            Some(events),
            budgets.clone(),
            pods,
        )),
        budgets: Some(budgets),
        loaded: Some(loaded),
        refusals,
    })
}

/// Set once `budgets` (kruise-webhook's watch of every budget) has loaded, or the CRD is
/// not installed: until then the steps' scopes are not known.
pub(crate) fn budgets_loaded(live: &LiveCluster, budgets: &Store<PodUnavailableBudget>) -> Loaded {
    loaded_flag(
        &live.client,
        budgets.clone(),
        crate::api::CRD,
        live.refresh.clone(),
        live.shutdown.clone(),
    )
}

/// The pods the budgets of `store` may cover: a selector budget's pods in its namespace, a
/// targetRef budget's whole namespace; none without a budget.
pub(crate) fn budget_scopes(store: &Store<PodUnavailableBudget>) -> Vec<PodScope> {
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

/// The reporter of the events the webhook records.
const WEBHOOK_REPORTER: &str = "kruise-webhook";

impl PodValidator for PubPodValidator {
    fn name(&self) -> &'static str {
        "protection"
    }

    fn order(&self) -> u32 {
        50
    }

    fn scopes(&self) -> Vec<PodScope> {
        match &self.budgets {
            Some(store) => budget_scopes(store),
            None => Vec::new(),
        }
    }

    fn scopes_known(&self) -> bool {
        self.loaded.as_ref().is_none_or(Loaded::get)
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
                    match update_operation(old, new) {
                        Some(operation) => operation,
                        None => return Ok(PodVerdict::Allow),
                    }
                }
            };
            let verdict = match &request.pod {
                Some(pod) => admission.admit(pod, &operation, request.dry_run).await,
                None => {
                    admission
                        .admit_eviction(&request.namespace, &request.name, request.dry_run)
                        .await
                }
            };
            if let Ok(Verdict::Denied(_)) = &verdict {
                let watched;
                let pod = match &request.pod {
                    Some(pod) => Some(pod),
                    None => {
                        watched = admission.watched_pod(&request.namespace, &request.name);
                        watched.as_deref()
                    }
                };
                self.count_refusal(pod, request);
            }
            match verdict {
                Ok(Verdict::Allowed) => Ok(PodVerdict::Allow),
                Ok(Verdict::Denied(message)) => Ok(PodVerdict::Deny(message)),
                Err(e) => Err(HandlerError::Internal(format!("PodUnavailableBudget: {e}"))),
            }
        })
    }
}

impl PubPodValidator {
    /// The refusal in the protection log (`--protection-log-path`) and counted in
    /// `pod_unavailable_budget`, as OpenKruise records it: the pod's controller (`unknown`
    /// and the pod's name without one), its namespace (`default` when empty) and who asked.
    fn count_refusal(&self, pod: Option<&Pod>, request: &PodValidationRequest) {
        let controller = pod.and_then(|p| {
            p.metadata
                .owner_references
                .iter()
                .flatten()
                .find(|r| r.controller == Some(true))
        });
        let (kind, name) = match controller {
            Some(owner) => (owner.kind.as_str(), owner.name.as_str()),
            None => ("unknown", request.name.as_str()),
        };
        let namespace = match request.namespace.as_str() {
            "" => "default",
            namespace => namespace,
        };
        protection_log::record(
            protection_log::EVENT_PUB,
            kind,
            namespace,
            name,
            &request.username,
        );
        self.refusals
            .get_or_create(&WorkloadLabels {
                kind_namespace_name: format!("{kind}_{namespace}_{name}"),
                username: request.username.clone(),
            })
            .inc();
    }
}
