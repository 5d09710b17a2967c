//! The grant as one optimistic-concurrency step (OpenKruise's `PodUnavailableBudgetValidatePod`
//! with its status write): find the pod's budget, [`decide`], and write the status the
//! decision computed with `replace_status`, conditioned on the resourceVersion the decision
//! read. A conflict (a webhook replica, a workload controller or the PUB controller wrote
//! first) reads the budget again and decides again, [`MAX_ATTEMPTS`] times in all, then
//! refuses with [`conflicts_message`]. A budget deleted meanwhile, or a cluster without the
//! kind, lets the operation through (K#1567).
//!
//! Both take the pod either as a request carries it or as a watch holds it (`pod_from_watch`):
//! a watch's copy may lag, so a decision on it that lets the operation through unrecorded
//! because of the pod's own state (unavailable, no-protect, ignored), or refuses it, is made
//! again on the pod read from the API (`pod_to_decide_on`). Without it a cache that has
//! not yet seen a pod become Ready would let it be disrupted without spending the budget.
//! Likewise [`check_pod`] finds no budget for a copy that predates the related-pub
//! annotation naming a targetRef budget, so it reads the pod then too.
//!
//! [`check_pod`] reads the budget from the API. [`BudgetCache::check_pod`] makes the first
//! decision from a watch of the budgets instead, as OpenKruise's webhook decides from its
//! informer, so a refusal of a pod the request carries costs no API request and a grant one
//! (the conditioned write): a stale copy can only make the write conflict (then the budget
//! is read from the API) or refuse an operation a fresher copy would allow, never grant one
//! too many. Grants on one budget are written one at a time per process, and each holds one
//! allowed disruption in reserve from its decision to its answer, so a review that finds
//! the rest of the budget held by grants in flight is refused at once rather than queued.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt as _};
use tokio::sync::oneshot;

use crate::errors::{is_conflict, is_not_found};
use kruise_core::pods::selector::selector_matches;
use kruise_core::pub_budget::decision::{
    Decision, Gates, MAX_ATTEMPTS, Request, conflicts_message, decide,
};
use kruise_core::pub_budget::{
    LEGACY_RELATED_PUB_ANNOTATION, PodUnavailableBudget, PubOperation, RELATED_PUB_ANNOTATION,
};

/// The answer to one pod operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Let it through (any grant is written).
    Allowed,
    /// Refuse it with this message.
    Denied(String),
}

/// Decides on `operation` on `pod` (for an UPDATE, the pod before it) under `gates`,
/// writing a grant to the budget's status before answering. `pod_from_watch`: the pod is a
/// watch's copy (a controller's cache), confirmed on the API's where it decides.
pub async fn check_pod(
    client: &Client,
    pod: &Pod,
    pod_from_watch: bool,
    operation: &PubOperation,
    dry_run: bool,
    gates: Gates,
) -> Result<Verdict, kube::Error> {
    let namespace = pod.namespace().unwrap_or_default();
    let api = Api::<PodUnavailableBudget>::namespaced(client.clone(), &namespace);
    let mut lookup = budget_of(&api, pod).await?;
    let mut pod = Cow::Borrowed(pod);
    if pod_from_watch && lookup.budget.is_none() && lookup.unnamed_target_ref {
        // A targetRef budget is found only through the pod's related-pub annotation, which
        // a watch's copy may not show yet: look again on the pod as it is.
        let pods = Api::<Pod>::namespaced(client.clone(), &namespace);
        let Some(read) = pods.get_opt(&pod.name_any()).await? else {
            return Ok(Verdict::Allowed);
        };
        lookup = budget_of(&api, &read).await?;
        pod = Cow::Owned(read);
    }
    let budget = lookup.budget;
    let still_from_watch = pod_from_watch && matches!(pod, Cow::Borrowed(_));
    let asked = Asked {
        pod: &pod,
        operation,
        dry_run,
    };
    let Some(pod) =
        pod_to_decide_on(client, budget.as_ref(), asked, still_from_watch, gates).await?
    else {
        return Ok(Verdict::Allowed);
    };
    let asked = [Asked { pod: &pod, ..asked }];
    let mut outcome = decide_and_write(&api, budget, &asked, gates).await?;
    Ok(outcome.verdicts.pop().unwrap_or(Verdict::Allowed))
}

/// The pod to decide `asked` on: its pod itself, unless that is a watch's copy
/// (`pod_from_watch`) and the decision on it against `budget` lets the operation through
/// because of the pod's own state, or refuses it: then the pod read from the API. `None`
/// when the pod is gone (the operation goes through: there is nothing left to protect).
async fn pod_to_decide_on<'a>(
    client: &Client,
    budget: Option<&PodUnavailableBudget>,
    asked: Asked<'a>,
    pod_from_watch: bool,
    gates: Gates,
) -> Result<Option<Cow<'a, Pod>>, kube::Error> {
    let pod = asked.pod;
    if !pod_from_watch {
        return Ok(Some(Cow::Borrowed(pod)));
    }
    let request = Request {
        pod,
        operation: asked.operation,
        dry_run: asked.dry_run,
        now: Timestamp::now(),
    };
    let confirm = match decide(budget, &request, gates) {
        Decision::Allow(exempt) => exempt.depends_on_pod(),
        Decision::Deny(_) => true,
        Decision::Consume(_) => false,
    };
    if !confirm {
        return Ok(Some(Cow::Borrowed(pod)));
    }
    let namespace = pod.namespace().unwrap_or_default();
    let pods = Api::<Pod>::namespaced(client.clone(), &namespace);
    Ok(pods.get_opt(&pod.name_any()).await?.map(Cow::Owned))
}

/// One operation on a pod to decide on.
#[derive(Clone, Copy)]
struct Asked<'a> {
    pod: &'a Pod,
    operation: &'a PubOperation,
    dry_run: bool,
}

/// What [`decide_and_write`] did.
struct Outcome {
    /// The answer to each operation asked, in order.
    verdicts: Vec<Verdict>,
    /// The budget the grants' status write returned, and the version that write was
    /// conditioned on.
    written: Option<(PodUnavailableBudget, String)>,
}

/// Decides on each of `asked` in turn against `budget` (each grant spends one disruption of
/// what the one before left) and writes their grants in one status write, conditioned on
/// the version decided on; after a conflict the budget is read from the API and every one
/// is decided again.
async fn decide_and_write(
    api: &Api<PodUnavailableBudget>,
    mut budget: Option<PodUnavailableBudget>,
    asked: &[Asked<'_>],
    gates: Gates,
) -> Result<Outcome, kube::Error> {
    let budget_name = budget.as_ref().map(|b| b.name_any()).unwrap_or_default();
    let mut verdicts = Vec::new();
    let mut granted = Vec::new();
    for _ in 0..MAX_ATTEMPTS {
        let now = Timestamp::now();
        let mut working = budget.take();
        verdicts.clear();
        granted.clear();
        for (i, one) in asked.iter().enumerate() {
            let request = Request {
                pod: one.pod,
                operation: one.operation,
                dry_run: one.dry_run,
                now,
            };
            verdicts.push(match decide(working.as_ref(), &request, gates) {
                Decision::Allow(_) => Verdict::Allowed,
                Decision::Deny(message) => Verdict::Denied(message),
                Decision::Consume(status) => {
                    // `decide` consumes only with a budget.
                    if let Some(working) = working.as_mut() {
                        working.status = Some(status);
                    }
                    granted.push(i);
                    Verdict::Allowed
                }
            });
        }
        let Some(to_write) = working.filter(|_| !granted.is_empty()) else {
            return Ok(Outcome {
                verdicts,
                written: None,
            });
        };
        let name = to_write.name_any();
        let conditioned_on = to_write.resource_version().unwrap_or_default();
        match api
            .replace_status(&name, &PostParams::default(), &to_write)
            .await
        {
            Ok(written) => {
                return Ok(Outcome {
                    verdicts,
                    written: Some((written, conditioned_on)),
                });
            }
            // A budget deleted meanwhile lets every operation through (K#1567).
            Err(e) if is_not_found(&e) => {
                return Ok(Outcome {
                    verdicts: vec![Verdict::Allowed; asked.len()],
                    written: None,
                });
            }
            Err(e) if is_conflict(&e) => budget = api.get_opt(&name).await?,
            Err(e) => return Err(e),
        }
    }
    for i in granted {
        verdicts[i] = Verdict::Denied(conflicts_message(&budget_name));
    }
    Ok(Outcome {
        verdicts,
        written: None,
    })
}

/// What [`budget_of`] found.
struct BudgetLookup {
    /// The pod's budget.
    budget: Option<PodUnavailableBudget>,
    /// The pod names no budget and its namespace has a targetRef one, which only the
    /// related-pub annotation leads to: the pod may be its once annotated.
    unnamed_target_ref: bool,
}

/// The pod's budget: the one its related-pub annotation names, else the first of its
/// namespace whose selector matches it; none where the kind is not served.
async fn budget_of(
    api: &Api<PodUnavailableBudget>,
    pod: &Pod,
) -> Result<BudgetLookup, kube::Error> {
    if let Some(name) = related_pub(pod) {
        return Ok(BudgetLookup {
            budget: api.get_opt(name).await?,
            unnamed_target_ref: false,
        });
    }
    let budgets = match api.list(&Default::default()).await {
        Ok(list) => list.items,
        Err(e) if is_not_found(&e) => Vec::new(),
        Err(e) => return Err(e),
    };
    let unnamed_target_ref = budgets.iter().any(|b| b.spec.target_reference.is_some());
    Ok(BudgetLookup {
        budget: budgets.into_iter().find(|b| selects(b, pod)),
        unnamed_target_ref,
    })
}

/// The budget the pod's related-pub annotation names (the legacy one second).
fn related_pub(pod: &Pod) -> Option<&str> {
    let annotations = pod.annotations();
    annotations
        .get(RELATED_PUB_ANNOTATION)
        .or_else(|| annotations.get(LEGACY_RELATED_PUB_ANNOTATION))
        .map(String::as_str)
        .filter(|n| !n.is_empty())
}

/// Whether the budget's selector matches the pod (a targetRef budget is found by name only).
fn selects(budget: &PodUnavailableBudget, pod: &Pod) -> bool {
    budget
        .spec
        .selector
        .as_ref()
        .is_some_and(|s| selector_matches(s, pod.labels()).unwrap_or(false))
}

/// The budgets as a watch holds them, with each grant this process wrote kept until the
/// watch has caught up with it: without it the next decision on the same budget would read
/// the version before the grant, conflict, and need the API after all.
pub struct BudgetCache {
    store: Store<PodUnavailableBudget>,
    /// Per budget, the last grant this process wrote on it, kept while the watch shows a
    /// version older than it.
    written: Mutex<HashMap<ObjectRef<PodUnavailableBudget>, WrittenGrant>>,
    /// Per budget, the grants waiting to be written (one queue per budget this process has
    /// granted on): concurrent writes on one budget would all be conditioned on the same
    /// version and all but one conflict, so the grants are written one write at a time, each
    /// write carrying every grant queued when it starts.
    granting: Mutex<HashMap<ObjectRef<PodUnavailableBudget>, Arc<GrantQueue>>>,
    /// Per budget, the grants this process has decided on and not yet answered (queued for
    /// the budget's lock or writing): each holds one allowed disruption in reserve, so a
    /// review that finds the rest spoken for is refused at once instead of queueing behind
    /// them only to be refused after their writes.
    reserved: Mutex<HashMap<ObjectRef<PodUnavailableBudget>, i32>>,
}

/// A budget as this process's last grant wrote it, and the versions before it the watch
/// may still show: the version it held at the first of a run of grants and each one the
/// run wrote since. A watch delivers the run's writes one by one, so until it shows the
/// newest, the grant written is the budget to decide on.
struct WrittenGrant {
    budget: PodUnavailableBudget,
    older: Vec<String>,
}

/// How many older versions a [`WrittenGrant`] keeps: a watch further behind than this
/// many of this process's own writes makes the next grant conflict and read the API, which
/// is still correct.
const OLDER_VERSIONS_KEPT: usize = 32;

/// Adds `version` to `versions` unless it is there already.
fn push_new(versions: &mut Vec<String>, version: String) {
    if !versions.contains(&version) {
        versions.push(version);
    }
}

/// The grants decided on one cached budget and waiting for its status write.
#[derive(Default)]
struct GrantQueue {
    waiting: Mutex<Vec<Waiting>>,
    /// Held by the review writing the queue's grants.
    writing: tokio::sync::Mutex<()>,
}

impl GrantQueue {
    /// The waiting grants. A panic elsewhere cannot leave the list half-changed, so a
    /// poisoned lock is taken over: a grant dropped from it would wait forever.
    fn waiting(&self) -> std::sync::MutexGuard<'_, Vec<Waiting>> {
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// One grant waiting to be written, and where its answer goes.
struct Waiting {
    pod: Pod,
    operation: PubOperation,
    dry_run: bool,
    answer: oneshot::Sender<Answer>,
}

/// The answer to a waiting grant; an API error shared by every grant of the write.
type Answer = Result<Verdict, Arc<kube::Error>>;

/// One allowed disruption of a budget held by a grant in flight, given back when dropped.
struct Reservation<'a> {
    reserved: &'a Mutex<HashMap<ObjectRef<PodUnavailableBudget>, i32>>,
    key: ObjectRef<PodUnavailableBudget>,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if let Ok(mut reserved) = self.reserved.lock()
            && let Some(count) = reserved.get_mut(&self.key)
        {
            *count -= 1;
            if *count <= 0 {
                reserved.remove(&self.key);
            }
        }
    }
}

impl BudgetCache {
    /// Decisions from `store`, a reflector's store of every budget the pods may have.
    pub fn new(store: Store<PodUnavailableBudget>) -> Self {
        Self {
            store,
            written: Mutex::new(HashMap::new()),
            granting: Mutex::new(HashMap::new()),
            reserved: Mutex::new(HashMap::new()),
        }
    }

    /// The budgets of the watch.
    pub fn store(&self) -> &Store<PodUnavailableBudget> {
        &self.store
    }

    /// As [`check_pod`], the first decision made on the cached budget: a refusal is answered
    /// without a request, a grant written conditioned on the cached version. `pod_from_watch`:
    /// the pod is a watch's copy (an eviction names the pod but does not carry it), so an
    /// exemption that rests on the pod's state, and a refusal, are confirmed on the pod read
    /// from the API first — a stale copy could show a pod unavailable that is Ready by now,
    /// or miss the `ignoredPodSelector` label a user set just before evicting it.
    pub async fn check_pod(
        &self,
        client: &Client,
        pod: &Pod,
        pod_from_watch: bool,
        operation: &PubOperation,
        dry_run: bool,
        gates: Gates,
    ) -> Result<Verdict, kube::Error> {
        let namespace = pod.namespace().unwrap_or_default();
        let api = Api::<PodUnavailableBudget>::namespaced(client.clone(), &namespace);
        // The first decisions see the budget less the disruptions this process's grants in
        // flight hold in reserve.
        let budget = self
            .budget_of(&namespace, pod)
            .map(|(budget, _)| self.less_reserved(budget));
        let asked = Asked {
            pod,
            operation,
            dry_run,
        };
        let Some(pod) =
            pod_to_decide_on(client, budget.as_ref(), asked, pod_from_watch, gates).await?
        else {
            return Ok(Verdict::Allowed);
        };
        let pod = pod.as_ref();
        let request = Request {
            pod,
            operation,
            dry_run,
            now: Timestamp::now(),
        };
        let grant = match decide(budget.as_ref(), &request, gates) {
            Decision::Consume(_) => budget.as_ref().map(ObjectRef::from_obj),
            // A refusal or an exemption is answered from the cache, waiting on nothing.
            Decision::Allow(_) => return Ok(Verdict::Allowed),
            Decision::Deny(message) => return Ok(Verdict::Denied(message)),
        };
        // A grant holds a disruption in reserve until it is answered, and waits in the
        // budget's queue: the review that takes the queue's lock writes every grant queued
        // by then in one write, decided again on what the write before it left.
        let Some(key) = grant else {
            return Ok(Verdict::Allowed);
        };
        let _reservation = self.reserve(key.clone());
        let queue = self.grant_queue(key.clone());
        let (answer, mut answered) = oneshot::channel();
        queue.waiting().push(Waiting {
            pod: pod.clone(),
            operation: operation.clone(),
            dry_run,
            answer,
        });
        let answer = loop {
            tokio::select! {
                biased;
                answer = &mut answered => break answer,
                _writing = queue.writing.lock() => {
                    // Under the lock the grant is either still queued or answered.
                    if let Ok(answer) = answered.try_recv() {
                        break Ok(answer);
                    }
                    let batch = std::mem::take(&mut *queue.waiting());
                    self.write_grants(&api, &key, batch, gates).await;
                }
            }
        };
        match answer {
            Ok(Ok(verdict)) => Ok(verdict),
            Ok(Err(e)) => Err(kube::Error::Service(Box::new(e))),
            // The writer dropped the grant unanswered (it was cancelled): refuse, safely.
            Err(_) => Ok(Verdict::Denied(conflicts_message(&key.name))),
        }
    }

    /// Decides again on `batch`, queued grants on the budget `key`, against the newest
    /// budget, writes their grants in one status write and answers each.
    async fn write_grants(
        &self,
        api: &Api<PodUnavailableBudget>,
        key: &ObjectRef<PodUnavailableBudget>,
        batch: Vec<Waiting>,
        gates: Gates,
    ) {
        if batch.is_empty() {
            return;
        }
        let (budget, mut older) = match self.store.get(key) {
            Some(cached) => {
                let (budget, mut older) = self.newest_and_older(&cached);
                push_new(&mut older, cached.resource_version().unwrap_or_default());
                (Some(budget), older)
            }
            None => (None, Vec::new()),
        };
        let asked: Vec<Asked<'_>> = batch
            .iter()
            .map(|w| Asked {
                pod: &w.pod,
                operation: &w.operation,
                dry_run: w.dry_run,
            })
            .collect();
        let outcome = decide_and_write(api, budget, &asked, gates).await;
        let verdicts: Vec<Answer> = match outcome {
            Ok(outcome) => {
                if let Some((budget, conditioned_on)) = outcome.written
                    && let Ok(mut grants) = self.written.lock()
                {
                    push_new(&mut older, conditioned_on);
                    let surplus = older.len().saturating_sub(OLDER_VERSIONS_KEPT);
                    older.drain(..surplus);
                    grants.insert(key.clone(), WrittenGrant { budget, older });
                }
                outcome.verdicts.into_iter().map(Ok).collect()
            }
            Err(e) => {
                let e = Arc::new(e);
                batch.iter().map(|_| Err(e.clone())).collect()
            }
        };
        for (waiting, verdict) in batch.into_iter().zip(verdicts) {
            // The review may have gone (its request cancelled); nothing waits for it then.
            let _ = waiting.answer.send(verdict);
        }
    }

    /// `budget` with the disruptions reserved by this process's grants in flight taken
    /// from its `unavailableAllowed`.
    fn less_reserved(&self, mut budget: PodUnavailableBudget) -> PodUnavailableBudget {
        let reserved = self
            .reserved
            .lock()
            .ok()
            .and_then(|r| r.get(&ObjectRef::from_obj(&budget)).copied())
            .unwrap_or(0);
        if let Some(status) = budget.status.as_mut() {
            status.unavailable_allowed -= reserved;
        }
        budget
    }

    /// Holds one disruption of the budget `key` until the returned guard is dropped.
    fn reserve(&self, key: ObjectRef<PodUnavailableBudget>) -> Reservation<'_> {
        if let Ok(mut reserved) = self.reserved.lock() {
            *reserved.entry(key.clone()).or_default() += 1;
        }
        Reservation {
            reserved: &self.reserved,
            key,
        }
    }

    /// The queue of grants waiting to be written on the budget `key`.
    fn grant_queue(&self, key: ObjectRef<PodUnavailableBudget>) -> Arc<GrantQueue> {
        match self.granting.lock() {
            Ok(mut queues) => queues.entry(key).or_default().clone(),
            // A poisoned map: each grant is written alone; conditioned writes stay safe.
            Err(_) => Arc::default(),
        }
    }

    /// The pod's budget as [`budget_of`] finds it, from the cache, with the version the
    /// watch holds.
    fn budget_of(&self, namespace: &str, pod: &Pod) -> Option<(PodUnavailableBudget, String)> {
        let cached = match related_pub(pod) {
            Some(name) => self.store.get(&ObjectRef::new(name).within(namespace)),
            None => self
                .store
                .state()
                .into_iter()
                .filter(|b| b.namespace().as_deref() == Some(namespace))
                .find(|b| selects(b, pod)),
        }?;
        let watched_version = cached.resource_version().unwrap_or_default();
        Some((self.newest(&cached), watched_version))
    }

    /// The cached budget, or the last grant this process wrote on it while the watch still
    /// shows a version before it (a run of grants on one replica builds on the last one
    /// written, however far the watch lags).
    fn newest(&self, cached: &PodUnavailableBudget) -> PodUnavailableBudget {
        self.newest_and_older(cached).0
    }

    /// [`BudgetCache::newest`], with the versions older than it the watch may still show.
    /// Once the watch shows any other version (the grant itself, or someone else's write),
    /// the record is dropped.
    fn newest_and_older(
        &self,
        cached: &PodUnavailableBudget,
    ) -> (PodUnavailableBudget, Vec<String>) {
        let key = ObjectRef::from_obj(cached);
        let Ok(mut grants) = self.written.lock() else {
            return (cached.clone(), Vec::new());
        };
        let cached_version = cached.resource_version().unwrap_or_default();
        match grants.get(&key) {
            Some(grant) if grant.older.contains(&cached_version) => {
                (grant.budget.clone(), grant.older.clone())
            }
            Some(_) => {
                grants.remove(&key);
                (cached.clone(), Vec::new())
            }
            None => (cached.clone(), Vec::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kruise_core::pub_budget::PodUnavailableBudgetStatus;
    use kube::runtime::reflector;
    use serde_json::json;

    fn budget(allowed: i32) -> PodUnavailableBudget {
        let mut budget: PodUnavailableBudget = serde_json::from_value(json!({
            "apiVersion": "policy.kruise.io/v1beta1", "kind": "PodUnavailableBudget",
            "metadata": {"name": "web", "namespace": "default", "resourceVersion": "7"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 2}
        }))
        .unwrap();
        budget.status = Some(PodUnavailableBudgetStatus {
            unavailable_allowed: allowed,
            desired_available: 8,
            current_available: 10,
            total_replicas: 10,
            ..Default::default()
        });
        budget
    }

    fn allowed(budget: &PodUnavailableBudget) -> i32 {
        budget.status.as_ref().map_or(0, |s| s.unavailable_allowed)
    }

    #[test]
    fn grants_in_flight_hold_their_disruptions_until_answered() {
        let (store, _writer) = reflector::store::<PodUnavailableBudget>();
        let cache = BudgetCache::new(store);
        let key = ObjectRef::from_obj(&budget(2));
        assert_eq!(allowed(&cache.less_reserved(budget(2))), 2);
        let first = cache.reserve(key.clone());
        let second = cache.reserve(key.clone());
        assert_eq!(allowed(&cache.less_reserved(budget(2))), 0);
        drop(first);
        assert_eq!(allowed(&cache.less_reserved(budget(2))), 1);
        drop(second);
        assert_eq!(allowed(&cache.less_reserved(budget(2))), 2);
        assert!(cache.reserved.lock().unwrap().is_empty());
    }

    fn at_version(allowed: i32, version: &str) -> PodUnavailableBudget {
        let mut budget = budget(allowed);
        budget.metadata.resource_version = Some(version.into());
        budget
    }

    #[test]
    fn the_last_grant_written_is_decided_on_until_the_watch_shows_it_or_another_write() {
        let (store, _writer) = reflector::store::<PodUnavailableBudget>();
        let cache = BudgetCache::new(store);
        // Two grants written from version 7: 8 then 9.
        cache.written.lock().unwrap().insert(
            ObjectRef::from_obj(&budget(2)),
            WrittenGrant {
                budget: at_version(0, "9"),
                older: vec!["7".into(), "8".into()],
            },
        );
        // The watch delivers the writes one by one: the first of them is not the newest.
        for behind in ["7", "8"] {
            let (newest, older) = cache.newest_and_older(&at_version(1, behind));
            assert_eq!(allowed(&newest), 0, "watch at {behind}");
            assert_eq!(older, ["7", "8"]);
        }
        // The watch shows the last grant: the record has served.
        let (newest, older) = cache.newest_and_older(&at_version(0, "9"));
        assert_eq!((allowed(&newest), older.len()), (0, 0));
        assert!(cache.written.lock().unwrap().is_empty());
    }

    #[test]
    fn a_write_by_someone_else_in_the_watch_drops_the_last_grant() {
        let (store, _writer) = reflector::store::<PodUnavailableBudget>();
        let cache = BudgetCache::new(store);
        cache.written.lock().unwrap().insert(
            ObjectRef::from_obj(&budget(2)),
            WrittenGrant {
                budget: at_version(1, "8"),
                older: vec!["7".into()],
            },
        );
        let (newest, _) = cache.newest_and_older(&at_version(2, "10"));
        assert_eq!(newest.resource_version().as_deref(), Some("10"));
        assert!(cache.written.lock().unwrap().is_empty());
    }
}
