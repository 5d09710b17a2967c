//! kruise-sidecarset (in-process) beside kruise-webhook (a process), as the SidecarSet tests
//! run them, ready when kube-apiserver calls their webhooks: a SidecarSet is defaulted
//! (hash annotations) and an invalid one refused by `vsidecarset.kb.io`.
// Each test file that includes it uses a part.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kruise_sidecarset::api::v1beta1::SidecarSet;
use kruise_testkit::{self as support, InProcess, Replica, TestCluster};
use kube::Api;
use serde_json::json;

pub const WEBHOOK_BIN: &str = env!("CARGO_BIN_EXE_kruise-webhook");

/// Both binaries, running.
pub struct Binaries {
    /// kruise-sidecarset: the SidecarSet webhooks and controller.
    pub sidecarset: InProcess,
    /// kruise-webhook: the pod chain that injects.
    pub webhook: Replica,
    /// kruise-webhook's admission port (to stop it and start it again there).
    pub webhook_port: u16,
}

/// Starts both against `cluster` and waits until they published their configurations and
/// kube-apiserver calls kruise-sidecarset's.
pub async fn start(cluster: &TestCluster, webhook_flags: &[&str]) -> Binaries {
    let client = cluster.client();
    let binary = kruise_sidecarset::binary::binary().unwrap();
    let kubeconfig = cluster.kubeconfig_path();
    let mut argv = vec!["kruise-sidecarset".to_string()];
    argv.extend(support::process::replica_args(
        &kubeconfig,
        support::free_port(),
        support::free_port(),
    ));
    let sidecarset = InProcess::spawn(|stop| binary.run_argv(argv, stop));
    let webhook_port = support::free_port();
    let webhook =
        support::spawn_replica(WEBHOOK_BIN, &kubeconfig, webhook_port, webhook_flags, &[]);
    let configs: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    support::eventually(
        "both binaries published",
        Duration::from_secs(60),
        || async {
            let pod_chain = configs
                .get_opt("kruise-mutating-webhook-configuration")
                .await
                .ok()??;
            let own = configs.get_opt("kruise-sidecarset-mutating").await.ok()??;
            let has_ca = |c: &MutatingWebhookConfiguration| {
                c.webhooks.iter().flatten().all(|w| {
                    w.client_config
                        .ca_bundle
                        .as_ref()
                        .is_some_and(|b| !b.0.is_empty())
                })
            };
            (has_ca(&pod_chain) && has_ca(&own)).then_some(())
        },
    )
    .await;
    let sets: Api<SidecarSet> = Api::all(client);
    let probe = |spec: serde_json::Value| -> SidecarSet {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
            "metadata": {"name": "kruise-sidecarset-probe"}, "spec": spec
        }))
        .unwrap()
    };
    let containers = json!([{"name": "probe", "image": "busybox"}]);
    support::dry_run_until(
        &sets,
        &probe(json!({"selector": {"matchLabels": {"app": "probe"}}, "containers": containers})),
        "kube-apiserver calling kruise-sidecarset's defaulting",
        |answer| {
            let annotations = answer.ok()?.metadata.annotations?;
            annotations
                .contains_key("kruise.io/sidecarset-hash")
                .then_some(())
        },
    )
    .await;
    support::dry_run_until(
        &sets,
        &probe(json!({"containers": containers})),
        "kube-apiserver calling kruise-sidecarset's validation",
        |answer| {
            let refused = answer.err()?.to_string();
            refused.contains("vsidecarset.kb.io").then_some(())
        },
    )
    .await;
    Binaries {
        sidecarset,
        webhook,
        webhook_port,
    }
}

impl Binaries {
    /// Stops both and waits until they have, so neither publishes again what the cluster's
    /// clean-up removes.
    pub async fn stop(mut self) {
        self.webhook.stop(self.webhook_port).await;
        self.sidecarset.stop().await;
    }
}

/// The names of a pod's containers, in order.
pub fn container_names(pod: &k8s_openapi::api::core::v1::Pod) -> Vec<String> {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter().map(|c| c.name.clone()))
        .collect()
}
