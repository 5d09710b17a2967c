//! OpenKruise's `SetDefaultsImagePullJob`, `SetDefaultsImageListPullJob` and
//! `SetDefaultsNodeImage` (v1beta1; a v1alpha1 object has the same fields).
//!
//! `parallelism` is left unset, as OpenKruise leaves it: the controller reads unset as 1.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::v1beta1::{ImageListPullJobSpec, ImagePullJobSpec, NodeImageSpec};
use super::{
    CompletionPolicyType, DEFAULT_BACKOFF_LIMIT, DEFAULT_TIMEOUT_SECONDS, ImagePullJobTemplate,
    ImagePullPolicy, ImageTagPullPolicy,
};

/// Defaults an ImagePullJob spec: completion `Always`, timeout 600, backoff 3,
/// `imagePullPolicy: IfNotPresent`.
pub fn default_imagepulljob(spec: &mut ImagePullJobSpec) {
    default_template(&mut spec.template);
    if is_empty(spec.template.image_pull_policy.as_ref().map(|p| p.as_str())) {
        spec.template.image_pull_policy = Some(ImagePullPolicy::IfNotPresent);
    }
}

/// Defaults an ImageListPullJob spec: completion `Always`, timeout 600, backoff 3 (its
/// `imagePullPolicy` is left to each child's own defaulting, as OpenKruise leaves it).
pub fn default_imagelistpulljob(spec: &mut ImageListPullJobSpec) {
    default_template(&mut spec.template);
}

/// Defaults a NodeImage spec: every tag gets `createdAt` (`now`) and a pull policy with
/// timeout 600 and backoff 3.
pub fn default_nodeimage(spec: &mut NodeImageSpec, now: Timestamp) {
    for image in spec.images.values_mut() {
        for tag in &mut image.tags {
            tag.created_at.get_or_insert(Time(now));
            default_tag_pull_policy(tag.pull_policy.get_or_insert_with(Default::default));
        }
    }
}

/// A NodeImage tag's pull policy: timeout 600 and backoff 3 when unset.
pub fn default_tag_pull_policy(policy: &mut ImageTagPullPolicy) {
    policy
        .timeout_seconds
        .get_or_insert(DEFAULT_TIMEOUT_SECONDS);
    policy.backoff_limit.get_or_insert(DEFAULT_BACKOFF_LIMIT);
}

fn default_template(template: &mut ImagePullJobTemplate) {
    if is_empty(
        template
            .completion_policy
            .type_
            .as_ref()
            .map(|t| t.as_str()),
    ) {
        template.completion_policy.type_ = Some(CompletionPolicyType::Always);
    }
    let policy = template.pull_policy.get_or_insert_with(Default::default);
    policy
        .timeout_seconds
        .get_or_insert(DEFAULT_TIMEOUT_SECONDS);
    policy.backoff_limit.get_or_insert(DEFAULT_BACKOFF_LIMIT);
}

fn is_empty(value: Option<&str>) -> bool {
    value.is_none_or(str::is_empty)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn imagepulljob_defaults_fill_only_what_is_unset() {
        let mut spec: ImagePullJobSpec = serde_json::from_value(json!({"image": "nginx"})).unwrap();
        default_imagepulljob(&mut spec);
        assert_eq!(
            serde_json::to_value(&spec).unwrap(),
            json!({
                "image": "nginx",
                "completionPolicy": {"type": "Always"},
                "pullPolicy": {"timeoutSeconds": 600, "backoffLimit": 3},
                "imagePullPolicy": "IfNotPresent",
            })
        );
        let mut spec: ImagePullJobSpec = serde_json::from_value(json!({
            "image": "nginx",
            "completionPolicy": {"type": "Never"},
            "pullPolicy": {"timeoutSeconds": 50, "backoffLimit": 0},
            "imagePullPolicy": "Always",
            "parallelism": 0,
        }))
        .unwrap();
        let before = spec.clone();
        default_imagepulljob(&mut spec);
        assert_eq!(spec, before);
    }

    #[test]
    fn imagelistpulljob_defaults_leave_the_pull_policy_to_the_children() {
        let mut spec: ImageListPullJobSpec = serde_json::from_value(
            json!({"images": ["a", "b"], "pullPolicy": {"backoffLimit": 1}}),
        )
        .unwrap();
        default_imagelistpulljob(&mut spec);
        let v = serde_json::to_value(&spec).unwrap();
        assert_eq!(
            v["pullPolicy"],
            json!({"timeoutSeconds": 600, "backoffLimit": 1})
        );
        assert_eq!(v["completionPolicy"], json!({"type": "Always"}));
        assert!(v.get("imagePullPolicy").is_none());
    }

    #[test]
    fn nodeimage_tags_get_created_at_and_pull_policy() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let mut spec: NodeImageSpec = serde_json::from_value(json!({"images": {"nginx": {"tags": [
            {"tag": "1", "pullPolicy": {"ttlSecondsAfterFinished": 300}},
            {"tag": "2", "createdAt": "2025-01-01T00:00:00Z", "pullPolicy": {"timeoutSeconds": 5, "backoffLimit": 1, "ttlSecondsAfterFinished": 1}},
        ]}}}))
        .unwrap();
        default_nodeimage(&mut spec, now);
        let v = serde_json::to_value(&spec).unwrap();
        assert_eq!(
            v["images"]["nginx"]["tags"],
            json!([
                {"tag": "1", "createdAt": "2026-01-01T00:00:00Z", "pullPolicy": {"timeoutSeconds": 600, "backoffLimit": 3, "ttlSecondsAfterFinished": 300}},
                {"tag": "2", "createdAt": "2025-01-01T00:00:00Z", "pullPolicy": {"timeoutSeconds": 5, "backoffLimit": 1, "ttlSecondsAfterFinished": 1}},
            ])
        );
    }
}
