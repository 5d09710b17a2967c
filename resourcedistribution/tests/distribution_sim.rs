//! The ResourceDistribution controller against kruise-sim, or the real API server of
//! `KRUISE_TEST_KUBECONFIG`: copies follow namespaces as they come, change labels and go,
//! copies edited or deleted by hand are put back, a same-named object it does not own is
//! left alone and reported, and an unchanged distribution costs no write.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kruise_resourcedistribution::api::{
    HASH_ANNOTATION, ResourceDistribution, ResourceDistributionStatus, SOURCE_ANNOTATION,
};
use kruise_resourcedistribution::controller::{self, CONTROLLER_NAME};
use kruise_resourcedistribution::plan::resource_hash;
use kruise_runtime::{Metrics, Readiness, RunOptions};
use kruise_testkit::cluster::NAMESPACE_LABEL;
use kruise_testkit::{TestCluster, WAIT, eventually};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

async fn cluster() -> (TestCluster, Client) {
    kruise_testkit::cluster_with_crds(0, &[kruise_resourcedistribution::api::crd::crd().unwrap()])
        .await
}

/// The controller in-process; [`Controller::stop`] waits for in-flight reconciles.
struct Controller {
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Controller {
    fn start(client: &Client) -> Self {
        let shutdown = CancellationToken::new();
        let client = kruise_testkit::controller_client(client, "resourcedistribution");
        let opts = RunOptions {
            name: CONTROLLER_NAME.into(),
            concurrency: 3,
            metrics: Metrics::new(),
            readiness: Readiness::default(),
            shutdown: shutdown.clone(),
            leadership: Default::default(),
        };
        let task = tokio::spawn(async move { controller::run(client, opts).await });
        Self { shutdown, task }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        let _ = self.task.await;
    }
}

/// A namespace of the test, `<test namespace>-<suffix>`, labelled as the harness's own (a
/// failed run's are cleaned up with them) and with `labels`.
async fn namespace(client: &Client, suffix: &str, labels: Value) -> String {
    let name = format!("{}-{suffix}", client.default_namespace());
    let mut all_labels = json!({NAMESPACE_LABEL: "true"});
    all_labels
        .as_object_mut()
        .unwrap()
        .extend(labels.as_object().cloned().unwrap_or_default());
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": all_labels}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    name
}

async fn delete_namespace(client: &Client, name: &str) {
    let _ = Api::<Namespace>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await;
}

async fn label_namespace(client: &Client, name: &str, labels: Value) {
    Api::<Namespace>::all(client.clone())
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": labels}})),
        )
        .await
        .unwrap();
}

async fn create_distribution(client: &Client, name: &str, spec: Value) -> ResourceDistribution {
    let rd: ResourceDistribution = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "ResourceDistribution",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap();
    Api::<ResourceDistribution>::all(client.clone())
        .create(&PostParams::default(), &rd)
        .await
        .unwrap()
}

async fn delete_distribution(client: &Client, name: &str) {
    let _ = Api::<ResourceDistribution>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await;
}

async fn status_where(
    client: &Client,
    name: &str,
    what: &str,
    check: impl Fn(&ResourceDistributionStatus) -> bool,
) -> ResourceDistributionStatus {
    let api = Api::<ResourceDistribution>::all(client.clone());
    eventually(what, WAIT, || {
        let api = api.clone();
        let check = &check;
        async move {
            let rd = api.get(name).await.ok()?;
            let status = rd.status?;
            (status.observed_generation == rd.metadata.generation.unwrap_or_default()
                && check(&status))
            .then_some(status)
        }
    })
    .await
}

async fn secret_in(client: &Client, namespace: &str, name: &str) -> Option<Secret> {
    Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .unwrap()
}

async fn wait_for_secret(
    client: &Client,
    namespace: &str,
    name: &str,
    what: &str,
    check: impl Fn(Option<&Secret>) -> bool,
) {
    eventually(what, WAIT, || async {
        check(secret_in(client, namespace, name).await.as_ref()).then_some(())
    })
    .await;
}

fn failed_in(status: &ResourceDistributionStatus, condition: &str) -> Vec<String> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == condition)
        .map(|c| c.failed_namespaces.clone())
        .unwrap_or_default()
}

fn secret_value(secret: Option<&Secret>, key: &str) -> Option<String> {
    let data = secret?.data.as_ref()?;
    String::from_utf8(data.get(key)?.0.clone()).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_follow_namespaces_as_they_come_change_labels_and_go() {
    let (cluster, client) = cluster().await;
    let prefix = client.default_namespace().to_string();
    let team = format!("{prefix}-team");
    let labelled = namespace(&client, "a", json!({"team": team})).await;
    let excluded = namespace(&client, "b", json!({"team": team})).await;
    let plain = namespace(&client, "c", json!({})).await;
    let later = format!("{prefix}-d");
    let controller = Controller::start(&client);
    let resource = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "shared", "labels": {"app": "demo"}},
        "stringData": {"token": "abc"},
    });
    let rd_name = format!("{prefix}-follow");
    let rd = create_distribution(
        &client,
        &rd_name,
        json!({
            "resource": resource,
            "targets": {
                "includedNamespaces": {"list": [{"name": later}]},
                "excludedNamespaces": {"list": [{"name": excluded}]},
                "namespaceLabelSelector": {"matchLabels": {"team": team}},
            },
        }),
    )
    .await;

    // The labelled namespace has its copy; the listed one does not exist yet.
    let status = status_where(&client, &rd_name, "the first sync", |s| {
        s.desired == 2 && s.succeeded == 1
    })
    .await;
    assert_eq!(status.failed, 1);
    assert_eq!(
        failed_in(&status, "NamespaceNotExists"),
        vec![later.clone()]
    );
    assert_eq!(status.conditions.len(), 6);
    let copy = secret_in(&client, &labelled, "shared").await.unwrap();
    assert_eq!(secret_value(Some(&copy), "token").as_deref(), Some("abc"));
    assert_eq!(copy.labels().get("app").map(String::as_str), Some("demo"));
    let annotations = copy.annotations();
    assert_eq!(annotations[SOURCE_ANNOTATION], rd_name);
    assert_eq!(
        annotations[HASH_ANNOTATION],
        resource_hash(&rd.spec.resource)
    );
    let owner = &copy.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("ResourceDistribution", rd_name.as_str(), Some(true))
    );
    assert_eq!(owner.uid, rd.metadata.uid.clone().unwrap());
    assert!(secret_in(&client, &excluded, "shared").await.is_none());
    assert!(secret_in(&client, &plain, "shared").await.is_none());

    // The listed namespace is created; another is labelled in; the first labelled out.
    let later = namespace(&client, "d", json!({})).await;
    label_namespace(&client, &plain, json!({"team": team})).await;
    wait_for_secret(
        &client,
        &later,
        "shared",
        "the copy in the new namespace",
        |s| s.is_some(),
    )
    .await;
    wait_for_secret(
        &client,
        &plain,
        "shared",
        "the copy in the relabelled namespace",
        |s| s.is_some(),
    )
    .await;
    label_namespace(&client, &labelled, json!({"team": null})).await;
    wait_for_secret(
        &client,
        &labelled,
        "shared",
        "the copy gone where it no longer belongs",
        |s| s.is_none(),
    )
    .await;
    let status = status_where(&client, &rd_name, "every target synced", |s| {
        s.desired == 2 && s.succeeded == 2
    })
    .await;
    assert!(
        status
            .conditions
            .iter()
            .all(|c| c.status == "False" && c.reason == "Succeeded")
    );

    // A new resource reaches every copy; deleting the distribution takes its copies.
    Api::<ResourceDistribution>::all(client.clone())
        .patch(
            &rd_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resource": {"stringData": {"token": "xyz"}}}})),
        )
        .await
        .unwrap();
    for ns in [&later, &plain] {
        wait_for_secret(&client, ns, "shared", "the new data in every copy", |s| {
            secret_value(s, "token").as_deref() == Some("xyz")
        })
        .await;
    }
    delete_distribution(&client, &rd_name).await;
    for ns in [&later, &plain] {
        wait_for_secret(
            &client,
            ns,
            "shared",
            "the copies collected with their distribution",
            |s| s.is_none(),
        )
        .await;
    }
    controller.stop().await;
    for ns in [&labelled, &excluded, &plain, &later] {
        delete_namespace(&client, ns).await;
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_edited_or_deleted_by_hand_is_put_back_and_a_foreign_object_left_alone() {
    let (cluster, client) = cluster().await;
    let prefix = client.default_namespace().to_string();
    let mine = namespace(&client, "mine", json!({})).await;
    let taken = namespace(&client, "taken", json!({})).await;
    // A ConfigMap of the same name the distribution does not own.
    let configmaps = |ns: &str| Api::<ConfigMap>::namespaced(client.clone(), ns);
    let foreign: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "settings"}, "data": {"owner": "someone else"},
    }))
    .unwrap();
    configmaps(&taken)
        .create(&PostParams::default(), &foreign)
        .await
        .unwrap();
    let controller = Controller::start(&client);
    let rd_name = format!("{prefix}-restore");
    create_distribution(
        &client,
        &rd_name,
        json!({
            "resource": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"mode": "fast"}},
            "targets": {"includedNamespaces": {"list": [{"name": mine}, {"name": taken}]}},
        }),
    )
    .await;
    let status = status_where(&client, &rd_name, "the conflict reported", |s| {
        s.succeeded == 1
    })
    .await;
    assert_eq!(failed_in(&status, "ConflictOccurred"), vec![taken.clone()]);
    let conflict = status
        .conditions
        .iter()
        .find(|c| c.type_ == "ConflictOccurred")
        .unwrap();
    assert_eq!(conflict.status, "True");
    assert_eq!(
        conflict.reason,
        "conflict with existing resources because of the same namespace, group, version, kind and name"
    );
    let untouched = configmaps(&taken).get("settings").await.unwrap();
    assert_eq!(untouched.data.unwrap()["owner"], "someone else");
    assert!(untouched.metadata.owner_references.is_none());

    // Edited by hand: put back. Deleted by hand: made again.
    let data = |cm: Option<ConfigMap>| cm.and_then(|c| c.data).unwrap_or_default();
    configmaps(&mine)
        .patch(
            "settings",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"mode": "slow", "extra": "x"}})),
        )
        .await
        .unwrap();
    eventually("the edited copy put back", WAIT, || async {
        let d = data(configmaps(&mine).get_opt("settings").await.unwrap());
        (d == BTreeMap::from([("mode".to_string(), "fast".to_string())])).then_some(())
    })
    .await;
    configmaps(&mine)
        .delete("settings", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the deleted copy made again", WAIT, || async {
        let d = data(configmaps(&mine).get_opt("settings").await.unwrap());
        (d.get("mode").map(String::as_str) == Some("fast")).then_some(())
    })
    .await;

    // The foreign object goes: the copy takes its place.
    configmaps(&taken)
        .delete("settings", &DeleteParams::default())
        .await
        .unwrap();
    let status = status_where(&client, &rd_name, "both namespaces synced", |s| {
        s.succeeded == 2
    })
    .await;
    assert!(failed_in(&status, "ConflictOccurred").is_empty());
    controller.stop().await;
    delete_distribution(&client, &rd_name).await;
    for ns in [&mine, &taken] {
        delete_namespace(&client, ns).await;
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_distribution_is_not_rewritten_even_after_a_restart() {
    let (cluster, client) = cluster().await;
    let prefix = client.default_namespace().to_string();
    let label = format!("{prefix}-quiet");
    let mut namespaces = Vec::new();
    for i in 0..4 {
        namespaces.push(namespace(&client, &format!("q{i}"), json!({"spread": label})).await);
    }
    let controller = Controller::start(&client);
    let rd_name = format!("{prefix}-quiet");
    create_distribution(
        &client,
        &rd_name,
        json!({
            "resource": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "quiet"}, "stringData": {"k": "v"}},
            "targets": {"namespaceLabelSelector": {"matchLabels": {"spread": label}}},
        }),
    )
    .await;
    status_where(&client, &rd_name, "every namespace synced", |s| {
        s.succeeded == 4
    })
    .await;
    let counters = cluster.counters();
    assert_eq!(
        counters.count("create", "secrets"),
        4,
        "one create per namespace"
    );
    assert_eq!(
        counters.count("update", "secrets"),
        0,
        "no rewrite of a fresh copy"
    );

    // A restart reads each copy once and writes none of them.
    controller.stop().await;
    counters.reset();
    let controller = Controller::start(&client);
    // An unrelated label change on every namespace wakes the distribution.
    for ns in &namespaces {
        label_namespace(&client, ns, json!({"unrelated": "yes"})).await;
    }
    eventually("the restarted controller read the copies", WAIT, || async {
        (counters.count("get", "secrets") >= 4).then_some(())
    })
    .await;
    assert_eq!(counters.writes("secrets"), 0);
    assert_eq!(
        counters.count_sub("patch", "resourcedistributions", "status"),
        0
    );
    assert_eq!(
        counters.count_sub("update", "resourcedistributions", "status"),
        0
    );
    controller.stop().await;
    delete_distribution(&client, &rd_name).await;
    for ns in &namespaces {
        delete_namespace(&client, ns).await;
    }
    cluster.shutdown().await;
}
