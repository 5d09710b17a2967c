//! Which operation a pod UPDATE is to a PodUnavailableBudget (OpenKruise's
//! `IsPodUnavailableChanged` and `CanResizeInplace`), pure.
//!
//! An update that neither changes the spec nor adds an `unavailable-pod.kruise.io/*` label
//! cannot make the pod unavailable and is not checked. One that changes only containers'
//! cpu/memory requests or limits, in a way the kubelet applies without a restart, is a
//! RESIZE: same containers, same QoS class, not a static pod, and every changed resource's
//! `resizePolicy` `NotRequired` or unset. Anything else is an UPDATE. As in OpenKruise,
//! requests and limits are compared exactly (`1` and `1000m` are equal, an unset value and
//! a set one are not), and the classification does not depend on `InPlacePodVerticalScaling`
//! (the gate decides whether RESIZE is protected on its own or with UPDATE).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kruise_compat::quantity::parse_nanos;
use kruise_core::inplace::pod_qos_class;

use super::budget::has_unavailable_label;
use crate::api::v1beta1::PubOperation;

/// The annotation the kubelet sets on a pod from a file or URL (a static pod): any value but
/// `api`.
const CONFIG_SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";

/// The resources the kubelet resizes in place.
const RESIZABLE: [&str; 2] = ["cpu", "memory"];

/// The operation the UPDATE from `old` to `new` is, `None` when it cannot make the pod
/// unavailable.
pub fn update_operation(old: &Pod, new: &Pod) -> Option<PubOperation> {
    let label_added = !has_unavailable_label(old) && has_unavailable_label(new);
    if old.spec == new.spec && !label_added {
        return None;
    }
    if !label_added && is_resize_in_place(old, new) {
        Some(PubOperation::Resize)
    } else {
        Some(PubOperation::Update)
    }
}

/// Whether only container resources changed, in a way the kubelet applies in place.
fn is_resize_in_place(old: &Pod, new: &Pod) -> bool {
    let (Some(old_spec), Some(new_spec)) = (&old.spec, &new.spec) else {
        return false;
    };
    without_container_resources(old_spec) == without_container_resources(new_spec)
        && !is_static(old)
        && !is_static(new)
        && pod_qos_class(old_spec) == pod_qos_class(new_spec)
        && resources_resize_in_place(&old_spec.containers, &new_spec.containers)
}

fn without_container_resources(spec: &PodSpec) -> PodSpec {
    let mut spec = spec.clone();
    for container in &mut spec.containers {
        container.resources = None;
    }
    spec
}

/// Kubernetes' `IsStaticPod`: the pod came from a file or URL, not the API.
fn is_static(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONFIG_SOURCE_ANNOTATION))
        .is_some_and(|source| source != "api")
}

/// OpenKruise's `canInplaceUpdateResources`: the same number of containers, each new one
/// found by name among the old ones, and every changed resource resizable with a
/// `resizePolicy` of `NotRequired` or none.
fn resources_resize_in_place(old: &[Container], new: &[Container]) -> bool {
    if old.len() != new.len() {
        return false;
    }
    new.iter().all(|container| {
        let Some(before) = old.iter().find(|c| c.name == container.name) else {
            return false;
        };
        let empty = ResourceRequirements::default();
        let was = before.resources.as_ref().unwrap_or(&empty);
        let is = container.resources.as_ref().unwrap_or(&empty);
        let names: BTreeSet<&str> = [&was.requests, &is.requests, &was.limits, &is.limits]
            .into_iter()
            .flatten()
            .flat_map(|list| list.keys().map(String::as_str))
            .collect();
        names
            .into_iter()
            .filter(|name| {
                changed(was.requests.as_ref(), is.requests.as_ref(), name)
                    || changed(was.limits.as_ref(), is.limits.as_ref(), name)
            })
            .all(|name| RESIZABLE.contains(&name) && restart_not_required(container, name))
    })
}

/// Whether the quantity of `name` differs between two resource lists (set in one only, or
/// of another value).
fn changed(
    old: Option<&std::collections::BTreeMap<String, Quantity>>,
    new: Option<&std::collections::BTreeMap<String, Quantity>>,
    name: &str,
) -> bool {
    let was = old.and_then(|l| l.get(name));
    let is = new.and_then(|l| l.get(name));
    match (was, is) {
        (None, None) => false,
        (Some(a), Some(b)) => match (parse_nanos(&a.0), parse_nanos(&b.0)) {
            (Some(a), Some(b)) => a != b,
            _ => a.0 != b.0,
        },
        _ => true,
    }
}

/// Whether the container's `resizePolicy` for `name` is `NotRequired` or unset.
fn restart_not_required(container: &Container, name: &str) -> bool {
    container
        .resize_policy
        .iter()
        .flatten()
        .find(|p| p.resource_name == name)
        .is_none_or(|p| p.restart_policy.is_empty() || p.restart_policy == "NotRequired")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn pod(containers: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "labels": {"app": "web"}},
            "spec": {"containers": containers}
        }))
        .unwrap()
    }

    fn burstable(cpu: &str) -> Value {
        json!([{"name": "main", "image": "nginx:1.25",
            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"},
                          "limits": {"memory": "128Mi"}}}])
    }

    fn with(mut pod: Pod, change: impl FnOnce(&mut Pod)) -> Pod {
        change(&mut pod);
        pod
    }

    #[test]
    fn each_update_is_classified_as_openkruise_classifies_it() {
        let old = pod(burstable("100m"));
        let guaranteed = pod(json!([{"name": "main", "image": "nginx:1.25",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                          "limits": {"cpu": "1", "memory": "1Gi"}}}]));
        let restart_on_memory = |memory: &str| {
            pod(json!([{"name": "main", "image": "nginx:1.25",
                "resizePolicy": [{"resourceName": "memory", "restartPolicy": "RestartContainer"},
                                 {"resourceName": "cpu", "restartPolicy": "NotRequired"}],
                "resources": {"requests": {"cpu": "100m", "memory": memory}}}]))
        };
        let cases: Vec<(&str, Pod, Pod, Option<PubOperation>)> = vec![
            ("nothing changed", old.clone(), old.clone(), None),
            (
                "a label or an annotation changed",
                old.clone(),
                with(old.clone(), |p| {
                    p.metadata.labels = Some([("tier".to_string(), "a".to_string())].into());
                    p.metadata.annotations = Some([("a".to_string(), "b".to_string())].into());
                }),
                None,
            ),
            (
                "cpu request raised",
                old.clone(),
                pod(burstable("200m")),
                Some(PubOperation::Resize),
            ),
            (
                // Go's DeepEqual tells them apart, Quantity.Equal does not: nothing resized.
                "the same quantity written another way",
                pod(burstable("1")),
                pod(burstable("1000m")),
                Some(PubOperation::Resize),
            ),
            (
                "a Guaranteed pod resized and still Guaranteed",
                guaranteed.clone(),
                pod(json!([{"name": "main", "image": "nginx:1.25",
                    "resources": {"requests": {"cpu": "2", "memory": "1Gi"},
                                  "limits": {"cpu": "2", "memory": "1Gi"}}}])),
                Some(PubOperation::Resize),
            ),
            (
                "the QoS class changes (Guaranteed to Burstable)",
                guaranteed.clone(),
                pod(json!([{"name": "main", "image": "nginx:1.25",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                  "limits": {"cpu": "2", "memory": "1Gi"}}}])),
                Some(PubOperation::Update),
            ),
            (
                "a cpu limit set where there was none",
                old.clone(),
                pod(json!([{"name": "main", "image": "nginx:1.25",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                                  "limits": {"cpu": "1", "memory": "128Mi"}}}])),
                Some(PubOperation::Resize),
            ),
            (
                "an ephemeral-storage request changed",
                old.clone(),
                pod(json!([{"name": "main", "image": "nginx:1.25",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi",
                                               "ephemeral-storage": "1Gi"},
                                  "limits": {"memory": "128Mi"}}}])),
                Some(PubOperation::Update),
            ),
            (
                "memory changed under a RestartContainer policy",
                restart_on_memory("64Mi"),
                restart_on_memory("128Mi"),
                Some(PubOperation::Update),
            ),
            (
                "cpu changed, memory's RestartContainer policy not involved",
                restart_on_memory("64Mi"),
                with(restart_on_memory("64Mi"), |p| {
                    let c = &mut p.spec.as_mut().unwrap().containers[0];
                    c.resources
                        .as_mut()
                        .unwrap()
                        .requests
                        .as_mut()
                        .unwrap()
                        .insert("cpu".into(), Quantity("300m".into()));
                }),
                Some(PubOperation::Resize),
            ),
            (
                "the image changed with the resources",
                old.clone(),
                with(pod(burstable("200m")), |p| {
                    p.spec.as_mut().unwrap().containers[0].image = Some("nginx:1.26".into());
                }),
                Some(PubOperation::Update),
            ),
            (
                "a container renamed",
                old.clone(),
                with(pod(burstable("200m")), |p| {
                    p.spec.as_mut().unwrap().containers[0].name = "other".into();
                }),
                Some(PubOperation::Update),
            ),
            (
                "a static pod resized",
                with(old.clone(), |p| {
                    p.metadata.annotations =
                        Some([(CONFIG_SOURCE_ANNOTATION.to_string(), "file".to_string())].into());
                }),
                with(pod(burstable("200m")), |p| {
                    p.metadata.annotations =
                        Some([(CONFIG_SOURCE_ANNOTATION.to_string(), "file".to_string())].into());
                }),
                Some(PubOperation::Update),
            ),
            (
                "a pod from the API (config.source api) resized",
                with(old.clone(), |p| {
                    p.metadata.annotations =
                        Some([(CONFIG_SOURCE_ANNOTATION.to_string(), "api".to_string())].into());
                }),
                with(pod(burstable("200m")), |p| {
                    p.metadata.annotations =
                        Some([(CONFIG_SOURCE_ANNOTATION.to_string(), "api".to_string())].into());
                }),
                Some(PubOperation::Resize),
            ),
            (
                "an unavailable label added",
                old.clone(),
                with(old.clone(), |p| {
                    p.metadata.labels.as_mut().unwrap().insert(
                        "unavailable-pod.kruise.io/maintenance".into(),
                        "true".into(),
                    );
                }),
                Some(PubOperation::Update),
            ),
            (
                "an unavailable label added with a resize",
                old.clone(),
                with(pod(burstable("200m")), |p| {
                    p.metadata.labels.as_mut().unwrap().insert(
                        "unavailable-pod.kruise.io/maintenance".into(),
                        "true".into(),
                    );
                }),
                Some(PubOperation::Update),
            ),
        ];
        for (name, old, new, expected) in cases {
            assert_eq!(update_operation(&old, &new), expected, "{name}");
        }
    }
}
