//! Server-side defaulting and create-time status resets for built-in kinds (the part
//! of each kind's registry strategy and `SetDefaults_*` that controllers observe).

use serde_json::{Map, Value, json};

use crate::registry::ResourceDef;

fn obj_mut<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let map = v.as_object_mut()?;
    let entry = map
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if entry.is_null() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut()
}

fn default(map: &mut Map<String, Value>, key: &str, value: Value) {
    match map.get(key) {
        None | Some(Value::Null) => {
            map.insert(key.to_string(), value);
        }
        _ => {}
    }
}

fn image_pull_policy(image: &str) -> &'static str {
    // Tag after the last '/', ignoring a digest.
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        None => "Always",
        Some((_, "latest")) => "Always",
        Some(_) => "IfNotPresent",
    }
}

fn default_container(c: &mut Value) {
    let Some(m) = c.as_object_mut() else { return };
    let image = m
        .get("image")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    default(m, "imagePullPolicy", json!(image_pull_policy(&image)));
    default(m, "terminationMessagePath", json!("/dev/termination-log"));
    default(m, "terminationMessagePolicy", json!("File"));
    default(m, "resources", json!({}));
    if let Some(ports) = m.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            if let Some(pm) = p.as_object_mut() {
                default(pm, "protocol", json!("TCP"));
            }
        }
    }
}

/// `SetDefaults_PodSpec` and the container defaults most controllers see.
pub fn default_pod_spec(spec: &mut Value) {
    let Some(m) = spec.as_object_mut() else {
        return;
    };
    default(m, "restartPolicy", json!("Always"));
    default(m, "terminationGracePeriodSeconds", json!(30));
    default(m, "dnsPolicy", json!("ClusterFirst"));
    default(m, "securityContext", json!({}));
    default(m, "schedulerName", json!("default-scheduler"));
    for key in ["containers", "initContainers"] {
        if let Some(cs) = m.get_mut(key).and_then(Value::as_array_mut) {
            for c in cs {
                default_container(c);
            }
        }
    }
}

fn default_template(obj: &mut Value) {
    if let Some(spec) = obj
        .get_mut("spec")
        .and_then(|s| s.get_mut("template"))
        .and_then(|t| t.get_mut("spec"))
    {
        default_pod_spec(spec);
    }
}

fn pod_qos(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|k| spec.get(*k).and_then(Value::as_array))
        .flatten()
        .collect();
    let mut any = false;
    let mut guaranteed = true;
    for c in &containers {
        let res = c.get("resources");
        let req = res
            .and_then(|r| r.get("requests"))
            .and_then(Value::as_object);
        let lim = res.and_then(|r| r.get("limits")).and_then(Value::as_object);
        if req.is_some_and(|r| !r.is_empty()) || lim.is_some_and(|l| !l.is_empty()) {
            any = true;
        }
        for resource in ["cpu", "memory"] {
            let l = lim.and_then(|l| l.get(resource));
            let r = req.and_then(|r| r.get(resource)).or(l);
            if l.is_none() || r != l {
                guaranteed = false;
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed && !containers.is_empty() {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// Applies defaults and the create-time status reset. `uid` is the new object's uid.
pub fn on_create(def: &ResourceDef, obj: &mut Value, uid: &str) {
    if !def.builtin {
        // Custom resources: with a status subresource, status is dropped on create.
        if def.versions.iter().any(|v| v.status)
            && let Some(m) = obj.as_object_mut()
        {
            m.remove("status");
        }
        return;
    }
    let name = crate::meta::name_of(obj).to_string();
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "pods") => {
            if let Some(spec) = obj.get_mut("spec") {
                default_pod_spec(spec);
            }
            let qos = obj.get("spec").map_or("BestEffort", pod_qos);
            if let Some(m) = obj.as_object_mut() {
                m.insert(
                    "status".into(),
                    json!({"phase": "Pending", "qosClass": qos}),
                );
            }
        }
        ("", "namespaces") => {
            if let Some(spec) = obj_mut(obj, "spec") {
                default(spec, "finalizers", json!(["kubernetes"]));
            }
            if let Some(m) = obj.as_object_mut() {
                m.insert("status".into(), json!({"phase": "Active"}));
            }
            if let Some(meta) = crate::meta::metadata_mut(obj) {
                let labels = meta
                    .entry("labels")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(l) = labels.as_object_mut() {
                    l.insert("kubernetes.io/metadata.name".into(), json!(name));
                }
            }
        }
        ("", "services") => {
            if let Some(spec) = obj_mut(obj, "spec") {
                default(spec, "type", json!("ClusterIP"));
                default(spec, "sessionAffinity", json!("None"));
                if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
                    for p in ports {
                        if let Some(pm) = p.as_object_mut() {
                            default(pm, "protocol", json!("TCP"));
                            if let Some(port) = pm.get("port").cloned() {
                                default(pm, "targetPort", port);
                            }
                        }
                    }
                }
            }
            if let Some(m) = obj.as_object_mut() {
                m.insert("status".into(), json!({"loadBalancer": {}}));
            }
        }
        ("", "persistentvolumeclaims") => {
            if let Some(m) = obj.as_object_mut() {
                m.insert("status".into(), json!({"phase": "Pending"}));
            }
        }
        ("", "secrets") => {
            merge_string_data(obj);
            if let Some(m) = obj.as_object_mut() {
                default(m, "type", json!("Opaque"));
            }
        }
        ("apps", "deployments") => {
            default_template(obj);
            if let Some(spec) = obj_mut(obj, "spec") {
                default(spec, "replicas", json!(1));
                default(
                    spec,
                    "strategy",
                    json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
                );
                default(spec, "revisionHistoryLimit", json!(10));
                default(spec, "progressDeadlineSeconds", json!(600));
            }
            reset_status(obj, json!({}));
        }
        ("apps", "replicasets") => {
            default_template(obj);
            if let Some(spec) = obj_mut(obj, "spec") {
                default(spec, "replicas", json!(1));
            }
            reset_status(obj, json!({"replicas": 0}));
        }
        ("apps", "statefulsets") => {
            default_template(obj);
            if let Some(spec) = obj_mut(obj, "spec") {
                default(spec, "replicas", json!(1));
                default(spec, "podManagementPolicy", json!("OrderedReady"));
                default(
                    spec,
                    "updateStrategy",
                    json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
                );
                default(spec, "revisionHistoryLimit", json!(10));
                default(
                    spec,
                    "persistentVolumeClaimRetentionPolicy",
                    json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
                );
            }
            reset_status(obj, json!({"replicas": 0, "availableReplicas": 0}));
        }
        ("apps", "daemonsets") => {
            default_template(obj);
            if let Some(spec) = obj_mut(obj, "spec") {
                default(
                    spec,
                    "updateStrategy",
                    json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
                );
                default(spec, "revisionHistoryLimit", json!(10));
            }
            reset_status(
                obj,
                json!({"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0}),
            );
        }
        ("batch", "jobs") => {
            default_template(obj);
            default_job(obj, uid, &name);
            reset_status(obj, json!({}));
        }
        ("batch", "cronjobs") => {
            if let Some(jt) = obj.get_mut("spec").and_then(|s| s.get_mut("jobTemplate")) {
                default_template(jt);
            }
            if let Some(spec) = obj_mut(obj, "spec") {
                default(spec, "concurrencyPolicy", json!("Allow"));
                default(spec, "suspend", json!(false));
                default(spec, "successfulJobsHistoryLimit", json!(3));
                default(spec, "failedJobsHistoryLimit", json!(1));
            }
            reset_status(obj, json!({}));
        }
        ("policy", "poddisruptionbudgets") => {
            reset_status(
                obj,
                json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}),
            );
        }
        _ => {}
    }
}

fn reset_status(obj: &mut Value, status: Value) {
    if let Some(m) = obj.as_object_mut() {
        m.insert("status".into(), status);
    }
}

/// Job defaults, including the generated selector and pod labels
/// (`batch.kubernetes.io/controller-uid`, `job-name`) unless manualSelector is set.
fn default_job(obj: &mut Value, uid: &str, name: &str) {
    let manual = obj
        .get("spec")
        .and_then(|s| s.get("manualSelector"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if let Some(spec) = obj_mut(obj, "spec") {
        // Both unset: a single-pod Job (completions 1); parallelism alone keeps
        // completions unset (a work-queue Job).
        if !spec.contains_key("completions") && !spec.contains_key("parallelism") {
            spec.insert("completions".into(), json!(1));
        }
        default(spec, "parallelism", json!(1));
        default(spec, "backoffLimit", json!(6));
        default(spec, "completionMode", json!("NonIndexed"));
        default(spec, "suspend", json!(false));
        default(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
        if !manual {
            spec.insert(
                "selector".into(),
                json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
            );
            if let Some(tpl) = spec.get_mut("template")
                && let Some(meta) = obj_mut(tpl, "metadata")
            {
                let labels = meta
                    .entry("labels")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(l) = labels.as_object_mut() {
                    l.insert("batch.kubernetes.io/controller-uid".into(), json!(uid));
                    l.insert("batch.kubernetes.io/job-name".into(), json!(name));
                    l.insert("controller-uid".into(), json!(uid));
                    l.insert("job-name".into(), json!(name));
                }
            }
        }
    }
}

/// Defaults re-applied on update (templates may have been replaced wholesale).
pub fn on_update(def: &ResourceDef, obj: &mut Value) {
    if !def.builtin {
        return;
    }
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "pods") => {
            if let Some(spec) = obj.get_mut("spec") {
                default_pod_spec(spec);
            }
        }
        ("apps", _) | ("batch", "jobs") => default_template(obj),
        ("", "secrets") => merge_string_data(obj),
        _ => {}
    }
}

/// A Secret's `stringData` written into `data` (base64) and dropped
/// (`kruise_compat::secret::merge_string_data`), as kube-apiserver does to every Secret.
fn merge_string_data(obj: &mut Value) {
    if let Some(secret) = obj.as_object_mut() {
        kruise_compat::secret::merge_string_data(secret);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy() {
        assert_eq!(image_pull_policy("nginx"), "Always");
        assert_eq!(image_pull_policy("nginx:latest"), "Always");
        assert_eq!(image_pull_policy("nginx:1.25"), "IfNotPresent");
        assert_eq!(image_pull_policy("reg:5000/nginx"), "Always");
    }

    #[test]
    fn qos() {
        assert_eq!(
            pod_qos(&json!({"containers": [{"name": "a"}]})),
            "BestEffort"
        );
        assert_eq!(
            pod_qos(
                &json!({"containers": [{"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]})
            ),
            "Guaranteed"
        );
        assert_eq!(
            pod_qos(
                &json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]})
            ),
            "Burstable"
        );
    }
}
