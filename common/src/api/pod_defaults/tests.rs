use serde_json::{Value, json};

use super::{
    PodDefaultsOptions, default_pod_template, default_volume_claim_template,
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
