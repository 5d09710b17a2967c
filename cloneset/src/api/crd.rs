//! The CloneSet `CustomResourceDefinition`: both versions served, `v1beta1` stored.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
pub use kruise_core::api::crd::CrdError;
use kruise_core::api::crd::{AGE_COLUMN, CrdBuilder, PrinterColumn};
use kruise_core::api::version::V1BETA1;
use kube::CustomResourceExt;

use super::KIND;

/// OpenKruise's CloneSet columns.
const COLUMNS: [PrinterColumn; 10] = [
    PrinterColumn::integer("DESIRED", ".spec.replicas", "The desired number of pods."),
    PrinterColumn::integer(
        "UPDATED",
        ".status.updatedReplicas",
        "The number of pods updated.",
    ),
    PrinterColumn::integer(
        "UPDATED_READY",
        ".status.updatedReadyReplicas",
        "The number of pods updated and ready.",
    ),
    PrinterColumn::integer(
        "UPDATED_AVAILABLE",
        ".status.updatedAvailableReplicas",
        "The number of pods updated and available.",
    ),
    PrinterColumn::integer(
        "READY",
        ".status.readyReplicas",
        "The number of pods ready.",
    ),
    PrinterColumn::integer(
        "TOTAL",
        ".status.replicas",
        "The number of currently all pods.",
    ),
    AGE_COLUMN,
    PrinterColumn::wide_string(
        "CONTAINERS",
        ".spec.template.spec.containers[*].name",
        "The containers of currently cloneset.",
    ),
    PrinterColumn::wide_string(
        "IMAGES",
        ".spec.template.spec.containers[*].image",
        "The images of currently cloneset.",
    ),
    PrinterColumn::wide_string(
        "SELECTOR",
        ".status.labelSelector",
        "The selector of currently cloneset.",
    ),
];

/// The CRD with `v1alpha1` and `v1beta1` (storage), scale and status subresources and
/// OpenKruise's printer columns, plus the touches the derive cannot express:
/// `spec.required = [selector, template]`, `enablePVCReuse` defaulting to `false`
/// (kubebuilder `+kubebuilder:default=false`), and the rest of OpenKruise's published schema
/// (held to it by `schema_matches_openkruises_published_fields`).
pub fn crd() -> Result<CustomResourceDefinition, CrdError> {
    CrdBuilder::new(KIND, V1BETA1)
        .version(super::v1alpha1::CloneSet::crd())
        .version(super::v1beta1::CloneSet::crd())
        .status_subresource()
        .replicated_workload(&[
            "availableReplicas",
            "readyReplicas",
            "replicas",
            "updatedReadyReplicas",
            "updatedReplicas",
        ])
        .printer_columns(&COLUMNS)
        .version_schema_edit(
            V1BETA1,
            "/properties/spec/properties/scaleStrategy/properties/enablePVCReuse",
            |reuse| {
                reuse.insert("default".into(), false.into());
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
    fn crd_has_both_versions_scale_and_columns() {
        let crd = crd().unwrap();
        assert_eq!(crd.spec.group, "apps.kruise.io");
        assert_eq!(crd.spec.names.kind, "CloneSet");
        assert_eq!(crd.spec.names.plural, "clonesets");
        assert_eq!(crd.spec.names.short_names, Some(vec!["clone".to_string()]));
        assert_eq!(crd.spec.scope, "Namespaced");
        // Versions, storage and the status subresource: the builder's own tests.
        assert_eq!(crd.spec.versions.len(), 2);
        for v in &crd.spec.versions {
            let sub = v.subresources.as_ref().unwrap();
            let scale = sub.scale.as_ref().unwrap();
            assert_eq!(scale.spec_replicas_path, ".spec.replicas");
            assert_eq!(scale.status_replicas_path, ".status.replicas");
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
                    ("UPDATED", 0),
                    ("UPDATED_READY", 0),
                    ("UPDATED_AVAILABLE", 0),
                    ("READY", 0),
                    ("TOTAL", 0),
                    ("AGE", 0),
                    ("CONTAINERS", 1),
                    ("IMAGES", 1),
                    ("SELECTOR", 1)
                ]
            );
        }
    }

    #[test]
    fn crd_yaml_mentions_everything() {
        let yaml = serde_saphyr::to_string(&crd().unwrap()).unwrap();
        let v: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
        let versions = v["spec"]["versions"].as_array().unwrap();
        assert_eq!(versions.len(), 2);
        let beta = versions.iter().find(|v| v["name"] == "v1beta1").unwrap();
        assert_eq!(beta["storage"], true);
        assert_eq!(
            beta["subresources"]["scale"]["labelSelectorPath"],
            ".status.labelSelector"
        );
        let spec = &beta["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(
            spec["required"],
            serde_json::json!(["selector", "template"])
        );
        assert_eq!(
            spec["properties"]["template"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
        assert_eq!(
            spec["properties"]["scaleStrategy"]["properties"]["enablePVCReuse"]["default"],
            false
        );
        assert_eq!(
            spec["properties"]["updateStrategy"]["properties"]["rollingUpdate"]["properties"]["partition"]
                ["x-kubernetes-int-or-string"],
            true
        );
        let alpha = versions.iter().find(|v| v["name"] == "v1alpha1").unwrap();
        assert_eq!(alpha["storage"], false);
        assert!(
            alpha["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["scaleStrategy"]
                ["properties"]["disablePVCReuse"]
                .is_object()
        );
        assert!(yaml.contains("UPDATED_READY"));
    }

    /// The generated schema validates as OpenKruise's published CRD does (types, required
    /// fields, list types, enums, defaults), except where [`DELIBERATE_SCHEMA_DIFFERENCES`]
    /// says otherwise.
    #[test]
    fn schema_matches_openkruises_published_fields() {
        if let Err(report) = kruise_core::api::crd_fields::compare_with_published(
            &crd().unwrap(),
            include_str!("../../tests/fixtures/openkruise/clonesets.fields"),
            DELIBERATE_SCHEMA_DIFFERENCES,
        ) {
            panic!("{report}");
        }
    }
}
