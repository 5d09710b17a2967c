//! Container launch priority's pod-chain step, lent to kruise-webhook: it gives a
//! prioritized pod's containers the barrier env ([`crate::plan::launch_priority::inject_barrier`]).

use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use kruise_admission::pod_chain::{PodMutator, PodRequest, PodScope};
use kruise_admission::{FailurePolicy, HandlerError};
use kruise_runtime::family::StepContext;

use crate::plan::launch_priority::inject_barrier;

/// The pod-chain step: adds the barrier env to prioritized pods.
pub struct LaunchPriorityStep {
    /// The random part of a generated pod name.
    name_suffix: fn() -> String,
}

impl LaunchPriorityStep {
    /// A step naming generateName-only pods with `name_suffix` (the API server's random
    /// 5-character suffix in production; fixed in tests).
    pub fn new(name_suffix: fn() -> String) -> Self {
        LaunchPriorityStep { name_suffix }
    }
}

/// Builds the step for kruise-webhook.
pub fn step(_ctx: &StepContext) -> Arc<dyn PodMutator> {
    Arc::new(LaunchPriorityStep::new(random_name_suffix))
}

/// Five characters of the API server's generated-name alphabet (no vowels, no look-alikes).
pub fn random_name_suffix() -> String {
    use std::hash::{BuildHasher, Hasher};
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    let mut bits = hasher.finish();
    (0..5)
        .map(|_| {
            let c = ALPHABET[(bits % ALPHABET.len() as u64) as usize];
            bits /= ALPHABET.len() as u64;
            char::from(c)
        })
        .collect()
}

impl PodMutator for LaunchPriorityStep {
    fn name(&self) -> &'static str {
        "container-launch-priority"
    }

    fn order(&self) -> u32 {
        40
    }

    fn scopes(&self) -> Vec<PodScope> {
        // The annotation and env cannot be selected on, so every pod passes.
        vec![PodScope::default()]
    }

    fn failure_policy(&self) -> FailurePolicy {
        // A pod admitted without the barrier starts its containers together: degraded, not
        // broken, so a down webhook must not block every pod of the cluster.
        FailurePolicy::Ignore
    }

    fn mutate<'a>(
        &'a self,
        _request: &'a PodRequest,
        pod: &'a mut Pod,
    ) -> BoxFuture<'a, Result<(), HandlerError>> {
        Box::pin(async move {
            inject_barrier(pod, &(self.name_suffix)())
                .map(|_| ())
                .map_err(|e| HandlerError::Internal(e.to_string()))
        })
    }
}
