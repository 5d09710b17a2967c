//! Random pod templates, valid and not, through the real `kruise-cloneset` process against
//! kruise-sim (issue 26), or the real API server of `KRUISE_TEST_KUBECONFIG`: the API server
//! calls its webhooks over HTTPS. `KRUISE_FUZZ_CASES` sets the number of templates (32). For every template either the validating webhook refuses the CloneSet with a
//! field path under `spec.template`, or the controller's pod writes succeed (the pod is
//! created and updated in place to a new image); and no CloneSet loops: each costs a
//! bounded number of pod writes, and once all are done the pods see no writes at all.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_sim::Counters;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Value, json};
use support::{WAIT, eventually, pods_of};

const BIN: &str = env!("CARGO_BIN_EXE_kruise-cloneset");
/// Pod creates and patches one CloneSet of one pod may cost from creation through an
/// in-place update settling: create, the kubelet's and the controller's status and
/// lifecycle writes, the in-place update's conditions and patch. A hot loop sends hundreds
/// a second.
const MAX_POD_WRITES_PER_CLONESET: u64 = 20;

fn resource() -> ApiResource {
    ApiResource {
        group: "apps.kruise.io".into(),
        version: "v1beta1".into(),
        api_version: "apps.kruise.io/v1beta1".into(),
        kind: "CloneSet".into(),
        plural: "clonesets".into(),
    }
}

/// One field of a template: where it goes, the values kube-apiserver accepts there (`None`
/// leaves it out) and some it refuses.
struct TemplateField {
    at: &'static str,
    valid: Vec<Option<Value>>,
    invalid: Vec<Value>,
}

/// The fields a case draws: `at` is a JSON pointer into the template, `/extra` a second
/// container (`invalid`: one named like the first).
fn fields() -> Vec<TemplateField> {
    let field =
        |at, valid: Vec<Option<Value>>, invalid: Vec<Value>| TemplateField { at, valid, invalid };
    vec![
        field(
            "/metadata/annotations",
            vec![None, Some(json!({"example.com/ok": "v"}))],
            vec![json!({"bad key!": "v"}), json!({"/x": "v"})],
        ),
        field(
            "/metadata/labels/tier",
            vec![None, Some(json!("front_end-1"))],
            vec![json!("-bad"), json!("x".repeat(64))],
        ),
        field(
            "/spec/containers/0/name",
            vec![Some(json!("main")), Some(json!("side"))],
            vec![json!("Main_1"), json!("")],
        ),
        field(
            "/spec/containers/0/image",
            vec![Some(json!("nginx:1"))],
            vec![json!(""), json!(" ")],
        ),
        field(
            "/spec/containers/0/ports",
            vec![
                None,
                Some(
                    json!([{"name": "http", "containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}]),
                ),
            ],
            vec![
                json!([{"containerPort": 70000}]),
                json!([{"name": "a-very-long-port-name", "containerPort": 80}]),
                json!([{"containerPort": 53, "protocol": "ICMP"}]),
                json!([{"name": "http", "containerPort": 80}, {"name": "http", "containerPort": 81}]),
            ],
        ),
        field(
            "/spec/containers/0/env",
            vec![
                None,
                Some(
                    json!([{"name": "my.var with space", "value": "1"}, {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]),
                ),
            ],
            vec![
                json!([{"name": "A=B", "value": "1"}]),
                json!([{"name": "POD", "valueFrom": {}}]),
            ],
        ),
        // Valid requests the simulated nodes can hold: an extended resource such as
        // `example.com/gpu` would keep the pod Pending (no node advertises one).
        field(
            "/spec/containers/0/resources",
            vec![
                None,
                Some(
                    json!({"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "128Mi"}}),
                ),
            ],
            vec![
                json!({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
                json!({"requests": {"memory": "-1"}}),
                json!({"requests": {"example.com/gpu": "1"}}),
            ],
        ),
        field(
            "/spec/containers/0/readinessProbe",
            vec![
                None,
                Some(json!({"httpGet": {"port": 80}})),
                Some(json!({"tcpSocket": {"port": "http"}, "periodSeconds": 0})),
            ],
            vec![
                json!({}),
                json!({"exec": {"command": []}}),
                json!({"tcpSocket": {"port": 80}, "periodSeconds": -1}),
                json!({"exec": {"command": ["true"]}, "httpGet": {"port": 80}}),
            ],
        ),
        field(
            "/spec/containers/0/volumeMounts",
            vec![None, Some(json!([{"name": "data", "mountPath": "/data"}]))],
            vec![
                json!([{"name": "missing", "mountPath": "/data"}]),
                json!([{"name": "data", "mountPath": "/a"}, {"name": "data", "mountPath": "/a"}]),
            ],
        ),
        field(
            "/spec/volumes",
            vec![
                Some(json!([{"name": "data", "emptyDir": {}}])),
                Some(json!([{"name": "data", "configMap": {"name": "cfg"}}])),
            ],
            vec![
                json!([{"name": "data"}]),
                json!([{"name": "data", "emptyDir": {}}, {"name": "data", "emptyDir": {}}]),
                json!([{"name": "data", "emptyDir": {}, "hostPath": {"path": "/x"}}]),
            ],
        ),
        field(
            "/spec/restartPolicy",
            vec![None, Some(json!("Always"))],
            vec![json!("Never"), json!("Sometimes")],
        ),
        field(
            "/spec/dnsPolicy",
            vec![None, Some(json!("ClusterFirst"))],
            vec![json!("Cluster"), json!("None")],
        ),
        field(
            "/extra",
            vec![None, Some(json!({"name": "side2", "image": "busybox"}))],
            vec![Value::Null],
        ),
    ]
}

/// Sets `value` at `pointer` in `doc`, creating the objects on the way (array indices must
/// exist).
fn set(doc: &mut Value, pointer: &str, value: Value) {
    let mut at = doc;
    let parts: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        let last = i == parts.len() - 1;
        at = match at {
            Value::Array(items) => &mut items[part.parse::<usize>().unwrap()],
            other => {
                let map = other.as_object_mut().unwrap();
                if last {
                    map.insert((*part).to_string(), value);
                    return;
                }
                map.entry(part.to_string()).or_insert_with(|| json!({}))
            }
        };
    }
}

/// A pod template (without the CloneSet's own `app` label): a valid choice for every field,
/// and in about half the cases one field set to a value kube-apiserver refuses.
fn template() -> impl Strategy<Value = Value> {
    let n = fields().len();
    (
        proptest::collection::vec(0..8usize, n),
        proptest::option::weighted(0.5, (0..n, 0..8usize)),
    )
        .prop_map(|(picks, defect)| {
            let mut template = json!({"metadata": {}, "spec": {"containers": [{}]}});
            let mut extra = None;
            let mut duplicate_first = false;
            for (i, f) in fields().into_iter().enumerate() {
                let value = match defect {
                    Some((d, pick)) if d == i => Some(f.invalid[pick % f.invalid.len()].clone()),
                    _ => f.valid[picks[i] % f.valid.len()].clone(),
                };
                match (f.at, value) {
                    ("/extra", Some(Value::Null)) => duplicate_first = true,
                    ("/extra", value) => extra = value,
                    (at, Some(value)) => set(&mut template, at, value),
                    (_, None) => {}
                }
            }
            let first = template["spec"]["containers"][0].clone();
            let containers = template["spec"]["containers"].as_array_mut().unwrap();
            if duplicate_first {
                containers.push(json!({"name": first["name"], "image": "busybox"}));
            }
            containers.extend(extra);
            template
        })
}

fn cloneset(name: &str, mut template: Value) -> DynamicObject {
    template["metadata"]["labels"]["app"] = json!(name);
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "CloneSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": template,
            "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}},
        },
    }))
    .unwrap()
}

fn pod_writes(counters: &Counters) -> u64 {
    counters.count("create", "pods") + counters.count("patch", "pods")
}

/// The number of templates a run tries: `KRUISE_FUZZ_CASES`, else 32.
fn cases() -> u32 {
    std::env::var("KRUISE_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(32)
}

fn status_field(cs: &DynamicObject, field: &str) -> i64 {
    cs.data["status"][field].as_i64().unwrap_or(0)
}

/// One template: refused with a field path (`false`), or its pod created and updated in
/// place, at a bounded cost in pod writes (`true`).
async fn one_case(counters: &Counters, client: &Client, name: &str, template: Value) -> bool {
    let clonesets: Api<DynamicObject> = Api::default_namespaced_with(client.clone(), &resource());
    let before = pod_writes(counters);
    let created = clonesets
        .create(&PostParams::default(), &cloneset(name, template.clone()))
        .await;
    let Ok(_) = created else {
        let err = created.unwrap_err();
        let message = err.to_string();
        assert!(
            matches!(&err, kube::Error::Api(s) if s.code == 422)
                && message.contains("vcloneset.kb.io")
                && message.contains("spec.template."),
            "refused without a template field path: {message}\n{template:#}"
        );
        return false;
    };
    let wait = WAIT;
    eventually(
        &format!("{name}: its pod created and ready"),
        wait,
        || async {
            let cs = clonesets.get(name).await.ok()?;
            (status_field(&cs, "readyReplicas") == 1).then_some(())
        },
    )
    .await;
    clonesets
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([{"op": "replace",
                    "path": "/spec/template/spec/containers/0/image", "value": "nginx:2"}]))
                .unwrap(),
            ),
        )
        .await
        .unwrap();
    eventually(&format!("{name}: updated in place"), wait, || async {
        let cs = clonesets.get(name).await.ok()?;
        let pods: Vec<Pod> = pods_of(client, name).await;
        let image_updated = pods.len() == 1
            && pods[0].spec.as_ref()?.containers[0].image.as_deref() == Some("nginx:2");
        (image_updated
            && status_field(&cs, "updatedReadyReplicas") == 1
            && status_field(&cs, "readyReplicas") == 1)
            .then_some(())
    })
    .await;
    let warnings = kruise_testkit::warnings_about(client, client.default_namespace(), name).await;
    assert!(warnings.is_empty(), "{name}: {warnings:?}\n{template:#}");
    let writes = pod_writes(counters) - before;
    assert!(
        writes <= MAX_POD_WRITES_PER_CLONESET,
        "{name}: {writes} pod writes\n{template:#}"
    );
    clonesets
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
    true
}

#[test]
fn random_templates_are_refused_with_a_field_path_or_run_without_looping() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (cluster, client) = runtime.block_on(support::cluster_with_crd());
    let kubeconfig = cluster.kubeconfig_path();
    let port = kruise_testkit::free_port();
    let binary = kruise_testkit::spawn_replica(
        BIN,
        &kubeconfig,
        port,
        &["--namespace", client.default_namespace()],
        &[],
    );
    runtime.block_on(async {
        let clonesets: Api<DynamicObject> =
            Api::default_namespaced_with(client.clone(), &resource());
        // The webhooks are in place once an invalid CloneSet is refused.
        eventually(
            "the validating webhook serving",
            Duration::from_secs(60),
            || async {
                let invalid = cloneset("probe", json!({"spec": {"containers": []}}));
                let err = clonesets
                    .create(&PostParams::default(), &invalid)
                    .await
                    .err()?;
                err.to_string().contains("vcloneset.kb.io").then_some(())
            },
        )
        .await;
    });

    let mut runner = kruise_testkit::oracle::seeded_runner(Config {
        cases: cases(),
        max_shrink_iters: 8,
        failure_persistence: None,
        ..Config::default()
    });
    let case = AtomicUsize::new(0);
    let ran = AtomicUsize::new(0);
    let result = runner.run(&template(), |template| {
        let n = case.fetch_add(1, Ordering::Relaxed);
        let name = format!("fuzz-{n}");
        if runtime.block_on(one_case(cluster.counters(), &client, &name, template)) {
            ran.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // Both outcomes were exercised.
    let (cases, ran) = (case.into_inner(), ran.into_inner());
    assert!(0 < ran && ran < cases, "{ran} of {cases} templates ran");

    // Nothing loops once every case is done: no pod writes in a quiet second and a half
    // (the deleted CloneSets' pods are gone by then).
    runtime.block_on(async {
        eventually("every fuzzed pod gone", Duration::from_secs(30), || async {
            let pods: Api<Pod> = Api::default_namespaced(client.clone());
            let left = pods.list(&Default::default()).await.ok()?.items;
            left.iter()
                .all(|p| !p.name_any().starts_with("fuzz-"))
                .then_some(())
        })
        .await;
        let before = pod_writes(cluster.counters());
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(
            pod_writes(cluster.counters()),
            before,
            "pod writes with nothing to do"
        );
        // Stopped first, so it republishes nothing the clean-up removes.
        drop(binary);
        cluster.shutdown().await;
    });
}
