//! The one list of kruise-rs families. kruise-webhook composes its pod chain from the steps
//! they lend, `kruise-playground up` runs them in-process (in this order), and CI builds
//! each one's binary and runs its kubectl scenarios (`kruise-playground families`).
//!
//! Adding a family is one entry in [`FAMILIES`], behind a Cargo feature of this crate of
//! the family's name (on by default), so a kruise-webhook built without it carries none of
//! its code. The list lives here because kruise-webhook is the one binary that composes
//! across families; no family depends on this crate, so there is no cycle.

use kruise_common::family::{Family, LentWebhooks, PodStep, PodValidatorStep};

/// Each family's registration (its `binary::family`), in start order. kruise-webhook
/// comes last: it serves the pod chain the others lend steps to.
pub const FAMILIES: &[fn() -> anyhow::Result<Family>] = &[
    #[cfg(feature = "cloneset")]
    kruise_cloneset::binary::family,
    #[cfg(feature = "sidecarset")]
    kruise_sidecarset::binary::family,
    #[cfg(feature = "statefulset")]
    kruise_statefulset::binary::family,
    #[cfg(feature = "broadcastjob")]
    kruise_broadcastjob::binary::family,
    #[cfg(feature = "imagepull")]
    kruise_imagepull::binary::family,
    #[cfg(feature = "daemonset")]
    kruise_daemonset::binary::family,
    #[cfg(feature = "crr")]
    kruise_crr::binary::family,
    #[cfg(feature = "protection")]
    kruise_protection::binary::family,
    crate::family,
];

/// Every family of [`FAMILIES`], built.
pub fn families() -> anyhow::Result<Vec<Family>> {
    FAMILIES.iter().map(|family| family()).collect()
}

/// The validating pod-chain steps the families lend kruise-webhook, in [`FAMILIES`] order.
pub fn pod_validators() -> anyhow::Result<Vec<PodValidatorStep>> {
    Ok(families()?
        .iter()
        .flat_map(|family| family.pod_validators().iter().copied())
        .collect())
}

/// The admission handlers for other kinds the families lend kruise-webhook, in
/// [`FAMILIES`] order.
pub fn lent_webhooks() -> anyhow::Result<Vec<LentWebhooks>> {
    Ok(families()?
        .iter()
        .flat_map(|family| family.lent_webhook_sets().iter().copied())
        .collect())
}

/// The pod-chain steps the families lend kruise-webhook, in [`FAMILIES`] order.
pub fn pod_steps() -> anyhow::Result<Vec<PodStep>> {
    Ok(families()?
        .iter()
        .flat_map(|family| family.pod_steps().iter().copied())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_has_its_own_name_and_binary() {
        let families = families().unwrap();
        let names: Vec<&str> = families.iter().map(Family::name).collect();
        let mut distinct = names.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), names.len(), "{names:?}");
        for family in &families {
            assert_eq!(
                family.binary_name(),
                format!("kruise-{}", family.name()),
                "a family's binary is kruise-<name>"
            );
        }
        assert_eq!(names.last(), Some(&crate::NAME));
    }

    #[test]
    fn exactly_one_family_hosts_the_pod_chain() {
        let hosts: Vec<&str> = families()
            .unwrap()
            .iter()
            .filter(|f| f.is_pod_chain_host())
            .map(Family::name)
            .collect();
        assert_eq!(hosts, [crate::NAME]);
    }

    #[cfg(all(
        feature = "cloneset",
        feature = "sidecarset",
        feature = "statefulset",
        feature = "broadcastjob",
        feature = "imagepull",
        feature = "daemonset",
        feature = "crr",
        feature = "protection"
    ))]
    #[test]
    fn the_default_build_registers_every_family_and_their_steps() {
        let names: Vec<&str> = families().unwrap().iter().map(Family::name).collect();
        assert_eq!(
            names,
            [
                "cloneset",
                "sidecarset",
                "statefulset",
                "broadcastjob",
                "imagepull",
                "daemonset",
                "crr",
                "protection",
                "webhook"
            ]
        );
        let steps: Vec<&str> = pod_steps().unwrap().iter().map(|s| s.name).collect();
        assert_eq!(steps, ["sidecarset", "crr", "protection", crate::WORKLOADS]);
        let validators: Vec<&str> = pod_validators().unwrap().iter().map(|s| s.name).collect();
        assert_eq!(validators, ["protection"]);
    }
}
