//! The chart's RBAC as the test cluster enforces it (`KRUISE_TEST_AUTHORIZE=1`): on
//! kruise-sim by its authorizer, on the real API server of `KRUISE_TEST_KUBECONFIG` by
//! kube-apiserver's, with the token it issued for the ServiceAccount. A controller's client
//! may do what its family's role allows and nothing else; the test's own client stays
//! admin. Without the switch the controller's client is the admin client.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::{Pod, Secret};
use kruise_testkit::rbac::{self, Forbidden};
use kube::api::{Api, ListParams};

#[tokio::test]
async fn a_controller_is_held_to_its_chart_role() {
    let (cluster, admin) = kruise_testkit::cluster_with_crds(0, &[]).await;
    let controller = if rbac::enforced() {
        rbac::as_service_account(&admin, "kruise-cloneset", Forbidden::Return)
    } else {
        rbac::controller_client(&admin, "cloneset")
    };
    let pods: Api<Pod> = Api::default_namespaced(controller.clone());
    pods.list(&ListParams::default()).await.unwrap();
    // Secrets only in the release namespace (its Role), not in the workloads'.
    let release: Api<Secret> = Api::namespaced(controller.clone(), rbac::NAMESPACE);
    let listed = Api::<Secret>::default_namespaced(controller)
        .list(&ListParams::default())
        .await;
    if rbac::enforced() {
        release.list(&ListParams::default()).await.unwrap();
        match listed {
            Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
            other => panic!("listing the workloads' secrets as kruise-cloneset: {other:?}"),
        }
    } else {
        listed.unwrap();
    }
    Api::<Secret>::default_namespaced(admin)
        .list(&ListParams::default())
        .await
        .unwrap();
    cluster.shutdown().await;
}
