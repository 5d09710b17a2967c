//! The three `CustomResourceDefinition`s: both versions served, `v1beta1` stored, the status
//! subresource and OpenKruise's printer columns.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
pub use kruise_core::api::crd::CrdError;
use kruise_core::api::crd::{AGE_COLUMN, CrdBuilder, PrinterColumn};
use kruise_core::api::crd_fields::{self, edit_at};
use kruise_core::api::version::V1BETA1;
use kube::CustomResourceExt;

use super::{IMAGELISTPULLJOB_KIND, IMAGEPULLJOB_KIND, NODEIMAGE_KIND};

/// OpenKruise's ImagePullJob columns.
const IMAGEPULLJOB_COLUMNS: [PrinterColumn; 5] = [
    PrinterColumn::integer(
        "TOTAL",
        ".status.desired",
        "Number of all nodes matched by this job",
    ),
    PrinterColumn::integer(
        "ACTIVE",
        ".status.active",
        "Number of image pull task active",
    ),
    PrinterColumn::integer(
        "SUCCEED",
        ".status.succeeded",
        "Number of image pull task succeeded",
    ),
    PrinterColumn::integer(
        "FAILED",
        ".status.failed",
        "Number of image pull tasks failed",
    ),
    AGE_COLUMN,
];

/// v1alpha1 ends with `MESSAGE` too (OpenKruise's v1alpha1 type has the marker, its
/// v1beta1 type not).
const IMAGEPULLJOB_V1ALPHA1_COLUMNS: [PrinterColumn; 6] = [
    IMAGEPULLJOB_COLUMNS[0],
    IMAGEPULLJOB_COLUMNS[1],
    IMAGEPULLJOB_COLUMNS[2],
    IMAGEPULLJOB_COLUMNS[3],
    AGE_COLUMN,
    PrinterColumn::string(
        "MESSAGE",
        ".status.message",
        "Summary of status when job is failed",
    ),
];

/// OpenKruise's ImageListPullJob columns.
const IMAGELISTPULLJOB_COLUMNS: [PrinterColumn; 4] = [
    PrinterColumn::integer("TOTAL", ".status.desired", "Number of image pull job"),
    PrinterColumn::integer(
        "SUCCEEDED",
        ".status.succeeded",
        "Number of image pull job succeeded",
    ),
    PrinterColumn::integer(
        "COMPLETED",
        ".status.completed",
        "Number of ImagePullJobs which are finished",
    ),
    AGE_COLUMN,
];

/// OpenKruise's NodeImage columns.
const NODEIMAGE_COLUMNS: [PrinterColumn; 5] = [
    PrinterColumn::integer(
        "DESIRED",
        ".status.desired",
        "Number of all images on this node",
    ),
    PrinterColumn::integer(
        "PULLING",
        ".status.pulling",
        "Number of image pull task active",
    ),
    PrinterColumn::integer(
        "SUCCEED",
        ".status.succeeded",
        "Number of image pull task succeeded",
    ),
    PrinterColumn::integer(
        "FAILED",
        ".status.failed",
        "Number of image pull tasks failed",
    ),
    AGE_COLUMN,
];

/// `imagepulljobs.apps.kruise.io`.
pub fn imagepulljob_crd() -> Result<CustomResourceDefinition, CrdError> {
    CrdBuilder::new(IMAGEPULLJOB_KIND, V1BETA1)
        .version(super::v1alpha1::ImagePullJob::crd())
        .version(super::v1beta1::ImagePullJob::crd())
        .status_subresource()
        .printer_columns(&IMAGEPULLJOB_COLUMNS)
        .version_printer_columns("v1alpha1", &IMAGEPULLJOB_V1ALPHA1_COLUMNS)
        .schema_edit("/properties/spec", |spec| {
            spec.insert(
                "required".into(),
                serde_json::json!(["completionPolicy", "image"]),
            );
        })
        .status_required(&["desired"])
        .kubebuilder_shape()
        .build()
}

/// `imagelistpulljobs.apps.kruise.io`.
pub fn imagelistpulljob_crd() -> Result<CustomResourceDefinition, CrdError> {
    CrdBuilder::new(IMAGELISTPULLJOB_KIND, V1BETA1)
        .version(super::v1alpha1::ImageListPullJob::crd())
        .version(super::v1beta1::ImageListPullJob::crd())
        .status_subresource()
        .printer_columns(&IMAGELISTPULLJOB_COLUMNS)
        .schema_edit("/properties/spec", |spec| {
            spec.insert(
                "required".into(),
                serde_json::json!(["completionPolicy", "images"]),
            );
        })
        .status_required(&["desired"])
        .kubebuilder_shape()
        .build()
}

/// The fields of a NodeImage image's `pullSecrets[]` item, in the schema.
const NODEIMAGE_PULL_SECRET_FIELDS: &str = "/properties/spec/properties/images/additionalProperties/properties/pullSecrets/items/properties";

/// `nodeimages.apps.kruise.io` (cluster-scoped).
pub fn nodeimage_crd() -> Result<CustomResourceDefinition, CrdError> {
    CrdBuilder::new(NODEIMAGE_KIND, V1BETA1)
        .version(super::v1alpha1::NodeImage::crd())
        .version(super::v1beta1::NodeImage::crd())
        .status_subresource()
        .printer_columns(&NODEIMAGE_COLUMNS)
        // A pull secret's `mode` is v1beta1's (OpenKruise's v1alpha1 has no such field, so
        // the API server drops it from v1alpha1 reads as it does for OpenKruise).
        .version_schema_edit("v1alpha1", NODEIMAGE_PULL_SECRET_FIELDS, |fields| {
            fields.remove("mode");
        })
        .schema_edit(
            "/properties/spec/properties/images/additionalProperties",
            |image| {
                crd_fields::require(image, &["tags"]);
            },
        )
        .schema_edit(
            "/properties/status/properties/imageStatuses/additionalProperties",
            |image| {
                crd_fields::require(image, &["tags"]);
                edit_at(image, "/properties/tags/items", |tag| {
                    crd_fields::require(tag, &["phase"]);
                });
            },
        )
        .status_required(&["desired"])
        .kubebuilder_shape()
        .build()
}

/// The three CRDs: ImagePullJob, ImageListPullJob, NodeImage.
pub fn crds() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    Ok(vec![
        imagepulljob_crd()?,
        imagelistpulljob_crd()?,
        nodeimage_crd()?,
    ])
}

/// Where the generated schema deliberately validates differently from OpenKruise's
/// published CRD (`<version> <path>` of `kruise_core::api::crd_fields`).
pub const IMAGEPULLJOB_DELIBERATE_SCHEMA_DIFFERENCES: &[&str] = &[];

/// Where the generated schema deliberately validates differently from OpenKruise's
/// published CRD (`<version> <path>` of `kruise_core::api::crd_fields`).
pub const IMAGELISTPULLJOB_DELIBERATE_SCHEMA_DIFFERENCES: &[&str] = &[];

/// Where the generated schema deliberately validates differently from OpenKruise's
/// published CRD (`<version> <path>` of `kruise_core::api::crd_fields`).
pub const NODEIMAGE_DELIBERATE_SCHEMA_DIFFERENCES: &[&str] = &[];

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

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, p)| (n.to_string(), p.to_string()))
            .collect()
    }

    #[test]
    fn every_crd_serves_both_versions_stores_v1beta1_with_openkruise_columns() {
        for (crd, name, scope, expected) in [
            (
                imagepulljob_crd().unwrap(),
                super::super::IMAGEPULLJOB_CRD,
                "Namespaced",
                pairs(&[
                    ("TOTAL", ".status.desired"),
                    ("ACTIVE", ".status.active"),
                    ("SUCCEED", ".status.succeeded"),
                    ("FAILED", ".status.failed"),
                    ("AGE", ".metadata.creationTimestamp"),
                ]),
            ),
            (
                imagelistpulljob_crd().unwrap(),
                super::super::IMAGELISTPULLJOB_CRD,
                "Namespaced",
                pairs(&[
                    ("TOTAL", ".status.desired"),
                    ("SUCCEEDED", ".status.succeeded"),
                    ("COMPLETED", ".status.completed"),
                    ("AGE", ".metadata.creationTimestamp"),
                ]),
            ),
            (
                nodeimage_crd().unwrap(),
                super::super::NODEIMAGE_CRD,
                "Cluster",
                pairs(&[
                    ("DESIRED", ".status.desired"),
                    ("PULLING", ".status.pulling"),
                    ("SUCCEED", ".status.succeeded"),
                    ("FAILED", ".status.failed"),
                    ("AGE", ".metadata.creationTimestamp"),
                ]),
            ),
        ] {
            assert_eq!(crd.metadata.name.as_deref(), Some(name));
            assert_eq!(crd.spec.group, "apps.kruise.io");
            assert_eq!(crd.spec.scope, scope);
            let stored: Vec<_> = crd
                .spec
                .versions
                .iter()
                .map(|v| (v.name.as_str(), v.served, v.storage))
                .collect();
            assert_eq!(
                stored,
                [("v1alpha1", true, false), ("v1beta1", true, true)],
                "{name}"
            );
            for v in &crd.spec.versions {
                assert!(v.subresources.as_ref().unwrap().status.is_some());
            }
            let mut alpha = expected.clone();
            if name == super::super::IMAGEPULLJOB_CRD {
                alpha.push(("MESSAGE".into(), ".status.message".into()));
            }
            assert_eq!(columns(&crd), [alpha, expected], "{name}");
        }
    }

    #[test]
    fn a_node_image_pull_secret_has_a_mode_in_v1beta1_only() {
        let crd = serde_json::to_value(nodeimage_crd().unwrap()).unwrap();
        let modes: Vec<_> = crd["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                let fields = v["schema"]["openAPIV3Schema"]
                    .pointer(NODEIMAGE_PULL_SECRET_FIELDS)
                    .unwrap();
                (
                    v["name"].as_str().unwrap().to_owned(),
                    fields["name"].is_object(),
                    fields["mode"].is_object(),
                )
            })
            .collect();
        assert_eq!(
            modes,
            [
                ("v1alpha1".to_owned(), true, false),
                ("v1beta1".to_owned(), true, true)
            ]
        );
    }

    #[test]
    fn the_inline_template_and_selectors_are_spec_fields_in_the_schema() {
        let crd = serde_json::to_value(imagepulljob_crd().unwrap()).unwrap();
        for version in crd["spec"]["versions"].as_array().unwrap() {
            let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"];
            assert_eq!(
                spec["required"],
                serde_json::json!(["completionPolicy", "image"])
            );
            let props = &spec["properties"];
            for field in [
                "image",
                "pullSecrets",
                "selector",
                "podSelector",
                "parallelism",
                "pullPolicy",
                "completionPolicy",
                "sandboxConfig",
                "imagePullPolicy",
            ] {
                assert!(props[field].is_object(), "{field} in {}", version["name"]);
            }
            let selector = &props["selector"]["properties"];
            assert!(selector["names"].is_object() && selector["matchLabels"].is_object());
        }
    }

    /// The generated schema validates as OpenKruise's published CRD does (types, required
    /// fields, list types, enums, defaults), except where [`IMAGEPULLJOB_DELIBERATE_SCHEMA_DIFFERENCES`] says otherwise.
    #[test]
    fn imagepulljobs_schema_matches_openkruises_published_fields() {
        if let Err(report) = kruise_core::api::crd_fields::compare_with_published(
            &imagepulljob_crd().unwrap(),
            include_str!("../../tests/fixtures/openkruise/imagepulljobs.fields"),
            IMAGEPULLJOB_DELIBERATE_SCHEMA_DIFFERENCES,
        ) {
            panic!("{report}");
        }
    }

    /// The generated schema validates as OpenKruise's published CRD does (types, required
    /// fields, list types, enums, defaults), except where [`IMAGELISTPULLJOB_DELIBERATE_SCHEMA_DIFFERENCES`] says otherwise.
    #[test]
    fn imagelistpulljobs_schema_matches_openkruises_published_fields() {
        if let Err(report) = kruise_core::api::crd_fields::compare_with_published(
            &imagelistpulljob_crd().unwrap(),
            include_str!("../../tests/fixtures/openkruise/imagelistpulljobs.fields"),
            IMAGELISTPULLJOB_DELIBERATE_SCHEMA_DIFFERENCES,
        ) {
            panic!("{report}");
        }
    }

    /// The generated schema validates as OpenKruise's published CRD does (types, required
    /// fields, list types, enums, defaults), except where [`NODEIMAGE_DELIBERATE_SCHEMA_DIFFERENCES`] says otherwise.
    #[test]
    fn nodeimages_schema_matches_openkruises_published_fields() {
        if let Err(report) = kruise_core::api::crd_fields::compare_with_published(
            &nodeimage_crd().unwrap(),
            include_str!("../../tests/fixtures/openkruise/nodeimages.fields"),
            NODEIMAGE_DELIBERATE_SCHEMA_DIFFERENCES,
        ) {
            panic!("{report}");
        }
    }
}
