//! The DaemonSet `CustomResourceDefinition`: both versions served, `v1beta1` stored,
//! shortNames `daemon` and `ads`, OpenKruise's printer columns and the status subresource.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
pub use kruise_core::api::crd::CrdError;
use kruise_core::api::crd::{AGE_COLUMN, CrdBuilder, PrinterColumn};
use kruise_core::api::version::V1BETA1;
use kube::CustomResourceExt;

use super::KIND;

/// OpenKruise's DaemonSet columns (the same in both versions, descriptions included).
const COLUMNS: [PrinterColumn; 8] = [
    PrinterColumn::integer(
        "DESIRED",
        ".status.desiredNumberScheduled",
        "The desired number of pods.",
    ),
    PrinterColumn::integer(
        "CURRENT",
        ".status.currentNumberScheduled",
        "The current number of pods.",
    ),
    PrinterColumn::integer("READY", ".status.numberReady", "The ready number of pods."),
    PrinterColumn::integer(
        "UP-TO-DATE",
        ".status.updatedNumberScheduled",
        "The updated number of pods.",
    ),
    PrinterColumn::integer(
        "AVAILABLE",
        ".status.numberAvailable",
        "The updated number of pods.",
    ),
    AGE_COLUMN,
    PrinterColumn::wide_string(
        "CONTAINERS",
        ".spec.template.spec.containers[*].name",
        "The containers of currently  daemonset.",
    ),
    PrinterColumn::wide_string(
        "IMAGES",
        ".spec.template.spec.containers[*].image",
        "The images of currently advanced daemonset.",
    ),
];

/// The CRD, with `spec.required = [selector, template]` as OpenKruise's has it.
pub fn crd() -> Result<CustomResourceDefinition, CrdError> {
    CrdBuilder::new(KIND, V1BETA1)
        .version(super::v1alpha1::DaemonSet::crd())
        .version(super::v1beta1::DaemonSet::crd())
        .status_subresource()
        .printer_columns(&COLUMNS)
        .schema_edit("/properties/spec", |spec| {
            spec.insert(
                "required".into(),
                serde_json::json!(["selector", "template"]),
            );
        })
        .status_required(&[
            "currentNumberScheduled",
            "desiredNumberScheduled",
            "numberMisscheduled",
            "numberReady",
            "updatedNumberScheduled",
        ])
        .kubebuilder_shape()
        .build()
}

/// Where the generated schema deliberately validates differently from OpenKruise's
/// published CRD (`<version> <path>` of `kruise_core::api::crd_fields`).
pub const DELIBERATE_SCHEMA_DIFFERENCES: &[&str] = &[];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_has_both_versions_short_names_status_and_openkruise_columns() {
        let crd = crd().unwrap();
        assert_eq!(crd.metadata.name.as_deref(), Some(super::super::CRD_NAME));
        assert_eq!(crd.spec.group, "apps.kruise.io");
        assert_eq!(crd.spec.names.kind, "DaemonSet");
        assert_eq!(
            crd.spec.names.short_names,
            Some(vec!["daemon".to_string(), "ads".to_string()])
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
            assert!(sub.scale.is_none());
            let cols: Vec<_> = v
                .additional_printer_columns
                .iter()
                .flatten()
                .map(|c| {
                    (
                        c.name.as_str(),
                        c.json_path.as_str(),
                        c.priority.unwrap_or(0),
                    )
                })
                .collect();
            assert_eq!(
                cols,
                [
                    ("DESIRED", ".status.desiredNumberScheduled", 0),
                    ("CURRENT", ".status.currentNumberScheduled", 0),
                    ("READY", ".status.numberReady", 0),
                    ("UP-TO-DATE", ".status.updatedNumberScheduled", 0),
                    ("AVAILABLE", ".status.numberAvailable", 0),
                    ("AGE", ".metadata.creationTimestamp", 0),
                    ("CONTAINERS", ".spec.template.spec.containers[*].name", 1),
                    ("IMAGES", ".spec.template.spec.containers[*].image", 1),
                ]
            );
            let schema = serde_json::to_value(&v.schema).unwrap();
            let spec = &schema["openAPIV3Schema"]["properties"]["spec"];
            assert_eq!(
                spec["required"],
                serde_json::json!(["selector", "template"])
            );
            assert_eq!(
                spec["properties"]["template"]["x-kubernetes-preserve-unknown-fields"],
                true
            );
            let rolling =
                &spec["properties"]["updateStrategy"]["properties"]["rollingUpdate"]["properties"];
            for field in [
                "rollingUpdateType",
                "maxUnavailable",
                "maxSurge",
                "selector",
                "partition",
                "paused",
            ] {
                assert!(rolling[field].is_object(), "{} lacks {field}", v.name);
            }
        }
        // The version-specific fields: scaleStrategy and updateRevision in v1beta1 only,
        // daemonSetHash in v1alpha1 only.
        let props = |name: &str, part: &str| {
            let v = crd.spec.versions.iter().find(|v| v.name == name).unwrap();
            let schema = serde_json::to_value(&v.schema).unwrap();
            schema["openAPIV3Schema"]["properties"][part]["properties"].clone()
        };
        assert!(props("v1beta1", "spec")["scaleStrategy"].is_object());
        assert!(props("v1alpha1", "spec")["scaleStrategy"].is_null());
        assert!(props("v1beta1", "status")["updateRevision"].is_object());
        assert!(props("v1alpha1", "status")["daemonSetHash"].is_object());
        assert!(props("v1alpha1", "status")["updateRevision"].is_null());
    }

    /// The generated schema validates as OpenKruise's published CRD does (types, required
    /// fields, list types, enums, defaults), except where [`DELIBERATE_SCHEMA_DIFFERENCES`] says otherwise.
    #[test]
    fn daemonsets_schema_matches_openkruises_published_fields() {
        if let Err(report) = kruise_core::api::crd_fields::compare_with_published(
            &crd().unwrap(),
            include_str!("../../tests/fixtures/openkruise/daemonsets.fields"),
            DELIBERATE_SCHEMA_DIFFERENCES,
        ) {
            panic!("{report}");
        }
    }
}
