//! Defaulting, as OpenKruise's SidecarSet mutating webhook does
//! (`apis/apps/defaults` `SetDefaultsSidecarSet[V1beta1]` + `SetHashSidecarSet[V1beta1]`):
//!
//! * `updateStrategy.type` RollingUpdate, `maxUnavailable` 1, `partition` 0;
//! * init containers `podInjectPolicy` AfterAppContainer, containers BeforeAppContainer;
//!   `upgradeStrategy.upgradeType` ColdUpgrade; `shareVolumePolicy.type` disabled;
//! * the core container defaults (`SetDefaults_Container`: termination message path and
//!   policy, image pull policy from the tag, port protocol TCP, fieldRef apiVersion v1,
//!   resource lists rounded up to milli-units, liveness/readiness probe and HTTPGet
//!   defaults), also on `transferEnv[].sourceContainerNameFrom.fieldRef`;
//! * volume defaults (`SetDefaults_Volume` and its sources: emptyDir when no source,
//!   defaultMode 420, hostPath type `""`, token expiration 3600);
//! * `revisionHistoryLimit` 10, `patchPodMetadata[].patchPolicy` Retain,
//!   `injectionStrategy.revision.policy` Always;
//! * the `kruise.io/sidecarset-hash` and `…-hash-without-image` annotations.

use k8s_openapi::api::core::v1::{
    Container, HTTPGetAction, Lifecycle, ObjectFieldSelector, Probe, Volume,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{
    PodInjectPolicy, SIDECARSET_HASH_ANNOTATION, SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION,
    ShareVolumePolicy, ShareVolumePolicyType, SidecarContainer, SidecarContainerUpgradeType,
    SidecarSetInjectRevisionPolicy, SidecarSetInjectionStrategy, SidecarSetPatchPodMetadata,
    SidecarSetPatchPolicy, SidecarSetUpdateStrategy, SidecarSetUpdateStrategyType, v1alpha1,
    v1beta1,
};
use kruise_compat::quantity::canonical_milli_quantity;

use crate::api::hash::{HashError, sidecarset_hash, sidecarset_hash_without_image};

/// Defaults either version's SidecarSet (their specs differ only in fields without
/// defaults) and sets its hash annotations.
macro_rules! default_sidecar_set {
    ($set:expr) => {{
        let set = $set;
        let spec = &mut set.spec;
        default_common(
            &mut spec.update_strategy,
            &mut spec.init_containers,
            &mut spec.containers,
            &mut spec.volumes,
            &mut spec.revision_history_limit,
            &mut spec.patch_pod_metadata,
            &mut spec.injection_strategy,
        );
        set_hash_annotations(
            set.metadata.annotations.get_or_insert_default(),
            &set.spec.containers,
            &set.spec.init_containers,
        )
    }};
}

/// Defaults a `v1beta1` SidecarSet and sets its hash annotations.
pub fn default_v1beta1(set: &mut v1beta1::SidecarSet) -> Result<(), HashError> {
    default_sidecar_set!(set)
}

/// Defaults a `v1alpha1` SidecarSet and sets its hash annotations (same rules).
pub fn default_v1alpha1(set: &mut v1alpha1::SidecarSet) -> Result<(), HashError> {
    default_sidecar_set!(set)
}

/// Writes both hash annotations.
pub fn set_hash_annotations(
    annotations: &mut std::collections::BTreeMap<String, String>,
    containers: &[SidecarContainer],
    init_containers: &[SidecarContainer],
) -> Result<(), HashError> {
    annotations.insert(
        SIDECARSET_HASH_ANNOTATION.into(),
        sidecarset_hash(containers, init_containers)?,
    );
    annotations.insert(
        SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION.into(),
        sidecarset_hash_without_image(containers, init_containers)?,
    );
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn default_common(
    update_strategy: &mut SidecarSetUpdateStrategy,
    init_containers: &mut [SidecarContainer],
    containers: &mut [SidecarContainer],
    volumes: &mut [Volume],
    revision_history_limit: &mut Option<i32>,
    patch_pod_metadata: &mut [SidecarSetPatchPodMetadata],
    injection_strategy: &mut SidecarSetInjectionStrategy,
) {
    if update_strategy.type_.is_none() {
        update_strategy.type_ = Some(SidecarSetUpdateStrategyType::RollingUpdate);
    }
    update_strategy
        .max_unavailable
        .get_or_insert(IntOrString::Int(1));
    update_strategy.partition.get_or_insert(IntOrString::Int(0));
    for c in init_containers.iter_mut() {
        default_sidecar_container(c, PodInjectPolicy::AfterAppContainer);
    }
    for c in containers.iter_mut() {
        default_sidecar_container(c, PodInjectPolicy::BeforeAppContainer);
    }
    default_volumes(volumes);
    revision_history_limit.get_or_insert(10);
    for p in patch_pod_metadata.iter_mut() {
        if p.patch_policy.is_none() {
            p.patch_policy = Some(SidecarSetPatchPolicy::Retain);
        }
    }
    if let Some(r) = injection_strategy.revision.as_mut()
        && r.policy.is_none()
    {
        r.policy = Some(SidecarSetInjectRevisionPolicy::Always);
    }
}

fn default_sidecar_container(c: &mut SidecarContainer, policy: PodInjectPolicy) {
    if c.pod_inject_policy.is_none() {
        c.pod_inject_policy = Some(policy);
    }
    if c.upgrade_strategy.upgrade_type.is_none() {
        c.upgrade_strategy.upgrade_type = Some(SidecarContainerUpgradeType::ColdUpgrade);
    }
    if c.share_volume_policy.type_.is_none() {
        c.share_volume_policy = ShareVolumePolicy {
            type_: Some(ShareVolumePolicyType::Disabled),
        };
    }
    for t in &mut c.transfer_env {
        if let Some(fr) = t
            .source_container_name_from
            .as_mut()
            .and_then(|s| s.field_ref.as_mut())
        {
            default_field_selector(fr);
        }
    }
    default_container(&mut c.container);
}

/// Kubernetes' `SetDefaults_Container` plus the nested defaults OpenKruise's
/// `setDefaultContainer` applies (resource lists, liveness/readiness probes, lifecycle
/// handlers).
pub fn default_container(c: &mut Container) {
    if c.termination_message_path
        .as_deref()
        .unwrap_or("")
        .is_empty()
    {
        c.termination_message_path = Some("/dev/termination-log".into());
    }
    if c.termination_message_policy
        .as_deref()
        .unwrap_or("")
        .is_empty()
    {
        c.termination_message_policy = Some("File".into());
    }
    if c.image_pull_policy.as_deref().unwrap_or("").is_empty() {
        let policy = if image_tag(c.image.as_deref().unwrap_or("")) == Some("latest") {
            "Always"
        } else {
            "IfNotPresent"
        };
        c.image_pull_policy = Some(policy.into());
    }
    for p in c.ports.iter_mut().flatten() {
        if p.protocol.as_deref().unwrap_or("").is_empty() {
            p.protocol = Some("TCP".into());
        }
    }
    for e in c.env.iter_mut().flatten() {
        if let Some(fr) = e.value_from.as_mut().and_then(|v| v.field_ref.as_mut()) {
            default_field_selector(fr);
        }
    }
    if let Some(resources) = c.resources.as_mut() {
        for list in [resources.limits.as_mut(), resources.requests.as_mut()]
            .into_iter()
            .flatten()
        {
            for quantity in list.values_mut() {
                // `SetDefaults_ResourceList`: rounded up to milli-units, written canonical.
                if let Some(canonical) = canonical_milli_quantity(&quantity.0) {
                    quantity.0 = canonical;
                }
            }
        }
    }
    // OpenKruise's `setDefaultContainer` defaults the liveness and readiness probes only (a
    // sidecar's startupProbe is left as written, and so hashed).
    for probe in [c.liveness_probe.as_mut(), c.readiness_probe.as_mut()]
        .into_iter()
        .flatten()
    {
        default_probe(probe);
    }
    if let Some(Lifecycle {
        post_start,
        pre_stop,
        ..
    }) = c.lifecycle.as_mut()
    {
        for h in [post_start.as_mut(), pre_stop.as_mut()]
            .into_iter()
            .flatten()
        {
            if let Some(g) = h.http_get.as_mut() {
                default_http_get(g);
            }
        }
    }
}

/// The tag the kubelet would pull: `latest` when neither tag nor digest is given, `None` for
/// a digest-only or unparsable reference (Kubernetes' `ParseImageName` then yields no tag).
fn image_tag(image: &str) -> Option<&str> {
    if image.is_empty()
        || image
            .chars()
            .any(|c| c.is_ascii_uppercase() || c.is_whitespace())
    {
        return None;
    }
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    let last_segment = name.rsplit('/').next().unwrap_or(name);
    match last_segment.rsplit_once(':') {
        Some((_, tag)) => Some(tag),
        None if digest.is_none() => Some("latest"),
        None => None,
    }
}

fn default_field_selector(fr: &mut ObjectFieldSelector) {
    if fr.api_version.as_deref().unwrap_or("").is_empty() {
        fr.api_version = Some("v1".into());
    }
}

fn default_probe(p: &mut Probe) {
    fn zero_to(v: &mut Option<i32>, d: i32) {
        if v.unwrap_or(0) == 0 {
            *v = Some(d);
        }
    }
    zero_to(&mut p.timeout_seconds, 1);
    zero_to(&mut p.period_seconds, 10);
    zero_to(&mut p.success_threshold, 1);
    zero_to(&mut p.failure_threshold, 3);
    if let Some(g) = p.http_get.as_mut() {
        default_http_get(g);
    }
}

fn default_http_get(g: &mut HTTPGetAction) {
    if g.path.as_deref().unwrap_or("").is_empty() {
        g.path = Some("/".into());
    }
    if g.scheme.as_deref().unwrap_or("").is_empty() {
        g.scheme = Some("HTTP".into());
    }
}

/// OpenKruise's `SetDefaultPodVolumes`.
pub fn default_volumes(volumes: &mut [Volume]) {
    const DEFAULT_MODE: i32 = 0o644;
    for v in volumes {
        let has_source = serde_json::to_value(&*v)
            .ok()
            .and_then(|j| j.as_object().map(|o| o.keys().any(|k| k != "name")))
            .unwrap_or(true);
        if !has_source {
            v.empty_dir = Some(Default::default());
        }
        if let Some(h) = v.host_path.as_mut()
            && h.type_.is_none()
        {
            h.type_ = Some(String::new());
        }
        if let Some(s) = v.secret.as_mut() {
            s.default_mode.get_or_insert(DEFAULT_MODE);
        }
        if let Some(d) = v.downward_api.as_mut() {
            d.default_mode.get_or_insert(DEFAULT_MODE);
            for item in d.items.iter_mut().flatten() {
                if let Some(fr) = item.field_ref.as_mut() {
                    default_field_selector(fr);
                }
            }
        }
        if let Some(c) = v.config_map.as_mut() {
            c.default_mode.get_or_insert(DEFAULT_MODE);
        }
        if let Some(p) = v.projected.as_mut() {
            p.default_mode.get_or_insert(DEFAULT_MODE);
            for s in p.sources.iter_mut().flatten() {
                if let Some(d) = s.downward_api.as_mut() {
                    for item in d.items.iter_mut().flatten() {
                        if let Some(fr) = item.field_ref.as_mut() {
                            default_field_selector(fr);
                        }
                    }
                }
                if let Some(t) = s.service_account_token.as_mut() {
                    t.expiration_seconds.get_or_insert(3600);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Found by the differential test against OpenKruise (tests/openkruise_oracle.rs).
    #[test]
    fn resource_lists_round_up_and_a_startup_probe_is_left_alone() {
        let mut c: Container = serde_json::from_value(json!({
            "name": "c", "image": "i",
            "resources": {"limits": {"memory": "296.174m", "cpu": "0697T"}},
            "startupProbe": {"tcpSocket": {"port": 80}}
        }))
        .unwrap();
        default_container(&mut c);
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(
            v["resources"]["limits"],
            json!({"memory": "297m", "cpu": "0697T"})
        );
        assert_eq!(v["startupProbe"], json!({"tcpSocket": {"port": 80}}));
    }

    #[test]
    fn defaults_like_openkruise() {
        let mut set: v1beta1::SidecarSet = serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
            "metadata": {"name": "s"},
            "spec": {
                "selector": {"matchLabels": {"app": "nginx"}},
                "initContainers": [{"name": "init", "image": "busybox"}],
                "containers": [{"name": "sidecar1", "image": "centos:6.7",
                    "ports": [{"containerPort": 80}],
                    "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                    "livenessProbe": {"httpGet": {"port": 80}}}],
                "volumes": [{"name": "v"}, {"name": "s", "secret": {"secretName": "x"}},
                            {"name": "h", "hostPath": {"path": "/x"}}],
                "patchPodMetadata": [{"annotations": {"a": "b"}}],
                "injectionStrategy": {"revision": {"revisionName": "r"}}
            }
        }))
        .unwrap();
        default_v1beta1(&mut set).unwrap();
        let v = serde_json::to_value(&set).unwrap();
        let spec = &v["spec"];
        assert_eq!(
            spec["updateStrategy"],
            json!({"type": "RollingUpdate", "partition": 0, "maxUnavailable": 1})
        );
        assert_eq!(spec["revisionHistoryLimit"], 10);
        assert_eq!(spec["patchPodMetadata"][0]["patchPolicy"], "Retain");
        assert_eq!(spec["injectionStrategy"]["revision"]["policy"], "Always");
        assert_eq!(
            spec["initContainers"][0]["podInjectPolicy"],
            "AfterAppContainer"
        );
        assert_eq!(spec["initContainers"][0]["imagePullPolicy"], "Always");
        let c = &spec["containers"][0];
        assert_eq!(c["podInjectPolicy"], "BeforeAppContainer");
        assert_eq!(c["upgradeStrategy"], json!({"upgradeType": "ColdUpgrade"}));
        assert_eq!(c["shareVolumePolicy"], json!({"type": "disabled"}));
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["terminationMessagePolicy"], "File");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
        assert_eq!(
            c["livenessProbe"],
            json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"},
                   "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(spec["volumes"][0], json!({"name": "v", "emptyDir": {}}));
        assert_eq!(spec["volumes"][1]["secret"]["defaultMode"], 420);
        assert_eq!(spec["volumes"][2]["hostPath"]["type"], "");
        let ann = &v["metadata"]["annotations"];
        assert!(ann[SIDECARSET_HASH_ANNOTATION].as_str().unwrap().len() == 64);
        assert!(ann[SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION].is_string());
        // Defaulting twice changes nothing.
        let mut again = set.clone();
        default_v1beta1(&mut again).unwrap();
        assert_eq!(again, set);
    }

    // OpenKruise's pkg/webhook/sidecarset/mutating/sidecarset_mutating_test.go: defaulting then
    // hashing gives these exact values (defaults + Go field order + artefacts all matter).
    #[test]
    fn defaulted_hash_equals_openkruise() {
        let mut set: v1beta1::SidecarSet = serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
            "metadata": {"name": "sidecarset-test", "resourceVersion": "123"},
            "spec": {
                "containers": [{"name": "dns-f", "image": "dns:1.0"}],
                "patchPodMetadata": [{"annotations": {"key1": "value1"}}],
                "injectionStrategy": {"revision": {"customVersion": "1"}}
            }
        }))
        .unwrap();
        default_v1beta1(&mut set).unwrap();
        let ann = set.metadata.annotations.as_ref().unwrap();
        assert_eq!(
            ann[SIDECARSET_HASH_ANNOTATION],
            "6wbd76bd7984x24fb4f44fv9222cw9v9bcf85x766744wddd4zwx927zzz2zb684"
        );
        assert_eq!(
            ann[SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION],
            "82684vwf9d4cb4wz4vffx4ddfbb47ww4z4wwxdbwb8w2zbb7zvf4524cdd49bv94"
        );
    }

    #[test]
    fn image_tags() {
        assert_eq!(image_tag("nginx"), Some("latest"));
        assert_eq!(image_tag("nginx:latest"), Some("latest"));
        assert_eq!(image_tag("nginx:1.2"), Some("1.2"));
        assert_eq!(image_tag("localhost:5000/nginx"), Some("latest"));
        assert_eq!(image_tag("nginx@sha256:abc"), None);
        assert_eq!(image_tag(""), None);
    }
}
