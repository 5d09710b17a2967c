//! API semantics on top of the store: what each verb does to an object, independent
//! of HTTP. The HTTP layer (`server.rs`) parses requests and calls these; in-process
//! components (future scheduler, kubelet, garbage collector) can call them directly.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::SimShared;
use crate::error::{ApiError, ApiResult};
use crate::managed;
use crate::meta::{self, metadata, metadata_mut};
use crate::patch::{self, PatchType};
use crate::registry::{GroupResource, ResourceDef, def_from_crd};
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::Commit;

/// Which part of an object a write targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    Main,
    Status,
    /// pods/resize: only the containers' cpu/memory resources change.
    Resize,
}

impl Subresource {
    pub fn as_str(self) -> &'static str {
        match self {
            Subresource::Main => "",
            Subresource::Status => "status",
            Subresource::Resize => "resize",
        }
    }
}

/// Options every write carries.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    pub dry_run: bool,
    pub field_manager: Option<String>,
    pub force: bool,
    pub user_agent: String,
    /// Set by registry-internal writers (pods/binding) that may change fields a
    /// client update may not.
    pub internal: bool,
}

impl WriteOptions {
    /// The manager name the API server derives when none is given: the user agent up
    /// to the first '/'.
    pub fn manager(&self) -> String {
        if let Some(m) = &self.field_manager {
            return m.clone();
        }
        let ua = self.user_agent.split('/').next().unwrap_or("").trim();
        if ua.is_empty() {
            "unknown".into()
        } else {
            ua.chars().take(128).collect()
        }
    }
}

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
}

#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
}

pub struct ListResult {
    pub items: Vec<Arc<Value>>,
    pub resource_version: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<u64>,
}

/// Result of a delete: the object (final or terminating state) and whether it is gone.
pub struct DeleteOutcome {
    pub object: Arc<Value>,
    pub removed: bool,
}

/// What an update decided.
enum UpdateOutcome {
    Put(Value),
    Delete(Value),
    Noop,
}

fn kind_for(def: &ResourceDef) -> Option<&str> {
    if def.builtin {
        Some(def.kind.as_str())
    } else {
        None
    }
}

fn ns_key(def: &ResourceDef, ns: &str) -> String {
    if def.namespaced {
        ns.to_string()
    } else {
        String::new()
    }
}

/// Checks and sets apiVersion/kind of an incoming object.
fn check_type_meta(def: &ResourceDef, version: &str, obj: &mut Value) -> ApiResult<()> {
    let Some(map) = obj.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml",
        ));
    };
    let expected = def.api_version(version);
    if let Some(av) = map.get("apiVersion").and_then(Value::as_str)
        && !av.is_empty()
        && av != expected
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({expected})"
        )));
    }
    if let Some(k) = map.get("kind").and_then(Value::as_str)
        && !k.is_empty()
        && k != def.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({k}) does not match the expected kind ({})",
            def.kind
        )));
    }
    // With a conversion webhook the object stays in the request's version through
    // defaulting, schema and admission, and is converted just before it is stored.
    let api_version = if def.conversion_webhook.is_some() {
        expected
    } else {
        def.api_version(def.storage_version())
    };
    map.insert("apiVersion".into(), Value::String(api_version));
    map.insert("kind".into(), Value::String(def.kind.clone()));
    if def.is_events_v1() {
        *obj = crate::events::to_core(obj);
        return Ok(());
    }
    if let Some(m) = map.get("metadata")
        && !m.is_object()
        && !m.is_null()
    {
        return Err(ApiError::bad_request("metadata must be an object"));
    }
    Ok(())
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

fn rv_of(obj: &Value) -> &str {
    meta::meta_str(obj, "resourceVersion")
}

impl SimShared {
    pub fn resolve(&self, group: &str, version: &str, resource: &str) -> Option<Arc<ResourceDef>> {
        self.store.registry().lookup(group, version, resource)
    }

    /// Returns an object converted for presentation at `version`.
    pub fn present(def: &ResourceDef, version: &str, obj: &Arc<Value>) -> Arc<Value> {
        if def.is_events_v1() {
            return Arc::new(crate::events::from_core(obj));
        }
        let want = def.api_version(version);
        if obj.get("apiVersion").and_then(Value::as_str) == Some(want.as_str()) {
            return obj.clone();
        }
        let mut v = (**obj).clone();
        if let Some(m) = v.as_object_mut() {
            m.insert("apiVersion".into(), Value::String(want));
        }
        Arc::new(v)
    }

    pub fn get(&self, def: &ResourceDef, ns: &str, name: &str) -> ApiResult<Arc<Value>> {
        self.store
            .get(&def.gr(), &ns_key(def, ns), name)
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))
    }

    pub fn validate_field_selector(
        &self,
        def: &ResourceDef,
        version: &str,
        fields: &FieldSelector,
    ) -> ApiResult<()> {
        for r in &fields.requirements {
            if !def.supports_field_selector(version, &r.field) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {}",
                    r.field
                )));
            }
        }
        Ok(())
    }

    pub fn list(
        &self,
        def: &ResourceDef,
        version: &str,
        ns: Option<&str>,
        q: &ListQuery,
    ) -> ApiResult<ListResult> {
        self.validate_field_selector(def, version, &q.fields)?;
        let mut q = q.clone();
        q.fields = storage_fields(def, &q.fields);
        let q = &q;
        let ns = if def.namespaced { ns } else { None };
        let (start_after, token_rv) = match &q.continue_token {
            Some(t) if !t.is_empty() => {
                let (key, rv) = decode_continue(t)?;
                if rv < self.store.compacted_rv() {
                    return Err(ApiError::gone(
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                    ));
                }
                (Some(key), Some(rv))
            }
            _ => (None, None),
        };
        let (all, current_rv) = match &start_after {
            Some(key) => {
                let (kns, kname) = key.split_once('/').unwrap_or(("", key.as_str()));
                if ns.is_some_and(|n| n != kns) {
                    return Err(ApiError::bad_request(
                        "continue key is not valid: the namespace does not match the request",
                    ));
                }
                self.store
                    .list_after(&def.gr(), ns, &(kns.to_string(), kname.to_string()))
            }
            None => self.store.list(&def.gr(), ns),
        };
        let filtering = !q.labels.is_empty() || !q.fields.is_empty();
        let mut items = Vec::new();
        let mut continue_token = None;
        let mut remaining = None;
        let mut iter = all.iter();
        let limit = q.limit.filter(|l| *l > 0);
        for obj in iter.by_ref() {
            if !q.labels.matches(meta::labels_of(obj)) || !q.fields.matches(obj) {
                continue;
            }
            items.push(obj.clone());
            if let Some(l) = limit
                && items.len() >= l
            {
                break;
            }
        }
        let rv = token_rv.unwrap_or(current_rv);
        if let Some(l) = limit
            && items.len() >= l
        {
            let rest: Vec<&Arc<Value>> = iter
                .filter(|o| {
                    !filtering || (q.labels.matches(meta::labels_of(o)) && q.fields.matches(o))
                })
                .collect();
            if !rest.is_empty()
                && let Some(last) = items.last()
            {
                continue_token = Some(encode_continue(&object_key(last), rv));
                if !filtering {
                    remaining = Some(rest.len() as u64);
                }
            }
        }
        Ok(ListResult {
            items,
            resource_version: rv,
            continue_token,
            remaining,
        })
    }

    async fn admit(
        &self,
        operation: &str,
        def: &ResourceDef,
        sub: &str,
        obj: &mut Value,
        old: Option<&Arc<Value>>,
        opts: &WriteOptions,
    ) -> ApiResult<()> {
        let hooks = self.hooks();
        for hook in hooks {
            let attrs = crate::AdmissionAttributes {
                operation: operation.to_string(),
                group: def.group.clone(),
                resource: def.plural.clone(),
                kind: def.kind.clone(),
                subresource: sub.to_string(),
                namespace: meta::meta_str(obj, "namespace").to_string(),
                name: meta::name_of(obj).to_string(),
                old_object: old.cloned(),
                dry_run: opts.dry_run,
                user_agent: opts.user_agent.clone(),
            };
            hook.admit(&attrs, obj).await?;
        }
        Ok(())
    }

    pub async fn create(
        &self,
        def: &Arc<ResourceDef>,
        version: &str,
        ns: &str,
        body: Value,
        opts: &WriteOptions,
    ) -> ApiResult<Arc<Value>> {
        self.create_with_managed(def, version, ns, body, opts, None)
            .await
    }

    /// Create; `managed_fields` (from server-side apply) replaces the Update entry
    /// a plain create records, so an apply-create is one write.
    async fn create_with_managed(
        &self,
        def: &Arc<ResourceDef>,
        version: &str,
        ns: &str,
        body: Value,
        opts: &WriteOptions,
        managed_fields: Option<Value>,
    ) -> ApiResult<Arc<Value>> {
        let mut obj = body;
        check_type_meta(def, version, &mut obj)?;
        let ns = ns_key(def, ns);
        let Some(m) = metadata_mut(&mut obj) else {
            return Err(ApiError::bad_request("object must be a JSON object"));
        };
        if def.namespaced {
            match m.get("namespace").and_then(Value::as_str) {
                Some(n) if !n.is_empty() && n != ns => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {
                    m.insert("namespace".into(), Value::String(ns.clone()));
                }
            }
        } else {
            m.remove("namespace");
        }
        let mut name = m
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if name.is_empty() {
            let gen_name = m
                .get("generateName")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if gen_name.is_empty() {
                return Err(ApiError::required_field(
                    &def.group,
                    &def.kind,
                    "",
                    "metadata.name",
                    "name or generateName is required",
                ));
            }
            // Same cap as apimachinery's SimpleNameGenerator (63 - 5 chars of prefix).
            let prefix: String = gen_name.chars().take(58).collect();
            name = format!("{prefix}{}", meta::random_suffix());
            m.insert("name".into(), Value::String(name.clone()));
        }
        if let Err(detail) = meta::validate_name(&name, def.name_rule) {
            return Err(ApiError::invalid_field(
                &def.group,
                &def.kind,
                &name,
                "metadata.name",
                &name,
                &detail,
            ));
        }
        for f in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
            "generation",
            "managedFields",
        ] {
            m.remove(f);
        }
        let uid = meta::new_uid();
        m.insert("uid".into(), Value::String(uid.clone()));
        m.insert(
            "creationTimestamp".into(),
            Value::String(meta::now_rfc3339()),
        );
        if def.has_generation {
            m.insert("generation".into(), json!(1));
        }
        crate::defaults::on_create(def, &mut obj, &uid);
        apply_schema(def, version, &mut obj);
        crate::validate::object_meta(def, &obj)?;
        crate::validate::builtin_spec(def, &obj)?;
        let crd_def =
            if def.group == "apiextensions.k8s.io" && def.plural == "customresourcedefinitions" {
                let d = validate_crd(&obj, &name)?;
                let status = crate::registry::crd_status(&obj, &d);
                if let Some(map) = obj.as_object_mut() {
                    map.insert("status".into(), status);
                }
                Some(d)
            } else {
                None
            };
        let manager = opts.manager();
        match managed_fields {
            Some(mf) => {
                if let Some(m) = metadata_mut(&mut obj) {
                    m.insert("managedFields".into(), mf);
                }
            }
            None => {
                managed::record_update(
                    kind_for(def),
                    None,
                    &mut obj,
                    &manager,
                    &def.api_version(version),
                    "",
                );
            }
        }
        self.admit("CREATE", def, "", &mut obj, None, opts).await?;
        let obj = self.to_storage(def, obj).await?;
        let gr = def.gr();
        let ns_gr = GroupResource::new("", "namespaces");
        let dry_run = opts.dry_run;
        let mut pending = Some(obj);
        let result = self.store.commit(&gr, &ns, &name, |st, current| {
            if def.namespaced {
                match st.get(&ns_gr, "", &ns) {
                    None => return Err(ApiError::not_found("", "namespaces", &ns)),
                    Some(n) if meta::is_terminating(n) => {
                        return Err(ApiError::forbidden(format!(
                            "{} \"{}\" is forbidden: unable to create new content in namespace {} because it is being terminated",
                            crate::error::qualified(&def.group, &def.plural),
                            name,
                            ns
                        )));
                    }
                    _ => {}
                }
            }
            if current.is_some() {
                return Err(ApiError::already_exists(&def.group, &def.plural, &name));
            }
            if dry_run {
                return Ok(Commit::Noop);
            }
            // Moved, not cloned: this runs under the store lock.
            Ok(Commit::Put(pending.take().unwrap_or_default()))
        })?;
        if dry_run {
            return Ok(Arc::new(pending.take().unwrap_or_default()));
        }
        let stored = result.ok_or_else(|| ApiError::internal("create stored nothing"))?;
        if let Some(d) = crd_def {
            self.store.registry_mut().insert(d);
        }
        Ok(stored)
    }

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
            if def.namespaced {
                match m.get("namespace").and_then(Value::as_str) {
                    Some(n) if !n.is_empty() && n != ns => {
                        return Err(ApiError::bad_request(
                            "the namespace of the provided object does not match the namespace sent on the request",
                        ));
                    }
                    _ => {
                        m.insert("namespace".into(), Value::String(ns.clone()));
                    }
                }
            } else {
                m.remove("namespace");
            }
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
        if def.group == "apiextensions.k8s.io"
            && def.plural == "customresourcedefinitions"
            && sub == Subresource::Main
        {
            let d = validate_crd(&result, &name)?;
            let status = crate::registry::crd_status(&result, &d);
            if let Some(map) = result.as_object_mut() {
                map.insert("status".into(), status);
            }
        }
        if sub == Subresource::Main {
            crate::validate::object_meta(def, &result)?;
            crate::validate::builtin_spec(def, &result)?;
            if def.builtin && def.group.is_empty() && def.plural == "pods" && !opts.internal {
                crate::validate::pod_update(old, &result)?;
            }
        }
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
    async fn update_loop<F>(
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
    /// controllers (garbage collector, later the scheduler and kubelet).
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

    fn sync_crd(&self, crd: &Value, removed: bool) {
        if let Ok(d) = def_from_crd(crd) {
            let mut reg = self.store.registry_mut();
            if removed {
                reg.remove(&d.key());
            } else {
                reg.insert(d);
            }
        }
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

    #[allow(clippy::too_many_arguments)]
    pub async fn patch(
        &self,
        def: &Arc<ResourceDef>,
        version: &str,
        ns: &str,
        name: &str,
        patch_type: PatchType,
        body: &[u8],
        sub: Subresource,
        opts: &WriteOptions,
    ) -> ApiResult<Arc<Value>> {
        if patch_type == PatchType::Strategic && !def.builtin {
            return Err(ApiError::unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            ));
        }
        if patch_type == PatchType::Apply {
            return self.apply(def, version, ns, name, body, sub, opts).await;
        }
        let patch_json: Option<Value> = match patch_type {
            PatchType::Json => None,
            _ => Some(
                serde_json::from_slice(body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?,
            ),
        };
        if let Some(p) = &patch_json
            && !p.is_object()
        {
            return Err(ApiError::bad_request(
                "error decoding patch: the patch must be a JSON object",
            ));
        }
        // A resourceVersion inside the patch is a precondition checked against the
        // object as read; a mismatch is a real conflict, not a retryable race.
        let patch_rv = patch_json
            .as_ref()
            .and_then(|p| p.pointer("/metadata/resourceVersion"))
            .and_then(Value::as_str)
            .map(str::to_string);
        if let Some(rv) = &patch_rv
            && let Some(cur) = self.store.get(&def.gr(), &ns_key(def, ns), name)
            && rv_of(&cur) != rv
        {
            return Err(ApiError::stale_conflict(&def.group, &def.plural, name));
        }
        let kind = def.kind.clone();
        self.update_loop(def, version, ns, name, sub, opts, |current| {
            let cur = Arc::unwrap_or_clone(Self::present(def, version, current));
            let mut patched = match patch_type {
                PatchType::Json => patch::json_patch(cur, body)?,
                PatchType::Merge => {
                    patch::merge_patch(cur, patch_json.as_ref().unwrap_or(&Value::Null))
                }
                PatchType::Strategic => {
                    patch::strategic_merge(&kind, cur, patch_json.as_ref().unwrap_or(&Value::Null))?
                }
                PatchType::Apply => cur,
            };
            if !patched.is_object() {
                return Err(ApiError::bad_request("patched object is not a JSON object"));
            }
            // Without an explicit precondition the patch applies to whatever is current.
            if patch_rv.is_none()
                && let Some(m) = metadata_mut(&mut patched)
            {
                m.insert(
                    "resourceVersion".into(),
                    Value::String(rv_of(current).to_string()),
                );
            }
            Ok((patched, true))
        })
        .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn apply(
        &self,
        def: &Arc<ResourceDef>,
        version: &str,
        ns: &str,
        name: &str,
        body: &[u8],
        sub: Subresource,
        opts: &WriteOptions,
    ) -> ApiResult<Arc<Value>> {
        let Some(manager) = opts.field_manager.clone().filter(|m| !m.is_empty()) else {
            return Err(ApiError::bad_request(
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            ));
        };
        let config = parse_yaml_or_json(body)?;
        if !config.is_object() {
            return Err(ApiError::bad_request(
                "apply patch must be a JSON/YAML object",
            ));
        }
        let expected = def.api_version(version);
        match config.get("apiVersion").and_then(Value::as_str) {
            Some(av) if av == expected => {}
            Some(av) => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({av}) does not match the expected API version ({expected})"
                )));
            }
            None => {
                return Err(ApiError::bad_request(
                    "invalid object type: apiVersion must be set in the applied configuration",
                ));
            }
        }
        if config.get("kind").and_then(Value::as_str) != Some(def.kind.as_str()) {
            return Err(ApiError::bad_request(format!(
                "invalid object type: kind must be {} in the applied configuration",
                def.kind
            )));
        }
        let cfg_name = meta::name_of(&config);
        if !cfg_name.is_empty() && cfg_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({cfg_name}) does not match the name on the URL ({name})"
            )));
        }
        let api_version = def.api_version(version);
        let kind = kind_for(def).map(str::to_string);
        let gr = def.gr();
        let nsk = ns_key(def, ns);
        if self.store.get(&gr, &nsk, name).is_none() {
            if sub != Subresource::Main {
                return Err(ApiError::not_found(&def.group, &def.plural, name));
            }
            let mut obj = managed::apply(
                kind.as_deref(),
                None,
                &config,
                &manager,
                opts.force,
                &api_version,
                "",
                &def.group,
                &def.plural,
                name,
            )?;
            if let Some(m) = metadata_mut(&mut obj) {
                m.insert("name".into(), Value::String(name.to_string()));
            }
            let managed_fields = metadata(&obj).and_then(|m| m.get("managedFields")).cloned();
            let created = self
                .create_with_managed(def, version, ns, obj, opts, managed_fields)
                .await;
            match created {
                Ok(stored) => return Ok(stored),
                Err(e) if e.code == 409 && e.reason == "AlreadyExists" => {}
                Err(e) => return Err(e),
            }
        }
        // A resourceVersion in the applied configuration is a precondition.
        let config_rv = meta::meta_str(&config, "resourceVersion").to_string();
        self.update_loop(def, version, ns, name, sub, opts, |current| {
            if !config_rv.is_empty() && config_rv != rv_of(current) {
                return Err(ApiError::stale_conflict(&def.group, &def.plural, name));
            }
            let cur = Arc::unwrap_or_clone(Self::present(def, version, current));
            let mut merged = managed::apply(
                kind.as_deref(),
                Some(&cur),
                &config,
                &manager,
                opts.force,
                &api_version,
                sub.as_str(),
                &def.group,
                &def.plural,
                name,
            )?;
            if let Some(m) = metadata_mut(&mut merged) {
                m.insert(
                    "resourceVersion".into(),
                    Value::String(rv_of(current).to_string()),
                );
            }
            // prepare_update keeps the old managedFields; carry the apply result over.
            Ok((merged, false))
        })
        .await
    }

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
        self.admit("DELETE", def, "", &mut old_for_admit, Some(&current), wopts)
            .await?;
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

    /// Deleting a CRD deletes its instances (the real server does this through the
    /// `customresourcecleanup` finalizer; here it happens before the response).
    async fn crd_removed(&self, crd: &Value) {
        let Ok(d) = def_from_crd(crd) else { return };
        let gr = d.gr();
        let (items, _) = self.store.list(&gr, None);
        for item in items {
            let ns = meta::meta_str(&item, "namespace").to_string();
            let name = meta::name_of(&item).to_string();
            let _ = self.store.commit(&gr, &ns, &name, |_, cur| {
                Ok(match cur {
                    Some(c) => Commit::Delete((**c).clone()),
                    None => Commit::Noop,
                })
            });
        }
        self.store.registry_mut().remove(&d.key());
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
        let del_opts = match eviction.get("deleteOptions") {
            Some(d) if d.is_object() => DeleteOptions::from_json(d)?,
            _ => DeleteOptions::default(),
        };
        let phase = pod
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or("");
        if meta::is_terminating(&pod) || matches!(phase, "Succeeded" | "Failed" | "Pending") {
            self.delete(&pods, ns, name, &del_opts, opts).await?;
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
        self.delete(&pods, ns, name, &del_opts, opts).await?;
        Ok(())
    }
}

/// Prunes unknown fields and applies schema defaults of custom resources.
fn apply_schema(def: &ResourceDef, version: &str, obj: &mut Value) {
    if def.builtin {
        return;
    }
    if let Some(schema) = def
        .versions
        .iter()
        .find(|v| v.name == version)
        .and_then(|v| v.schema.as_ref())
    {
        crate::structural::prune_and_default(obj, schema);
    }
}

/// Field selectors rewritten for the stored shape (events.k8s.io names).
pub fn storage_fields(def: &ResourceDef, fields: &FieldSelector) -> FieldSelector {
    if !def.is_events_v1() {
        return fields.clone();
    }
    let mut out = fields.clone();
    for r in &mut out.requirements {
        r.field = crate::events::core_field(&r.field);
    }
    out
}

fn is_graceful_pending(def: &ResourceDef, obj: &Value) -> bool {
    def.group.is_empty()
        && def.plural == "pods"
        && metadata(obj)
            .and_then(|m| m.get("deletionGracePeriodSeconds"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
            > 0
}

fn validate_crd(obj: &Value, name: &str) -> ApiResult<ResourceDef> {
    let invalid = |field: &str, msg: &str| {
        ApiError::invalid(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            name,
            vec![crate::error::StatusCause {
                reason: "FieldValueInvalid".into(),
                message: msg.to_string(),
                field: field.into(),
            }],
        )
    };
    let d = def_from_crd(obj).map_err(|e| invalid("spec", &e))?;
    let expected = format!("{}.{}", d.plural, d.group);
    if name != expected {
        return Err(invalid(
            "metadata.name",
            &format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    Ok(d)
}

fn object_key(obj: &Value) -> String {
    format!(
        "{}/{}",
        meta::meta_str(obj, "namespace"),
        meta::name_of(obj)
    )
}

fn encode_continue(key: &str, rv: u64) -> String {
    use base64::Engine;
    let token = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{key}\u{0}")});
    base64::engine::general_purpose::URL_SAFE.encode(token.to_string())
}

fn decode_continue(token: &str) -> ApiResult<(String, u64)> {
    use base64::Engine;
    let bad = || {
        ApiError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let raw = base64::engine::general_purpose::URL_SAFE
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    if v.get("v").and_then(Value::as_str) != Some("meta.k8s.io/v1") {
        return Err(bad());
    }
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let start = v.get("start").and_then(Value::as_str).ok_or_else(bad)?;
    Ok((start.trim_end_matches('\u{0}').to_string(), rv))
}

/// Parses an apply body: YAML (a JSON superset) or JSON.
pub fn parse_yaml_or_json(body: &[u8]) -> ApiResult<Value> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    let text = std::str::from_utf8(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    serde_saphyr::from_str::<Value>(text)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
}
