//! patch (JSON, merge, strategic merge) and server-side apply.

use std::sync::Arc;

use serde_json::Value;

use super::{Subresource, WriteOptions, kind_for, ns_key, parse_yaml_or_json, rv_of};
use crate::SimShared;
use crate::error::{ApiError, ApiResult};
use crate::managed;
use crate::meta::{self, metadata, metadata_mut};
use crate::patch::{self, PatchType};
use crate::registry::ResourceDef;

impl SimShared {
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
            // Fields the patch adds that the type does not declare: dropped, and refused
            // or warned about as the request's fieldValidation says.
            super::enforce_fields(
                def,
                version,
                &mut patched,
                Some(&**current),
                opts,
                crate::fieldvalidation::Decoded::Patch,
            )?;
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
    pub(super) async fn apply(
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
        let mut config = parse_yaml_or_json(body)?;
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
        super::enforce_fields(
            def,
            version,
            &mut config,
            None,
            opts,
            crate::fieldvalidation::Decoded::Patch,
        )?;
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
}
