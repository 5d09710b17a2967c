//! `kruise-webhook manifests` prints the configuration the chart installs, composed from
//! the enabled families; an unknown family is refused by name.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;

const BIN: &str = env!("CARGO_BIN_EXE_kruise-webhook");

#[test]
fn manifests_compose_the_pod_chain_scoped_and_fail_open() {
    let out = Command::new(BIN).arg("manifests").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = String::from_utf8(out.stdout).unwrap();
    let config: MutatingWebhookConfiguration =
        serde_saphyr::from_str(yaml.trim_start_matches("---\n")).unwrap();
    assert_eq!(
        config.metadata.name.as_deref(),
        Some("kruise-mutating-webhook-configuration")
    );
    let hooks = config.webhooks.unwrap();
    assert_eq!(hooks.len(), 1);
    let hook = &hooks[0];
    assert_eq!(hook.name, "mpod.kb.io");
    // The readiness-gate step is best effort: a stopped webhook never blocks pods.
    assert_eq!(hook.failure_policy.as_deref(), Some("Ignore"));
    let svc = hook.client_config.service.as_ref().unwrap();
    assert_eq!(
        (
            svc.namespace.as_str(),
            svc.name.as_str(),
            svc.path.as_deref()
        ),
        (
            "kruise-system",
            "kruise-webhook-service",
            Some("/mutate-pod")
        )
    );
    let ns = hook.namespace_selector.as_ref().unwrap();
    let expr = &ns.match_expressions.as_ref().unwrap()[0];
    assert_eq!(
        (expr.key.as_str(), expr.operator.as_str()),
        ("control-plane", "DoesNotExist")
    );
    assert_eq!(hook.side_effects, "None");
}

#[test]
fn pod_webhook_gate_off_means_no_pod_webhook() {
    let out = Command::new(BIN)
        .args(["manifests", "--feature-gates", "PodWebhook=false"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "");
}

#[test]
fn an_unknown_family_is_refused_by_name() {
    let out = Command::new(BIN)
        .args(["manifests", "--enable", "workloads,nosuchfamily"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("unknown family \"nosuchfamily\""), "{err}");
}

#[test]
fn a_family_lending_only_a_validating_step_is_enabled_by_name() {
    let out = Command::new(BIN)
        .args(["manifests", "--enable", "workloads,protection"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Its webhook entries follow the budgets it watches, so `manifests` (no cluster) prints
    // none; the mutating chain is there.
    let manifests = String::from_utf8(out.stdout).unwrap();
    assert!(manifests.contains("/mutate-pod"), "{manifests}");
}

#[test]
fn deletion_protection_is_published_with_its_gate_and_without_the_pod_webhook() {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    let manifests = |args: &[&str]| {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    // The pod chain off (K#1526), deletion protection on: only its entries, each seeing only
    // DELETEs of labelled objects.
    let yaml = manifests(&[
        "manifests",
        "--feature-gates",
        "PodWebhook=false,ResourcesDeletionProtection=true",
    ]);
    let config: ValidatingWebhookConfiguration =
        serde_saphyr::from_str(yaml.trim_start_matches("---\n")).unwrap();
    let hooks = config.webhooks.unwrap();
    let entries: Vec<(&str, Option<&str>)> = hooks
        .iter()
        .map(|h| {
            let path = h.client_config.service.as_ref().unwrap().path.as_deref();
            (h.name.as_str(), path)
        })
        .collect();
    assert_eq!(
        entries,
        [
            (
                "vbuiltindeployment.kb.io",
                Some("/validate-apps-deployment")
            ),
            (
                "vbuiltinreplicaset.kb.io",
                Some("/validate-apps-replicaset")
            ),
            (
                "vbuiltinstatefulset.kb.io",
                Some("/validate-apps-statefulset")
            ),
            (
                "vcustomresourcedefinition.kb.io",
                Some("/validate-customresourcedefinition")
            ),
            ("vingress.kb.io", Some("/validate-ingress")),
            ("vnamespace.kb.io", Some("/validate-namespace")),
            ("vservice.kb.io", Some("/validate-service")),
        ]
    );
    for hook in &hooks {
        let rules = hook.rules.as_ref().unwrap();
        assert_eq!(
            rules[0].operations.as_deref(),
            Some(&["DELETE".to_string()][..])
        );
        let selector = hook.object_selector.as_ref().unwrap();
        let expr = &selector.match_expressions.as_ref().unwrap()[0];
        assert_eq!(
            (expr.key.as_str(), expr.operator.as_str()),
            ("policy.kruise.io/delete-protection", "Exists"),
            "{}",
            hook.name
        );
        assert_eq!(hook.failure_policy.as_deref(), Some("Fail"));
    }
    // Gate off (the default): nothing that could block a deletion.
    let yaml = manifests(&["manifests", "--feature-gates", "PodWebhook=false"]);
    assert_eq!(yaml, "");
    // Not enabled: not lent.
    let yaml = manifests(&[
        "manifests",
        "--enable",
        "workloads",
        "--feature-gates",
        "ResourcesDeletionProtection=true",
    ]);
    assert!(!yaml.contains("vnamespace.kb.io"), "{yaml}");
}
