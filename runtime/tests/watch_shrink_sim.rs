//! `Watch::shrink`: what a controller never reads is dropped before the object is cached.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Node;
use kruise_runtime::watch::Watch;

#[tokio::test]
async fn shrunk_objects_are_cached_without_the_dropped_fields() {
    let (_sim, client) = kruise_testkit::sim_with_crds(2, &[]).await;
    let (store, mut stream) = Watch::<Node>::new(client, None)
        .shrink(|node: &mut Node| {
            if let Some(status) = node.status.as_mut() {
                status.conditions = None;
                status.node_info = None;
            }
        })
        .reflect();
    let drive = tokio::spawn(async move { while stream.next().await.is_some() {} });
    store.wait_until_ready().await.unwrap();
    let nodes = store.state();
    assert_eq!(nodes.len(), 2);
    for node in nodes {
        let status = node.status.as_ref().unwrap();
        assert!(
            status.conditions.is_none() && status.node_info.is_none(),
            "{status:?}"
        );
        assert!(status.allocatable.is_some(), "what was not dropped stays");
    }
    drive.abort();
}
