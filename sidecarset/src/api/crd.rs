//! The SidecarSet `CustomResourceDefinition`: cluster-scoped, both versions served,
//! `v1beta1` stored, status subresource, OpenKruise's printer columns.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// Why the CRD could not be built.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// The two versions' CRDs disagree on names or scope.
    #[error("merging SidecarSet CRD versions: {0}")]
    Merge(#[from] kube::core::crd::MergeError),
    /// (De)serializing the schema failed.
    #[error("serializing SidecarSet CRD: {0}")]
    Serialize(String),
}

/// The merged CRD, with the touches the derive cannot express: no schema `default`s other
/// than OpenKruise's own (`injectionStrategy.revision.policy: Always`,
/// `resourcesPolicy.targetContainersNameRegex: .*`), and the `Always`/`Partial` enum.
pub fn crd() -> Result<CustomResourceDefinition, CrdError> {
    let mut merged = kruise_common::api::crd::merge_versions(
        vec![
            super::v1alpha1::SidecarSet::crd(),
            super::v1beta1::SidecarSet::crd(),
        ],
        super::V1BETA1,
    )?;
    for version in &mut merged.spec.versions {
        let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        let mut value =
            serde_json::to_value(&*schema).map_err(|e| CrdError::Serialize(e.to_string()))?;
        // schemars turns `#[serde(default)]` into schema defaults; a schema default would make
        // the API server write fields the user never set.
        kruise_common::api::crd::strip_schema_defaults(&mut value);
        if let Some(policy) = value.pointer_mut(
            "/properties/spec/properties/injectionStrategy/properties/revision/properties/policy",
        ) && let Some(obj) = policy.as_object_mut()
        {
            obj.insert("default".into(), "Always".into());
            obj.insert("enum".into(), serde_json::json!(["Always", "Partial", ""]));
        }
        for list in ["containers", "initContainers"] {
            let path = format!(
                "/properties/spec/properties/{list}/items/properties/resourcesPolicy/properties"
            );
            if let Some(props) = value.pointer_mut(&path) {
                if let Some(regex) = props
                    .get_mut("targetContainersNameRegex")
                    .and_then(|r| r.as_object_mut())
                {
                    regex.insert("default".into(), ".*".into());
                }
                if let Some(mode) = props
                    .get_mut("targetContainersMode")
                    .and_then(|r| r.as_object_mut())
                {
                    mode.insert("enum".into(), serde_json::json!(["sum", "max"]));
                }
            }
        }
        *schema = serde_json::from_value(value).map_err(|e| CrdError::Serialize(e.to_string()))?;
    }
    Ok(merged)
}

/// The CRD as YAML (for `kruise-sidecarset crd` and the chart).
pub fn crd_yaml() -> Result<String, CrdError> {
    let crd = crd()?;
    serde_saphyr::to_string(&crd).map_err(|e| CrdError::Serialize(e.to_string()))
}

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
        let names: Vec<_> = crd.spec.versions.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["v1alpha1", "v1beta1"]);
        for v in &crd.spec.versions {
            assert!(v.served);
            assert_eq!(v.storage, v.name == "v1beta1");
            let sub = v.subresources.as_ref().unwrap();
            assert!(sub.status.is_some());
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
        let yaml = crd_yaml().unwrap();
        let v: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(v["metadata"]["name"], "sidecarsets.apps.kruise.io");
        assert_eq!(v["spec"]["versions"].as_array().unwrap().len(), 2);
        assert!(yaml.contains("MATCHED"));
    }
}
