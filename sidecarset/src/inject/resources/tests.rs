use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value as Json, json};

use super::{ResourcesPolicyError, apply_resources_policy, expression_variable};
use crate::api::SidecarContainer;

fn pod(init: Json, containers: Json) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"initContainers": init, "containers": containers}
    }))
    .unwrap()
}

fn app(name: &str, limits: Json, requests: Json) -> Json {
    json!({"name": name, "image": "app", "resources": {"limits": limits, "requests": requests}})
}

fn sidecar(mode: &str, regex: &str, limits: Json, requests: Json) -> SidecarContainer {
    serde_json::from_value(json!({
        "name": "proxy", "image": "envoy",
        "resourcesPolicy": {
            "targetContainersMode": mode,
            "targetContainersNameRegex": regex,
            "resourcesExpr": {"limits": limits, "requests": requests}
        }
    }))
    .unwrap()
}

/// The sidecar's resources after the policy, as the pod would carry them.
fn applied(sidecar: &mut SidecarContainer, pod: &Pod) -> Result<Json, ResourcesPolicyError> {
    apply_resources_policy(sidecar, pod, &BTreeSet::from(["proxy"]))?;
    Ok(serde_json::to_value(&sidecar.container.resources).unwrap())
}

fn two_engines() -> Pod {
    pod(
        json!([]),
        json!([
            app(
                "large-engine-v4",
                json!({"cpu": "200m", "memory": "200Mi"}),
                json!({"cpu": "50m", "memory": "100Mi"})
            ),
            app(
                "large-engine-v8",
                json!({"cpu": "400m", "memory": "400Mi"}),
                json!({"cpu": "100m", "memory": "200Mi"})
            ),
        ]),
    )
}

// Cases and expected values from OpenKruise's `sidecarset_resources_test.go`.
#[test]
fn sum_max_regex_and_constants() {
    for (mode, regex, limits, requests, want) in [
        (
            "sum",
            ".*",
            json!({"cpu": "cpu*50%", "memory": "200Mi"}),
            json!({"cpu": "cpu*50%", "memory": "100Mi"}),
            json!({"limits": {"cpu": "300m", "memory": "200Mi"}, "requests": {"cpu": "75m", "memory": "100Mi"}}),
        ),
        (
            "max",
            "^large.engine.v.*$",
            json!({"cpu": "max(cpu*50%, 50m)", "memory": "200Mi"}),
            json!({"cpu": "max(cpu*50%, 50m)", "memory": "100Mi"}),
            json!({"limits": {"cpu": "200m", "memory": "200Mi"}, "requests": {"cpu": "50m", "memory": "100Mi"}}),
        ),
        (
            "sum",
            "^large.engine.v4$",
            json!({"cpu": "max(cpu*50%, 50m)"}),
            json!({"cpu": "max(cpu*50%, 50m)"}),
            json!({"limits": {"cpu": "100m"}, "requests": {"cpu": "50m"}}),
        ),
        // Go's MatchString searches: an unanchored regex matches inside a name.
        (
            "sum",
            "v8",
            json!({"memory": "memory*30%"}),
            json!({"memory": "memory"}),
            json!({"limits": {"memory": "120Mi"}, "requests": {"memory": "200Mi"}}),
        ),
        // Only requests configured: no limits at all.
        (
            "max",
            ".*",
            Json::Null,
            json!({"cpu": "cpu + 1", "memory": "memory*2"}),
            json!({"requests": {"cpu": "1100m", "memory": "400Mi"}}),
        ),
    ] {
        let mut s = sidecar(mode, regex, limits, requests);
        assert_eq!(
            applied(&mut s, &two_engines()).unwrap(),
            want,
            "{mode} {regex}"
        );
    }
}

#[test]
fn an_unlimited_target_makes_the_limit_unlimited_and_missing_requests_count_as_zero() {
    let p = pod(
        json!([]),
        json!([
            app(
                "a",
                json!({"cpu": "200m", "memory": "200Mi"}),
                json!({"cpu": "100m", "memory": "100Mi"})
            ),
            app("b", json!({"memory": "400Mi"}), json!({})),
        ]),
    );
    let mut s = sidecar(
        "sum",
        ".*",
        json!({"cpu": "cpu*50%", "memory": "memory*30%"}),
        json!({"cpu": "cpu*30%", "memory": "memory*20%"}),
    );
    assert_eq!(
        applied(&mut s, &p).unwrap(),
        json!({"limits": {"memory": "180Mi"}, "requests": {"cpu": "30m", "memory": "20Mi"}})
    );
}

#[test]
fn native_sidecar_init_containers_are_targets_and_injected_sidecars_are_not() {
    let p = pod(
        json!([
            {"name": "setup", "image": "x", "resources": {"limits": {"cpu": "8"}}},
            {"name": "log", "image": "x", "restartPolicy": "Always", "resources": {"limits": {"cpu": "1"}}},
        ]),
        json!([
            app("main", json!({"cpu": "2"}), json!({})),
            app("proxy", json!({"cpu": "4"}), json!({})),
        ]),
    );
    let mut s = sidecar("sum", ".*", json!({"cpu": "cpu"}), Json::Null);
    assert_eq!(
        applied(&mut s, &p).unwrap(),
        json!({"limits": {"cpu": "3"}})
    );
}

#[test]
fn a_pod_without_a_matching_container_is_refused_with_openkruises_message() {
    let mut s = sidecar(
        "sum",
        "^nonexistent$",
        json!({"cpu": "cpu*50%"}),
        Json::Null,
    );
    assert_eq!(
        applied(&mut s, &two_engines()).unwrap_err().to_string(),
        r#"no containers match the regex pattern "^nonexistent$""#
    );
}

#[test]
fn an_expression_failing_on_the_pod_is_refused() {
    let mut s = sidecar("sum", ".*", json!({"cpu": "cpu - 1"}), Json::Null);
    assert_eq!(
        applied(&mut s, &two_engines()).unwrap_err().to_string(),
        r#"failed to evaluate CPU limits expression: failed to parse expression "cpu - 1": calculation result is negative: -400m"#
    );
}

#[test]
fn the_variable_is_memory_only_when_named_as_a_word() {
    assert_eq!(expression_variable("memory*50%"), "memory");
    assert_eq!(expression_variable("max(memory, 1Gi)"), "memory");
    assert_eq!(expression_variable("cpu*2"), "cpu");
    assert_eq!(expression_variable("memory_x"), "cpu");
    assert_eq!(expression_variable("xmemory"), "cpu");
}
