//! Golden tests: expectations taken from OpenKruise's behaviour and its
//! `pkg/webhook/pod/mutating/sidecarset_test.go` cases.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use super::*;
use crate::api::{
    PodInjectPolicy, SIDECARSET_BASE_ANNOTATION, SIDECARSET_CANARY_ANNOTATION,
    SIDECARSET_HASH_ANNOTATION, SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION,
    SIDECARSET_INJECTED_LIST_ANNOTATION, SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION,
    SidecarSetInjectRevision, SidecarSetInjectRevisionPolicy, SidecarSetPatchPodMetadata,
};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::json;

fn now() -> jiff::Timestamp {
    "2026-11-22T04:00:00Z".parse().unwrap()
}

fn set(v: Value) -> SidecarSet {
    let mut v = v;
    v["apiVersion"] = json!("apps.kruise.io/v1beta1");
    v["kind"] = json!("SidecarSet");
    serde_json::from_value(v).unwrap()
}

fn pod(v: Value) -> Pod {
    serde_json::from_value(v).unwrap()
}

fn run(pod: &Pod, ns_labels: Option<&BTreeMap<String, String>>, sets: &[SidecarSet]) -> Injection {
    run_with(pod, ns_labels, sets, 0.5, &NoHistory)
}

fn run_with(
    pod: &Pod,
    ns_labels: Option<&BTreeMap<String, String>>,
    sets: &[SidecarSet],
    random: f64,
    history: &dyn RevisionHistory,
) -> Injection {
    inject(&InjectInput {
        pod,
        namespace_labels: ns_labels,
        sidecar_sets: sets,
        now: now(),
        random,
        history,
        sort_sidecar_containers_by_name: false,
    })
    .unwrap()
}

/// OpenKruise's `pod1`.
fn pod1() -> Pod {
    pod(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "test-pod", "namespace": "default", "labels": {"app": "suxing-test"}},
        "spec": {
            "initContainers": [{"name": "init-0", "image": "busybox:1.0.0"}],
            "containers": [{"name": "nginx", "image": "nginx:1.15.1",
                "env": [{"name": "hello1", "value": "world1"}, {"name": "hello2", "value": "world2"}],
                "volumeMounts": [{"name": "volume-a", "mountPath": "/a/b"}, {"name": "volume-b", "mountPath": "/e/f"}]}],
            "volumes": [{"name": "volume-a"}, {"name": "volume-b"}]
        }
    }))
}

/// OpenKruise's `sidecarSet1`.
fn sidecar_set1() -> SidecarSet {
    set(json!({
        "metadata": {"name": "sidecarset1", "annotations": {"kruise.io/sidecarset-hash": "c4k2dbb95d"}},
        "spec": {
            "selector": {"matchLabels": {"app": "suxing-test"}},
            "initContainers": [{"name": "init-2", "image": "busybox:1.0.0"}, {"name": "init-1", "image": "busybox:1.0.0"}],
            "containers": [
                {"name": "dns-f", "image": "dns-f-image:1.0", "podInjectPolicy": "BeforeAppContainer", "shareVolumePolicy": {"type": "disabled"}},
                {"name": "log-agent", "image": "log-agent-image:1.0", "podInjectPolicy": "AfterAppContainer", "shareVolumePolicy": {"type": "disabled"}}
            ]
        }
    }))
}

/// OpenKruise's `sidecarsetWithTransferEnv`.
fn sidecarset_with_transfer_env() -> SidecarSet {
    set(json!({
        "metadata": {"name": "sidecarset2", "annotations": {"kruise.io/sidecarset-hash": "c4k2dbb95d"}},
        "spec": {
            "selector": {"matchLabels": {"app": "suxing-test"}},
            "initContainers": [{"name": "dns-e", "image": "dns-e-image:1.0", "volumeMounts": [{"name": "volume-1", "mountPath": ""}],
                "transferEnv": [{"sourceContainerName": "nginx", "envName": "hello2"}]}],
            "containers": [{"name": "dns-f", "image": "dns-f-image:1.0", "volumeMounts": [{"name": "volume-1", "mountPath": ""}],
                "podInjectPolicy": "BeforeAppContainer", "shareVolumePolicy": {"type": "disabled"},
                "transferEnv": [{"sourceContainerName": "nginx", "envName": "hello2"}]}],
            "volumes": [{"name": "volume-1"}, {"name": "volume-2"}]
        }
    }))
}

const INJECTED: &str = r#"{"name":"IS_INJECTED","value":"true"}"#;

fn injected_env() -> Value {
    serde_json::from_str(INJECTED).unwrap()
}

#[test]
fn golden_sidecarset1_into_pod1() {
    let out = run(&pod1(), Some(&BTreeMap::new()), &[sidecar_set1()]);
    let entry = |hash: &str| {
        format!(
            r#"{{"sidecarset1":{{"updateTimestamp":"2026-11-22T04:00:00Z","hash":"{hash}","sidecarSetName":"sidecarset1","sidecarList":["dns-f","log-agent"]}}}}"#
        )
    };
    let expected = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "test-pod", "namespace": "default", "labels": {"app": "suxing-test"},
            "annotations": {
                "kruise.io/sidecarset-hash": entry("c4k2dbb95d"),
                "kruise.io/sidecarset-hash-without-image": entry(""),
                "kruise.io/sidecarset-injected-list": "sidecarset1"
            }},
        "spec": {
            "initContainers": [
                {"name": "init-0", "image": "busybox:1.0.0"},
                {"name": "init-1", "image": "busybox:1.0.0", "env": [injected_env()]},
                {"name": "init-2", "image": "busybox:1.0.0", "env": [injected_env()]}
            ],
            "containers": [
                {"name": "dns-f", "image": "dns-f-image:1.0", "env": [injected_env()]},
                {"name": "nginx", "image": "nginx:1.15.1",
                    "env": [{"name": "hello1", "value": "world1"}, {"name": "hello2", "value": "world2"}],
                    "volumeMounts": [{"name": "volume-a", "mountPath": "/a/b"}, {"name": "volume-b", "mountPath": "/e/f"}]},
                {"name": "log-agent", "image": "log-agent-image:1.0", "env": [injected_env()]}
            ],
            "volumes": [{"name": "volume-a"}, {"name": "volume-b"}]
        }
    });
    assert_eq!(serde_json::to_value(&out.pod).unwrap(), expected);
    assert_eq!(out.matched, ["sidecarset1"]);
}

#[test]
fn golden_transfer_env_and_volumes() {
    // OpenKruise: TestSidecarSetTransferEnv + TestSidecarVolumesAppend.
    let mut s = sidecarset_with_transfer_env();
    s.spec.init_containers[0].pod_inject_policy = None;
    let out = run(&pod1(), None, &[s]);
    let v = serde_json::to_value(&out.pod).unwrap();
    let world2 = json!({"name": "hello2", "value": "world2"});
    assert_eq!(
        v["spec"]["initContainers"],
        json!([
            {"name": "init-0", "image": "busybox:1.0.0"},
            {"name": "dns-e", "image": "dns-e-image:1.0", "volumeMounts": [{"name": "volume-1", "mountPath": ""}],
             "env": [injected_env(), world2]}
        ])
    );
    assert_eq!(
        v["spec"]["containers"][0]["env"],
        json!([injected_env(), world2])
    );
    // Only the mounted sidecar volume is added, once, after the pod's own.
    assert_eq!(
        v["spec"]["volumes"],
        json!([{"name": "volume-a"}, {"name": "volume-b"}, {"name": "volume-1"}])
    );
}

#[test]
fn golden_two_sidecarsets_hot_upgrade_share_volumes_secrets_metadata() {
    let p = pod(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": "prod", "labels": {"app": "web"}},
        "spec": {
            "containers": [{"name": "app", "image": "app:1",
                "env": [{"name": "POD_NAME", "value": "bar"}, {"name": "LOG", "value": "/var/log"}],
                "volumeMounts": [{"name": "data", "mountPath": "/data", "subPathExpr": "x/$(POD_NAME)"}]}],
            "volumes": [{"name": "data", "emptyDir": {}}],
            "imagePullSecrets": [{"name": "pod-secret"}]
        }
    }));
    let logging = set(json!({
        "metadata": {"name": "a-logging", "annotations": {"kruise.io/sidecarset-hash": "h-a", "kruise.io/sidecarset-hash-without-image": "w-a"}},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "namespaceSelector": {"matchLabels": {"team": "a"}},
            "containers": [{"name": "log", "image": "log:1", "podInjectPolicy": "AfterAppContainer",
                "shareVolumePolicy": {"type": "enabled"},
                "transferEnv": [{"sourceContainerName": "app", "envName": "LOG"}],
                "volumeMounts": [{"name": "logs", "mountPath": "/logs"}]}],
            "volumes": [{"name": "logs", "emptyDir": {}}, {"name": "unused", "hostPath": {"path": "/x"}}],
            "imagePullSecrets": [{"name": "reg"}, {"name": "pod-secret"}]
        },
        "status": {"matchedPods": 0, "updatedPods": 0, "readyPods": 0, "latestRevision": "a-logging-rev"}
    }));
    let mesh = set(json!({
        "metadata": {"name": "z-mesh", "annotations": {"kruise.io/sidecarset-hash": "h-z", "kruise.io/sidecarset-hash-without-image": "w-z"}},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "prod"}},
            "initContainers": [{"name": "init-mesh", "image": "init:1"}],
            "containers": [{"name": "envoy", "image": "envoy:1", "podInjectPolicy": "BeforeAppContainer",
                "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1"}}],
            "patchPodMetadata": [{"annotations": {"mesh/enabled": "true"}, "patchPolicy": "Retain"}]
        }
    }));
    let ns_labels = BTreeMap::from([("team".to_string(), "a".to_string())]);
    let out = run(&p, Some(&ns_labels), &[logging, mesh]);
    // Namespace-scoped SidecarSets come first (OpenKruise lists that index first).
    assert_eq!(out.matched, ["z-mesh", "a-logging"]);
    let version_env = |c: &str| {
        json!([
            injected_env(),
            {"name": "SIDECARSET_VERSION", "valueFrom": {"fieldRef": {"fieldPath": format!("metadata.annotations['version.sidecarset.kruise.io/{c}']")}}},
            {"name": "SIDECARSET_VERSION_ALT", "valueFrom": {"fieldRef": {"fieldPath": format!("metadata.annotations['versionalt.sidecarset.kruise.io/{c}']")}}}
        ])
    };
    let expected = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": "prod", "labels": {"app": "web"},
            "annotations": {
                "mesh/enabled": "true",
                "kruise.io/sidecarset-hash": r#"{"a-logging":{"updateTimestamp":"2026-11-22T04:00:00Z","hash":"h-a","sidecarSetName":"a-logging","sidecarList":["log"],"controllerRevision":"a-logging-rev"},"z-mesh":{"updateTimestamp":"2026-11-22T04:00:00Z","hash":"h-z","sidecarSetName":"z-mesh","sidecarList":["envoy"]}}"#,
                "kruise.io/sidecarset-hash-without-image": r#"{"a-logging":{"updateTimestamp":"2026-11-22T04:00:00Z","hash":"w-a","sidecarSetName":"a-logging","sidecarList":["log"]},"z-mesh":{"updateTimestamp":"2026-11-22T04:00:00Z","hash":"w-z","sidecarSetName":"z-mesh","sidecarList":["envoy"]}}"#,
                "kruise.io/sidecarset-injected-list": "a-logging,z-mesh",
                "kruise.io/sidecarset-working-hotupgrade-container": r#"{"envoy":"envoy-1"}"#,
                "version.sidecarset.kruise.io/envoy-1": "1",
                "versionalt.sidecarset.kruise.io/envoy-1": "0",
                "version.sidecarset.kruise.io/envoy-2": "0",
                "versionalt.sidecarset.kruise.io/envoy-2": "1"
            }},
        "spec": {
            "initContainers": [{"name": "init-mesh", "image": "init:1", "env": [injected_env()]}],
            "containers": [
                {"name": "envoy-1", "image": "envoy:1", "env": version_env("envoy-1")},
                {"name": "envoy-2", "image": "empty:1", "env": version_env("envoy-2")},
                {"name": "app", "image": "app:1",
                    "env": [{"name": "POD_NAME", "value": "bar"}, {"name": "LOG", "value": "/var/log"}],
                    "volumeMounts": [{"name": "data", "mountPath": "/data", "subPathExpr": "x/$(POD_NAME)"}]},
                {"name": "log", "image": "log:1",
                    "env": [injected_env(), {"name": "LOG", "value": "/var/log"}, {"name": "POD_NAME", "value": "bar"}],
                    "volumeMounts": [{"name": "logs", "mountPath": "/logs"},
                                     {"name": "data", "mountPath": "/data", "subPathExpr": "x/$(POD_NAME)"}]}
            ],
            "volumes": [{"name": "data", "emptyDir": {}}, {"name": "logs", "emptyDir": {}}],
            "imagePullSecrets": [{"name": "pod-secret"}, {"name": "reg"}]
        }
    });
    assert_eq!(serde_json::to_value(&out.pod).unwrap(), expected);
}

#[test]
fn no_match_paused_empty_selector_and_namespace_mismatch_leave_pod_alone() {
    let p = pod1();
    let mut other = sidecar_set1();
    other.spec.selector =
        Some(serde_json::from_value(json!({"matchLabels": {"app": "doesnt-match"}})).unwrap());
    let mut paused = sidecar_set1();
    paused.spec.injection_strategy.paused = true;
    let mut empty = sidecar_set1();
    empty.spec.selector = Some(Default::default());
    let mut no_selector = sidecar_set1();
    no_selector.spec.selector = None;
    let mut other_ns = sidecar_set1();
    other_ns.spec.namespace_selector = Some(
        serde_json::from_value(
            json!({"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}),
        )
        .unwrap(),
    );
    let mut ns_label = sidecar_set1();
    ns_label.spec.namespace_selector =
        Some(serde_json::from_value(json!({"matchLabels": {"env": "prod"}})).unwrap());
    for s in [other, paused, empty, no_selector, other_ns, ns_label] {
        let out = run(&p, Some(&BTreeMap::new()), &[s]);
        assert_eq!(out.pod, p);
        assert!(out.matched.is_empty());
    }
    // Inactive pods are never injected.
    let mut done = pod1();
    done.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).unwrap());
    assert_eq!(run(&done, None, &[sidecar_set1()]).pod, done);
}

#[test]
fn namespace_selector_in_expression_and_metadata_name_label() {
    let mut s = sidecar_set1();
    s.spec.namespace_selector = Some(
        serde_json::from_value(json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["a", "default"]}]}))
            .unwrap(),
    );
    // The namespace label is implied even when the caller's labels lack it.
    let out = run(&pod1(), Some(&BTreeMap::new()), &[s.clone()]);
    assert_eq!(out.matched, ["sidecarset1"]);
    // Unknown namespace: a namespace-selecting SidecarSet does not match.
    assert!(run(&pod1(), None, &[s]).matched.is_empty());
}

#[test]
fn injected_list_and_hashes_with_two_sets() {
    // OpenKruise: TestSidecarSetNameInject / TestSidecarSetHashInject.
    let s3 = set(json!({
        "metadata": {"name": "sidecarset3", "annotations": {"kruise.io/sidecarset-hash": "gm967682cm"}},
        "spec": {"selector": {"matchLabels": {"app": "suxing-test"}},
                 "containers": [{"name": "dns-g", "image": "x", "podInjectPolicy": "AfterAppContainer"}]}
    }));
    let out = run(&pod1(), None, &[s3.clone(), sidecar_set1()]);
    let ann = out.pod.metadata.annotations.unwrap();
    assert_eq!(
        ann[SIDECARSET_INJECTED_LIST_ANNOTATION],
        "sidecarset1,sidecarset3"
    );
    let hashes = parse_hash_annotation("k", &ann[SIDECARSET_HASH_ANNOTATION]).unwrap();
    assert_eq!(hashes["sidecarset1"].hash, "c4k2dbb95d");
    assert_eq!(hashes["sidecarset3"].hash, "gm967682cm");
    // AfterApp containers keep SidecarSet order: sidecarset1's log-agent, then dns-g.
    let names: Vec<_> = out
        .pod
        .spec
        .unwrap()
        .containers
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["dns-f", "nginx", "log-agent", "dns-g"]);
}

#[test]
fn legacy_hash_annotation_is_upgraded() {
    // OpenKruise: TestPodSidecarSetHashCompatibility.
    let mut p = pod1();
    p.metadata.annotations = Some(BTreeMap::from([
        (
            SIDECARSET_HASH_ANNOTATION.to_string(),
            r#"{"sidecarset-test":"bv6d2"}"#.to_string(),
        ),
        (
            SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION.to_string(),
            r#"{"sidecarset-test":"54x59"}"#.to_string(),
        ),
    ]));
    let out = run(&p, None, &[sidecar_set1()]);
    let ann = out.pod.metadata.annotations.unwrap();
    assert!(ann[SIDECARSET_HASH_ANNOTATION].starts_with(
        r#"{"sidecarset-test":{"updateTimestamp":null,"hash":"bv6d2","sidecarSetName":"sidecarset-test","sidecarList":null},"sidecarset1":"#
    ));
    let mut bad = pod1();
    bad.metadata.annotations = Some(BTreeMap::from([(
        SIDECARSET_HASH_ANNOTATION.to_string(),
        "{not json".to_string(),
    )]));
    let err = inject(&InjectInput {
        pod: &bad,
        namespace_labels: None,
        sidecar_sets: &[sidecar_set1()],
        now: now(),
        random: 0.0,
        history: &NoHistory,
        sort_sidecar_containers_by_name: false,
    });
    assert!(matches!(err, Err(InjectError::BadHashAnnotation { .. })));
}

#[test]
fn same_name_container_replaced_in_place() {
    // OpenKruise: TestMergeSidecarContainers.
    let mut p = pod1();
    let spec = p.spec.as_mut().unwrap();
    spec.containers
        .push(serde_json::from_value(json!({"name": "log-agent", "image": "old"})).unwrap());
    spec.containers
        .push(serde_json::from_value(json!({"name": "last", "image": "l"})).unwrap());
    let out = run(&p, None, &[sidecar_set1()]);
    let cs = out.pod.spec.unwrap().containers;
    let names: Vec<_> = cs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["dns-f", "nginx", "log-agent", "last"]);
    assert_eq!(cs[2].image.as_deref(), Some("log-agent-image:1.0"));
}

#[test]
fn canary_replaces_its_base() {
    let base = sidecar_set1();
    let mut canary = sidecar_set1();
    canary.metadata.name = Some("sidecarset1-canary".into());
    canary.metadata.annotations = Some(BTreeMap::from([
        (SIDECARSET_CANARY_ANNOTATION.to_string(), "true".to_string()),
        (
            SIDECARSET_BASE_ANNOTATION.to_string(),
            "sidecarset1".to_string(),
        ),
    ]));
    canary.spec.containers[0].container.image = Some("dns-f-image:2.0".into());
    let out = run(&pod1(), None, &[base, canary]);
    assert_eq!(out.matched, ["sidecarset1-canary"]);
    let cs = out.pod.spec.unwrap().containers;
    assert_eq!(cs[0].image.as_deref(), Some("dns-f-image:2.0"));
}

#[test]
fn patch_pod_metadata_policies() {
    let mut ann = BTreeMap::from([
        ("keep".to_string(), "old".to_string()),
        ("over".to_string(), "old".to_string()),
        ("merge".to_string(), r#"{"log-agent":1}"#.to_string()),
    ]);
    let patches: Vec<SidecarSetPatchPodMetadata> = serde_json::from_value(json!([
        {"annotations": {"keep": "new", "added": "a"}, "patchPolicy": "Retain"},
        {"annotations": {"over": "new"}, "patchPolicy": "Overwrite"},
        {"annotations": {"merge": r#"{"envoy":2}"#, "fresh": r#"{"x":1}"#}, "patchPolicy": "MergePatchJson"}
    ]))
    .unwrap();
    assert!(patch_pod_metadata(&mut ann, &patches, "s").unwrap());
    assert_eq!(ann["keep"], "old");
    assert_eq!(ann["added"], "a");
    assert_eq!(ann["over"], "new");
    assert_eq!(ann["merge"], r#"{"envoy":2,"log-agent":1}"#);
    assert_eq!(ann["fresh"], r#"{"x":1}"#);
    assert!(!patch_pod_metadata(&mut ann, &patches[..1], "s").unwrap());
    let mut bad = BTreeMap::from([("merge".to_string(), "not json".to_string())]);
    assert!(patch_pod_metadata(&mut bad, &patches[2..], "s").is_err());
}

#[test]
fn transfer_env_from_label_field_ref() {
    let mut p = pod1();
    p.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("source".into(), "nginx".into());
    let s = set(json!({
        "metadata": {"name": "s"},
        "spec": {"selector": {"matchLabels": {"app": "suxing-test"}},
            "containers": [{"name": "c", "image": "i", "transferEnv": [
                {"sourceContainerNameFrom": {"fieldRef": {"fieldPath": "metadata.labels['source']"}}, "envNames": ["hello2", "hello1", "missing"]},
                {"sourceContainerNameFrom": {"fieldRef": {"fieldPath": "metadata.name"}}, "envName": "hello1"}
            ]}]}
    }));
    let out = run(&p, None, &[s]);
    let c = &out.pod.spec.unwrap().containers[1];
    let names: Vec<_> = c.env.iter().flatten().map(|e| e.name.as_str()).collect();
    // envNames are taken in sorted order; metadata.name is not a supported source.
    assert_eq!(names, ["IS_INJECTED", "hello1", "hello2"]);
}

#[test]
fn native_sidecar_init_container_is_in_sidecar_list_and_hot_upgraded() {
    let s = set(json!({
        "metadata": {"name": "s", "annotations": {"kruise.io/sidecarset-hash": "h"}},
        "spec": {"selector": {"matchLabels": {"app": "suxing-test"}},
            "updateStrategy": {"type": "NotUpdate"},
            "initContainers": [{"name": "proxy", "image": "p:1", "restartPolicy": "Always",
                "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "e"}}]}
    }));
    let out = run(&pod1(), None, &[s]);
    let spec = out.pod.spec.unwrap();
    let init: Vec<_> = spec
        .init_containers
        .unwrap()
        .into_iter()
        .map(|c| (c.name, c.image))
        .collect();
    assert_eq!(
        init,
        [
            ("init-0".to_string(), Some("busybox:1.0.0".to_string())),
            ("proxy-1".to_string(), Some("p:1".to_string())),
            ("proxy-2".to_string(), Some("e".to_string()))
        ]
    );
    let ann = out.pod.metadata.annotations.unwrap();
    let hashes = parse_hash_annotation("k", &ann[SIDECARSET_HASH_ANNOTATION]).unwrap();
    assert_eq!(hashes["s"].sidecar_list, Some(vec!["proxy".to_string()]));
    assert_eq!(
        ann[SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION],
        r#"{"proxy":"proxy-1"}"#
    );
}

struct OldRevision;

impl RevisionHistory for OldRevision {
    fn history_sidecar_set(
        &self,
        set: &SidecarSet,
        _: &SidecarSetInjectRevision,
    ) -> Result<Option<SidecarSet>, String> {
        let mut old = set.clone();
        old.spec.containers[0].container.image = Some("dns-f-image:0.9".into());
        Ok(Some(old))
    }
}

#[test]
fn injection_revision_policies() {
    let image = |out: &Injection| {
        out.pod.spec.as_ref().unwrap().containers[0]
            .image
            .clone()
            .unwrap()
    };
    let mut s = sidecar_set1();
    s.spec.injection_strategy.revision =
        Some(serde_json::from_value(json!({"revisionName": "r1", "policy": "Always"})).unwrap());
    assert_eq!(
        image(&run_with(&pod1(), None, &[s.clone()], 0.9, &OldRevision)),
        "dns-f-image:0.9"
    );
    // Partial: pods outside updateStrategy.selector get the old revision ...
    s.spec.injection_strategy.revision.as_mut().unwrap().policy =
        Some(SidecarSetInjectRevisionPolicy::Partial);
    s.spec.update_strategy.selector =
        Some(serde_json::from_value(json!({"matchLabels": {"canary": "true"}})).unwrap());
    assert_eq!(
        image(&run_with(&pod1(), None, &[s.clone()], 0.9, &OldRevision)),
        "dns-f-image:0.9"
    );
    // ... selected pods: old with probability = percent partition.
    s.spec.update_strategy.selector = None;
    s.spec.update_strategy.partition = Some(IntOrString::String("30%".into()));
    assert_eq!(
        image(&run_with(&pod1(), None, &[s.clone()], 0.2, &OldRevision)),
        "dns-f-image:0.9"
    );
    assert_eq!(
        image(&run_with(&pod1(), None, &[s.clone()], 0.5, &OldRevision)),
        "dns-f-image:1.0"
    );
    s.spec.update_strategy.partition = Some(IntOrString::Int(3));
    assert_eq!(
        image(&run_with(&pod1(), None, &[s.clone()], 0.0, &OldRevision)),
        "dns-f-image:1.0"
    );
    // Paused updates always inject the given revision.
    s.spec.update_strategy.paused = true;
    assert_eq!(
        image(&run_with(&pod1(), None, &[s.clone()], 0.9, &OldRevision)),
        "dns-f-image:0.9"
    );
    // Without history the latest is injected.
    assert_eq!(
        image(&run_with(&pod1(), None, &[s], 0.9, &NoHistory)),
        "dns-f-image:1.0"
    );
}

#[test]
fn sort_by_name_gate_and_go_escaping() {
    let mut s = sidecar_set1();
    s.spec.containers[1].pod_inject_policy = Some(PodInjectPolicy::BeforeAppContainer);
    s.spec.containers.swap(0, 1);
    let p = pod1();
    let out = inject(&InjectInput {
        pod: &p,
        namespace_labels: None,
        sidecar_sets: &[s],
        now: now(),
        random: 0.0,
        history: &NoHistory,
        sort_sidecar_containers_by_name: true,
    })
    .unwrap();
    let names: Vec<_> = out
        .pod
        .spec
        .unwrap()
        .containers
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["dns-f", "log-agent", "nginx"]);
    assert_eq!(
        go_marshal(&json!({"a": "<&>"})).unwrap(),
        r#"{"a":"\u003c\u0026\u003e"}"#
    );
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-3i64..300).prop_map(Value::from),
        prop_oneof![
            Just("app"),
            Just("nginx"),
            Just("Always"),
            Just("HotUpgrade"),
            Just("enabled"),
            Just("BeforeAppContainer"),
            Just("metadata.labels['app']"),
            Just("$(A)"),
            Just("In"),
            Just("x%"),
        ]
        .prop_map(Value::from),
        "[a-z0-9$()%.'\\[\\]-]{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(
                prop_oneof![
                    Just("name"),
                    Just("image"),
                    Just("env"),
                    Just("value"),
                    Just("containers"),
                    Just("initContainers"),
                    Just("volumeMounts"),
                    Just("mountPath"),
                    Just("subPathExpr"),
                    Just("selector"),
                    Just("matchLabels"),
                    Just("labels"),
                    Just("annotations"),
                    Just("upgradeStrategy"),
                    Just("upgradeType"),
                    Just("shareVolumePolicy"),
                    Just("type"),
                    Just("transferEnv"),
                    Just("envName"),
                    Just("sourceContainerName"),
                    Just("volumes"),
                    Just("restartPolicy"),
                    Just("patchPodMetadata"),
                    Just("patchPolicy"),
                    Just("namespaceSelector"),
                    Just("matchExpressions"),
                    Just("key"),
                    Just("operator"),
                    Just("values"),
                ]
                .prop_map(str::to_string),
                inner,
                0..6,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    #[test]
    fn arbitrary_pods_and_sidecarsets_never_panic(pod_v in arb_json(), spec in arb_json(), meta in arb_json()) {
        let pod_obj = json!({"metadata": {"name": "p", "labels": {"app": "nginx"}}, "spec": pod_v});
        let set_obj = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
            "metadata": {"name": "s", "annotations": meta}, "spec": spec});
        if let (Ok(p), Ok(s)) = (serde_json::from_value::<Pod>(pod_obj), serde_json::from_value::<SidecarSet>(set_obj)) {
            let _ = inject(&InjectInput {
                pod: &p, namespace_labels: None, sidecar_sets: &[s], now: now(), random: 0.5,
                history: &NoHistory, sort_sidecar_containers_by_name: false,
            });
        }
    }

    #[test]
    fn injection_is_well_formed(n_app in 1usize..4, share in any::<bool>(), hot in any::<bool>(), after in any::<bool>()) {
        let containers: Vec<Value> = (0..n_app).map(|i| json!({"name": format!("app{i}"), "image": "a",
            "env": [{"name": "E", "value": format!("{i}")}],
            "volumeMounts": [{"name": "v", "mountPath": format!("/m{i}")}]})).collect();
        let p = pod(json!({"metadata": {"name": "p", "labels": {"app": "x"}}, "spec": {"containers": containers,
            "volumes": [{"name": "v", "emptyDir": {}}]}}));
        let mut sidecar = json!({"name": "side", "image": "s",
            "podInjectPolicy": if after { "AfterAppContainer" } else { "BeforeAppContainer" },
            "transferEnv": [{"sourceContainerName": "app0", "envName": "E"}],
            "volumeMounts": [{"name": "v", "mountPath": "/m0"}]});
        if share { sidecar["shareVolumePolicy"] = json!({"type": "enabled"}); }
        if hot { sidecar["upgradeStrategy"] = json!({"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "e"}); }
        let s = set(json!({"metadata": {"name": "s"}, "spec": {"selector": {"matchLabels": {"app": "x"}},
            "containers": [sidecar], "volumes": [{"name": "v", "hostPath": {"path": "/"}}]}}));
        let out = run(&p, None, &[s]);
        let spec = out.pod.spec.unwrap();
        let injected = if hot { 2 } else { 1 };
        prop_assert_eq!(spec.containers.len(), n_app + injected);
        let names: BTreeSet<_> = spec.containers.iter().map(|c| c.name.clone()).collect();
        prop_assert_eq!(names.len(), spec.containers.len());
        for c in spec.containers.iter().filter(|c| c.name.starts_with("side")) {
            // Pod volume of the same name wins; mount paths stay unique.
            let paths: Vec<_> = c.volume_mounts.iter().flatten().map(|m| m.mount_path.clone()).collect();
            let unique: BTreeSet<_> = paths.iter().collect();
            prop_assert_eq!(unique.len(), paths.len());
            prop_assert_eq!(paths.len(), if share { n_app } else { 1 });
            prop_assert!(is_injected_container(c));
        }
        prop_assert_eq!(spec.volumes.unwrap().len(), 1);
    }
}

/// OpenKruise's SidecarSet walkthrough (docs: test-sidecarset with sidecar1 into app=nginx),
/// through the defaulting webhook first, as on a cluster.
#[test]
fn golden_openkruise_walkthrough() {
    let mut s = set(json!({
        "metadata": {"name": "test-sidecarset"},
        "spec": {
            "selector": {"matchLabels": {"app": "nginx"}},
            "updateStrategy": {"type": "RollingUpdate", "maxUnavailable": 1},
            "containers": [{"name": "sidecar1", "image": "centos:6.7", "command": ["sleep", "999d"],
                "volumeMounts": [{"name": "log-volume", "mountPath": "/var/log"}]}],
            "volumes": [{"name": "log-volume", "emptyDir": {}}]
        }
    }));
    crate::api::defaults::default_v1beta1(&mut s).unwrap();
    let ann = s.metadata.annotations.clone().unwrap();
    let p = pod(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "test-pod", "namespace": "default", "labels": {"app": "nginx"}},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.15.1"}]}
    }));
    let out = run(&p, Some(&BTreeMap::new()), &[s]);
    let entry = |hash: &str| {
        format!(
            r#"{{"test-sidecarset":{{"updateTimestamp":"2026-11-22T04:00:00Z","hash":"{hash}","sidecarSetName":"test-sidecarset","sidecarList":["sidecar1"]}}}}"#
        )
    };
    let expected = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "test-pod", "namespace": "default", "labels": {"app": "nginx"},
            "annotations": {
                "kruise.io/sidecarset-hash": entry(&ann[SIDECARSET_HASH_ANNOTATION]),
                "kruise.io/sidecarset-hash-without-image": entry(&ann[SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION]),
                "kruise.io/sidecarset-injected-list": "test-sidecarset"
            }},
        "spec": {
            "containers": [
                {"name": "sidecar1", "image": "centos:6.7", "command": ["sleep", "999d"],
                 "env": [injected_env()],
                 "volumeMounts": [{"name": "log-volume", "mountPath": "/var/log"}],
                 "imagePullPolicy": "IfNotPresent",
                 "terminationMessagePath": "/dev/termination-log",
                 "terminationMessagePolicy": "File"},
                {"name": "app", "image": "nginx:1.15.1"}
            ],
            "volumes": [{"name": "log-volume", "emptyDir": {}}]
        }
    });
    assert_eq!(serde_json::to_value(&out.pod).unwrap(), expected);
}

/// `resourcesPolicy` on a native-sidecar init container and on a hot-upgrade container: both
/// pod containers of the hot-upgrade pair get the computed resources, the sidecars of every
/// matched SidecarSet (here `other`'s `helper`, already in the pod) are no targets.
#[test]
fn resources_policy_for_init_and_hot_upgrade_sidecars() {
    let policy = |expr: Value| {
        json!({"targetContainersMode": "sum", "targetContainersNameRegex": ".*",
               "resourcesExpr": {"limits": expr}})
    };
    let mesh = set(json!({
        "metadata": {"name": "mesh"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "initContainers": [{"name": "log-agent", "image": "fluent:1", "restartPolicy": "Always",
                "resourcesPolicy": policy(json!({"memory": "memory/2"}))}],
            "containers": [{"name": "proxy", "image": "envoy:1", "podInjectPolicy": "AfterAppContainer",
                "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1"},
                "resourcesPolicy": policy(json!({"cpu": "cpu + 100m"}))}]
        }
    }));
    let other = set(json!({
        "metadata": {"name": "other"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "containers": [{"name": "helper", "image": "helper:1"}]}
    }));
    let p = pod(json!({
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [
            {"name": "main", "image": "app:1", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
            {"name": "helper", "image": "helper:1", "resources": {"limits": {"cpu": "8", "memory": "8Gi"}}}
        ]}
    }));
    let out = run(&p, None, &[mesh, other]);
    let spec = out.pod.spec.unwrap();
    let limits = |c: &k8s_openapi::api::core::v1::Container| {
        serde_json::to_value(&c.resources.as_ref().unwrap().limits).unwrap()
    };
    let init = spec.init_containers.unwrap();
    assert_eq!(init[0].name, "log-agent");
    assert_eq!(limits(&init[0]), json!({"memory": "512Mi"}));
    for name in ["proxy-1", "proxy-2"] {
        let c = spec.containers.iter().find(|c| c.name == name).unwrap();
        assert_eq!(limits(c), json!({"cpu": "1100m"}), "{name}");
    }
}
