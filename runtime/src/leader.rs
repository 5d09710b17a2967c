//! Leader election on a `coordination.k8s.io/v1` Lease with client-go's semantics:
//! a candidate takes the lease when its holder has not renewed it for `lease_duration`
//! (measured on the candidate's own clock from when it last saw the record change, so
//! clock skew between replicas does not matter); the holder renews every `retry_period`
//! and gives up if it could not renew for `renew_deadline`; on shutdown it releases the
//! lease so a standby takes over at once. Every write carries the resourceVersion it read,
//! so two candidates can never both win.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Timings of the election. Defaults are client-go's (15 s / 10 s / 2 s).
#[derive(Clone, Debug)]
pub struct LeaderTimings {
    /// How long a lease is valid without renewal before another candidate may take it.
    pub lease_duration: Duration,
    /// How long the holder keeps trying to renew before it considers leadership lost.
    pub renew_deadline: Duration,
    /// Interval between attempts to acquire or renew.
    pub retry_period: Duration,
}

impl Default for LeaderTimings {
    fn default() -> Self {
        LeaderTimings {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Errors of a single acquire/renew/release attempt.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The API server refused or failed the request.
    #[error("lease {name}: {source}")]
    Api {
        /// Lease name.
        name: String,
        /// Underlying client error.
        #[source]
        source: kube::Error,
    },
    /// The timings cannot work (renew deadline must be shorter than the lease duration).
    #[error("invalid leader election timings: {0}")]
    Timings(String),
}

/// One candidate for one lease.
pub struct LeaderElector {
    api: Api<Lease>,
    name: String,
    identity: String,
    timings: LeaderTimings,
    /// The record last read and when (on our clock) it last changed.
    observed: Option<(LeaseSpec, Instant)>,
}

/// What a single attempt found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// We hold the lease (acquired or renewed).
    Leading,
    /// Someone else holds a live lease.
    Following,
}

impl LeaderElector {
    /// A candidate `identity` for the lease `name` in the namespace of `api`.
    pub fn new(
        api: Api<Lease>,
        name: impl Into<String>,
        identity: impl Into<String>,
        timings: LeaderTimings,
    ) -> Result<Self, LeaderError> {
        if timings.renew_deadline >= timings.lease_duration {
            return Err(LeaderError::Timings(
                "renew deadline must be less than the lease duration".into(),
            ));
        }
        if timings.retry_period.is_zero() || timings.retry_period >= timings.renew_deadline {
            return Err(LeaderError::Timings(
                "retry period must be positive and less than the renew deadline".into(),
            ));
        }
        Ok(LeaderElector {
            api,
            name: name.into(),
            identity: identity.into(),
            timings,
            observed: None,
        })
    }

    /// This candidate's identity, written as `holderIdentity`.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The lease name.
    pub fn lease_name(&self) -> &str {
        &self.name
    }

    fn api_err(&self, source: kube::Error) -> LeaderError {
        LeaderError::Api {
            name: self.name.clone(),
            source,
        }
    }

    /// Waits until this candidate holds the lease, or `cancel` fires (then `false`).
    pub async fn acquire(&mut self, cancel: &CancellationToken) -> bool {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Leading) => return true,
                Ok(Attempt::Following) => {}
                Err(e) => tracing::warn!(error = %e, "leader election attempt failed"),
            }
            tokio::select! {
                _ = cancel.cancelled() => return false,
                _ = tokio::time::sleep(jittered(self.timings.retry_period)) => {}
            }
        }
    }

    /// Renews until leadership is lost (returns `false`: renewals kept failing for the
    /// renew deadline, or another holder took the lease) or `cancel` fires (returns `true`).
    pub async fn hold(&mut self, cancel: &CancellationToken) -> bool {
        let mut last_renew = Instant::now();
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return true,
                _ = tokio::time::sleep(self.timings.retry_period) => {}
            }
            // Each renewal attempt may itself take at most what is left of the deadline.
            let remaining = self
                .timings
                .renew_deadline
                .saturating_sub(last_renew.elapsed());
            let attempt = tokio::time::timeout(remaining, self.try_acquire_or_renew()).await;
            match attempt {
                Ok(Ok(Attempt::Leading)) => last_renew = Instant::now(),
                Ok(Ok(Attempt::Following)) => {
                    tracing::warn!(lease = %self.name, "another candidate holds the lease");
                    return false;
                }
                Ok(Err(e)) => tracing::warn!(error = %e, "failed to renew lease"),
                Err(_) => tracing::warn!(lease = %self.name, "lease renewal timed out"),
            }
            if last_renew.elapsed() >= self.timings.renew_deadline {
                tracing::error!(lease = %self.name, "could not renew the lease within the renew deadline");
                return false;
            }
        }
    }

    /// One attempt, as client-go's `tryAcquireOrRenew`.
    pub async fn try_acquire_or_renew(&mut self) -> Result<Attempt, LeaderError> {
        let now = MicroTime(jiff::Timestamp::now());
        let lease_secs = i32::try_from(self.timings.lease_duration.as_secs().max(1)).unwrap_or(15);
        let existing = self
            .api
            .get_opt(&self.name)
            .await
            .map_err(|e| self.api_err(e))?;
        let Some(lease) = existing else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(lease_secs),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(created.spec.unwrap_or_default());
                    Ok(Attempt::Leading)
                }
                // Another candidate created it first.
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::Following),
                Err(e) => Err(self.api_err(e)),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        self.observe(spec.clone());
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let we_hold = holder == self.identity;
        if !we_hold && !holder.is_empty() && !self.observed_expired(&spec) {
            return Ok(Attempt::Following);
        }
        let mut next = spec.clone();
        next.holder_identity = Some(self.identity.clone());
        next.lease_duration_seconds = Some(lease_secs);
        next.renew_time = Some(now.clone());
        if !we_hold {
            next.acquire_time = Some(now);
            next.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        let updated = Lease {
            metadata: lease.metadata.clone(),
            spec: Some(next),
        };
        match self
            .api
            .replace(&self.name, &PostParams::default(), &updated)
            .await
        {
            Ok(written) => {
                self.observe(written.spec.unwrap_or_default());
                Ok(Attempt::Leading)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::Following),
            Err(e) => Err(self.api_err(e)),
        }
    }

    /// Gives the lease up if we hold it, so a standby can take over without waiting for
    /// expiry (client-go's ReleaseOnCancel: empty holder, 1 s duration).
    pub async fn release(&mut self) -> Result<(), LeaderError> {
        let Some(lease) = self
            .api
            .get_opt(&self.name)
            .await
            .map_err(|e| self.api_err(e))?
        else {
            return Ok(());
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        let now = MicroTime(jiff::Timestamp::now());
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now.clone());
        spec.acquire_time = Some(now);
        let released = Lease {
            metadata: lease.metadata,
            spec: Some(spec),
        };
        self.api
            .replace(&self.name, &PostParams::default(), &released)
            .await
            .map_err(|e| self.api_err(e))?;
        self.observed = None;
        Ok(())
    }

    /// Remembers the record and, if it changed, when we saw it change.
    fn observe(&mut self, spec: LeaseSpec) {
        let changed = match &self.observed {
            Some((prev, _)) => prev != &spec,
            None => true,
        };
        if changed {
            self.observed = Some((spec, Instant::now()));
        }
    }

    /// True when the holder has not changed the record for its lease duration, judged on
    /// our clock from when we first saw the current record.
    fn observed_expired(&self, spec: &LeaseSpec) -> bool {
        let duration = Duration::from_secs(
            u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
        );
        match &self.observed {
            Some((_, seen)) => seen.elapsed() >= duration,
            None => true,
        }
    }
}

/// client-go's `wait.Jitter(retryPeriod, 1.2)`: up to 1.2 × extra, so candidates spread.
fn jittered(base: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    let frac = (h.finish() % 1000) as f64 / 1000.0;
    base + base.mul_f64(1.2 * frac)
}

/// A unique identity for this process: `$POD_NAME` (or the hostname) plus a random suffix,
/// so two processes on one host never share it.
pub fn default_identity() -> String {
    use std::hash::{BuildHasher, Hasher};
    let host = std::env::var("POD_NAME")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string());
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    format!("{host}_{:016x}", h.finish())
}
