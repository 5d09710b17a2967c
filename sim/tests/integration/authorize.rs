//! `SimConfig::authorize`: requests with a bearer token are held to the stored RBAC
//! objects (403 with kube-apiserver's message); requests without one stay allowed.

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use crate::common::{api_err, sim_with};

const READER: &str = "system:serviceaccount:apps:reader";

#[tokio::test]
async fn service_account_tokens_get_what_their_roles_grant() {
    let sim = sim_with(kruise_sim::SimConfig {
        authorize: true,
        ..Default::default()
    })
    .await;
    let admin = sim.client().unwrap();
    let apply = |doc: serde_json::Value| {
        let admin = admin.clone();
        async move {
            let resource = match doc["kind"].as_str().unwrap() {
                "Namespace" => "namespaces",
                "Role" => "roles",
                "RoleBinding" => "rolebindings",
                "ClusterRole" => "clusterroles",
                "ClusterRoleBinding" => "clusterrolebindings",
                other => panic!("{other}"),
            };
            let group = if resource == "namespaces" {
                "api/v1".to_string()
            } else {
                "apis/rbac.authorization.k8s.io/v1".to_string()
            };
            let ns = doc["metadata"]["namespace"]
                .as_str()
                .map(|n| format!("/namespaces/{n}"))
                .unwrap_or_default();
            let (status, body) = crate::common::raw(
                &admin,
                "POST",
                &format!("/{group}{ns}/{resource}"),
                Some("application/json"),
                doc.to_string().as_bytes(),
            )
            .await;
            assert_eq!(status, 201, "{body}");
        }
    };
    apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}})).await;
    apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})).await;
    apply(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "pod-reader", "namespace": "apps"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]}),
    )
    .await;
    apply(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "reader", "namespace": "apps"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "apps"}]}),
    )
    .await;
    apply(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "configmap-creator"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]}),
    )
    .await;
    apply(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "all-service-accounts-create-configmaps"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "configmap-creator"},
        "subjects": [{"kind": "Group", "name": "system:serviceaccounts"}]})).await;

    let mut config = sim.client_config().unwrap();
    config.auth_info.token = Some(READER.to_string().into());
    let reader = kube::Client::try_from(config).unwrap();

    // Its Role in its namespace.
    Api::<Pod>::namespaced(reader.clone(), "apps")
        .list(&ListParams::default())
        .await
        .unwrap();
    // Not in another namespace, and not a verb its Role lacks.
    let denied = Api::<Pod>::namespaced(reader.clone(), "other")
        .list(&ListParams::default())
        .await;
    let status = api_err(denied.unwrap_err());
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        status.message,
        format!(
            "pods is forbidden: User \"{READER}\" cannot list resource \"pods\" in API group \"\" in the namespace \"other\""
        )
    );
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))
    .unwrap();
    let status = api_err(
        Api::<Pod>::namespaced(reader.clone(), "apps")
            .create(&PostParams::default(), &pod)
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 403, "{}", status.message);
    // A ClusterRoleBinding to its group applies in every namespace.
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "c"}})).unwrap();
    Api::<ConfigMap>::namespaced(reader.clone(), "other")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    // Without a token: the admin, allowed.
    Api::<Pod>::namespaced(admin.clone(), "apps")
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
}
