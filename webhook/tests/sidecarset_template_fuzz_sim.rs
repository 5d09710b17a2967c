//! Random sidecar containers and volumes, valid and not, through kruise-sidecarset's
//! webhooks (in-process) and kruise-webhook's pod chain (a process), both called by
//! kruise-sim (or the real API server of `KRUISE_TEST_KUBECONFIG`) over HTTPS (issue 26).
//! For every SidecarSet either its validating webhook refuses it with a field path under
//! `spec`, or a pod it selects is created with the sidecar injected (the injected pod
//! passes the API server's pod validation); and no object loops: each case costs a bounded
//! number of pod and SidecarSet writes. `KRUISE_FUZZ_CASES` sets the number of SidecarSets
//! (24).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kruise_testkit as support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_sidecarset::api::v1beta1::SidecarSet;
use kruise_sim::Counters;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, ResourceExt as _};
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Value, json};

mod sidecarset_binaries;
const WAIT: Duration = Duration::from_secs(30);
/// Pod and SidecarSet writes one case may cost: the pod's create, the kubelet's status
/// writes, the SidecarSet controller's status. A hot loop sends hundreds a second.
const MAX_WRITES_PER_CASE: u64 = 20;

/// Where a drawn value goes in the sidecar container (`/container/...`) or the SidecarSet's
/// volumes, the values kube-apiserver accepts there (`None` leaves it out), and some it
/// refuses.
struct Field {
    at: &'static str,
    valid: Vec<Option<Value>>,
    invalid: Vec<Value>,
}

fn fields() -> Vec<Field> {
    let field = |at, valid: Vec<Option<Value>>, invalid: Vec<Value>| Field { at, valid, invalid };
    vec![
        field(
            "name",
            vec![Some(json!("sidecar")), Some(json!("log-agent"))],
            vec![json!("Side_Car"), json!("")],
        ),
        field(
            "image",
            vec![Some(json!("busybox:1"))],
            vec![json!(""), json!(" ")],
        ),
        field(
            "ports",
            vec![
                None,
                Some(json!([{"name": "metrics", "containerPort": 9090}])),
            ],
            vec![
                json!([{"containerPort": 0}]),
                json!([{"name": "metrics-port-too-long", "containerPort": 9090}]),
                json!([{"containerPort": 9090, "protocol": "HTTP"}]),
            ],
        ),
        field(
            "env",
            vec![None, Some(json!([{"name": "LOG.LEVEL", "value": "info"}]))],
            vec![
                json!([{"name": "A=B", "value": "1"}]),
                json!([{"name": "X", "value": "1", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]),
            ],
        ),
        field(
            "resources",
            vec![
                None,
                Some(json!({"requests": {"cpu": "50m"}, "limits": {"cpu": "100m"}})),
            ],
            vec![
                json!({"requests": {"cpu": "200m"}, "limits": {"cpu": "100m"}}),
                json!({"limits": {"cpu": "-1"}}),
            ],
        ),
        field(
            "livenessProbe",
            vec![
                None,
                Some(json!({"exec": {"command": ["true"]}, "successThreshold": 1})),
            ],
            vec![
                json!({"exec": {"command": ["true"]}, "successThreshold": 3}),
                json!({"initialDelaySeconds": 1}),
            ],
        ),
        field(
            "volumeMounts",
            vec![None, Some(json!([{"name": "logs", "mountPath": "/logs"}]))],
            vec![
                json!([{"name": "nope", "mountPath": "/logs"}]),
                json!([{"name": "logs", "mountPath": ""}]),
            ],
        ),
        field(
            "volumes",
            vec![Some(json!([{"name": "logs", "emptyDir": {}}]))],
            vec![
                json!([{"name": "logs"}]),
                json!([{"name": "Logs", "emptyDir": {}}]),
                json!([{"name": "logs", "emptyDir": {}, "secret": {"secretName": "s"}}]),
            ],
        ),
    ]
}

/// A sidecar container and the SidecarSet's volumes: a valid choice for every field, and in
/// about half the cases one field set to a value kube-apiserver refuses.
fn sidecar() -> impl Strategy<Value = (Value, Value)> {
    let n = fields().len();
    (
        proptest::collection::vec(0..8usize, n),
        proptest::option::weighted(0.5, (0..n, 0..8usize)),
    )
        .prop_map(|(picks, defect)| {
            let mut container = json!({"command": ["sleep", "999d"]});
            let mut volumes = json!([]);
            for (i, f) in fields().into_iter().enumerate() {
                let value = match defect {
                    Some((d, pick)) if d == i => Some(f.invalid[pick % f.invalid.len()].clone()),
                    _ => f.valid[picks[i] % f.valid.len()].clone(),
                };
                match (f.at, value) {
                    ("volumes", Some(v)) => volumes = v,
                    (at, Some(v)) => container[at] = v,
                    (_, None) => {}
                }
            }
            (container, volumes)
        })
}

fn pod_and_sidecarset_writes(c: &Counters) -> u64 {
    ["create", "update", "patch"]
        .iter()
        .map(|verb| c.count(verb, "pods") + c.count(verb, "sidecarsets"))
        .sum()
}

/// One case: refused with a field path (`false`), or a selected pod created with the
/// sidecar at a bounded cost in writes (`true`).
/// The number of SidecarSets a run tries: `KRUISE_FUZZ_CASES`, else 24.
fn cases() -> u32 {
    std::env::var("KRUISE_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(24)
}

async fn one_case(
    counters: &Counters,
    client: &Client,
    n: usize,
    container: Value,
    volumes: Value,
) -> bool {
    let app = format!("fuzz-{n}");
    let sets: Api<SidecarSet> = Api::all(client.clone());
    let set: SidecarSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": app},
        "spec": {"selector": {"matchLabels": {"app": app}},
                 "containers": [container.clone()],
                 "volumes": volumes.clone()}
    }))
    .unwrap();
    let before = pod_and_sidecarset_writes(counters);
    if let Err(err) = sets.create(&PostParams::default(), &set).await {
        let message = err.to_string();
        assert!(
            matches!(&err, kube::Error::Api(s) if s.code == 422)
                && message.contains("vsidecarset.kb.io")
                && message.contains("spec."),
            "refused without a field path: {message}\n{container:#}\n{volumes:#}"
        );
        return false;
    }
    // kruise-webhook injects once its cache holds the SidecarSet; until then a pod may pass
    // without the sidecar (deleted and tried again). A pod the API server refuses after
    // injection is the failure this test looks for.
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let attempts = AtomicUsize::new(0);
    let injected = support::eventually(&format!("{app}: a pod with the sidecar"), WAIT, || async {
        let attempt = attempts.fetch_add(1, Ordering::Relaxed);
        let name = format!("{app}-{attempt}");
        let pod = match pods
            .create(&PostParams::default(), &support::app_pod(&name, &app))
            .await
        {
            Ok(pod) => pod,
            Err(e) => {
                panic!("a pod the SidecarSet selects was refused: {e}\n{container:#}\n{volumes:#}")
            }
        };
        if pod.spec.as_ref().is_some_and(|s| s.containers.len() > 1) {
            return Some(pod);
        }
        pods.delete(&name, &DeleteParams::default()).await.unwrap();
        None
    })
    .await;
    let attempt = attempts.into_inner();
    assert!(
        injected.spec.as_ref().unwrap().containers.len() == 2,
        "{app}: the sidecar injected once"
    );
    let writes = pod_and_sidecarset_writes(counters) - before;
    assert!(
        writes <= MAX_WRITES_PER_CASE + 2 * attempt as u64,
        "{app}: {writes} writes\n{container:#}"
    );
    sets.delete(&app, &DeleteParams::default()).await.unwrap();
    pods.delete(&injected.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    true
}

#[test]
fn random_sidecars_are_refused_with_a_field_path_or_injected_into_valid_pods() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let binary = kruise_sidecarset::binary::binary().unwrap();
    let (cluster, client) =
        runtime.block_on(support::cluster_with_crds(1, binary.crd_definitions()));
    let binaries = runtime.block_on(sidecarset_binaries::start(&cluster, &[]));

    let mut runner = kruise_testkit::oracle::seeded_runner(Config {
        cases: cases(),
        max_shrink_iters: 8,
        failure_persistence: None,
        ..Config::default()
    });
    let case = AtomicUsize::new(0);
    let injected = AtomicUsize::new(0);
    let result = runner.run(&sidecar(), |(container, volumes)| {
        let n = case.fetch_add(1, Ordering::Relaxed);
        if runtime.block_on(one_case(cluster.counters(), &client, n, container, volumes)) {
            injected.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (cases, injected) = (case.into_inner(), injected.into_inner());
    assert!(
        0 < injected && injected < cases,
        "{injected} of {cases} SidecarSets injected"
    );
    runtime.block_on(async {
        binaries.stop().await;
        cluster.shutdown().await;
    });
}
