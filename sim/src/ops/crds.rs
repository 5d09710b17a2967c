//! What writing a CustomResourceDefinition does besides storing it: validation, and
//! registering (or removing) its resource and instances.

use serde_json::Value;

use crate::SimShared;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::registry::{ResourceDef, def_from_crd};
use crate::store::Commit;

/// The resource a CRD object defines, or why it is invalid (its name must be
/// `<plural>.<group>`).
pub(super) fn validate_crd(obj: &Value, name: &str) -> ApiResult<ResourceDef> {
    let invalid = |field: &str, msg: &str| {
        ApiError::invalid(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            name,
            vec![crate::error::StatusCause {
                reason: "FieldValueInvalid".into(),
                message: msg.to_string(),
                field: field.into(),
            }],
        )
    };
    let d = def_from_crd(obj).map_err(|e| invalid("spec", &e))?;
    let expected = format!("{}.{}", d.plural, d.group);
    if name != expected {
        return Err(invalid(
            "metadata.name",
            &format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    Ok(d)
}

impl SimShared {
    pub(super) fn sync_crd(&self, crd: &Value, removed: bool) {
        if let Ok(d) = def_from_crd(crd) {
            let mut reg = self.store.registry_mut();
            if removed {
                reg.remove(&d.key());
            } else {
                reg.insert(d);
            }
        }
    }

    /// Deleting a CRD deletes its instances (the real server does this through the
    /// `customresourcecleanup` finalizer; here it happens before the response).
    pub(super) async fn crd_removed(&self, crd: &Value) {
        let Ok(d) = def_from_crd(crd) else { return };
        let gr = d.gr();
        let (items, _) = self.store.list(&gr, None);
        for item in items {
            let ns = meta::meta_str(&item, "namespace").to_string();
            let name = meta::name_of(&item).to_string();
            let _ = self.store.commit(&gr, &ns, &name, |_, cur| {
                Ok(match cur {
                    Some(c) => Commit::Delete((**c).clone()),
                    None => Commit::Noop,
                })
            });
        }
        self.store.registry_mut().remove(&d.key());
    }
}
