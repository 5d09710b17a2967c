//! API semantics on top of the store: what each verb does to an object, independent
//! of HTTP. The HTTP layer (`server.rs`) parses requests and calls these; in-process
//! components (the garbage collector, scheduler, kubelet and Job controller in `cluster`)
//! call them directly. One module per verb (create, update, patch and apply, delete, list),
//! plus the subresources and what writing a CRD does.

mod crds;
mod create;
mod delete;
mod list;
mod patching;
mod subresources;
mod update;

use std::sync::Arc;

use serde_json::{Value, json};

use crate::SimShared;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::registry::ResourceDef;

pub use delete::{DeleteOptions, DeleteOutcome};
pub use list::{ListQuery, ListResult, storage_fields};
pub use update::status_write;

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

/// [`crate::fieldvalidation::enforce`] with the write's `?fieldValidation=` mode, its
/// warnings (`Warn`) added to the write's.
pub(crate) fn enforce_fields(
    def: &crate::registry::ResourceDef,
    version: &str,
    obj: &mut serde_json::Value,
    existing: Option<&serde_json::Value>,
    opts: &WriteOptions,
    decoded: crate::fieldvalidation::Decoded,
) -> crate::error::ApiResult<()> {
    let warnings = crate::fieldvalidation::enforce(
        def,
        version,
        obj,
        existing,
        opts.field_validation,
        decoded,
    )?;
    if !warnings.is_empty() {
        opts.warnings.add(warnings);
    }
    Ok(())
}

/// Options every write carries.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    pub dry_run: bool,
    pub field_manager: Option<String>,
    pub force: bool,
    pub user_agent: String,
    /// The requester, for admission's `userInfo` ([`crate::AdmissionAttributes::user`]).
    pub user: Option<crate::authz::User>,
    /// A delete's options as the client sent them, for admission's `options`.
    pub delete_options: Option<DeleteOptions>,
    /// Set by registry-internal writers (pods/binding) that may change fields a
    /// client update may not.
    pub internal: bool,
    /// What to do with fields the object's type does not declare (`?fieldValidation=`);
    /// None (in-process writers) checks nothing.
    pub field_validation: Option<crate::fieldvalidation::FieldValidation>,
    /// Where the write puts the warnings it returns to the client.
    pub warnings: Warnings,
}

/// The warnings one request returns (as `Warning` headers), each once; the clones of
/// one request's options share them.
#[derive(Debug, Clone, Default)]
pub struct Warnings(Arc<std::sync::Mutex<Vec<String>>>);

impl Warnings {
    pub fn add(&self, messages: impl IntoIterator<Item = String>) {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for m in messages {
            if !held.contains(&m) {
                held.push(m);
            }
        }
    }

    /// Takes the warnings recorded so far.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
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

/// Sets a written object's `metadata.namespace` to the request's (`ns`), refusing one that
/// names another; cluster-scoped objects carry none.
fn set_request_namespace(
    def: &ResourceDef,
    m: &mut serde_json::Map<String, Value>,
    ns: &str,
) -> ApiResult<()> {
    if !def.namespaced {
        m.remove("namespace");
        return Ok(());
    }
    match m.get("namespace").and_then(Value::as_str) {
        Some(n) if !n.is_empty() && n != ns => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        _ => {
            m.insert("namespace".into(), Value::String(ns.to_string()));
            Ok(())
        }
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

    /// Mutating admission: each hook may change `obj` or reject the write.
    async fn admit(
        &self,
        operation: &str,
        def: &ResourceDef,
        sub: &str,
        obj: &mut Value,
        old: Option<&Arc<Value>>,
        opts: &WriteOptions,
    ) -> ApiResult<()> {
        for hook in self.hooks() {
            let attrs = admission_attributes(operation, def, sub, obj, old, opts);
            hook.admit(&attrs, obj).await?;
        }
        Ok(())
    }

    /// Validating admission, after the object's own validation (kube-apiserver's
    /// order): each hook sees the object as it will be stored and may only reject.
    async fn admit_validating(
        &self,
        operation: &str,
        def: &ResourceDef,
        sub: &str,
        obj: &Value,
        old: Option<&Arc<Value>>,
        opts: &WriteOptions,
    ) -> ApiResult<()> {
        let hooks = self.hooks();
        if hooks.is_empty() {
            return Ok(());
        }
        let attrs = admission_attributes(operation, def, sub, obj, old, opts);
        for hook in hooks {
            hook.validate(&attrs, obj).await?;
        }
        Ok(())
    }
}

fn admission_attributes(
    operation: &str,
    def: &ResourceDef,
    sub: &str,
    obj: &Value,
    old: Option<&Arc<Value>>,
    opts: &WriteOptions,
) -> crate::AdmissionAttributes {
    crate::AdmissionAttributes {
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
        user: opts.user.clone(),
        options: admission_options(operation, opts),
    }
}

/// What kube-apiserver passes admission as the operation's options: CreateOptions or
/// UpdateOptions (a patch is an update) with the request's dryRun and fieldManager, or the
/// delete's DeleteOptions.
fn admission_options(operation: &str, opts: &WriteOptions) -> Value {
    if operation == "DELETE" {
        let mut options = opts
            .delete_options
            .as_ref()
            .map_or_else(|| json!({}), DeleteOptions::to_json);
        options["apiVersion"] = json!("meta.k8s.io/v1");
        options["kind"] = json!("DeleteOptions");
        return options;
    }
    let kind = if operation == "CREATE" {
        "CreateOptions"
    } else {
        "UpdateOptions"
    };
    let mut options = json!({"apiVersion": "meta.k8s.io/v1", "kind": kind});
    if opts.dry_run {
        options["dryRun"] = json!(["All"]);
    }
    if let Some(manager) = &opts.field_manager {
        options["fieldManager"] = json!(manager);
    }
    options
}

/// Object validation (the registry strategy's `Validate`/`ValidateUpdate`), run between
/// mutating and validating admission as kube-apiserver runs it, so what a mutating
/// webhook adds is validated too. A CRD's status is computed here; its parsed definition
/// is returned.
fn validate_object(
    def: &ResourceDef,
    old: Option<&Value>,
    obj: &mut Value,
    opts: &WriteOptions,
) -> ApiResult<Option<crate::registry::ResourceDef>> {
    crate::validate::object_meta(def, obj)?;
    crate::validate::builtin_spec(def, old, obj)?;
    crate::validate::custom_resource_scale(def, obj)?;
    if let Some(old) = old
        && def.builtin
        && def.group.is_empty()
        && def.plural == "pods"
        && !opts.internal
    {
        crate::validate::pod_update(old, obj)?;
    }
    if def.group == "apiextensions.k8s.io" && def.plural == "customresourcedefinitions" {
        let name = meta::name_of(obj).to_string();
        let d = crds::validate_crd(obj, &name)?;
        let status = crate::registry::crd_status(obj, &d);
        if let Some(map) = obj.as_object_mut() {
            map.insert("status".into(), status);
        }
        return Ok(Some(d));
    }
    Ok(None)
}

/// Validates a custom resource's values against its version's schema, ratcheting on update
/// (`crate::crd_validation`); 422 Invalid with one cause per error.
fn validate_schema(
    def: &ResourceDef,
    version: &str,
    old: Option<&Value>,
    obj: &Value,
) -> ApiResult<()> {
    if def.builtin {
        return Ok(());
    }
    let Some(schema) = def
        .versions
        .iter()
        .find(|v| v.name == version)
        .and_then(|v| v.schema.as_ref())
    else {
        return Ok(());
    };
    let causes = crate::crd_validation::validate(obj, old, schema);
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(
        &def.group,
        &def.kind,
        meta::name_of(obj),
        causes,
    ))
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
