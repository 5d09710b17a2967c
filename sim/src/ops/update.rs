//! update (PUT) and the optimistic-concurrency loop every read-modify-write verb shares.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::delete::is_graceful_pending;
use super::{
    Subresource, WriteOptions, apply_schema, check_type_meta, kind_for, ns_key, rv_of,
    set_request_namespace, validate_object, validate_schema,
};
use crate::SimShared;
use crate::error::{ApiError, ApiResult};
use crate::managed;
use crate::meta::{self, metadata, metadata_mut};
use crate::registry::ResourceDef;
use crate::store::Commit;

/// What an update decided.
enum UpdateOutcome {
    Put(Value),
    Delete(Value),
    Noop,
}

impl SimShared {
    /// Shared update logic for PUT and PATCH: validates `new` against `old` and
    /// produces what to store.
    #[allow(clippy::too_many_arguments)]
    fn prepare_update(
        &self,
        def: &ResourceDef,
        version: &str,
        old: &Value,
        mut new: Value,
        sub: Subresource,
        opts: &WriteOptions,
        track_fields: bool,
    ) -> ApiResult<UpdateOutcome> {
        check_type_meta(def, version, &mut new)?;
        let name = meta::name_of(old).to_string();
        let ns = meta::meta_str(old, "namespace").to_string();
        {
            let Some(m) = metadata_mut(&mut new) else {
                return Err(ApiError::bad_request("object must be a JSON object"));
            };
            match m.get("name").and_then(Value::as_str) {
                Some(n) if n == name => {}
                Some(n) if !n.is_empty() => {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({n}) does not match the name on the URL ({name})"
                    )));
                }
                _ => {
                    m.insert("name".into(), Value::String(name.clone()));
                }
            }
            set_request_namespace(def, m, &ns)?;
            let new_rv = m
                .get("resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if new_rv.is_empty() {
                if !def.allow_unconditional_update {
                    return Err(ApiError::invalid(
                        &def.group,
                        &def.kind,
                        &name,
                        vec![crate::error::StatusCause {
                            reason: "FieldValueInvalid".into(),
                            message: "Invalid value: 0: must be specified for an update".into(),
                            field: "metadata.resourceVersion".into(),
                        }],
                    ));
                }
            } else if new_rv != rv_of(old) {
                return Err(ApiError::stale_conflict(&def.group, &def.plural, &name));
            }
        }
        let candidate_managed = metadata(&new).and_then(|m| m.get("managedFields")).cloned();
        let mut result = match sub {
            Subresource::Main => {
                let mut r = new;
                let client_managed = metadata(&r).and_then(|m| m.get("managedFields")).cloned();
                if let (Some(rm), Some(om)) = (metadata_mut(&mut r), metadata(old)) {
                    for f in [
                        "uid",
                        "creationTimestamp",
                        "deletionTimestamp",
                        "deletionGracePeriodSeconds",
                        "generation",
                        "resourceVersion",
                        "managedFields",
                        "selfLink",
                    ] {
                        match om.get(f) {
                            Some(v) => {
                                rm.insert(f.into(), v.clone());
                            }
                            None => {
                                rm.remove(f);
                            }
                        }
                    }
                    // An explicit empty list resets managedFields, as on the real server.
                    if client_managed
                        .as_ref()
                        .and_then(Value::as_array)
                        .is_some_and(Vec::is_empty)
                    {
                        rm.remove("managedFields");
                    }
                }
                if def.has_status(version)
                    && let Some(rmap) = r.as_object_mut()
                {
                    match old.get("status") {
                        Some(s) => {
                            rmap.insert("status".into(), s.clone());
                        }
                        None => {
                            rmap.remove("status");
                        }
                    }
                }
                crate::defaults::on_update(def, &mut r);
                r
            }
            Subresource::Resize => {
                crate::validate::pod_resize(old, &new)?;
                let mut r = old.clone();
                if let (Some(rmap), Some(spec)) = (r.as_object_mut(), new.get("spec")) {
                    rmap.insert("spec".into(), spec.clone());
                }
                r
            }
            Subresource::Status => {
                // The old object without its status (not copied only to be replaced),
                // then the new status moved in.
                let mut rmap: Map<String, Value> = old
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(k, _)| k.as_str() != "status")
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let mut new_map = new.as_object_mut();
                if let Some(s) = new_map.as_mut().and_then(|m| m.remove("status")) {
                    rmap.insert("status".into(), s);
                }
                if def.builtin && def.group.is_empty() && def.plural == "pods" {
                    let mut new_meta = new_map
                        .and_then(|m| m.get_mut("metadata"))
                        .and_then(Value::as_object_mut);
                    if let Some(meta) = rmap.get_mut("metadata").and_then(Value::as_object_mut) {
                        for field in POD_STATUS_WRITES_METADATA {
                            match new_meta.as_mut().and_then(|m| m.remove(field)) {
                                Some(v) => {
                                    meta.insert(field.into(), v);
                                }
                                None => {
                                    meta.remove(field);
                                }
                            }
                        }
                    }
                }
                Value::Object(rmap)
            }
        };
        apply_schema(def, version, &mut result);
        let old_finalizers = meta::finalizers_of(old);
        let new_finalizers = meta::finalizers_of(&result);
        let terminating = meta::is_terminating(old);
        if terminating {
            let added: Vec<&String> = new_finalizers
                .iter()
                .filter(|f| !old_finalizers.contains(f))
                .collect();
            if !added.is_empty() {
                return Err(ApiError::forbidden_field(
                    &def.group,
                    &def.kind,
                    &name,
                    "metadata.finalizers",
                    &format!(
                        "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                        added
                            .iter()
                            .map(|f| format!("{f:?}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
        if def.has_generation && spec_changed(def, version, old, &result) {
            let g = metadata(old)
                .and_then(|m| m.get("generation"))
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if let Some(m) = metadata_mut(&mut result) {
                m.insert("generation".into(), json!(g.saturating_add(1)));
            }
        }
        if !track_fields {
            // Server-side apply computed managedFields itself.
            if let Some(m) = metadata_mut(&mut result) {
                match candidate_managed {
                    Some(mf) => {
                        m.insert("managedFields".into(), mf);
                    }
                    None => {
                        m.remove("managedFields");
                    }
                }
            }
        } else {
            managed::record_update(
                kind_for(def),
                Some(old),
                &mut result,
                &opts.manager(),
                &def.api_version(version),
                sub.as_str(),
            );
        }
        if terminating && new_finalizers.is_empty() && !is_graceful_pending(def, &result) {
            return Ok(UpdateOutcome::Delete(result));
        }
        if result == *old {
            return Ok(UpdateOutcome::Noop);
        }
        Ok(UpdateOutcome::Put(result))
    }

    /// Runs `make_new(current)` and commits it with optimistic concurrency, retrying
    /// when another writer got in between (like `GuaranteedUpdate`).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn update_loop<F>(
        &self,
        def: &Arc<ResourceDef>,
        version: &str,
        ns: &str,
        name: &str,
        sub: Subresource,
        opts: &WriteOptions,
        mut make_new: F,
    ) -> ApiResult<Arc<Value>>
    where
        F: FnMut(&Arc<Value>) -> ApiResult<(Value, bool)>,
    {
        let gr = def.gr();
        let ns = ns_key(def, ns);
        for _attempt in 0..16 {
            let stored = self
                .store
                .get(&gr, &ns, name)
                .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
            // The update is made on the object in the request's version.
            let current = self.convert_one(def, &stored, version).await?;
            let (candidate, track) = make_new(&current)?;
            let outcome =
                self.prepare_update(def, version, &current, candidate, sub, opts, track)?;
            let (mut obj, delete) = match outcome {
                UpdateOutcome::Noop => return Ok(current),
                UpdateOutcome::Put(o) => (o, false),
                UpdateOutcome::Delete(o) => (o, true),
            };
            self.admit("UPDATE", def, sub.as_str(), &mut obj, Some(&current), opts)
                .await?;
            if sub == Subresource::Main {
                validate_object(def, Some(&*current), &mut obj, opts)?;
                crate::cluster::pvc::admit_update(&self.store, def, &current, &obj, opts)?;
            }
            validate_schema(def, version, Some(&current), &obj)?;
            self.admit_validating("UPDATE", def, sub.as_str(), &obj, Some(&current), opts)
                .await?;
            if opts.dry_run {
                return Ok(Arc::new(obj));
            }
            let obj = self.to_storage(def, obj).await?;
            let expected_rv = rv_of(&stored).to_string();
            let res = self.store.commit(&gr, &ns, name, |_, now| {
                let Some(now) = now else {
                    return Err(ApiError::not_found(&def.group, &def.plural, name));
                };
                if rv_of(now) != expected_rv {
                    return Err(ApiError::stale_conflict(&def.group, &def.plural, name));
                }
                Ok(if delete {
                    Commit::Delete(obj)
                } else {
                    Commit::Put(obj)
                })
            });
            match res {
                Ok(Some(stored)) => {
                    if def.group == "apiextensions.k8s.io"
                        && def.plural == "customresourcedefinitions"
                    {
                        self.sync_crd(&stored, delete);
                    }
                    return Ok(stored);
                }
                Ok(None) => return Err(ApiError::internal("update stored nothing")),
                Err(e) if e.code == 409 => continue,
                Err(e) => return Err(e),
            }
        }
        Err(ApiError::stale_conflict(&def.group, &def.plural, name))
    }

    /// Read-modify-write with optimistic concurrency and retries, for in-process
    /// controllers (the garbage collector, scheduler, kubelet and Job controller).
    #[allow(clippy::too_many_arguments)]
    pub async fn update_with<F>(
        &self,
        def: &Arc<ResourceDef>,
        version: &str,
        ns: &str,
        name: &str,
        sub: Subresource,
        opts: &WriteOptions,
        mut f: F,
    ) -> ApiResult<Arc<Value>>
    where
        F: FnMut(&Value) -> ApiResult<Value>,
    {
        self.update_loop(def, version, ns, name, sub, opts, |cur| {
            f(cur).map(|v| (v, true))
        })
        .await
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn update(
        &self,
        def: &Arc<ResourceDef>,
        version: &str,
        ns: &str,
        name: &str,
        body: Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> ApiResult<Arc<Value>> {
        if !body.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be a JSON object",
            ));
        }
        let mut body = body;
        if opts.field_validation.is_some() {
            let existing = self.store.get(&def.gr(), &ns_key(def, ns), name);
            let existing = existing.map(|e| Self::present(def, version, &e));
            super::enforce_fields(
                def,
                version,
                &mut body,
                existing.as_deref(),
                opts,
                crate::fieldvalidation::Decoded::Body,
            )?;
        }
        let client_rv = metadata(&body)
            .and_then(|m| m.get("resourceVersion"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let gr = def.gr();
        let nsk = ns_key(def, ns);
        // A client-supplied resourceVersion is a precondition: check it once against
        // the current object, then retries only absorb races with our own reads.
        if !client_rv.is_empty()
            && let Some(cur) = self.store.get(&gr, &nsk, name)
            && rv_of(&cur) != client_rv
        {
            return Err(ApiError::stale_conflict(&def.group, &def.plural, name));
        }
        // prepare_update compares a client resourceVersion with each fresh read, so a
        // writer racing in between turns into a 409 rather than a lost update.
        self.update_loop(def, version, ns, name, sub, opts, |_current| {
            Ok((body.clone(), true))
        })
        .await
    }
}

/// The metadata a write through pods/status sets: kube-apiserver's pod status strategy
/// resets only spec, deletionTimestamp and ownerReferences, so labels, annotations and
/// finalizers written there stick (custom resources' status strategy keeps nothing but
/// status).
const POD_STATUS_WRITES_METADATA: [&str; 3] = ["labels", "annotations", "finalizers"];

/// What a write through a pod's status subresource reads of the object it is given:
/// `status`, and the metadata it sets (labels, annotations, finalizers) with the name and
/// namespace. In-process writers build this instead of copying the whole pod only to
/// replace its status.
pub fn status_write(current: &Value, status: Value) -> Value {
    let mut meta = Map::new();
    if let Some(m) = metadata(current) {
        for field in ["name", "namespace"]
            .into_iter()
            .chain(POD_STATUS_WRITES_METADATA)
        {
            if let Some(v) = m.get(field) {
                meta.insert(field.into(), v.clone());
            }
        }
    }
    json!({"metadata": meta, "status": status})
}

/// Whether a write changed what generation counts: everything but metadata, type meta
/// and (where the version has a status subresource) status.
fn spec_changed(def: &ResourceDef, version: &str, old: &Value, new: &Value) -> bool {
    let skip_status = def.has_status(version);
    let counted = |k: &str| {
        !(matches!(k, "metadata" | "apiVersion" | "kind") || (skip_status && k == "status"))
    };
    let empty = Map::new();
    let (o, n) = (
        old.as_object().unwrap_or(&empty),
        new.as_object().unwrap_or(&empty),
    );
    o.iter()
        .filter(|(k, _)| counted(k))
        .any(|(k, v)| n.get(k) != Some(v))
        || n.keys().any(|k| counted(k) && !o.contains_key(k))
}
