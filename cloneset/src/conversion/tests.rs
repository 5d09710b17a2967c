use super::*;
use std::collections::BTreeMap;

use crate::api::{CloneSetStatus, v1alpha1, v1beta1};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_admission::Converter;
use kruise_core::api::version::{APPS_V1ALPHA1, APPS_V1BETA1};
use kruise_core::api::{
    InPlaceUpdateStrategy, UpdatePriorityOrderTerm, UpdatePriorityStrategy, UpdateScatterTerm,
};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::json;

fn ios() -> impl Strategy<Value = Option<IntOrString>> {
    prop_oneof![
        Just(None),
        (0i32..10).prop_map(|i| Some(IntOrString::Int(i))),
        (0i32..=100).prop_map(|p| Some(IntOrString::String(format!("{p}%")))),
    ]
}

fn meta(labels: BTreeMap<String, String>, annotations: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some("demo".into()),
        namespace: Some("default".into()),
        labels: (!labels.is_empty()).then_some(labels),
        annotations: (!annotations.is_empty()).then_some(annotations),
        ..Default::default()
    }
}

#[derive(Debug, Clone)]
struct Common {
    replicas: Option<i32>,
    pods_to_delete: Vec<String>,
    scale_max_unavailable: Option<IntOrString>,
    reuse: bool,
    min_ready: i32,
    history: Option<i32>,
    deadline: Option<i32>,
    exclude: bool,
    status: CloneSetStatus,
}

fn common() -> impl Strategy<Value = Common> {
    (
        proptest::option::of(0i32..20),
        proptest::collection::vec("[a-z]{3}", 0..3),
        ios(),
        any::<bool>(),
        0i32..30,
        proptest::option::of(0i32..20),
        proptest::option::of(0i32..600),
        any::<bool>(),
        (
            0i32..10,
            0i32..10,
            "[a-z]{0,4}",
            proptest::option::of(0i32..3),
        ),
    )
        .prop_map(
            |(replicas, pods_to_delete, smu, reuse, min_ready, history, deadline, exclude, st)| {
                Common {
                    replicas,
                    pods_to_delete,
                    scale_max_unavailable: smu,
                    reuse,
                    min_ready,
                    history,
                    deadline,
                    exclude,
                    status: CloneSetStatus {
                        replicas: st.0,
                        updated_replicas: st.1,
                        update_revision: st.2.clone(),
                        current_revision: st.2,
                        collision_count: st.3,
                        label_selector: "app=demo".into(),
                        ..Default::default()
                    },
                }
            },
        )
}

#[derive(Debug, Clone)]
struct Rolling {
    partition: Option<IntOrString>,
    max_unavailable: Option<IntOrString>,
    max_surge: Option<IntOrString>,
    paused: bool,
    priority: Option<UpdatePriorityStrategy>,
    scatter: Vec<UpdateScatterTerm>,
}

fn rolling() -> impl Strategy<Value = Rolling> {
    (
        ios(),
        ios(),
        ios(),
        any::<bool>(),
        proptest::option::of("[a-z]{1,4}"),
        proptest::collection::vec(("[a-z]{1,3}", "[a-z]{1,3}"), 0..2),
    )
        .prop_map(
            |(partition, max_unavailable, max_surge, paused, order, scatter)| Rolling {
                partition,
                max_unavailable,
                max_surge,
                paused,
                priority: order.map(|k| UpdatePriorityStrategy {
                    order_priority: vec![UpdatePriorityOrderTerm { ordered_key: k }],
                    weight_priority: vec![],
                }),
                scatter: scatter
                    .into_iter()
                    .map(|(key, value)| UpdateScatterTerm { key, value })
                    .collect(),
            },
        )
}

/// Pre-download settings in their canonical form: (grace, parallelism, timeout, min ready).
type PreDownload = (i32, Option<IntOrString>, Option<i32>, Option<i32>);

fn pre_download() -> impl Strategy<Value = Option<PreDownload>> {
    let parallelism = prop_oneof![
        Just(None),
        (0i32..5).prop_map(|i| Some(IntOrString::Int(i))),
        "[a-z]{1,3}".prop_map(|s| Some(IntOrString::String(s))),
    ];
    proptest::option::of((
        0i32..30,
        parallelism,
        proptest::option::of(0i32..600),
        proptest::option::of(0i32..5),
    ))
}

fn selector() -> LabelSelector {
    serde_json::from_value(json!({"matchLabels": {"app": "demo"}})).unwrap()
}

fn annotations_for(pd: &Option<PreDownload>) -> BTreeMap<String, String> {
    let mut a = BTreeMap::new();
    a.insert("keep".to_string(), "me".to_string());
    if let Some((_, p, t, m)) = pd {
        if let Some(p) = p {
            let v = match p {
                IntOrString::Int(i) => i.to_string(),
                IntOrString::String(s) => s.clone(),
            };
            a.insert(IMAGE_PREDOWNLOAD_PARALLELISM_KEY.into(), v);
        }
        if let Some(t) = t {
            a.insert(IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_KEY.into(), t.to_string());
        }
        if let Some(m) = m {
            a.insert(
                IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS_KEY.into(),
                m.to_string(),
            );
        }
    }
    a
}

fn labels_for(exclude: bool) -> BTreeMap<String, String> {
    let mut l = BTreeMap::new();
    l.insert("team".to_string(), "a".to_string());
    if exclude {
        l.insert(
            CLONESET_SCALING_EXCLUDE_PREPARING_DELETE_KEY.into(),
            "true".into(),
        );
    }
    l
}

/// v1alpha1 objects inside the domain where OpenKruise's round trip is lossless.
fn alpha_object() -> impl Strategy<Value = v1alpha1::CloneSet> {
    use v1alpha1::CloneSetUpdateStrategyType as A;
    (
        common(),
        prop_oneof![
            Just(A::ReCreate),
            Just(A::InPlaceIfPossible),
            Just(A::InPlaceOnly),
            Just(A::OnDelete)
        ],
        rolling(),
        pre_download(),
    )
        .prop_map(|(c, ty, r, pd)| {
            let on_delete = ty == A::OnDelete;
            // An alpha inPlaceUpdateStrategy survives when it has a grace period or the
            // pre-download annotations give the beta side content.
            let pd = if on_delete { None } else { pd };
            let in_place = pd.as_ref().and_then(|(grace, p, t, m)| {
                let content = *grace != 0 || p.is_some() || t.is_some() || m.is_some();
                content.then(|| InPlaceUpdateStrategy {
                    grace_period_seconds: *grace,
                    ..Default::default()
                })
            });
            let pd = if in_place.is_some() { pd } else { None };
            let update_strategy = if on_delete {
                v1alpha1::CloneSetUpdateStrategy {
                    type_: Some(ty),
                    ..Default::default()
                }
            } else {
                v1alpha1::CloneSetUpdateStrategy {
                    type_: Some(ty),
                    partition: r.partition,
                    max_unavailable: r.max_unavailable,
                    max_surge: r.max_surge,
                    paused: r.paused,
                    priority_strategy: r.priority,
                    scatter_strategy: r.scatter,
                    in_place_update_strategy: in_place,
                }
            };
            v1alpha1::CloneSet {
                metadata: meta(labels_for(c.exclude), annotations_for(&pd)),
                spec: v1alpha1::CloneSetSpec {
                    replicas: c.replicas,
                    selector: Some(selector()),
                    template: Default::default(),
                    volume_claim_templates: vec![],
                    scale_strategy: v1alpha1::CloneSetScaleStrategy {
                        pods_to_delete: c.pods_to_delete,
                        max_unavailable: c.scale_max_unavailable,
                        disable_pvc_reuse: !c.reuse,
                    },
                    update_strategy,
                    revision_history_limit: c.history,
                    min_ready_seconds: c.min_ready,
                    lifecycle: None,
                    progress_deadline_seconds: c.deadline,
                },
                status: Some(c.status),
            }
        })
}

/// v1beta1 objects inside the lossless domain (explicit type and policy, consistent
/// pre-download annotations, exclude label iff field).
fn beta_object() -> impl Strategy<Value = v1beta1::CloneSet> {
    use v1beta1::CloneSetPodUpdatePolicy as P;
    (
        common(),
        prop_oneof![
            Just(Some(P::ReCreate)),
            Just(Some(P::InPlaceIfPossible)),
            Just(Some(P::InPlaceOnly)),
            Just(None)
        ],
        rolling(),
        pre_download(),
    )
        .prop_map(|(c, policy, r, pd)| {
            let in_place = pd.as_ref().and_then(|(grace, p, t, m)| {
                let content = *grace != 0 || p.is_some() || t.is_some() || m.is_some();
                content.then(|| InPlaceUpdateStrategy {
                    grace_period_seconds: *grace,
                    image_pre_download_parallelism: p.clone(),
                    image_pre_download_timeout_seconds: *t,
                    image_pre_download_min_updated_ready_pods: *m,
                })
            });
            let pd = if in_place.is_some() && policy.is_some() {
                pd
            } else {
                None
            };
            let update_strategy = match policy {
                None => v1beta1::CloneSetUpdateStrategy {
                    type_: Some(v1beta1::CloneSetUpdateStrategyType::OnDelete),
                    rolling_update: None,
                },
                Some(policy) => v1beta1::CloneSetUpdateStrategy {
                    type_: Some(v1beta1::CloneSetUpdateStrategyType::RollingUpdate),
                    rolling_update: Some(v1beta1::RollingUpdateCloneSetStrategy {
                        partition: r.partition,
                        max_unavailable: r.max_unavailable,
                        max_surge: r.max_surge,
                        pod_update_policy: Some(policy),
                        paused: r.paused,
                        priority_strategy: r.priority,
                        scatter_strategy: r.scatter,
                        in_place_update_strategy: in_place,
                    }),
                },
            };
            v1beta1::CloneSet {
                metadata: meta(labels_for(c.exclude), annotations_for(&pd)),
                spec: v1beta1::CloneSetSpec {
                    replicas: c.replicas,
                    selector: Some(selector()),
                    template: Default::default(),
                    volume_claim_templates: vec![],
                    scale_strategy: v1beta1::CloneSetScaleStrategy {
                        pods_to_delete: c.pods_to_delete,
                        max_unavailable: c.scale_max_unavailable,
                        enable_pvc_reuse: c.reuse,
                        exclude_preparing_delete: c.exclude,
                    },
                    update_strategy,
                    revision_history_limit: c.history,
                    min_ready_seconds: c.min_ready,
                    lifecycle: None,
                    progress_deadline_seconds: c.deadline,
                },
                status: Some(c.status),
            }
        })
}

fn convert(object: serde_json::Value, desired_api_version: &str) -> serde_json::Value {
    CloneSetConverter
        .convert(object, desired_api_version)
        .unwrap()
}

proptest! {
    #[test]
    fn alpha_beta_alpha_is_lossless(a in alpha_object()) {
        let v = serde_json::to_value(&a).unwrap();
        let beta_v = convert(v.clone(), APPS_V1BETA1);
        prop_assert_eq!(beta_v["apiVersion"].as_str(), Some(APPS_V1BETA1));
        // What the converter wrote is a v1beta1 CloneSet, every field where its type has it.
        let typed_beta: v1beta1::CloneSet = serde_json::from_value(beta_v.clone()).unwrap();
        prop_assert_eq!(&serde_json::to_value(&typed_beta).unwrap(), &beta_v);
        prop_assert_eq!(convert(beta_v, APPS_V1ALPHA1), v);
    }

    #[test]
    fn beta_alpha_beta_is_lossless(b in beta_object()) {
        let v = serde_json::to_value(&b).unwrap();
        let alpha_v = convert(v.clone(), APPS_V1ALPHA1);
        prop_assert_eq!(alpha_v["apiVersion"].as_str(), Some(APPS_V1ALPHA1));
        let typed_alpha: v1alpha1::CloneSet = serde_json::from_value(alpha_v.clone()).unwrap();
        prop_assert_eq!(&serde_json::to_value(&typed_alpha).unwrap(), &alpha_v);
        prop_assert_eq!(convert(alpha_v, APPS_V1BETA1), v);
    }

    #[test]
    fn conversion_never_panics_on_arbitrary_strategy_json(
        ty in "[A-Za-z]{0,12}", policy in "[A-Za-z]{0,12}", grace in any::<i32>(),
        par in "[0-9a-z%+-]{0,5}",
    ) {
        let alpha = json!({"apiVersion": APPS_V1ALPHA1, "kind": "CloneSet", "metadata": {"name": "x",
            "annotations": {IMAGE_PREDOWNLOAD_PARALLELISM_KEY: par, IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_KEY: "x"}},
            "spec": {"updateStrategy": {"type": ty, "inPlaceUpdateStrategy": {"gracePeriodSeconds": grace}}}});
        let _ = CloneSetConverter.convert(alpha, APPS_V1BETA1);
        let beta = json!({"apiVersion": APPS_V1BETA1, "kind": "CloneSet", "metadata": {"name": "x"},
            "spec": {"updateStrategy": {"type": ty, "rollingUpdate": {"podUpdatePolicy": policy}}}});
        let _ = CloneSetConverter.convert(beta, APPS_V1ALPHA1);
    }
}

fn convert_result(
    object: serde_json::Value,
    desired_api_version: &str,
) -> Result<serde_json::Value, String> {
    CloneSetConverter.convert(object, desired_api_version)
}

fn alpha_json(spec: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": APPS_V1ALPHA1, "kind": "CloneSet", "metadata": {"name": "demo"}, "spec": spec})
}

fn beta_json(spec: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": APPS_V1BETA1, "kind": "CloneSet", "metadata": {"name": "demo"}, "spec": spec})
}

#[test]
fn field_mapping_table() {
    let got = convert_result(
        alpha_json(json!({
            "scaleStrategy": {"disablePVCReuse": true, "podsToDelete": ["a"]},
            "updateStrategy": {"type": "InPlaceIfPossible", "partition": "50%", "maxSurge": 1,
                               "inPlaceUpdateStrategy": {"gracePeriodSeconds": 10}},
        })),
        APPS_V1BETA1,
    )
    .unwrap();
    assert_eq!(
        got["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": "50%", "maxSurge": 1,
               "podUpdatePolicy": "InPlaceIfPossible", "inPlaceUpdateStrategy": {"gracePeriodSeconds": 10}}})
    );
    assert_eq!(got["spec"]["scaleStrategy"], json!({"podsToDelete": ["a"]}));
    // default alpha (reuse on) -> enablePVCReuse true
    let got = convert_result(alpha_json(json!({})), APPS_V1BETA1).unwrap();
    assert_eq!(
        got["spec"]["scaleStrategy"],
        json!({"enablePVCReuse": true})
    );
    assert_eq!(
        got["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "ReCreate"}})
    );
    // beta -> alpha: fields to annotations, enablePVCReuse false -> disablePVCReuse true
    let got = convert_result(
        beta_json(json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
            "podUpdatePolicy": "InPlaceOnly",
            "inPlaceUpdateStrategy": {"imagePreDownloadParallelism": 3, "imagePreDownloadTimeoutSeconds": 60,
                                      "imagePreDownloadMinUpdatedReadyPods": 2}}}})),
        APPS_V1ALPHA1,
    )
    .unwrap();
    assert_eq!(
        got["metadata"]["annotations"],
        json!({IMAGE_PREDOWNLOAD_PARALLELISM_KEY: "3", IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_KEY: "60",
               IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS_KEY: "2"})
    );
    assert_eq!(
        got["spec"]["updateStrategy"],
        json!({"type": "InPlaceOnly", "inPlaceUpdateStrategy": {}})
    );
    assert_eq!(
        got["spec"]["scaleStrategy"],
        json!({"disablePVCReuse": true})
    );
    // exclude-preparing-delete label -> field
    let mut a = alpha_json(json!({}));
    a["metadata"]["labels"] = json!({CLONESET_SCALING_EXCLUDE_PREPARING_DELETE_KEY: "true"});
    let got = convert_result(a, APPS_V1BETA1).unwrap();
    assert_eq!(got["spec"]["scaleStrategy"]["excludePreparingDelete"], true);
}

#[test]
fn documented_lossy_cases() {
    // alpha OnDelete drops the rolling fields.
    let a =
        alpha_json(json!({"updateStrategy": {"type": "OnDelete", "partition": 2, "paused": true}}));
    let back = convert_result(convert_result(a, APPS_V1BETA1).unwrap(), APPS_V1ALPHA1).unwrap();
    assert_eq!(back["spec"]["updateStrategy"], json!({"type": "OnDelete"}));
    // an empty alpha type comes back as ReCreate; an empty inPlaceUpdateStrategy disappears.
    let a = alpha_json(json!({"updateStrategy": {"inPlaceUpdateStrategy": {}}}));
    let back = convert_result(convert_result(a, APPS_V1BETA1).unwrap(), APPS_V1ALPHA1).unwrap();
    assert_eq!(back["spec"]["updateStrategy"], json!({"type": "ReCreate"}));
    // beta without type/rollingUpdate comes back explicit.
    let b = beta_json(json!({}));
    let back = convert_result(convert_result(b, APPS_V1ALPHA1).unwrap(), APPS_V1BETA1).unwrap();
    assert_eq!(
        back["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "ReCreate"}})
    );
    // beta excludePreparingDelete without the label is lost.
    let b = beta_json(json!({"scaleStrategy": {"excludePreparingDelete": true}}));
    let back = convert_result(convert_result(b, APPS_V1ALPHA1).unwrap(), APPS_V1BETA1).unwrap();
    assert_eq!(
        back["spec"]["scaleStrategy"].get("excludePreparingDelete"),
        None
    );
    // beta OnDelete with rollingUpdate loses rollingUpdate.
    let b = beta_json(
        json!({"updateStrategy": {"type": "OnDelete", "rollingUpdate": {"partition": 1}}}),
    );
    let back = convert_result(convert_result(b, APPS_V1ALPHA1).unwrap(), APPS_V1BETA1).unwrap();
    assert_eq!(back["spec"]["updateStrategy"], json!({"type": "OnDelete"}));
    // numeric string parallelism comes back as an integer; metadata gains the annotations.
    let b = beta_json(
        json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
        "podUpdatePolicy": "ReCreate", "inPlaceUpdateStrategy": {"imagePreDownloadParallelism": "4"}}}}),
    );
    let back = convert_result(convert_result(b, APPS_V1ALPHA1).unwrap(), APPS_V1BETA1).unwrap();
    assert_eq!(
        back["spec"]["updateStrategy"]["rollingUpdate"]["inPlaceUpdateStrategy"],
        json!({"imagePreDownloadParallelism": 4})
    );
    assert_eq!(
        back["metadata"]["annotations"],
        json!({IMAGE_PREDOWNLOAD_PARALLELISM_KEY: "4"})
    );
}

#[test]
fn template_and_metadata_carried_byte_for_byte() {
    let template = json!({"metadata": {"labels": {"app": "demo"}, "creationTimestamp": null},
        "spec": {"containers": [{"name": "main", "image": "nginx", "resources": {}, "x-unknown": 1}]}});
    let mut a = alpha_json(
        json!({"template": template, "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"futureField": true}}]}),
    );
    a["metadata"]["managedFields"] = json!([{"manager": "kubectl"}]);
    let b = convert_result(a.clone(), APPS_V1BETA1).unwrap();
    assert_eq!(b["spec"]["template"], a["spec"]["template"]);
    assert_eq!(
        b["spec"]["volumeClaimTemplates"],
        a["spec"]["volumeClaimTemplates"]
    );
    assert_eq!(b["metadata"], a["metadata"]);
}

#[test]
fn converter_serves_reviews() {
    use kruise_admission::conversion::review;
    let converters: Vec<std::sync::Arc<dyn Converter>> =
        vec![std::sync::Arc::new(CloneSetConverter)];
    let body = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "1", "desiredAPIVersion": APPS_V1BETA1,
                    "objects": [alpha_json(json!({"updateStrategy": {"type": "InPlaceOnly"}}))]}});
    let out = review(&converters, &serde_json::to_vec(&body).unwrap()).unwrap();
    assert_eq!(out["response"]["result"]["status"], "Success");
    let obj = &out["response"]["convertedObjects"][0];
    assert_eq!(obj["apiVersion"], APPS_V1BETA1);
    assert_eq!(
        obj["spec"]["updateStrategy"]["rollingUpdate"]["podUpdatePolicy"],
        "InPlaceOnly"
    );
    // an unknown version fails the review with a message
    let bad = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "2", "desiredAPIVersion": "apps.kruise.io/v2", "objects": [alpha_json(json!({}))]}});
    let out = review(&converters, &serde_json::to_vec(&bad).unwrap()).unwrap();
    assert_eq!(out["response"]["result"]["status"], "Failure");
    assert!(CloneSetConverter.handles("apps.kruise.io", "CloneSet"));
    assert!(!CloneSetConverter.handles("apps.kruise.io", "StatefulSet"));
}

#[test]
fn fields_the_types_do_not_know_survive_a_round_trip() {
    let mut a = alpha_json(json!({
        "replicas": 2, "futureSpecField": {"x": [1]},
        "scaleStrategy": {"futureScaleKnob": "on"},
        "updateStrategy": {"type": "InPlaceOnly", "partition": 1, "futureUpdateKnob": 3,
                           "inPlaceUpdateStrategy": {"gracePeriodSeconds": 5, "futureInPlace": true}},
    }));
    a["status"] = json!({"replicas": 2, "futureStatus": "s"});
    a["futureTopLevel"] = json!(1);
    let b = convert_result(a.clone(), APPS_V1BETA1).unwrap();
    assert_eq!(b["spec"]["futureSpecField"], json!({"x": [1]}));
    assert_eq!(b["spec"]["scaleStrategy"]["futureScaleKnob"], "on");
    assert_eq!(b["spec"]["updateStrategy"]["futureUpdateKnob"], 3);
    assert_eq!(
        b["spec"]["updateStrategy"]["rollingUpdate"]["inPlaceUpdateStrategy"],
        json!({"gracePeriodSeconds": 5, "futureInPlace": true})
    );
    assert_eq!(b["status"]["futureStatus"], "s");
    assert_eq!(b["futureTopLevel"], 1);
    assert_eq!(convert_result(b, APPS_V1ALPHA1).unwrap(), a);
}
