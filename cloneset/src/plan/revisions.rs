//! Revision selection for a reconcile (OpenKruise `getActiveRevisions`): reuse the newest equal
//! revision, bump an older equal one, or create a new one; the current revision is the one
//! `status.currentRevision` names if it still exists, else the update revision.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_compat::gohash::deep_hash_bytes;
use kruise_compat::gojson::to_go_json;
use kruise_compat::quantity::canonical_quantity;
use kruise_core::api::keys::CLONESET_VCT_HASH_KEY;
use kruise_core::revision::{
    NewRevision, controller_owner_ref, plan_template_revisions, template_labels,
};
use serde_json::Value;

use crate::api::KIND;
use crate::api::v1beta1::CloneSet;
use kruise_core::api::version::APPS_V1BETA1;

pub use kruise_core::revision::{RevisionPlan, RevisionWrite};

/// `kruise.io/cloneset-volumeclaimtemplate-hash`, equal to OpenKruise's: `""` without claim
/// templates, else the decimal FNV-1a (32 bit) of Kubernetes' `DeepHashObject` of the Go JSON
/// of the templates reduced to `{metadata: {name}, spec}` and sorted by name. `DeepHashObject`
/// prints the JSON bytes with `spew` (`%#v` of a `[]byte`: `([]uint8)[91 123 …]`, the bytes
/// in decimal), and Go's JSON writes struct fields in declaration order, so both are
/// reproduced here field by field.
pub fn vct_hash(cs: &CloneSet) -> String {
    if cs.spec.volume_claim_templates.is_empty() {
        return String::new();
    }
    let mut claims: Vec<(String, Value)> = cs
        .spec
        .volume_claim_templates
        .iter()
        .map(|v| {
            let name = v.metadata.name.clone().unwrap_or_default();
            let spec = serde_json::to_value(&v.spec).unwrap_or(Value::Null);
            (name, spec)
        })
        .collect();
    // Go's sort.SliceStable by name.
    claims.sort_by(|a, b| a.0.cmp(&b.0));
    deep_hash_bytes(go_claims_json(&claims).as_bytes()).to_string()
}

/// Go's `json.Marshal` of `[]v1.PersistentVolumeClaim{{ObjectMeta{Name}, Spec}}`.
fn go_claims_json(claims: &[(String, Value)]) -> String {
    let items: Vec<String> = claims
        .iter()
        .map(|(name, spec)| {
            let name = (!name.is_empty()).then(|| to_go_json(&Value::String(name.clone())));
            let metadata = go_struct(&[("name", name), ("creationTimestamp", Some("null".into()))]);
            go_struct(&[
                ("metadata", Some(metadata)),
                ("spec", Some(go_claim_spec(spec))),
                ("status", Some("{}".into())),
            ])
        })
        .collect();
    format!("[{}]", items.join(","))
}

/// `PersistentVolumeClaimSpec` in declaration order: `omitempty` slices, maps and strings are
/// left out when empty, pointers only when `null`, and `resources` (a struct) is always there.
fn go_claim_spec(spec: &Value) -> String {
    let field = |key: &str| spec.get(key).filter(|v| !v.is_null());
    let non_empty = |key: &str| {
        field(key)
            .filter(|v| match v {
                Value::Array(a) => !a.is_empty(),
                Value::Object(o) => !o.is_empty(),
                Value::String(s) => !s.is_empty(),
                _ => true,
            })
            .map(to_go_json)
    };
    let pointer = |key: &str| field(key).map(to_go_json);
    let resources = spec.get("resources").unwrap_or(&Value::Null);
    let quantities = |key: &str| {
        resources
            .get(key)
            .and_then(Value::as_object)
            .filter(|m| !m.is_empty())
            .map(|m| {
                let canonical: serde_json::Map<String, Value> = m
                    .iter()
                    .map(|(k, v)| {
                        let text = match v {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        let text = canonical_quantity(&text).unwrap_or(text);
                        (k.clone(), Value::String(text))
                    })
                    .collect();
                to_go_json(&Value::Object(canonical))
            })
    };
    go_struct(&[
        ("accessModes", non_empty("accessModes")),
        ("selector", field("selector").map(go_label_selector)),
        (
            "resources",
            Some(go_struct(&[
                ("limits", quantities("limits")),
                ("requests", quantities("requests")),
            ])),
        ),
        ("volumeName", non_empty("volumeName")),
        ("storageClassName", pointer("storageClassName")),
        ("volumeMode", pointer("volumeMode")),
        (
            "dataSource",
            field("dataSource").map(|r| go_object_ref(r, false)),
        ),
        (
            "dataSourceRef",
            field("dataSourceRef").map(|r| go_object_ref(r, true)),
        ),
        (
            "volumeAttributesClassName",
            pointer("volumeAttributesClassName"),
        ),
    ])
}

/// `metav1.LabelSelector`: `matchLabels`, then `matchExpressions` of `{key, operator, values}`.
fn go_label_selector(selector: &Value) -> String {
    let labels = selector
        .get("matchLabels")
        .filter(|m| m.as_object().is_some_and(|m| !m.is_empty()))
        .map(to_go_json);
    let expressions = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
        .map(|a| {
            let items: Vec<String> = a
                .iter()
                .map(|e| {
                    let text = |key: &str| {
                        to_go_json(
                            e.get(key)
                                .filter(|v| !v.is_null())
                                .unwrap_or(&Value::String(String::new())),
                        )
                    };
                    let values = e
                        .get("values")
                        .filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
                        .map(to_go_json);
                    go_struct(&[
                        ("key", Some(text("key"))),
                        ("operator", Some(text("operator"))),
                        ("values", values),
                    ])
                })
                .collect();
            format!("[{}]", items.join(","))
        });
    go_struct(&[("matchLabels", labels), ("matchExpressions", expressions)])
}

/// `TypedLocalObjectReference` / `TypedObjectReference` (`with_namespace`).
fn go_object_ref(reference: &Value, with_namespace: bool) -> String {
    let pointer = |key: &str| reference.get(key).filter(|v| !v.is_null()).map(to_go_json);
    let text = |key: &str| {
        Some(to_go_json(
            reference
                .get(key)
                .filter(|v| !v.is_null())
                .unwrap_or(&Value::String(String::new())),
        ))
    };
    let mut fields = vec![
        ("apiGroup", pointer("apiGroup")),
        ("kind", text("kind")),
        ("name", text("name")),
    ];
    if with_namespace {
        fields.push(("namespace", pointer("namespace")));
    }
    go_struct(&fields)
}

/// A Go struct's JSON: the present fields, in the order given.
fn go_struct(fields: &[(&str, Option<String>)]) -> String {
    let members: Vec<String> = fields
        .iter()
        .filter_map(|(key, value)| value.as_ref().map(|v| format!("\"{key}\":{v}")))
        .collect();
    format!("{{{}}}", members.join(","))
}

/// Chooses the update and current revisions from the CloneSet's history (owned or orphaned
/// revisions matching its selector).
pub fn plan_revisions(cs: &CloneSet, history: &[ControllerRevision]) -> RevisionPlan {
    let name = cs.metadata.name.clone().unwrap_or_default();
    let template = serde_json::to_value(&cs.spec.template).unwrap_or(Value::Null);
    let status = cs.status.as_ref();
    plan_template_revisions(
        history,
        &template,
        NewRevision {
            parent_name: name.clone(),
            namespace: cs.metadata.namespace.clone(),
            owner: Some(controller_owner_ref(
                APPS_V1BETA1,
                KIND,
                &name,
                cs.metadata.uid.as_deref().unwrap_or_default(),
            )),
            labels: template_labels(&cs.spec.template),
            annotations: cs.metadata.annotations.clone().unwrap_or_default(),
            collision_count: Some(status.and_then(|s| s.collision_count).unwrap_or(0)),
            ..NewRevision::default()
        },
        // The claim templates' hash, on the update revision whether created or rolled back to.
        &BTreeMap::from([(CLONESET_VCT_HASH_KEY.to_string(), vct_hash(cs))]),
        status
            .map(|s| s.current_revision.as_str())
            .unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::tests::{cloneset, revision_for};
    use kruise_core::revision::{new_controller_revision, template_revision_data};
    use serde_json::json;

    /// A revision an earlier kruise-rs stored kept the template as the user wrote it
    /// (`cpu: "0.5"`, a probe's `initialDelaySeconds: 0`), under the hash of those bytes.
    /// After the upgrade it is still the current and update revision: no new revision, so
    /// the pods' `controller-revision-hash` stays current and nothing rolls.
    #[test]
    fn a_revision_stored_before_go_encoding_stays_current_after_an_upgrade() {
        let mut cs = cloneset(
            "nginx:1",
            json!({"template": {"spec": {"containers": [{"name": "main", "image": "nginx:1",
                "resources": {"requests": {"cpu": "0.5", "memory": "1024Mi"}},
                "readinessProbe": {"tcpSocket": {"port": 80}, "initialDelaySeconds": 0}}]}}}),
        );
        let template = serde_json::to_value(&cs.spec.template).unwrap();
        let stored = new_controller_revision(&NewRevision {
            parent_name: "demo".into(),
            namespace: Some("default".into()),
            data: template_revision_data(&template),
            revision: 1,
            collision_count: Some(0),
            ..Default::default()
        });
        // Today's data for the same template hashes to another name.
        assert_ne!(
            stored.metadata.name,
            revision_for(&cs, 1).metadata.name,
            "the stored revision must carry the earlier encoding"
        );
        cs.status = Some(crate::api::CloneSetStatus {
            current_revision: stored.metadata.name.clone().unwrap(),
            update_revision: stored.metadata.name.clone().unwrap(),
            ..Default::default()
        });
        let plan = plan_revisions(&cs, std::slice::from_ref(&stored));
        assert_eq!(plan.write, RevisionWrite::None);
        assert_eq!(plan.update.metadata.name, stored.metadata.name);
        assert_eq!(plan.current.metadata.name, stored.metadata.name);
        assert_eq!(
            plan.update.data, stored.data,
            "stored data is never rewritten"
        );
    }

    #[test]
    fn create_reuse_bump_and_current() {
        let cs = cloneset("nginx:1", json!({}));
        let first = plan_revisions(&cs, &[]);
        let RevisionWrite::Create(created) = &first.write else {
            panic!("{:?}", first.write)
        };
        assert_eq!(created.revision, 1);
        assert_eq!(first.current, first.update);
        let owner = &created.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("CloneSet", "cs-uid")
        );
        assert_eq!(
            created.metadata.annotations.as_ref().unwrap()[CLONESET_VCT_HASH_KEY],
            ""
        );
        // Same name as the test helper (same data, same hash).
        assert_eq!(created.metadata.name, revision_for(&cs, 1).metadata.name);

        let v1 = (**created).clone();
        let again = plan_revisions(&cs, std::slice::from_ref(&v1));
        assert_eq!(again.write, RevisionWrite::None);
        assert_eq!(again.update.metadata.name, v1.metadata.name);

        let mut cs2 = cloneset("nginx:2", json!({}));
        cs2.status = Some(crate::api::CloneSetStatus {
            current_revision: v1.metadata.name.clone().unwrap(),
            ..Default::default()
        });
        let p2 = plan_revisions(&cs2, std::slice::from_ref(&v1));
        let RevisionWrite::Create(v2) = &p2.write else {
            panic!()
        };
        assert_eq!(v2.revision, 2);
        assert_eq!(p2.current.metadata.name, v1.metadata.name);

        // Rolling back to nginx:1 bumps v1 instead of creating a copy.
        let back = plan_revisions(&cs, &[v1.clone(), (**v2).clone()]);
        let RevisionWrite::Update(bumped) = &back.write else {
            panic!("{:?}", back.write)
        };
        assert_eq!(bumped.metadata.name, v1.metadata.name);
        assert_eq!(bumped.revision, 3);
    }

    #[test]
    fn vct_hash_is_stable_under_order() {
        let a = cloneset(
            "x",
            json!({"volumeClaimTemplates": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]}),
        );
        let b = cloneset(
            "x",
            json!({"volumeClaimTemplates": [{"metadata": {"name": "b"}, "spec": {"accessModes": ["ReadWriteOnce"]}}, {"metadata": {"name": "a"}}]}),
        );
        assert_eq!(vct_hash(&a), vct_hash(&b));
        assert!(!vct_hash(&a).is_empty());
    }

    /// OpenKruise's own vectors (`pkg/util/volumeclaimtemplate/volume_templates_hash_test.go`).
    #[test]
    fn vct_hash_equals_openkruises_test_vectors() {
        let pvc = |name: &str, request: &str, limit: &str| {
            json!({"metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {
                "requests": {"storage": request}, "limits": {"storage": limit}}}})
        };
        let hash =
            |claims: Value| vct_hash(&cloneset("x", json!({"volumeClaimTemplates": claims})));
        assert_eq!(hash(json!([pvc("pvc-1", "1Gi", "2Gi")])), "1129974074");
        let multi = hash(json!([
            pvc("pvc-1", "1Gi", "2Gi"),
            pvc("pvc-2", "2Gi", "4Gi")
        ]));
        assert_eq!(multi, "510584408");
        let reversed = hash(json!([
            pvc("pvc-2", "2Gi", "4Gi"),
            pvc("pvc-1", "1Gi", "2Gi")
        ]));
        assert_eq!(reversed, "510584408");
        let mut labelled = pvc("pvc-1", "1Gi", "2Gi");
        labelled["metadata"]["labels"] = json!({"app": "test", "env": "prod"});
        labelled["metadata"]["annotations"] = json!({"description": "test pvc"});
        assert_eq!(hash(json!([labelled])), "1129974074");
        assert_eq!(hash(json!([])), "");
    }

    /// Every field of a claim spec, in Go's field order with its `omitempty` rules, and
    /// quantities in canonical form; the expected value was printed by OpenKruise's hasher in
    /// Go (k8s.io/api v0.32.10).
    #[test]
    fn vct_hash_covers_every_claim_spec_field() {
        let claims = json!([
            {"metadata": {"name": "data", "labels": {"ignored": "yes"}}, "spec": {
                "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
                "selector": {"matchLabels": {"tier": "db", "app": "x"}, "matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["a", "b"]},
                    {"key": "ssd", "operator": "Exists"}]},
                "resources": {"requests": {"storage": "1024Mi"}, "limits": {"storage": "0.5Ti"}},
                "storageClassName": "", "volumeMode": "Block", "volumeName": "pv-1",
                "dataSource": {"kind": "VolumeSnapshot", "name": "snap", "apiGroup": "snapshot.storage.k8s.io"},
                "dataSourceRef": {"kind": "VolumeSnapshot", "name": "snap", "apiGroup": "snapshot.storage.k8s.io", "namespace": "other"},
                "volumeAttributesClassName": "gold"}},
            {"metadata": {"name": "a-logs"}, "spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1.5Gi"}}, "storageClassName": "fast <&> \u{2028}"}},
            {"metadata": {}, "spec": {}}
        ]);
        let cs = cloneset("x", json!({"volumeClaimTemplates": claims}));
        assert_eq!(vct_hash(&cs), "5808079");
    }
}
