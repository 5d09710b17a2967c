//! The SidecarSet `CustomResourceDefinition`: cluster-scoped, both versions served,
//! `v1beta1` stored, status subresource, OpenKruise's printer columns.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
pub use kruise_core::api::crd::CrdError;
use kruise_core::api::crd::{AGE_COLUMN, CrdBuilder, PrinterColumn};
use kruise_core::api::crd_fields;
use kruise_core::api::version::V1BETA1;
use kube::CustomResourceExt;

use super::KIND;

/// OpenKruise's SidecarSet columns.
const COLUMNS: [PrinterColumn; 4] = [
    PrinterColumn::integer(
        "MATCHED",
        ".status.matchedPods",
        "The number of pods matched.",
    ),
    PrinterColumn::integer(
        "UPDATED",
        ".status.updatedPods",
        "The number of pods matched and updated.",
    ),
    PrinterColumn::integer(
        "READY",
        ".status.readyPods",
        "The number of pods matched and ready.",
    ),
    AGE_COLUMN,
];

/// The merged CRD, with the touches the derive cannot express: no schema `default`s other
/// than OpenKruise's own (`injectionStrategy.revision.policy: Always`,
/// `resourcesPolicy.targetContainersNameRegex: .*`), and the `Always`/`Partial` and
/// `sum`/`max` enums.
pub fn crd() -> Result<CustomResourceDefinition, CrdError> {
    CrdBuilder::new(KIND, V1BETA1)
        .version(super::v1alpha1::SidecarSet::crd())
        .version(super::v1beta1::SidecarSet::crd())
        .status_subresource()
        .printer_columns(&COLUMNS)
        .schema_edit(
            "/properties/spec/properties/injectionStrategy/properties/revision/properties/policy",
            |policy| {
                policy.insert("default".into(), "Always".into());
                policy.insert("enum".into(), serde_json::json!(["Always", "Partial"]));
            },
        )
        .schema_edit(
            "/properties/spec/properties/containers/items/properties/resourcesPolicy",
            resources_policy,
        )
        .schema_edit(
            "/properties/spec/properties/initContainers/items/properties/resourcesPolicy",
            resources_policy,
        )
        // What OpenKruise's schema says and the derive cannot: `spec` optional, selector
        // lists atomic, the counts always present, a pull secret's name optional ("").
        .schema_edit("", |root| {
            crd_fields::unrequire(root, "spec");
            crd_fields::atomic_label_selector_lists(root);
        })
        .schema_edit("/properties/status", |status| {
            crd_fields::require(status, &["matchedPods", "readyPods", "updatedPods"]);
        })
        .schema_edit(
            "/properties/spec/properties/imagePullSecrets/items",
            |secret| {
                crd_fields::unrequire(secret, "name");
                if let Some(serde_json::Value::Object(name)) =
                    secret.get_mut("properties").and_then(|p| p.get_mut("name"))
                {
                    name.insert("default".into(), "".into());
                }
            },
        )
        .build()
}

/// `resourcesExpr` is required, `targetContainersNameRegex` defaults to `.*`,
/// `targetContainersMode` is `sum` or `max`.
fn resources_policy(policy: &mut serde_json::Map<String, serde_json::Value>) {
    crd_fields::require(policy, &["resourcesExpr"]);
    let Some(serde_json::Value::Object(properties)) = policy.get_mut("properties") else {
        return;
    };
    if let Some(regex) = properties
        .get_mut("targetContainersNameRegex")
        .and_then(serde_json::Value::as_object_mut)
    {
        regex.insert("default".into(), ".*".into());
    }
    if let Some(mode) = properties
        .get_mut("targetContainersMode")
        .and_then(serde_json::Value::as_object_mut)
    {
        mode.insert("enum".into(), serde_json::json!(["sum", "max"]));
    }
}

/// Where the generated schema deliberately validates differently from OpenKruise's
/// published CRD (`<version> <path>` of `kruise_core::api::crd_fields`).
pub const DELIBERATE_SCHEMA_DIFFERENCES: &[&str] = &[];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_has_both_versions_status_and_columns() {
        let crd = crd().unwrap();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("sidecarsets.apps.kruise.io")
        );
        assert_eq!(crd.spec.group, "apps.kruise.io");
        assert_eq!(crd.spec.names.kind, "SidecarSet");
        assert_eq!(crd.spec.names.plural, "sidecarsets");
        assert_eq!(crd.spec.names.singular.as_deref(), Some("sidecarset"));
        assert_eq!(crd.spec.names.short_names, None);
        assert_eq!(crd.spec.scope, "Cluster");
        // Versions, storage and the status subresource: the builder's own tests.
        assert_eq!(crd.spec.versions.len(), 2);
        for v in &crd.spec.versions {
            let sub = v.subresources.as_ref().unwrap();
            assert!(sub.scale.is_none());
            let cols: Vec<_> = v
                .additional_printer_columns
                .iter()
                .flatten()
                .map(|c| (c.name.as_str(), c.type_.as_str(), c.json_path.as_str()))
                .collect();
            assert_eq!(
                cols,
                [
                    ("MATCHED", "integer", ".status.matchedPods"),
                    ("UPDATED", "integer", ".status.updatedPods"),
                    ("READY", "integer", ".status.readyPods"),
                    ("AGE", "date", ".metadata.creationTimestamp"),
                ]
            );
            let schema =
                serde_json::to_value(v.schema.as_ref().unwrap().open_api_v3_schema.as_ref())
                    .unwrap();
            let spec = &schema["properties"]["spec"]["properties"];
            assert_eq!(
                spec["volumes"]["x-kubernetes-preserve-unknown-fields"],
                true
            );
            let item = &spec["containers"]["items"];
            assert_eq!(item["x-kubernetes-preserve-unknown-fields"], true);
            assert!(item["properties"]["podInjectPolicy"].is_object());
            assert!(
                item["properties"]["upgradeStrategy"]["properties"]["hotUpgradeEmptyImage"]
                    .is_object()
            );
            // The container fields are schemaless, as in OpenKruise's CRD.
            assert!(item["properties"]["image"].is_null());
            assert_eq!(
                spec["injectionStrategy"]["properties"]["revision"]["properties"]["policy"]["default"],
                "Always"
            );
            assert_eq!(
                item["properties"]["resourcesPolicy"]["properties"]["targetContainersNameRegex"]["default"],
                ".*"
            );
            assert_eq!(
                spec["updateStrategy"]["properties"]["partition"]["x-kubernetes-int-or-string"],
                true
            );
            assert_eq!(spec.get("namespace").is_some(), v.name == "v1alpha1");
            assert_eq!(spec.get("customVersion").is_some(), v.name == "v1beta1");
        }
    }

    #[test]
    fn crd_yaml_round_trips() {
        let yaml = serde_saphyr::to_string(&crd().unwrap()).unwrap();
        let v: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(v["metadata"]["name"], "sidecarsets.apps.kruise.io");
        assert_eq!(v["spec"]["versions"].as_array().unwrap().len(), 2);
        assert!(yaml.contains("MATCHED"));
    }

    /// The generated schema validates as OpenKruise's published CRD does (types, required
    /// fields, list types, enums, defaults), except where [`DELIBERATE_SCHEMA_DIFFERENCES`]
    /// says otherwise.
    #[test]
    fn schema_matches_openkruises_published_fields() {
        if let Err(report) = kruise_core::api::crd_fields::compare_with_published(
            &crd().unwrap(),
            include_str!("../../tests/fixtures/openkruise/sidecarsets.fields"),
            DELIBERATE_SCHEMA_DIFFERENCES,
        ) {
            panic!("{report}");
        }
    }
}
