//! The checks kube-apiserver makes of a pod's metadata, run on the pod an in-place patch
//! would leave, before the pod is made unready for it: a patch the API server would refuse
//! (e.g. template annotations that fit on their own but not with the in-place state
//! annotation) is refused here, so the pod's readiness never flips for an update that
//! cannot happen, not even on the first attempt.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kruise_compat::field::{Path, aggregate};
use kruise_compat::podtemplate::validate_template_metadata;
use serde_json::Value;

/// The API server's refusal (422 Invalid, worded as kube-apiserver words it) of the pod
/// `name`, whose labels and annotations are `meta`, patched with the strategic-merge `patch`;
/// `None` when the patched metadata is valid.
pub(super) fn refusal_of_patched_metadata(
    name: &str,
    meta: &ObjectMeta,
    patch: &Value,
) -> Option<kube::Error> {
    let mut patched = ObjectMeta {
        labels: meta.labels.clone(),
        annotations: meta.annotations.clone(),
        ..ObjectMeta::default()
    };
    merge_map(&mut patched.labels, patch.pointer("/metadata/labels"));
    merge_map(
        &mut patched.annotations,
        patch.pointer("/metadata/annotations"),
    );
    let errors = validate_template_metadata(&patched, &Path::new("metadata"));
    if errors.is_empty() {
        return None;
    }
    Some(kube::Error::Api(Box::new(kube::core::Status {
        status: Some(kube::core::response::StatusSummary::Failure),
        message: format!("Pod \"{name}\" is invalid: {}", aggregate(&errors)),
        reason: "Invalid".into(),
        code: 422,
        ..Default::default()
    })))
}

/// A strategic-merge patch of a string map: keys set to a string are set, keys set to
/// `null` removed.
fn merge_map(map: &mut Option<BTreeMap<String, String>>, patch: Option<&Value>) {
    let Some(entries) = patch.and_then(Value::as_object) else {
        return;
    };
    let map = map.get_or_insert_with(BTreeMap::new);
    for (key, value) in entries {
        match value.as_str() {
            Some(v) => {
                map.insert(key.clone(), v.to_string());
            }
            None => {
                map.remove(key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kruise_compat::podtemplate::MAX_ANNOTATIONS_BYTES;
    use kruise_runtime::controller::is_invalid;
    use serde_json::json;

    fn meta(annotations: serde_json::Value) -> ObjectMeta {
        serde_json::from_value(json!({"annotations": annotations, "labels": {"app": "web"}}))
            .unwrap()
    }

    #[test]
    fn a_patch_that_keeps_the_metadata_valid_is_let_through() {
        let patch = json!({"metadata": {"annotations": {"apps.kruise.io/inplace-update-state": "{}", "gone": null}, "labels": {"tier": "front"}}});
        assert!(
            refusal_of_patched_metadata("web-1", &meta(json!({"gone": "x"})), &patch).is_none()
        );
    }

    #[test]
    fn annotations_the_patch_takes_over_the_limit_are_refused_as_kube_apiserver_would() {
        let big = "x".repeat(MAX_ANNOTATIONS_BYTES - 10);
        let pod = meta(json!({"big": big}));
        let patch = json!({"metadata": {"annotations": {"apps.kruise.io/inplace-update-state": "{\"revision\":\"web-1\"}"}}});
        let refusal = refusal_of_patched_metadata("web-1", &pod, &patch).unwrap();
        assert!(is_invalid(&refusal));
        assert!(
            refusal.to_string().contains(
                "Pod \"web-1\" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes"
            ),
            "{refusal}"
        );
        // Removing the big annotation in the same patch makes it fit.
        let patch = json!({"metadata": {"annotations": {"big": null, "apps.kruise.io/inplace-update-state": "{}"}}});
        assert!(refusal_of_patched_metadata("web-1", &pod, &patch).is_none());
    }

    #[test]
    fn an_invalid_label_key_in_the_patch_is_refused() {
        let patch = json!({"metadata": {"labels": {"bad key!": "v"}}});
        let refusal = refusal_of_patched_metadata("web-1", &meta(json!({})), &patch).unwrap();
        assert!(
            refusal
                .to_string()
                .contains("metadata.labels: Invalid value: \"bad key!\""),
            "{refusal}"
        );
    }
}
