//! Step 3 of docs/migration.md against kruise-sim: the pod webhook handed over from
//! OpenKruise's kruise-manager to kruise-webhook.
//!
//! The cluster starts as OpenKruise leaves it once kruise-cloneset and kruise-sidecarset run
//! (steps 1 and 2): `kruise-mutating-webhook-configuration` and
//! `kruise-validating-webhook-configuration` as OpenKruise's webhook controller keeps them
//! (its `config/webhook` entries, each calling Service `kruise-webhook-service` in
//! `kruise-system` with its caBundle, the `template` annotation, `mpod.kb.io` fail-closed
//! outside `control-plane` namespaces), plus an entry another tool added to the same
//! configuration; OpenKruise's Service and certificate Secret; a SidecarSet as OpenKruise's
//! webhook stored it. kruise-manager is stopped, so the window is open: the Service has no
//! endpoints. The simulator reaches `kruise-webhook-service` at the port kruise-webhook will
//! serve on, as the Service's endpoints would, and kruise-webhook runs as the chart runs it
//! (its Service, not a URL), with a certificate valid for the Service and that address.
//! That routing is kruise-sim's alone (`sim_only_`): kube-apiserver refuses loopback
//! addresses in a Service's endpoints, so on the real control plane no Service leads to a
//! process on this machine (docs/real-control-plane.md).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kruise_testkit as support;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret, Service};
use k8s_openapi::serde::Serialize;
use k8s_openapi::serde::de::DeserializeOwned;
use kruise_admission::certs;
use kruise_sidecarset::api::v1beta1::SidecarSet;
use kruise_sim::SimConfig;
use kruise_sim::webhooks::WebhookDispatcher;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_kruise-webhook");
const WAIT: Duration = Duration::from_secs(30);
const NS: &str = "kruise-system";
const SERVICE: &str = "kruise-webhook-service";
const MUTATING: &str = "kruise-mutating-webhook-configuration";
const VALIDATING: &str = "kruise-validating-webhook-configuration";
/// The SidecarSet OpenKruise's webhook stored (selects `app: web`), from the migration fixture.
const OPENKRUISE_SIDECARSET: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../sidecarset/tests/fixtures/openkruise/migration/sidecarset.json"
));

/// One entry of OpenKruise's configurations, as its webhook controller writes it.
fn openkruise_entry(name: &str, path: &str, group: &str, resource: &str, ca: &str) -> Value {
    let operations: Vec<&str> = if resource == "pods" {
        vec!["CREATE"]
    } else {
        vec!["CREATE", "UPDATE"]
    };
    let versions: Vec<&str> = if group.is_empty() {
        vec!["v1"]
    } else {
        vec!["v1alpha1", "v1beta1"]
    };
    json!({
        "name": name,
        "admissionReviewVersions": ["v1", "v1beta1"],
        "clientConfig": {"service": {"namespace": NS, "name": SERVICE, "path": path, "port": 443},
                         "caBundle": ca},
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "namespaceSelector": {"matchExpressions": [{"key": "control-plane", "operator": "DoesNotExist"}]},
        "rules": [{"apiGroups": [group], "apiVersions": versions, "operations": operations,
                   "resources": [resource]}]
    })
}

/// The mutating configuration kruise-manager leaves: OpenKruise's entries, the `template`
/// annotation they are written from, and `foreign` (another tool's entry) after them.
fn openkruise_mutating(ca: &str, foreign: &Value) -> Value {
    let entry = |name: &str, resource: &str| {
        let (group, path) = if resource == "pods" {
            ("", "/mutate-pod".to_string())
        } else {
            let kind = resource.trim_end_matches('s');
            ("apps.kruise.io", format!("/mutate-apps-kruise-io-{kind}"))
        };
        openkruise_entry(name, &path, group, resource, ca)
    };
    let mut entries = vec![
        entry("mpod.kb.io", "pods"),
        entry("mbroadcastjob.kb.io", "broadcastjobs"),
        entry("mcloneset.kb.io", "clonesets"),
        entry("mdaemonset.kb.io", "daemonsets"),
        entry("msidecarset.kb.io", "sidecarsets"),
        entry("mstatefulset.kb.io", "statefulsets"),
    ];
    let template: Vec<Value> = entries
        .iter()
        .cloned()
        .map(|mut e| {
            e["clientConfig"]
                .as_object_mut()
                .unwrap()
                .remove("caBundle");
            e
        })
        .collect();
    entries.push(foreign.clone());
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": MUTATING, "labels": {"team": "platform"},
                     "annotations": {"template": serde_json::to_string(&template).unwrap()}},
        "webhooks": entries
    })
}

/// Another tool's entry in OpenKruise's configuration, with its own namespaceSelector.
fn foreign_entry() -> Value {
    json!({
        "name": "minject.example.com",
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"namespace": "example-system", "name": "injector", "path": "/inject", "port": 443}},
        "failurePolicy": "Ignore",
        "sideEffects": "None",
        "namespaceSelector": {"matchLabels": {"example.com/inject": "enabled"}},
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]
    })
}

async fn create<K>(client: &Client, namespace: Option<&str>, object: Value) -> K
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace.unwrap_or("default"));
    api.create(
        &PostParams::default(),
        &serde_json::from_value(object).unwrap(),
    )
    .await
    .unwrap()
}

async fn create_cluster<K>(client: &Client, object: Value) -> K
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::all(client.clone());
    api.create(
        &PostParams::default(),
        &serde_json::from_value(object).unwrap(),
    )
    .await
    .unwrap()
}

/// kruise-webhook as its chart runs it: reached through its Service in `kruise-system`,
/// certificates from `cert_dir` (as cert-manager would mount them); killed on drop.
struct Webhook {
    child: std::process::Child,
    health_port: u16,
}

impl Webhook {
    fn start(kubeconfig: &std::path::Path, cert_dir: &std::path::Path, port: u16) -> Webhook {
        let health_port = support::free_port();
        let mut cmd = std::process::Command::new(BIN);
        cmd.args(["run", "--kubeconfig", kubeconfig.to_str().unwrap()])
            .args(["--leader-elect=false", "--webhook-namespace", NS])
            .args(["--webhook-cert-dir", cert_dir.to_str().unwrap()])
            .args(["--webhook-port", &port.to_string()])
            .args(["--webhook-bind-address", "127.0.0.1"])
            .args(["--health-addr", &format!("127.0.0.1:{health_port}")])
            .args([
                "--metrics-addr",
                &format!("127.0.0.1:{}", support::free_port()),
            ])
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("WEBHOOK_HOST")
            .stdout(std::process::Stdio::null());
        if std::env::var_os("KRUISE_TEST_LOGS").is_none() {
            cmd.stderr(std::process::Stdio::null());
        }
        Webhook {
            child: cmd.spawn().unwrap(),
            health_port,
        }
    }

    async fn wait_ready(&self) {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.health_port));
        support::eventually("kruise-webhook's /readyz", WAIT, || async {
            matches!(support::http_get(addr, "/readyz").await, Ok((200, _))).then_some(())
        })
        .await;
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn containers(pod: &Pod) -> Vec<String> {
    pod.spec
        .iter()
        .flat_map(|s| &s.containers)
        .map(|c| c.name.clone())
        .collect()
}

fn pod(name: &str, app: &str) -> Pod {
    kruise_testkit::app_pod(name, app)
}

#[tokio::test]
async fn sim_only_kruise_webhook_takes_the_pod_webhook_over_from_openkruise_without_a_pod_slipping_through()
 {
    let webhook_port = support::free_port();
    let (sim, client) = support::sim::start(SimConfig {
        admission_webhooks: false,
        ..SimConfig::default()
    })
    .await;
    // The Service's endpoints: where kruise-webhook will listen (nothing until step 3.3).
    let resolver: kruise_sim::webhooks::ServiceResolver = Arc::new(move |ns, name, port| {
        (ns == NS && name == SERVICE && port == 443).then(|| format!("127.0.0.1:{webhook_port}"))
    });
    sim.add_admission_hook(Arc::new(WebhookDispatcher::new(
        sim.shared(),
        Some(resolver),
    )));
    let sidecarset_binary = kruise_sidecarset::binary::binary().unwrap();
    support::sim::install_crds(&client, sidecarset_binary.crd_definitions()).await;

    // What OpenKruise leaves: its namespace, a SidecarSet its webhook stored, its webhook
    // configurations, Service and certificate Secret.
    // (The simulator starts with `kruise-system`; OpenKruise's carries this label.)
    Api::<Namespace>::all(client.clone())
        .patch(
            NS,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"control-plane": "controller-manager"}}})),
        )
        .await
        .unwrap();
    let fixture: Value = serde_json::from_str(OPENKRUISE_SIDECARSET).unwrap();
    let mut log_agent = fixture["sidecarSet"].clone();
    log_agent["metadata"].as_object_mut().unwrap().remove("uid");
    log_agent.as_object_mut().unwrap().remove("status");
    create_cluster::<SidecarSet>(&client, log_agent).await;
    let now = jiff::Timestamp::now();
    let ten_years = Duration::from_secs(10 * 365 * 24 * 3600);
    let openkruise_ca = certs::generate_ca("openkruise-webhook-ca", now, ten_years).unwrap();
    let openkruise_ca_bundle =
        base64::engine::general_purpose::STANDARD.encode(&openkruise_ca.cert_pem);
    let foreign = foreign_entry();
    create_cluster::<MutatingWebhookConfiguration>(
        &client,
        openkruise_mutating(&openkruise_ca_bundle, &foreign),
    )
    .await;
    let validating: Vec<Value> = [
        ("vpod.kb.io", "/validate-pod", "", "pods"),
        (
            "vcloneset.kb.io",
            "/validate-apps-kruise-io-v1alpha1-cloneset",
            "apps.kruise.io",
            "clonesets",
        ),
        (
            "vsidecarset.kb.io",
            "/validate-apps-kruise-io-v1alpha1-sidecarset",
            "apps.kruise.io",
            "sidecarsets",
        ),
    ]
    .iter()
    .map(|(name, path, group, resource)| {
        openkruise_entry(name, path, group, resource, &openkruise_ca_bundle)
    })
    .collect();
    create_cluster::<ValidatingWebhookConfiguration>(
        &client,
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
               "metadata": {"name": VALIDATING}, "webhooks": validating}),
    )
    .await;
    create::<Service>(
        &client,
        Some(NS),
        json!({"metadata": {"name": SERVICE, "namespace": NS},
               "spec": {"ports": [{"port": 443, "targetPort": 9876}],
                        "selector": {"control-plane": "controller-manager"}}}),
    )
    .await;
    create::<Secret>(
        &client,
        Some(NS),
        json!({"metadata": {"name": "kruise-webhook-certs", "namespace": NS},
               "data": {"ca-cert.pem": base64::engine::general_purpose::STANDARD.encode(&openkruise_ca.cert_pem)}}),
    )
    .await;

    // Step 2 done: kruise-sidecarset runs (its own SidecarSet webhooks, at a URL here).
    let kubeconfig = sim.kubeconfig_path().unwrap();
    let mut argv = vec!["kruise-sidecarset".to_string()];
    argv.extend(support::process::replica_args(
        &kubeconfig,
        support::free_port(),
        support::free_port(),
    ));
    let sidecarset = support::InProcess::spawn(|stop| sidecarset_binary.run_argv(argv, stop));
    let mutating_configs: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    support::eventually("kruise-sidecarset's configuration", WAIT, || async {
        mutating_configs
            .get_opt("kruise-sidecarset-mutating")
            .await
            .ok()?
    })
    .await;

    // Step 3.1: kruise-manager is gone, the window open. OpenKruise's fail-closed pod entry
    // calls a Service with no endpoints: a pod the SidecarSet selects is refused, not
    // created without its sidecar.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let refused = pods
        .create(&PostParams::default(), &pod("web-in-window", "web"))
        .await
        .expect_err("a pod created in the window must be refused")
        .to_string();
    assert!(
        refused.contains("failed calling webhook \"mpod.kb.io\""),
        "{refused}"
    );

    // Step 3.2: OpenKruise's validating configuration, Service and Secret deleted.
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .delete(VALIDATING, &DeleteParams::default())
        .await
        .unwrap();
    Api::<Service>::namespaced(client.clone(), NS)
        .delete(SERVICE, &DeleteParams::default())
        .await
        .unwrap();
    Api::<Secret>::namespaced(client.clone(), NS)
        .delete("kruise-webhook-certs", &DeleteParams::default())
        .await
        .unwrap();

    // Step 3.3: kruise-webhook installed; the window closes when it is ready.
    let ca = certs::generate_ca("kruise-rs-webhook-ca", now, ten_years).unwrap();
    let mut hosts = certs::service_hosts(NS, SERVICE);
    hosts.push("127.0.0.1".into());
    let (cert, key) = certs::issue_serving(&ca, &hosts, now, ten_years).unwrap();
    let cert_dir = std::env::temp_dir().join(format!(
        "kruise-handover-{}-{webhook_port}",
        std::process::id()
    ));
    std::fs::create_dir_all(&cert_dir).unwrap();
    std::fs::write(cert_dir.join("tls.crt"), cert).unwrap();
    std::fs::write(cert_dir.join("tls.key"), key).unwrap();
    std::fs::write(cert_dir.join("ca.crt"), &ca.cert_pem).unwrap();
    let webhook = Webhook::start(&kubeconfig, &cert_dir, webhook_port);
    webhook.wait_ready().await;

    let config = mutating_configs.get(MUTATING).await.unwrap();
    let entries = config.webhooks.clone().unwrap_or_default();
    let names: Vec<&str> = entries.iter().map(|w| w.name.as_str()).collect();
    // Its mpod.kb.io written over OpenKruise's, where it stood, with its CA.
    assert_eq!(names.first(), Some(&"mpod.kb.io"), "{names:?}");
    let mpod = &entries[0];
    let service = mpod.client_config.service.as_ref().unwrap();
    assert_eq!(
        (service.namespace.as_str(), service.name.as_str()),
        (NS, SERVICE)
    );
    assert_eq!(service.path.as_deref(), Some("/mutate-pod"));
    assert!(
        mpod.client_config
            .ca_bundle
            .as_ref()
            .is_some_and(|b| b.0 == ca.cert_pem.as_bytes()),
        "mpod.kb.io does not carry kruise-webhook's CA: {}",
        serde_json::to_string_pretty(&config).unwrap()
    );
    // OpenKruise's other entries calling the Service are gone; no entry keeps its CA.
    for gone in [
        "mbroadcastjob.kb.io",
        "mcloneset.kb.io",
        "mdaemonset.kb.io",
        "msidecarset.kb.io",
        "mstatefulset.kb.io",
    ] {
        assert!(!names.contains(&gone), "{gone} left in {names:?}");
    }
    assert!(
        entries.iter().all(|w| w
            .client_config
            .ca_bundle
            .as_ref()
            .is_none_or(|b| b.0 != openkruise_ca.cert_pem.as_bytes())),
        "an entry still trusts OpenKruise's CA: {names:?}"
    );
    // Another tool's entry, its namespaceSelector and the configuration's labels stay.
    let kept = entries
        .iter()
        .find(|w| w.name == "minject.example.com")
        .unwrap_or_else(|| panic!("the other tool's entry removed: {names:?}"));
    assert_eq!(
        serde_json::to_value(&kept.namespace_selector).unwrap(),
        foreign["namespaceSelector"]
    );
    assert_eq!(
        serde_json::to_value(&kept.client_config).unwrap(),
        foreign["clientConfig"]
    );
    assert_eq!(kept.failure_policy.as_deref(), Some("Ignore"));
    assert_eq!(
        config.labels().get("team").map(String::as_str),
        Some("platform")
    );

    // The SidecarSet OpenKruise left is enforced from the moment kruise-webhook is ready.
    let web = pods
        .create(&PostParams::default(), &pod("web-after", "web"))
        .await
        .unwrap();
    assert!(
        containers(&web).contains(&"log-agent".to_string()),
        "{:?}",
        containers(&web)
    );
    // A SidecarSet created after the window: a pod it selects gets its sidecar.
    let sets: Api<SidecarSet> = Api::all(client.clone());
    let metrics: SidecarSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "metrics"},
        "spec": {"selector": {"matchLabels": {"app": "api"}},
                 "containers": [{"name": "metrics", "image": "busybox:1.37",
                                 "command": ["sleep", "infinity"]}]}
    }))
    .unwrap();
    sets.create(&PostParams::default(), &metrics).await.unwrap();
    let api = support::eventually("an api pod with the new sidecar", WAIT, || async {
        let name = format!("api-{}", jiff::Timestamp::now().as_nanosecond());
        let created = pods
            .create(&PostParams::default(), &pod(&name, "api"))
            .await
            .ok()?;
        containers(&created)
            .contains(&"metrics".to_string())
            .then_some(created)
    })
    .await;
    assert_eq!(containers(&api), ["metrics", "main"]);
    // A pod no SidecarSet selects is created as it is.
    let plain = pods
        .create(&PostParams::default(), &pod("plain", "other"))
        .await
        .unwrap();
    assert_eq!(containers(&plain), ["main"]);

    drop(webhook);
    sidecarset.stop().await;
    let _ = std::fs::remove_dir_all(&cert_dir);
    sim.shutdown().await;
}
