//! The StatefulSet `CustomResourceDefinition`: both versions served, `v1beta1` stored,
//! shortNames `sts` and `asts`, OpenKruise's printer columns, status and scale subresources.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
pub use kruise_core::api::crd::CrdError;
use kruise_core::api::crd::{AGE_COLUMN, CrdBuilder, PrinterColumn};
use kruise_core::api::version::V1BETA1;
use kube::CustomResourceExt;

use super::KIND;

/// OpenKruise's StatefulSet columns (the same in both versions).
const COLUMNS: [PrinterColumn; 7] = [
    PrinterColumn::integer("DESIRED", ".spec.replicas", "The desired number of pods."),
    PrinterColumn::integer(
        "CURRENT",
        ".status.replicas",
        "The number of currently all pods.",
    ),
    PrinterColumn::integer(
        "UPDATED",
        ".status.updatedReplicas",
        "The number of pods updated.",
    ),
    PrinterColumn::integer(
        "READY",
        ".status.readyReplicas",
        "The number of pods ready.",
    ),
    AGE_COLUMN,
    PrinterColumn::wide_string(
        "CONTAINERS",
        ".spec.template.spec.containers[*].name",
        "The containers of currently advanced statefulset.",
    ),
    PrinterColumn::wide_string(
        "IMAGES",
        ".spec.template.spec.containers[*].image",
        "The images of currently advanced statefulset.",
    ),
];

/// The CRD, with `spec.required = [selector, template]` and the rest of OpenKruise's
/// published schema (held to it by `schema_matches_openkruises_published_fields`).
pub fn crd() -> Result<CustomResourceDefinition, CrdError> {
    CrdBuilder::new(KIND, V1BETA1)
        .version(super::v1alpha1::StatefulSet::crd())
        .version(super::v1beta1::StatefulSet::crd())
        .status_subresource()
        .replicated_workload(&[
            "availableReplicas",
            "currentReplicas",
            "readyReplicas",
            "replicas",
            "updatedReplicas",
        ])
        .printer_columns(&COLUMNS)
        .build()
}

/// Where the generated schema deliberately validates differently from OpenKruise's
/// published CRD (`<version> <path>` of `kruise_core::api::crd_fields`): `v1alpha1` carries
/// every `v1beta1` field, so an edit through `v1alpha1` keeps them (OpenKruise's drops
/// them, K#2102; docs/statefulset.md, Differences).
pub const DELIBERATE_SCHEMA_DIFFERENCES: &[&str] = &[
    "v1alpha1 .spec.lifecycle",
    "v1alpha1 .spec.lifecycle.inPlaceUpdate",
    "v1alpha1 .spec.lifecycle.inPlaceUpdate.finalizersHandler",
    "v1alpha1 .spec.lifecycle.inPlaceUpdate.finalizersHandler[]",
    "v1alpha1 .spec.lifecycle.inPlaceUpdate.labelsHandler",
    "v1alpha1 .spec.lifecycle.inPlaceUpdate.labelsHandler{}",
    "v1alpha1 .spec.lifecycle.inPlaceUpdate.markPodNotReady",
    "v1alpha1 .spec.lifecycle.preDelete",
    "v1alpha1 .spec.lifecycle.preDelete.finalizersHandler",
    "v1alpha1 .spec.lifecycle.preDelete.finalizersHandler[]",
    "v1alpha1 .spec.lifecycle.preDelete.labelsHandler",
    "v1alpha1 .spec.lifecycle.preDelete.labelsHandler{}",
    "v1alpha1 .spec.lifecycle.preDelete.markPodNotReady",
    "v1alpha1 .spec.lifecycle.preNormal",
    "v1alpha1 .spec.lifecycle.preNormal.finalizersHandler",
    "v1alpha1 .spec.lifecycle.preNormal.finalizersHandler[]",
    "v1alpha1 .spec.lifecycle.preNormal.labelsHandler",
    "v1alpha1 .spec.lifecycle.preNormal.labelsHandler{}",
    "v1alpha1 .spec.lifecycle.preNormal.markPodNotReady",
    "v1alpha1 .spec.ordinals",
    "v1alpha1 .spec.ordinals.start",
    "v1alpha1 .spec.persistentVolumeClaimRetentionPolicy",
    "v1alpha1 .spec.persistentVolumeClaimRetentionPolicy.whenDeleted",
    "v1alpha1 .spec.persistentVolumeClaimRetentionPolicy.whenScaled",
    "v1alpha1 .spec.reserveOrdinals",
    "v1alpha1 .spec.reserveOrdinals[]",
    "v1alpha1 .spec.scaleStrategy",
    "v1alpha1 .spec.scaleStrategy.maxUnavailable",
    "v1alpha1 .spec.volumeClaimUpdateStrategy",
    "v1alpha1 .spec.volumeClaimUpdateStrategy.type",
    "v1alpha1 .status.updatedAvailableReplicas",
    "v1alpha1 .status.updatedReadyReplicas",
    "v1alpha1 .status.volumeClaims",
    "v1alpha1 .status.volumeClaims[]",
    "v1alpha1 .status.volumeClaims[].compatibleReadyReplicas",
    "v1alpha1 .status.volumeClaims[].compatibleReplicas",
    "v1alpha1 .status.volumeClaims[].volumeClaimName",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_has_both_versions_short_names_scale_and_columns() {
        let crd = crd().unwrap();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("statefulsets.apps.kruise.io")
        );
        assert_eq!(crd.spec.names.kind, "StatefulSet");
        assert_eq!(
            crd.spec.names.short_names,
            Some(vec!["sts".to_string(), "asts".to_string()])
        );
        assert_eq!(crd.spec.scope, "Namespaced");
        let versions: Vec<_> = crd
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served, v.storage))
            .collect();
        assert_eq!(
            versions,
            [("v1alpha1", true, false), ("v1beta1", true, true)]
        );
        for v in &crd.spec.versions {
            let sub = v.subresources.as_ref().unwrap();
            assert!(sub.status.is_some());
            let scale = sub.scale.as_ref().unwrap();
            assert_eq!(scale.spec_replicas_path, ".spec.replicas");
            assert_eq!(
                scale.label_selector_path.as_deref(),
                Some(".status.labelSelector")
            );
            let cols: Vec<_> = v
                .additional_printer_columns
                .iter()
                .flatten()
                .map(|c| (c.name.as_str(), c.priority.unwrap_or(0)))
                .collect();
            assert_eq!(
                cols,
                [
                    ("DESIRED", 0),
                    ("CURRENT", 0),
                    ("UPDATED", 0),
                    ("READY", 0),
                    ("AGE", 0),
                    ("CONTAINERS", 1),
                    ("IMAGES", 1)
                ]
            );
            // The v1beta1-only fields are in both schemas, so no served version prunes them.
            let schema = serde_json::to_value(&v.schema).unwrap();
            let spec = &schema["openAPIV3Schema"]["properties"]["spec"];
            assert_eq!(
                spec["required"],
                serde_json::json!(["selector", "template"])
            );
            for field in [
                "reserveOrdinals",
                "ordinals",
                "persistentVolumeClaimRetentionPolicy",
                "scaleStrategy",
                "lifecycle",
                "volumeClaimUpdateStrategy",
            ] {
                assert!(
                    spec["properties"][field].is_object(),
                    "{} lacks {field}",
                    v.name
                );
            }
            assert_eq!(
                spec["properties"]["reserveOrdinals"]["items"]["x-kubernetes-int-or-string"],
                true
            );
            assert_eq!(
                spec["properties"]["template"]["x-kubernetes-preserve-unknown-fields"],
                true
            );
        }
    }

    /// The generated schema validates as OpenKruise's published CRD does (types, required
    /// fields, list types, enums, defaults), except where [`DELIBERATE_SCHEMA_DIFFERENCES`]
    /// says otherwise.
    #[test]
    fn schema_matches_openkruises_published_fields() {
        if let Err(report) = kruise_core::api::crd_fields::compare_with_published(
            &crd().unwrap(),
            include_str!("../../tests/fixtures/openkruise/statefulsets.fields"),
            DELIBERATE_SCHEMA_DIFFERENCES,
        ) {
            panic!("{report}");
        }
    }
}
