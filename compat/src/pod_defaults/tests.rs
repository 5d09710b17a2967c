use serde_json::{Value, json};

use super::{
    PodDefaultsOptions, TemplateDefaults, default_pod_template, default_volume_claim_template,
    go_encoded_pod_template, image_tag_is_latest,
};

fn defaulted(mut template: Value) -> Value {
    default_pod_template(&mut template, PodDefaultsOptions::default());
    template
}

/// OpenKruise's `config/samples` CloneSet template, defaulted as OpenKruise's webhook
/// defaults it (expected value printed by Go: OpenKruise's `SetDefaultPodSpec` steps with
/// k8s.io/kubernetes v1.32.10, the version OpenKruise builds with).
#[test]
fn sample_template_gets_openkruises_defaults() {
    let template = json!({
        "metadata": {"labels": {"app": "sample"}},
        "spec": {"containers": [{"name": "main", "image": "nginx:alpine"}]}
    });
    assert_eq!(
        defaulted(template),
        json!({
            "metadata": {"labels": {"app": "sample"}},
            "spec": {
                "containers": [{
                    "name": "main",
                    "image": "nginx:alpine",
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "Always"
                }],
                "restartPolicy": "Always",
                "terminationGracePeriodSeconds": 30,
                "dnsPolicy": "ClusterFirst",
                "securityContext": {},
                "schedulerName": "default-scheduler"
            }
        })
    );
}

/// Every defaulted field at once; the expectation is Go's output for the same input
/// (see above), as Go encodes it ([`go_encoded_pod_template`]).
#[test]
fn rich_template_gets_openkruises_defaults() {
    let template: Value = serde_json::from_str(include_str!("rich_template.json")).unwrap();
    let expected: Value =
        serde_json::from_str(include_str!("rich_template.openkruise.json")).unwrap();
    let ours = go_encoded_pod_template(&defaulted(template));
    assert_eq!(ours, expected);
}

/// Pod-level resources are only re-encoded (no milli round-up), and an ephemeral volume's
/// claim template is written as Go writes it; expected: Go's output (see above).
#[test]
fn pod_resources_and_ephemeral_claims_as_go_encodes_them() {
    let template = json!({"spec": {
        "resources": {"limits": {"cpu": "0.0001", "memory": "1024Mi"}},
        "containers": [{"name": "a", "image": "b"}],
        "volumes": [{"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1024Mi"}}}}}}]
    }});
    let spec = go_encoded_pod_template(&defaulted(template))["spec"].clone();
    assert_eq!(
        spec["resources"],
        json!({"limits": {"cpu": "100u", "memory": "1Gi"}})
    );
    assert_eq!(
        spec["volumes"][0]["ephemeral"]["volumeClaimTemplate"],
        json!({"metadata": {"creationTimestamp": null}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    );
}

#[test]
fn defaulting_twice_changes_nothing() {
    let template: Value = serde_json::from_str(include_str!("rich_template.json")).unwrap();
    let once = defaulted(template);
    assert_eq!(defaulted(once.clone()), once);
}

#[test]
fn host_ports_follow_container_ports_only_with_the_gate() {
    let template = json!({"spec": {"hostNetwork": true, "containers": [
        {"name": "a", "image": "x:1", "ports": [{"containerPort": 80}, {"containerPort": 81, "hostPort": 9081}]}
    ], "initContainers": [{"name": "i", "image": "x:1", "ports": [{"containerPort": 82}]}]}});
    let host_ports = |t: &Value, list: &str| -> Vec<Value> {
        t["spec"][list][0]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.get("hostPort").cloned().unwrap_or(Value::Null))
            .collect()
    };
    let without = defaulted(template.clone());
    assert_eq!(
        host_ports(&without, "containers"),
        [Value::Null, json!(9081)]
    );
    let mut with = template;
    default_pod_template(
        &mut with,
        PodDefaultsOptions {
            host_network_host_ports: true,
        },
    );
    assert_eq!(host_ports(&with, "containers"), [json!(80), json!(9081)]);
    assert_eq!(host_ports(&with, "initContainers"), [json!(82)]);
}

#[test]
fn unknown_fields_and_unknown_volume_sources_stay() {
    let template = json!({"spec": {
        "futurePodField": {"x": 1},
        "containers": [{"name": "a", "image": "x:1", "futureContainerField": true}],
        "volumes": [{"name": "v", "futureVolumeSource": {"a": "b"}}]
    }});
    let out = defaulted(template);
    assert_eq!(out["spec"]["futurePodField"], json!({"x": 1}));
    assert_eq!(
        out["spec"]["containers"][0]["futureContainerField"],
        json!(true)
    );
    assert_eq!(
        out["spec"]["volumes"][0],
        json!({"name": "v", "futureVolumeSource": {"a": "b"}})
    );
}

/// OpenKruise calls `SetDefaults_PersistentVolumeClaim` (the phase), not
/// `SetDefaults_PersistentVolumeClaimSpec` (no `volumeMode`).
#[test]
fn claim_templates_get_pending_phase_and_canonical_quantities() {
    let mut claim = json!({
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1024Mi"}, "limits": {"storage": "0.5Ti"}}}
    });
    default_volume_claim_template(&mut claim);
    assert_eq!(
        claim,
        json!({
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}, "limits": {"storage": "512Gi"}}},
            "status": {"phase": "Pending"}
        })
    );
}

/// Expected: Kubernetes' `parsers.ParseImageName` (v1.32.10) gives the tag `latest`.
#[test]
fn pull_policy_by_tag_as_parse_image_name_reads_it() {
    let digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    for (image, latest) in [
        ("nginx", true),
        ("nginx:latest", true),
        ("nginx:1.25", false),
        ("docker.io/library/nginx", true),
        ("registry.example.com:5000/team/app", true),
        ("registry.example.com:5000/team/app:v2", false),
        ("localhost/app", true),
        ("[::1]:5000/app:latest", true),
        (&format!("nginx@{digest}"), false),
        (&format!("nginx:latest@{digest}"), true),
        ("nginx@sha256:short", false),
        ("Nginx", false),
        ("nginx:", false),
        ("", false),
        ("my_registry/app", true),
        ("a--b/c__d.e", true),
        ("a/-b", false),
        (
            "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            false,
        ),
        ("BusyBox:latest", false),
        ("Registry.io/app", true),
        ("UPPER/app:latest", true),
        ("my_host.com/nginx", true),
        ("nginx@SHA256:0123", false),
        ("a.b_c", true),
        ("a___b", false),
        ("host:port/app", false),
        ("nginx:latest ", false),
    ] {
        assert_eq!(image_tag_is_latest(image), latest, "image {image:?}");
    }
}

mod properties {
    use proptest::prelude::*;
    use serde_json::{Map, Value, json};

    use super::super::{
        PodDefaultsOptions, default_pod_template, default_volume_claim_template,
        go_encoded_pod_template,
    };
    use crate::quantity::{canonical_milli_quantity, canonical_quantity};

    /// JSON shaped like a pod template: the field names the defaults look at, with values
    /// of any type (a field of the wrong type must be left alone, never panic).
    fn arb_template() -> impl Strategy<Value = Value> {
        let keys = prop::sample::select(vec![
            "spec",
            "containers",
            "initContainers",
            "ephemeralContainers",
            "volumes",
            "ports",
            "env",
            "valueFrom",
            "fieldRef",
            "resourceFieldRef",
            "resources",
            "limits",
            "requests",
            "livenessProbe",
            "httpGet",
            "lifecycle",
            "preStop",
            "image",
            "imagePullPolicy",
            "hostNetwork",
            "hostPort",
            "containerPort",
            "secret",
            "projected",
            "sources",
            "serviceAccountToken",
            "downwardAPI",
            "items",
            "hostPath",
            "emptyDir",
            "sizeLimit",
            "ephemeral",
            "volumeClaimTemplate",
            "metadata",
            "name",
            "overhead",
            "cpu",
            "future",
        ]);
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (0i64..5000).prop_map(|i| json!(i)),
            "[0-9]{1,4}(\\.[0-9]{1,3})?(m|Ki|Mi|Gi|k|e3|u)?".prop_map(Value::String),
            "[a-z:@./]{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 64, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                prop::collection::vec((keys.clone(), inner), 0..6).prop_map(|kv| {
                    Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
                }),
            ]
        })
    }

    /// Whether `v` holds nothing: `null`, `[]`, or an object whose every field holds
    /// nothing (`{}`, `{"spec": null}`), which Go's `omitempty` may leave out when it
    /// writes the template back.
    fn holds_nothing(v: &Value) -> bool {
        match v {
            Value::Null => true,
            Value::Array(a) => a.is_empty(),
            Value::Object(m) => m.values().all(holds_nothing),
            _ => false,
        }
    }

    /// Every field's path, but those holding nothing.
    fn keys(v: &Value, at: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => m
                .iter()
                .filter(|(_, c)| !holds_nothing(c))
                .for_each(|(k, c)| {
                    out.push(format!("{at}/{k}"));
                    keys(c, &format!("{at}/{k}"), out);
                }),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .for_each(|(i, c)| keys(c, &format!("{at}/{i}"), out)),
            _ => {}
        }
    }

    proptest! {
        /// Defaulting and encoding are idempotent and never remove a field that holds
        /// something.
        #[test]
        fn defaults_are_idempotent_and_keep_every_field(template in arb_template(), gate in any::<bool>()) {
            let options = PodDefaultsOptions { host_network_host_ports: gate };
            let mut once = template.clone();
            default_pod_template(&mut once, options);
            let encoded = go_encoded_pod_template(&once);
            let mut twice = encoded.clone();
            default_pod_template(&mut twice, options);
            prop_assert_eq!(go_encoded_pod_template(&twice), encoded.clone());
            let (mut before, mut after) = (Vec::new(), Vec::new());
            keys(&template, "", &mut before);
            keys(&encoded, "", &mut after);
            for key in before {
                prop_assert!(after.contains(&key), "{} removed", key);
            }
            let mut claim = Value::Object(Map::from_iter([("spec".to_string(), template)]));
            default_volume_claim_template(&mut claim);
            let mut again = claim.clone();
            default_volume_claim_template(&mut again);
            prop_assert_eq!(again, claim);
        }

        /// A canonical quantity is its own canonical form.
        #[test]
        fn canonical_quantities_are_fixed_points(q in "[+-]?[0-9]{1,6}(\\.[0-9]{1,9})?(n|u|m|k|M|G|T|Ki|Mi|Gi|Ti|e[0-9]|E-[0-9])?") {
            for canonical in [canonical_milli_quantity, canonical_quantity] {
                if let Some(c) = canonical(&q) {
                    prop_assert_eq!(canonical(&c), Some(c.clone()), "{} -> {}", q, c);
                }
            }
        }
    }
}

/// Go's `omitempty` when OpenKruise's webhook writes the template back, found by the
/// differential test against OpenKruise (cloneset/tests/openkruise_oracle.rs): empty maps,
/// empty lists and nulls go, struct fields (`emptyDir: {}`) and `containers` stay.
#[test]
fn empty_maps_lists_and_nulls_are_not_written_back() {
    let encoded = go_encoded_pod_template(&json!({
        "metadata": {"labels": {}},
        "spec": {
            "containers": [{"name": "a", "image": "b", "args": [], "securityContext": null,
                            "resources": {"limits": {}}}],
            "volumes": [{"name": "v", "emptyDir": {}}]
        }
    }));
    assert_eq!(
        encoded,
        json!({
            "metadata": {"creationTimestamp": null},
            "spec": {
                "containers": [{"name": "a", "image": "b", "resources": {}}],
                "volumes": [{"name": "v", "emptyDir": {}}]
            }
        })
    );
}

/// A template no default touched (a DaemonSet's), as Go writes it back, found by the
/// differential test against OpenKruise (daemonset/tests/openkruise_oracle.rs): container
/// quantities canonical (not rounded to milli-units), a probe's 0 numbers not written.
#[test]
fn undefaulted_quantities_are_canonical_and_zero_probe_numbers_go() {
    let encoded = go_encoded_pod_template(&json!({
        "spec": {"containers": [{"name": "a", "image": "b",
            "resources": {"requests": {"cpu": "1.5u", "memory": "0.5Gi"}},
            "startupProbe": {"exec": {"command": ["true"]}, "failureThreshold": 0,
                             "periodSeconds": 4}}]}
    }));
    assert_eq!(
        encoded["spec"]["containers"][0],
        json!({"name": "a", "image": "b",
               "resources": {"requests": {"cpu": "1500n", "memory": "512Mi"}},
               "startupProbe": {"exec": {"command": ["true"]}, "periodSeconds": 4}})
    );
}

/// Go's `omitempty` on scalar fields: an explicit `false`, `0` or `""` a manifest spells out
/// is not written back (`hostNetwork`, a container's `stdin`, a port's `hostPort`, a volume
/// mount's `readOnly`), but a pointer field (`*bool`: `shareProcessNamespace`,
/// `enableServiceLinks`) and a field without `omitempty` (`containerPort`) keep theirs; a
/// label or a map key named like a field is data, kept.
#[test]
fn zero_values_of_omitempty_scalars_are_not_written_back() {
    let encoded = go_encoded_pod_template(&json!({
        "metadata": {"labels": {"hostNetwork": ""}},
        "spec": {
            "hostNetwork": false, "hostIPC": false, "serviceAccountName": "",
            "shareProcessNamespace": false, "enableServiceLinks": false,
            "nodeSelector": {"stdin": ""},
            "containers": [{"name": "a", "image": "b", "stdin": false, "tty": false,
                            "workingDir": "", "ports": [{"containerPort": 0, "hostPort": 0, "name": ""}],
                            "volumeMounts": [{"name": "v", "mountPath": "/v", "readOnly": false}]}],
            "volumes": [{"name": "v", "hostPath": {"path": "/v", "type": ""}}]
        }
    }));
    assert_eq!(
        encoded,
        json!({
            "metadata": {"creationTimestamp": null, "labels": {"hostNetwork": ""}},
            "spec": {
                "shareProcessNamespace": false, "enableServiceLinks": false,
                "nodeSelector": {"stdin": ""},
                "containers": [{"name": "a", "image": "b", "resources": {},
                                "ports": [{"containerPort": 0}],
                                "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
                "volumes": [{"name": "v", "hostPath": {"path": "/v", "type": ""}}]
            }
        })
    );
}

#[test]
fn templates_are_defaulted_on_create_and_on_an_update_that_changes_them() {
    let on = TemplateDefaults::default();
    let off = TemplateDefaults {
        enabled: false,
        ..on
    };
    let template = |image: &str| json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": image}]}}, "replicas": 1}});
    let object = template("nginx:1");
    let mut scaled = object.clone();
    scaled["spec"]["replicas"] = json!(3);
    assert_eq!(on.for_request(&object, None), Some(on.pod), "CREATE");
    assert_eq!(off.for_request(&object, None), None, "TemplateNoDefaults");
    assert_eq!(
        on.for_request(&object, Some(&template("nginx:2"))),
        Some(on.pod),
        "UPDATE of the template"
    );
    assert_eq!(
        on.for_request(&scaled, Some(&object)),
        None,
        "UPDATE of anything else"
    );
}
