//! `v1alpha1` <-> `v1beta1` conversion of the three kinds, as OpenKruise's
//! `imagepulljob_conversion.go`, `imagelistpulljob_conversion.go` and NodeImage's hub map them
//! (v1beta1 is the hub): every field is the same in both versions, so an object passes
//! through with only its `apiVersion` changed — fields the types do not know included.

use kruise_admission::conversion::{ConversionError, VersionMapping};
use serde_json::{Map, Value};

use crate::api::{IMAGELISTPULLJOB_KIND, IMAGEPULLJOB_KIND, NODEIMAGE_KIND};

/// A kind whose two versions have the same fields: only `apiVersion` changes.
#[derive(Debug, Clone, Copy)]
pub struct SameFields(pub &'static str);

/// The `/convert` converter for ImagePullJob.
pub const IMAGEPULLJOB_CONVERTER: SameFields = SameFields(IMAGEPULLJOB_KIND);
/// The `/convert` converter for ImageListPullJob.
pub const IMAGELISTPULLJOB_CONVERTER: SameFields = SameFields(IMAGELISTPULLJOB_KIND);
/// The `/convert` converter for NodeImage.
pub const NODEIMAGE_CONVERTER: SameFields = SameFields(NODEIMAGE_KIND);

impl VersionMapping for SameFields {
    fn kind(&self) -> &str {
        self.0
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
