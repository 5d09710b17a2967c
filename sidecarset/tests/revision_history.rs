//! SidecarSet ControllerRevision history: which revisions the controller deletes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_sidecarset::api::SIDECARSET_CUSTOM_VERSION_LABEL;
use kruise_sidecarset::api::v1beta1::SidecarSet;
use kruise_sidecarset::plan::revision::revisions_to_delete;
use serde_json::json;

fn rev(name: &str, revision: i64, custom: Option<&str>) -> ControllerRevision {
    let mut labels = std::collections::BTreeMap::new();
    if let Some(c) = custom {
        labels.insert(SIDECARSET_CUSTOM_VERSION_LABEL.to_string(), c.to_string());
    }
    ControllerRevision {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels),
            ..Default::default()
        },
        revision,
        data: None,
    }
}

#[test]
fn history_keeps_the_limit_the_newest_and_what_pods_use() {
    let mut set: SidecarSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "s"}, "spec": {"revisionHistoryLimit": 2}
    }))
    .unwrap();
    let sorted: Vec<_> = (1..=5)
        .map(|i| rev(&format!("r{i}"), i, (i == 2).then_some("v2")))
        .collect();
    assert_eq!(
        revisions_to_delete(&set, &sorted, &BTreeSet::new()),
        vec!["r1", "r2", "r3"]
    );
    let used = BTreeSet::from(["r1".to_string()]);
    assert_eq!(
        revisions_to_delete(&set, &sorted, &used),
        vec!["r2", "r3", "r4"]
    );
    set.spec.injection_strategy.revision = Some(kruise_sidecarset::api::SidecarSetInjectRevision {
        custom_version: Some("v2".into()),
        ..Default::default()
    });
    assert_eq!(revisions_to_delete(&set, &sorted, &used), vec!["r3", "r4"]);
    // A limit below 1 keeps 1: the newest.
    set.spec.revision_history_limit = Some(0);
    set.spec.injection_strategy.revision = None;
    assert_eq!(
        revisions_to_delete(&set, &sorted, &BTreeSet::new()),
        vec!["r1", "r2", "r3", "r4"]
    );
}
