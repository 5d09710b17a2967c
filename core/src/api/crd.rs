//! Building a family's CRD: the per-version schemas kube derives, merged into one CRD with
//! the storage version, the subresources and printer columns every version shares, the
//! schema edits the derive cannot express, and no schema defaults other than those asked
//! for. Also the string enums the API types share and the conversion webhook stanza.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

/// Why a CRD could not be built.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// The versions' CRDs disagree on names or scope.
    #[error("merging the {kind} CRD versions: {source}")]
    Merge {
        /// The kind being built.
        kind: String,
        /// What kube found.
        source: kube_core::crd::MergeError,
    },
    /// A version schema did not (de)serialize.
    #[error("serializing the {kind} CRD schema: {source}")]
    Serialize {
        /// The kind being built.
        kind: String,
        /// The serializer's error.
        source: serde_json::Error,
    },
}

/// One printer column (`additionalPrinterColumns`), shown by `kubectl get`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrinterColumn {
    /// Column header.
    pub name: &'static str,
    /// `integer`, `string`, `date` …
    pub type_: &'static str,
    /// JSONPath into the object.
    pub json_path: &'static str,
    /// What the column shows.
    pub description: &'static str,
    /// 0 = always shown, 1 = only with `-o wide`.
    pub priority: i32,
}

/// The AGE column every kind shows (the API server's own description).
pub const AGE_COLUMN: PrinterColumn = PrinterColumn {
    name: "AGE",
    type_: "date",
    json_path: ".metadata.creationTimestamp",
    description: "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.",
    priority: 0,
};

impl PrinterColumn {
    /// An integer column `kubectl get` always shows.
    pub const fn integer(
        name: &'static str,
        json_path: &'static str,
        description: &'static str,
    ) -> Self {
        PrinterColumn {
            name,
            type_: "integer",
            json_path,
            description,
            priority: 0,
        }
    }

    /// A string column `kubectl get` always shows.
    pub const fn string(
        name: &'static str,
        json_path: &'static str,
        description: &'static str,
    ) -> Self {
        PrinterColumn {
            name,
            type_: "string",
            json_path,
            description,
            priority: 0,
        }
    }

    /// A string column shown only with `-o wide`.
    pub const fn wide_string(
        name: &'static str,
        json_path: &'static str,
        description: &'static str,
    ) -> Self {
        PrinterColumn {
            name,
            type_: "string",
            json_path,
            description,
            priority: 1,
        }
    }

    fn to_definition(self) -> apiext::CustomResourceColumnDefinition {
        apiext::CustomResourceColumnDefinition {
            description: Some(self.description.into()),
            format: None,
            json_path: self.json_path.into(),
            name: self.name.into(),
            priority: (self.priority != 0).then_some(self.priority),
            type_: self.type_.into(),
        }
    }
}

/// The scale subresource's paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScaleSubresource {
    /// e.g. `.spec.replicas`.
    pub spec_replicas_path: &'static str,
    /// e.g. `.status.replicas`.
    pub status_replicas_path: &'static str,
    /// e.g. `.status.labelSelector` (for HPA).
    pub label_selector_path: &'static str,
}

/// A change to the schema of every version (`None`) or one version, at a JSON pointer into
/// its `openAPIV3Schema`, applied after the defaults are stripped. Missing paths are skipped.
type SchemaEdit = (
    Option<&'static str>,
    &'static str,
    fn(&mut serde_json::Map<String, Value>),
);

/// Builds a family's CRD from the CRDs kube derives for each served version.
pub struct CrdBuilder {
    kind: &'static str,
    versions: Vec<CustomResourceDefinition>,
    storage: &'static str,
    status: bool,
    scale: Option<ScaleSubresource>,
    columns: Vec<PrinterColumn>,
    version_columns: Vec<(&'static str, Vec<PrinterColumn>)>,
    edits: Vec<SchemaEdit>,
    required_status: &'static [&'static str],
}

impl CrdBuilder {
    /// A CRD of `kind` stored as `storage` (a version name such as `v1beta1`).
    pub fn new(kind: &'static str, storage: &'static str) -> Self {
        CrdBuilder {
            kind,
            versions: Vec::new(),
            storage,
            status: false,
            scale: None,
            columns: Vec::new(),
            version_columns: Vec::new(),
            edits: Vec::new(),
            required_status: &[],
        }
    }

    /// Adds a served version (its `CustomResourceExt::crd()`).
    pub fn version(mut self, crd: CustomResourceDefinition) -> Self {
        self.versions.push(crd);
        self
    }

    /// Serves the status subresource in every version.
    pub fn status_subresource(mut self) -> Self {
        self.status = true;
        self
    }

    /// Serves the scale subresource in every version.
    pub fn scale_subresource(mut self, scale: ScaleSubresource) -> Self {
        self.scale = Some(scale);
        self
    }

    /// What OpenKruise's replicated workloads (CloneSet, Advanced StatefulSet) publish and
    /// the derive cannot express: the scale subresource on `.spec.replicas`,
    /// `.status.replicas` and `.status.labelSelector`; `spec` optional but `selector` and
    /// `template` required in it; label-selector lists atomic; and `status_counts` always
    /// present in the status.
    pub fn replicated_workload(self, status_counts: &'static [&'static str]) -> Self {
        self.scale_subresource(ScaleSubresource {
            spec_replicas_path: ".spec.replicas",
            status_replicas_path: ".status.replicas",
            label_selector_path: ".status.labelSelector",
        })
        .schema_edit("/properties/spec", |spec| {
            spec.insert(
                "required".into(),
                serde_json::json!(["selector", "template"]),
            );
        })
        .kubebuilder_shape()
        .status_required(status_counts)
    }

    /// What every OpenKruise CRD has from kubebuilder and kube's derive does not: `spec`
    /// optional (a Go struct field `json:"spec,omitempty"`) and label-selector lists atomic.
    pub fn kubebuilder_shape(self) -> Self {
        self.schema_edit("", |root| {
            super::crd_fields::unrequire(root, "spec");
            super::crd_fields::atomic_label_selector_lists(root);
        })
    }

    /// `status` fields OpenKruise's CRD requires (Go fields without `omitempty`); the
    /// family's status type must always serialize them.
    pub fn status_required(mut self, names: &'static [&'static str]) -> Self {
        self.required_status = names;
        self
    }

    /// The printer columns of every version, in order.
    pub fn printer_columns(mut self, columns: &[PrinterColumn]) -> Self {
        self.columns = columns.to_vec();
        self
    }

    /// The printer columns of `version`, in place of the shared ones (OpenKruise's
    /// generated CRDs differ per version where its Go types' markers do).
    pub fn version_printer_columns(
        mut self,
        version: &'static str,
        columns: &[PrinterColumn],
    ) -> Self {
        self.version_columns.push((version, columns.to_vec()));
        self
    }

    /// Edits the schema object at `pointer` (e.g. `/properties/spec`) of every version.
    pub fn schema_edit(
        mut self,
        pointer: &'static str,
        edit: fn(&mut serde_json::Map<String, Value>),
    ) -> Self {
        self.edits.push((None, pointer, edit));
        self
    }

    /// Edits the schema object at `pointer` of `version` only.
    pub fn version_schema_edit(
        mut self,
        version: &'static str,
        pointer: &'static str,
        edit: fn(&mut serde_json::Map<String, Value>),
    ) -> Self {
        self.edits.push((Some(version), pointer, edit));
        self
    }

    /// The merged CRD: versions in name order (as OpenKruise's generated CRDs list them).
    pub fn build(self) -> Result<CustomResourceDefinition, CrdError> {
        let kind = self.kind;
        let mut merged =
            kube_core::crd::merge_crds(self.versions, self.storage).map_err(|source| {
                CrdError::Merge {
                    kind: kind.into(),
                    source,
                }
            })?;
        merged.spec.versions.sort_by(|a, b| a.name.cmp(&b.name));
        let serialize = |source| CrdError::Serialize {
            kind: kind.into(),
            source,
        };
        for version in &mut merged.spec.versions {
            if self.status || self.scale.is_some() {
                version.subresources = Some(apiext::CustomResourceSubresources {
                    status: self.status.then(|| {
                        apiext::CustomResourceSubresourceStatus(Value::Object(Default::default()))
                    }),
                    scale: self.scale.map(|s| apiext::CustomResourceSubresourceScale {
                        spec_replicas_path: s.spec_replicas_path.into(),
                        status_replicas_path: s.status_replicas_path.into(),
                        label_selector_path: Some(s.label_selector_path.into()),
                    }),
                });
            }
            let columns = self
                .version_columns
                .iter()
                .find(|(name, _)| *name == version.name)
                .map_or(&self.columns, |(_, columns)| columns);
            if !columns.is_empty() {
                version.additional_printer_columns =
                    Some(columns.iter().map(|c| c.to_definition()).collect());
            }
            let Some(schema) = version
                .schema
                .as_mut()
                .and_then(|s| s.open_api_v3_schema.as_mut())
            else {
                continue;
            };
            let mut value = serde_json::to_value(&*schema).map_err(serialize)?;
            strip_schema_defaults(&mut value);
            for (only, pointer, edit) in &self.edits {
                if only.is_some_and(|v| v != version.name) {
                    continue;
                }
                if let Some(obj) = value.pointer_mut(pointer).and_then(Value::as_object_mut) {
                    edit(obj);
                }
            }
            if let Some(status) = value
                .pointer_mut("/properties/status")
                .and_then(Value::as_object_mut)
                .filter(|_| !self.required_status.is_empty())
            {
                super::crd_fields::require(status, self.required_status);
            }
            *schema = serde_json::from_value(value).map_err(serialize)?;
        }
        Ok(merged)
    }
}

/// Removes every `default` from a JSON schema. schemars turns `#[serde(default)]` into
/// schema defaults, and a schema default makes the API server write fields the user never
/// set; OpenKruise's CRDs carry only the defaults its markers ask for.
pub fn strip_schema_defaults(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("default");
            map.values_mut().for_each(strip_schema_defaults);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_schema_defaults),
        _ => {}
    }
}

/// The `spec.conversion` stanza sending every version change to the `/convert` webhook at
/// `client_config`.
pub fn webhook_conversion(
    client_config: apiext::WebhookClientConfig,
) -> apiext::CustomResourceConversion {
    apiext::CustomResourceConversion {
        strategy: "Webhook".into(),
        webhook: Some(apiext::WebhookConversion {
            client_config: Some(client_config),
            conversion_review_versions: vec!["v1".into()],
        }),
    }
}

/// Declares a string enum with a catch-all variant, so an unknown wire value survives
/// decoding and can be reported by validation (Go's string types accept any value). The
/// schema is a plain string: values are checked by validation with a field error, not by
/// the API server's schema. The calling crate needs `serde` and `schemars`.
#[macro_export]
macro_rules! string_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        pub enum $name {
            $($(#[$vm])* #[serde(rename = $s)] $v,)+
            /// Any other value (rejected by validation).
            #[serde(untagged)]
            Unknown(String),
        }
        impl $name {
            /// The wire value.
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$v => $s,)+
                    $name::Unknown(s) => s.as_str(),
                }
            }
        }
        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn inline_schema() -> bool {
                true
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({ "type": "string" })
            }
        }
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    crate::string_enum! {
        /// Test enum.
        Color { Red = "Red", Blue = "Blue" }
    }

    #[test]
    fn unknown_values_survive_decoding() {
        let c: Color = serde_json::from_value(json!("Green")).unwrap();
        assert_eq!(c, Color::Unknown("Green".into()));
        assert_eq!(serde_json::to_value(&c).unwrap(), json!("Green"));
        assert_eq!(serde_json::to_value(Color::Red).unwrap(), json!("Red"));
        assert_eq!(Color::Blue.to_string(), "Blue");
    }

    mod alpha {
        /// A test kind.
        #[derive(
            kube_derive::CustomResource,
            Clone,
            Debug,
            serde::Serialize,
            serde::Deserialize,
            schemars::JsonSchema,
        )]
        #[kube(
            crates(kube_core = "::kube_core"),
            group = "example.io",
            version = "v1alpha1",
            kind = "Widget",
            namespaced
        )]
        pub struct WidgetSpec {
            /// Replicas.
            #[serde(default)]
            pub replicas: i32,
        }
    }

    mod beta {
        /// A test kind.
        #[derive(
            kube_derive::CustomResource,
            Clone,
            Debug,
            serde::Serialize,
            serde::Deserialize,
            schemars::JsonSchema,
        )]
        #[kube(
            crates(kube_core = "::kube_core"),
            group = "example.io",
            version = "v1beta1",
            kind = "Widget",
            namespaced
        )]
        pub struct WidgetSpec {
            /// Replicas.
            #[serde(default)]
            pub replicas: i32,
            /// Mode.
            #[serde(default)]
            pub mode: String,
        }
    }

    #[test]
    fn builder_merges_versions_with_shared_subresources_columns_and_edits() {
        use kube_core::CustomResourceExt;
        let crd = CrdBuilder::new("Widget", "v1beta1")
            .version(beta::Widget::crd())
            .version(alpha::Widget::crd())
            .status_subresource()
            .scale_subresource(ScaleSubresource {
                spec_replicas_path: ".spec.replicas",
                status_replicas_path: ".status.replicas",
                label_selector_path: ".status.selector",
            })
            .printer_columns(&[AGE_COLUMN])
            .schema_edit("/properties/spec", |spec| {
                spec.insert("required".into(), json!(["replicas"]));
            })
            .version_schema_edit("v1beta1", "/properties/spec/properties/mode", |mode| {
                mode.insert("default".into(), "Fast".into());
            })
            .build()
            .unwrap();
        let names: Vec<_> = crd.spec.versions.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["v1alpha1", "v1beta1"]);
        for v in &crd.spec.versions {
            assert!(v.served);
            assert_eq!(v.storage, v.name == "v1beta1");
            let sub = v.subresources.as_ref().unwrap();
            assert_eq!(sub.status.as_ref().map(|s| &s.0), Some(&json!({})));
            assert_eq!(
                sub.scale.as_ref().unwrap().label_selector_path.as_deref(),
                Some(".status.selector")
            );
            let columns: Vec<_> = v
                .additional_printer_columns
                .iter()
                .flatten()
                .map(|c| c.name.as_str())
                .collect();
            assert_eq!(columns, ["AGE"]);
            let schema =
                serde_json::to_value(&v.schema.as_ref().unwrap().open_api_v3_schema).unwrap();
            let spec = &schema["properties"]["spec"];
            assert_eq!(spec["required"], json!(["replicas"]));
            // schemars' defaults are gone; only the one asked for is there.
            assert!(spec["properties"]["replicas"].get("default").is_none());
            assert_eq!(
                spec["properties"]["mode"].get("default"),
                (v.name == "v1beta1").then_some(&json!("Fast"))
            );
        }
    }

    #[test]
    fn strips_nested_defaults() {
        let mut v = json!({"default": 1, "properties": {"a": {"default": {}, "type": "object"}},
                           "items": [{"default": "x"}]});
        strip_schema_defaults(&mut v);
        assert_eq!(
            v,
            json!({"properties": {"a": {"type": "object"}}, "items": [{}]})
        );
    }
}
