//! delete and deletecollection: graceful deletion, finalizers, propagation policies.

use std::sync::Arc;

use serde_json::{Value, json};

use super::list::ListQuery;
use super::{WriteOptions, ns_key, rv_of};
use crate::SimShared;
use crate::error::{ApiError, ApiResult};
use crate::meta::{self, metadata, metadata_mut};
use crate::registry::ResourceDef;
use crate::store::Commit;

/// `DeleteOptions` as accepted in the body or query.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub propagation_policy: Option<String>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
    pub dry_run: bool,
}

impl DeleteOptions {
    pub fn from_json(v: &Value) -> ApiResult<Self> {
        if !v.is_object() {
            return Err(ApiError::bad_request("DeleteOptions must be a JSON object"));
        }
        let mut o = DeleteOptions {
            grace_period_seconds: v.get("gracePeriodSeconds").and_then(Value::as_i64),
            propagation_policy: v
                .get("propagationPolicy")
                .and_then(Value::as_str)
                .map(str::to_string),
            precondition_uid: v
                .get("preconditions")
                .and_then(|p| p.get("uid"))
                .and_then(Value::as_str)
                .map(str::to_string),
            precondition_rv: v
                .get("preconditions")
                .and_then(|p| p.get("resourceVersion"))
                .and_then(Value::as_str)
                .map(str::to_string),
            dry_run: v
                .get("dryRun")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty()),
        };
        if o.propagation_policy.is_none()
            && let Some(orphan) = v.get("orphanDependents").and_then(Value::as_bool)
        {
            o.propagation_policy = Some(if orphan { "Orphan" } else { "Background" }.into());
        }
        if let Some(p) = &o.propagation_policy
            && !matches!(p.as_str(), "Orphan" | "Background" | "Foreground")
        {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "DeleteOptions",
                "",
                vec![crate::error::StatusCause {
                    reason: "FieldValueNotSupported".into(),
                    message: format!(
                        "Unsupported value: \"{p}\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
                    ),
                    field: "propagationPolicy".into(),
                }],
            ));
        }
        Ok(o)
    }

    /// The options as the client set them, in DeleteOptions' JSON (admission's `options`).
    pub fn to_json(&self) -> Value {
        let mut v = serde_json::Map::new();
        if let Some(g) = self.grace_period_seconds {
            v.insert("gracePeriodSeconds".into(), g.into());
        }
        if let Some(p) = &self.propagation_policy {
            v.insert("propagationPolicy".into(), p.as_str().into());
        }
        let mut preconditions = serde_json::Map::new();
        if let Some(uid) = &self.precondition_uid {
            preconditions.insert("uid".into(), uid.as_str().into());
        }
        if let Some(rv) = &self.precondition_rv {
            preconditions.insert("resourceVersion".into(), rv.as_str().into());
        }
        if !preconditions.is_empty() {
            v.insert("preconditions".into(), preconditions.into());
        }
        if self.dry_run {
            v.insert("dryRun".into(), vec![Value::from("All")].into());
        }
        Value::Object(v)
    }
}

/// Result of a delete: the object (final or terminating state) and whether it is gone.
pub struct DeleteOutcome {
    pub object: Arc<Value>,
    pub removed: bool,
}

impl SimShared {
    pub async fn delete(
        &self,
        def: &Arc<ResourceDef>,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
        wopts: &WriteOptions,
    ) -> ApiResult<DeleteOutcome> {
        let gr = def.gr();
        let nsk = ns_key(def, ns);
        let current = self
            .store
            .get(&gr, &nsk, name)
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
        let mut old_for_admit = (*current).clone();
        let wopts = &WriteOptions {
            delete_options: Some(opts.clone()),
            ..wopts.clone()
        };
        self.admit("DELETE", def, "", &mut old_for_admit, Some(&current), wopts)
            .await?;
        self.admit_validating("DELETE", def, "", &old_for_admit, Some(&current), wopts)
            .await?;
        self.delete_admitted(def, ns, name, opts, wopts).await
    }

    /// The deletion without admission: what an eviction does once its Eviction was admitted
    /// (kube-apiserver's eviction deletes through the store, so no DELETE webhook sees it).
    pub async fn delete_admitted(
        &self,
        def: &Arc<ResourceDef>,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
        wopts: &WriteOptions,
    ) -> ApiResult<DeleteOutcome> {
        let gr = def.gr();
        let nsk = ns_key(def, ns);
        let current = self
            .store
            .get(&gr, &nsk, name)
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
        let now = jiff::Timestamp::now();
        let is_pod = def.group.is_empty() && def.plural == "pods";
        let is_namespace = def.group.is_empty() && def.plural == "namespaces";
        let dry_run = opts.dry_run || wopts.dry_run;
        let res = self.store.commit(&gr, &nsk, name, |_, cur| {
            let Some(cur) = cur else {
                return Err(ApiError::not_found(&def.group, &def.plural, name));
            };
            if let Some(uid) = &opts.precondition_uid {
                let actual = meta::meta_str(cur, "uid");
                if uid != actual {
                    return Err(ApiError::conflict(
                        &def.group,
                        &def.plural,
                        name,
                        &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"),
                    ));
                }
            }
            if let Some(rv) = &opts.precondition_rv {
                let actual = rv_of(cur);
                if rv != actual {
                    return Err(ApiError::conflict(
                        &def.group,
                        &def.plural,
                        name,
                        &format!("Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {actual}"),
                    ));
                }
            }
            let mut obj = (**cur).clone();
            // Graceful deletion applies to pods bound to a node and not yet terminal.
            let mut grace: i64 = 0;
            if is_pod {
                let bound = obj
                    .pointer("/spec/nodeName")
                    .and_then(Value::as_str)
                    .is_some_and(|n| !n.is_empty());
                let phase = obj.pointer("/status/phase").and_then(Value::as_str).unwrap_or("");
                if bound && phase != "Succeeded" && phase != "Failed" {
                    grace = opts.grace_period_seconds.unwrap_or_else(|| {
                        obj.pointer("/spec/terminationGracePeriodSeconds")
                            .and_then(Value::as_i64)
                            .unwrap_or(30)
                    });
                }
            }
            let grace = grace.max(0);
            let mut finalizers = meta::finalizers_of(&obj);
            match opts.propagation_policy.as_deref() {
                Some("Foreground") if !finalizers.iter().any(|f| f == "foregroundDeletion") => {
                    finalizers.push("foregroundDeletion".into())
                }
                Some("Orphan") if !finalizers.iter().any(|f| f == "orphan") => {
                    finalizers.push("orphan".into())
                }
                _ => {}
            }
            let already = meta::is_terminating(&obj);
            if already {
                // A second delete may only shorten a pending grace period.
                let pending = metadata(&obj)
                    .and_then(|m| m.get("deletionGracePeriodSeconds"))
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                if is_pod && grace == 0 && pending > 0 && meta::finalizers_of(&obj).is_empty() {
                    return Ok(if dry_run { Commit::Noop } else { Commit::Delete(obj) });
                }
                if is_pod && grace < pending
                    && let Some(m) = metadata_mut(&mut obj)
                {
                    m.insert("deletionGracePeriodSeconds".into(), json!(grace));
                    let ts = now
                        .checked_add(jiff::SignedDuration::from_secs(grace))
                        .unwrap_or(now);
                    m.insert("deletionTimestamp".into(), json!(meta::format_time(ts)));
                    return Ok(if dry_run { Commit::Noop } else { Commit::Put(obj) });
                }
                return Ok(Commit::Noop);
            }
            if finalizers.is_empty() && grace == 0 && !is_namespace {
                return Ok(if dry_run { Commit::Noop } else { Commit::Delete(obj) });
            }
            let g = metadata(&obj)
                .and_then(|m| m.get("generation"))
                .and_then(Value::as_i64);
            if let Some(m) = metadata_mut(&mut obj) {
                let ts = now
                    .checked_add(jiff::SignedDuration::from_secs(grace))
                    .unwrap_or(now);
                m.insert("deletionTimestamp".into(), json!(meta::format_time(ts)));
                m.insert("deletionGracePeriodSeconds".into(), json!(grace));
                if !finalizers.is_empty() {
                    m.insert("finalizers".into(), json!(finalizers));
                }
                if let Some(g) = g {
                    m.insert("generation".into(), json!(g.saturating_add(1)));
                }
            }
            if is_namespace
                && let Some(map) = obj.as_object_mut()
            {
                map.insert("status".into(), json!({"phase": "Terminating"}));
            }
            Ok(if dry_run { Commit::Noop } else { Commit::Put(obj) })
        })?;
        let stored = res.unwrap_or(current);
        let removed = !dry_run
            && self
                .store
                .get(&gr, &nsk, name)
                .is_none_or(|o| meta::meta_str(&o, "uid") != meta::meta_str(&stored, "uid"));
        if removed
            && def.group == "apiextensions.k8s.io"
            && def.plural == "customresourcedefinitions"
        {
            self.crd_removed(&stored).await;
        }
        Ok(DeleteOutcome {
            object: stored,
            removed,
        })
    }

    pub async fn delete_collection(
        &self,
        def: &Arc<ResourceDef>,
        version: &str,
        ns: Option<&str>,
        q: &ListQuery,
        opts: &DeleteOptions,
        wopts: &WriteOptions,
    ) -> ApiResult<Vec<Arc<Value>>> {
        let mut lq = q.clone();
        lq.limit = None;
        lq.continue_token = None;
        let listed = self.list(def, version, ns, &lq)?;
        let mut out = Vec::new();
        for item in listed.items {
            let ns = meta::meta_str(&item, "namespace").to_string();
            let name = meta::name_of(&item).to_string();
            match self.delete(def, &ns, &name, opts, wopts).await {
                Ok(o) => out.push(o.object),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

pub(super) fn is_graceful_pending(def: &ResourceDef, obj: &Value) -> bool {
    def.group.is_empty()
        && def.plural == "pods"
        && metadata(obj)
            .and_then(|m| m.get("deletionGracePeriodSeconds"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
            > 0
}
