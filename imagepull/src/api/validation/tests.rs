use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;
use kruise_compat::field::aggregate;

fn job(spec: Value) -> ImagePullJob {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "ImagePullJob",
        "metadata": {"name": "j", "namespace": "default"}, "spec": spec,
    }))
    .unwrap()
}

fn messages(errors: &[FieldError]) -> String {
    aggregate(errors)
}

#[test]
fn imagepulljob_checks_follow_openkruise() {
    for (spec, expected) in [
        (json!({"image": "nginx:1.25"}), ""),
        (
            json!({"image": "nginx", "selector": {"names": ["a", "b"]}, "parallelism": 0,
                   "completionPolicy": {"type": "Never"}, "imagePullPolicy": "Always"}),
            "",
        ),
        (
            json!({"image": ""}),
            "spec.image: Required value: image can not be empty",
        ),
        (
            json!({"image": "Nginx"}),
            "spec.image: Invalid value: \"Nginx\": invalid image Nginx: repository name must be lowercase",
        ),
        (
            json!({"image": "nginx", "selector": {"names": ["a"], "matchLabels": {"x": "y"}}}),
            "spec.selector: Forbidden: can not set both names and labelSelector in this spec.selector",
        ),
        (
            json!({"image": "nginx", "selector": {"names": ["a", "b", "a"]}}),
            "spec.selector.names[2]: Duplicate value: \"a\"",
        ),
        (
            json!({"image": "nginx", "selector": {"matchLabels": {"x": "y"}}, "podSelector": {"matchLabels": {"app": "web"}}}),
            "spec.podSelector: Forbidden: can not set both selector and podSelector",
        ),
        (
            json!({"image": "nginx", "podSelector": {"matchExpressions": [{"key": "app", "operator": "Near"}]}}),
            "spec.podSelector: Invalid value: {\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"Near\"}]}: invalid podSelector: \"Near\" is not a valid label selector operator",
        ),
        (
            json!({"image": "nginx", "parallelism": "50%"}),
            "spec.parallelism: Invalid value: \"50%\": parallelism does not support percentage value",
        ),
        (
            json!({"image": "nginx", "parallelism": -1}),
            "spec.parallelism: Invalid value: -1: parallelism must be non-negative",
        ),
        (
            json!({"image": "nginx", "parallelism": "two"}),
            "spec.parallelism: Invalid value: \"two\": parallelism must be a valid integer: invalid digit found in string",
        ),
        (
            json!({"image": "nginx", "completionPolicy": {"type": "Always", "activeDeadlineSeconds": 599}}),
            "spec.completionPolicy.activeDeadlineSeconds: Invalid value: 599: completionPolicy.activeDeadlineSeconds must be greater than pullPolicy.timeoutSeconds(default 600)",
        ),
        (
            json!({"image": "nginx", "pullPolicy": {"timeoutSeconds": 50}, "completionPolicy": {"type": "Always", "activeDeadlineSeconds": 50}}),
            "",
        ),
        (
            json!({"image": "nginx", "completionPolicy": {"type": "Never", "ttlSecondsAfterFinished": 10}}),
            "spec.completionPolicy: Forbidden: activeDeadlineSeconds and ttlSecondsAfterFinished can only work with Always CompletionPolicyType",
        ),
        (
            json!({"image": "nginx", "completionPolicy": {"type": "Sometimes"}}),
            "spec.completionPolicy.type: Unsupported value: \"Sometimes\": supported values: \"Always\", \"Never\"",
        ),
        (
            json!({"image": "nginx", "imagePullPolicy": "Never"}),
            "spec.imagePullPolicy: Unsupported value: \"Never\": supported values: \"Always\", \"IfNotPresent\"",
        ),
    ] {
        assert_eq!(
            messages(&validate_imagepulljob(&job(spec.clone()))),
            expected,
            "{spec}"
        );
    }
}

#[test]
fn pull_secrets_are_immutable() {
    let old = job(json!({"image": "nginx", "pullSecrets": ["a"]}));
    let same = job(json!({"image": "nginx", "pullSecrets": ["a"], "parallelism": 3}));
    assert_eq!(validate_imagepulljob_update(&same, &old), vec![]);
    let changed = job(json!({"image": "nginx", "pullSecrets": ["a", "b"]}));
    assert_eq!(
        messages(&validate_imagepulljob_update(&changed, &old)),
        "spec.pullSecrets: Forbidden: spec.pullSecrets is immutable"
    );
}

#[test]
fn imagelistpulljob_images_are_required_unique_bounded_and_valid() {
    let list = |images: Value| -> ImageListPullJob {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "ImageListPullJob",
            "metadata": {"name": "l", "namespace": "default"}, "spec": {"images": images},
        }))
        .unwrap()
    };
    assert_eq!(
        validate_imagelistpulljob(&list(json!(["nginx", "busybox:1"]))),
        vec![]
    );
    assert_eq!(
        messages(&validate_imagelistpulljob(&list(json!([])))),
        "spec.images: Required value: image can not be empty"
    );
    assert_eq!(
        messages(&validate_imagelistpulljob(&list(json!([
            "nginx", "BAD", "nginx"
        ])))),
        "[spec.images[1]: Invalid value: \"BAD\": invalid image BAD: repository name must be lowercase, spec.images[2]: Duplicate value: \"nginx\"]"
    );
    let many: Vec<String> = (0..256).map(|i| format!("img{i}")).collect();
    assert_eq!(
        messages(&validate_imagelistpulljob(&list(json!(many)))),
        "spec.images: Invalid value: 256: the maximum number of images cannot > 255"
    );
}

#[test]
fn nodeimage_tags_need_name_uniqueness_created_at_version_and_ttl() {
    let node_image = |images: Value| -> NodeImage {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "NodeImage",
            "metadata": {"name": "node-1"}, "spec": {"images": images},
        }))
        .unwrap()
    };
    let good = json!({"tags": [{"tag": "1", "createdAt": "2026-01-01T00:00:00Z", "version": 1, "pullPolicy": {"ttlSecondsAfterFinished": 300}}]});
    assert_eq!(
        validate_nodeimage(&node_image(json!({"nginx": good}))),
        vec![]
    );
    let bad = json!({"nginx": {"tags": [
        {"tag": "1", "createdAt": "2026-01-01T00:00:00Z", "pullPolicy": {"ttlSecondsAfterFinished": 1}},
        {"tag": "1", "version": -1, "pullPolicy": {}},
        {"tag": "", "createdAt": "2026-01-01T00:00:00Z"},
    ]}});
    assert_eq!(
        messages(&validate_nodeimage(&node_image(bad))),
        "[spec.images[nginx].tags[1].tag: Duplicate value: \"1\", \
         spec.images[nginx].tags[1].createdAt: Required value: createAt field for nginx/1 can not be empty, \
         spec.images[nginx].tags[1].version: Invalid value: -1: version for nginx/1 can not be less than 0, \
         spec.images[nginx].tags[1].pullPolicy.ttlSecondsAfterFinished: Required value: pullPolicy.ttlSecondsAfterFinished for nginx/1 must set, \
         spec.images[nginx].tags[2].tag: Required value: tag for image nginx can not be empty, \
         spec.images[nginx].tags[2].pullPolicy: Required value: pullPolicy field for nginx/ must set]"
    );
    let images: serde_json::Map<String, Value> = (0..257)
        .map(|i| (format!("img{i}"), good.clone()))
        .collect();
    assert_eq!(
        messages(&validate_nodeimage(&node_image(Value::Object(images)))),
        "spec.images: Invalid value: 257: spec images length 257 can not be more than 256"
    );
}
