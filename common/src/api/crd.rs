//! Building a family's CRD from its per-version kube types, and the string enums those
//! types share: what every family needs to publish the same CRD shape OpenKruise does.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// Merges the CRDs generated for each served version into one with `storage` as the
/// storage version, versions in name order (as OpenKruise's generated CRDs list them).
pub fn merge_versions(
    crds: Vec<CustomResourceDefinition>,
    storage: &str,
) -> Result<CustomResourceDefinition, kube::core::crd::MergeError> {
    let mut merged = kube::core::crd::merge_crds(crds, storage)?;
    merged.spec.versions.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(merged)
}

/// Removes every `default` from a JSON schema. schemars turns `#[serde(default)]` into
/// schema defaults, and a schema default makes the API server write fields the user never
/// set; OpenKruise's CRDs carry only the defaults its markers ask for.
pub fn strip_schema_defaults(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            map.remove("default");
            map.values_mut().for_each(strip_schema_defaults);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_schema_defaults),
        _ => {}
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
