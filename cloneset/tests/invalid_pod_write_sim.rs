//! A pod write the API server refuses as invalid (422) is never retried hot (issue 26, item
//! 1): a CloneSet template whose annotations fit kube-apiserver's 256 KiB limit on their
//! own but not together with the annotations the in-place update adds to the pod (a refusal
//! no template check can foresee) costs a bounded number of pod patches, a Warning event
//! and a `FailedUpdate` condition, and never makes a pod unready. Against kruise-sim, or the
//! real API server of `KRUISE_TEST_KUBECONFIG` (whose refusal kruise-sim mimics).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kruise_cloneset::api::v1beta1::CloneSet;
use kruise_cloneset::controller::REASON_FAILED_UPDATE_IN_PLACE;
use kruise_compat::podtemplate::MAX_ANNOTATIONS_BYTES;
use kruise_core::api::keys::INPLACE_UPDATE_READY;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt as _};
use serde_json::json;
use support::{RunningController, WAIT, cloneset, cluster_with_crd, eventually, pods_of};

fn condition_status<'a>(pod: &'a Pod, type_: &str) -> Option<&'a str> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.as_str())
}

/// Every spec or status patch sent for a pod, accepted or refused.
fn pod_patches(counters: &kruise_sim::Counters) -> u64 {
    counters.count("patch", "pods")
}

/// Counts, per pod of `app`, the times its Ready condition was seen going True -> False.
fn count_ready_flips(client: &Client, app: &str) -> Arc<Mutex<HashMap<String, u32>>> {
    let flips: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let api: Api<Pod> = Api::default_namespaced(client.clone());
    let config = watcher::Config::default().labels(&format!("app={app}"));
    let seen = flips.clone();
    tokio::spawn(async move {
        let mut last: HashMap<String, String> = HashMap::new();
        let mut events = watcher::watcher(api, config).boxed();
        while let Some(Ok(event)) = events.next().await {
            let pods = match event {
                watcher::Event::Apply(p) | watcher::Event::InitApply(p) => vec![p],
                _ => continue,
            };
            for pod in pods {
                let now = condition_status(&pod, "Ready").unwrap_or("").to_string();
                let before = last.insert(pod.name_any(), now.clone());
                if before.as_deref() == Some("True") && now != "True" {
                    *seen.lock().unwrap().entry(pod.name_any()).or_default() += 1;
                }
            }
        }
    });
    flips
}

#[tokio::test]
async fn an_invalid_template_annotation_is_not_retried_hot_and_pods_stay_ready() {
    let (cluster, client) = cluster_with_crd().await;
    let controller = RunningController::start(&client);
    let clonesets: Api<CloneSet> = Api::default_namespaced(client.clone());
    clonesets
        .create(
            &PostParams::default(),
            &cloneset(
                "web",
                2,
                "nginx:1",
                json!({"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceOnly", "maxUnavailable": 2}}}),
            ),
        )
        .await
        .unwrap();
    eventually("2 ready pods", WAIT, || async {
        let s = clonesets.get("web").await.unwrap().status?;
        (s.ready_replicas == 2 && s.updated_ready_replicas == 2).then_some(())
    })
    .await;
    let flips = count_ready_flips(&client, "web");
    let patches_before = pod_patches(cluster.counters());

    // 40 bytes under the limit in the template; the in-place state annotation the update
    // adds takes the pod over it, and kube-apiserver (and kruise-sim) refuse it with 422.
    let big = "x".repeat(MAX_ANNOTATIONS_BYTES - "big".len() - 40);
    clonesets
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"template": {"metadata": {
                "annotations": {"big": big}}}}})),
        )
        .await
        .unwrap();
    let patched_at = Instant::now();

    eventually("a FailedUpdatePodInPlace Warning event", WAIT, || async {
        kruise_testkit::events_about(&client, client.default_namespace(), "web")
            .await
            .into_iter()
            .any(|e| {
                e.type_.as_deref() == Some("Warning")
                    && e.reason.as_deref() == Some(REASON_FAILED_UPDATE_IN_PLACE)
            })
            .then_some(())
    })
    .await;
    eventually("a FailedUpdate condition", WAIT, || async {
        let s = clonesets.get("web").await.unwrap().status?;
        s.conditions
            .iter()
            .any(|c| {
                c.type_ == "FailedUpdate"
                    && c.status == "True"
                    && c.reason == REASON_FAILED_UPDATE_IN_PLACE
            })
            .then_some(())
    })
    .await;

    // The rate is the outcome: by the third refusal (the condition then says the next try
    // is in 4 s, after backoffs of 1 and 2 s) no pod patch has been sent at all, since the
    // controller sees the patched pod's annotations would be too long before writing
    // anything (at most a dry run per retry is allowed for): where a hot loop would have
    // sent thousands.
    eventually("the third refusal (next try in 4 s)", WAIT, || async {
        let s = clonesets.get("web").await.unwrap().status?;
        s.conditions
            .iter()
            .any(|c| c.type_ == "FailedUpdate" && c.message.contains("retry in 4s"))
            .then_some(())
    })
    .await;
    let patches = pod_patches(cluster.counters()) - patches_before;
    assert!(
        patches <= 2 * 3,
        "{patches} pod patches in {:?}",
        patched_at.elapsed()
    );

    let pods = pods_of(&client, "web").await;
    assert_eq!(pods.len(), 2);
    for pod in &pods {
        assert_eq!(
            condition_status(pod, "Ready"),
            Some("True"),
            "{}",
            pod.name_any()
        );
        assert_eq!(
            condition_status(pod, INPLACE_UPDATE_READY),
            Some("True"),
            "{}",
            pod.name_any()
        );
        assert!(!pod.annotations().contains_key("big"));
    }
    // No attempt made a pod unready, not even the first: no readiness condition is written
    // for an update that cannot happen.
    let flips = flips.lock().unwrap().clone();
    assert!(
        flips.values().all(|n| *n == 0),
        "Ready went False for a refused update: {flips:?}"
    );

    // Fixing the template ends the backoff at once and the update goes through.
    clonesets
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"template": {"metadata": {
                "annotations": {"big": null}}}}})),
        )
        .await
        .unwrap();
    eventually(
        "the fixed template rolled out, condition cleared",
        WAIT,
        || async {
            let cs = clonesets.get("web").await.unwrap();
            let s = cs.status?;
            (s.updated_ready_replicas == 2
                && s.observed_generation == cs.metadata.generation.unwrap_or_default()
                && !s
                    .conditions
                    .iter()
                    .any(|c| c.reason == REASON_FAILED_UPDATE_IN_PLACE))
            .then_some(())
        },
    )
    .await;
    controller.stop().await;
    cluster.shutdown().await;
}
