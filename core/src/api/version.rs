//! API groups and versions, with one meaning each: `V1ALPHA1` / `V1BETA1` are version names
//! (as a CRD's `versions[].name` and an AdmissionRequest's `kind.version` spell them), the
//! `APPS_*` constants are full `apiVersion`s (`group/version`, as objects carry them).

/// The group of the workload kinds (CloneSet, SidecarSet, Advanced StatefulSet …).
pub const APPS_GROUP: &str = "apps.kruise.io";
/// The version most published manifests use (served, not stored).
pub const V1ALPHA1: &str = "v1alpha1";
/// The storage version.
pub const V1BETA1: &str = "v1beta1";
/// `apps.kruise.io/v1alpha1`.
pub const APPS_V1ALPHA1: &str = "apps.kruise.io/v1alpha1";
/// `apps.kruise.io/v1beta1`.
pub const APPS_V1BETA1: &str = "apps.kruise.io/v1beta1";

/// The version a family's kind was served at (an AdmissionRequest's `kind.version`), where
/// a family's defaulting or validation differs between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// `v1alpha1`.
    V1alpha1,
    /// `v1beta1`.
    V1beta1,
}

impl Served {
    /// The served version named `version`; None for any other.
    pub fn parse(version: &str) -> Option<Self> {
        match version {
            V1ALPHA1 => Some(Served::V1alpha1),
            V1BETA1 => Some(Served::V1beta1),
            _ => None,
        }
    }
}

/// The version name of an `apiVersion` (`apps.kruise.io/v1beta1` -> `v1beta1`; a core
/// `v1` stays `v1`).
pub fn version_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or(api_version, |(_, v)| v)
}

/// The group of an `apiVersion` (`""` for the core group).
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_agree() {
        assert_eq!(APPS_V1ALPHA1, format!("{APPS_GROUP}/{V1ALPHA1}"));
        assert_eq!(APPS_V1BETA1, format!("{APPS_GROUP}/{V1BETA1}"));
        assert_eq!(version_of(APPS_V1BETA1), V1BETA1);
        assert_eq!(group_of(APPS_V1BETA1), APPS_GROUP);
        assert_eq!(version_of("v1"), "v1");
        assert_eq!(group_of("v1"), "");
        assert_eq!(Served::parse(V1ALPHA1), Some(Served::V1alpha1));
        assert_eq!(Served::parse(V1BETA1), Some(Served::V1beta1));
        assert_eq!(Served::parse("v1"), None);
    }
}
