//! Deletion protection of built-in kinds end to end: the webhooks the protection family
//! lends kruise-webhook, built as kruise-webhook builds them (gates
//! `ResourcesDeletionProtection` and `DeletionProtectionForCRDCascadingGate` on), served
//! over TLS and published; kruise-sim, or kube-apiserver with `KRUISE_TEST_KUBECONFIG`,
//! calls them for DELETEs of labelled objects.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    Namespace, PersistentVolume, PersistentVolumeClaim, Pod, Service, ServiceAccount,
};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_admission::AdmissionRoutes;
use kruise_core::featuregate::FeatureGates;
use kruise_protection::deletion_webhook::lent_webhooks;
use kruise_runtime::Metrics;
use kruise_runtime::family::{LiveCluster, StepContext};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use support::*;
use tokio_util::sync::CancellationToken;

const ALWAYS: &str =
    "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Always";

/// Serves the lent webhooks against `client`'s cluster until the token is cancelled, and
/// publishes their entries in kruise-webhook's validating configuration.
async fn serve_protection(client: &Client, metrics: &Metrics) -> CancellationToken {
    kruise_admission::protection_log::init(&log_dir()).unwrap();
    kruise_runtime::install_crypto_provider();
    let shutdown = CancellationToken::new();
    let gates = FeatureGates::parse(
        "ResourcesDeletionProtection=true,DeletionProtectionForCRDCascadingGate=true",
    )
    .unwrap();
    let handlers = lent_webhooks(&StepContext {
        gates,
        live: Some(LiveCluster {
            client: client.clone(),
            refresh: Default::default(),
            shutdown: shutdown.clone(),
        }),
        metrics: metrics.clone(),
    });
    assert_eq!(handlers.len(), 7);
    let routes = handlers
        .into_iter()
        .fold(AdmissionRoutes::new(), AdmissionRoutes::shared_handler);
    serve_validating(client, routes, &shutdown).await;
    shutdown
}

/// The protection log's lines so far (kruise-webhook's `--protection-log-path`), one
/// directory for the whole test binary: the log is process-wide.
fn logged_refusals() -> Vec<String> {
    std::fs::read_to_string(log_dir().join("protection.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn log_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("kruise-deletion-sim-{}", std::process::id()))
}

/// The refusal `webhook` gives, as the client reads it: (code, message).
fn refusal(webhook: &str, reason: &str) -> (u16, String) {
    (
        403,
        format!("admission webhook \"{webhook}\" denied the request: {reason}"),
    )
}

async fn delete_error<K>(api: &Api<K>, name: &str) -> (u16, String)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Err(kube::Error::Api(status)) => (status.code, status.message),
        other => panic!("deleting {name}: expected a refusal, got {other:?}"),
    }
}

async fn apply<K>(api: &Api<K>, object: Value) -> K
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap()
}

async fn label<K>(api: &Api<K>, name: &str, value: Option<&str>)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({"metadata": {"labels": {"policy.kruise.io/delete-protection": value}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_are_protected_always_and_while_they_hold_pods_or_bound_claims() {
    let (cluster, client) = cluster(1).await;
    let metrics = Metrics::new();
    let _stop = serve_protection(&client, &metrics).await.drop_guard();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    // Named after the test's own, so no other run's is in the way on a shared API server.
    let team = format!("{}-team", client.default_namespace());
    let team = team.as_str();
    apply(
        &namespaces,
        json!({"metadata": {"name": team, "labels": {"policy.kruise.io/delete-protection": "Always"}}}),
    )
    .await;
    assert_eq!(
        delete_error(&namespaces, team).await,
        refusal("vnamespace.kb.io", ALWAYS)
    );
    assert!(metrics.encode().unwrap().contains(&format!(
        "namespace_deletion_protection_total{{name=\"{team}\""
    )));
    let logged = format!(
        r#"{{"Event":"DeletionProtection","Kind":"Namespace","Namespace":"","Name":"{team}","UserAgent":""#
    );
    assert!(
        logged_refusals()
            .iter()
            .any(|line| line.starts_with(&logged)),
        "{:?}",
        logged_refusals()
    );

    label(&namespaces, team, Some("Cascading")).await;
    // A pod is admitted once the namespace has its `default` ServiceAccount (made by
    // kube-controller-manager on a real API server; kruise-sim admits pods without one).
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), team);
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap();
    match accounts.create(&PostParams::default(), &account).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(e) => panic!("creating the default ServiceAccount: {e}"),
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), team);
    apply(
        &pods,
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}),
    )
    .await;
    assert_eq!(
        delete_error(&namespaces, team).await,
        refusal(
            "vnamespace.kb.io",
            "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Cascading and active pods 1>0"
        )
    );
    pods.delete("p", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    eventually("the pod gone or terminating", WAIT, || async {
        match pods.get_opt("p").await.unwrap() {
            None => Some(()),
            Some(p) => p.metadata.deletion_timestamp.map(|_| ()),
        }
    })
    .await;

    // K#1223: a Bound claim protects a namespace without pods. Bound to a volume made for
    // it: kube-controller-manager's volume binder binds the two (and would mark a claim
    // Bound to no volume Lost); on kruise-sim, which has no binder, the test writes Bound.
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let volume = format!("{team}-data");
    apply(
        &volumes,
        json!({"metadata": {"name": volume}, "spec": {"accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": "1Gi"}, "storageClassName": "elsewhere",
            "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": "/nowhere"},
            "claimRef": {"namespace": team, "name": "data"}}}),
    )
    .await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), team);
    apply(
        &claims,
        json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "storageClassName": "elsewhere", "volumeName": volume,
            "resources": {"requests": {"storage": "1Gi"}}}}),
    )
    .await;
    claims
        .patch_status(
            "data",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"phase": "Bound"}})),
        )
        .await
        .unwrap();
    eventually("the claim Bound", WAIT, || async {
        let claim = claims.get_opt("data").await.ok()??;
        (claim.status?.phase.as_deref() == Some("Bound")).then_some(())
    })
    .await;
    assert_eq!(
        delete_error(&namespaces, team).await,
        refusal(
            "vnamespace.kb.io",
            "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Cascading and \"Bound\" status pvc 1>0"
        )
    );
    claims
        .delete("data", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the claim gone or terminating", WAIT, || async {
        match claims.get_opt("data").await.unwrap() {
            None => Some(()),
            Some(c) => c.metadata.deletion_timestamp.map(|_| ()),
        }
    })
    .await;
    namespaces
        .delete(team, &DeleteParams::default())
        .await
        .unwrap();
    volumes
        .delete(&volume, &DeleteParams::default())
        .await
        .unwrap();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_services_and_ingresses_are_protected() {
    let (cluster, client) = cluster(1).await;
    let metrics = Metrics::new();
    let stop = serve_protection(&client, &metrics).await;
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let deployment = |name: &str, value: &str, replicas: i32| {
        json!({"metadata": {"name": name, "labels": {"policy.kruise.io/delete-protection": value}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}}})
    };
    apply(&deployments, deployment("always", "Always", 0)).await;
    assert_eq!(
        delete_error(&deployments, "always").await,
        refusal("vbuiltindeployment.kb.io", ALWAYS)
    );
    apply(&deployments, deployment("cascading", "Cascading", 2)).await;
    assert_eq!(
        delete_error(&deployments, "cascading").await,
        refusal(
            "vbuiltindeployment.kb.io",
            "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Cascading and replicas 2>0"
        )
    );
    assert!(metrics.encode().unwrap().contains(&format!(
        "workload_deletion_protection_total{{kind_namespace_name=\"Deployment_{}_cascading\"",
        client.default_namespace()
    )));
    deployments
        .patch(
            "cascading",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": 0}})),
        )
        .await
        .unwrap();
    deployments
        .delete("cascading", &DeleteParams::default())
        .await
        .unwrap();

    let services: Api<Service> = Api::default_namespaced(client.clone());
    let service = |name: &str, value: &str| {
        json!({"metadata": {"name": name, "labels": {"policy.kruise.io/delete-protection": value}},
            "spec": {"ports": [{"port": 80}], "selector": {"app": "web"}}})
    };
    apply(&services, service("web", "Always")).await;
    assert_eq!(
        delete_error(&services, "web").await,
        refusal("vservice.kb.io", ALWAYS)
    );
    label(&services, "web", None).await;
    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    // OpenKruise has no Cascading for a Service.
    apply(&services, service("cascading", "Cascading")).await;
    services
        .delete("cascading", &DeleteParams::default())
        .await
        .unwrap();

    let ingresses: Api<Ingress> = Api::default_namespaced(client.clone());
    apply(
        &ingresses,
        json!({"metadata": {"name": "web", "labels": {"policy.kruise.io/delete-protection": "Always"}},
            "spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}}),
    )
    .await;
    assert_eq!(
        delete_error(&ingresses, "web").await,
        refusal("vingress.kb.io", ALWAYS)
    );
    label(&ingresses, "web", None).await;
    ingresses
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();

    // kube-system is exempt (K#1526).
    let system: Api<Deployment> = Api::namespaced(client.clone(), "kube-system");
    let dns = format!("{}-dns", client.default_namespace());
    apply(&system, deployment(&dns, "Always", 0)).await;
    system.delete(&dns, &DeleteParams::default()).await.unwrap();

    // With the webhook stopped, unlabelled objects are never sent to it; labelled ones
    // fail closed.
    stop.cancel();
    apply(&deployments, deployment("plain", "None", 1)).await;
    label(&deployments, "plain", None).await;
    deployments
        .delete("plain", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        deployments
            .delete("always", &DeleteParams::default())
            .await
            .is_err()
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crds_are_protected_always_and_while_objects_of_their_kind_remain() {
    let (cluster, client) = cluster(1).await;
    let metrics = Metrics::new();
    let _stop = serve_protection(&client, &metrics).await.drop_guard();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = |plural: &str, kind: &str, value: &str| {
        json!({"metadata": {"name": format!("{plural}.example.com"),
                "labels": {"policy.kruise.io/delete-protection": value}},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]}})
    };
    apply(&crds, crd("gadgets", "Gadget", "Always")).await;
    assert_eq!(
        delete_error(&crds, "gadgets.example.com").await,
        refusal("vcustomresourcedefinition.kb.io", ALWAYS)
    );

    apply(&crds, crd("widgets", "Widget", "Cascading")).await;
    let resource = ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let widgets: Api<DynamicObject> = Api::default_namespaced_with(client.clone(), &resource);
    let widget = eventually("the Widget kind served", WAIT, || async {
        let widget = DynamicObject::new("w", &resource).data(json!({"spec": {}}));
        widgets.create(&PostParams::default(), &widget).await.ok()
    })
    .await;
    assert_eq!(widget.metadata.name.as_deref(), Some("w"));
    assert_eq!(
        delete_error(&crds, "widgets.example.com").await,
        refusal(
            "vcustomresourcedefinition.kb.io",
            "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Cascading and active CRs 1>0"
        )
    );
    widgets.delete("w", &DeleteParams::default()).await.unwrap();
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    // Unprotected, the other goes too (a shared API server keeps it for the next run).
    label(&crds, "gadgets.example.com", None).await;
    crds.delete("gadgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    for name in ["gadgets.example.com", "widgets.example.com"] {
        eventually(&format!("CRD {name} gone"), WAIT, || async {
            crds.get_opt(name).await.ok()?.is_none().then_some(())
        })
        .await;
    }
    cluster.shutdown().await;
}

/// kruise-rs's own CRDs as `crd` prints them for the chart carry `Cascading`: once
/// kruise-webhook protects deletions, a CRD is deleted only when no object of its kind is
/// left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kruise_rs_crds_as_the_chart_installs_them_are_deleted_only_once_empty() {
    let printed = kruise_runtime::deletion_protected(kruise_protection::api::crd::crd().unwrap());
    let (cluster, client) = kruise_testkit::cluster_with_crds(0, &[printed]).await;
    // The refusal counts the budgets of every namespace: on a shared API server those of
    // earlier tests go with their namespaces.
    let all_budgets =
        Api::<kruise_protection::api::v1beta1::PodUnavailableBudget>::all(client.clone());
    eventually("no budget left by an earlier test", WAIT, || async {
        all_budgets
            .list(&Default::default())
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    let metrics = Metrics::new();
    let _stop = serve_protection(&client, &metrics).await.drop_guard();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = "podunavailablebudgets.policy.kruise.io";
    let installed = crds.get(name).await.unwrap();
    assert_eq!(
        installed
            .metadata
            .labels
            .unwrap_or_default()
            .get("policy.kruise.io/delete-protection")
            .map(String::as_str),
        Some("Cascading")
    );

    budget(
        &client,
        "web",
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}),
    )
    .await;
    assert_eq!(
        delete_error(&crds, name).await,
        refusal(
            "vcustomresourcedefinition.kb.io",
            "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Cascading and active CRs 1>0"
        )
    );
    Api::<kruise_protection::api::v1beta1::PodUnavailableBudget>::default_namespaced(
        client.clone(),
    )
    .delete("web", &DeleteParams::default())
    .await
    .unwrap();
    crds.delete(name, &DeleteParams::default()).await.unwrap();
    // Gone before the next test installs it again.
    eventually("the CRD gone", WAIT, || async {
        crds.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
    cluster.shutdown().await;
}
