//! The AdvancedCronJob controller against kruise-sim, or the real API server of
//! `KRUISE_TEST_KUBECONFIG`, on a clock the test moves: one child per run (a batch/v1 Job
//! run by the cluster's Job controller, or a BroadcastJob run by this binary's own
//! controller), none twice across a controller restart. The `sim_only_*` test needs a kind
//! that is not installed, then installs it: a shared cluster cannot promise the first.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use kruise_broadcastjob::api::v1beta1::{AdvancedCronJob, BroadcastJob};
use kruise_broadcastjob::plan::cron::{child_name, new_job};
use kube::ResourceExt as _;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use support::*;

/// The first whole minute after `t`.
fn next_minute(t: Timestamp) -> Timestamp {
    let s = t.as_second();
    Timestamp::from_second(s - s.rem_euclid(60) + 60).unwrap()
}

async fn job_names(client: &kube::Client) -> Vec<String> {
    let mut names: Vec<String> = Api::<Job>::default_namespaced(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|j| j.name_any())
        .collect();
    names.sort();
    names
}

async fn create_cron(client: &kube::Client, cron: &AdvancedCronJob) -> AdvancedCronJob {
    Api::<AdvancedCronJob>::default_namespaced(client.clone())
        .create(&PostParams::default(), cron)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_job_per_run_and_none_twice_across_a_restart() {
    let (cluster, client) = cluster_with_crds(1).await;
    let cron = create_cron(
        &client,
        &advancedcronjob(
            "tick",
            json!({"schedule": "*/1 * * * *", "template": {"jobTemplate": {
            "spec": {"template": job_template("100ms", 0)}}}}),
        ),
    )
    .await;
    let created = cron.metadata.creation_timestamp.clone().unwrap().0;
    let first = next_minute(created);
    // The clock starts at the creation: no run is due yet.
    let clock = TestClock::at(created);
    let controllers = Controllers::start_with(&client, Some(&clock));

    // Before the run: nothing; at it: its Job, named by its time.
    let status = eventually("the status type", WAIT, || {
        let client = client.clone();
        async move {
            Api::<AdvancedCronJob>::default_namespaced(client)
                .get("tick")
                .await
                .unwrap()
                .status
                .filter(|s| s.type_.is_some())
        }
    })
    .await;
    assert_eq!(status.type_.unwrap().as_str(), "Job");
    assert!(job_names(&client).await.is_empty());
    clock.set(first.checked_add(SignedDuration::from_secs(5)).unwrap());
    let first_name = format!("tick-{}", first.as_second());
    eventually("the first run's job", WAIT, || {
        let client = client.clone();
        let want = vec![first_name.clone()];
        async move { (job_names(&client).await == want).then_some(()) }
    })
    .await;
    let job = Api::<Job>::default_namespaced(client.clone())
        .get(&first_name)
        .await
        .unwrap();
    assert_eq!(
        job.annotations()
            .get("apps.kruise.io/scheduled-at")
            .map(String::as_str),
        Some(first.strftime("%Y-%m-%dT%H:%M:%SZ").to_string().as_str())
    );
    eventually("lastScheduleTime", WAIT, || {
        let client = client.clone();
        async move {
            let s = Api::<AdvancedCronJob>::default_namespaced(client)
                .get("tick")
                .await
                .unwrap()
                .status?;
            (s.last_schedule_time.map(|t| t.0) == Some(first)).then_some(())
        }
    })
    .await;

    // A restart between the next tick and its child's creation: the child exists (the
    // previous leader created it) but the status never recorded the run.
    controllers.stop().await;
    let second = first.checked_add(SignedDuration::from_mins(1)).unwrap();
    let cron = Api::<AdvancedCronJob>::default_namespaced(client.clone())
        .get("tick")
        .await
        .unwrap();
    let second_name = child_name(&cron, second);
    Api::<Job>::default_namespaced(client.clone())
        .create(
            &PostParams::default(),
            &new_job(&cron, &second_name, second).unwrap(),
        )
        .await
        .unwrap();
    clock.set(second.checked_add(SignedDuration::from_secs(5)).unwrap());
    let controllers = Controllers::start_with(&client, Some(&clock));
    eventually("the status catches up with the second run", WAIT, || {
        let client = client.clone();
        async move {
            let s = Api::<AdvancedCronJob>::default_namespaced(client)
                .get("tick")
                .await
                .unwrap()
                .status?;
            (s.last_schedule_time.map(|t| t.0) == Some(second)).then_some(())
        }
    })
    .await;
    assert_eq!(
        job_names(&client).await,
        [first_name.clone(), second_name.clone()],
        "no duplicate"
    );

    // The next slot: one more job.
    let third = second.checked_add(SignedDuration::from_mins(1)).unwrap();
    clock.set(third.checked_add(SignedDuration::from_secs(1)).unwrap());
    let third_name = format!("tick-{}", third.as_second());
    eventually("the third run's job", WAIT, || {
        let client = client.clone();
        let want = vec![first_name.clone(), second_name.clone(), third_name.clone()];
        async move { (job_names(&client).await == want).then_some(()) }
    })
    .await;
    controllers.stop().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broadcastjob_template_runs_without_the_job_controller_and_the_child_completes() {
    let (cluster, client) = cluster_with_crds(2).await;
    let cron = create_cron(
        &client,
        &advancedcronjob(
            "nightly",
            json!({"schedule": "@hourly", "template": {"broadcastJobTemplate": {
            "metadata": {"labels": {"team": "infra"}},
            "spec": {"template": job_template("100ms", 0)}}}}),
        ),
    )
    .await;
    let created = cron.metadata.creation_timestamp.clone().unwrap().0;
    let s = created.as_second();
    let hour = Timestamp::from_second(s - s.rem_euclid(3600) + 3600).unwrap();
    let clock = TestClock::at(hour.checked_add(SignedDuration::from_secs(2)).unwrap());
    let controllers = Controllers::start_with(&client, Some(&clock));
    let name = format!("nightly-{}", hour.as_second());
    let child = eventually("the child BroadcastJob completes", WAIT, || {
        let client = client.clone();
        let name = name.clone();
        async move {
            Api::<BroadcastJob>::default_namespaced(client)
                .get_opt(&name)
                .await
                .unwrap()
                .filter(|j| j.status.as_ref().is_some_and(|s| s.phase == "completed"))
        }
    })
    .await;
    assert_eq!(
        child.labels().get("team").map(String::as_str),
        Some("infra")
    );
    assert_eq!(child.status.unwrap().succeeded, 2);
    let status = eventually("the cron job has no active child", WAIT, || {
        let client = client.clone();
        async move {
            Api::<AdvancedCronJob>::default_namespaced(client)
                .get("nightly")
                .await
                .unwrap()
                .status
                .filter(|s| s.active.is_empty() && s.last_schedule_time.is_some())
        }
    })
    .await;
    assert_eq!(status.type_.unwrap().as_str(), "BroadcastJob");
    controllers.stop().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_runs_nothing_and_resuming_runs_only_the_latest_missed_run() {
    // OpenKruise's e2e: pause -> the count stays; resume -> more jobs.
    let (cluster, client) = cluster_with_crds(1).await;
    let cron = create_cron(
        &client,
        &advancedcronjob(
            "pausable",
            json!({"schedule": "*/1 * * * *", "paused": true,
            "template": {"jobTemplate": {"spec": {"template": job_template("100ms", 0)}}}}),
        ),
    )
    .await;
    let created = cron.metadata.creation_timestamp.clone().unwrap().0;
    let clock = TestClock::at(created);
    let controllers = Controllers::start_with(&client, Some(&clock));
    let api = Api::<AdvancedCronJob>::default_namespaced(client.clone());
    eventually("the paused cron job's status", WAIT, || {
        let api = api.clone();
        async move {
            api.get("pausable")
                .await
                .unwrap()
                .status
                .filter(|s| s.type_.is_some())
        }
    })
    .await;
    // Five runs pass while paused: none starts.
    let fifth = next_minute(created)
        .checked_add(SignedDuration::from_mins(4))
        .unwrap();
    clock.set(fifth.checked_add(SignedDuration::from_secs(10)).unwrap());
    let before = controllers.cron_reconciles();
    eventually(
        "the controller looked at the moved clock twice",
        WAIT,
        || {
            let done = controllers.cron_reconciles() >= before + 2;
            async move { done.then_some(()) }
        },
    )
    .await;
    let paused = api.get("pausable").await.unwrap();
    assert!(paused.status.unwrap().last_schedule_time.is_none());
    assert!(job_names(&client).await.is_empty());
    api.patch(
        "pausable",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"spec": {"paused": false}})),
    )
    .await
    .unwrap();
    let want = vec![format!("pausable-{}", fifth.as_second())];
    eventually("only the latest missed run starts", WAIT, || {
        let client = client.clone();
        let want = want.clone();
        async move { (job_names(&client).await == want).then_some(()) }
    })
    .await;
    controllers.stop().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_deletes_the_running_child_for_the_next_run() {
    let (cluster, client) = cluster_with_crds(1).await;
    let cron = create_cron(
        &client,
        &advancedcronjob(
            "replacing",
            json!({"schedule": "*/1 * * * *", "concurrencyPolicy": "Replace",
            "template": {"jobTemplate": {"spec": {"template": job_template("10m", 0)}}}}),
        ),
    )
    .await;
    let created = cron.metadata.creation_timestamp.clone().unwrap().0;
    let first = next_minute(created);
    let clock = TestClock::at(first.checked_add(SignedDuration::from_secs(1)).unwrap());
    let controllers = Controllers::start_with(&client, Some(&clock));
    let first_name = format!("replacing-{}", first.as_second());
    eventually("the first run's job", WAIT, || {
        let client = client.clone();
        let want = vec![first_name.clone()];
        async move { (job_names(&client).await == want).then_some(()) }
    })
    .await;
    let second = first.checked_add(SignedDuration::from_mins(1)).unwrap();
    clock.set(second.checked_add(SignedDuration::from_secs(1)).unwrap());
    let want = vec![format!("replacing-{}", second.as_second())];
    eventually("the second run replaced the first", WAIT, || {
        let client = client.clone();
        let want = want.clone();
        async move { (job_names(&client).await == want).then_some(()) }
    })
    .await;
    controllers.stop().await;
    cluster.shutdown().await;
}

/// A stand-in for the ImageListPullJob CRD (another family's): any spec, a status subresource.
fn image_list_pull_job_crd()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "imagelistpulljobs.apps.kruise.io"},
        "spec": {"group": "apps.kruise.io", "scope": "Namespaced",
            "names": {"kind": "ImageListPullJob", "plural": "imagelistpulljobs", "singular": "imagelistpulljob", "listKind": "ImageListPullJobList"},
            "versions": [{"name": "v1beta1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
    }))
    .unwrap()
}

fn pull_cron() -> AdvancedCronJob {
    advancedcronjob(
        "pull",
        json!({"schedule": "@hourly", "concurrencyPolicy": "Replace",
        // `completionPolicy` is required by the schema (OpenKruise's, as kube-apiserver
        // checks it); empty, it still gets the controller's defaults.
        "template": {"imageListPullJobTemplate": {"spec": {"images": ["nginx:1.25"],
            "completionPolicy": {}}}}}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_only_an_image_list_pull_job_template_creates_its_child_once_the_kind_is_installed() {
    use kruise_broadcastjob::api::imagelistpulljob::ImageListPullJob;
    let (_sim, client) = sim_with_crds(1).await;
    let cron = create_cron(&client, &pull_cron()).await;
    let created = cron.metadata.creation_timestamp.clone().unwrap().0;
    let s = created.as_second();
    let hour = Timestamp::from_second(s - s.rem_euclid(3600) + 3600).unwrap();
    let clock = TestClock::at(hour.checked_add(SignedDuration::from_secs(2)).unwrap());
    let controllers = Controllers::start_with(&client, Some(&clock));
    let message = kruise_testkit::wait_for_warning(
        &client,
        client.default_namespace(),
        "pull",
        "MissingKind",
    )
    .await;
    assert!(
        message.contains("imagelistpulljobs.apps.kruise.io is not installed"),
        "{message}"
    );

    kruise_testkit::sim::install_crds(&client, &[image_list_pull_job_crd()]).await;
    let api = Api::<ImageListPullJob>::default_namespaced(client.clone());
    let name = format!("pull-{}", hour.as_second());
    let child = eventually(
        "the ImageListPullJob of the run",
        std::time::Duration::from_secs(40),
        || {
            let api = api.clone();
            let name = name.clone();
            async move { api.get_opt(&name).await.unwrap() }
        },
    )
    .await;
    assert_eq!(
        child.spec.fields.get("images"),
        Some(&json!(["nginx:1.25"]))
    );
    // No webhook runs here: the controller applied OpenKruise's template defaults itself.
    assert_eq!(
        (
            child.spec.fields.get("completionPolicy"),
            child.spec.fields.get("pullPolicy"),
            child.spec.fields.get("imagePullPolicy")
        ),
        (
            Some(&json!({"type": "Always"})),
            Some(&json!({"timeoutSeconds": 600, "backoffLimit": 3})),
            Some(&json!("IfNotPresent"))
        )
    );
    api.patch_status(
        &name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"status": {"desired": 1, "succeeded": 1,
            "startTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T00:01:00Z"}})),
    )
    .await
    .unwrap();
    let status = eventually("the finished child is not active", WAIT, || {
        let client = client.clone();
        async move {
            Api::<AdvancedCronJob>::default_namespaced(client)
                .get("pull")
                .await
                .unwrap()
                .status
                .filter(|s| s.active.is_empty() && s.last_schedule_time.is_some())
        }
    })
    .await;
    assert_eq!(status.type_.unwrap().as_str(), "ImageListPullJob");
    controllers.stop().await;
}
