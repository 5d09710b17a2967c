//! A CloneSet that does not decode never stalls the kind: the controller's watch skips it
//! with a Warning event and a metric, and every other CloneSet keeps reconciling. Against
//! kruise-sim, or the real API server of `KRUISE_TEST_KUBECONFIG`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use kruise_cloneset::api::v1beta1::CloneSet;
use kruise_testkit::wait_for_warning;
use kube::ResourceExt as _;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::json;
use support::{RunningController, WAIT, cloneset, cluster_with_crd, eventually, pods_of};

#[tokio::test]
async fn a_cloneset_that_does_not_decode_gets_a_warning_and_the_others_reconcile() {
    let (cluster, client) = cluster_with_crd().await;
    // The template is schemaless, so the API server stores a container image that is a
    // number; the typed CloneSet cannot decode it.
    let mut bad = serde_json::to_value(cloneset("undecodable", 1, "nginx:1", json!({}))).unwrap();
    bad["spec"]["template"]["spec"]["containers"][0]["image"] = json!(5);
    let resource = ApiResource::erase::<CloneSet>(&());
    let raw: Api<DynamicObject> = Api::default_namespaced_with(client.clone(), &resource);
    raw.create(
        &PostParams::default(),
        &serde_json::from_value(bad).unwrap(),
    )
    .await
    .unwrap();
    let clonesets: Api<CloneSet> = Api::default_namespaced(client.clone());
    clonesets
        .create(
            &PostParams::default(),
            &cloneset("before", 2, "nginx:1", json!({})),
        )
        .await
        .unwrap();

    // Started after both exist: the bad one is in the controller's first list.
    let controller = RunningController::start(&client);
    let warning = wait_for_warning(
        &client,
        client.default_namespace(),
        "undecodable",
        "FailedDecode",
    )
    .await;
    assert!(warning.contains("undecodable"), "{warning}");
    eventually("the CloneSet listed with it reconciled", WAIT, || async {
        (pods_of(&client, "before").await.len() == 2).then_some(())
    })
    .await;
    // And one created afterwards, through the same watch.
    clonesets
        .create(
            &PostParams::default(),
            &cloneset("after", 1, "nginx:1", json!({})),
        )
        .await
        .unwrap();
    eventually("a CloneSet created later reconciled", WAIT, || async {
        let cs = clonesets.get("after").await.ok()?;
        (cs.status?.replicas == 1).then_some(())
    })
    .await;
    assert!(pods_of(&client, "undecodable").await.is_empty());
    let metrics = controller.metrics.encode().unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("kruise_watch_decode_errors_total{kind=\"CloneSet\"}")),
        "{metrics}"
    );
    let undecodable = raw.get("undecodable").await.unwrap();
    assert!(undecodable.data.get("status").is_none_or(|s| s.is_null()));
    assert_eq!(undecodable.name_any(), "undecodable");
    controller.stop().await;
    cluster.shutdown().await;
}
