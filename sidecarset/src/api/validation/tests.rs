use super::*;
use crate::api::defaults::default_v1beta1;
use proptest::prelude::*;
use serde_json::{Value, json};

fn set(v: Value) -> SidecarSet {
    let mut v = v;
    v["apiVersion"] = json!("apps.kruise.io/v1beta1");
    v["kind"] = json!("SidecarSet");
    let mut s: SidecarSet = serde_json::from_value(v).unwrap();
    default_v1beta1(&mut s).unwrap();
    s
}

fn valid() -> Value {
    json!({
        "metadata": {"name": "test-sidecarset"},
        "spec": {
            "selector": {"matchLabels": {"app": "nginx"}},
            "containers": [{"name": "sidecar1", "image": "centos:6.7",
                "volumeMounts": [{"name": "log", "mountPath": "/var/log"}]}],
            "volumes": [{"name": "log", "emptyDir": {}}]
        }
    })
}

fn errors(v: Value) -> Vec<FieldError> {
    validate_sidecar_set(&set(v), None, &[])
}

fn fields(errs: &[FieldError]) -> Vec<String> {
    errs.iter().map(|e| e.field.to_string()).collect()
}

#[test]
fn valid_sidecarset_passes() {
    assert_eq!(errors(valid()), vec![]);
}

#[test]
fn missing_selector_and_empty_selector() {
    let mut v = valid();
    v["spec"].as_object_mut().unwrap().remove("selector");
    let e = errors(v);
    assert_eq!(e.len(), 1);
    assert_eq!(
        e[0].to_string(),
        "spec.selector: Required value: no selector defined for SidecarSet"
    );
    let mut v = valid();
    v["spec"]["selector"] = json!({});
    assert_eq!(fields(&errors(v)), ["spec.selector"]);
    let mut v = valid();
    v["spec"]["selector"] = json!({"matchExpressions": [{"key": "app", "operator": "Bad"}]});
    assert_eq!(
        fields(&errors(v)),
        ["spec.selector.matchExpressions[0].operator"]
    );
}

#[test]
fn update_strategy_rules() {
    let mut v = valid();
    v["spec"]["updateStrategy"] = json!({"type": "RollingUpdate", "partition": 1,
        "selector": {"matchLabels": {"canary": "true"}}});
    assert_eq!(fields(&errors(v)), ["updateStrategy"]);
    let mut v = valid();
    v["spec"]["updateStrategy"] = json!({"partition": "50", "maxUnavailable": -1});
    assert_eq!(
        fields(&errors(v)),
        [
            "spec.updateStrategy.partition",
            "spec.updateStrategy.maxUnavailable"
        ]
    );
    // NotUpdate skips the rolling checks.
    let mut v = valid();
    v["spec"]["updateStrategy"] = json!({"type": "NotUpdate", "partition": "x"});
    assert_eq!(errors(v), vec![]);
    let mut v = valid();
    v["spec"]["updateStrategy"] = json!({"scatterStrategy": [{"key": "", "value": "a"}]});
    assert_eq!(fields(&errors(v)), ["spec.updateStrategy.scatterStrategy"]);
}

#[test]
fn containers_checked_as_in_a_pod() {
    let mut v = valid();
    v["spec"]["containers"] = json!([]);
    assert_eq!(
        errors(v)[0].to_string(),
        "spec: Required value: no initContainer or container defined for SidecarSet"
    );
    let mut v = valid();
    v["spec"]["containers"][0]["volumeMounts"][0]["name"] = json!("missing");
    assert_eq!(
        fields(&errors(v)),
        ["spec.containers[0].volumeMounts[0].name"]
    );
    let mut v = valid();
    v["spec"]["initContainers"] = json!([{"name": "sidecar1", "image": "x"}]);
    // As kube-apiserver reports it: at the init container, which may not reuse a name.
    assert_eq!(fields(&errors(v)), ["spec.initContainers[0].name"]);
    let mut v = valid();
    v["spec"]["containers"][0]["ports"] = json!([{"containerPort": 70000}]);
    v["spec"]["containers"][0]["readinessProbe"] = json!({});
    assert_eq!(
        fields(&errors(v)),
        [
            "spec.containers[0].ports[0].containerPort",
            "spec.containers[0].readinessProbe"
        ]
    );
    let mut v = valid();
    v["spec"]["containers"][0]["image"] = json!("");
    assert_eq!(fields(&errors(v)), ["spec.containers[0].image"]);
    let mut v = valid();
    v["spec"]["containers"][0]["podInjectPolicy"] = json!("Sideways");
    v["spec"]["containers"][0]["shareVolumePolicy"] = json!({"type": "maybe"});
    assert_eq!(
        fields(&errors(v)),
        [
            "spec.container.podInjectPolicy",
            "spec.container.shareVolumePolicy"
        ]
    );
    let mut v = valid();
    v["spec"]["containers"][0]["transferEnv"] = json!([{"sourceContainerNameFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}, "envName": "A"}]);
    assert_eq!(
        fields(&errors(v)),
        ["spec[0].transferEnv.fieldRef.fieldPath"]
    );
}

#[test]
fn native_init_sidecar_needs_not_update() {
    let mut v = valid();
    v["spec"]["initContainers"] =
        json!([{"name": "init", "image": "x", "restartPolicy": "Always"}]);
    let e = errors(v.clone());
    assert_eq!(
        e[0].to_string(),
        "spec.updateStrategy: Required value: The initContainer in-place upgrade is not currently supported."
    );
    v["spec"]["updateStrategy"] = json!({"type": "NotUpdate"});
    assert_eq!(errors(v), vec![]);
}

#[test]
fn hot_upgrade_fields_consistent() {
    let mut v = valid();
    v["spec"]["containers"][0]["upgradeStrategy"] = json!({"upgradeType": "HotUpgrade"});
    assert_eq!(
        fields(&errors(v.clone())),
        ["spec.containers[0].upgradeStrategy.hotUpgradeEmptyImage"]
    );
    v["spec"]["containers"][0]["upgradeStrategy"]["hotUpgradeEmptyImage"] = json!("centos:6.7");
    assert_eq!(
        fields(&errors(v.clone())),
        ["spec.containers[0].upgradeStrategy.hotUpgradeEmptyImage"]
    );
    v["spec"]["containers"][0]["upgradeStrategy"]["hotUpgradeEmptyImage"] = json!("empty:1");
    assert_eq!(errors(v.clone()), vec![]);
    // `sidecar1-1` is taken by the hot-upgrade pair.
    v["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "sidecar1-1", "image": "x"}));
    assert_eq!(fields(&errors(v)), ["spec.containers[1].name"]);
    let mut v = valid();
    v["spec"]["containers"][0]["upgradeStrategy"] = json!({"upgradeType": "Warm"});
    assert_eq!(
        fields(&errors(v)),
        ["spec.containers[0].upgradeStrategy.upgradeType"]
    );
}

#[test]
fn injection_revision_and_patch_metadata() {
    let mut v = valid();
    v["spec"]["injectionStrategy"] = json!({"revision": {"policy": "Sometimes"}});
    assert_eq!(fields(&errors(v)), ["revision", "revision.policy"]);
    let mut v = valid();
    v["spec"]["patchPodMetadata"] = json!([
        {"annotations": {"a/b": "1"}, "patchPolicy": "Overwrite"},
        {"annotations": {"a/b": "2"}},
        {"annotations": {}}
    ]);
    let e = errors(v);
    assert_eq!(
        e.iter().map(|e| e.detail.as_str()).collect::<Vec<_>>(),
        [
            "patch annotation[a/b] already exist",
            "no annotations defined for SidecarSet"
        ]
    );
}

#[test]
fn resources_policy_rules() {
    let mut v = valid();
    v["spec"]["containers"][0]["resourcesPolicy"] = json!({"targetContainersMode": "sum", "targetContainersNameRegex": ".*", "resourcesExpr": {"limits": {"cpu": "cpu*50%"}}});
    assert_eq!(errors(v.clone()), vec![]);
    v["spec"]["containers"][0]["resources"] = json!({"limits": {"cpu": "1"}});
    assert_eq!(
        errors(v.clone())[0].detail,
        "resourcesPolicy and resources cannot be configured together"
    );
    let mut v = valid();
    v["spec"]["containers"][0]["resourcesPolicy"] =
        json!({"targetContainersMode": "max", "resourcesExpr": {}});
    assert_eq!(
        fields(&errors(v)),
        [
            "spec[0].resourcesPolicy.targetContainersNameRegex",
            "spec[0].resourcesPolicy.resourcesExpr"
        ]
    );
    // Only native-sidecar init containers may have one.
    let mut v = valid();
    v["spec"]["initContainers"] = json!([{"name": "init", "image": "x",
        "resourcesPolicy": {"targetContainersMode": "sum", "targetContainersNameRegex": ".*", "resourcesExpr": {"requests": {"memory": "memory"}}}}]);
    assert_eq!(fields(&errors(v)), ["spec[0].resourcesPolicy"]);
}

#[test]
fn resources_policy_regex_and_expressions_are_checked() {
    let mut v = valid();
    v["spec"]["containers"][0]["resourcesPolicy"] = json!({
        "targetContainersMode": "sum",
        "targetContainersNameRegex": "app-(",
        "resourcesExpr": {
            "limits": {"cpu": "cpu*50%", "memory": "max(memory, 1Gi"},
            "requests": {"cpu": "cpu - 2", "memory": "foo"}
        }
    });
    let errs = errors(v);
    assert_eq!(
        fields(&errs),
        [
            "spec[0].resourcesPolicy.targetContainersNameRegex",
            "spec[0].resourcesPolicy.resourcesExpr.limits.memory",
            "spec[0].resourcesPolicy.resourcesExpr.requests.cpu",
            "spec[0].resourcesPolicy.resourcesExpr.requests.memory",
        ]
    );
    assert!(
        errs[0].detail.starts_with("invalid regex pattern: "),
        "{}",
        errs[0].detail
    );
    // OpenKruise evaluates each expression with its variable bound to the number 1.
    assert_eq!(
        errs[1].detail,
        "invalid expression: parse error: syntax error at line 1, col 16"
    );
    assert_eq!(
        errs[2].detail,
        "invalid expression: calculation result is negative: -1"
    );
    assert_eq!(
        errs[3].detail,
        "invalid expression: undefined variable: foo"
    );
}

#[test]
fn name_rules() {
    let mut v = valid();
    v["metadata"]["name"] = json!("bad_name");
    assert_eq!(fields(&errors(v)), ["metadata.name"]);
    let mut v = valid();
    v["metadata"]["name"] = json!("a".repeat(64));
    assert_eq!(fields(&errors(v)), ["metadata.name"]);
}

#[test]
fn update_immutability() {
    let old = set(valid());
    let mut v = valid();
    v["spec"]["containers"][0]["upgradeStrategy"] =
        json!({"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "e"});
    let e = validate_sidecar_set(&set(v), Some(&old), &[]);
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].detail, "container sidecar1 upgradeType is immutable");
    let mut v = valid();
    v["spec"]["containers"][0]["name"] = json!("sidecar2");
    let e = validate_sidecar_set(&set(v), Some(&old), &[]);
    assert_eq!(e[0].detail, "container sidecar2 is not found");
    assert_eq!(
        e[0].to_string(),
        "spec.containers.name: Invalid value: \"sidecar2\": container sidecar2 is not found"
    );
}

#[test]
fn conflicts_with_overlapping_sidecarsets() {
    let mine = set(valid());
    let mut other_v = valid();
    other_v["metadata"]["name"] = json!("other");
    let other = set(other_v.clone());
    let e = validate_sidecar_set(&mine, None, &[mine.clone(), other]);
    assert_eq!(
        aggregate(&e),
        "spec.containers: Invalid value: \"sidecar1\": container sidecar1 already exist in other"
    );
    // Disjoint selectors: no conflict.
    other_v["spec"]["selector"] = json!({"matchLabels": {"app": "redis"}});
    assert_eq!(
        validate_sidecar_set(&mine, None, &[set(other_v.clone())]),
        vec![]
    );
    // Disjoint namespace selectors: no conflict.
    let mut a = valid();
    a["spec"]["namespaceSelector"] = json!({"matchLabels": {"kubernetes.io/metadata.name": "a"}});
    let mut b = valid();
    b["metadata"]["name"] = json!("other");
    b["spec"]["namespaceSelector"] = json!({"matchLabels": {"kubernetes.io/metadata.name": "b"}});
    assert_eq!(validate_sidecar_set(&set(a), None, &[set(b)]), vec![]);
    // Volumes: same name, different content.
    let mut c = valid();
    c["metadata"]["name"] = json!("other");
    c["spec"]["containers"][0]["name"] = json!("sidecar2");
    c["spec"]["volumes"][0] = json!({"name": "log", "hostPath": {"path": "/log"}});
    let e = validate_sidecar_set(&mine, None, &[set(c.clone())]);
    assert_eq!(
        e[0].detail,
        "volume log is in conflict with sidecarset other"
    );
    c["spec"]["volumes"][0] = json!({"name": "log", "emptyDir": {}});
    assert_eq!(validate_sidecar_set(&mine, None, &[set(c.clone())]), vec![]);
    // Annotations: Overwrite vs MergePatchJson conflicts, two MergePatchJson do not.
    c["spec"]["patchPodMetadata"] =
        json!([{"annotations": {"oom": "{}"}, "patchPolicy": "MergePatchJson"}]);
    let mut m = valid();
    m["spec"]["patchPodMetadata"] =
        json!([{"annotations": {"oom": "{}"}, "patchPolicy": "MergePatchJson"}]);
    assert_eq!(
        validate_sidecar_set(&set(m.clone()), None, &[set(c.clone())]),
        vec![]
    );
    m["spec"]["patchPodMetadata"][0]["patchPolicy"] = json!("Overwrite");
    let e = validate_sidecar_set(&set(m), None, &[set(c)]);
    assert_eq!(
        e[0].detail,
        "annotation oom is in conflict with sidecarset other"
    );
}

#[test]
fn canary_rules() {
    let base = set(valid());
    let mut v = valid();
    v["metadata"] = json!({"name": "canary", "annotations": {
        "apps.kruise.io/sidecarset-canary": "true", "apps.kruise.io/sidecarset-base": "test-sidecarset"}});
    // Canary must be NotUpdate; same container names as its base are fine.
    let e = validate_sidecar_set(&set(v.clone()), None, std::slice::from_ref(&base));
    assert_eq!(
        e.iter().map(|e| e.detail.as_str()).collect::<Vec<_>>(),
        ["RollingUpdate is not supported for canary sidecarSet"]
    );
    v["spec"]["updateStrategy"] = json!({"type": "NotUpdate"});
    assert_eq!(
        validate_sidecar_set(&set(v.clone()), None, std::slice::from_ref(&base)),
        vec![]
    );
    let e = validate_sidecar_set(&set(v.clone()), None, &[]);
    assert!(
        e[0].detail
            .starts_with("fetch base sidecarSet[test-sidecarset] failed")
    );
    let mut changed = v.clone();
    changed["metadata"]["annotations"]["apps.kruise.io/sidecarset-base"] = json!("canary");
    let e = validate_sidecar_set(&set(changed), Some(&set(v.clone())), &[base, set(v)]);
    assert_eq!(
        e.iter().map(|e| e.detail.as_str()).collect::<Vec<_>>(),
        [
            "base sidecarSet cannot be itself",
            "annotations[apps.kruise.io/sidecarset-base] is immutable",
            "base sidecarSet cannot be canary"
        ]
    );
}

#[test]
fn selector_overlap_table() {
    // OpenKruise's TestSelectorConflict cases.
    let s = |v: Value| -> LabelSelector { serde_json::from_value(v).unwrap() };
    let cases = [
        (
            json!({"matchLabels": {"a": "h"}}),
            json!({"matchLabels": {"a": "h"}}),
            true,
        ),
        (
            json!({"matchLabels": {"a": "h"}}),
            json!({"matchLabels": {"a": "i"}}),
            false,
        ),
        (
            json!({"matchLabels": {"a": "h"}}),
            json!({"matchLabels": {"b": "i"}}),
            true,
        ),
        (
            json!({"matchLabels": {"a": "h", "b": "i", "c": "j"}}),
            json!({"matchLabels": {"a": "h", "b": "x", "c": "j"}}),
            false,
        ),
        (
            json!({"matchLabels": {"a": "h"}}),
            json!({"matchExpressions": [{"key": "a", "operator": "In", "values": ["h", "i", "j"]}]}),
            true,
        ),
        (
            json!({"matchLabels": {"a": "h"}}),
            json!({"matchExpressions": [{"key": "a", "operator": "In", "values": ["i", "j"]}]}),
            false,
        ),
        (
            json!({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["h", "i"]}]}),
            json!({"matchLabels": {"a": "h"}}),
            false,
        ),
        (
            json!({"matchLabels": {"a": "h"}}),
            json!({"matchExpressions": [{"key": "a", "operator": "Exists"}]}),
            true,
        ),
        (
            json!({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}),
            json!({"matchLabels": {"a": "h"}}),
            false,
        ),
    ];
    for (i, (a, b, want)) in cases.into_iter().enumerate() {
        assert_eq!(selectors_overlap(&s(a), &s(b)), want, "case {i}");
    }
}

proptest! {
    #[test]
    fn arbitrary_sidecarsets_never_panic_the_validator(spec in crate::conversion::tests::arb_json(), other in crate::conversion::tests::arb_json()) {
        let mk = |name: &str, spec: Value| serde_json::from_value::<SidecarSet>(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": name}, "spec": spec}));
        if let (Ok(a), Ok(b)) = (mk("a", spec), mk("b", other)) {
            let _ = validate_sidecar_set(&a, Some(&b), std::slice::from_ref(&b));
            let mut d = a.clone();
            let _ = default_v1beta1(&mut d);
            let _ = validate_sidecar_set(&d, None, &[b, a]);
        }
    }
}
