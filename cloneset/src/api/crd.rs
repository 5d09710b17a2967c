//! The CloneSet `CustomResourceDefinition`: both versions served, `v1beta1` stored.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// Why the CRD could not be built.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// The two versions' CRDs disagree on names or scope.
    #[error("merging CloneSet CRD versions: {0}")]
    Merge(#[from] kube::core::crd::MergeError),
    /// Serialization failed.
    #[error("serializing CloneSet CRD: {0}")]
    Serialize(String),
}

/// The CRD with `v1alpha1` and `v1beta1` (storage), scale and status subresources and
/// OpenKruise's printer columns, plus the touches the derive cannot express:
/// `spec.required = [selector, template]` and `enablePVCReuse` defaulting to `false`
/// (kubebuilder `+kubebuilder:default=false`).
pub fn crd() -> Result<CustomResourceDefinition, CrdError> {
    let mut merged = kruise_common::api::crd::merge_versions(
        vec![
            super::v1alpha1::CloneSet::crd(),
            super::v1beta1::CloneSet::crd(),
        ],
        "v1beta1",
    )?;
    for version in &mut merged.spec.versions {
        let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        // schemars turns `#[serde(default)]` into schema defaults (`scaleStrategy: {}` …);
        // OpenKruise's CRD has none, and a schema default would make the API server write
        // fields the user never set.
        let mut value =
            serde_json::to_value(&*schema).map_err(|e| CrdError::Serialize(e.to_string()))?;
        kruise_common::api::crd::strip_schema_defaults(&mut value);
        if let Some(spec) = value.pointer_mut("/properties/spec")
            && let Some(obj) = spec.as_object_mut()
        {
            obj.insert(
                "required".into(),
                serde_json::json!(["selector", "template"]),
            );
        }
        if version.name == "v1beta1"
            && let Some(reuse) = value
                .pointer_mut("/properties/spec/properties/scaleStrategy/properties/enablePVCReuse")
            && let Some(obj) = reuse.as_object_mut()
        {
            obj.insert("default".into(), serde_json::Value::Bool(false));
        }
        *schema = serde_json::from_value(value).map_err(|e| CrdError::Serialize(e.to_string()))?;
    }
    Ok(merged)
}

/// The CRD as YAML (for `kruise-cloneset crd`).
pub fn crd_yaml() -> Result<String, CrdError> {
    let crd = crd()?;
    serde_saphyr::to_string(&crd).map_err(|e| CrdError::Serialize(e.to_string()))
}

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
        let names: Vec<_> = crd.spec.versions.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["v1alpha1", "v1beta1"]);
        for v in &crd.spec.versions {
            assert!(v.served);
            assert_eq!(v.storage, v.name == "v1beta1");
            let sub = v.subresources.as_ref().unwrap();
            assert!(sub.status.is_some());
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
        let yaml = crd_yaml().unwrap();
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
}
