//! `v1alpha1` <-> `v1beta1` conversion of the three kinds, as OpenKruise's
//! `imagepulljob_conversion.go`, `imagelistpulljob_conversion.go` and NodeImage's hub map them
//! (v1beta1 is the hub): every field is the same in both versions, so an object passes
//! through with only its `apiVersion` changed — fields the types do not know included.

pub use kruise_admission::conversion::SameFields;

use crate::api::{IMAGELISTPULLJOB_KIND, IMAGEPULLJOB_KIND, NODEIMAGE_KIND};

/// The `/convert` converter for ImagePullJob.
pub const IMAGEPULLJOB_CONVERTER: SameFields = SameFields(IMAGEPULLJOB_KIND);
/// The `/convert` converter for ImageListPullJob.
pub const IMAGELISTPULLJOB_CONVERTER: SameFields = SameFields(IMAGELISTPULLJOB_KIND);
/// The `/convert` converter for NodeImage.
pub const NODEIMAGE_CONVERTER: SameFields = SameFields(NODEIMAGE_KIND);

#[cfg(test)]
mod tests;
