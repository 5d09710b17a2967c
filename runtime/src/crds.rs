//! What a binary's `crd` subcommand prints: its CRDs as YAML, each labelled for deletion
//! protection.

use anyhow::Context as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// Renders CRDs as a multi-document YAML stream, each [`deletion_protected`]: what `crd`
/// prints and the chart installs.
pub fn crds_yaml(crds: &[CustomResourceDefinition]) -> anyhow::Result<String> {
    let mut out = String::new();
    for crd in crds {
        out.push_str("---\n");
        out.push_str(
            &serde_saphyr::to_string(&deletion_protected(crd.clone()))
                .context("serialising a CRD to YAML")?,
        );
    }
    Ok(out)
}

/// The CRD labelled `policy.kruise.io/delete-protection: Cascading`: deleting a kruise-rs
/// CRD deletes every object of its kind (and a workload's pods with it), so once kruise-webhook
/// runs with `ResourcesDeletionProtection` and `DeletionProtectionForCRDCascadingGate`, the
/// deletion is refused while any such object remains. A label already set is kept.
pub fn deletion_protected(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    crd.metadata
        .labels
        .get_or_insert_with(Default::default)
        .entry(kruise_core::api::keys::DELETION_PROTECTION_KEY.to_string())
        .or_insert_with(|| "Cascading".to_string());
    crd
}
