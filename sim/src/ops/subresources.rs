//! The scale, binding and eviction subresources.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::delete::DeleteOptions;
use super::{Subresource, WriteOptions, ns_key, rv_of};
use crate::SimShared;
use crate::error::{ApiError, ApiResult};
use crate::meta::{self, metadata};
use crate::registry::ResourceDef;
use crate::selector::LabelSelector;

impl SimShared {
    /// `autoscaling/v1` Scale view of an object.
    pub fn scale_of(&self, def: &ResourceDef, version: &str, obj: &Value) -> ApiResult<Value> {
        let spec = def.scale(version).ok_or_else(ApiError::path_not_found)?;
        let replicas = meta::get_path(obj, &spec.spec_replicas_path)
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let status_replicas = meta::get_path(obj, &spec.status_replicas_path)
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let selector = spec
            .label_selector_path
            .as_ref()
            .and_then(|p| meta::get_path(obj, p))
            .and_then(|v| match v {
                Value::String(s) => Some(s.clone()),
                Value::Object(_) => LabelSelector::from_json(v).ok().map(|s| s.to_query()),
                _ => None,
            });
        let m = metadata(obj);
        let pick = |f: &str| m.and_then(|m| m.get(f)).cloned().unwrap_or(Value::Null);
        let mut meta_out = Map::new();
        for f in [
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "creationTimestamp",
        ] {
            let v = pick(f);
            if !v.is_null() {
                meta_out.insert(f.into(), v);
            }
        }
        let mut status = json!({"replicas": status_replicas});
        if let Some(s) = selector {
            status["selector"] = json!(s);
        }
        Ok(json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": meta_out,
            "spec": {"replicas": replicas},
            "status": status,
        }))
    }

    /// Writes the scale subresource: `scale_body` is the desired Scale (after any patch).
    pub async fn update_scale(
        &self,
        def: &Arc<ResourceDef>,
        version: &str,
        ns: &str,
        name: &str,
        scale_body: &Value,
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        let spec = def
            .scale(version)
            .cloned()
            .ok_or_else(ApiError::path_not_found)?;
        if !scale_body.is_object() {
            return Err(ApiError::bad_request("Scale must be a JSON object"));
        }
        let replicas = match scale_body.pointer("/spec/replicas") {
            None | Some(Value::Null) => 0,
            Some(v) => v
                .as_i64()
                .ok_or_else(|| ApiError::bad_request("Scale.spec.replicas must be an integer"))?,
        };
        if replicas < 0 {
            return Err(ApiError::invalid(
                "autoscaling",
                "Scale",
                name,
                vec![crate::error::StatusCause {
                    reason: "FieldValueInvalid".into(),
                    message: format!(
                        "Invalid value: {replicas}: must be greater than or equal to 0"
                    ),
                    field: "spec.replicas".into(),
                }],
            ));
        }
        let want_rv = scale_body
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if !want_rv.is_empty()
            && let Some(cur) = self.store.get(&def.gr(), &ns_key(def, ns), name)
            && rv_of(&cur) != want_rv
        {
            return Err(ApiError::stale_conflict(&def.group, &def.plural, name));
        }
        let stored = self
            .update_loop(def, version, ns, name, Subresource::Main, opts, |current| {
                let mut next = Arc::unwrap_or_clone(Self::present(def, version, current));
                if !meta::set_path(&mut next, &spec.spec_replicas_path, json!(replicas)) {
                    return Err(ApiError::internal(format!(
                        "cannot set {} on the object",
                        spec.spec_replicas_path
                    )));
                }
                Ok((next, true))
            })
            .await?;
        self.scale_of(def, version, &stored)
    }

    /// pods/binding: assigns a pod to a node once.
    pub async fn bind_pod(
        &self,
        ns: &str,
        name: &str,
        binding: &Value,
        opts: &WriteOptions,
    ) -> ApiResult<()> {
        let def = self
            .resolve("", "v1", "pods")
            .ok_or_else(ApiError::path_not_found)?;
        let node = binding
            .pointer("/target/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| {
                ApiError::invalid(
                    "",
                    "Binding",
                    name,
                    vec![crate::error::StatusCause {
                        reason: "FieldValueRequired".into(),
                        message: "Required value".into(),
                        field: "target.name".into(),
                    }],
                )
            })?
            .to_string();
        let internal = WriteOptions {
            internal: true,
            ..opts.clone()
        };
        self.update_loop(
            &def,
            "v1",
            ns,
            name,
            Subresource::Main,
            &internal,
            |current| {
                let existing = current
                    .pointer("/spec/nodeName")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if !existing.is_empty() {
                    return Err(ApiError::conflict(
                        "",
                        "pods",
                        name,
                        &format!("pod {name} is already assigned to node \"{existing}\""),
                    ));
                }
                if meta::is_terminating(current) {
                    return Err(ApiError::conflict(
                        "",
                        "pods",
                        name,
                        &format!("pod {name} is being deleted, cannot be assigned to a host"),
                    ));
                }
                let mut next = Value::clone(current);
                meta::set_path(&mut next, "spec.nodeName", json!(node));
                Ok((next, true))
            },
        )
        .await?;
        // Binding also records PodScheduled=True in status, as the real registry does.
        let _ = self
            .update_loop(&def, "v1", ns, name, Subresource::Status, opts, |current| {
                let mut next = Value::clone(current);
                let cond = json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": meta::now_rfc3339()});
                let conds = next
                    .pointer_mut("/status")
                    .and_then(Value::as_object_mut)
                    .map(|s| s.entry("conditions").or_insert_with(|| json!([])));
                if let Some(Value::Array(list)) = conds {
                    list.retain(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"));
                    list.push(cond);
                }
                Ok((next, true))
            })
            .await;
        Ok(())
    }

    /// pods/eviction: deletes the pod unless a PodDisruptionBudget forbids it.
    pub async fn evict_pod(
        &self,
        ns: &str,
        name: &str,
        eviction: &Value,
        opts: &WriteOptions,
    ) -> ApiResult<()> {
        let pods = self
            .resolve("", "v1", "pods")
            .ok_or_else(ApiError::path_not_found)?;
        let pod = self.get(&pods, ns, name)?;
        // kube-apiserver admits the Eviction (CREATE pods/eviction) first: a webhook's
        // refusal answers with the webhook's code (429 from one that refuses as a PDB would).
        let mut admitted = eviction.clone();
        if let Some(meta) = admitted
            .as_object_mut()
            .map(|o| o.entry("metadata").or_insert_with(|| json!({})))
            .and_then(Value::as_object_mut)
        {
            meta.entry("name").or_insert_with(|| name.into());
            meta.entry("namespace").or_insert_with(|| ns.into());
        }
        self.admit("CREATE", &pods, "eviction", &mut admitted, None, opts)
            .await?;
        self.admit_validating("CREATE", &pods, "eviction", &admitted, None, opts)
            .await?;
        let del_opts = match eviction.get("deleteOptions") {
            Some(d) if d.is_object() => DeleteOptions::from_json(d)?,
            _ => DeleteOptions::default(),
        };
        let phase = pod
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or("");
        if meta::is_terminating(&pod) || matches!(phase, "Succeeded" | "Failed" | "Pending") {
            self.delete_admitted(&pods, ns, name, &del_opts, opts)
                .await?;
            return Ok(());
        }
        let pdbs_def = self
            .resolve("policy", "v1", "poddisruptionbudgets")
            .ok_or_else(ApiError::path_not_found)?;
        let (all, _) = self.store.list(&pdbs_def.gr(), Some(ns));
        let matching: Vec<Arc<Value>> = all
            .into_iter()
            .filter(|pdb| {
                pdb.pointer("/spec/selector")
                    .and_then(|s| LabelSelector::from_json(s).ok())
                    // An empty selector matches every pod in policy/v1.
                    .is_some_and(|s| s.matches(meta::labels_of(&pod)))
            })
            .collect();
        if matching.len() > 1 {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
        if let Some(pdb) = matching.first() {
            let pdb_name = meta::name_of(pdb).to_string();
            let allowed = pdb
                .pointer("/status/disruptionsAllowed")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if allowed <= 0 {
                let desired = pdb
                    .pointer("/status/desiredHealthy")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                let current = pdb
                    .pointer("/status/currentHealthy")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                let mut err = ApiError::too_many_requests(
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                    0,
                );
                err.retry_after_seconds = None;
                err.causes = vec![crate::error::StatusCause {
                    reason: "DisruptionBudget".into(),
                    message: format!(
                        "The disruption budget {pdb_name} needs {desired} healthy pods and has {current} currently"
                    ),
                    field: String::new(),
                }];
                return Err(err);
            }
            let pod_name = name.to_string();
            self.update_loop(
                &pdbs_def,
                "v1",
                ns,
                &pdb_name,
                Subresource::Status,
                opts,
                |current| {
                    let mut next = Value::clone(current);
                    let allowed = next
                        .pointer("/status/disruptionsAllowed")
                        .and_then(Value::as_i64)
                        .unwrap_or(0);
                    if allowed <= 0 {
                        return Err(ApiError::too_many_requests(
                            "Cannot evict pod as it would violate the pod's disruption budget.",
                            0,
                        ));
                    }
                    meta::set_path(&mut next, "status.disruptionsAllowed", json!(allowed - 1));
                    if let Some(s) = next.get_mut("status").and_then(Value::as_object_mut) {
                        let dp = s.entry("disruptedPods").or_insert_with(|| json!({}));
                        if let Some(m) = dp.as_object_mut() {
                            m.insert(pod_name.clone(), json!(meta::now_rfc3339()));
                        }
                    }
                    Ok((next, true))
                },
            )
            .await?;
        }
        self.delete_admitted(&pods, ns, name, &del_opts, opts)
            .await?;
        Ok(())
    }
}
