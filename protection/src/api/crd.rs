//! `podunavailablebudgets.policy.kruise.io`: both versions served, `v1beta1` stored, the
//! status subresource and OpenKruise's printer columns (no AGE column, as OpenKruise's).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
pub use kruise_core::api::crd::CrdError;
use kruise_core::api::crd::{CrdBuilder, PrinterColumn};
use kruise_core::api::version::V1BETA1;
use kube::CustomResourceExt;

use super::KIND;

/// OpenKruise's PodUnavailableBudget columns.
const COLUMNS: [PrinterColumn; 4] = [
    PrinterColumn::integer(
        "Allowed",
        ".status.unavailableAllowed",
        "UnavailableAllowed number of pod unavailable that are currently allowed",
    ),
    PrinterColumn::integer(
        "Current",
        ".status.currentAvailable",
        "CurrentAvailable current number of available pods",
    ),
    PrinterColumn::integer(
        "Desired",
        ".status.desiredAvailable",
        "DesiredAvailable minimum desired number of available pods",
    ),
    PrinterColumn::integer(
        "Total",
        ".status.totalReplicas",
        "TotalReplicas total number of pods counted by this budget",
    ),
];

/// `podunavailablebudgets.policy.kruise.io`.
pub fn crd() -> Result<CustomResourceDefinition, CrdError> {
    CrdBuilder::new(KIND, V1BETA1)
        .version(super::v1alpha1::PodUnavailableBudget::crd())
        .version(super::v1beta1::PodUnavailableBudget::crd())
        .status_subresource()
        .printer_columns(&COLUMNS)
        .status_required(&[
            "currentAvailable",
            "desiredAvailable",
            "totalReplicas",
            "unavailableAllowed",
        ])
        .kubebuilder_shape()
        .version_schema_edit(
            V1BETA1,
            "/properties/spec/properties/protectOperations",
            |ops| {
                ops.insert(
                    "items".into(),
                    serde_json::json!({"type": "string", "enum": super::PubOperation::KNOWN}),
                );
            },
        )
        .build()
}

/// Where the generated schema deliberately validates differently from OpenKruise's
/// published CRD (`<version> <path>` of `kruise_core::api::crd_fields`).
pub const DELIBERATE_SCHEMA_DIFFERENCES: &[&str] = &[];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_has_both_versions_short_name_status_and_openkruise_columns() {
        let crd = crd().unwrap();
        assert_eq!(crd.metadata.name.as_deref(), Some(super::super::CRD));
        assert_eq!(crd.spec.group, "policy.kruise.io");
        assert_eq!(crd.spec.names.short_names, Some(vec!["pub".to_string()]));
        assert_eq!(crd.spec.scope, "Namespaced");
        let stored: Vec<_> = crd
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.storage))
            .collect();
        assert_eq!(stored, [("v1alpha1", false), ("v1beta1", true)]);
        for v in &crd.spec.versions {
            assert!(v.subresources.as_ref().unwrap().status.is_some());
            let columns: Vec<_> = v
                .additional_printer_columns
                .iter()
                .flatten()
                .map(|c| (c.name.as_str(), c.json_path.as_str(), c.type_.as_str()))
                .collect();
            assert_eq!(
                columns,
                [
                    ("Allowed", ".status.unavailableAllowed", "integer"),
                    ("Current", ".status.currentAvailable", "integer"),
                    ("Desired", ".status.desiredAvailable", "integer"),
                    ("Total", ".status.totalReplicas", "integer"),
                ]
            );
        }
    }

    #[test]
    fn only_v1beta1_has_the_promoted_fields_and_enumerates_operations() {
        let crd = serde_json::to_value(crd().unwrap()).unwrap();
        let spec = |i: usize| {
            crd["spec"]["versions"][i]["schema"]["openAPIV3Schema"]["properties"]["spec"]
                ["properties"]
                .clone()
        };
        assert!(spec(0)["protectOperations"].is_null());
        assert!(spec(0)["ignoredPodSelector"].is_null());
        assert_eq!(
            spec(1)["protectOperations"]["items"]["enum"],
            serde_json::json!(["DELETE", "UPDATE", "EVICT", "RESIZE"])
        );
        assert_eq!(
            spec(1)["protectTotalReplicas"]["minimum"].as_f64(),
            Some(1.0)
        );
    }

    /// The generated schema validates as OpenKruise's published CRD does (types, required
    /// fields, list types, enums, defaults), except where [`DELIBERATE_SCHEMA_DIFFERENCES`] says otherwise.
    #[test]
    fn podunavailablebudgets_schema_matches_openkruises_published_fields() {
        if let Err(report) = kruise_core::api::crd_fields::compare_with_published(
            &crd().unwrap(),
            include_str!("../../tests/fixtures/openkruise/podunavailablebudgets.fields"),
            DELIBERATE_SCHEMA_DIFFERENCES,
        ) {
            panic!("{report}");
        }
    }
}
