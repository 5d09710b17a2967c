use super::*;
use crate::api::defaults::{default_v1alpha1, default_v1beta1};
use serde_json::json;

fn alpha(spec: serde_json::Value) -> v1alpha1::CloneSet {
    let mut cs: v1alpha1::CloneSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
        "metadata": {"name": "demo", "namespace": "default"},
        "spec": spec,
    }))
    .unwrap();
    default_v1alpha1(&mut cs.spec);
    cs
}

fn beta(spec: serde_json::Value) -> v1beta1::CloneSet {
    let mut cs: v1beta1::CloneSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
        "metadata": {"name": "demo", "namespace": "default"},
        "spec": spec,
    }))
    .unwrap();
    default_v1beta1(&mut cs.spec);
    cs
}

fn base() -> serde_json::Value {
    json!({
        "replicas": 3,
        "selector": {"matchLabels": {"app": "demo"}},
        "template": {"metadata": {"labels": {"app": "demo"}},
                     "spec": {"containers": [{"name": "main", "image": "nginx:1"}]}},
    })
}

fn with(mut v: serde_json::Value, ptr: &str, value: serde_json::Value) -> serde_json::Value {
    let (parent, key) = ptr.rsplit_once('/').unwrap();
    let mut cur = &mut v;
    for part in parent.split('/').filter(|p| !p.is_empty()) {
        cur = cur
            .as_object_mut()
            .unwrap()
            .entry(part.to_string())
            .or_insert(json!({}));
    }
    cur.as_object_mut().unwrap().insert(key.to_string(), value);
    v
}

fn messages(errs: &[FieldError]) -> Vec<String> {
    errs.iter().map(ToString::to_string).collect()
}

#[test]
fn valid_objects_pass() {
    assert_eq!(
        messages(&validate_v1alpha1(&alpha(base()), None, None)),
        Vec::<String>::new()
    );
    assert_eq!(
        messages(&validate_v1beta1(&beta(base()), None, None)),
        Vec::<String>::new()
    );
}

#[test]
fn selector_must_match_template_labels() {
    let cs = alpha(with(
        base(),
        "/template/metadata/labels",
        json!({"app": "other"}),
    ));
    let errs = validate_v1alpha1(&cs, None, None);
    assert_eq!(
        messages(&errs),
        [
            "spec.template.metadata.labels: Invalid value: {\"app\":\"other\"}: `selector` does not match template `labels`"
        ]
    );
    let cs = beta(with(base(), "/selector", json!({})));
    let errs = validate_v1beta1(&cs, None, None);
    assert_eq!(errs[0].field, "spec.selector");
    assert!(
        errs[0]
            .detail
            .contains("empty selector is invalid for cloneset")
    );
    let mut cs = beta(base());
    cs.spec.selector = None;
    assert_eq!(
        messages(&validate_v1beta1(&cs, None, None)),
        ["spec.selector: Required value"]
    );
}

#[test]
fn ranges_table() {
    let cases: &[(&str, serde_json::Value, &str)] = &[
        (
            "/replicas",
            json!(-1),
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            "/updateStrategy/partition",
            json!("x"),
            "spec.updateStrategy.partition: Invalid value: \"x\": failed GetScaledValueFromIntOrPercent for partition",
        ),
        (
            "/updateStrategy/partition",
            json!(-2),
            "spec.updateStrategy.partition: Invalid value: -2: must be greater than or equal to 0",
        ),
        (
            "/updateStrategy/maxUnavailable",
            json!("3"),
            "spec.updateStrategy.maxUnavailable: Invalid value: \"3\": failed GetScaledValueFromIntOrPercent for maxUnavailable",
        ),
        (
            "/updateStrategy/maxUnavailable",
            json!(0),
            "spec.updateStrategy.maxUnavailable: Invalid value: \"0\": maxUnavailable and maxSurge should not both be less than 1",
        ),
        (
            "/updateStrategy/maxSurge",
            json!("abc"),
            "spec.updateStrategy.maxSurge: Invalid value: \"abc\": failed GetScaledValueFromIntOrPercent for maxSurge",
        ),
        (
            "/updateStrategy/type",
            json!("Rolling"),
            "spec.updateStrategy.type: Invalid value: \"Rolling\": must be 'ReCreate', InPlaceIfPossible or 'InPlaceOnly'",
        ),
        (
            "/progressDeadlineSeconds",
            json!(0),
            "spec.progressDeadlineSeconds: Invalid value: 0: must be greater than minReadySeconds",
        ),
        (
            "/template/spec/restartPolicy",
            json!("Never"),
            "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
        ),
        (
            "/template/spec/activeDeadlineSeconds",
            json!(5),
            "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in cloneset is not Supported",
        ),
        (
            "/scaleStrategy/podsToDelete",
            json!(["a", "a"]),
            "spec.scaleStrategy.podsToDelete: Invalid value: [\"a\",\"a\"]: duplicated items [\"a\"]",
        ),
        (
            "/updateStrategy/scatterStrategy",
            json!([{"key": "", "value": "a"}]),
            "spec.updateStrategy.scatterStrategy: Required value: key should not be empty",
        ),
        (
            "/updateStrategy/priorityStrategy",
            json!({"weightPriority": [{"weight": 200, "matchSelector": {"matchLabels": {"a": "b"}}}]}),
            "spec.updateStrategy.priorityStrategy: Required value: weight must be valid number",
        ),
    ];
    for (ptr, value, want) in cases {
        let errs = validate_v1alpha1(&alpha(with(base(), ptr, value.clone())), None, None);
        let got = messages(&errs);
        assert!(
            got.iter().any(|m| m.starts_with(want)),
            "{ptr}={value}: want {want:?}, got {got:?}"
        );
    }
    // maxSurge alone is enough (both versions; OpenKruise's v1beta1 shadowing bug not kept).
    let ok = with(
        with(base(), "/updateStrategy/maxUnavailable", json!(0)),
        "/updateStrategy/maxSurge",
        json!(1),
    );
    assert!(validate_v1alpha1(&alpha(ok), None, None).is_empty());
    let beta_ok = with(
        base(),
        "/updateStrategy/rollingUpdate",
        json!({"maxUnavailable": 0, "maxSurge": 1}),
    );
    assert!(validate_v1beta1(&beta(beta_ok), None, None).is_empty());
    let inplace_surge = with(
        with(base(), "/updateStrategy/type", json!("InPlaceOnly")),
        "/updateStrategy/maxSurge",
        json!(1),
    );
    assert!(
        messages(&validate_v1alpha1(&alpha(inplace_surge), None, None))
            .iter()
            .any(|m| m.contains("can not use maxSurge with strategy type InPlaceOnly"))
    );
}

#[test]
fn beta_specific_fields() {
    let bad = with(
        base(),
        "/updateStrategy/rollingUpdate",
        json!({"podUpdatePolicy": "Whatever", "inPlaceUpdateStrategy": {"imagePreDownloadParallelism": "50%", "imagePreDownloadTimeoutSeconds": -1}}),
    );
    let got = messages(&validate_v1beta1(&beta(bad), None, None));
    assert!(
        got.iter().any(|m| m.starts_with(
            "spec.updateStrategy.rollingUpdate.podUpdatePolicy: Invalid value: \"Whatever\""
        )),
        "{got:?}"
    );
    assert!(
        got.iter()
            .any(|m| m.contains("imagePreDownloadParallelism does not support percentage value")),
        "{got:?}"
    );
    assert!(
        got.iter().any(|m| m.starts_with(
            "spec.updateStrategy.rollingUpdate.inPlaceUpdateStrategy.imagePreDownloadTimeoutSeconds"
        )),
        "{got:?}"
    );
}

#[test]
fn immutable_selector_and_in_place_only() {
    let old = alpha(with(base(), "/updateStrategy/type", json!("InPlaceOnly")));
    let mut new = old.clone();
    new.spec.selector =
        Some(serde_json::from_value(json!({"matchLabels": {"app": "demo", "x": "y"}})).unwrap());
    let got = messages(&validate_v1alpha1(&new, Some(&old), None));
    assert!(
        got.iter()
            .any(|m| m
                .starts_with("spec: Forbidden: updates to cloneset spec for fields other than")),
        "{got:?}"
    );

    let mut image_only = old.clone();
    image_only.spec.template.spec.as_mut().unwrap().containers[0].image = Some("nginx:2".into());
    image_only.spec.replicas = Some(5);
    assert!(validate_v1alpha1(&image_only, Some(&old), None).is_empty());

    let mut env = old.clone();
    env.spec.template.spec.as_mut().unwrap().containers[0].command = Some(vec!["sh".into()]);
    let got = messages(&validate_v1alpha1(&env, Some(&old), None));
    assert_eq!(
        got,
        [
            "spec: Forbidden: only allowed to update images in spec for InPlaceOnly, but found add /containers/0/command"
        ]
    );
}

#[test]
fn pods_to_delete_lookup_only_for_new_names() {
    let old = alpha(with(base(), "/scaleStrategy/podsToDelete", json!(["old"])));
    let new = alpha(with(
        base(),
        "/scaleStrategy/podsToDelete",
        json!(["old", "gone", "other", "dying", "mine"]),
    ));
    let lookup = |name: &str| match name {
        "gone" => PodLookup::Failed("pods \"gone\" not found".into()),
        "other" => PodLookup::NotOwned,
        "dying" => PodLookup::Terminating,
        "mine" => PodLookup::Owned,
        _ => panic!("looked up {name}"),
    };
    let got = messages(&validate_v1alpha1(&new, Some(&old), Some(&lookup)));
    assert_eq!(
        got,
        [
            "spec.scaleStrategy.podsToDelete: Invalid value: \"dying\": find pod dying already terminating",
            "spec.scaleStrategy.podsToDelete: Invalid value: \"gone\": find pod gone failed: pods \"gone\" not found",
            "spec.scaleStrategy.podsToDelete: Invalid value: \"other\": find pod other owner is not this CloneSet",
        ]
    );
}

#[test]
fn template_checks() {
    let cs = alpha(with(
        base(),
        "/template/spec/containers",
        json!([{"name": "a", "image": "x"}, {"name": "a", "image": ""}]),
    ));
    let got = messages(&validate_v1alpha1(&cs, None, None));
    assert!(
        got.contains(&"spec.template.spec.containers[1].name: Duplicate value: \"a\"".to_string()),
        "{got:?}"
    );
    assert!(
        got.contains(&"spec.template.spec.containers[1].image: Required value".to_string()),
        "{got:?}"
    );
    let mut cs = alpha(base());
    cs.metadata.name = Some("Bad_Name".into());
    assert!(validate_v1alpha1(&cs, None, None)[0].field == "metadata.name");
}

#[test]
fn template_metadata_is_checked_as_kube_apiserver_checks_a_pod() {
    let cs = beta(with(
        base(),
        "/template/metadata/annotations",
        json!({"bad key!": "v"}),
    ));
    let got = messages(&validate_v1beta1(&cs, None, None));
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with(
            "spec.template.metadata.annotations: Invalid value: \"bad key!\": name part must consist of"
        ),
        "{got:?}"
    );
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    fn ios_json() -> impl Strategy<Value = serde_json::Value> {
        prop_oneof![
            any::<i32>().prop_map(|i| json!(i)),
            "[0-9a-z.%+-]{0,6}".prop_map(|s| json!(s)),
        ]
    }

    proptest! {
        #[test]
        fn validation_never_panics(
            replicas in any::<i32>(), partition in ios_json(), mu in ios_json(), surge in ios_json(),
            ty in "[A-Za-z]{0,12}", deadline in proptest::option::of(any::<i32>()),
            min_ready in any::<i32>(), par in ios_json(),
        ) {
            let spec = json!({
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "demo"}},
                "template": {"metadata": {"labels": {"app": "demo"}}, "spec": {"containers": [{"name": "main", "image": "x"}]}},
                "minReadySeconds": min_ready,
                "progressDeadlineSeconds": deadline,
                "updateStrategy": {"type": ty, "partition": partition, "maxUnavailable": mu, "maxSurge": surge},
            });
            let a: v1alpha1::CloneSet = serde_json::from_value(json!({"metadata": {"name": "x"}, "spec": spec.clone()})).unwrap();
            let _ = validate_v1alpha1(&a, Some(&a), None);
            let beta_spec = json!({
                "replicas": replicas,
                "updateStrategy": {"type": ty, "rollingUpdate": {"podUpdatePolicy": ty, "partition": spec["updateStrategy"]["partition"],
                    "maxUnavailable": spec["updateStrategy"]["maxUnavailable"], "maxSurge": spec["updateStrategy"]["maxSurge"],
                    "inPlaceUpdateStrategy": {"imagePreDownloadParallelism": par}}},
            });
            let b: v1beta1::CloneSet = serde_json::from_value(json!({"metadata": {"name": "x"}, "spec": beta_spec})).unwrap();
            let _ = validate_v1beta1(&b, Some(&b), None);
        }
    }
}
