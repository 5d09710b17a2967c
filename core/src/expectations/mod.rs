//! Expectations: what a controller has asked the API server to do but not yet seen through its
//! watch, so a stale cache never causes a double create or delete.
//!
//! Plain synchronous structs — the caller shares them in a [`SharedExpectations`], whose lock
//! never fails open. Time comes in as `now`.
//! An unsatisfied expectation reports how long it has been unsatisfied; after the timeout
//! (default 5 minutes, Kruise's `--expectation-timeout`) the query reports
//! [`Satisfaction::Expired`] so the caller can emit a metric / event and decide to drop it.

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Kruise's default `--expectation-timeout`.
pub const DEFAULT_EXPECTATION_TIMEOUT: SignedDuration = SignedDuration::from_secs(300);

/// Answer of a satisfaction query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Satisfaction {
    /// Nothing outstanding: the cache reflects our writes.
    Satisfied,
    /// Still waiting; `waited` is the time since the expectation was first found unsatisfied.
    Pending {
        /// Time waited so far.
        waited: SignedDuration,
        /// Time left before the timeout.
        remaining: SignedDuration,
    },
    /// Waited at least the timeout: report it (metric / event); the caller may drop it.
    Expired {
        /// Time waited so far.
        waited: SignedDuration,
    },
}

impl Satisfaction {
    /// Whether the caller may act now.
    pub fn is_satisfied(&self) -> bool {
        matches!(self, Satisfaction::Satisfied)
    }
}

fn judge(first: &mut Option<Timestamp>, now: Timestamp, timeout: SignedDuration) -> Satisfaction {
    let start = *first.get_or_insert(now);
    let waited = now.duration_since(start).max(SignedDuration::ZERO);
    if waited >= timeout {
        Satisfaction::Expired { waited }
    } else {
        Satisfaction::Pending {
            waited,
            remaining: timeout - waited,
        }
    }
}

/// Kind of scale action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScaleAction {
    /// A create was issued.
    Create,
    /// A delete was issued.
    Delete,
}

impl ScaleAction {
    /// Whether the cache shows this action on the object it holds under the action's name
    /// (`cached`, None when it holds none): a create once the object is there, a delete
    /// once it is gone or terminating.
    pub fn seen_in(self, cached: Option<&ObjectMeta>) -> bool {
        match self {
            ScaleAction::Create => cached.is_some(),
            ScaleAction::Delete => cached.is_none_or(|m| m.deletion_timestamp.is_some()),
        }
    }
}

#[derive(Debug, Clone, Default)]
struct OwnerScale {
    pending: BTreeMap<ScaleAction, BTreeSet<String>>,
    first_unsatisfied: Option<Timestamp>,
}

/// Scale expectations keyed by owner key (`namespace/name`): names of objects whose create or
/// delete was issued and not yet observed.
#[derive(Debug, Clone)]
pub struct ScaleExpectations {
    owners: BTreeMap<String, OwnerScale>,
    timeout: SignedDuration,
}

impl Default for ScaleExpectations {
    fn default() -> Self {
        Self::new(DEFAULT_EXPECTATION_TIMEOUT)
    }
}

impl ScaleExpectations {
    /// New, with the given timeout.
    pub fn new(timeout: SignedDuration) -> Self {
        Self {
            owners: BTreeMap::new(),
            timeout,
        }
    }

    /// Record an action before calling the API.
    pub fn expect(&mut self, owner: &str, action: ScaleAction, name: &str) {
        self.owners
            .entry(owner.to_string())
            .or_default()
            .pending
            .entry(action)
            .or_default()
            .insert(name.to_string());
    }

    /// Record that the action was observed (watch event), or that the API call failed.
    pub fn observe(&mut self, owner: &str, action: ScaleAction, name: &str) {
        let Some(o) = self.owners.get_mut(owner) else {
            return;
        };
        if let Some(set) = o.pending.get_mut(&action) {
            set.remove(name);
        }
        if o.pending.values().all(BTreeSet::is_empty) {
            self.owners.remove(owner);
        }
    }

    /// Whether the owner's expectations are satisfied at `now`. The first unsatisfied query
    /// starts the timeout clock.
    pub fn satisfied(&mut self, owner: &str, now: Timestamp) -> Satisfaction {
        let timeout = self.timeout;
        let Some(o) = self.owners.get_mut(owner) else {
            return Satisfaction::Satisfied;
        };
        if o.pending.values().all(BTreeSet::is_empty) {
            self.owners.remove(owner);
            return Satisfaction::Satisfied;
        }
        judge(&mut o.first_unsatisfied, now, timeout)
    }

    /// Marks each of the owner's pending creates and deletes that `seen` says the cache
    /// shows as done, then answers [`satisfied`](Self::satisfied): the observe step of every
    /// family that creates and deletes pods.
    pub fn settle(
        &mut self,
        owner: &str,
        now: Timestamp,
        mut seen: impl FnMut(ScaleAction, &str) -> bool,
    ) -> Satisfaction {
        for (action, names) in self.pending(owner) {
            for name in names {
                if seen(action, &name) {
                    self.observe(owner, action, &name);
                }
            }
        }
        self.satisfied(owner, now)
    }

    /// Names still pending for an owner.
    pub fn pending(&self, owner: &str) -> BTreeMap<ScaleAction, BTreeSet<String>> {
        self.owners
            .get(owner)
            .map(|o| o.pending.clone())
            .unwrap_or_default()
    }

    /// Forget an owner (deleted, or expectations dropped after expiry).
    pub fn delete(&mut self, owner: &str) {
        self.owners.remove(owner);
    }
}

#[derive(Debug, Clone)]
struct ObjectVersion {
    version: String,
    first_unsatisfied: Option<Timestamp>,
}

/// Kruise's resourceVersion comparison: an empty or unparsable expected version is always
/// superseded; an unparsable observed version never supersedes.
fn is_newer_or_equal(expected: &str, observed: &str) -> bool {
    let Ok(old) = expected.parse::<u64>() else {
        return true;
    };
    let Ok(new) = observed.parse::<u64>() else {
        return false;
    };
    new >= old
}

/// resourceVersion expectations keyed by object UID: the highest version we wrote; satisfied
/// once the cache shows that version or a newer one.
#[derive(Debug, Clone)]
pub struct ResourceVersionExpectations {
    objects: BTreeMap<String, ObjectVersion>,
    timeout: SignedDuration,
}

impl Default for ResourceVersionExpectations {
    fn default() -> Self {
        Self::new(DEFAULT_EXPECTATION_TIMEOUT)
    }
}

impl ResourceVersionExpectations {
    /// New, with the given timeout.
    pub fn new(timeout: SignedDuration) -> Self {
        Self {
            objects: BTreeMap::new(),
            timeout,
        }
    }

    /// Record the resourceVersion returned by our write.
    pub fn expect(&mut self, uid: &str, resource_version: &str) {
        let e = self
            .objects
            .entry(uid.to_string())
            .or_insert_with(|| ObjectVersion {
                version: String::new(),
                first_unsatisfied: None,
            });
        if is_newer_or_equal(&e.version, resource_version) {
            e.version = resource_version.to_string();
        }
    }

    /// Record an observed version (watch event).
    pub fn observe(&mut self, uid: &str, resource_version: &str) {
        if self
            .objects
            .get(uid)
            .is_some_and(|e| is_newer_or_equal(&e.version, resource_version))
        {
            self.objects.remove(uid);
        }
    }

    /// Whether the cached object (at `resource_version`) reflects our writes at `now`.
    pub fn satisfied(&mut self, uid: &str, resource_version: &str, now: Timestamp) -> Satisfaction {
        self.observe(uid, resource_version);
        let timeout = self.timeout;
        match self.objects.get_mut(uid) {
            None => Satisfaction::Satisfied,
            Some(e) => judge(&mut e.first_unsatisfied, now, timeout),
        }
    }

    /// Forget an object (deleted, or expectation dropped after expiry).
    pub fn delete(&mut self, uid: &str) {
        self.objects.remove(uid);
    }

    /// Observes each cached object's resourceVersion and says whether every object we
    /// wrote shows (at least) the version our write returned; an expired expectation is
    /// dropped and no longer holds the caller back.
    pub fn all_observed<'a, K, I>(&mut self, objects: I, now: Timestamp) -> bool
    where
        K: kube_core::Resource + 'a,
        I: IntoIterator<Item = &'a K>,
    {
        let mut all = true;
        for obj in objects {
            let meta = obj.meta();
            let (Some(uid), Some(rv)) = (meta.uid.as_deref(), meta.resource_version.as_deref())
            else {
                continue;
            };
            self.observe(uid, rv);
            match self.satisfied(uid, rv, now) {
                Satisfaction::Satisfied => {}
                Satisfaction::Pending { .. } => all = false,
                Satisfaction::Expired { .. } => self.delete(uid),
            }
        }
        all
    }
}

/// Expectations shared by a controller's concurrent reconciles, behind a lock that never
/// fails open: once a reconcile panicked while holding it, every access is an error, so a
/// caller can neither skip recording a create or delete nor read "satisfied" from state
/// that may be half-updated. (The process's reconciles then fail until it restarts; the
/// caller reports the error like any other.)
#[derive(Debug, Default)]
pub struct SharedExpectations<T> {
    inner: std::sync::Mutex<T>,
}

/// A reconcile panicked while holding the expectations lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the expectations lock is poisoned (a reconcile panicked while holding it)")]
pub struct PoisonedExpectations;

impl<T> SharedExpectations<T> {
    /// Shares `expectations`.
    pub fn new(expectations: T) -> Self {
        Self {
            inner: std::sync::Mutex::new(expectations),
        }
    }

    /// Runs `f` on the expectations; an error, and `f` not run, when the lock is poisoned.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Result<R, PoisonedExpectations> {
        let mut guard = self.inner.lock().map_err(|_| PoisonedExpectations)?;
        Ok(f(&mut guard))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap()
    }

    #[test]
    fn settle_observes_what_the_cache_shows_and_keeps_the_rest_pending() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let mut e = ScaleExpectations::default();
        e.expect("ns/cs", ScaleAction::Create, "created");
        e.expect("ns/cs", ScaleAction::Create, "not-yet");
        e.expect("ns/cs", ScaleAction::Delete, "terminating");
        e.expect("ns/cs", ScaleAction::Delete, "still-there");
        let live = ObjectMeta::default();
        let terminating = ObjectMeta {
            deletion_timestamp: Some(Time(t(0))),
            ..ObjectMeta::default()
        };
        let cache = |name: &str| match name {
            "created" | "still-there" => Some(&live),
            "terminating" => Some(&terminating),
            _ => None,
        };
        let answer = e.settle("ns/cs", t(0), |action, name| action.seen_in(cache(name)));
        assert!(!answer.is_satisfied());
        let pending = e.pending("ns/cs");
        assert_eq!(
            pending[&ScaleAction::Create],
            BTreeSet::from(["not-yet".to_string()])
        );
        assert_eq!(
            pending[&ScaleAction::Delete],
            BTreeSet::from(["still-there".to_string()])
        );
        // A delete whose object is gone from the cache is seen as well.
        let answer = e.settle("ns/cs", t(1), |action, name| match name {
            "not-yet" => action.seen_in(Some(&live)),
            _ => action.seen_in(None),
        });
        assert_eq!(answer, Satisfaction::Satisfied);
    }

    #[test]
    fn scale_expectations_lifecycle() {
        let mut e = ScaleExpectations::default();
        assert!(e.satisfied("ns/cs", t(0)).is_satisfied());
        e.expect("ns/cs", ScaleAction::Create, "p1");
        e.expect("ns/cs", ScaleAction::Delete, "p0");
        assert_eq!(
            e.satisfied("ns/cs", t(0)),
            Satisfaction::Pending {
                waited: SignedDuration::ZERO,
                remaining: SignedDuration::from_secs(300)
            }
        );
        assert_eq!(e.pending("ns/cs")[&ScaleAction::Create].len(), 1);
        e.observe("ns/cs", ScaleAction::Create, "p1");
        assert_eq!(
            e.satisfied("ns/cs", t(60)),
            Satisfaction::Pending {
                waited: SignedDuration::from_secs(60),
                remaining: SignedDuration::from_secs(240)
            }
        );
        // a lost delete event: expires after the timeout and says so
        assert_eq!(
            e.satisfied("ns/cs", t(300)),
            Satisfaction::Expired {
                waited: SignedDuration::from_secs(300)
            }
        );
        e.observe("ns/cs", ScaleAction::Delete, "p0");
        assert!(e.satisfied("ns/cs", t(301)).is_satisfied());
        // other owners untouched; delete forgets
        e.expect("ns/b", ScaleAction::Create, "x");
        e.delete("ns/b");
        assert!(e.satisfied("ns/b", t(0)).is_satisfied());
    }

    #[test]
    fn resource_version_expectations() {
        let mut e = ResourceVersionExpectations::new(SignedDuration::from_secs(10));
        e.expect("uid", "100");
        e.expect("uid", "90"); // lower: ignored
        assert!(!e.satisfied("uid", "95", t(0)).is_satisfied());
        assert!(matches!(
            e.satisfied("uid", "99", t(10)),
            Satisfaction::Expired { .. }
        ));
        assert!(e.satisfied("uid", "100", t(11)).is_satisfied());
        e.expect("u2", "abc"); // unparsable expected: any observation supersedes
        assert!(e.satisfied("u2", "1", t(0)).is_satisfied());
        e.expect("u3", "5");
        assert!(!e.satisfied("u3", "zzz", t(0)).is_satisfied());
        e.observe("u3", "6");
        assert!(e.satisfied("u3", "1", t(0)).is_satisfied());
    }

    #[test]
    fn a_poisoned_lock_is_an_error_and_runs_nothing() {
        let shared = std::sync::Arc::new(SharedExpectations::new(ScaleExpectations::default()));
        let held = shared.clone();
        let panicked = std::thread::spawn(move || {
            let _ = held.with(|_| panic!("a reconcile panics while holding the lock"));
        })
        .join();
        assert!(panicked.is_err());
        let mut ran = false;
        assert_eq!(
            shared.with(|e| {
                ran = true;
                e.expect("o", ScaleAction::Create, "p")
            }),
            Err(PoisonedExpectations)
        );
        assert!(!ran);
        assert_eq!(
            shared.with(|e| e.satisfied("o", t(0))),
            Err(PoisonedExpectations)
        );
    }

    proptest::proptest! {
        #[test]
        fn scale_satisfied_iff_all_observed(
            names in proptest::collection::btree_set("[a-z]{1,4}", 0..8),
            observe_mask in proptest::collection::vec(proptest::bool::ANY, 8),
            wait in 0i64..600,
        ) {
            let mut e = ScaleExpectations::default();
            for n in &names { e.expect("o", ScaleAction::Create, n); }
            let mut left = 0;
            for (i, n) in names.iter().enumerate() {
                if observe_mask[i] { e.observe("o", ScaleAction::Create, n); } else { left += 1; }
            }
            let first = e.satisfied("o", t(0));
            proptest::prop_assert_eq!(first.is_satisfied(), left == 0);
            let later = e.satisfied("o", t(wait));
            match later {
                Satisfaction::Satisfied => proptest::prop_assert_eq!(left, 0),
                Satisfaction::Pending { waited, remaining } => {
                    proptest::prop_assert!(wait < 300);
                    proptest::prop_assert_eq!(waited + remaining, DEFAULT_EXPECTATION_TIMEOUT);
                }
                Satisfaction::Expired { waited } => proptest::prop_assert!(waited >= DEFAULT_EXPECTATION_TIMEOUT),
            }
        }
    }
}
