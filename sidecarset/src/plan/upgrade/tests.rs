//! Cold and hot in-place upgrades of injected pods, step by step, as OpenKruise's
//! `sidecarset_processor_test.go` / `sidecarset_hotupgrade_test.go` describe them.

use super::*;
use crate::api::defaults::default_v1beta1;
use crate::inject::{InjectInput, NoHistory, inject};
use k8s_openapi::api::core::v1::ContainerStatus;
use pretty_assertions::assert_eq;
use serde_json::json;

fn now() -> Timestamp {
    "2026-11-24T10:00:00Z".parse().unwrap()
}

fn sidecar_set(image: &str, hot: bool) -> SidecarSet {
    let container = if hot {
        json!({"name": "sidecar", "image": image,
               "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1.0"}})
    } else {
        json!({"name": "sidecar", "image": image})
    };
    let mut set: SidecarSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "test-sidecarset", "resourceVersion": "7"},
        "spec": {"selector": {"matchLabels": {"app": "nginx"}}, "containers": [container]},
        "status": {"latestRevision": "test-sidecarset-abc"}
    }))
    .unwrap();
    default_v1beta1(&mut set).unwrap();
    set
}

fn image_id(image: &str) -> String {
    format!("docker.io/library/{image}@sha256:{:064x}", image.len())
}

/// The pod as injected, with every container running its spec image and ready.
fn injected(set: &SidecarSet) -> Pod {
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "pod-1", "namespace": "default", "labels": {"app": "nginx"}},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}
    }))
    .unwrap();
    let out = inject(&InjectInput {
        pod: &pod,
        namespace_labels: None,
        sidecar_sets: std::slice::from_ref(set),
        now: now(),
        random: 0.5,
        history: &NoHistory,
        sort_sidecar_containers_by_name: false,
    })
    .unwrap();
    running(out.pod, &[])
}

/// The pod as the kubelet reports it: each container running its spec image, ready unless
/// named in `not_ready`.
fn running(mut pod: Pod, not_ready: &[&str]) -> Pod {
    let statuses: Vec<ContainerStatus> = pod
        .spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .map(|c| {
            let image = c.image.clone().unwrap();
            ContainerStatus {
                name: c.name.clone(),
                image_id: image_id(&image),
                image,
                ready: !not_ready.contains(&c.name.as_str()),
                ..Default::default()
            }
        })
        .collect();
    let ready = if not_ready.is_empty() {
        "True"
    } else {
        "False"
    };
    pod.status = Some(
        serde_json::from_value(json!({
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": ready}],
        }))
        .unwrap(),
    );
    pod.status.as_mut().unwrap().container_statuses = Some(statuses);
    pod
}

fn image_of(pod: &Pod, name: &str) -> String {
    container(pod, name).unwrap().image.clone().unwrap()
}

fn ann<'a>(pod: &'a Pod, key: &str) -> &'a str {
    annotation(pod, key).unwrap_or("")
}

#[test]
fn an_injected_pod_is_managed_updated_and_ready() {
    let set = sidecar_set("busybox:1.34", false);
    let pod = injected(&set);
    assert!(is_managed(&pod, &set));
    let facts = pod_facts(&pod, &set, &SetHashes::of(&set).unwrap());
    let all = PodUpgradeState {
        updated: true,
        upgradable: true,
        consistent: true,
        ready: true,
    };
    assert_eq!(facts.status, all);
    assert_eq!(facts.plan, all);
    assert_eq!(injected_sets(&pod), vec!["test-sidecarset".to_string()]);
}

#[test]
fn a_pod_without_the_sidecar_or_not_in_the_injected_list_is_not_managed() {
    let set = sidecar_set("busybox:1.34", false);
    let mut pod = injected(&set);
    pod.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(SIDECARSET_INJECTED_LIST_ANNOTATION.into(), "other".into());
    assert!(!is_managed(&pod, &set));
    let mut pod = injected(&set);
    pod.spec
        .as_mut()
        .unwrap()
        .containers
        .retain(|c| c.name != "sidecar");
    assert!(!is_managed(&pod, &set));
}

#[test]
fn cold_upgrade_changes_only_the_image_and_records_the_state() {
    let old = sidecar_set("busybox:1.34", false);
    let pod = injected(&old);
    let new = sidecar_set("busybox:1.35", false);
    let hashes = SetHashes::of(&new).unwrap();
    let facts = pod_facts(&pod, &new, &hashes);
    assert!(!facts.plan.updated && facts.plan.upgradable && facts.plan.consistent);

    let upgraded = upgrade_pod(&pod, &new, &hashes, now()).unwrap();
    assert_eq!(image_of(&upgraded, "sidecar"), "busybox:1.35");
    assert_eq!(image_of(&upgraded, "main"), "nginx:1.25");
    let hash: serde_json::Value =
        serde_json::from_str(ann(&upgraded, SIDECARSET_HASH_ANNOTATION)).unwrap();
    assert_eq!(
        hash["test-sidecarset"],
        json!({"updateTimestamp": "2026-11-24T10:00:00Z", "hash": hashes.hash,
               "sidecarSetName": "test-sidecarset", "sidecarList": ["sidecar"],
               "controllerRevision": "test-sidecarset-abc"})
    );
    let state: serde_json::Value =
        serde_json::from_str(ann(&upgraded, SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION)).unwrap();
    assert_eq!(
        state["test-sidecarset"]["lastContainerStatuses"],
        json!({"sidecar": {"imageID": image_id("busybox:1.34")}})
    );
    // Written but not yet restarted by the kubelet: updated, not consistent, not ready.
    let facts = pod_facts(&upgraded, &new, &hashes);
    assert!(facts.status.updated && !facts.status.consistent);
    assert_eq!(
        crate::plan::count(&[facts.status]).updated_ready,
        0,
        "an in-flight upgrade is not ready"
    );
    // The kubelet restarted the container on the new image.
    let done = running(upgraded, &[]);
    let facts = pod_facts(&done, &new, &hashes);
    assert!(facts.status.updated && facts.status.consistent && facts.status.ready);
}

#[test]
fn a_change_beyond_images_is_not_upgradable() {
    let old = sidecar_set("busybox:1.34", false);
    let pod = injected(&old);
    let mut new = sidecar_set("busybox:1.34", false);
    new.spec.containers[0].container.command = Some(vec!["sleep".into(), "1d".into()]);
    new.metadata.annotations = None;
    let hashes = SetHashes::of(&new).unwrap();
    let facts = pod_facts(&pod, &new, &hashes);
    assert!(!facts.plan.updated && !facts.plan.upgradable);
}

#[test]
fn digest_images_are_consistent_by_image_id() {
    let digest = format!("busybox@sha256:{:064x}", 9);
    let set = sidecar_set(&digest, false);
    let mut pod = injected(&set);
    let names = sidecar_containers_in_pod(&set);
    // The status reports another digest: not consistent.
    assert!(!is_state_consistent(&pod, "test-sidecarset", &names));
    for s in pod
        .status
        .as_mut()
        .unwrap()
        .container_statuses
        .as_mut()
        .unwrap()
    {
        if s.name == "sidecar" {
            s.image_id = format!("docker.io/library/{digest}");
        }
    }
    assert!(is_state_consistent(&pod, "test-sidecarset", &names));
}

#[test]
fn hot_upgrade_upgrades_the_idle_container_then_resets_the_old_one() {
    let v1 = sidecar_set("envoy:1", true);
    let pod = injected(&v1);
    assert_eq!(image_of(&pod, "sidecar-1"), "envoy:1");
    assert_eq!(image_of(&pod, "sidecar-2"), "empty:1.0");
    assert_eq!(hot_upgrade_pair("sidecar", &pod).0, "sidecar-1");
    assert!(is_managed(&pod, &v1));
    assert!(!hot_upgrade_reset_due(&pod, &v1));

    let v2 = sidecar_set("envoy:2", true);
    let hashes = SetHashes::of(&v2).unwrap();
    let step1 = upgrade_pod(&pod, &v2, &hashes, now()).unwrap();
    assert_eq!(
        image_of(&step1, "sidecar-1"),
        "envoy:1",
        "the old one keeps serving"
    );
    assert_eq!(image_of(&step1, "sidecar-2"), "envoy:2");
    assert_eq!(hot_upgrade_pair("sidecar", &step1).0, "sidecar-2");
    assert_eq!(ann(&step1, &version_annotation("sidecar-2")), "7");
    assert_eq!(ann(&step1, &version_alt_annotation("sidecar-2")), "1");
    assert_eq!(ann(&step1, &version_alt_annotation("sidecar-1")), "7");

    // The new container still starting (its postStart migrating): no reset yet.
    let starting = running(step1.clone(), &["sidecar-2"]);
    assert!(!hot_upgrade_reset_due(&starting, &v2));
    assert!(!pod_facts(&starting, &v2, &hashes).status.ready);
    // Running and ready: the old container goes to the empty image.
    let migrated = running(step1, &[]);
    assert!(hot_upgrade_reset_due(&migrated, &v2));
    let reset = reset_hot_upgrade(&migrated, &v2, &hashes, now())
        .unwrap()
        .unwrap();
    assert_eq!(image_of(&reset, "sidecar-1"), "empty:1.0");
    assert_eq!(image_of(&reset, "sidecar-2"), "envoy:2");
    assert_eq!(ann(&reset, &version_annotation("sidecar-1")), "0");
    assert_eq!(ann(&reset, &version_alt_annotation("sidecar-2")), "0");
    let settled = running(reset, &[]);
    assert!(!hot_upgrade_reset_due(&settled, &v2));
    assert!(
        reset_hot_upgrade(&settled, &v2, &hashes, now())
            .unwrap()
            .is_none()
    );
    let facts = pod_facts(&settled, &v2, &hashes);
    assert!(facts.status.updated && facts.status.consistent && facts.status.ready);

    // The next upgrade alternates back to sidecar-1.
    let mut v3 = sidecar_set("envoy:3", true);
    v3.metadata.resource_version = Some("9".into());
    let step2 = upgrade_pod(&settled, &v3, &SetHashes::of(&v3).unwrap(), now()).unwrap();
    assert_eq!(image_of(&step2, "sidecar-1"), "envoy:3");
    assert_eq!(image_of(&step2, "sidecar-2"), "envoy:2");
    assert_eq!(hot_upgrade_pair("sidecar", &step2).0, "sidecar-1");
    assert_eq!(ann(&step2, &version_annotation("sidecar-1")), "9");
}

#[test]
fn upgradable_condition_aggregates_every_sidecarset() {
    let set = sidecar_set("busybox:1.34", false);
    let mut pod = injected(&set);
    let c = upgradable_condition(&pod, "a", false, now()).unwrap();
    assert_eq!(c.status, "False");
    assert_eq!(c.reason.as_deref(), Some(REASON_UPDATE_IMMUTABLE_FIELD));
    assert_eq!(c.message.as_deref(), Some(r#"{"a":false}"#));
    pod.status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap()
        .push(c);
    assert!(
        upgradable_condition(&pod, "a", false, now()).is_none(),
        "unchanged"
    );
    let c = upgradable_condition(&pod, "b", true, now()).unwrap();
    assert_eq!(c.status, "False", "a is still not upgradable");
    assert_eq!(c.message.as_deref(), Some(r#"{"a":false,"b":true}"#));
    let conditions = pod.status.as_mut().unwrap().conditions.as_mut().unwrap();
    conditions.retain(|c| c.type_ != SIDECARSET_UPGRADABLE);
    conditions.push(c);
    let c = upgradable_condition(&pod, "a", true, now()).unwrap();
    assert_eq!(c.status, "True");
    assert_eq!(c.reason.as_deref(), Some(REASON_ALL_UPGRADABLE));
}

#[test]
fn the_plan_upgrades_in_place_with_the_condition_and_waits_for_unseen_writes() {
    use crate::plan::{Action, IN_FLIGHT_REQUEUE, PlanInput, plan};
    let old = sidecar_set("busybox:1.34", false);
    let pods = vec![injected(&old)];
    let new = sidecar_set("busybox:1.35", false);
    let hashes = SetHashes::of(&new).unwrap();
    let input = PlanInput {
        set: &new,
        hashes: &hashes,
        pods: &pods,
        latest_revision: "test-sidecarset-new",
        collision_count: 0,
        writes_observed: true,
        now: now(),
    };
    let planned = plan(&input).unwrap();
    assert_eq!(planned.status.matched_pods, 1);
    assert_eq!(planned.status.updated_pods, 0);
    assert_eq!(planned.status.latest_revision, "test-sidecarset-new");
    assert_eq!(planned.requeue_after, None);
    let [
        Action::Upgrade { pod: 0, key, to },
        Action::SetUpgradable { condition, .. },
    ] = planned.actions.as_slice()
    else {
        panic!("{:?}", planned.actions);
    };
    assert_eq!(key, "default/pod-1");
    assert_eq!(image_of(to, "sidecar"), "busybox:1.35");
    // The pod names the latest revision the plan registers, at the plan's time.
    let hash: serde_json::Value =
        serde_json::from_str(ann(to, SIDECARSET_HASH_ANNOTATION)).unwrap();
    assert_eq!(
        hash["test-sidecarset"]["controllerRevision"],
        "test-sidecarset-new"
    );
    assert_eq!(
        condition.last_transition_time.as_ref().map(|t| t.0),
        Some(now())
    );

    // Our last write is not in the cache yet: the status, and nothing else until it is.
    let waiting = plan(&PlanInput {
        writes_observed: false,
        ..input
    })
    .unwrap();
    assert!(waiting.actions.is_empty());
    assert_eq!(waiting.requeue_after, Some(IN_FLIGHT_REQUEUE));
    assert_eq!(waiting.status, planned.status);
}
