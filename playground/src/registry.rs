//! The one list of kruise-rs families: `kruise-playground up` runs them in-process (in this
//! order) and CI builds each one's binary and runs its kubectl scenarios
//! (`kruise-playground families`). kruise-webhook lists only the families that lend it steps
//! (`kruise_webhook::registry::LENDERS`); the tests here check the two lists agree.
//!
//! Adding a family is one entry in [`FAMILIES`], behind a Cargo feature of this crate of the
//! family's name (on by default). No family depends on this crate, so there is no cycle.

use kruise_runtime::family::Family;

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
    #[cfg(feature = "resourcedistribution")]
    kruise_resourcedistribution::binary::family,
    kruise_webhook::family,
];

/// Every family of [`FAMILIES`], built.
pub fn families() -> anyhow::Result<Vec<Family>> {
    FAMILIES.iter().map(|family| family()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kruise_runtime::family::Lent;

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
        assert_eq!(names.last(), Some(&kruise_webhook::NAME));
    }

    #[test]
    fn the_lenders_are_what_the_families_lend_in_their_order() {
        let lent_by_families: Vec<Vec<&str>> = families()
            .unwrap()
            .iter()
            .map(Family::lent_step_names)
            .filter(|names| !names.is_empty())
            .collect();
        let lenders: Vec<Vec<&str>> = kruise_webhook::registry::LENDERS
            .iter()
            .map(Lent::names)
            .collect();
        assert_eq!(lenders, lent_by_families);
    }

    #[test]
    fn exactly_one_family_hosts_the_pod_chain() {
        let hosts: Vec<&str> = families()
            .unwrap()
            .iter()
            .filter(|f| f.is_pod_chain_host())
            .map(Family::name)
            .collect();
        assert_eq!(hosts, [kruise_webhook::NAME]);
    }

    #[cfg(all(
        feature = "cloneset",
        feature = "sidecarset",
        feature = "statefulset",
        feature = "broadcastjob",
        feature = "imagepull",
        feature = "daemonset",
        feature = "crr",
        feature = "protection",
        feature = "resourcedistribution"
    ))]
    #[test]
    fn the_default_build_registers_every_family() {
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
                "resourcedistribution",
                "webhook"
            ]
        );
    }
}
