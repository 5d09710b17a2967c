//! The template defaults against OpenKruise's own results. Expected values were printed by a
//! Go program running OpenKruise's `SetDefaultsCloneSet` template steps, Kubernetes'
//! `HashControllerRevision` and OpenKruise's VCT hasher on k8s.io/kubernetes v1.32.10 (the
//! version OpenKruise builds with): `testkit/oracles`.

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_core::api::keys::CLONESET_VCT_HASH_KEY;
use serde_json::{Value, json};

use super::MutateCloneSet;
use crate::api::v1beta1;
use crate::plan::{RevisionWrite, plan_revisions};
use kruise_admission::crd_webhooks::Defaulting as _;

/// OpenKruise's `config/samples/apps_v1alpha1_cloneset.yaml`, with a claim template added.
fn sample(template: Value) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "CloneSet",
        "metadata": {"labels": {"app": "sample"}, "name": "sample", "namespace": "default", "uid": "u1"},
        "spec": {
            "replicas": 5,
            "selector": {"matchLabels": {"app": "sample"}},
            "template": template,
            "volumeClaimTemplates": [{
                "metadata": {"name": "pvc-1"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}, "limits": {"storage": "2Gi"}}}
            }],
            "updateStrategy": {"type": "InPlaceIfPossible", "maxUnavailable": 2}
        }
    })
}

fn sample_template() -> Value {
    json!({
        "metadata": {"labels": {"app": "sample"}},
        "spec": {"containers": [{"name": "main", "image": "nginx:alpine"}]}
    })
}

/// `object` as a CREATE through `mutate` stores it.
fn defaulted(mutate: MutateCloneSet, version: &str, object: &Value) -> Value {
    let patch = mutate.patch(version, object, None).unwrap();
    let mut out = object.clone();
    json_patch::patch(&mut out, &patch).unwrap();
    out
}

/// The same v1beta1 object the stored v1alpha1 converts to, for the revision planner.
fn as_v1beta1(stored: &Value) -> v1beta1::CloneSet {
    let mut v = stored.clone();
    v["apiVersion"] = json!("apps.kruise.io/v1beta1");
    v["spec"]["updateStrategy"] = json!({"type": "RollingUpdate"});
    serde_json::from_value(v).unwrap()
}

fn created_revision(cs: &v1beta1::CloneSet) -> ControllerRevision {
    match plan_revisions(cs, &[]).write {
        RevisionWrite::Create(revision) => *revision,
        other => panic!("expected a new revision, got {other:?}"),
    }
}

#[test]
fn sample_is_stored_as_openkruise_stores_it_with_its_revision_name() {
    let stored = defaulted(
        MutateCloneSet::default(),
        "v1alpha1",
        &sample(sample_template()),
    );
    assert_eq!(
        stored["spec"]["template"],
        json!({
            "metadata": {"creationTimestamp": null, "labels": {"app": "sample"}},
            "spec": {
                "containers": [{
                    "name": "main",
                    "image": "nginx:alpine",
                    "resources": {},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "Always"
                }],
                "restartPolicy": "Always",
                "terminationGracePeriodSeconds": 30,
                "dnsPolicy": "ClusterFirst",
                "securityContext": {},
                "schedulerName": "default-scheduler"
            }
        })
    );
    assert_eq!(
        stored["spec"]["volumeClaimTemplates"],
        json!([{
            "metadata": {"name": "pvc-1", "creationTimestamp": null},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"limits": {"storage": "2Gi"}, "requests": {"storage": "1Gi"}}},
            "status": {"phase": "Pending"}
        }])
    );
    let revision = created_revision(&as_v1beta1(&stored));
    assert_eq!(revision.metadata.name.as_deref(), Some("sample-744d4796cc"));
}

#[test]
fn template_no_defaults_leaves_the_template_and_claims_alone() {
    let mut mutate = MutateCloneSet::default();
    mutate.template_defaults.enabled = false;
    let object = sample(sample_template());
    let stored = defaulted(mutate, "v1alpha1", &object);
    assert_eq!(stored["spec"]["template"], object["spec"]["template"]);
    assert_eq!(
        stored["spec"]["volumeClaimTemplates"],
        object["spec"]["volumeClaimTemplates"]
    );
    // The spec defaults still apply.
    assert_eq!(stored["spec"]["revisionHistoryLimit"], json!(10));
}

#[test]
fn every_template_default_as_openkruise_stores_it() {
    let template: Value = serde_json::from_str(include_str!(
        "../../../compat/src/pod_defaults/rich_template.json"
    ))
    .unwrap();
    let expected: Value = serde_json::from_str(include_str!(
        "../../../compat/src/pod_defaults/rich_template.openkruise.json"
    ))
    .unwrap();
    let mut object = sample(template);
    object["metadata"]["name"] = json!("rich");
    object["apiVersion"] = json!("apps.kruise.io/v1beta1");
    object["spec"]["updateStrategy"] = json!({"type": "RollingUpdate"});
    let stored = defaulted(MutateCloneSet::default(), "v1beta1", &object);
    assert_eq!(stored["spec"]["template"], expected);
    let revision = created_revision(&serde_json::from_value(stored).unwrap());
    assert_eq!(revision.metadata.name.as_deref(), Some("rich-8748d46f6"));
}

/// Pod-level resources and an ephemeral volume's claim template, re-encoded as Go does,
/// give OpenKruise's revision name.
#[test]
fn re_encoded_quantities_and_claims_give_openkruises_revision_name() {
    let mut object = sample(json!({"spec": {
        "resources": {"limits": {"cpu": "0.0001", "memory": "1024Mi"}},
        "containers": [{"name": "a", "image": "b"}],
        "volumes": [{"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1024Mi"}}}}}}]
    }}));
    object["metadata"]["name"] = json!("p");
    let stored = defaulted(MutateCloneSet::default(), "v1alpha1", &object);
    let revision = created_revision(&as_v1beta1(&stored));
    assert_eq!(revision.metadata.name.as_deref(), Some("p-6969f5c944"));
}

#[test]
fn vct_hash_of_the_defaulted_sample_is_openkruises() {
    let stored = defaulted(
        MutateCloneSet::default(),
        "v1alpha1",
        &sample(sample_template()),
    );
    let revision = created_revision(&as_v1beta1(&stored));
    assert_eq!(
        revision.metadata.annotations.unwrap()[CLONESET_VCT_HASH_KEY],
        "1129974074"
    );
}
