//! create: defaulting, admission, validation and the first write of an object.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{
    WriteOptions, apply_schema, check_type_meta, kind_for, ns_key, set_request_namespace,
    validate_object, validate_schema,
};
use crate::SimShared;
use crate::error::{ApiError, ApiResult};
use crate::managed;
use crate::meta::{self, metadata_mut};
use crate::registry::{GroupResource, ResourceDef};
use crate::store::Commit;

impl SimShared {
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
    pub(super) async fn create_with_managed(
        &self,
        def: &Arc<ResourceDef>,
        version: &str,
        ns: &str,
        body: Value,
        opts: &WriteOptions,
        managed_fields: Option<Value>,
    ) -> ApiResult<Arc<Value>> {
        let mut obj = body;
        super::enforce_fields(
            def,
            version,
            &mut obj,
            None,
            opts,
            crate::fieldvalidation::Decoded::Body,
        )?;
        check_type_meta(def, version, &mut obj)?;
        let ns = ns_key(def, ns);
        let Some(m) = metadata_mut(&mut obj) else {
            return Err(ApiError::bad_request("object must be a JSON object"));
        };
        set_request_namespace(def, m, &ns)?;
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
        crate::cluster::serviceaccounts::admit_pod(self, def, &ns, &mut obj, opts).await?;
        self.admit("CREATE", def, "", &mut obj, None, opts).await?;
        let crd_def = validate_object(def, None, &mut obj, opts)?;
        validate_schema(def, version, None, &obj)?;
        self.admit_validating("CREATE", def, "", &obj, None, opts)
            .await?;
        let obj = self.to_storage(def, obj).await?;
        let gr = def.gr();
        let ns_gr = GroupResource::new("", "namespaces");
        let dry_run = opts.dry_run;
        let mut pending = Some(obj);
        let result = self.store.commit(&gr, &ns, &name, |st, current| {
            if def.namespaced {
                match st.get(&ns_gr, "", &ns) {
                    None => return Err(ApiError::not_found("", "namespaces", &ns)),
                    Some(n) if meta::is_terminating(&n) => {
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
}
