//! The families that lend kruise-webhook steps (pod-chain steps, pod validators, handlers
//! for built-in kinds), each behind a Cargo feature of this crate of the family's name (on
//! by default), so a kruise-webhook built without it carries none of its code. The list of
//! every family is `kruise-playground`'s registry, which checks that this one matches it.

use kruise_runtime::family::{Lent, LentWebhooks, PodStep, PodValidatorStep};

/// What each lending family lends kruise-webhook (its `binary::LENT`, which its `family()`
/// registers too), in the registry's order, kruise-webhook's own last. kruise-webhook
/// composes its chains from this list, never from the families themselves: building a
/// family would link its controllers and binary into kruise-webhook.
pub const LENDERS: &[Lent] = &[
    #[cfg(feature = "sidecarset")]
    kruise_sidecarset::binary::LENT,
    #[cfg(feature = "crr")]
    kruise_crr::binary::LENT,
    #[cfg(feature = "protection")]
    kruise_protection::binary::LENT,
    crate::LENT,
];

/// The validating pod-chain steps the families lend kruise-webhook, in the registry's order.
pub fn pod_validators() -> Vec<PodValidatorStep> {
    LENDERS
        .iter()
        .flat_map(|lent| lent.pod_validators)
        .copied()
        .collect()
}

/// The admission handlers for other kinds the families lend kruise-webhook, in
/// the registry's order.
pub fn lent_webhooks() -> Vec<LentWebhooks> {
    LENDERS
        .iter()
        .flat_map(|lent| lent.webhooks)
        .copied()
        .collect()
}

/// The pod-chain steps the families lend kruise-webhook, in the registry's order.
pub fn pod_steps() -> Vec<PodStep> {
    LENDERS
        .iter()
        .flat_map(|lent| lent.pod_steps)
        .copied()
        .collect()
}

#[cfg(all(test, feature = "sidecarset", feature = "crr", feature = "protection"))]
mod tests {
    use super::*;

    #[test]
    fn the_default_build_composes_every_lent_step() {
        let steps: Vec<&str> = pod_steps().iter().map(|s| s.name).collect();
        assert_eq!(steps, ["sidecarset", "crr", "protection", crate::WORKLOADS]);
        let validators: Vec<&str> = pod_validators().iter().map(|s| s.name).collect();
        assert_eq!(validators, ["protection"]);
    }
}
