//! The Job controller: pods from the template, completions and parallelism, the
//! backoff limit, suspend, and the pods going with the Job.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use crate::common::{eventually, sim_with};

fn job(name: &str, completions: i64, parallelism: i64, exit_code: i64, backoff: i64) -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "completions": completions, "parallelism": parallelism, "backoffLimit": backoff,
            "template": {
                "metadata": {"annotations": {
                    "sim.kruise.io/exit-after": "100ms",
                    "sim.kruise.io/exit-code": exit_code.to_string(),
                }},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]},
            },
        },
    }))
    .unwrap()
}

fn condition(j: &Job, ty: &str) -> Option<(String, String)> {
    j.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == ty && c.status == "True")
        .map(|c| {
            (
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

async fn pods_of(pods: &Api<Pod>, job: &str) -> Vec<Pod> {
    pods.list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}")))
        .await
        .unwrap()
        .items
}

#[tokio::test]
async fn jobs_complete_fail_suspend_and_cascade() {
    let sim = sim_with(kruise_sim::SimConfig {
        nodes: 2,
        ..Default::default()
    })
    .await;
    let client = sim.client().unwrap();
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let pp = PostParams::default();

    // completions 3, parallelism 2: never more than 2 at once, done at 3 successes.
    jobs.create(&pp, &job("ok", 3, 2, 0, 6)).await.unwrap();
    let done = eventually(10, "job ok Complete", || async {
        let j = jobs.get("ok").await.ok()?;
        assert!(j.status.as_ref().and_then(|s| s.active).unwrap_or(0) <= 2);
        condition(&j, "Complete").map(|_| j)
    })
    .await;
    let st = done.status.clone().unwrap();
    assert_eq!(st.succeeded, Some(3));
    assert!(st.completion_time.is_some() && st.start_time.is_some());
    assert_eq!(
        condition(&done, "SuccessCriteriaMet").unwrap().0,
        "CompletionsReached"
    );
    let owned = pods_of(&pods, "ok").await;
    assert_eq!(owned.len(), 3);
    let p = &owned[0];
    assert!(p.metadata.name.as_ref().unwrap().starts_with("ok-"));
    let labels = p.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["job-name"], "ok");
    assert_eq!(
        labels["batch.kubernetes.io/controller-uid"],
        *done.metadata.uid.as_ref().unwrap()
    );
    let owner = &p.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.controller,
            owner.block_owner_deletion
        ),
        ("Job", Some(true), Some(true))
    );

    // Pods exiting 1 with backoffLimit 1: two failures fail the Job.
    jobs.create(&pp, &job("bad", 1, 1, 1, 1)).await.unwrap();
    let failed = eventually(10, "job bad Failed", || async {
        let j = jobs.get("bad").await.ok()?;
        condition(&j, "Failed").map(|_| j)
    })
    .await;
    assert_eq!(
        condition(&failed, "Failed").unwrap().0,
        "BackoffLimitExceeded"
    );
    assert_eq!(failed.status.as_ref().unwrap().failed, Some(2));
    assert!(condition(&failed, "FailureTarget").is_some());

    // Suspended: no pods, a Suspended condition.
    let mut s = job("held", 1, 1, 0, 6);
    s.spec.as_mut().unwrap().suspend = Some(true);
    jobs.create(&pp, &s).await.unwrap();
    eventually(5, "job held Suspended", || async {
        let j = jobs.get("held").await.ok()?;
        condition(&j, "Suspended").map(|_| ())
    })
    .await;
    assert!(pods_of(&pods, "held").await.is_empty());

    // Deleting a Job (background propagation) removes its pods.
    jobs.delete("ok", &DeleteParams::background())
        .await
        .unwrap();
    eventually(10, "pods of ok removed", || async {
        pods_of(&pods, "ok").await.is_empty().then_some(())
    })
    .await;
    sim.shutdown().await;
}
