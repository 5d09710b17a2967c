use super::*;
use serde_json::json;

/// The errors for a pod spec, as kube-apiserver prints them.
fn errors_of(spec: serde_json::Value) -> Vec<String> {
    let spec: PodSpec = serde_json::from_value(spec).unwrap();
    validate_pod_spec(&spec, &Path::new("spec"))
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// A pod spec of one container `c` with `container` merged into it, and `extra` merged
/// into the spec.
fn spec_with(container: serde_json::Value, extra: serde_json::Value) -> serde_json::Value {
    let mut c = json!({"name": "c", "image": "nginx"});
    c.as_object_mut()
        .unwrap()
        .extend(container.as_object().unwrap().clone());
    let mut spec = json!({"containers": [c]});
    spec.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    spec
}

#[test]
fn a_full_valid_spec_with_fields_left_to_defaulting_has_no_errors() {
    let spec = spec_with(
        json!({
            "ports": [{"name": "http", "containerPort": 80}, {"containerPort": 53, "protocol": "UDP", "hostPort": 53}],
            "env": [{"name": "my.env-name 1", "value": "x"}, {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "TIER", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['tier']"}}}],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "cfg", "mountPath": "/etc/cfg", "subPath": "a/b"}],
            "resources": {"limits": {"cpu": "1", "memory": "1Gi", "example.com/gpu": "2"},
                          "requests": {"cpu": "500m", "memory": "1Gi", "example.com/gpu": "2"}},
            "livenessProbe": {"httpGet": {"port": "http"}, "periodSeconds": 0, "successThreshold": 1},
            "readinessProbe": {"tcpSocket": {"port": 80}},
            "startupProbe": {"exec": {"command": ["true"]}},
            "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
        }),
        json!({
            "volumes": [{"name": "data", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "cfg"}}],
            "initContainers": [{"name": "init", "image": "busybox"},
                               {"name": "sidecar", "image": "envoy", "restartPolicy": "Always", "readinessProbe": {"grpc": {"port": 9000}}}],
            "restartPolicy": "Always",
            "dnsPolicy": "None",
            "dnsConfig": {"nameservers": ["1.1.1.1"]},
        }),
    );
    assert_eq!(errors_of(spec), Vec::<String>::new());
}

#[test]
fn volumes_need_a_unique_dns_label_name_and_exactly_one_source() {
    let errors = errors_of(spec_with(
        json!({"volumeMounts": [{"name": "none", "mountPath": "/a"}, {"name": "ok", "mountPath": "/a"}, {"name": "missing", "mountPath": "/b"}]}),
        json!({"volumes": [
            {"name": "none"},
            {"name": "two", "emptyDir": {}, "secret": {"secretName": "s"}, "downwardAPI": {}},
            {"name": "Bad_Name", "emptyDir": {}},
            {"name": "ok", "emptyDir": {}},
            {"name": "ok", "hostPath": {"path": ""}},
            {"name": "pvc", "persistentVolumeClaim": {"claimName": ""}},
        ]}),
    ));
    assert_eq!(
        errors,
        vec![
            "spec.volumes[0]: Required value: must specify a volume type".to_string(),
            "spec.volumes[1].secret: Forbidden: may not specify more than 1 volume type".into(),
            "spec.volumes[1].downwarAPI: Forbidden: may not specify more than 1 volume type".into(),
            format!("spec.volumes[2].name: Invalid value: \"Bad_Name\": {DNS1123_LABEL_MESSAGE}"),
            "spec.volumes[4].hostPath.path: Required value".into(),
            "spec.volumes[4].name: Duplicate value: \"ok\"".into(),
            "spec.volumes[5].persistentVolumeClaim.claimName: Required value".into(),
            // A mount of a volume that is itself invalid is not found either.
            "spec.containers[0].volumeMounts[0].name: Not found: \"none\"".into(),
            "spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/a\": must be unique"
                .into(),
            "spec.containers[0].volumeMounts[2].name: Not found: \"missing\"".into(),
        ]
    );
}

#[test]
fn ports_are_checked_for_range_protocol_and_unique_iana_names() {
    let errors = errors_of(spec_with(
        json!({"ports": [
            {"name": "http", "containerPort": 80},
            {"name": "http", "containerPort": 81},
            {"name": "a-very-long-port-name", "containerPort": 70000, "protocol": "ICMP"},
            {"name": "123", "containerPort": 0, "hostPort": -1},
            {"name": "Bad--", "containerPort": 1},
        ]}),
        json!({}),
    ));
    assert_eq!(
        errors,
        vec![
            "spec.containers[0].ports[1].name: Duplicate value: \"http\"".to_string(),
            "spec.containers[0].ports[2].name: Invalid value: \"a-very-long-port-name\": must be no more than 15 characters".into(),
            "spec.containers[0].ports[2].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive".into(),
            "spec.containers[0].ports[2].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"".into(),
            "spec.containers[0].ports[3].name: Invalid value: \"123\": must contain at least one letter (a-z)".into(),
            "spec.containers[0].ports[3].containerPort: Required value".into(),
            "spec.containers[0].ports[3].hostPort: Invalid value: -1: must be between 1 and 65535, inclusive".into(),
            "spec.containers[0].ports[4].name: Invalid value: \"Bad--\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into(),
            "spec.containers[0].ports[4].name: Invalid value: \"Bad--\": must not contain consecutive hyphens".into(),
            "spec.containers[0].ports[4].name: Invalid value: \"Bad--\": must not begin or end with a hyphen".into(),
        ]
    );
}

#[test]
fn host_ports_may_not_collide_across_containers() {
    let errors = errors_of(json!({"containers": [
        {"name": "a", "image": "x", "ports": [{"containerPort": 80, "hostPort": 8080}]},
        {"name": "b", "image": "x", "ports": [{"containerPort": 81, "hostPort": 8080, "protocol": "TCP"}]},
    ]}));
    assert_eq!(
        errors,
        vec!["spec.containers[1].ports[0].hostPort: Duplicate value: \"TCP//8080\"".to_string()]
    );
}

#[test]
fn env_names_follow_the_relaxed_rules_of_1_33_and_value_from_has_one_source() {
    let errors = errors_of(spec_with(
        json!({"env": [
            {"name": "A=B", "value": "x"},
            {"name": "", "value": "x"},
            {"name": "caf\u{e9}"},
            {"name": "X", "valueFrom": {}},
            {"name": "Y", "value": "v", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
            {"name": "Z", "valueFrom": {"secretKeyRef": {"name": "s", "key": ""}, "configMapKeyRef": {"name": "c", "key": "k"}}},
            {"name": "W", "valueFrom": {"fieldRef": {"fieldPath": "spec.hostname"}}},
        ]}),
        json!({}),
    ));
    let relaxed = RELAXED_ENV_NAME_MESSAGE;
    assert_eq!(
        errors,
        vec![
            format!("spec.containers[0].env[0].name: Invalid value: \"A=B\": {relaxed}"),
            "spec.containers[0].env[1].name: Required value".into(),
            format!("spec.containers[0].env[2].name: Invalid value: \"caf\u{e9}\": {relaxed}"),
            "spec.containers[0].env[3].valueFrom: Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`".into(),
            "spec.containers[0].env[4].valueFrom: Invalid value: \"\": may not be specified when `value` is not empty".into(),
            "spec.containers[0].env[5].valueFrom.secretKeyRef.key: Required value".into(),
            "spec.containers[0].env[5].valueFrom: Invalid value: \"\": may not have more than one field specified at a time".into(),
            "spec.containers[0].env[6].valueFrom.fieldRef.fieldPath: Unsupported value: \"spec.hostname\": supported values: \"metadata.name\", \"metadata.namespace\", \"metadata.uid\", \"spec.nodeName\", \"spec.serviceAccountName\", \"status.hostIP\", \"status.hostIPs\", \"status.podIP\", \"status.podIPs\"".into(),
        ]
    );
}

/// An ephemeral volume's claim template needs a storage request above zero; found by
/// the differential test against OpenKruise (cloneset/tests/openkruise_oracle.rs).
#[test]
fn ephemeral_claims_need_a_positive_storage_request() {
    let with_storage = |requests: serde_json::Value| {
        spec_with(
            json!({}),
            json!({"volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": requests}}}}}]}),
        )
    };
    assert_eq!(
        errors_of(with_storage(json!({"storage": "1Gi"}))),
        Vec::<String>::new()
    );
    assert_eq!(
        errors_of(with_storage(json!({"storage": "0"}))),
        vec!["spec.volumes[0].ephemeral.volumeClaimTemplate.spec.resources[storage]: Invalid value: \"0\": must be greater than zero".to_string()]
    );
    assert_eq!(
        errors_of(with_storage(json!({}))),
        vec![
            "spec.volumes[0].ephemeral.volumeClaimTemplate.spec.resources[storage]: Required value"
                .to_string()
        ]
    );
}

/// Found by the differential test against OpenKruise (daemonset/tests/openkruise_oracle.rs):
/// requests and limits compare as the pod's defaults leave them, in milli-units.
#[test]
fn requests_and_limits_compare_rounded_up_to_milli_units() {
    let errors = errors_of(spec_with(
        json!({"resources": {"limits": {"memory": "79608n"}, "requests": {"memory": "271u"}}}),
        json!({}),
    ));
    assert_eq!(errors, Vec::<String>::new());
    let errors = errors_of(spec_with(
        json!({"resources": {"limits": {"memory": "1m"}, "requests": {"memory": "1001u"}}}),
        json!({}),
    ));
    assert_eq!(errors.len(), 1, "{errors:?}");
}

/// With `hostNetwork`, OpenKruise's webhooks (`ResourceIsPod`) want each port's hostPort
/// equal to its containerPort, an unset one included; found by the differential test.
#[test]
fn host_network_ports_need_their_host_port() {
    let errors = errors_of(spec_with(
        json!({"ports": [{"containerPort": 80}, {"containerPort": 53, "hostPort": 53}]}),
        json!({"hostNetwork": true}),
    ));
    assert_eq!(
        errors,
        vec!["spec.containers[0].ports[0].hostPort: Invalid value: 0: must match `containerPort` when `hostNetwork` is true".to_string()]
    );
    let without_host_network = errors_of(spec_with(
        json!({"ports": [{"containerPort": 80}]}),
        json!({}),
    ));
    assert_eq!(without_host_network, Vec::<String>::new());
}

#[test]
fn requests_may_not_exceed_limits_and_quantities_must_parse() {
    let errors = errors_of(spec_with(
        json!({"resources": {
            "limits": {"cpu": "500m", "memory": "-1", "example.com/gpu": "1", "hugepages-2Mi": "2Mi"},
            "requests": {"cpu": "1", "ephemeral-storage": "lots", "example.com/gpu": "2", "example.com/fpga": "1", "foo": "1"},
        }}),
        json!({}),
    ));
    assert_eq!(
        errors,
        vec![
            "spec.containers[0].resources.limits[memory]: Invalid value: \"-1\": must be greater than or equal to 0".to_string(),
            "spec.containers[0].resources.requests: Invalid value: \"1\": must be less than or equal to cpu limit of 500m".into(),
            format!("spec.containers[0].resources.requests[ephemeral-storage]: Invalid value: \"lots\": {QUANTITY_FORMAT_MESSAGE}"),
            "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources".into(),
            "spec.containers[0].resources.requests: Invalid value: \"2\": must be equal to example.com/gpu limit of 1".into(),
            "spec.containers[0].resources.requests[foo]: Invalid value: \"foo\": must be a standard resource for containers".into(),
        ]
    );
    let hugepages_alone = errors_of(spec_with(
        json!({"resources": {"limits": {"hugepages-2Mi": "2Mi", "example.com/gpu": "0.5"}}}),
        json!({}),
    ));
    assert_eq!(
        hugepages_alone,
        vec![
            "spec.containers[0].resources.limits[example.com/gpu]: Invalid value: \"0.5\": must be an integer".to_string(),
            "spec.containers[0].resources: Forbidden: HugePages require cpu or memory".into(),
        ]
    );
}

#[test]
fn probes_need_exactly_one_handler_and_sane_thresholds() {
    let errors = errors_of(spec_with(
        json!({
            "livenessProbe": {"successThreshold": 2, "failureThreshold": -1},
            "readinessProbe": {"exec": {"command": []}, "httpGet": {"port": 0, "scheme": "FTP"}, "terminationGracePeriodSeconds": 5},
            "startupProbe": {"tcpSocket": {"port": "-bad"}, "timeoutSeconds": -1, "terminationGracePeriodSeconds": 0},
            "lifecycle": {"preStop": {"sleep": {"seconds": 31}}, "postStart": {}},
        }),
        json!({}),
    ));
    assert_eq!(
        errors,
        vec![
            "spec.containers[0].lifecycle.postStart: Required value: must specify a handler type".to_string(),
            "spec.containers[0].lifecycle.preStop.sleep: Invalid value: 31: must be non-negative and less than terminationGracePeriodSeconds (30)".into(),
            "spec.containers[0].livenessProbe: Required value: must specify a handler type".into(),
            "spec.containers[0].livenessProbe.failureThreshold: Invalid value: -1: must be greater than or equal to 0".into(),
            "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1".into(),
            "spec.containers[0].readinessProbe.exec.command: Required value".into(),
            "spec.containers[0].readinessProbe.httpGet: Forbidden: may not specify more than 1 handler type".into(),
            "spec.containers[0].readinessProbe.terminationGracePeriodSeconds: Invalid value: 5: must not be set for readinessProbes".into(),
            "spec.containers[0].startupProbe.tcpSocket.port: Invalid value: \"-bad\": must not begin or end with a hyphen".into(),
            "spec.containers[0].startupProbe.timeoutSeconds: Invalid value: -1: must be greater than or equal to 0".into(),
            "spec.containers[0].startupProbe.terminationGracePeriodSeconds: Invalid value: 0: must be greater than 0".into(),
        ]
    );
}

#[test]
fn init_containers_take_probes_only_when_restartable_and_share_the_name_space() {
    let errors = errors_of(json!({
        "containers": [{"name": "main", "image": "x", "restartPolicy": "Always"}],
        "initContainers": [
            {"name": "main", "image": "x"},
            {"name": "init", "image": "x", "restartPolicy": "OnFailure", "readinessProbe": {"exec": {"command": ["true"]}}, "lifecycle": {}},
        ],
    }));
    assert_eq!(
        errors,
        vec![
            "spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers".to_string(),
            "spec.initContainers[0].name: Duplicate value: \"main\"".into(),
            "spec.initContainers[1].restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\"".into(),
            format!("spec.initContainers[1].lifecycle: Forbidden: {INIT_ONLY_RESTARTABLE}"),
            format!("spec.initContainers[1].readinessProbe: Forbidden: {INIT_ONLY_RESTARTABLE}"),
        ]
    );
}

#[test]
fn pod_level_policies_are_enums() {
    let errors = errors_of(spec_with(
        json!({"imagePullPolicy": "Sometimes", "terminationMessagePolicy": "Stdout"}),
        json!({"restartPolicy": "Sometimes", "dnsPolicy": "None"}),
    ));
    assert_eq!(
        errors,
        vec![
            "spec.containers[0].terminationMessagePolicy: Unsupported value: \"Stdout\": supported values: \"File\", \"FallbackToLogsOnError\"".to_string(),
            "spec.containers[0].imagePullPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\"".into(),
            "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"".into(),
            "spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None".into(),
        ]
    );
    let errors = errors_of(spec_with(json!({}), json!({"dnsPolicy": "Cluster"})));
    assert_eq!(
        errors,
        vec!["spec.dnsPolicy: Unsupported value: \"Cluster\": supported values: \"ClusterFirstWithHostNet\", \"ClusterFirst\", \"Default\", \"None\"".to_string()]
    );
}
