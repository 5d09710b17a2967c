//! Differential tests against OpenKruise's and Kubernetes' own Go functions: the Go
//! programs under `testkit/oracles` (the CloneSet template
//! defaults, revision and claim-template hashes; the SidecarSet hashes and revision;
//! resource quantities; under `families/` the Advanced StatefulSet and DaemonSet defaults and
//! revisions, StatefulSet conversion, and the StatefulSet, CloneSet and DaemonSet webhook
//! validation) are built by `.ci/run` into `KRUISE_ORACLE_BIN_DIR` and fed inputs the Rust
//! side generates, and both sides' outputs are compared. The tests that use this
//! are `#[ignore]`d (they need Go's build) and run by `.ci/run` with `--ignored`.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Map, Value, json};

/// Where `.ci/run` builds the oracles.
pub const BIN_DIR_VAR: &str = "KRUISE_ORACLE_BIN_DIR";

fn binary(name: &str) -> PathBuf {
    let dir = std::env::var_os(BIN_DIR_VAR).unwrap_or_else(|| {
        panic!(
            "{BIN_DIR_VAR} is not set: build the oracles as .ci/run does (go build in \
             testkit/oracles) and point it at them"
        )
    });
    PathBuf::from(dir).join(name)
}

/// Runs oracle `name` with `stdin` and returns its stdout.
pub fn run(name: &str, stdin: &[u8]) -> String {
    let path = binary(name);
    let mut child = Command::new(&path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", path.display()));
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    // Written from another thread: the oracle answers while it reads, and a full stdout
    // pipe would otherwise block both sides.
    let writer = std::thread::spawn(move || input.write_all(&stdin).unwrap());
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(output.status.success(), "{} failed", path.display());
    String::from_utf8(output.stdout).unwrap()
}

/// Runs oracle `name` on a stream of JSON inputs; its JSON results, one per input, in order.
pub fn run_json(name: &str, inputs: &[Value]) -> Vec<Value> {
    let mut stdin = Vec::new();
    for input in inputs {
        serde_json::to_writer(&mut stdin, input).unwrap();
        stdin.push(b'\n');
    }
    let stdout = run(name, &stdin);
    let results: Vec<Value> = serde_json::Deserializer::from_str(&stdout)
        .into_iter()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(results.len(), inputs.len(), "one result per input");
    results
}

/// `count` values drawn from `strategy` by a runner seeded from `KRUISE_ORACLE_SEED` (a
/// number, default 0), so a failure's input is drawn again by the same seed.
pub fn samples<S: Strategy>(strategy: S, count: usize) -> Vec<S::Value> {
    let mut runner = seeded_runner(Config::default());
    (0..count)
        .map(|_| strategy.new_tree(&mut runner).unwrap().current())
        .collect()
}

/// Runs `test` on a thread with a 64 MiB stack: drawing a whole workload (a pod template
/// inside a spec of a dozen optional parts) nests proptest's strategies deeper than a test
/// thread's default stack holds in a debug build.
pub fn on_big_stack(test: impl FnOnce() + Send + 'static) {
    let outcome = std::thread::Builder::new()
        .name("oracle".into())
        .stack_size(64 << 20)
        .spawn(test)
        .unwrap()
        .join();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// A resource quantity Kubernetes accepts, written as users write them (fractions, decimal
/// and binary suffixes, exponents).
pub fn resource_quantity() -> impl Strategy<Value = String> {
    (
        "[0-9]{1,5}",
        option::of("[0-9]{1,4}"),
        prop_oneof![
            Just(""),
            Just("m"),
            Just("k"),
            Just("M"),
            Just("G"),
            Just("Ki"),
            Just("Mi"),
            Just("Gi"),
            Just("Ti"),
            Just("e3"),
            Just("e-2"),
            Just("n"),
            Just("u")
        ],
    )
        .prop_map(|(whole, fraction, suffix)| match fraction {
            Some(f) => format!("{whole}.{f}{suffix}"),
            None => format!("{whole}{suffix}"),
        })
}

/// A container's (or pod's) `resources`: requests and limits, either possibly empty.
pub fn resources() -> impl Strategy<Value = Value> {
    let list = || {
        btree_map(
            prop_oneof![Just("cpu"), Just("memory"), Just("ephemeral-storage")],
            resource_quantity(),
            0..3,
        )
        .prop_map(|m| json!(m))
    };
    (option::of(list()), option::of(list())).prop_map(|(requests, limits)| {
        let mut r = Map::new();
        if let Some(q) = requests {
            r.insert("requests".into(), q);
        }
        if let Some(q) = limits {
            r.insert("limits".into(), q);
        }
        Value::Object(r)
    })
}

/// A probe or lifecycle handler: httpGet (path and scheme optional), tcpSocket or exec.
pub fn handler() -> impl Strategy<Value = Value> {
    prop_oneof![
        (
            option::of("/[a-z]{0,6}"),
            option::of(prop_oneof![Just("HTTP"), Just("HTTPS")])
        )
            .prop_map(|(path, scheme)| {
                let mut get = json!({"port": 8080});
                if let Some(p) = path {
                    get["path"] = json!(p);
                }
                if let Some(s) = scheme {
                    get["scheme"] = json!(s);
                }
                json!({"httpGet": get})
            }),
        Just(json!({"tcpSocket": {"port": "http"}})),
        Just(json!({"exec": {"command": ["true"]}})),
    ]
}

/// A probe with some of its numbers set.
pub fn probe() -> impl Strategy<Value = Value> {
    // 0 is what Go reads as unset (`omitempty`), so it is defaulted too.
    (handler(), option::of(0..30i32), option::of(0..5i32)).prop_map(|(mut p, period, failures)| {
        if let Some(s) = period {
            p["periodSeconds"] = json!(s);
        }
        if let Some(f) = failures {
            p["failureThreshold"] = json!(f);
        }
        p
    })
}

/// A container `name` with the fields defaulting touches, some set, some not.
pub fn container(name: String) -> impl Strategy<Value = Value> {
    (
        prop_oneof![Just("nginx"), Just("nginx:latest"), Just("nginx:1.25"), Just("busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")],
        option::of(prop_oneof![Just("Always"), Just("IfNotPresent"), Just("Never")]),
        vec((1..65535i32, option::of(prop_oneof![Just("TCP"), Just("UDP"), Just("SCTP")])), 0..3),
        vec(any::<bool>(), 0..3),
        resources(),
        (
            option::of(probe()),
            option::of(probe()),
            option::of(probe()),
            option::of(handler()),
        ),
        option::of(prop_oneof![Just("File"), Just("FallbackToLogsOnError")]),
        any::<bool>(),
    )
        .prop_map(move |(image, pull, ports, env, resources, (readiness, liveness, startup, pre_stop), message_policy, empties)| {
            let mut c = json!({"name": name, "image": image});
            // Empty lists, nulls and zero values, as hand-written or generated manifests
            // (a chart's `{{ .Values.tty }}`) have them; Go writes none of them back.
            if empties {
                c["args"] = json!([]);
                c["env"] = json!([]);
                c["securityContext"] = Value::Null;
                c["stdin"] = json!(false);
                c["tty"] = json!(false);
                c["workingDir"] = json!("");
            }
            if let Some(p) = pull {
                c["imagePullPolicy"] = json!(p);
            }
            if !ports.is_empty() {
                c["ports"] = ports
                    .iter()
                    .map(|(port, protocol)| match protocol {
                        Some(p) => json!({"containerPort": port, "protocol": p}),
                        None if empties => json!({"containerPort": port, "hostPort": 0, "name": ""}),
                        None => json!({"containerPort": port}),
                    })
                    .collect();
            }
            if !env.is_empty() {
                c["env"] = env
                    .iter()
                    .enumerate()
                    .map(|(i, field)| match field {
                        true => json!({"name": format!("F{i}"), "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}),
                        false => json!({"name": format!("V{i}"), "value": "x"}),
                    })
                    .collect();
            }
            if resources.as_object().is_some_and(|r| !r.is_empty()) {
                c["resources"] = resources;
            }
            if let Some(p) = readiness {
                c["readinessProbe"] = p;
            }
            if let Some(p) = liveness {
                c["livenessProbe"] = p;
            }
            if let Some(p) = startup {
                c["startupProbe"] = p;
            }
            if let Some(h) = pre_stop {
                c["lifecycle"] = json!({"preStop": h});
            }
            if let Some(p) = message_policy {
                c["terminationMessagePolicy"] = json!(p);
            }
            c
        })
}

/// A volume `name` of a source kind defaulting touches.
pub fn volume(name: String) -> impl Strategy<Value = Value> {
    let n = name.clone();
    prop_oneof![
        Just(json!({"emptyDir": {}})),
        Just(json!({"configMap": {"name": "cm"}})),
        Just(json!({"secret": {"secretName": "s"}})),
        Just(json!({"hostPath": {"path": "/var/x"}})),
        Just(json!({"downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}})),
        Just(json!({"projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}})),
        resource_quantity().prop_map(|q| json!({"ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": q}}}}}})),
    ]
    .prop_map(move |mut v| {
        v["name"] = json!(n);
        v
    })
}

/// A pod template as users write them, for defaulting and hashing.
pub fn pod_template() -> impl Strategy<Value = Value> {
    (
        (1..4usize).prop_flat_map(|n| {
            (0..n)
                .map(|i| container(format!("c{i}")))
                .collect::<Vec<_>>()
        }),
        option::of(container("init".into())),
        (0..3usize).prop_flat_map(|n| (0..n).map(|i| volume(format!("v{i}"))).collect::<Vec<_>>()),
        option::of(prop_oneof![
            Just("Always"),
            Just("OnFailure"),
            Just("Never")
        ]),
        option::of(prop_oneof![
            Just("ClusterFirst"),
            Just("Default"),
            Just("None")
        ]),
        option::of(0..120i64),
        option::of(any::<bool>()),
        btree_map("[a-z]{1,5}", "[a-z0-9]{0,5}", 0..3),
        option::of(resources()),
    )
        .prop_map(
            |(
                containers,
                init,
                volumes,
                restart,
                dns,
                grace,
                host_network,
                labels,
                pod_resources,
            )| {
                let mut spec = json!({"containers": containers});
                if let Some(c) = init {
                    spec["initContainers"] = json!([c]);
                }
                if !volumes.is_empty() {
                    spec["volumes"] = json!(volumes);
                }
                if let Some(r) = restart {
                    spec["restartPolicy"] = json!(r);
                }
                if let Some(d) = dns {
                    spec["dnsPolicy"] = json!(d);
                }
                if let Some(g) = grace {
                    spec["terminationGracePeriodSeconds"] = json!(g);
                }
                match host_network {
                    Some(true) => spec["hostNetwork"] = json!(true),
                    // Zero values Go leaves out, and two pointers (`*bool`) it keeps.
                    Some(false) => {
                        spec["hostNetwork"] = json!(false);
                        spec["hostIPC"] = json!(false);
                        spec["serviceAccountName"] = json!("");
                        spec["shareProcessNamespace"] = json!(false);
                        spec["enableServiceLinks"] = json!(false);
                    }
                    None => {}
                }
                if let Some(r) =
                    pod_resources.filter(|r| r.as_object().is_some_and(|r| !r.is_empty()))
                {
                    spec["resources"] = r;
                }
                json!({"metadata": {"labels": labels}, "spec": spec})
            },
        )
}

/// Up to two claim templates `data<i>`.
pub fn claim_templates() -> impl Strategy<Value = Vec<Value>> {
    (0..3usize).prop_flat_map(|n| {
        (0..n)
            .map(|i| {
                (
                    resource_quantity(),
                    option::of(resource_quantity()),
                    option::of(prop_oneof![Just("Filesystem"), Just("Block")]),
                )
                    .prop_map(move |(request, limit, mode)| {
                        let mut spec = json!({"accessModes": ["ReadWriteOnce"],
                                              "resources": {"requests": {"storage": request}}});
                        if let Some(l) = limit {
                            spec["resources"]["limits"] = json!({"storage": l});
                        }
                        if let Some(m) = mode {
                            spec["volumeMode"] = json!(m);
                        }
                        json!({"metadata": {"name": format!("data{i}")}, "spec": spec})
                    })
            })
            .collect::<Vec<_>>()
    })
}

/// Compares kruise-rs's field errors (`ours`, one list of `{"type", "field"}` per input)
/// with those `program` (OpenKruise's validation) prints for `inputs`: accepted or refused,
/// the first error's type and field, and the set of fields refused. `their_field` maps a
/// field path of OpenKruise's to ours (where a field is spelled differently).
pub fn compare_validation(
    program: &str,
    inputs: &[Value],
    ours: &[Vec<Value>],
    their_field: impl Fn(&str) -> String,
) {
    let expected = run_json(program, inputs);
    let mut mismatches = Mismatches::default();
    let fields = |errors: &[Value]| {
        let mut fields: Vec<Value> = errors.iter().map(|e| e["field"].clone()).collect();
        fields.sort_by_key(Value::to_string);
        fields.dedup();
        serde_json::json!(fields)
    };
    for ((input, go), ours) in inputs.iter().zip(&expected).zip(ours) {
        let theirs: Vec<Value> = go
            .as_array()
            .map(|errors| {
                errors
                    .iter()
                    .map(|e| {
                        let field = their_field(e["field"].as_str().unwrap_or_default());
                        serde_json::json!({"type": e["type"], "field": field})
                    })
                    .collect()
            })
            .unwrap_or_default();
        let accepted = |errors: &[Value]| serde_json::json!(errors.is_empty());
        mismatches.check("accepted", input, &accepted(ours), &accepted(&theirs));
        mismatches.check(
            "first error",
            input,
            &serde_json::json!(ours.first()),
            &serde_json::json!(theirs.first()),
        );
        mismatches.check("fields refused", input, &fields(ours), &fields(&theirs));
    }
    mismatches.assert_none();
}

/// The checks of a differential test that found kruise-rs and OpenKruise apart.
#[derive(Default)]
pub struct Mismatches {
    found: Vec<(&'static str, String)>,
    checked: usize,
}

impl Mismatches {
    /// Compares `ours` with `theirs` for check `what` on `input`.
    pub fn check(&mut self, what: &'static str, input: &Value, ours: &Value, theirs: &Value) {
        self.checked += 1;
        if ours != theirs {
            self.found.push((
                what,
                format!(
                    "{what} differs for input {input}\n  kruise-rs: {ours}\n  OpenKruise: {theirs}"
                ),
            ));
        }
    }

    /// Panics, with the count per check and the first three cases, unless all matched.
    pub fn assert_none(&self) {
        if self.found.is_empty() {
            println!("{} checks, all equal to OpenKruise's", self.checked);
            return;
        }
        let mut per_check = std::collections::BTreeMap::<&str, usize>::new();
        for (what, _) in &self.found {
            *per_check.entry(what).or_default() += 1;
        }
        let shown = std::env::var("KRUISE_ORACLE_SHOW")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3);
        let first: Vec<&str> = self
            .found
            .iter()
            .take(shown)
            .map(|(_, m)| m.as_str())
            .collect();
        panic!(
            "{} of {} checks differ ({per_check:?}); the first:\n{}",
            self.found.len(),
            self.checked,
            first.join("\n")
        );
    }
}

/// A runner with `config` whose draws are seeded from `KRUISE_ORACLE_SEED` (a number,
/// default 0; printed): the same inputs every run, so a suite's outcome does not depend on
/// chance (a fuzz suite of 8 cases asserting it saw both refusals and acceptances) and a
/// failure's input is drawn again by its seed.
pub fn seeded_runner(config: Config) -> TestRunner {
    let seed: u64 = std::env::var("KRUISE_ORACLE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    println!("KRUISE_ORACLE_SEED={seed}");
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
}
