//! `v1alpha1` <-> `v1beta1` conversion for both kinds, as OpenKruise's
//! `broadcastjob_conversion.go` and `advancedcronjob_conversion.go` map them (v1beta1 is the
//! hub): every field is the same in both versions, so an object passes through with only
//! its `apiVersion` changed — fields the types do not know included. The one exception: a
//! v1beta1 AdvancedCronJob with an `imageListPullJobTemplate` has no v1alpha1 form and is
//! refused (`imageListPullJobTemplate is not supported in v1alpha1`), as OpenKruise refuses it.

use kruise_admission::Converter;
pub use kruise_admission::conversion::SameFields;
use kruise_admission::conversion::convert_object;
use kruise_core::api::version::{V1ALPHA1, version_of};
use serde_json::Value;

use crate::api::{ADVANCEDCRONJOB_KIND, BROADCASTJOB_KIND, GROUP};

/// The `/convert` converter for BroadcastJob.
pub const BROADCASTJOB_CONVERTER: SameFields = SameFields(BROADCASTJOB_KIND);

/// The `/convert` converter for AdvancedCronJob.
#[derive(Debug, Clone, Copy, Default)]
pub struct AdvancedCronJobConverter;

impl Converter for AdvancedCronJobConverter {
    fn handles(&self, group: &str, kind: &str) -> bool {
        group == GROUP && kind == ADVANCEDCRONJOB_KIND
    }

    fn convert(&self, object: Value, desired_api_version: &str) -> Result<Value, String> {
        if version_of(desired_api_version) == V1ALPHA1
            && object
                .pointer("/spec/template/imageListPullJobTemplate")
                .is_some_and(|t| !t.is_null())
        {
            return Err("imageListPullJobTemplate is not supported in v1alpha1".into());
        }
        convert_object(
            &SameFields(ADVANCEDCRONJOB_KIND),
            object,
            desired_api_version,
        )
        .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests;
