//! The binary harness against kruise-sim: leader election between replicas, lease
//! hand-over and release, the endpoints, the admission server with the caBundle it
//! publishes, the controller helper, and the process-level exit codes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_runtime::leader::{Attempt, LeaderElector, LeaderTimings};
use kruise_sim::{FaultRule, Sim, SimConfig};
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const BIN: &str = env!("CARGO_BIN_EXE_kruise-runtime-example");

fn fast() -> LeaderTimings {
    LeaderTimings {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(250),
    }
}

async fn holder(api: &Api<Lease>, name: &str) -> Option<String> {
    api.get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

#[tokio::test]
async fn two_candidates_elect_one_leader_and_hand_over_within_the_lease_duration() {
    let sim = Sim::start(SimConfig::default()).await.unwrap();
    let api: Api<Lease> = Api::namespaced(sim.client().unwrap(), "default");
    let mut a = LeaderElector::new(api.clone(), "lease-test", "a", fast()).unwrap();
    let mut b = LeaderElector::new(api.clone(), "lease-test", "b", fast()).unwrap();
    let cancel = CancellationToken::new();
    // Both race for the lease at once: exactly one wins.
    let (ra, rb) = tokio::join!(a.try_acquire_or_renew(), b.try_acquire_or_renew());
    let results = [ra.unwrap(), rb.unwrap()];
    assert_eq!(
        results.iter().filter(|r| **r == Attempt::Leading).count(),
        1,
        "{results:?}"
    );
    let (mut leader, mut follower) = if results[0] == Attempt::Leading {
        (a, b)
    } else {
        (b, a)
    };
    assert_eq!(
        holder(&api, "lease-test").await.as_deref(),
        Some(leader.identity())
    );
    // The follower keeps following while the leader renews.
    let renewing = tokio::spawn(async move {
        let c = CancellationToken::new();
        leader.hold(&c).await
    });
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(
            follower.try_acquire_or_renew().await.unwrap(),
            Attempt::Following
        );
    }
    // The leader stops renewing (hung process): the follower takes over once the lease
    // has not been renewed for its duration.
    renewing.abort();
    let killed = Instant::now();
    assert!(follower.acquire(&cancel).await);
    let took = killed.elapsed();
    let bound =
        fast().lease_duration + fast().retry_period.mul_f64(2.2) + Duration::from_millis(300);
    assert!(took <= bound, "hand-over took {took:?}, bound {bound:?}");
    assert_eq!(
        holder(&api, "lease-test").await.as_deref(),
        Some(follower.identity())
    );
    let lease = api.get("lease-test").await.unwrap();
    assert_eq!(lease.spec.unwrap().lease_transitions, Some(1));
    // Releasing empties the holder so the next candidate need not wait.
    follower.release().await.unwrap();
    assert_eq!(holder(&api, "lease-test").await, None);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_leader_that_cannot_renew_gives_up_within_the_renew_deadline() {
    let sim = Sim::start(SimConfig::default()).await.unwrap();
    let api: Api<Lease> = Api::namespaced(sim.client().unwrap(), "default");
    let mut a = LeaderElector::new(api.clone(), "lease-loss", "a", fast()).unwrap();
    assert_eq!(a.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
    sim.faults().add(
        FaultRule::new()
            .resource("leases")
            .verb("update")
            .error(500, 1.0),
    );
    let start = Instant::now();
    let cancel = CancellationToken::new();
    assert!(
        !a.hold(&cancel).await,
        "renewals fail, so leadership must be lost"
    );
    let took = start.elapsed();
    assert!(took >= fast().renew_deadline, "{took:?}");
    assert!(
        took <= fast().renew_deadline + Duration::from_secs(1),
        "{took:?}"
    );
    sim.shutdown().await;
}

struct Replica {
    child: Child,
    metrics: u16,
    health: u16,
    webhook: u16,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A replica with the given lease duration and renew deadline (retry every 300 ms).
fn spawn_replica(kubeconfig: &std::path::Path, lease: &str, renew: &str) -> Replica {
    let (metrics, health, webhook) = (
        support::free_port(),
        support::free_port(),
        support::free_port(),
    );
    let child = Command::new(BIN)
        .args([
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--leader-elect-namespace",
            "default",
            "--leader-elect-lease-duration",
            lease,
            "--leader-elect-renew-deadline",
            renew,
            "--leader-elect-retry-period",
            "300ms",
            "--metrics-addr",
            &format!("127.0.0.1:{metrics}"),
            "--health-addr",
            &format!("127.0.0.1:{health}"),
            "--webhook-port",
            &webhook.to_string(),
            "--webhook-host",
            "127.0.0.1",
            "--webhook-bind-address",
            "127.0.0.1",
            "--webhook-cert-check-interval",
            "1s",
            "--webhook-namespace",
            "default",
        ])
        .env_remove("KUBECONFIG")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Replica {
        child,
        metrics,
        health,
        webhook,
    }
}

async fn is_leader(r: &Replica) -> Option<bool> {
    let addr = format!("127.0.0.1:{}", r.metrics).parse().unwrap();
    let (code, body) = support::http_get(addr, "/metrics").await.ok()?;
    (code == 200).then(|| {
        body.lines()
            .any(|l| l.starts_with("leader_election_master_status{") && l.ends_with(" 1"))
    })
}

fn sigterm(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn replicas_elect_one_leader_serve_endpoints_and_hand_over_on_sigterm() {
    let sim = Sim::start(SimConfig::default()).await.unwrap();
    let kubeconfig = sim.kubeconfig_path().unwrap();
    let client = sim.client().unwrap();
    let greetings = support::install_greetings(BIN, &client).await;

    let mut replicas = vec![
        spawn_replica(&kubeconfig, "10s", "8s"),
        spawn_replica(&kubeconfig, "10s", "8s"),
    ];
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let first = support::eventually("a leader", Duration::from_secs(30), || async {
        let mut leaders = Vec::new();
        for (i, r) in replicas.iter().enumerate() {
            if is_leader(r).await? {
                leaders.push(i);
            }
        }
        (leaders.len() == 1).then(|| leaders[0])
    })
    .await;
    assert!(holder(&leases, "kruise-runtime-example").await.is_some());
    // Requests name the binary and its version.
    let agent = format!("kruise-runtime-example/{}", env!("CARGO_PKG_VERSION"));
    assert!(
        sim.counters().by_user_agent(&agent) > 0,
        "no request with user-agent {agent}"
    );
    // Exactly one leader, and it stays that way.
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut n = 0;
        for r in &replicas {
            n += usize::from(is_leader(r).await == Some(true));
        }
        assert_eq!(n, 1);
    }

    // Endpoints answer on every replica; readiness follows the admission server and caches.
    for r in &replicas {
        let health = format!("127.0.0.1:{}", r.health).parse().unwrap();
        assert_eq!(
            support::http_get(health, "/healthz").await.unwrap(),
            (200, "ok".to_string())
        );
        support::eventually("readyz", Duration::from_secs(30), || async {
            let (code, _) = support::http_get(health, "/readyz").await.ok()?;
            (code == 200).then_some(())
        })
        .await;
        let metrics = format!("127.0.0.1:{}", r.metrics).parse().unwrap();
        let (code, body) = support::http_get(metrics, "/metrics").await.unwrap();
        assert_eq!(code, 200);
        assert!(body.contains("leader_election_master_status"), "{body}");
    }

    // The controller runs on the leader: it echoes the message into status.
    let g: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.kruise.io/v1alpha1", "kind": "Greeting",
        "metadata": {"name": "hello", "namespace": "default"}, "spec": {"message": "hi"}
    }))
    .unwrap();
    greetings.create(&PostParams::default(), &g).await.unwrap();
    support::eventually("status.echoed", Duration::from_secs(30), || async {
        let g = greetings.get("hello").await.ok()?;
        (g.data["status"]["echoed"] == "hi").then_some(())
    })
    .await;
    let leader_metrics = format!("127.0.0.1:{}", replicas[first].metrics)
        .parse()
        .unwrap();
    let (_, body) = support::http_get(leader_metrics, "/metrics").await.unwrap();
    assert!(
        body.lines()
            .any(|l| l.starts_with("controller_runtime_reconcile_total{")
                && l.contains("controller=\"greeting\"")
                && l.contains("result=\"success\"")),
        "{body}"
    );
    // Everything reconciled: nothing waits in the queue.
    support::eventually("empty queue", Duration::from_secs(10), || async {
        let (_, body) = support::http_get(leader_metrics, "/metrics").await.ok()?;
        body.lines()
            .any(|l| {
                l.starts_with("workqueue_depth{") && l.contains("greeting") && l.ends_with(" 0")
            })
            .then_some(())
    })
    .await;

    // The admission server presents a certificate it generated, and the caBundle it
    // published in its webhook configuration verifies it.
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let bundle = support::eventually("published caBundle", Duration::from_secs(30), || async {
        let c = configs
            .get_opt("kruise-runtime-example-validating")
            .await
            .ok()??;
        let hook = c.webhooks?.into_iter().next()?;
        let bundle = hook.client_config.ca_bundle?;
        Some((String::from_utf8(bundle.0).ok()?, hook.client_config.url?))
    })
    .await;
    let (ca_bundle, url) = bundle;
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    assert!(
        url.ends_with("/validate-example-kruise-io-v1alpha1-greeting"),
        "{url}"
    );
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret = secrets.get("kruise-runtime-example-certs").await.unwrap();
    assert!(secret.data.unwrap().contains_key("ca-cert.pem"));
    for r in &replicas {
        let addr = format!("127.0.0.1:{}", r.webhook).parse().unwrap();
        for (message, allowed) in [("hi", true), ("", false)] {
            let body = support::review(
                "example.kruise.io",
                "v1alpha1",
                "Greeting",
                "greetings",
                json!({"apiVersion": "example.kruise.io/v1alpha1", "kind": "Greeting",
                       "metadata": {"name": "x", "namespace": "default"}, "spec": {"message": message}}),
            );
            let path = "/validate-example-kruise-io-v1alpha1-greeting";
            let (code, text) = support::post_tls(addr, "127.0.0.1", &ca_bundle, path, &body)
                .await
                .unwrap();
            assert_eq!(code, 200, "{text}");
            let review: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(review["response"]["allowed"], allowed, "{text}");
        }
    }

    // SIGTERM on the leader: it exits 0 and releases the lease, and the standby takes
    // over well before the 10 s lease would have expired.
    let mut leader = replicas.remove(first);
    let standby = replicas.remove(0);
    let sent = Instant::now();
    sigterm(&leader.child);
    let status = support::eventually("leader exit", Duration::from_secs(30), || {
        let s = leader.child.try_wait().unwrap();
        async move { s }
    })
    .await;
    assert!(status.success(), "{status:?}");
    support::eventually("standby leads", Duration::from_secs(5), || async {
        is_leader(&standby).await?.then_some(())
    })
    .await;
    let took = sent.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "takeover after SIGTERM took {took:?}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn losing_the_lease_exits_non_zero() {
    let sim = Sim::start(SimConfig::default()).await.unwrap();
    let kubeconfig = sim.kubeconfig_path().unwrap();
    let mut r = spawn_replica(&kubeconfig, "3s", "2s");
    support::eventually("leadership", Duration::from_secs(30), || async {
        is_leader(&r).await?.then_some(())
    })
    .await;
    sim.faults().add(
        FaultRule::new()
            .resource("leases")
            .verb("update")
            .error(500, 1.0),
    );
    let status = support::eventually(
        "exit after losing the lease",
        Duration::from_secs(30),
        || {
            let s = r.child.try_wait().unwrap();
            async move { s }
        },
    )
    .await;
    assert_eq!(status.code(), Some(1));
    sim.shutdown().await;
}

#[test]
fn an_unknown_feature_gate_exits_2_naming_it() {
    let out = Command::new(BIN)
        .args(["--feature-gates", "CloneSetShortHash=true,NoSuchGate=true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        stderr.trim(),
        "error: --feature-gates: unknown feature gate \"NoSuchGate\""
    );
}

#[test]
fn crd_prints_valid_yaml() {
    let out = Command::new(BIN).arg("crd").output().unwrap();
    assert!(out.status.success());
    let yaml = String::from_utf8(out.stdout).unwrap();
    let crd: CustomResourceDefinition =
        serde_saphyr::from_str(yaml.trim_start_matches("---\n")).unwrap();
    assert_eq!(crd.spec.group, "example.kruise.io");
    assert_eq!(crd.spec.versions[0].name, "v1alpha1");
    assert!(
        crd.spec.versions[0]
            .subresources
            .as_ref()
            .unwrap()
            .status
            .is_some()
    );
}

#[tokio::test]
async fn events_are_created_once_and_repeats_become_a_series() {
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::api::events::v1::Event as K8sEvent;
    use kruise_runtime::events::{Event, EventPublisher, EventQueue, EventType, Reporter};

    let sim = Sim::start(SimConfig::default()).await.unwrap();
    let client = sim.client().unwrap();
    let publisher = EventPublisher::with_capacity(
        client.clone(),
        Reporter {
            controller: "kruise-manager".into(),
            instance: None,
        },
        2,
    );
    let regarding = ObjectReference {
        api_version: Some("apps.kruise.io/v1beta1".into()),
        kind: Some("CloneSet".into()),
        namespace: Some("default".into()),
        name: Some("demo".into()),
        uid: Some("u1".into()),
        ..Default::default()
    };
    let event = |reason: &str, pod: &str| Event {
        type_: EventType::Normal,
        reason: reason.into(),
        note: Some(format!("succeed to create pod {pod}")),
        action: reason.into(),
        secondary: Some(ObjectReference {
            kind: Some("Pod".into()),
            namespace: Some("default".into()),
            name: Some(pod.into()),
            ..Default::default()
        }),
    };
    let publish = |reason: &'static str, pod: &'static str| {
        let (publisher, regarding, event) = (&publisher, &regarding, event(reason, pod));
        async move { publisher.publish(&event, regarding).await.unwrap() }
    };
    let events: Api<K8sEvent> = Api::namespaced(client, "default");
    let about = |pod: &'static str| {
        let events = events.clone();
        async move {
            let list = events.list(&Default::default()).await.unwrap().items;
            list.into_iter()
                .filter(|e| e.related.as_ref().and_then(|r| r.name.as_deref()) == Some(pod))
                .collect::<Vec<K8sEvent>>()
        }
    };
    for _ in 0..3 {
        publish("SuccessfulCreate", "demo-a").await;
    }
    publish("SuccessfulCreate", "demo-b").await;
    let a = about("demo-a").await;
    assert_eq!(a.len(), 1, "{a:?}");
    assert_eq!(a[0].series.as_ref().map(|s| s.count), Some(3));
    assert_eq!(a[0].reason.as_deref(), Some("SuccessfulCreate"));
    assert_eq!(a[0].reporting_controller.as_deref(), Some("kruise-manager"));
    let b = about("demo-b").await;
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].series, None);

    // Beyond its capacity the publisher forgets the oldest series: the next repeat of it
    // starts a new event instead of holding memory for it.
    publish("SuccessfulCreate", "demo-c").await;
    publish("SuccessfulCreate", "demo-a").await;
    let a = about("demo-a").await;
    assert_eq!(a.len(), 2, "{a:?}");

    // Through the queue: published in the background, in order, the repeats as one series.
    let queue = EventQueue::start(publisher, 16);
    for _ in 0..3 {
        queue.send(event("SuccessfulDelete", "demo-d"), regarding.clone());
    }
    support::eventually("the queued events", Duration::from_secs(10), || async {
        let d = about("demo-d").await;
        (d.len() == 1 && d[0].series.as_ref().map(|s| s.count) == Some(3)).then_some(())
    })
    .await;
    assert_eq!(queue.dropped().get(), 0);
}
