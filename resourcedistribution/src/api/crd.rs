//! The `CustomResourceDefinition`: `v1alpha1` served and stored, cluster-scoped, the status
//! subresource, shortName `distributor` and OpenKruise's printer columns (no AGE, as its
//! CRD has none).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
pub use kruise_core::api::crd::CrdError;
use kruise_core::api::crd::{CrdBuilder, PrinterColumn};
use kruise_core::api::version::V1ALPHA1;
use kube::CustomResourceExt;

use super::{KIND, ResourceDistribution};

/// OpenKruise's columns: `TOTAL`, `SUCCEED`, `FAILED`.
const COLUMNS: [PrinterColumn; 3] = [
    PrinterColumn::integer(
        "TOTAL",
        ".status.desired",
        "The desired number of desired distribution and syncs.",
    ),
    PrinterColumn::integer(
        "SUCCEED",
        ".status.succeeded",
        "The number of successful distribution and syncs.",
    ),
    PrinterColumn::integer(
        "FAILED",
        ".status.failed",
        "The number of failed distributions and syncs.",
    ),
];

/// `resourcedistributions.apps.kruise.io`.
pub fn crd() -> Result<CustomResourceDefinition, CrdError> {
    CrdBuilder::new(KIND, V1ALPHA1)
        .version(ResourceDistribution::crd())
        .status_subresource()
        .printer_columns(&COLUMNS)
        .kubebuilder_shape()
        .build()
}

/// Where the generated schema deliberately differs from OpenKruise's published CRD
/// (`<version> <path>` of `kruise_core::api::crd_fields`; the fixture is v1.8.3's): the
/// selector's lists are atomic, as in every other kind's CRD OpenKruise generates today
/// (and in Kubernetes' own `LabelSelector`); it changes only how server-side apply merges
/// them.
pub const DELIBERATE_SCHEMA_DIFFERENCES: &[&str] = &[
    "v1alpha1 .spec.targets.namespaceLabelSelector.matchExpressions",
    "v1alpha1 .spec.targets.namespaceLabelSelector.matchExpressions[].values",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_is_cluster_scoped_with_short_name_status_and_openkruise_columns() {
        let crd = crd().unwrap();
        assert_eq!(crd.metadata.name.as_deref(), Some(super::super::CRD_NAME));
        assert_eq!(crd.spec.group, "apps.kruise.io");
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(
            crd.spec.names.short_names,
            Some(vec!["distributor".to_string()])
        );
        let [version] = crd.spec.versions.as_slice() else {
            panic!("one version");
        };
        assert_eq!((version.name.as_str(), version.storage), ("v1alpha1", true));
        assert!(version.subresources.as_ref().unwrap().status.is_some());
        let columns: Vec<_> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| (c.name.as_str(), c.type_.as_str(), c.json_path.as_str()))
            .collect();
        assert_eq!(
            columns,
            [
                ("TOTAL", "integer", ".status.desired"),
                ("SUCCEED", "integer", ".status.succeeded"),
                ("FAILED", "integer", ".status.failed"),
            ]
        );
        let schema = serde_json::to_value(&version.schema).unwrap();
        let resource = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["resource"];
        assert_eq!(resource["x-kubernetes-embedded-resource"], true);
    }

    /// The generated schema validates as OpenKruise's published CRD does (types, required
    /// fields, list types), except where [`DELIBERATE_SCHEMA_DIFFERENCES`] says otherwise.
    #[test]
    fn resourcedistributions_schema_matches_openkruises_published_fields() {
        if let Err(report) = kruise_core::api::crd_fields::compare_with_published(
            &crd().unwrap(),
            include_str!("../../tests/fixtures/openkruise/resourcedistributions.fields"),
            DELIBERATE_SCHEMA_DIFFERENCES,
        ) {
            panic!("{report}");
        }
    }
}
