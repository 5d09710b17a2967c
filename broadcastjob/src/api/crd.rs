//! The two `CustomResourceDefinition`s: both versions served, `v1beta1` stored, the status
//! subresource and OpenKruise's printer columns.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
pub use kruise_core::api::crd::CrdError;
use kruise_core::api::crd::{AGE_COLUMN, CrdBuilder, PrinterColumn};
use kruise_core::api::crd_fields;
use kruise_core::api::version::V1BETA1;
use kube::CustomResourceExt;

use super::{ADVANCEDCRONJOB_KIND, BROADCASTJOB_KIND};

/// OpenKruise's BroadcastJob columns.
const BROADCASTJOB_COLUMNS: [PrinterColumn; 5] = [
    PrinterColumn::integer(
        "Desired",
        ".status.desired",
        "The desired number of pods. This is typically equal to the number of nodes satisfied to run pods.",
    ),
    PrinterColumn::integer(
        "Active",
        ".status.active",
        "The number of actively running pods.",
    ),
    PrinterColumn::integer(
        "Succeeded",
        ".status.succeeded",
        "The number of pods which reached phase Succeeded.",
    ),
    PrinterColumn::integer(
        "Failed",
        ".status.failed",
        "The number of pods which reached phase Failed.",
    ),
    AGE_COLUMN,
];

/// OpenKruise's AdvancedCronJob columns.
const ADVANCEDCRONJOB_COLUMNS: [PrinterColumn; 4] = [
    PrinterColumn::string(
        "Schedule",
        ".spec.schedule",
        "The schedule of advanced cron job.",
    ),
    PrinterColumn::string("Type", ".status.type", "Type of cron job."),
    PrinterColumn {
        name: "LastScheduleTime",
        type_: "date",
        json_path: ".status.lastScheduleTime",
        description: "The last time at which job was scheduled.",
        priority: 0,
    },
    AGE_COLUMN,
];

/// `broadcastjobs.apps.kruise.io`.
pub fn broadcastjob_crd() -> Result<CustomResourceDefinition, CrdError> {
    CrdBuilder::new(BROADCASTJOB_KIND, V1BETA1)
        .version(super::v1alpha1::BroadcastJob::crd())
        .version(super::v1beta1::BroadcastJob::crd())
        .status_subresource()
        .printer_columns(&BROADCASTJOB_COLUMNS)
        .schema_edit("/properties/spec", |spec| {
            spec.insert("required".into(), serde_json::json!(["template"]));
        })
        .kubebuilder_shape()
        .build()
}

/// `advancedcronjobs.apps.kruise.io`.
pub fn advancedcronjob_crd() -> Result<CustomResourceDefinition, CrdError> {
    CrdBuilder::new(ADVANCEDCRONJOB_KIND, V1BETA1)
        .version(super::v1alpha1::AdvancedCronJob::crd())
        .version(super::v1beta1::AdvancedCronJob::crd())
        .status_subresource()
        .printer_columns(&ADVANCEDCRONJOB_COLUMNS)
        .schema_edit("/properties/spec", |spec| {
            spec.insert(
                "required".into(),
                serde_json::json!(["schedule", "template"]),
            );
        })
        .schema_edit("/properties/spec/properties/concurrencyPolicy", |policy| {
            crd_fields::one_of(policy, &["Allow", "Forbid", "Replace"]);
        })
        .schema_edit(
            "/properties/spec/properties/template/properties/broadcastJobTemplate/properties/spec",
            |spec| crd_fields::require(spec, &["template"]),
        )
        .version_schema_edit(
            V1BETA1,
            "/properties/spec/properties/template/properties/imageListPullJobTemplate/properties/spec",
            |spec| crd_fields::require(spec, &["completionPolicy", "images"]),
        )
        .kubebuilder_shape()
        .build()
}

/// Both CRDs, BroadcastJob first.
pub fn crds() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    Ok(vec![broadcastjob_crd()?, advancedcronjob_crd()?])
}

/// Where the generated schema deliberately validates differently from OpenKruise's
/// published CRD (`<version> <path>` of `kruise_core::api::crd_fields`).
pub const BROADCASTJOB_DELIBERATE_SCHEMA_DIFFERENCES: &[&str] = &[];

/// Where the generated schema deliberately validates differently from OpenKruise's
/// published CRD (`<version> <path>` of `kruise_core::api::crd_fields`): a template's
/// `metadata` keeps its fields. OpenKruise's schema types it as an object with no
/// properties, so the API server prunes the labels and annotations a user gives the
/// BroadcastJobs or ImageListPullJobs it creates (docs/broadcastjob.md, Differences).
pub const ADVANCEDCRONJOB_DELIBERATE_SCHEMA_DIFFERENCES: &[&str] = &[
    "v1alpha1 .spec.template.broadcastJobTemplate.metadata",
    "v1beta1 .spec.template.broadcastJobTemplate.metadata",
    "v1beta1 .spec.template.imageListPullJobTemplate.metadata",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn columns(crd: &CustomResourceDefinition) -> Vec<Vec<(String, String)>> {
        crd.spec
            .versions
            .iter()
            .map(|v| {
                v.additional_printer_columns
                    .iter()
                    .flatten()
                    .map(|c| (c.name.clone(), c.json_path.clone()))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn broadcastjob_crd_has_both_versions_short_name_status_and_columns() {
        let crd = broadcastjob_crd().unwrap();
        assert_eq!(crd.spec.group, "apps.kruise.io");
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some(super::super::BROADCASTJOB_CRD)
        );
        assert_eq!(crd.spec.names.short_names, Some(vec!["bcj".to_string()]));
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
        }
        let expected: Vec<(String, String)> = [
            ("Desired", ".status.desired"),
            ("Active", ".status.active"),
            ("Succeeded", ".status.succeeded"),
            ("Failed", ".status.failed"),
            ("AGE", ".metadata.creationTimestamp"),
        ]
        .iter()
        .map(|(n, p)| (n.to_string(), p.to_string()))
        .collect();
        assert_eq!(columns(&crd), [expected.clone(), expected]);
    }

    #[test]
    fn advancedcronjob_crd_has_both_versions_short_name_and_columns() {
        let crd = advancedcronjob_crd().unwrap();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some(super::super::ADVANCEDCRONJOB_CRD)
        );
        assert_eq!(crd.spec.names.short_names, Some(vec!["acj".to_string()]));
        let expected: Vec<(String, String)> = [
            ("Schedule", ".spec.schedule"),
            ("Type", ".status.type"),
            ("LastScheduleTime", ".status.lastScheduleTime"),
            ("AGE", ".metadata.creationTimestamp"),
        ]
        .iter()
        .map(|(n, p)| (n.to_string(), p.to_string()))
        .collect();
        assert_eq!(columns(&crd), [expected.clone(), expected]);
        let yaml = serde_saphyr::to_string(&crd).unwrap();
        let v: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
        let versions = v["spec"]["versions"].as_array().unwrap();
        let template = |name: &str| {
            versions.iter().find(|v| v["name"] == name).unwrap()["schema"]["openAPIV3Schema"]
                ["properties"]["spec"]["properties"]["template"]["properties"]
                .clone()
        };
        assert!(template("v1beta1")["imageListPullJobTemplate"].is_object());
        assert!(template("v1alpha1")["imageListPullJobTemplate"].is_null());
        assert_eq!(
            template("v1beta1")["jobTemplate"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
    }

    /// The generated schema validates as OpenKruise's published CRD does (types, required
    /// fields, list types, enums, defaults), except where [`BROADCASTJOB_DELIBERATE_SCHEMA_DIFFERENCES`] says otherwise.
    #[test]
    fn broadcastjobs_schema_matches_openkruises_published_fields() {
        if let Err(report) = kruise_core::api::crd_fields::compare_with_published(
            &broadcastjob_crd().unwrap(),
            include_str!("../../tests/fixtures/openkruise/broadcastjobs.fields"),
            BROADCASTJOB_DELIBERATE_SCHEMA_DIFFERENCES,
        ) {
            panic!("{report}");
        }
    }

    /// The generated schema validates as OpenKruise's published CRD does (types, required
    /// fields, list types, enums, defaults), except where [`ADVANCEDCRONJOB_DELIBERATE_SCHEMA_DIFFERENCES`] says otherwise.
    #[test]
    fn advancedcronjobs_schema_matches_openkruises_published_fields() {
        if let Err(report) = kruise_core::api::crd_fields::compare_with_published(
            &advancedcronjob_crd().unwrap(),
            include_str!("../../tests/fixtures/openkruise/advancedcronjobs.fields"),
            ADVANCEDCRONJOB_DELIBERATE_SCHEMA_DIFFERENCES,
        ) {
            panic!("{report}");
        }
    }
}
