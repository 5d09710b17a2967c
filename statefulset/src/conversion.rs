//! `v1alpha1` <-> `v1beta1` conversion for the `/convert` webhook.
//!
//! The two versions share every field (see [`crate::api`]), so nothing is mapped: the object
//! passes through as it came, `apiVersion` aside, and every field — `reserveOrdinals`,
//! `ordinals`, `lifecycle`, the retention policy, status `volumeClaims` … — survives any
//! number of round trips through any served version (OpenKruise's own conversion drops the
//! `v1beta1`-only ones: K#2102).

use kruise_admission::conversion::{ConversionError, VersionMapping};
use serde_json::{Map, Value};

use crate::api::KIND;

/// The `/convert` webhook's converter for StatefulSet.
#[derive(Debug, Clone, Copy, Default)]
pub struct StatefulSetConverter;

impl VersionMapping for StatefulSetConverter {
    fn kind(&self) -> &str {
        KIND
    }

    fn spoke_to_hub(&self, _object: &mut Map<String, Value>) -> Result<(), ConversionError> {
        Ok(())
    }

    fn hub_to_spoke(&self, _object: &mut Map<String, Value>) -> Result<(), ConversionError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
