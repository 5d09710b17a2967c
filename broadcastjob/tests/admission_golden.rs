//! The BroadcastJob and AdvancedCronJob webhooks as the API server sees them: AdmissionReview
//! JSON in, response out (the JSONPatch of the defaults; a denial with HTTP 422 and the field
//! path), the ConversionReview at `/convert`, and arbitrary JSON never panicking a handler.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kruise_broadcastjob::admission::{routes, routes_for};
use kruise_testkit::admission::{self, Target, decoded_patch};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};

const BCJ_MUTATE: &str = "/mutate-apps-kruise-io-broadcastjob";
const BCJ_VALIDATE: &str = "/validate-apps-kruise-io-broadcastjob";
const ACJ_MUTATE: &str = "/mutate-apps-kruise-io-advancedcronjob";
const ACJ_VALIDATE: &str = "/validate-apps-kruise-io-advancedcronjob";

fn review_body(
    kind: &str,
    resource: &str,
    version: &str,
    operation: &str,
    object: Value,
) -> Vec<u8> {
    let target = Target::apps(version, kind, resource, "demo");
    admission::review_body(target, operation, Some(object), None)
}

fn object(kind: &str, version: &str, spec: Value) -> Value {
    json!({
        "apiVersion": format!("apps.kruise.io/{version}"),
        "kind": kind,
        "metadata": {"name": "demo", "namespace": "default"},
        "spec": spec,
    })
}

async fn answer(path: &str, body: &[u8]) -> Value {
    let out = routes().review(path, body).await.unwrap();
    admission::response_of(&out)
}

fn pod_template() -> Value {
    json!({"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "x-unknown": 1}]}})
}

/// `pod_template()` with the pod defaults OpenKruise's webhooks write (`SetDefaultPodSpec`:
/// OpenKruise's `imagePullPolicy: Always`, Kubernetes' `SetDefaults_PodSpec` and
/// `SetDefaults_Container`), as Go encodes it: `creationTimestamp: null` and `resources: {}`.
/// The field unknown to Kubernetes stays.
fn defaulted_pod_template() -> Value {
    json!({
        "metadata": {"creationTimestamp": null},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "c", "image": "busybox", "x-unknown": 1,
                "imagePullPolicy": "Always",
                "resources": {},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File"
            }],
            "dnsPolicy": "ClusterFirst",
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "terminationGracePeriodSeconds": 30
        }
    })
}

/// The object as the API server stores it after the mutating webhook: its patch applied.
fn mutated(object: &Value, response: &Value) -> Value {
    assert_eq!(response["allowed"], true, "{response}");
    let mut object = object.clone();
    if response["patch"].is_null() {
        return object;
    }
    let patch: json_patch::Patch = serde_json::from_value(decoded_patch(response)).unwrap();
    json_patch::patch(&mut object, &patch).unwrap();
    object
}

fn update_body(kind: &str, resource: &str, object: Value, old: Value) -> Vec<u8> {
    let target = Target::apps("v1beta1", kind, resource, "demo");
    admission::review_body(target, "UPDATE", Some(object), Some(old))
}

#[tokio::test]
async fn broadcastjob_create_gets_openkruise_defaults_in_both_versions() {
    for version in ["v1alpha1", "v1beta1"] {
        let body = review_body(
            "BroadcastJob",
            "broadcastjobs",
            version,
            "CREATE",
            object("BroadcastJob", version, json!({"template": pod_template()})),
        );
        let response = answer(BCJ_MUTATE, &body).await;
        assert_eq!(response["allowed"], true);
        let mut patch = decoded_patch(&response);
        // The spec's own defaults, each an `add` of only that field.
        let spec_ops: Vec<Value> = patch
            .as_array_mut()
            .unwrap()
            .extract_if(.., |op| {
                !op["path"].as_str().unwrap().starts_with("/spec/template")
            })
            .collect();
        assert_eq!(
            spec_ops,
            vec![
                json!({"op": "add", "path": "/spec/completionPolicy", "value": {"type": "Always"}}),
                json!({"op": "add", "path": "/spec/failurePolicy", "value": {"type": "FailFast"}}),
                json!({"op": "add", "path": "/spec/parallelism", "value": 2147483647}),
            ],
            "{version}"
        );
        let sent = object("BroadcastJob", version, json!({"template": pod_template()}));
        assert_eq!(
            mutated(&sent, &response)["spec"]["template"],
            defaulted_pod_template(),
            "{version}"
        );
    }
}

#[tokio::test]
async fn broadcastjob_template_defaults_follow_the_update_and_the_feature_gate() {
    let defaulted_spec = json!({
        "template": defaulted_pod_template(),
        "completionPolicy": {"type": "Always"},
        "failurePolicy": {"type": "FailFast"},
        "parallelism": 2147483647
    });
    let stored = object("BroadcastJob", "v1beta1", defaulted_spec.clone());
    assert!(
        answer(
            BCJ_MUTATE,
            &review_body(
                "BroadcastJob",
                "broadcastjobs",
                "v1beta1",
                "CREATE",
                stored.clone()
            )
        )
        .await["patch"]
            .is_null()
    );

    // An UPDATE that leaves the template alone (here: pauses the job) does not default it,
    // so a template stored before the defaults existed is not rewritten.
    let mut paused = object(
        "BroadcastJob",
        "v1beta1",
        json!({"template": pod_template()}),
    );
    paused["spec"]["paused"] = json!(true);
    let mut old = paused.clone();
    old["spec"]["paused"] = json!(false);
    let response = answer(
        BCJ_MUTATE,
        &update_body("BroadcastJob", "broadcastjobs", paused.clone(), old),
    )
    .await;
    assert_eq!(
        mutated(&paused, &response)["spec"]["template"],
        pod_template()
    );

    // An UPDATE that changes the template gets the defaults in it.
    let mut changed = stored.clone();
    changed["spec"]["template"] = pod_template();
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = json!("busybox:1.37");
    let response = answer(
        BCJ_MUTATE,
        &update_body("BroadcastJob", "broadcastjobs", changed.clone(), stored),
    )
    .await;
    let mut want = defaulted_pod_template();
    want["spec"]["containers"][0]["image"] = json!("busybox:1.37");
    assert_eq!(mutated(&changed, &response)["spec"]["template"], want);

    // `TemplateNoDefaults`: the spec is defaulted, the template is not.
    let gates = kruise_core::featuregate::FeatureGates::parse("TemplateNoDefaults=true").unwrap();
    let sent = object(
        "BroadcastJob",
        "v1beta1",
        json!({"template": pod_template()}),
    );
    let body = review_body(
        "BroadcastJob",
        "broadcastjobs",
        "v1beta1",
        "CREATE",
        sent.clone(),
    );
    let out = routes_for(&gates).review(BCJ_MUTATE, &body).await.unwrap();
    let response = admission::response_of(&out);
    let mut want = defaulted_spec;
    want["template"] = pod_template();
    assert_eq!(mutated(&sent, &response)["spec"], want);
}

#[tokio::test]
async fn advancedcronjob_create_gets_openkruise_defaults() {
    for version in ["v1alpha1", "v1beta1"] {
        let spec = json!({"schedule": "*/1 * * * *", "template": {"jobTemplate": {"spec": {"template": pod_template()}}}});
        let sent = object("AdvancedCronJob", version, spec);
        let body = review_body(
            "AdvancedCronJob",
            "advancedcronjobs",
            version,
            "CREATE",
            sent.clone(),
        );
        let response = answer(ACJ_MUTATE, &body).await;
        assert_eq!(
            mutated(&sent, &response)["spec"],
            json!({
                "schedule": "*/1 * * * *",
                "template": {"jobTemplate": {"spec": {"template": defaulted_pod_template()}}},
                "concurrencyPolicy": "Allow",
                "failedJobsHistoryLimit": 1,
                "paused": false,
                "successfulJobsHistoryLimit": 3
            }),
            "{version}"
        );
    }
}

/// A `broadcastJobTemplate`'s pod template is defaulted too; its BroadcastJob spec is not
/// (OpenKruise leaves that to the child's own webhook).
#[tokio::test]
async fn advancedcronjob_broadcastjob_template_gets_pod_defaults_only() {
    let spec = json!({"schedule": "@hourly", "concurrencyPolicy": "Forbid", "paused": true,
                      "successfulJobsHistoryLimit": 0, "failedJobsHistoryLimit": 0,
                      "template": {"broadcastJobTemplate": {"spec": {"template": pod_template()}}}});
    let sent = object("AdvancedCronJob", "v1beta1", spec.clone());
    let body = review_body(
        "AdvancedCronJob",
        "advancedcronjobs",
        "v1beta1",
        "CREATE",
        sent.clone(),
    );
    let response = answer(ACJ_MUTATE, &body).await;
    let mut want = spec;
    want["template"]["broadcastJobTemplate"]["spec"]["template"] = defaulted_pod_template();
    assert_eq!(mutated(&sent, &response)["spec"], want);

    // `TemplateNoDefaults`: nothing to default, no patch.
    let gates = kruise_core::featuregate::FeatureGates::parse("TemplateNoDefaults=true").unwrap();
    let out = routes_for(&gates).review(ACJ_MUTATE, &body).await.unwrap();
    let response = admission::response_of(&out);
    assert_eq!(response["allowed"], true);
    assert!(response["patch"].is_null(), "{response}");
}

/// The defaults OpenKruise's webhook writes into an `imageListPullJobTemplate` (v1beta1):
/// completion `Always`, pull timeout 600 s, backoff 3, `IfNotPresent`, and concurrency
/// `Replace`.
#[tokio::test]
async fn advancedcronjob_image_list_pull_job_template_gets_openkruise_defaults() {
    let spec = json!({"schedule": "0 3 * * *",
                      "template": {"imageListPullJobTemplate": {"spec": {"images": ["nginx:1.25"],
                                                                          "pullPolicy": {"timeoutSeconds": 120}}}}});
    let sent = object("AdvancedCronJob", "v1beta1", spec);
    let body = review_body(
        "AdvancedCronJob",
        "advancedcronjobs",
        "v1beta1",
        "CREATE",
        sent.clone(),
    );
    let response = answer(ACJ_MUTATE, &body).await;
    assert_eq!(
        mutated(&sent, &response)["spec"],
        json!({
            "schedule": "0 3 * * *",
            "template": {"imageListPullJobTemplate": {"spec": {
                "images": ["nginx:1.25"],
                "completionPolicy": {"type": "Always"},
                "pullPolicy": {"timeoutSeconds": 120, "backoffLimit": 3},
                "imagePullPolicy": "IfNotPresent"
            }}},
            "concurrencyPolicy": "Replace",
            "failedJobsHistoryLimit": 1,
            "paused": false,
            "successfulJobsHistoryLimit": 3
        })
    );
}

#[tokio::test]
async fn an_invalid_broadcastjob_is_denied_422_with_the_field() {
    let mut template = pod_template();
    template["spec"]["restartPolicy"] = json!("Always");
    let body = review_body(
        "BroadcastJob",
        "broadcastjobs",
        "v1beta1",
        "CREATE",
        object("BroadcastJob", "v1beta1", json!({"template": template})),
    );
    let response = answer(BCJ_VALIDATE, &body).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 422);
    assert_eq!(
        response["status"]["message"],
        "spec.template.spec.restartPolicy: Invalid value: \"Always\": pod restartPolicy can only be Never or OnFailure"
    );
}

#[tokio::test]
async fn an_invalid_time_zone_or_schedule_is_denied_at_admission() {
    let job = json!({"jobTemplate": {"spec": {"template": pod_template()}}});
    for (spec, message) in [
        (
            json!({"schedule": "0 0 * * *", "timeZone": "Asia/Nowhere", "template": job}),
            "spec.timeZone: Invalid value: \"Asia/Nowhere\": unknown time zone Asia/Nowhere",
        ),
        (
            json!({"schedule": "0 0 31 2 * *", "template": job}),
            "spec.schedule: Invalid value: \"0 0 31 2 * *\": expected exactly 5 fields, found 6: 0 0 31 2 * *",
        ),
    ] {
        for version in ["v1alpha1", "v1beta1"] {
            let body = review_body(
                "AdvancedCronJob",
                "advancedcronjobs",
                version,
                "CREATE",
                object("AdvancedCronJob", version, spec.clone()),
            );
            let response = answer(ACJ_VALIDATE, &body).await;
            assert_eq!(response["allowed"], false);
            assert_eq!(response["status"]["code"], 422);
            assert_eq!(response["status"]["message"], message);
        }
    }
    // A valid zone is admitted.
    let body = review_body(
        "AdvancedCronJob",
        "advancedcronjobs",
        "v1beta1",
        "CREATE",
        object(
            "AdvancedCronJob",
            "v1beta1",
            json!({"schedule": "30 2 * * *", "timeZone": "America/New_York", "template": job}),
        ),
    );
    assert_eq!(answer(ACJ_VALIDATE, &body).await["allowed"], true);
}

#[test]
fn convert_serves_both_kinds() {
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": "c1",
            "desiredAPIVersion": "apps.kruise.io/v1alpha1",
            "objects": [
                object("BroadcastJob", "v1beta1", json!({"template": pod_template(), "paused": true})),
                object("AdvancedCronJob", "v1beta1", json!({"schedule": "@hourly", "template": {}})),
            ]
        }
    });
    let converted = kruise_admission::conversion::review(
        &[
            std::sync::Arc::new(kruise_broadcastjob::conversion::BROADCASTJOB_CONVERTER),
            std::sync::Arc::new(kruise_broadcastjob::conversion::AdvancedCronJobConverter),
        ],
        &serde_json::to_vec(&review).unwrap(),
    )
    .unwrap();
    assert_eq!(converted["response"]["result"]["status"], "Success");
    let objects = converted["response"]["convertedObjects"]
        .as_array()
        .unwrap();
    assert_eq!(objects[0]["apiVersion"], "apps.kruise.io/v1alpha1");
    assert_eq!(objects[0]["spec"]["paused"], true);
    assert_eq!(objects[1]["kind"], "AdvancedCronJob");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Whatever JSON a spec holds, every handler answers (allowed, denied or a decode
    /// error), never panics.
    #[test]
    fn arbitrary_specs_never_panic(spec in arbitrary_json(3)) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        for (path, kind, resource) in [
            (BCJ_MUTATE, "BroadcastJob", "broadcastjobs"),
            (BCJ_VALIDATE, "BroadcastJob", "broadcastjobs"),
            (ACJ_MUTATE, "AdvancedCronJob", "advancedcronjobs"),
            (ACJ_VALIDATE, "AdvancedCronJob", "advancedcronjobs"),
        ] {
            let body = review_body(kind, resource, "v1beta1", "CREATE", object(kind, "v1beta1", spec.clone()));
            let _ = rt.block_on(routes().review(path, &body));
        }
    }
}

fn arbitrary_json(depth: u32) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-zA-Z0-9 */%@=_-]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(depth, 32, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(
                proptest::sample::select(vec![
                    "schedule",
                    "timeZone",
                    "template",
                    "jobTemplate",
                    "broadcastJobTemplate",
                    "spec",
                    "parallelism",
                    "completionPolicy",
                    "type",
                    "containers",
                    "restartPolicy",
                ])
                .prop_map(String::from),
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
