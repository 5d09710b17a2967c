//! The `CustomResourceDefinition`: both versions served, `v1beta1` stored, the status
//! subresource, shortName `crr` and OpenKruise's printer columns.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
pub use kruise_core::api::crd::CrdError;
use kruise_core::api::crd::{AGE_COLUMN, CrdBuilder, PrinterColumn};
use kruise_core::api::crd_fields::{self, edit_at};
use kruise_core::api::version::V1BETA1;
use kube::CustomResourceExt;

use super::KIND;

/// OpenKruise's columns: `PHASE`, `POD`, `NODE`, `AGE`.
const COLUMNS: [PrinterColumn; 4] = [
    PrinterColumn::string(
        "PHASE",
        ".status.phase",
        "Phase of this ContainerRecreateRequest.",
    ),
    PrinterColumn::string(
        "POD",
        ".spec.podName",
        "Pod name of this ContainerRecreateRequest.",
    ),
    PrinterColumn::string(
        "NODE",
        ".metadata.labels.crr\\.apps\\.kruise\\.io/node-name",
        "Node name of this ContainerRecreateRequest.",
    ),
    AGE_COLUMN,
];

/// The properties of a `spec.containers[]` item, in the schema.
const CONTAINER_FIELDS: &str = "/properties/spec/properties/containers/items/properties";

/// The phases of a request and of each container's recreation (`v1beta1` lists them).
const PHASES: &[&str] = &["Pending", "Recreating", "Succeeded", "Failed", "Completed"];

/// `containerrecreaterequests.apps.kruise.io`.
pub fn crd() -> Result<CustomResourceDefinition, CrdError> {
    CrdBuilder::new(KIND, V1BETA1)
        .version(super::v1alpha1::ContainerRecreateRequest::crd())
        .version(super::v1beta1::ContainerRecreateRequest::crd())
        .status_subresource()
        .printer_columns(&COLUMNS)
        .schema_edit("/properties/spec", |spec| {
            spec.insert(
                "required".into(),
                serde_json::json!(["containers", "podName"]),
            );
        })
        .schema_edit(CONTAINER_FIELDS, |container| {
            edit_at(container, "/ports/items/properties/protocol", |protocol| {
                protocol.insert("default".into(), "TCP".into());
            });
            edit_at(
                container,
                "/preStop/properties/exec/properties/command",
                crd_fields::atomic_list,
            );
            edit_at(
                container,
                "/preStop/properties/httpGet/properties/httpHeaders",
                crd_fields::atomic_list,
            );
            edit_at(container, "/statusContext", |context| {
                crd_fields::require(context, &["containerID", "restartCount"]);
            });
        })
        .status_required(&["phase"])
        .version_schema_edit(
            V1BETA1,
            "/properties/spec/properties/strategy/properties/failurePolicy",
            |policy| {
                crd_fields::one_of(policy, &["Fail", "Ignore"]);
            },
        )
        .version_schema_edit(V1BETA1, "/properties/status/properties", |status| {
            edit_at(status, "/phase", |phase| crd_fields::one_of(phase, PHASES));
            edit_at(
                status,
                "/containerRecreateStates/items/properties/phase",
                |phase| crd_fields::one_of(phase, PHASES),
            );
            edit_at(status, "/containerStatusSnapshot/items", |snapshot| {
                crd_fields::require(snapshot, &["ready", "restartCount"]);
            });
            edit_at(status, "/conditions", |conditions| {
                conditions.insert("x-kubernetes-list-type".into(), "map".into());
                conditions.insert(
                    "x-kubernetes-list-map-keys".into(),
                    serde_json::json!(["type"]),
                );
            });
            edit_at(status, "/conditions/items/properties/status", |status| {
                crd_fields::one_of(status, &["True", "False", "Unknown"]);
            });
        })
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
    fn crd_has_both_versions_short_name_status_and_openkruise_columns() {
        let crd = crd().unwrap();
        assert_eq!(crd.metadata.name.as_deref(), Some(super::super::CRD_NAME));
        assert_eq!(crd.spec.group, "apps.kruise.io");
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.short_names, Some(vec!["crr".to_string()]));
        let stored: Vec<_> = crd
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.storage, v.served))
            .collect();
        assert_eq!(stored, [("v1alpha1", false, true), ("v1beta1", true, true)]);
        for v in &crd.spec.versions {
            assert!(v.subresources.as_ref().unwrap().status.is_some());
            let columns: Vec<_> = v
                .additional_printer_columns
                .iter()
                .flatten()
                .map(|c| (c.name.as_str(), c.json_path.as_str()))
                .collect();
            assert_eq!(
                columns,
                [
                    ("PHASE", ".status.phase"),
                    ("POD", ".spec.podName"),
                    (
                        "NODE",
                        ".metadata.labels.crr\\.apps\\.kruise\\.io/node-name"
                    ),
                    ("AGE", ".metadata.creationTimestamp"),
                ]
            );
        }
    }

    #[test]
    fn only_v1beta1_has_the_typed_snapshot_and_conditions() {
        let crd = crd().unwrap();
        let status = |name: &str| {
            let v = crd.spec.versions.iter().find(|v| v.name == name).unwrap();
            let schema = serde_json::to_value(&v.schema).unwrap();
            schema["openAPIV3Schema"]["properties"]["status"]["properties"].clone()
        };
        assert!(status("v1beta1")["containerStatusSnapshot"].is_object());
        assert!(status("v1beta1")["conditions"].is_object());
        assert!(status("v1alpha1")["containerStatusSnapshot"].is_null());
        assert!(status("v1alpha1")["conditions"].is_null());
        for v in &crd.spec.versions {
            let schema = serde_json::to_value(&v.schema).unwrap();
            assert_eq!(
                schema["openAPIV3Schema"]["properties"]["spec"]["required"],
                serde_json::json!(["containers", "podName"])
            );
        }
    }

    /// The generated schema validates as OpenKruise's published CRD does (types, required
    /// fields, list types, enums, defaults), except where [`DELIBERATE_SCHEMA_DIFFERENCES`] says otherwise.
    #[test]
    fn containerrecreaterequests_schema_matches_openkruises_published_fields() {
        if let Err(report) = kruise_core::api::crd_fields::compare_with_published(
            &crd().unwrap(),
            include_str!("../../tests/fixtures/openkruise/containerrecreaterequests.fields"),
            DELIBERATE_SCHEMA_DIFFERENCES,
        ) {
            panic!("{report}");
        }
    }
}
